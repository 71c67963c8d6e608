//! `sandbox run --image` and `sandbox shell --image`: images pulled from a registry on
//! loopback or imported, run with their Env, WorkingDir, Cmd and User under the flags,
//! an ephemeral writable layer, the image's root user mapped to an unprivileged host
//! user, and the Foundation's attack checks repeated inside an image.

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::harness::{
    PY_PRELUDE, RecordsHome, Runner, TempDir, Vg, Workspace, build_c, each_identity,
    session_metadata,
};
use super::images::{
    IMAGE_TOOLS, Layout, Registry, busybox_layer, default_config, host_arch, image, inspect,
};

/// Returns from the test when a tool is missing and that is allowed; fails it otherwise.
macro_rules! require_tools {
    () => {
        if !super::harness::require_tools(IMAGE_TOOLS) {
            return;
        }
    };
}

/// Imports a busybox root (see `busybox_layer`) as `name` into `home`'s store.
fn import_busybox(runner: Runner, home: &RecordsHome, work: &TempDir, name: &str, marker: &str) {
    let tar = work.write(format!("{marker}.tar"), busybox_layer(marker));
    image(
        runner,
        home,
        &["import", &tar.display().to_string(), "--tag", name],
    )
    .assert_success();
}

fn run_image(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    options: &[&str],
    cmd: &[&str],
) -> super::harness::Output {
    Vg::sandbox(runner, ws, options, cmd)
        .records_home(home)
        .run()
}

#[test]
fn a_pulled_image_runs_with_its_env_workdir_cmd_and_user_and_flags_win() {
    require_tools!();
    let registry = Registry::start();
    let work = TempDir::new("layout");
    let mut layout = Layout::new(work.join("oci"));
    let desc = layout.image(host_arch(), "motd of the image", default_config());
    let digest = desc["digest"].as_str().unwrap().to_owned();
    layout.tag(desc, "1.0");
    registry.push(&layout.dir, "1.0", "vg/run", "oci", false);
    let name = format!("{}/vg/run:1.0", registry.host());
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // Not in the store: `--pull never` refuses, the default pulls it.
        let out = run_image(
            runner,
            &ws,
            &home,
            &["--image", &name, "--pull", "never"],
            &[],
        );
        out.assert_code(125)
            .assert_stderr_contains("not in the image store")
            .assert_stderr_contains("vectraguard image pull");
        assert!(home.sessions().is_empty(), "a refused run left a record");

        // No command: the image's Cmd, in its WorkingDir, as its User.
        let out = run_image(runner, &ws, &home, &["--image", &name], &[]);
        out.assert_success().assert_stderr_contains("pulled");
        assert_eq!(out.stdout, "motd of the image");
        let session = home.only_session();
        let meta = session_metadata(&session);
        assert_eq!(meta["image"], name.as_str());
        assert_eq!(meta["image_digest"], digest.as_str());
        assert_eq!(
            meta["command"],
            serde_json::json!(["/bin/cat", "/etc/motd"])
        );
        let id = session.file_name().unwrap().to_str().unwrap().to_owned();
        let shown = Vg::new(runner, ws.path())
            .records_home(&home)
            .args(["logs", "show", &id])
            .run();
        shown.assert_stdout_contains(&format!("{name} ({digest})"));
        fs::remove_dir_all(&session).unwrap();

        let probe = "echo uid=$(busybox id -u) gid=$(busybox id -g); echo pwd=$(pwd); echo greeting=$GREETING; echo home=$HOME; echo path=$PATH";
        let out = run_image(
            runner,
            &ws,
            &home,
            &["--image", &name],
            &["sh", "-c", probe],
        );
        out.assert_success();
        assert_eq!(out.field("uid"), "65534 gid=65534", "{out}");
        assert_eq!(out.field("pwd"), "/srv");
        assert_eq!(out.field("greeting"), "from-the-image");
        assert_eq!(out.field("home"), "/");
        assert_eq!(out.field("path"), "/bin");

        // Flags win over the image: --env, --workdir, --entrypoint.
        let out = run_image(
            runner,
            &ws,
            &home,
            &[
                "--image",
                &name,
                "--env",
                "GREETING=from-a-flag",
                "-w",
                "/tmp",
                "--pull",
                "missing",
            ],
            &["sh", "-c", probe],
        );
        out.assert_success();
        assert_eq!(out.field("greeting"), "from-a-flag");
        assert_eq!(out.field("pwd"), "/tmp");
        let out = run_image(
            runner,
            &ws,
            &home,
            &["--image", &name, "--entrypoint", "/bin/echo"],
            &["from", "entrypoint"],
        );
        out.assert_success();
        assert_eq!(out.stdout, "from entrypoint\n");
        // --entrypoint "" clears the image's Cmd too: nothing left to run.
        let out = run_image(
            runner,
            &ws,
            &home,
            &["--image", &name, "--entrypoint", ""],
            &[],
        );
        out.assert_code(125)
            .assert_stderr_contains("no Entrypoint or Cmd");
        let out = run_image(runner, &ws, &home, &["--pull", "always"], &["true"]);
        out.assert_code(125)
            .assert_stderr_contains("--pull only applies with --image");
    });
}

