#!/usr/bin/env python3
"""Exec recording in an image run: bench/records-interleaved.py's 2,000 short commands,
run inside an `--image` of the host's own dynamic `/usr/bin/true` (with its loader and
libraries) and busybox's shell, recorded by root's default (since session 25 the BPF
recorder, which tells the image's loader by identity), recorded with seccomp
notification (VECTRAGUARD_EXEC_TRACE=seccomp, the default before, and every
unprivileged user's) and `--no-record`, in turn and shuffled each round.

Usage: bench/records-image.py [ROUNDS]   (as root; needs busybox-static; VG_BIN: the
build measured, by default this repository's target/release/vectraguard)
Prints each command's median and the overheads of recording against `--no-record`
(median of the medians and median of the per-round ratios)."""
import os, random, shutil, statistics, subprocess, sys, tarfile, tempfile, time

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
vg = os.environ.get("VG_BIN", os.path.join(root, "target/release/vectraguard"))
scratch = tempfile.mkdtemp(prefix="vg-bench-image.")
home = scratch + ".home"
os.environ["VECTRAGUARD_HOME"] = home
ws = os.path.join(scratch, "ws")
os.mkdir(ws)
os.chmod(scratch, 0o755)

# The image: /usr/bin/true as the host has it, what its loader maps, and a shell.
rootfs = os.path.join(scratch, "rootfs")
files = ["/usr/bin/true", "/bin/busybox"]
for line in subprocess.run(["ldd", "/usr/bin/true"], capture_output=True, text=True).stdout.splitlines():
    files += [w for w in line.split() if w.startswith("/")]
for f in files:
    dst = rootfs + f
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy(os.path.realpath(f), dst)
os.symlink("busybox", os.path.join(rootfs, "bin/sh"))
with open(os.path.join(rootfs, "many.sh"), "w") as f:
    f.write("i=0\nwhile [ $i -lt 2000 ]; do /usr/bin/true; i=$((i+1)); done\n")
tar = os.path.join(scratch, "image.tar")
with tarfile.open(tar, "w") as t:
    t.add(rootfs, arcname=".")
subprocess.run([vg, "image", "import", tar, "--tag", "local/bench-true"], check=True,
               stdout=subprocess.DEVNULL)

run = lambda *flags: [vg, "sandbox", "run", "--image", "local/bench-true", *flags, "--",
                      "/bin/sh", "/many.sh"]
cmds = {
    "recorded (default)": (run(), None),
    "recorded, seccomp notification": (run(), "seccomp"),
    "--no-record": (run("--no-record"), None),
}
times = {k: [] for k in cmds}
try:
    for r in range(rounds + 1):  # one round of warm-up
        order = list(cmds)
        random.shuffle(order)
        for k in order:
            argv, trace = cmds[k]
            env = dict(os.environ)
            env.pop("VECTRAGUARD_EXEC_TRACE", None)
            if trace:
                env["VECTRAGUARD_EXEC_TRACE"] = trace
            t0 = time.perf_counter()
            subprocess.run(argv, cwd=ws, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
            if r >= 1:
                times[k].append(time.perf_counter() - t0)
        # Each round's records go (the image stays), so the folder does not grow.
        shutil.rmtree(os.path.join(home, "logs"), ignore_errors=True)
finally:
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
plain = times["--no-record"]
print(f"2,000 execs of a dynamic /usr/bin/true in an --image run, median of {rounds} rounds")
print(f"  --no-record {statistics.median(plain):6.3f} s")
for k in ("recorded (default)", "recorded, seccomp notification"):
    rec = times[k]
    paired = statistics.median(a / b for a, b in zip(rec, plain))
    print(f"  {k:31s} {statistics.median(rec):6.3f} s: overhead "
          f"{100 * (statistics.median(rec) / statistics.median(plain) - 1):+5.1f} % "
          f"(per round {100 * (paired - 1):+5.1f} %)")
