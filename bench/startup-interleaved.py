#!/usr/bin/env python3
"""Startup, interleaved: the commands of bench/startup.sh run in turn, shuffled each
round, so that load changing during a sitting lands on every command alike (on a shared
machine, hyperfine's 40 runs in a row of one command, then the next, do not compare).

Usage: VG_BASELINE=/path/to/older/vectraguard [VG_BIN=/path/to/vectraguard] [VG_SESSIONS=N]
bench/startup-interleaved.py [ROUNDS] (VG_BIN: the build measured, by default this
repository's target/release/vectraguard)
Run as root (the workspace is given to nobody, as in bench/startup.sh). Prints medians
and the ratios to bubblewrap and to the baseline; `--memory unlimited` rows show what
the default memory cap's cgroup costs. VG_SESSIONS=N starts with N (empty) session
folders in the records folder, as a user who keeps their sessions has: what a start
reads of that folder shows there."""
import os, random, shutil, statistics, subprocess, sys, tempfile, time

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 50
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
new = os.environ.get("VG_BIN", os.path.join(root, "target/release/vectraguard"))
base = os.environ.get("VG_BASELINE")
ws = tempfile.mkdtemp(prefix="vg-bench.")
os.environ["VECTRAGUARD_HOME"] = ws + ".home"
if os.getuid() == 0:
    os.chown(ws, 65534, 65534)
prefill = int(os.environ.get("VG_SESSIONS", "0"))
if prefill:
    logs = os.path.join(ws + ".home", "logs")
    os.makedirs(logs, mode=0o700)
    for i in range(prefill):
        os.mkdir(os.path.join(logs, "session-20250101T000000Z-%06x" % i), 0o700)
os.chmod(ws, 0o755)
run = lambda vg, *flags: [vg, "sandbox", "run", *flags, "--", "/bin/true"]
cmds = {
    "recorded": run(new),
    "no-record": run(new, "--no-record"),
    "no-record, no cgroup": run(new, "--no-record", "--memory", "unlimited"),
    "bwrap": "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --new-session /bin/true".split(),
}
# Each build records with its default (as root since session 23, the BPF exec
# recorder); as root, this build's seccomp notification too (exec_trace = "seccomp"),
# whose row runs with VECTRAGUARD_EXEC_TRACE=seccomp.
if os.getuid() == 0:
    cmds["recorded, seccomp notification"] = run(new)
os.environ.pop("VECTRAGUARD_EXEC_TRACE", None)
if base:
    cmds["baseline recorded"] = run(base)
    cmds["baseline no-record"] = run(base, "--no-record")
    cmds["baseline no-record, no cgroup"] = run(base, "--no-record", "--memory", "unlimited")
times = {k: [] for k in cmds}
try:
    for r in range(rounds + 3):  # three rounds of warm-up
        order = list(cmds)
        random.shuffle(order)
        for k in order:
            t0 = time.perf_counter()
            env = dict(os.environ)
            if "seccomp" in k:
                env["VECTRAGUARD_EXEC_TRACE"] = "seccomp"
            subprocess.run(cmds[k], cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            if r >= 3:
                times[k].append((time.perf_counter() - t0) * 1e3)
finally:
    shutil.rmtree(ws, ignore_errors=True)
    shutil.rmtree(ws + ".home", ignore_errors=True)
m = {k: statistics.median(v) for k, v in times.items()}
print(f"startup, interleaved, median of {rounds} rounds" + (f", {prefill} sessions kept" if prefill else ""))
for k in cmds:
    print(f"  {k:30s} {m[k]:7.2f} ms  ({m[k] / m['bwrap']:4.2f}x bwrap)")
if base:
    for k in ("recorded", "no-record", "no-record, no cgroup"):
        print(f"  this build / baseline, {k:20s} {m[k] / m['baseline ' + k]:5.2f}x")
