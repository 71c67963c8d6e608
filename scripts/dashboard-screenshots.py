#!/usr/bin/env python3
"""Makes the README's dashboard screenshots (docs/dashboard-sessions.png,
docs/dashboard-session.png) from real sessions: a few recorded runs of different kinds
in a throwaway VECTRAGUARD_HOME, one of them still running with a connection made,
shown by `vectraguard dashboard` in headless Chromium (Debian's chromium and
chromium-driver; see bench/dashboard.py, whose browser and dashboard drivers it uses).

Usage: scripts/dashboard-screenshots.py [OUT_DIR]   (default docs/; VG=path/to/vectraguard
  overrides target/release/vectraguard; as root the sandboxes run as `nobody`)
"""
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.dont_write_bytecode = True  # no __pycache__ left in bench/
import dashboard as bench  # noqa: E402  (bench/dashboard.py)

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs")


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main():
    scratch = tempfile.mkdtemp(prefix="vg-screenshots.")
    os.chmod(scratch, 0o755)
    home, ws = os.path.join(scratch, "home"), os.path.join(scratch, "ws")
    os.makedirs(home)
    os.makedirs(ws)
    if os.getuid() == 0:
        shutil.chown(ws, "nobody")
    env = dict(os.environ, VECTRAGUARD_HOME=home)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    vg = bench.VG

    def run(*args, check=False):
        return subprocess.run([vg, "sandbox", "run", "-q", *args], cwd=ws, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=check)

    run("--name", "lint", "--agent", "codex", "--", "sh", "-c", "ls -la; grep -c . /etc/passwd")
    run("--name", "unit-tests", "--agent", "claude", "--", "sh", "-c",
        "for t in parse render store; do echo test $t ok; done; echo 'test net FAILED' >&2; exit 1")
    run("--name", "cleanup", "--agent", "claude", "--ask", "high", "--approval-timeout", "1s",
        "--", "sh", "-c", "rm -rf /tmp/cache; echo done")
    run("--name", "long-build", "--timeout", "1s", "--", "sh", "-c", "sleep 5")
    # The one still running: fetches from a local server by name, runs a few tools,
    # then waits on a FIFO (a builtin read: no more execs) until the screenshots are taken.
    script = (f"curl -s -o /dev/null http://registry.test:{port}/; "
              "python3 -c 'print(sum(range(10**6)))'; git --version; "
              "mkfifo wait; read line < wait")
    live = subprocess.Popen(
        [vg, "sandbox", "run", "-q", "--name", "fetch-deps", "--agent", "claude",
         "--add-host", "registry.test:127.0.0.1", "--allow", f"registry.test:{port}",
         "--", "bash", "-c", script],
        cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dash = bench.Dashboard(home)
    browser = None
    try:
        import json

        def running_id():
            out = subprocess.run([vg, "ps", "--json"], env=env, capture_output=True, text=True)
            listed = json.loads(out.stdout or "[]")
            return listed[0]["id"] if listed else None
        sid = bench.wait_for("the running session", 30, running_id)
        browser = bench.Browser(scratch)
        browser.goto(dash.url)
        bench.wait_for("the sessions table", 20, lambda: browser.js(
            "return document.querySelectorAll('table#sessions tr[data-session-id]').length >= 5;"))
        os.makedirs(OUT, exist_ok=True)
        shot(browser, os.path.join(OUT, "dashboard-sessions.png"))
        browser.goto(f"http://{dash.host}:{dash.port}/sessions/{sid}")
        bench.wait_for("the connection and the commands", 30, lambda: browser.js(
            "return document.querySelectorAll('table#network tr[data-dest]').length > 0"
            " && Array.from(document.querySelectorAll('table#commands tr[data-exec]'))"
            "   .some(r => r.textContent.includes('mkfifo'));"))
        shot(browser, os.path.join(OUT, "dashboard-session.png"), height=1900)
        with open(os.path.join(ws, "wait"), "w") as fifo:
            fifo.write("done\n")
        live.wait(30)
    finally:
        if browser:
            browser.close()
        if live.poll() is None:
            live.kill()
            live.wait()
        dash.stop()
        server.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)


def shot(browser, path, height=760):
    import base64
    browser.call("POST", f"/session/{browser.session}/window/rect", {"width": 1280, "height": height})
    png = browser.call("GET", f"/session/{browser.session}/screenshot")
    with open(path, "wb") as f:
        f.write(base64.b64decode(png))
    print(path)


if __name__ == "__main__":
    main()
