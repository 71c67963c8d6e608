#!/usr/bin/env bash
# Persistent sandboxes (issue 16): starting a command in a running sandbox against
# starting a fresh sandbox for it, and bubblewrap as the reference, in the same run.
#   exec-into-running  vectraguard sandbox exec NAME -- /bin/true
#   fresh-run          vectraguard sandbox run -- /bin/true            (recorded)
#   bwrap              bwrap ... /bin/true                              (no record)
# and `sandbox create` itself (a new sandbox, ready to take commands).
#
# Usage: bench/persistent.sh [RUNS]      (needs hyperfine, bubblewrap, python3)
set -euo pipefail
runs=${1:-50}
root=$(cd "$(dirname "$0")/.." && pwd)
vg="$root/target/release/vectraguard"
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" >&2

ws=$(mktemp -d /tmp/vg-bench-persistent.XXXXXX)
export VECTRAGUARD_HOME="$ws.home"
name="bench$$"
cleanup() {
  "$vg" sandbox rm -f "$name" >/dev/null 2>&1 || true
  for n in $(seq 1 "$runs"); do "$vg" sandbox rm -f "bc$$-$n" >/dev/null 2>&1 || true; done
  rm -rf "$ws" "$ws.home"
}
trap cleanup EXIT
chmod 755 "$ws"
if [ "$(id -u)" = 0 ]; then chown nobody "$ws"; fi
cd "$ws"

"$vg" sandbox create "$name" --idle-timeout 0 >/dev/null
json="$ws/exec.json"
hyperfine -N --warmup 5 --runs "$runs" --export-json "$json" \
  -n exec-into-running "$vg sandbox exec $name -- /bin/true" \
  -n fresh-run "$vg sandbox run --quiet -- /bin/true" \
  -n bwrap "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --new-session /bin/true" \
  >/dev/null

# Creating one: from the command to a sandbox that takes commands.
create_ms=()
for n in $(seq 1 "$runs"); do
  t0=$(date +%s%N)
  "$vg" sandbox create "bc$$-$n" --idle-timeout 0 >/dev/null
  t1=$(date +%s%N)
  create_ms+=("$(( (t1 - t0) / 1000 ))")
  "$vg" sandbox rm -f "bc$$-$n" >/dev/null
done

python3 - "$json" "${create_ms[@]}" <<'PY'
import json, statistics, sys
data = {r["command"]: r["times"] for r in json.load(open(sys.argv[1]))["results"]}
create = [int(us) / 1000 for us in sys.argv[2:]]
med = {k: statistics.median(v) * 1000 for k, v in data.items()}
print("median of %d runs" % len(data["exec-into-running"]))
for k, v in med.items():
    print("  %-18s %7.2f ms" % (k, v))
print("  %-18s %7.2f ms" % ("sandbox create", statistics.median(create)))
print("exec into a running sandbox vs a fresh recorded run: %.2fx"
      % (med["exec-into-running"] / med["fresh-run"]))
print("exec into a running sandbox vs bwrap: %.2fx" % (med["exec-into-running"] / med["bwrap"]))
PY