#[test]
fn the_seed_example_runs_as_written_and_shells_work() {
    require_tools!();
    let work = TempDir::new("seed");
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        import_busybox(runner, &home, &work, "ubuntu:22.04", "seed");
        ws.write_mode(
            "script.sh",
            "#!/bin/sh\necho \"node_env=$NODE_ENV pwd=$(pwd) motd=$(cat /etc/motd)\"\nbusybox id -u > out.txt\n",
            0o755,
        );
        let here = ws.path().display().to_string();
        let out = Vg::new(runner, ws.path())
            .records_home(&home)
            .args([
                "sandbox",
                "run",
                "--image",
                "ubuntu:22.04",
                "--mount",
                &format!("{here}:/workspace"),
                "--env",
                "NODE_ENV=production",
                "script.sh",
            ])
            .run();
        out.assert_success();
        assert_eq!(
            out.stdout, "node_env=production pwd=/workspace motd=seed\n",
            "{out}"
        );
        // Root inside the image is the unprivileged sandbox user on the host.
        let written = ws.join("out.txt");
        assert_eq!(fs::read_to_string(&written).unwrap(), "0\n");
        let owner = fs::metadata(&written).unwrap().uid();
        assert_eq!(owner, runner.sandbox_user().uid);
        assert_ne!(owner, 0);

        let out = Vg::new(runner, ws.path())
            .records_home(&home)
            .args(["sandbox", "shell", "-T", "--image", "ubuntu:22.04"])
            .stdin("echo shell=$0; cat /etc/hostname\nexit 3\n")
            .run();
        out.assert_code(3);
        assert_eq!(out.field("shell"), "/bin/sh");
        assert!(out.stdout.contains("vectraguard"), "{out}");
    });
}

#[test]
fn the_writable_layer_is_discarded_and_the_image_is_never_written() {
    require_tools!();
    let work = TempDir::new("layer");
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        import_busybox(runner, &home, &work, "local/layer", "original motd");
        let out = run_image(
            runner,
            &ws,
            &home,
            &["--image", "local/layer", "--name", "layered"],
            &[
                "sh",
                "-c",
                "echo changed > /etc/motd && echo new > /newfile && rm /bin/ls && cat /etc/motd /newfile && cat /etc/hosts /etc/hostname /etc/resolv.conf",
            ],
        );
        out.assert_success();
        assert!(out.stdout.starts_with("changed\nnew\n"), "{out}");
        assert!(out.stdout.contains("127.0.1.1\tlayered"), "{out}");
        assert!(out.stdout.contains("layered\n"), "{out}");
        assert!(out.stdout.contains("--network none"), "{out}");
        // Root records an image run with the BPF recorder too (it tells the image's
        // own loader by identity); an unprivileged user's run, seccomp notification.
        let meta = session_metadata(&home.only_session());
        let recorder = match runner {
            Runner::Root => "bpf",
            Runner::Unprivileged => "seccomp-notify",
        };
        assert_eq!(meta["layers"]["exec_trace"], recorder, "{meta}");

        let out = run_image(
            runner,
            &ws,
            &home,
            &["--image", "local/layer"],
            &["sh", "-c", "cat /etc/motd; echo; ls /newfile; ls /bin/ls"],
        );
        assert_eq!(out.lines().first().copied(), Some("original motd"), "{out}");
        assert!(
            out.stderr.contains("newfile"),
            "the last session's file survived\n{out}"
        );
        assert!(out.stdout.contains("/bin/ls"), "{out}");

        let rootfs = PathBuf::from(
            inspect(runner, &home, "local/layer")["rootfs"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        assert_eq!(
            fs::read_to_string(rootfs.join("etc/motd")).unwrap(),
            "original motd"
        );
        assert!(!rootfs.join("newfile").exists());
        // --disk bounds the writable layer.
        let out = run_image(
            runner,
            &ws,
            &home,
            &["--image", "local/layer", "--disk", "2m"],
            &[
                "sh",
                "-c",
                "cat /bin/busybox /bin/busybox /bin/busybox > /big; echo rc=$?",
            ],
        );
        assert_ne!(out.field("rc"), "0", "{out}");
    });
}

