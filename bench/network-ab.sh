#!/usr/bin/env bash
# The mediated 1 GiB download of bench/network.sh (a), for several builds and directly
# on the host, in shuffled order each round, printing every run as well as the medians.
#
# Why a second script: on this 2-core VM a mediated download is bimodal. Most runs take
# 0.5-0.7 s, but some fall into a lock-step where curl, the mediator and the TUN writer
# each sleep and wake once per packet or two (about 11,000 times per GiB each, against
# under 2,000 in a fast run; `perf record -e sched:sched_switch`) and take 1.5-2.4 s.
# bench/network.sh runs its commands in a fixed order and 5-7 rounds: how many slow runs
# land in a build's sample then decides its median. Twenty shuffled rounds, with every
# run printed, show both the medians and how often each build falls into the slow mode.
#
# Usage: bench/network-ab.sh ROUNDS NAME=/path/to/vectraguard [NAME=/path ...]
# (as root or with TUN access; needs curl and python3). Runs are `--no-record`, so the
# records' disk writes do not add their own noise; the mediator is the same either way.
set -euo pipefail
rounds=${1:?usage: bench/network-ab.sh ROUNDS NAME=/path/to/vectraguard ...}
shift
[ $# -ge 1 ] || { echo "name at least one build: NAME=/path/to/vectraguard" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
# Each build's path made absolute: the runs happen in a folder of their own.
builds=()
for b in "$@"; do
  path=$(realpath -e "${b#*=}") || { echo "no build at ${b#*=}" >&2; exit 2; }
  builds+=("${b%%=*}=$path")
done
# shellcheck source=bench/netserve-env.sh
. "$root/bench/netserve-env.sh"

for _ in $(seq "$rounds"); do
  for v in $(printf '%s\n' direct "${builds[@]}" | shuf); do
    if [ "$v" = direct ]; then
      t=$(curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$http/")
    else
      t=$("${v#*=}" sandbox run --no-record --add-host bench.test:127.0.0.1 \
        --allow "bench.test:$http" -- \
        curl -s -o /dev/null -w '%{time_total}' "http://bench.test:$http/" 2>/dev/null)
    fi
    echo "${v%%=*} $t"
  done
done | python3 -c '
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in sys.stdin:
    name, t = line.split()
    runs[name].append(float(t))
direct = statistics.median(runs["direct"])
n = len(runs["direct"])
print(f"1 GiB download, {n} shuffled rounds: median, share of direct, runs over 1.2 s, every run")
for name, times in sorted(runs.items()):
    m = statistics.median(times)
    slow = sum(t > 1.2 for t in times)
    print(f"  {name:10s} {m:6.3f} s {100 * direct / m:5.1f}%  slow {slow:2d}  " + " ".join(f"{t:.2f}" for t in times))'
