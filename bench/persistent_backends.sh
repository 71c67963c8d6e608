#!/usr/bin/env bash
# Persistent sandboxes on each backend (issue 21): a command started in a running
# sandbox (`sandbox exec NAME -- /bin/true`) on native, gVisor, Docker and Podman, in
# the same run, each against the engine's own way into a running container
# (`docker exec`, `podman exec`: no record, no checks) as its reference.
#   native         vectraguard sandbox exec (native sandbox)
#   gvisor         vectraguard sandbox exec (runsc exec into the sandbox)
#   docker         vectraguard sandbox exec (our init in the container forks it)
#   docker-exec    docker exec CONTAINER /bin/true          (a plain container)
#   podman         vectraguard sandbox exec
#   podman-exec    podman exec CONTAINER /bin/true
#
# Usage (as root, engines running: scripts/test-engines):
#   bench/persistent_backends.sh [RUNS]     (needs hyperfine, runsc, docker, podman)
#   VG=/path/to/vectraguard bench/persistent_backends.sh 5   (another build)
set -euo pipefail
runs=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
vg=${VG:-$root/target/release/vectraguard}
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" >&2
image=${VG_IMAGE:-vectraguard-test/busybox:1}

ws=$(mktemp -d /tmp/vg-bench-pbackends.XXXXXX)
export VECTRAGUARD_HOME="$ws.home"
tag="pb$$"
cleanup() {
  for b in native gvisor docker podman; do "$vg" sandbox rm -f "$tag-$b" >/dev/null 2>&1 || true; done
  docker rm -f "$tag-plain" >/dev/null 2>&1 || true
  podman rm -f "$tag-plain" >/dev/null 2>&1 || true
  rm -rf "$ws" "$ws.home"
}
trap cleanup EXIT
chmod 755 "$ws"
if [ "$(id -u)" = 0 ]; then chown nobody "$ws"; fi
cd "$ws"

"$vg" sandbox create "$tag-native" --idle-timeout 0 >/dev/null
"$vg" sandbox create "$tag-gvisor" --backend gvisor --idle-timeout 0 >/dev/null
for e in docker podman; do
  "$vg" sandbox create "$tag-$e" --backend "$e" --image "$image" --idle-timeout 0 >/dev/null
  # The reference: a plain container of the same image, kept running.
  "$e" run -d --rm --name "$tag-plain" --network none "$image" sleep 3600 >/dev/null
done

json="$ws/exec.json"
hyperfine -N --warmup 3 --runs "$runs" --export-json "$json" \
  -n native "$vg sandbox exec $tag-native -- /bin/true" \
  -n gvisor "$vg sandbox exec $tag-gvisor -- /bin/true" \
  -n docker "$vg sandbox exec $tag-docker -- /bin/true" \
  -n docker-exec "docker exec $tag-plain /bin/true" \
  -n podman "$vg sandbox exec $tag-podman -- /bin/true" \
  -n podman-exec "podman exec $tag-plain /bin/true" \
  >/dev/null

python3 - "$json" <<'PY'
import json, statistics, sys
data = {r["command"]: r["times"] for r in json.load(open(sys.argv[1]))["results"]}
med = {k: statistics.median(v) * 1000 for k, v in data.items()}
print("sandbox exec NAME -- /bin/true, median of %d runs" % len(data["native"]))
for k, v in med.items():
    print("  %-12s %8.2f ms" % (k, v))
for e in ("docker", "podman"):
    print("%s: ours / %s exec: %.2fx" % (e, e, med[e] / med[e + "-exec"]))
print("gvisor / native: %.2fx" % (med["gvisor"] / med["native"]))
PY
