#!/usr/bin/env python3
"""Keystroke-to-echo latency of `vectraguard sandbox shell` against the same shell
on a plain pseudo-terminal, measured in the same run.

This script plays the terminal emulator: it types one key at a time and waits for
its echo. On the plain terminal the kernel echoes at once. Through Vectra Guard the
key goes through the input relay to the sandbox's own terminal, whose echo comes back
through the output relay (which also writes stdout.log and tty.cast). The difference
between the two medians is what the relays add.

Usage: bench/tty_latency.py [KEYS]   (run from the repository root, after a release build)
"""
import os
import pty
import shutil
import select
import statistics
import sys
import tempfile
import time

KEYS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
VG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "vectraguard")
PROMPT = b"bench-prompt$ "


def read_until(fd, needle, timeout=20.0):
    buf = b""
    end = time.monotonic() + timeout
    while needle not in buf:
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {needle!r} in {buf[-200:]!r}")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            buf += os.read(fd, 65536)
    return buf


def measure(argv, env, cwd):
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execvpe(argv[0], argv, env)
    read_until(fd, PROMPT)
    samples = []
    for i in range(KEYS):
        start = time.perf_counter_ns()
        os.write(fd, b"x")
        read_until(fd, b"x")
        samples.append((time.perf_counter_ns() - start) / 1000)
        if i % 50 == 49:
            # Erase the line (Ctrl-U) so it never wraps.
            os.write(fd, b"\x15")
            time.sleep(0.01)
            while select.select([fd], [], [], 0.01)[0]:
                os.read(fd, 65536)
    os.write(fd, b"\x15exit\r")
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass
    os.waitpid(pid, 0)
    return samples


def main():
    work = tempfile.mkdtemp(prefix="vg-bench-tty.")
    os.chmod(work, 0o755)
    ws = os.path.join(work, "ws")
    os.mkdir(ws)
    if os.getuid() == 0:
        os.chown(ws, 65534, 65534)  # the sandbox runs as the workspace owner, never root
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "TERM": "xterm",
        "PS1": PROMPT.decode(),
        "VECTRAGUARD_HOME": os.path.join(work, "home"),
    }
    try:
        plain = measure(["/bin/sh"], env, ws)
        sandboxed = measure(
            [VG, "sandbox", "shell", "--shell", "/bin/sh", "--env", "PS1=" + PROMPT.decode()],
            env,
            ws,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    p, s = statistics.median(plain), statistics.median(sandboxed)
    print(f"keystroke-to-echo latency, median of {KEYS} keys each")
    print(f"  /bin/sh on a plain pty             : {p:8.1f} us")
    print(f"  vectraguard sandbox shell (/bin/sh): {s:8.1f} us")
    print(f"  added by the relays                : {s - p:8.1f} us")
    print(f"  p95 through vectraguard            : {statistics.quantiles(sandboxed, n=20)[-1]:8.1f} us")


if __name__ == "__main__":
    main()
