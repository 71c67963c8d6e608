#!/usr/bin/env python3
"""Backends, interleaved (as bench/startup-interleaved.py): the start of /bin/true on
each backend in the same sitting, against the runtime used directly, and a
syscall-heavy workload's slowdown under gVisor.

  (a) start: `sandbox run [--backend B] -- /bin/true`, recorded and `--no-record`
      (gVisor, Docker and Podman also with `--network allow`, the mediated network),
      against bare `runsc --rootless --network=none do /bin/true` (the target: our
      gVisor start <= 1.2x bare runsc) and bubblewrap; with VG_ENGINES=1 also
      docker and podman (`docker run --rm --network none IMAGE /bin/true`, image
      VG_IMAGE, default vg-bench-busybox, made by the engine tests' set-up).
  (b) a syscall-heavy workload (100,000 stat calls and 2,000 file creations in
      Python) native vs gVisor, `--no-record`: the slowdown of gVisor's kernel.

      Also `--no-record` (the engine's own init, no exec records) and, with
      VG_BASELINE=PATH (another build, e.g. main's), that build's recorded start,
      interleaved with ours. VG_ONLY_ENGINES=1 measures the engine rows alone (and
      bubblewrap, the yardstick), without (b).

Usage: bench/backends.py [ROUNDS]   (run as root; release build in target/release)"""
import os, random, shutil, statistics, subprocess, sys, tempfile, time

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
vg = os.environ.get("VG_BIN", os.path.join(root, "target/release/vectraguard"))
runsc = shutil.which("runsc") or "/usr/bin/runsc"
ws = tempfile.mkdtemp(prefix="vg-bench.")
os.environ["VECTRAGUARD_HOME"] = ws + ".home"
if os.getuid() == 0:
    os.chown(ws, 65534, 65534)
os.chmod(ws, 0o755)
state = tempfile.mkdtemp(prefix="vg-bench-runsc.")
state_nobody = tempfile.mkdtemp(prefix="vg-bench-runsc-nobody.")
if os.getuid() == 0:
    os.chown(state_nobody, 65534, 65534)


def run(*flags, cmd=("/bin/true",), binary=None):
    return [binary or vg, "sandbox", "run", *flags, "--", *cmd]

only_engines = bool(os.environ.get("VG_ONLY_ENGINES"))
baseline = os.environ.get("VG_BASELINE")


start = {
    "native recorded": run(),
    "native no-record": run("--no-record"),
    "gvisor recorded": run("--backend", "gvisor"),
    "gvisor no-record": run("--backend", "gvisor", "--no-record"),
    # The mediated network: the keeper's namespaces and TUN, and the mediator.
    "gvisor recorded, network allow": run("--backend", "gvisor", "--network", "allow"),
    "bare runsc do": [runsc, "--root", state, "--rootless", "--network=none", "--ignore-cgroups", "do", "/bin/true"],
    # As the user our backend runs runsc as (the workspace's owner, nobody here):
    # rootless runsc then re-executes itself in a user namespace, as ours does.
    "bare runsc do, nobody": ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                              runsc, "--root", state_nobody, "--rootless", "--network=none",
                              "--ignore-cgroups", "do", "/bin/true"],
    "bwrap": "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --new-session /bin/true".split(),
}
if only_engines:
    start = {"bwrap": start["bwrap"]}
if os.environ.get("VG_ENGINES") or only_engines:
    image = os.environ.get("VG_IMAGE", "vg-bench-busybox")
    for engine in ("docker", "podman"):
        if shutil.which(engine):
            start[f"{engine} recorded"] = run("--backend", engine, "--image", image)
            start[f"{engine} no-record"] = run("--backend", engine, "--image", image, "--no-record")
            # The mediated network: tun0 made in the container's namespace before the go.
            start[f"{engine} recorded, network allow"] = run("--backend", engine, "--image", image, "--network", "allow")
            if baseline:
                start[f"{engine} baseline"] = run("--backend", engine, "--image", image, binary=baseline)
            start[f"bare {engine} run"] = [engine, "run", "--rm", "--network", "none", image, "/bin/true"]

workload = (
    "import os\n"
    "for i in range(100000): os.stat('/usr/bin')\n"
    "for i in range(2000):\n"
    "    with open('/tmp/f%d' % i, 'w') as f: f.write('x')\n"
)
heavy = {
    "native": run("--no-record", cmd=("python3", "-c", workload)),
    "gvisor": run("--backend", "gvisor", "--no-record", cmd=("python3", "-c", workload)),
}


def measure(cmds, n, warmup=3):
    times = {k: [] for k in cmds}
    for r in range(n + warmup):
        order = list(cmds)
        random.shuffle(order)
        for k in order:
            t0 = time.perf_counter()
            subprocess.run(cmds[k], cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            if r >= warmup:
                times[k].append((time.perf_counter() - t0) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


try:
    m = measure(start, rounds)
    h = None if only_engines else measure(heavy, max(3, rounds // 5), warmup=1)
finally:
    shutil.rmtree(ws, ignore_errors=True)
    shutil.rmtree(ws + ".home", ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(state_nobody, ignore_errors=True)
print(f"(a) start of /bin/true, interleaved, median of {rounds} rounds")
for k in start:
    print(f"  {k:22s} {m[k]:8.2f} ms  ({m[k] / m['bwrap']:5.2f}x bwrap)")
if not only_engines:
    print(f"  gvisor recorded / bare runsc do  {m['gvisor recorded'] / m['bare runsc do']:5.2f}x  (target <= 1.2x)")
    print(f"  gvisor no-record / bare runsc do {m['gvisor no-record'] / m['bare runsc do']:5.2f}x")
    print(f"  gvisor recorded / bare runsc do as the same user  {m['gvisor recorded'] / m['bare runsc do, nobody']:5.2f}x")
    print(f"  gvisor no-record / bare runsc do as the same user {m['gvisor no-record'] / m['bare runsc do, nobody']:5.2f}x")
for engine in ("docker", "podman"):
    if f"{engine} recorded" in m:
        bare = m['bare ' + engine + ' run']
        print(f"  {engine} recorded / bare {engine} run {m[engine + ' recorded'] / bare:5.2f}x  (target <= 1.1x)")
        print(f"  {engine} no-record / bare {engine} run {m[engine + ' no-record'] / bare:5.2f}x")
        if baseline:
            print(f"  {engine} baseline recorded / bare {engine} run {m[engine + ' baseline'] / bare:5.2f}x")
if h:
    print(f"(b) syscall-heavy workload, median of {max(3, rounds // 5)} rounds")
    print(f"  native {h['native']:8.1f} ms   gvisor {h['gvisor']:8.1f} ms   slowdown {h['gvisor'] / h['native']:5.2f}x")
