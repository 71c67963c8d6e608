#!/usr/bin/env bash
# The approval gate's costs (issue 15), each against its reference in the same run:
#   (a) a script executing 2,000 short commands, recorded: this build with `--ask never`
#       (the default) and with `--ask critical` (every exec classified, none held) vs a
#       build without the gate (VG_BASELINE). Target: `--ask never` adds <= 2 %.
#   (b) the round trip of one approval: from starting `vectraguard approve` to the
#       held program running (it writes bash's $EPOCHREALTIME as its first act, so a
#       bash start-up is included). Target: <= 20 ms median.
#
# Usage: bench/approval.sh [RUNS] [APPROVALS]   (needs hyperfine, python3, bash)
# VG_BASELINE=/path/to/vectraguard-without-the-gate for (a)'s reference.
set -euo pipefail
runs=${1:-10}
approvals=${2:-40}
root=$(cd "$(dirname "$0")/.." && pwd)
vg="$root/target/release/vectraguard"
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" >&2

scratch=$(mktemp -d /tmp/vg-bench-approval.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
chmod 755 "$scratch"
ws="$scratch/ws"
mkdir -p "$ws" "$scratch/home"
# As root the sandbox runs as the workspace owner, who must not be root.
if [ "$(id -u)" = 0 ]; then chown nobody "$ws"; fi
export VECTRAGUARD_HOME="$scratch/home"
cd "$ws"

cat > many.sh <<'SH'
#!/bin/sh
i=0
while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done
SH
chmod 755 many.sh

baseline=()
if [ -n "${VG_BASELINE:-}" ]; then
  baseline=(-n baseline "$VG_BASELINE sandbox run many.sh")
fi
never=(-n ask-never "$vg sandbox run --ask never many.sh")
critical=(-n ask-critical "$vg sandbox run --ask critical many.sh")
# A few percent is the difference sought, and hyperfine runs one command after the
# other: three rounds in rotated order keep a drifting machine from favouring one.
per_round=$(( (runs + 2) / 3 ))
hyperfine -N --warmup 1 --runs "$per_round" --export-json "$scratch/exec1.json" \
  "${never[@]}" "${critical[@]}" "${baseline[@]}" >/dev/null
hyperfine -N --warmup 1 --runs "$per_round" --export-json "$scratch/exec2.json" \
  "${critical[@]}" "${baseline[@]}" "${never[@]}" >/dev/null
hyperfine -N --warmup 1 --runs "$per_round" --export-json "$scratch/exec3.json" \
  "${baseline[@]}" "${never[@]}" "${critical[@]}" >/dev/null

# (b) A custom rule rates `stamp` HIGH; the session runs it $approvals times in a row.
cat > "$scratch/config.toml" <<'TOML'
[[risk.rules]]
id = "bench-stamp"
level = "high"
reason = "the approval benchmark's held program"
executable = "stamp"
TOML
cat > stamp <<'SH'
#!/bin/bash
echo "$EPOCHREALTIME" >> stamps
SH
cat > loop.sh <<SH
#!/bin/sh
i=0
while [ \$i -lt $approvals ]; do ./stamp; i=\$((i+1)); done
SH
chmod 755 stamp loop.sh
if [ "$(id -u)" = 0 ]; then chown nobody "$ws"/*; fi

python3 - "$vg" "$scratch" "$approvals" <<'PY'
import json, os, statistics, subprocess, sys, time
vg, scratch, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ws = os.path.join(scratch, "ws")
stamps = os.path.join(ws, "stamps")
session = subprocess.Popen(
    [vg, "sandbox", "run", "--quiet", "--config", os.path.join(scratch, "config.toml"),
     "--name", "approval-bench", "--ask", "high", "loop.sh"],
    cwd=ws, stdout=subprocess.DEVNULL)
def pending():
    while True:
        out = subprocess.run([vg, "approvals", "approval-bench", "--json"],
                             capture_output=True, text=True, cwd=ws).stdout
        try:
            held = json.loads(out)
        except ValueError:
            held = []
        if held:
            return held[0]["id"]
        time.sleep(0.005)
def lines():
    try:
        return open(stamps).read().split()
    except FileNotFoundError:
        return []
rtts, cli = [], []
for i in range(n):
    rid = pending()
    t0 = time.time()
    subprocess.run([vg, "approve", "approval-bench", str(rid)], cwd=ws,
                   stdout=subprocess.DEVNULL, check=True)
    t1 = time.time()
    while len(lines()) <= i:
        time.sleep(0.0002)
    rtts.append((float(lines()[i]) - t0) * 1000)
    cli.append((t1 - t0) * 1000)
session.wait()

data = {}
for i in (1, 2, 3):
    for r in json.load(open(os.path.join(scratch, "exec%d.json" % i)))["results"]:
        data.setdefault(r["command"], []).extend(r["times"])
med = {k: statistics.median(v) for k, v in data.items()}
print("(a) 2,000 execs, recorded, median of %d runs" % len(data["ask-never"]))
for name, value in med.items():
    print("    %-13s %8.3f s" % (name, value))
if "baseline" in med:
    print("    --ask never vs the build without the gate: %+.1f %% (target <= 2 %%)"
          % ((med["ask-never"] / med["baseline"] - 1) * 100))
print("    --ask critical vs --ask never (classifying every exec): %+.1f %%"
      % ((med["ask-critical"] / med["ask-never"] - 1) * 100))
print("(b) approval round trip over %d approvals" % n)
print("    request to resumed exec: median %.1f ms, p90 %.1f ms (target <= 20 ms)"
      % (statistics.median(rtts), sorted(rtts)[int(0.9 * (n - 1))]))
print("    `vectraguard approve` alone: median %.1f ms" % statistics.median(cli))
PY
