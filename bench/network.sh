#!/usr/bin/env bash
# Mediated-network benchmark (`--network allow`), against the same work done directly
# on the host in the same run:
#   (a) download 1 GiB with curl from an HTTP server on the host's loopback;
#   (b) 1,000 sequential TCP connections (connect, 1-byte echo, close) to a loopback
#       echo server, timed inside the client so that sandbox start-up is excluded.
# Prints medians, throughput ratio (target >= 70%) and time added per connection
# (target <= 1 ms). For each download it also prints the CPU time it took (the client's
# whole process tree, `vectraguard` with its mediator threads and the sandbox's curl,
# plus the server's), which, unlike the wall time, holds on a machine other work keeps
# busy; and the load average before and after.
#
# Usage: bench/network.sh [RUNS]      (needs curl, python3; as root or with TUN access)
#
# VG_BASELINE=/path/to/an/older/vectraguard measures that build too, interleaved with
# this one and the direct runs, so a change is measured before and after in one sitting.
set -euo pipefail
runs=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
vg="$root/target/release/vectraguard"
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" >&2

# shellcheck source=bench/netserve-env.sh
. "$root/bench/netserve-env.sh"

net=(--add-host "bench.test:127.0.0.1" --allow "bench.test:$http" --allow "bench.test:$echo_port")
download='curl -s -o /dev/null -w %{time_total} http://HOST:'"$http"'/'
conns=$(cat <<PY
import socket, sys, time
addr = (socket.gethostbyname(sys.argv[1]), $echo_port)
t = time.perf_counter()
for _ in range(1000):
    s = socket.create_connection(addr)
    s.sendall(b"x")
    s.recv(1)
    s.close()
print(time.perf_counter() - t)
PY
)

# CPU seconds of one command's process tree (bash's `time` counts every descendant
# that was waited for) plus the server's (its threads included), and its output.
exec 3>&2
tck=$(getconf CLK_TCK)
server_ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }
measure() {
  local s0 t
  s0=$(server_ticks)
  t=$( { TIMEFORMAT='%U %S'; time "$@" >"$ws/out" 2>&3; } 2>&1 )
  cpu=$(python3 -c 'import sys; u, s, a, b, t = sys.argv[1:]; print(float(u) + float(s) + (int(b) - int(a)) / int(t))' \
    $t "$s0" "$(server_ticks)" "$tck")
  out=$(cat "$ws/out")
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
direct_dl=(); sandbox_dl=(); direct_c=(); sandbox_c=(); base_dl=(); base_c=()
direct_cpu=(); sandbox_cpu=(); base_cpu=()
for _ in $(seq "$runs"); do
  measure ${download/HOST/127.0.0.1}
  direct_dl+=("$out"); direct_cpu+=("$cpu")
  measure "$vg" sandbox run "${net[@]}" -- ${download/HOST/bench.test}
  sandbox_dl+=("$out"); sandbox_cpu+=("$cpu")
  if [ -n "${VG_BASELINE:-}" ]; then
    measure "$VG_BASELINE" sandbox run "${net[@]}" -- ${download/HOST/bench.test}
    base_dl+=("$out"); base_cpu+=("$cpu")
  fi
  direct_c+=("$(python3 -c "$conns" 127.0.0.1)")
  sandbox_c+=("$("$vg" sandbox run "${net[@]}" -- python3 -c "$conns" bench.test)")
  if [ -n "${VG_BASELINE:-}" ]; then
    base_c+=("$("$VG_BASELINE" sandbox run "${net[@]}" -- python3 -c "$conns" bench.test)")
  fi
done

python3 - "$runs" "${direct_dl[*]}" "${sandbox_dl[*]}" "${direct_c[*]}" "${sandbox_c[*]}" \
  "${base_dl[*]:-}" "${base_c[*]:-}" "${direct_cpu[*]}" "${sandbox_cpu[*]}" "${base_cpu[*]:-}" \
  "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys
runs = sys.argv[1]
dd, sd, dc, sc = (statistics.median(map(float, a.split())) for a in sys.argv[2:6])
bd, bc = ((statistics.median(map(float, a.split())) if a else None) for a in sys.argv[6:8])
dcpu, scpu, bcpu = ((statistics.median(map(float, a.split())) if a else None) for a in sys.argv[8:11])
load_before, load_after = sys.argv[11:13]
gib = 1.0
print(f"mediated network, median of {runs} runs each")
print(f"  (a) 1 GiB download, direct on the host  : {dd:6.3f} s  {gib / dd:5.2f} GiB/s")
print(f"      through --network allow             : {sd:6.3f} s  {gib / sd:5.2f} GiB/s")
print(f"      ratio                               : {dd / sd * 100:5.1f}% of direct  (target >= 70%)")
if bd is not None:
    print(f"      baseline build                      : {bd:6.3f} s  {gib / bd:5.2f} GiB/s  ({dd / bd * 100:5.1f}% of direct)")
print(f"      CPU time, direct (curl + server)    : {dcpu:6.3f} s")
print(f"      CPU time, through --network allow   : {scpu:6.3f} s  ({scpu / dcpu:4.2f}x direct)")
if bcpu is not None:
    print(f"      CPU time, baseline build            : {bcpu:6.3f} s  ({bcpu / dcpu:4.2f}x direct)")
print(f"  (b) 1,000 connections, direct           : {dc * 1e3:7.1f} ms  ({dc:.3f} ms each)")
print(f"      through --network allow             : {sc * 1e3:7.1f} ms  ({sc:.3f} ms each)")
print(f"      added per connection                : {(sc - dc):.3f} ms  (target <= 1 ms)")
if bc is not None:
    print(f"      baseline build                      : {bc * 1e3:7.1f} ms  (added {(bc - dc):.3f} ms each)")
print(f"  load average before: {load_before}, after: {load_after}")
PY
