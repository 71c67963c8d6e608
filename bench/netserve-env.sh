# Sourced by bench/network.sh and bench/network-ab.sh (with $root set): a workspace
# ($ws, given to nobody when run as root, with its own records home), 1 GiB in the
# page cache served with sendfile(2) on $http and a TCP echo on $echo_port, both on the
# host's loopback ($server is the server's pid), all removed on exit; then cd into the
# workspace's folder.
ws=$(mktemp -d /tmp/vg-bench-net.XXXXXX)
export VECTRAGUARD_HOME="$ws.home"
cleanup() { [ -n "${server:-}" ] && kill "$server" 2>/dev/null; rm -rf "$ws" "$ws.home"; }
trap cleanup EXIT
mkdir -p "$ws/w" && chmod 755 "$ws" "$ws/w"
if [ "$(id -u)" = 0 ]; then chown nobody "$ws/w"; fi

head -c 1073741824 /dev/zero >"$ws/blob"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=$(port); echo_port=$(port)
python3 "$root/bench/netserve.py" "$ws/blob" "$http" "$echo_port" &
server=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$http/" -r 0-0 && break; sleep 0.1; done
cd "$ws/w"
