#!/usr/bin/env bash
# Cost of resource limits on startup: `sandbox run -- /bin/true` with
#   - no memory cap at all (`--memory unlimited`: no cgroup, no watchdog), the reference;
#   - the default caps (no flag: memory at half of RAM by a cgroup as root, by the
#     supervisor's watchdog where no cgroup can be made; 1 GiB recorded per stream);
#   - every limit set (memory, cpus, pids, timeout, max-output, max-record, disk);
# in the same run. Run as root to measure the cgroup path, and as another user for the
# watchdog (there --memory and --cpus need a delegated cgroup v2 subtree, or
# --best-effort-limits, which this script adds), e.g.
#   setpriv --reuid vgtest --regid vgtest --init-groups bench/limits.sh
# Target: <= 2 ms added (median).
#
# Usage: bench/limits.sh [RUNS]      (needs hyperfine and python3; VG=path overrides the
# binary, which is otherwise target/release/vectraguard, built if missing)
set -euo pipefail
runs=${1:-50}
root=$(cd "$(dirname "$0")/.." && pwd)
vg="${VG:-$root/target/release/vectraguard}"
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" >&2

scratch=$(mktemp -d /tmp/vg-bench-limits.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
chmod 755 "$scratch"
mkdir -p "$scratch/ws" "$scratch/home"
if [ "$(id -u)" = 0 ]; then chown nobody "$scratch/ws"; fi
export VECTRAGUARD_HOME="$scratch/home"
cd "$scratch/ws"

all="--memory 512m --cpus 1 --pids 256 --timeout 60s --max-output 10m --max-record 100m --disk 512m"
if ! "$vg" sandbox run $all -- /bin/true 2>/dev/null; then
  all="$all --best-effort-limits"
  echo "note: memory/cpus cannot be enforced here; measuring with --best-effort-limits" >&2
fi

hyperfine -N --warmup 5 --runs "$runs" --export-json "$scratch/limits.json" \
  -n unlimited "$vg sandbox run --memory unlimited -- /bin/true" \
  -n default "$vg sandbox run -- /bin/true" \
  -n all-limits "$vg sandbox run $all -- /bin/true" >/dev/null

python3 - "$scratch/limits.json" "$runs" "$all" <<'PY'
import json, statistics, sys
t = {r["command"]: statistics.median(r["times"]) * 1e3 for r in json.load(open(sys.argv[1]))["results"]}
print(f"limits on startup, median of {sys.argv[2]} runs each (sandbox run -- /bin/true)")
print(f"  --memory unlimited : {t['unlimited']:6.2f} ms   (reference: no memory cap)")
print(f"  no flags (defaults): {t['default']:6.2f} ms   (added {t['default'] - t['unlimited']:5.2f} ms, x{t['default'] / t['unlimited']:.3f})")
print(f"  {sys.argv[3]}")
print(f"  all limits         : {t['all-limits']:6.2f} ms   (added {t['all-limits'] - t['unlimited']:5.2f} ms; target <= 2 ms)")
PY
