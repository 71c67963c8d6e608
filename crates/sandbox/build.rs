//! Compiles the exec recorder's BPF program (`src/exectrace/exec.bpf.c`) with
//! clang, when it is installed. Without clang (or libbpf's headers) the build
//! still succeeds: the binary then records execs through seccomp notification
//! only, and `doctor` says why (`vg_sandbox::exectrace::BUILT`).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "src/exectrace/exec.bpf.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=VG_CLANG");
    println!("cargo:rustc-check-cfg=cfg(vg_exec_bpf)");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("exec.bpf.o");
    let why_not =
        PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("exec.bpf.why");
    let clang = std::env::var("VG_CLANG").unwrap_or_else(|_| "clang".into());
    // The multiarch include folder holds <asm/types.h>, which <linux/bpf.h> needs.
    let multiarch = Command::new("gcc")
        .arg("-dumpmachine")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| format!("-I/usr/include/{}", s.trim()));
    let mut cmd = Command::new(&clang);
    cmd.args([
        "-target", "bpf", "-O2", "-g", "-Wall", "-Werror", "-c", src, "-o",
    ])
    .arg(&out);
    if let Some(dir) = multiarch {
        cmd.arg(dir);
    }
    let reason = match cmd.output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "{clang} could not compile the exec recorder: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or("")
        )),
        Err(e) => Some(format!("{clang} is not installed ({e})")),
    };
    match reason {
        None => {
            println!("cargo:rustc-cfg=vg_exec_bpf");
            // The name of the build's folder of pins, hashed here rather than at
            // every start (82 KB byte by byte: some 80 µs of each sandbox's start).
            let object = std::fs::read(&out).unwrap_or_default();
            let hash = object.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
            });
            println!("cargo:rustc-env=VG_EXEC_BPF_VERSION={hash:016x}");
            let _ = std::fs::write(&why_not, "");
        }
        Some(reason) => {
            // Built again once packages are installed (scripts/test installs clang).
            println!("cargo:rerun-if-changed=/usr/bin");
            println!("cargo:rerun-if-changed=/usr/include/bpf");
            println!(
                "cargo:warning=exec recorder not built: {reason}; execs are recorded through seccomp only (apt-get install clang libbpf-dev)"
            );
            let _ = std::fs::write(&why_not, reason);
        }
    }
}
