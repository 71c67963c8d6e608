#!/usr/bin/env bash
# Startup benchmark: `vectraguard sandbox run -- /bin/true` against bubblewrap with a
# comparable set of namespaces, measured in the same run, with the session record (the
# default) and without it (--no-record, the isolation layers alone). Prints medians,
# the ratios, and the peak RSS of the vectraguard process.
#
# Usage: bench/startup.sh [RUNS]      (needs hyperfine, bubblewrap, python3, GNU time)
#
# VG_BASELINE=/path/to/an/older/vectraguard adds that build to the same hyperfine run
# (recorded and --no-record), so a change is measured before and after in one sitting.
set -euo pipefail
runs=${1:-50}
root=$(cd "$(dirname "$0")/.." && pwd)
vg="$root/target/release/vectraguard"
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" >&2

# A workspace owned by an unprivileged user: as root, the sandbox runs as its owner.
ws=$(mktemp -d /tmp/vg-bench.XXXXXX)
trap 'rm -rf "$ws"' EXIT
if [ "$(id -u)" = 0 ]; then chown nobody "$ws"; fi
chmod 755 "$ws"
# Records go to a scratch folder outside the workspace, never to ~/.vectraguard.
export VECTRAGUARD_HOME="$ws.home"
trap 'rm -rf "$ws" "$ws.home"' EXIT
mkdir -p "$ws/w"
if [ "$(id -u)" = 0 ]; then chown nobody "$ws/w"; fi
cd "$ws/w"

json="$ws/startup.json"
baseline=()
if [ -n "${VG_BASELINE:-}" ]; then
  baseline=(-n baseline "$VG_BASELINE sandbox run -- /bin/true"
    -n baseline-no-record "$VG_BASELINE sandbox run --no-record -- /bin/true")
fi
hyperfine -N --warmup 5 --runs "$runs" --export-json "$json" \
  -n vectraguard "$vg sandbox run -- /bin/true" \
  -n vectraguard-no-record "$vg sandbox run --no-record -- /bin/true" \
  "${baseline[@]}" \
  -n bwrap "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --new-session /bin/true" \
  >/dev/null

peak_kib=0
for _ in 1 2 3 4 5; do
  kib=$(/usr/bin/time -f '%M' "$vg" sandbox run -- /bin/true 2>&1 >/dev/null | tail -n1)
  [ "$kib" -gt "$peak_kib" ] && peak_kib=$kib
done

python3 - "$json" "$peak_kib" "$runs" <<'PY'
import json, statistics, sys
data = {r["command"]: r["times"] for r in json.load(open(sys.argv[1]))["results"]}
vg, bw = statistics.median(data["vectraguard"]) * 1e3, statistics.median(data["bwrap"]) * 1e3
nr = statistics.median(data["vectraguard-no-record"]) * 1e3
peak = int(sys.argv[2]) / 1024
print(f"startup, median of {sys.argv[3]} runs each")
print(f"  vectraguard sandbox run -- /bin/true : {vg:6.2f} ms  (recorded: the default)")
print(f"  ... --no-record -- /bin/true         : {nr:6.2f} ms  (isolation layers only)")
print(f"  bwrap ... --unshare-all /bin/true    : {bw:6.2f} ms")
print(f"  ratio recorded / bwrap               : {vg / bw:6.2f}x")
print(f"  ratio --no-record / bwrap            : {nr / bw:6.2f}x   (target <= 1.5x)")
print(f"  peak RSS of vectraguard              : {peak:6.2f} MiB (target <= 10 MiB)")
if "baseline" in data:
    b, bn = statistics.median(data["baseline"]) * 1e3, statistics.median(data["baseline-no-record"]) * 1e3
    print(f"  baseline build, recorded             : {b:6.2f} ms  (this build / baseline: {vg / b:5.2f}x)")
    print(f"  baseline build, --no-record          : {bn:6.2f} ms  (this build / baseline: {nr / bn:5.2f}x)")
PY
