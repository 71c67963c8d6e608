#!/usr/bin/env bash
# Session-record benchmarks, each measured against its reference in the same run:
#   (a) a script that executes 2,000 short commands: recorded vs `--no-record`
#       (the same sandbox, no exec tracing, no logs). Target: overhead <= 10%.
#   (b) 1 GiB written to stdout through the sandbox into a file (recorded, so also
#       into stdout.log) vs the same bytes through a plain pipe. Target: >= 50%.
#   (c) `vectraguard logs list` over 10,000 sessions. Target: <= 300 ms.
#
# Usage: bench/records.sh [RUNS]      (needs hyperfine and python3)
#
# VG_BASELINE=/path/to/an/older/vectraguard adds that build to (a)'s hyperfine run
# (recorded and --no-record), so a change is measured before and after in one sitting.
# VG_PARTS=a (or b, c, any mix; default abc) runs only those parts.
set -euo pipefail
runs=${1:-10}
parts=${VG_PARTS:-abc}
root=$(cd "$(dirname "$0")/.." && pwd)
vg="$root/target/release/vectraguard"
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" >&2

scratch=$(mktemp -d /tmp/vg-bench-records.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
chmod 755 "$scratch"
ws="$scratch/ws"
mkdir -p "$ws" "$scratch/home" "$scratch/list-home"
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

if [[ $parts == *a* ]]; then
baseline=()
if [ -n "${VG_BASELINE:-}" ]; then
  baseline=(-n baseline "$VG_BASELINE sandbox run many.sh"
    -n baseline-unrecorded "$VG_BASELINE sandbox run --no-record many.sh")
fi
hyperfine -N --warmup 1 --runs "$runs" --export-json "$scratch/exec.json" \
  -n recorded "$vg sandbox run many.sh" \
  -n unrecorded "$vg sandbox run --no-record many.sh" \
  "${baseline[@]}" >/dev/null
fi

# (b) Output throughput. The sandboxed writer and the plain one are the same program.
if [[ $parts == *b* ]]; then
out="$scratch/out.bin"
hyperfine --warmup 1 --runs "$(( runs < 5 ? runs : 5 ))" --export-json "$scratch/stream.json" \
  --prepare "rm -rf $scratch/home/logs $out" \
  -n sandbox "$vg sandbox run -- head -c 1073741824 /dev/zero > $out" \
  -n pipe "head -c 1073741824 /dev/zero | cat > $out" >/dev/null
fi

# (c) 10,000 finished sessions, made from one real record.
if [[ $parts == *c* ]]; then
VECTRAGUARD_HOME="$scratch/list-home" "$vg" sandbox run --name bench -- /bin/true
python3 - "$scratch/list-home/logs" <<'PY'
import json, os, random, shutil, sys
logs = sys.argv[1]
[template] = [os.path.join(logs, d) for d in os.listdir(logs)]
meta = json.load(open(os.path.join(template, "metadata.json")))
random.seed(7)
for i in range(10000):
    day, sec = divmod(i, 86400)
    stamp = "2026%02d%02dT%02d%02d%02dZ" % (1 + day // 28, 1 + day % 28, sec // 3600, sec // 60 % 60, sec % 60)
    sid = "session-%s-%06x" % (stamp, random.randrange(1 << 24))
    d = os.path.join(logs, sid)
    shutil.copytree(template, d)
    meta["session_id"] = sid
    meta["agent"] = ["claude", "codex", "aider"][i % 3]
    with open(os.path.join(d, "metadata.json"), "w") as f:
        json.dump(meta, f, indent=2)
PY
hyperfine -N --warmup 2 --runs "$runs" --export-json "$scratch/list.json" \
  -n list "env VECTRAGUARD_HOME=$scratch/list-home $vg logs list" \
  -n list-json "env VECTRAGUARD_HOME=$scratch/list-home $vg logs list --json" >/dev/null
fi

python3 - "$scratch" "$runs" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
def medians(name):
    if not os.path.exists(f"{d}/{name}.json"):
        return None
    return {r["command"]: statistics.median(r["times"]) for r in json.load(open(f"{d}/{name}.json"))["results"]}
e, s, l = medians("exec"), medians("stream"), medians("list")
gib = 1.0
print(f"session records, medians ({sys.argv[2]} runs; 5 for the 1 GiB stream)")
if e:
    print(f"(a) 2,000 short commands, recorded      : {e['recorded']:7.3f} s")
    print(f"    same sandbox, --no-record           : {e['unrecorded']:7.3f} s")
    print(f"    recording overhead                  : {100 * (e['recorded'] / e['unrecorded'] - 1):6.1f} %   (target <= 10%)")
    if "baseline" in e:
        b, bu = e["baseline"], e["baseline-unrecorded"]
        print(f"    baseline build, recorded            : {b:7.3f} s   (this build / baseline: {e['recorded'] / b:5.3f}x)")
        print(f"    baseline build, --no-record         : {bu:7.3f} s   (this build / baseline: {e['unrecorded'] / bu:5.3f}x)")
        print(f"    baseline recording overhead         : {100 * (b / bu - 1):6.1f} %   (vs its own --no-record)")
        print(f"    overhead vs the baseline --no-record: {100 * (e['recorded'] / bu - 1):6.1f} %")
if s:
    print(f"(b) 1 GiB stdout through the sandbox    : {gib / s['sandbox']:7.2f} GiB/s")
    print(f"    plain pipe                          : {gib / s['pipe']:7.2f} GiB/s")
    print(f"    sandbox / pipe                      : {100 * s['pipe'] / s['sandbox']:6.1f} %   (target >= 50%)")
if l:
    print(f"(c) logs list, 10,000 sessions          : {1e3 * l['list']:7.1f} ms  (target <= 300 ms)")
    print(f"    logs list --json                    : {1e3 * l['list-json']:7.1f} ms")
PY