/// A Python image made from the host's own interpreter and the libraries it loads:
/// the Foundation's attack checks are Python, and no image can be downloaded here.
fn python_image_tar() -> &'static Path {
    static TAR: OnceLock<PathBuf> = OnceLock::new();
    TAR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("vg-e2e-pyimage-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let tar = dir.join("python.tar");
        let mut libs: Vec<String> = Vec::new();
        let mut objects = vec!["/usr/bin/python3.11".to_owned()];
        for entry in fs::read_dir("/usr/lib/python3.11/lib-dynload").unwrap() {
            objects.push(entry.unwrap().path().display().to_string());
        }
        for object in &objects {
            let out = Command::new("ldd").arg(object).output().unwrap();
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let path = line.split_whitespace().find(|w| w.starts_with('/'));
                if let Some(p) = path
                    && !libs.iter().any(|l| l == p)
                {
                    libs.push(p.to_owned());
                }
            }
        }
        let etc = dir.join("etc");
        fs::create_dir_all(&etc).unwrap();
        fs::write(etc.join("passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        fs::write(etc.join("group"), "root:x:0:\n").unwrap();
        let mut cmd = Command::new("tar");
        cmd.arg("-cf")
            .arg(&tar)
            .args([
                "--exclude=test",
                "--exclude=__pycache__",
                "--exclude=idlelib",
                "--exclude=tkinter",
            ])
            .arg("--dereference")
            .args(["-C", "/", "usr/bin/python3.11", "usr/lib/python3.11"])
            .args(libs.iter().map(|l| l.trim_start_matches('/')))
            .args(["-C", dir.to_str().unwrap(), "etc"]);
        assert!(cmd.status().unwrap().success(), "{cmd:?}");
        let mut perms = fs::metadata(&dir).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        fs::set_permissions(&dir, perms).unwrap();
        tar
    })
}

/// ATTACK (records): an image's root is a writable layer, so a program there can
/// replace the system's loader in place; every dynamic program started after that
/// runs it first, and its line names it (`interp=`), where before none did (session
/// 21 red team: the record named only the program). As root and unprivileged: the
/// BPF recorder (root's) tells the image's own loader by the identity of the file
/// the kernel mapped, and names the replacement by its path in the writable layer,
/// which is outside the sandbox's root (`(outside the root)/lib64/…`).
#[test]
fn a_system_loader_replaced_inside_an_image_is_named_from_then_on() {
    require_tools!();
    let script = r#"
import os, shutil, subprocess
subprocess.run(["/usr/bin/python3.11", "-c", "print(1)"], check=True)
loader = "/lib64/ld-linux-x86-64.so.2"
shutil.copy(loader, loader + ".new")
os.rename(loader + ".new", loader)
subprocess.run(["/usr/bin/python3.11", "-c", "print(2)"], check=True)
"#;
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let tar = python_image_tar().display().to_string();
        image(runner, &home, &["import", &tar, "--tag", "local/python"]).assert_success();
        run_image(
            runner,
            &ws,
            &home,
            &["--image", "local/python"],
            &["/usr/bin/python3.11", "-c", script],
        )
        .assert_success();
        let log = super::exec_records::commands(&home.only_session());
        let line = |argv: &str| {
            let found: Vec<&str> = log.lines().filter(|l| l.ends_with(argv)).collect();
            assert_eq!(found.len(), 1, "[{runner}] one {argv:?} in\n{log}");
            found[0].to_owned()
        };
        assert!(!line("-c 'print(1)'").contains(" interp="), "{log}");
        let named = match runner {
            Runner::Root => " interp='(outside the root)/lib64/ld-linux-x86-64.so.2' ",
            Runner::Unprivileged => " interp=/lib64/ld-linux-x86-64.so.2 ",
        };
        assert!(line("-c 'print(2)'").contains(named), "[{runner}] {log}");
    });
}

