#!/usr/bin/env bash
# HTTPS inspection (issue 17) against the same work done directly on the host and
# through the mediator with TLS untouched, in the same run. One fast HTTPS server on
# the loopback (crates/http/examples/bench_upstream.rs: hyper + tokio-rustls, its own
# CA) is the upstream of all three:
#   direct       curl or python3 on the host, the server's CA given;
#   passthrough  vectraguard sandbox run --add-host api.test:127.0.0.1 --allow api.test:PORT
#                (a plain rule: the mediator relays the TLS bytes as they are);
#   inspected    ... --allow 'GET https://api.test:PORT/**' --upstream-ca CA (the
#                supervisor terminates TLS with the session CA and re-encrypts upstream).
# Measures:
#   (1) 1 GiB downloaded by curl (`-w %{speed_download}`, so sandbox start-up is not
#       in it), over HTTP/1.1 and over HTTP/2; MiB/s medians, inspected/direct
#       (target >= 50 %) and inspected/passthrough;
#   (2) REQUESTS small GETs on one kept-alive connection (Debian's python3,
#       http.client, HTTP/1.1; and curl with a URL glob, HTTP/2), each timed after 50
#       untimed ones; the median per request of all runs pooled, and inspected minus
#       direct (target <= 1 ms);
#   (3) minting a leaf: the `mint` example's medians.
#
# Usage: bench/https.sh [RUNS] [REQUESTS]   (needs curl, /usr/bin/python3; as root or
#        with TUN access). RUNS defaults to 5, REQUESTS to 2000.
# VG_BIN=/path/to/vectraguard (default $CARGO_TARGET_DIR or target, /release/vectraguard);
# the examples bench_upstream and mint are taken from the same release folder, built
# if missing.
set -euo pipefail
runs=${1:-5}
requests=${2:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
release="${CARGO_TARGET_DIR:-$root/target}/release"
vg="${VG_BIN:-$release/vectraguard}"
upstream_bin="$release/examples/bench_upstream"
mint_bin="$release/examples/mint"
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" -p vectraguard >&2
if [ ! -x "$upstream_bin" ] || [ ! -x "$mint_bin" ]; then
  cargo build --release --manifest-path "$root/Cargo.toml" -p vg-http --examples >&2
fi
py=/usr/bin/python3
gib=1073741824

ws=$(mktemp -d /tmp/vg-bench-https.XXXXXX)
export VECTRAGUARD_HOME="$ws/home"
cleanup() { [ -n "${server:-}" ] && kill "$server" 2>/dev/null; rm -rf "$ws"; }
trap cleanup EXIT
mkdir -p "$ws/w" "$ws/home" && chmod 755 "$ws" "$ws/w"
if [ "$(id -u)" = 0 ]; then chown nobody "$ws/w"; fi

# In the workspace: the sandbox has a /tmp of its own but sees its working folder.
ca="$ws/w/upstream-ca.pem"
"$upstream_bin" api.test "$ca" >"$ws/port" &
server=$!
for _ in $(seq 100); do [ -s "$ws/port" ] && break; sleep 0.05; done
port=$(head -n 1 "$ws/port")
if [ -z "$port" ]; then echo "https.sh: bench_upstream did not start" >&2; exit 1; fi
chmod 644 "$ca"
cd "$ws/w"
base="https://api.test:$port"

# The three ways to run a client; arrays keep the arguments' boundaries.
direct=()
pass=("$vg" sandbox run --quiet --add-host "api.test:127.0.0.1" --allow "api.test:$port" --)
insp=("$vg" sandbox run --quiet --add-host "api.test:127.0.0.1"
  --allow "GET $base/**" --upstream-ca "$ca" --)
# The CA each client trusts: the server's on the host and through passthrough; when
# inspected, the session CA that vectraguard adds to the bundles (CURL_CA_BUNDLE,
# SSL_CERT_FILE). On the host, api.test is not in /etc/hosts: curl is told its address.
direct_tls=(--cacert "$ca" --resolve "api.test:$port:127.0.0.1")
pass_tls=(--cacert "$ca")
insp_tls=()
direct_cafile=$ca pass_cafile=$ca insp_cafile=""
direct_addr=127.0.0.1 pass_addr="" insp_addr=""

# (1) One 1 GiB download; appends its bytes/s to dl.PROTO.MODE.
download() { # PROTO(http1.1|http2) MODE
  local -n cmd=$2 tls=$2_tls
  local out speed size version
  out=$("${cmd[@]}" curl -sSf "--$1" "${tls[@]}" -o /dev/null \
    -w '%{speed_download} %{size_download} %{http_version}' "$base/bytes?n=$gib")
  read -r speed size version <<<"$out"
  if [ "$size" != "$gib" ] || [ "$version" != "${1#http}" ]; then
    echo "https.sh: $2 download over $1 got $size bytes over HTTP/$version" >&2
    exit 1
  fi
  echo "$speed" >>"$ws/dl.$1.$2"
}

# (2) Python: REQUESTS timed GETs of /small on one HTTPSConnection, after 50 untimed
# (the handshake, and the inspector's connection upstream); prints each time in ns.
latency_py=$(cat <<'PY'
import http.client, socket, ssl, sys, time
host, port, n, cafile, addr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=cafile or None)
class Conn(http.client.HTTPSConnection):
    def connect(self):
        sock = socket.create_connection((addr or host, self.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = ctx.wrap_socket(sock, server_hostname=host)
conn = Conn(host, port)
def get():
    conn.request("GET", "/small")
    r = conn.getresponse()
    r.read()
    if r.status != 200 or r.will_close:
        sys.exit("unexpected response: %d, close %s" % (r.status, r.will_close))
for _ in range(50):
    get()
sock = conn.sock
times = []
for _ in range(n):
    t = time.perf_counter_ns()
    get()
    times.append(time.perf_counter_ns() - t)
if conn.sock is not sock:
    sys.exit("the connection was not kept alive")
print(" ".join(map(str, times)))
PY
)
latency_python() { # MODE
  local -n cmd=$1 cafile=$1_cafile addr=$1_addr
  "${cmd[@]}" "$py" -c "$latency_py" api.test "$port" "$requests" "$cafile" "$addr" \
    >>"$ws/py.$1"
}
# curl over HTTP/2: 50 + REQUESTS URLs of a glob on one connection; the time of each
# of the last REQUESTS (s) and how many connections it opened (0: kept alive).
latency_curl() { # MODE
  local -n cmd=$1 tls=$1_tls
  "${cmd[@]}" curl -sSf --http2 "${tls[@]}" -o /dev/null \
    -w '%{time_total} %{num_connects} %{http_version}\n' \
    "$base/small?[1-$((requests + 50))]" | tail -n "$requests" >>"$ws/curl.$1"
}

modes=(direct pass insp)
for r in $(seq "$runs"); do
  # Each run starts with another mode, so that a drifting machine favours none.
  order=("${modes[@]:$((r % 3))}" "${modes[@]:0:$((r % 3))}")
  for m in "${order[@]}"; do download http1.1 "$m"; done
  for m in "${order[@]}"; do download http2 "$m"; done
  for m in "${order[@]}"; do latency_python "$m"; done
  for m in "${order[@]}"; do latency_curl "$m"; done
done
mint=$("$mint_bin" 500)

"$py" - "$ws" "$runs" "$requests" "$mint" <<'PY'
import statistics, sys
ws, runs, n, mint = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
names = {"direct": "direct (host)", "pass": "passthrough", "insp": "inspected"}
def values(path):
    return [float(v) for v in open(f"{ws}/{path}").read().split()]
print(f"HTTPS inspection, {runs} runs; upstream: bench_upstream on the loopback")
print("(1) 1 GiB download, curl, MiB/s (median; min-max)")
for proto in ("http1.1", "http2"):
    med = {}
    for m in names:
        v = [x / 2**20 for x in values(f"dl.{proto}.{m}")]
        med[m] = statistics.median(v)
        print(f"    {proto:7s} {names[m]:14s} {med[m]:8.1f}  ({min(v):.0f}-{max(v):.0f})")
    print(f"    {proto:7s} inspected / direct      {med['insp'] / med['direct'] * 100:5.1f} %"
          "  (target >= 50 %)")
    print(f"    {proto:7s} inspected / passthrough {med['insp'] / med['pass'] * 100:5.1f} %")
    print(f"    {proto:7s} passthrough / direct    {med['pass'] / med['direct'] * 100:5.1f} %")
def latency(title, files, scale):
    print(title)
    med = {}
    for m in names:
        v = sorted(x * scale for x in files(m))
        med[m] = statistics.median(v)
        p90, p99 = v[int(0.9 * (len(v) - 1))], v[int(0.99 * (len(v) - 1))]
        print(f"    {names[m]:14s} median {med[m]:7.1f} us   p90 {p90:7.1f}   p99 {p99:7.1f}")
    print(f"    inspected - direct      {(med['insp'] - med['direct']) / 1000:+.3f} ms"
          "  (target <= 1 ms)")
    print(f"    inspected - passthrough {(med['insp'] - med['pass']) / 1000:+.3f} ms")
    print(f"    passthrough - direct    {(med['pass'] - med['direct']) / 1000:+.3f} ms")
latency(f"(2) one kept-alive connection, {n} GETs of /small per run, time per request,"
        f" {runs * n} pooled\n    python3 http.client, HTTP/1.1",
        lambda m: values(f"py.{m}"), 1e-3)
def curl_times(m):
    rows = [line.split() for line in open(f"{ws}/curl.{m}")]
    if any(c != "0" or v != "2" for _, c, v in rows):
        sys.exit(f"curl ({m}) did not keep one HTTP/2 connection")
    return [float(t) for t, _, _ in rows]
latency("    curl, HTTP/2 (time_total of each URL)", curl_times, 1e6)
print("(3) leaf certificates, `mint` example (500 names)")
for line in mint.splitlines():
    print("    " + line)
PY
