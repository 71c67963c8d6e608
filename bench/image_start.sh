#!/usr/bin/env bash
# Warm start of a sandbox from an image: `vectraguard sandbox run --image X -- /bin/true`
# (recorded, and --no-record) vs the native default (`sandbox run -- /bin/true`, host
# tools read-only) vs `podman --runtime runc run --rm --network none X /bin/true`, in
# the same run, medians. X is a busybox root imported into both stores first, so no run
# pulls or unpacks: this measures starting from a cached image.
# Targets: at most 2x native, at least 10x faster than podman.
#
# Usage: bench/image_start.sh [RUNS]   (as root; needs hyperfine, busybox-static, and
#                                       podman with runc: apt-get install podman runc)
set -euo pipefail
runs=${1:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
vg="$root/target/release/vectraguard"
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" >&2

scratch=$(mktemp -d /tmp/vg-bench-start.XXXXXX)
trap 'rm -rf "$scratch"; podman rmi -f localhost/vg-bench-busybox >/dev/null 2>&1 || true' EXIT
export VECTRAGUARD_HOME="$scratch/home"
mkdir -p "$scratch/rootfs/bin" "$scratch/rootfs/etc" "$scratch/rootfs/tmp" "$scratch/w"
cp /bin/busybox "$scratch/rootfs/bin/"
for a in sh true cat ls; do ln -s busybox "$scratch/rootfs/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' >"$scratch/rootfs/etc/passwd"
tar -C "$scratch/rootfs" -cf "$scratch/busybox.tar" .
chmod 755 "$scratch" "$scratch/w"
if [ "$(id -u)" = 0 ]; then chown nobody "$scratch/w"; fi

"$vg" image import "$scratch/busybox.tar" --tag vg-bench-busybox >/dev/null 2>&1
# Podman on these machines: runc (crun rejects the hybrid cgroups) and no default
# ulimits (its default nofile limit exceeds the hard limit).
if [ ! -e /etc/containers/containers.conf ] || ! grep -q '^default_ulimits' /etc/containers/containers.conf; then
  mkdir -p /etc/containers
  printf '[containers]\ndefault_ulimits = []\n' >>/etc/containers/containers.conf
fi
podman import "$scratch/busybox.tar" localhost/vg-bench-busybox >/dev/null
podman --runtime runc run --rm --network none localhost/vg-bench-busybox /bin/true

cd "$scratch/w"
json="$scratch/start.json"
hyperfine -N --warmup 3 --runs "$runs" --export-json "$json" \
  -n image "$vg sandbox run --image vg-bench-busybox -- /bin/true" \
  -n image-no-record "$vg sandbox run --no-record --image vg-bench-busybox -- /bin/true" \
  -n native "$vg sandbox run -- /bin/true" \
  -n podman "podman --runtime runc run --rm --network none localhost/vg-bench-busybox /bin/true" \
  >/dev/null

python3 - "$json" "$runs" <<'PY'
import json, statistics, sys
t = {r["command"]: statistics.median(r["times"]) * 1e3 for r in json.load(open(sys.argv[1]))["results"]}
print(f"warm start from an image, median of {sys.argv[2]} runs each")
print(f"  sandbox run --image X -- /bin/true         : {t['image']:7.2f} ms  (recorded)")
print(f"  sandbox run --no-record --image X           : {t['image-no-record']:7.2f} ms")
print(f"  sandbox run -- /bin/true (native default)   : {t['native']:7.2f} ms")
print(f"  podman --runtime runc run --rm ... X        : {t['podman']:7.2f} ms")
print(f"  image / native                              : {t['image'] / t['native']:7.2f}x   (target <= 2x)")
print(f"  podman / image                              : {t['podman'] / t['image']:7.1f}x   (target >= 10x)")
PY