/// ATTACK (records, session-25 red team): on an image's overlay, files are mapped
/// as the files beneath them, and the BPF recorder took the file mapped at the
/// program's code for the program's own; a loader linked at the program's address
/// is mapped over that code, passed for the program and ran unnamed. Its identity
/// is now compared with the file the program's path names in the image. Seccomp
/// notification (unprivileged) names it from `PT_INTERP`.
#[test]
fn a_loader_mapped_over_the_program_s_code_in_an_image_is_named() {
    require_tools!();
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // A payload loader, and a program naming it, both linked at 0x400000: the
        // kernel maps the loader over the program's own code.
        let at = ["-no-pie", "-fno-pic", "-Wl,-Ttext-segment=0x400000"];
        let loader = super::exec_bpf::FIXED_ADDRESS_LOADER;
        build_c(
            loader,
            &ws.join("evil-ld"),
            &[&at[..], &["-nostdlib", "-static"]].concat(),
        );
        let naming = [
            "-nostartfiles",
            "-Wl,--dynamic-linker=/root/evil-ld",
            "-Wl,--no-as-needed",
            "-lc",
        ];
        build_c(loader, &ws.join("prog"), &[&at[..], &naming].concat());
        let tar = python_image_tar().display().to_string();
        image(runner, &home, &["import", &tar, "--tag", "local/python"]).assert_success();
        let script = r#"
import os, shutil, subprocess
os.makedirs("/root", exist_ok=True)
for name in ("evil-ld", "prog"):
    shutil.copy(name, "/root/" + name)
    os.chmod("/root/" + name, 0o755)
subprocess.run(["/root/prog"], check=True)
"#;
        let out = run_image(
            runner,
            &ws,
            &home,
            &["--image", "local/python"],
            &["/usr/bin/python3.11", "-c", script],
        );
        out.assert_success();
        assert!(out.stdout.contains("payload ran"), "{out}");
        let log = super::exec_records::commands(&home.only_session());
        let line: Vec<&str> = log
            .lines()
            .filter(|l| l.ends_with("-- /root/prog"))
            .collect();
        assert_eq!(line.len(), 1, "[{runner}] {log}");
        assert!(
            line[0].contains(" interp=") && line[0].contains("/root/evil-ld"),
            "[{runner}] the payload loader is unnamed: {log}"
        );
    });
}

