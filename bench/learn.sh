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
#   (needs hyperfine, git and python3; VG_PARTS=a or b runs one part)
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
            fh.write(f"file {d} {f}\n" * 4)
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
grep_r="grep -r -c nothing-matches src"
copy="cp -r src /tmp/copy"

if [[ $parts == *a* ]]; then
hyperfine -N --warmup 1 --runs "$runs" --export-json "$scratch/learn.json" \
  -n status "$vg sandbox run -q -- $status" \
  -n status-learn "$vg sandbox run -q --learn bench-status --yes -- $status" \
  -n grep "$vg sandbox run -q -- $grep_r" \
  -n grep-learn "$vg sandbox run -q --learn bench-grep --yes -- $grep_r" >/dev/null
fi

if [[ $parts == *b* ]]; then
  if [ -z "${VG_BASELINE:-}" ]; then
    echo "(b) needs VG_BASELINE=/path/to/a vectraguard built without violation reporting" >&2
  else
    hyperfine -N --warmup 1 --runs "$runs" --export-json "$scratch/violations.json" \
      -n status "$vg sandbox run -q -- $status" \
      -n status-baseline "$VG_BASELINE sandbox run -q -- $status" \
      -n grep "$vg sandbox run -q -- $grep_r" \
      -n grep-baseline "$VG_BASELINE sandbox run -q -- $grep_r" \
      -n execs "$vg sandbox run -q many.sh" \
      -n execs-baseline "$VG_BASELINE sandbox run -q many.sh" \
      -n copy "$vg sandbox run -q -- $copy" \
      -n copy-baseline "$VG_BASELINE sandbox run -q -- $copy" \
      -n grep-all "$vg sandbox run -q --violations all -- $grep_r" >/dev/null
  fi
fi

python3 - "$scratch" "$runs" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
def medians(name):
    if not os.path.exists(f"{d}/{name}.json"):
        return None
    return {r["command"]: statistics.median(r["times"]) for r in json.load(open(f"{d}/{name}.json"))["results"]}
a, b = medians("learn"), medians("violations")
print(f"learning and violations, medians of {sys.argv[2]} runs")
if a:
    for cmd, what in (("status", "git status, 20,000 files"), ("grep", "grep -r, 20,000 files opened")):
        n, l = a[cmd], a[cmd + "-learn"]
        print(f"(a) {what:<30}: normal {1e3 * n:8.1f} ms, --learn {1e3 * l:8.1f} ms ({l / n:5.2f}x)")
if b:
    for cmd, what in (("status", "git status"), ("grep", "grep -r"), ("execs", "2,000 execs"), ("copy", "cp -r, 20,000 files written")):
        n, base = b[cmd], b[cmd + "-baseline"]
        print(f"(b) {what:<30}: this build {1e3 * n:8.1f} ms, baseline {1e3 * base:8.1f} ms, added {100 * (n / base - 1):6.1f} %   (target <= 5%)")
    n, base = b["grep-all"], b["grep-baseline"]
    print(f"(b) grep -r with --violations all  : this build {1e3 * n:8.1f} ms, baseline {1e3 * base:8.1f} ms, added {100 * (n / base - 1):6.1f} %   (every open traced)")
PY
