#!/usr/bin/env python3
"""Exec recording, interleaved: bench/records.sh's part (a), a script of 2,000 short
commands, recorded and `--no-record`, for this build and a baseline, run in turn and
shuffled each round, so that load changing during a sitting lands on every command alike
(hyperfine runs one command's rounds in a row, which a shared machine's load skews).

Usage: VG_BASELINE=/path/to/older/vectraguard bench/records-interleaved.py [ROUNDS]
Run as root (the workspace is given to nobody, as in bench/records.sh). Each build
records with its default (since session 23, root's BPF exec recorder; before,
seccomp notification); as root each build is also measured with
VECTRAGUARD_EXEC_TRACE=seccomp, seccomp notification, every user's. VG_BIN overrides
this build's path (default target/release/vectraguard). Prints medians, each build's
overhead of recording (median of recorded / median of --no-record) and the median of
the per-round ratios (each round's recorded run against the same round's --no-record)."""
import os, random, shutil, statistics, subprocess, sys, tempfile, time

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
new = os.environ.get("VG_BIN", os.path.join(root, "target/release/vectraguard"))
base = os.environ.get("VG_BASELINE")
ws = tempfile.mkdtemp(prefix="vg-bench-records.")
os.environ["VECTRAGUARD_HOME"] = ws + ".home"
script = os.path.join(ws, "many.sh")
with open(script, "w") as f:
    f.write("#!/bin/sh\ni=0\nwhile [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done\n")
os.chmod(script, 0o755)
if os.getuid() == 0:
    os.chown(ws, 65534, 65534)
os.chmod(ws, 0o755)
run = lambda vg, *flags: [vg, "sandbox", "run", *flags, "--", script]
builds = {"this build": new}
if base:
    builds["baseline"] = base
cmds = {}
for name, vg in builds.items():
    cmds[(name, "recorded")] = run(vg)
    cmds[(name, "no-record")] = run(vg, "--no-record")
# As root, this build's seccomp notification too (exec_trace = "seccomp"): that row
# runs with VECTRAGUARD_EXEC_TRACE=seccomp, every other with each build's default.
if os.getuid() == 0:
    for name, vg in builds.items():
        cmds[(name, "recorded, seccomp notification")] = run(vg)
os.environ.pop("VECTRAGUARD_EXEC_TRACE", None)
times = {k: [] for k in cmds}
try:
    for r in range(rounds + 1):  # one round of warm-up
        order = list(cmds)
        random.shuffle(order)
        for k in order:
            t0 = time.perf_counter()
            env = dict(os.environ)
            if "seccomp" in k[1]:
                env["VECTRAGUARD_EXEC_TRACE"] = "seccomp"
            subprocess.run(cmds[k], cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            if r >= 1:
                times[k].append(time.perf_counter() - t0)
        # Each round's records go, so that the folder does not grow across rounds.
        shutil.rmtree(ws + ".home", ignore_errors=True)
finally:
    shutil.rmtree(ws, ignore_errors=True)
    shutil.rmtree(ws + ".home", ignore_errors=True)
print(f"2,000 execs, interleaved, median of {rounds} rounds")
for name in builds:
    rec, plain = times[(name, "recorded")], times[(name, "no-record")]
    mr, mp = statistics.median(rec), statistics.median(plain)
    paired = statistics.median(a / b for a, b in zip(rec, plain))
    print(f"  {name:10s} recorded {mr:6.3f} s, --no-record {mp:6.3f} s: "
          f"overhead {100 * (mr / mp - 1):+5.1f} % (per round: {100 * (paired - 1):+5.1f} %)")
for name in builds:
    if (name, "recorded, seccomp notification") not in times:
        continue
    rec, plain = times[(name, "recorded, seccomp notification")], times[(name, "no-record")]
    mr, mp = statistics.median(rec), statistics.median(plain)
    paired = statistics.median(a / b for a, b in zip(rec, plain))
    print(f"  {name}, seccomp notification: recorded {mr:6.3f} s: "
          f"overhead {100 * (mr / mp - 1):+5.1f} % (per round: {100 * (paired - 1):+5.1f} %)")
if base:
    for kind in ("recorded", "no-record"):
        a = statistics.median(times[("this build", kind)])
        b = statistics.median(times[("baseline", kind)])
        print(f"  this build / baseline, {kind:9s} {a / b:5.3f}x")
