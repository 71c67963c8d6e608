//! `--backend docker|podman`: the same request run as a container through the
//! engine's client, on the image `scripts/test-engines` imports into both engines
//! (run by `scripts/test`). The engines run rootful here: the runs themselves are
//! tested as root; as the unprivileged test user, Docker's refusal (no access to its
//! daemon) must name the fix.

use super::harness::{
    RecordsHome, Runner, Vg, Workspace, each_identity, session_metadata, status_field,
};

const IMAGE: &str = "vectraguard-test/busybox:1";

fn engine_run(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    engine: &str,
    options: &[&str],
    cmd: &[&str],
) -> super::harness::Output {
    let mut vg = Vg::new(runner, ws.path());
    vg.args(["sandbox", "run", "--backend", engine, "--image", IMAGE])
        .args(options)
        .arg("--")
        .args(cmd)
        .records_home(home);
    vg.run()
}

/// Every container the engine knows, by name, to check that none is left.
fn containers(engine: &str) -> String {
    let out = std::process::Command::new(engine)
        .args(["ps", "-a", "--format", "{{.Names}}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn posture_view_network_records_and_exit_codes_on_each_engine() {
    let runner = Runner::Root;
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = engine_run(
            runner,
            &ws,
            &home,
            engine,
            &[],
            &[
                "sh",
                "-c",
                "cat /proc/self/status; echo uid=$(id -u); \
                 echo x > /tmp/x && echo tmp=ok; (echo y > /etc/y) 2>/dev/null || echo root=read-only; \
                 echo ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,); \
                 echo w > out.txt && echo ws=ok; printf 'err\\377' >&2; exit 3",
            ],
        );
        out.assert_code(3);
        for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            assert_eq!(
                status_field(&out.stdout, cap),
                Some("0000000000000000"),
                "{engine} {cap}\n{out}"
            );
        }
        assert_eq!(
            status_field(&out.stdout, "NoNewPrivs"),
            Some("1"),
            "{engine}\n{out}"
        );
        assert_eq!(
            status_field(&out.stdout, "Seccomp"),
            Some("2"),
            "{engine}\n{out}"
        );
        assert_eq!(
            out.field("uid"),
            runner.sandbox_user().uid.to_string(),
            "{engine}\n{out}"
        );
        assert_eq!(out.field("tmp"), "ok", "{engine}\n{out}");
        assert_eq!(out.field("root"), "read-only", "{engine}\n{out}");
        assert_eq!(out.field("ifaces"), "lo,", "{engine}\n{out}");
        assert_eq!(out.field("ws"), "ok", "{engine}\n{out}");
        assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "w\n");
        let dir = home.only_session();
        assert_eq!(
            std::fs::read(dir.join("stderr.log")).unwrap(),
            b"err\xff",
            "{engine}"
        );
        let meta = session_metadata(&dir);
        assert_eq!(meta["layers"]["backend"], engine, "{meta}");
        assert_eq!(meta["layers"]["exec_records"], "none", "{meta}");
        assert_eq!(meta["exit_code"], 3, "{meta}");
        let verify = Vg::new(runner, ws.path())
            .args(["logs", "verify", "last"])
            .records_home(&home)
            .run();
        verify.assert_success().assert_stdout_contains("intact");
        let left = containers(engine);
        assert!(
            !left.contains("vectraguard-"),
            "{engine} containers left: {left}"
        );
    }
}

#[test]
fn the_seccomp_rules_memory_limit_and_time_out_hold_in_the_container() {
    let runner = Runner::Root;
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // Our rules refuse unshare (and every namespace flag) though the engine's
        // default profile would let an unprivileged user namespace be made.
        let out = engine_run(runner, &ws, &home, engine, &[], &["unshare", "-U", "true"]);
        assert_ne!(out.code(), Some(0), "{engine}: unshare ran\n{out}");
        // A memory hog: the engine's cgroup kills it.
        let hog = engine_run(
            runner,
            &ws,
            &home,
            engine,
            &["--memory", "64m"],
            &[
                "sh",
                "-c",
                "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived",
            ],
        );
        assert!(
            !hog.stdout.contains("survived"),
            "{engine}: the cap did not hold\n{hog}"
        );
        assert_ne!(hog.code(), Some(0), "{engine}\n{hog}");
        let started = std::time::Instant::now();
        let slow = engine_run(
            runner,
            &ws,
            &home,
            engine,
            &["--timeout", "2s"],
            &["sleep", "60"],
        );
        slow.assert_code(124);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{engine}\n{slow}"
        );
        let left = containers(engine);
        assert!(
            !left.contains("vectraguard-"),
            "{engine} containers left: {left}"
        );
    }
}

#[test]
fn refusals_name_the_backend_and_the_fix() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let no_image = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "--backend", "docker", "--", "true"])
            .records_home(&home)
            .run();
        no_image.assert_code(125);
        no_image.assert_stderr_contains("--image NAME");
        for (options, says) in [
            (&["--network", "allow"][..], "the mediated network"),
            (&["-t"][..], "a terminal"),
            (&["--ask", "high"][..], "--ask never"),
        ] {
            let out = engine_run(runner, &ws, &home, "podman", options, &["true"]);
            out.assert_code(125);
            out.assert_stderr_contains("--backend podman");
            out.assert_stderr_contains(says);
        }
        if runner == Runner::Unprivileged {
            // Docker's daemon is root's here, and the test user is not in its group.
            let denied = engine_run(runner, &ws, &home, "docker", &[], &["true"]);
            denied.assert_code(125);
            denied.assert_stderr_contains("docker");
        }
        let missing = Vg::new(runner, ws.path())
            .args([
                "sandbox",
                "run",
                "--backend",
                "podman",
                "--image",
                "vectraguard-test/absent:1",
                "--",
                "true",
            ])
            .records_home(&home)
            .run();
        missing.assert_code(125);
        missing.assert_stderr_contains("vectraguard-test/absent:1");
    });
}
