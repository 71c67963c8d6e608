#!/usr/bin/env bash
# Unpack throughput of a ~200 MB image: `vectraguard image import` of a root
# filesystem tarball (copy into the store with SHA-256, hash the layer's content,
# unpack it safely into the rootfs cache, fsync and rename into place) vs plain
# `tar -xf` of the same tarball, in the same run, medians. Each run starts from an
# empty store (`image rm` before it).
# The tarball holds the first 200 MiB of regular files, symlinks and directories
# found under the host's /usr/lib (sorted walk), as a stand-in for a distribution image.
#
# Usage: bench/images.sh [RUNS]      (needs hyperfine and python3)
set -euo pipefail
runs=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
vg="$root/target/release/vectraguard"
[ -x "$vg" ] || cargo build --release --manifest-path "$root/Cargo.toml" >&2

scratch=$(mktemp -d /tmp/vg-bench-images.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
export VECTRAGUARD_HOME="$scratch/home"
tarball="$scratch/rootfs.tar"

python3 - "$tarball" <<'PY'
import os, sys, tarfile
limit = 200 << 20
total = 0
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as tar:
    for dirpath, dirnames, filenames in os.walk("/usr/lib"):
        dirnames.sort()
        tar.add(dirpath, arcname=dirpath.lstrip("/"), recursive=False)
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if not (os.path.islink(path) or os.path.isfile(path)):
                continue
            try:
                tar.add(path, arcname=path.lstrip("/"), recursive=False)
            except OSError:
                continue
            if not os.path.islink(path):
                total += os.path.getsize(path)
            if total >= limit:
                break
        if total >= limit:
            break
PY
size=$(stat -c %s "$tarball")
files=$(tar -tf "$tarball" | wc -l)

hyperfine -N --warmup 1 --runs "$runs" --export-json "$scratch/images.json" \
  --prepare "sh -c '$vg image rm bench/big >/dev/null 2>&1 || true'" \
  -n import "$vg image import -q $tarball --tag bench/big" \
  --prepare "sh -c 'rm -rf $scratch/x && mkdir $scratch/x'" \
  -n tar-x "tar -xf $tarball -C $scratch/x" >/dev/null

python3 - "$scratch/images.json" "$runs" "$size" "$files" <<'PY'
import json, statistics, sys
t = {r["command"]: statistics.median(r["times"]) for r in json.load(open(sys.argv[1]))["results"]}
size, files = int(sys.argv[3]), int(sys.argv[4])
mib = size / (1 << 20)
print(f"unpacking a {mib:.0f} MiB image ({files} entries), median of {sys.argv[2]} runs each")
print(f"  vectraguard image import : {t['import']:6.2f} s  {mib / t['import']:6.0f} MiB/s")
print(f"  tar -xf (reference)      : {t['tar-x']:6.2f} s  {mib / t['tar-x']:6.0f} MiB/s")
print(f"  import / tar -xf         : {t['import'] / t['tar-x']:6.2f}x")
PY