#[test]
fn the_foundation_attacks_fail_inside_an_image_too() {
    require_tools!();
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        image(
            runner,
            &home,
            &[
                "import",
                &python_image_tar().display().to_string(),
                "--tag",
                "local/python",
            ],
        )
        .assert_success();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let store = home.join("images").display().to_string();
        let script = format!(
            r#"{PY_PRELUDE}
import stat
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
report("uid", os.getuid())
report("cap_eff", st["CapEff"].strip())
report("cap_bnd", st["CapBnd"].strip())
report("nnp", st["NoNewPrivs"].strip())
report("seccomp", st["Seccomp"].strip())
report("mount", sc(165, b"none", b"/tmp", b"tmpfs", 0, 0))
report("unshare_user", sc(272, 0x10000000))
report("ptrace_init", sc(101, 16, 1, 0, 0))
report("init_environ", attempt(lambda: open("/proc/1/environ", "rb").read()))
report("store", attempt(lambda: os.listdir({store:?})))
report("host_etc_shadow", attempt(lambda: open("/etc/shadow").read()))
open("/tmp/f", "w").close()
report("chown_other", attempt(lambda: os.chown("/tmp/f", 4242, 4242)))
report("mknod", attempt(lambda: os.mknod("/tmp/null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))))
report("raw_socket", attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)))
report("sysrq", attempt(lambda: open("/proc/sysrq-trigger", "w").write("h")))
report("kernel_knob", attempt(lambda: open("/proc/sys/kernel/hostname", "w").write("x")))
def host_loopback():
    s = socket.socket(); s.settimeout(2); s.connect(("127.0.0.1", {port}))
report("host_loopback", attempt(host_loopback))
report("processes", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
report("stdlib_rewritable", attempt(lambda: open("/usr/lib/python3.11/os.py", "ab").write(b"\n")))
"#
        );
        let out = run_image(
            runner,
            &ws,
            &home,
            &["--image", "local/python"],
            &["/usr/bin/python3.11", "-c", &script],
        );
        out.assert_success();
        assert_eq!(out.field("uid"), "0", "root inside the image\n{out}");
        for (key, want) in [
            ("cap_eff", "0000000000000000"),
            ("cap_bnd", "0000000000000000"),
            ("nnp", "1"),
            ("seccomp", "2"),
        ] {
            assert_eq!(out.field(key), want, "{key}\n{out}");
        }
        for key in [
            "mount",
            "unshare_user",
            "ptrace_init",
            "init_environ",
            "store",
            "chown_other",
            "mknod",
            "raw_socket",
            "sysrq",
            "kernel_knob",
            "host_loopback",
        ] {
            assert_ne!(
                out.field(key),
                "OK",
                "{key} succeeded inside the image\n{out}"
            );
        }
        assert_eq!(out.field("host_etc_shadow"), "ENOENT", "{out}");
        // Only the sandbox's own processes: init and the command.
        assert_eq!(out.field("processes"), "[1, 2]", "{out}");
        // The image may be changed in its writable layer, never on disk.
        assert_eq!(out.field("stdlib_rewritable"), "OK", "{out}");
        let rootfs = PathBuf::from(
            inspect(runner, &home, "local/python")["rootfs"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        assert_eq!(
            fs::metadata(rootfs.join("usr/bin/python3.11"))
                .unwrap()
                .len(),
            fs::metadata("/usr/bin/python3.11").unwrap().len()
        );
        listener.set_nonblocking(true).unwrap();
        assert!(listener.accept().is_err(), "the host listener was reached");
    });
}

#[test]
fn network_modes_mounts_and_limits_apply_inside_an_image() {
    require_tools!();
    let work = TempDir::new("mixed");
    let web = super::mediated_network::HttpServer::start(b"hello-in-image".to_vec());
    let port = web.port;
    let shared = TempDir::new("ro-share");
    shared.write("note.txt", "read only\n");
    let mut perms = fs::metadata(shared.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs::set_permissions(shared.path(), perms).unwrap();
    let shared_path = shared.path().display().to_string();
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        import_busybox(runner, &home, &work, "local/net", "net");
        let url = format!("http://web.test:{port}/");
        let script = format!(
            "echo got=$(busybox wget -q -O- {url}); cat {shared_path}/note.txt; echo x > {shared_path}/new || echo ro-refused; busybox wget -q -T 3 -O- http://1.1.1.1/ || echo denied"
        );
        let out = run_image(
            runner,
            &ws,
            &home,
            &[
                "--image",
                "local/net",
                "--add-host",
                "web.test:127.0.0.1",
                "--allow",
                &format!("web.test:{port}"),
                "--read-only",
                &shared_path,
                "--pids",
                "64",
            ],
            &["sh", "-c", &script],
        );
        out.assert_success();
        assert_eq!(out.field("got"), "hello-in-image", "{out}");
        assert!(out.stdout.contains("read only\nro-refused\n"), "{out}");
        assert!(out.stdout.contains("denied"), "{out}");
        let meta = session_metadata(&home.only_session());
        assert_eq!(meta["network"]["mode"], "allow");
        assert_eq!(meta["limits"]["pids"], 64);
        // --network none (the default) inside an image: nothing reachable.
        fs::remove_dir_all(home.only_session()).unwrap();
        let out = run_image(
            runner,
            &ws,
            &home,
            &["--image", "local/net"],
            &[
                "sh",
                "-c",
                &format!("busybox wget -q -T 2 -O- http://127.0.0.1:{port}/ || echo unreachable"),
            ],
        );
        assert!(out.stdout.contains("unreachable"), "{out}");
    });
}

/// HTTPS inspection in an image: the image's own trust bundle (here Alpine's
/// `/etc/ssl/cert.pem`, reached through a symlink as there) is shown with the session
/// CA appended and named by the CA variables; an image with no bundle at all is
/// refused before it runs, naming the fix. Plain HTTP rules are decided inside it too.
#[test]
fn an_images_own_trust_bundle_carries_the_session_ca() {
    require_tools!();
    let work = TempDir::new("ca-image");
    let web = super::mediated_network::HttpServer::start(b"inspected-in-image".to_vec());
    let port = web.port;
    // busybox plus etc/ssl/certs/ca-certificates.crt and the cert.pem link to it.
    let mut layer = tar::Builder::new(Vec::new());
    let base = super::images::busybox_layer("ca");
    for entry in tar::Archive::new(&base[..]).entries().unwrap() {
        let mut entry = entry.unwrap();
        let header = entry.header().clone();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
        layer.append(&header, &data[..]).unwrap();
    }
    for d in ["etc/ssl", "etc/ssl/certs"] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_path(d).unwrap();
        h.set_mode(0o755);
        h.set_size(0);
        h.set_cksum();
        layer.append(&h, &b""[..]).unwrap();
    }
    let roots = b"# IMAGE-ROOTS\n";
    let mut h = tar::Header::new_gnu();
    h.set_path("etc/ssl/certs/ca-certificates.crt").unwrap();
    h.set_mode(0o644);
    h.set_size(roots.len() as u64);
    h.set_cksum();
    layer.append(&h, &roots[..]).unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_path("etc/ssl/cert.pem").unwrap();
    h.set_link_name("/etc/ssl/certs/ca-certificates.crt")
        .unwrap();
    h.set_mode(0o777);
    h.set_size(0);
    h.set_cksum();
    layer.append(&h, &b""[..]).unwrap();
    let tar = work.write("ca.tar", layer.into_inner().unwrap());
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        image(
            runner,
            &home,
            &["import", &tar.display().to_string(), "--tag", "local/ca"],
        )
        .assert_success();
        let rules = [
            "--add-host",
            "web.test:127.0.0.1",
            "--allow",
            &format!("GET http://web.test:{port}/ok/**"),
        ];
        let script = format!(
            "echo bundle=$SSL_CERT_FILE; busybox head -1 /etc/ssl/cert.pem; busybox grep -c 'BEGIN CERTIFICATE' /etc/ssl/cert.pem; echo got=$(busybox wget -q -O- http://web.test:{port}/ok/x); busybox wget -q -O- http://web.test:{port}/other || echo refused"
        );
        let mut options = vec!["--image", "local/ca"];
        options.extend(rules);
        let out = run_image(runner, &ws, &home, &options, &["sh", "-c", &script]);
        out.assert_success();
        assert_eq!(
            out.field("bundle"),
            "/etc/ssl/certs/ca-certificates.crt",
            "{out}"
        );
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines[1], "# IMAGE-ROOTS", "{out}");
        assert_eq!(lines[2], "1", "the session CA appended: {out}");
        assert_eq!(out.field("got"), "inspected-in-image", "{out}");
        assert!(out.stdout.contains("refused"), "{out}");
        // An image without any bundle: refused before it runs.
        import_busybox(runner, &home, &work, "local/nobundle", "nb");
        let mut options = vec!["--image", "local/nobundle"];
        options.extend(rules);
        run_image(runner, &ws, &home, &options, &["true"])
            .assert_code(125)
            .assert_stderr_contains("install the ca-certificates package");
    });
}
