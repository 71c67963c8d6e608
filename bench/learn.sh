#!/usr/bin/env bash
# Learning mode and violation reporting, each against its reference in the same run:
#   (a) learning's slowdown on file-heavy commands over a tree of 20,000 files in a git
#       repository: `git status` and `grep -r` (every file opened), run normally
#       (recorded) and with `--learn NAME --yes` (every file access traced, the
#       profile written at the end).
#   (b) what violation reporting adds to a normal recorded run when nothing is
#       refused: this build against a build without it (VG_BASELINE, required for
#       (b)), on the same commands, on the 2,000-exec script of bench/records.sh, and
#       on a write-heavy worst case (`cp -r` of the 20,000 files into /tmp: every file
#       opened for writing is traced). Target: <= 5 % added.
#
# Usage: VG_BASELINE=/path/to/older/vectraguard bench/learn.sh [RUNS]
#   (needs git and python3; VG_PARTS=a or b runs one part)
set -euo pipefail
runs=${1:-10}
parts=${VG_PARTS:-ab}
root=$(cd "$(dirname "$0")/.." && pwd)
vg="$root/target/release/vectraguard"
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" >&2

scratch=$(mktemp -d /tmp/vg-bench-learn.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
chmod 755 "$scratch"
ws="$scratch/ws"
mkdir -p "$ws" "$scratch/home" "$scratch/config"
export VECTRAGUARD_HOME="$scratch/home"
# Learned profiles go here, not into the user's own config.
export XDG_CONFIG_HOME="$scratch/config"
cd "$ws"

# 20,000 small files in 200 folders, committed.
python3 - <<'PY'
import os
for d in range(200):
    os.makedirs(f"src/d{d:03}", exist_ok=True)
    for f in range(100):
        with open(f"src/d{d:03}/f{f:03}.txt", "w") as fh:
            fh.write(f"file_{d}_{f}\n" * 4)
PY
git init -q . && git add -A && git -c user.name=b -c user.email=b@b commit -qm init
cat > many.sh <<'SH'
#!/bin/sh
i=0
while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done
SH
chmod 755 many.sh
# As root the sandbox runs as the workspace owner, who must not be root.
if [ "$(id -u)" = 0 ]; then chown -R nobody "$ws"; fi
git config --global --add safe.directory "$ws" 2>/dev/null || true

status="git -c safe.directory=* status --porcelain"
grep_r="grep -r -h -F file_199_99 src"
copy="cp -r src /tmp/copy"

# Every command runs in turn, shuffled each round, so that load changing during a
# sitting lands on every command alike (hyperfine's runs in a row of one command, then
# the next, do not compare on a shared machine).
python3 - "$runs" "$parts" "$vg" "${VG_BASELINE:-}" "$status" "$grep_r" "$copy" <<'PY'
import random, statistics, subprocess, sys, time
runs, parts, vg, base, status, grep_r, copy = sys.argv[1:8]
runs = int(runs)
def run(binary, *flags, cmd):
    return [binary, "sandbox", "run", "-q", *flags, "--", *cmd.split()]
cmds = {}
if "a" in parts:
    cmds.update({
        "status": run(vg, cmd=status),
        "status-learn": run(vg, "--learn", "bench-status", "--yes", cmd=status),
        "grep": run(vg, cmd=grep_r),
        "grep-learn": run(vg, "--learn", "bench-grep", "--yes", cmd=grep_r),
    })
if "b" in parts:
    if not base:
        print("(b) needs VG_BASELINE=/path/to/a vectraguard built without violation reporting", file=sys.stderr)
    else:
        cmds.update({
            "status": run(vg, cmd=status), "status-baseline": run(base, cmd=status),
            "grep": run(vg, cmd=grep_r), "grep-baseline": run(base, cmd=grep_r),
            "grep-all": run(vg, "--violations", "all", cmd=grep_r),
            "execs": [vg, "sandbox", "run", "-q", "many.sh"],
            "execs-baseline": [base, "sandbox", "run", "-q", "many.sh"],
            "copy": run(vg, cmd=copy), "copy-baseline": run(base, cmd=copy),
        })
times = {k: [] for k in cmds}
for r in range(runs + 1):  # one round of warm-up
    order = list(cmds)
    random.shuffle(order)
    for k in order:
        t0 = time.perf_counter()
        subprocess.run(cmds[k], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        if r >= 1:
            times[k].append(time.perf_counter() - t0)
m = {k: statistics.median(v) for k, v in times.items()}
print(f"learning and violations, medians of {runs} interleaved rounds")
if "status-learn" in m:
    for cmd, what in (("status", "git status, 20,000 files"), ("grep", "grep -r, 20,000 files opened")):
        n, l = m[cmd], m[cmd + "-learn"]
        print(f"(a) {what:<30}: normal {1e3 * n:8.1f} ms, --learn {1e3 * l:8.1f} ms ({l / n:5.2f}x)")
if "status-baseline" in m:
    for cmd, what in (("status", "git status"), ("grep", "grep -r"), ("execs", "2,000 execs"), ("copy", "cp -r, 20,000 files written")):
        n, b = m[cmd], m[cmd + "-baseline"]
        print(f"(b) {what:<30}: this build {1e3 * n:8.1f} ms, baseline {1e3 * b:8.1f} ms, added {100 * (n / b - 1):6.1f} %   (target <= 5%)")
    n, b = m["grep-all"], m["grep-baseline"]
    print(f"(b) grep -r, --violations all   : this build {1e3 * n:8.1f} ms, baseline {1e3 * b:8.1f} ms, added {100 * (n / b - 1):6.1f} %   (every open traced)")
PY
