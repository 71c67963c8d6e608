#!/usr/bin/env python3
"""The dashboard's two figures (issue 20):

(a) live latency: from an exec in the sandbox to its row in an open session page.
    A recorded session runs a script that, for each of EXECS steps, writes the wall
    clock (bash's $EPOCHREALTIME, microseconds) and at once execs `/bin/true
    vg-lat-N` (a subshell: the time is taken in the very process that then execs).
    Headless Chromium (Debian's, through chromedriver's WebDriver on loopback) shows
    that session's page; a MutationObserver injected through WebDriver notes
    `performance.timeOrigin + performance.now()` when each `tr[data-exec]` row is
    added. Latency = row time - exec time. Target: <= 100 ms median.
(b) the sessions list at 10,000 sessions: a throwaway VECTRAGUARD_HOME filled with
    SESSIONS finished sessions by the vg-records example `many_sessions` (written
    through SessionStore, as the supervisor writes them), then the dashboard's
    `/api/sessions` first page, second page (its cursor), filtered pages (agent and
    status; name; a time range) and the sessions page `/` itself, each timed RUNS
    times in turn over one kept-alive connection (request sent -> body read: the
    server's time plus a loopback round trip). The first request after start is
    reported alone. Target: <= 200 ms median.

Usage: bench/dashboard.py [RUNS] [EXECS]   (run from the repository root; needs python3,
  chromium and chromium-driver for (a); VG=path/to/vectraguard overrides the release
  build; VG_SESSIONS=N (default 10000); VG_PARTS=a or b runs one part)
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

RUNS, EXECS = 50, 50  # set from the arguments by main()
PARTS = os.environ.get("VG_PARTS", "ab")
SESSIONS = int(os.environ.get("VG_SESSIONS", "10000"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VG = os.path.abspath(os.environ.get("VG", os.path.join(ROOT, "target/release/vectraguard")))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
MANY = os.path.join(TARGET, "release/examples/many_sessions")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,900"]


def build():
    if "VG" not in os.environ and not os.path.exists(VG):
        subprocess.run(["cargo", "build", "--release", "-p", "vectraguard"], cwd=ROOT, check=True)
    if "b" in PARTS and not os.path.exists(MANY):
        subprocess.run(["cargo", "build", "--release", "-p", "vg-records", "--example",
                        "many_sessions"], cwd=ROOT, check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, deadline, condition):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise SystemExit(f"dashboard bench: waited {deadline} s for {what}, in vain")


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, round((len(values) - 1) * p / 100))]


class Dashboard:
    """`vectraguard dashboard --listen 127.0.0.1:0` on `home`; its URL from stdout."""

    def __init__(self, home):
        env = dict(os.environ, VECTRAGUARD_HOME=home)
        started = time.perf_counter()
        self.proc = subprocess.Popen([VG, "dashboard", "--listen", "127.0.0.1:0"], env=env,
                                     stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
        line = self.proc.stdout.readline()
        self.start_time = time.perf_counter() - started
        match = re.search(r"http://([0-9.]+):(\d+)/\?token=([0-9a-f]{64})", line)
        if not match:
            self.stop()
            raise SystemExit(f"dashboard bench: no URL in the dashboard's first line: {line!r}")
        self.url = match.group(0)
        self.host, self.port, self.token = match.group(1), int(match.group(2)), match.group(3)

    def connection(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=30)

    def get(self, conn, path):
        """One request on `conn`; returns (seconds, status, body)."""
        t = time.perf_counter()
        conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
        resp = conn.getresponse()
        body = resp.read()
        return time.perf_counter() - t, resp.status, body

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Browser:
    """Headless Chromium through its own chromedriver; every process it starts carries
    its scratch folder's name, by which the teardown ends any left behind."""

    def __init__(self, scratch):
        self.dir = tempfile.mkdtemp(prefix="vg-bench-browser.", dir=scratch)
        port = free_port()
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.dir}
        self.driver = subprocess.Popen(
            [CHROMEDRIVER, f"--port={port}", f"--log-path={self.dir}/chromedriver.log"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{port}"

        def up():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False
        wait_for("chromedriver to listen", 20, up)
        caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": CHROMIUM, "args": FLAGS + [f"--user-data-dir={self.dir}/profile"]}}}}
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = json.dumps(body if body is not None else {}).encode() if method == "POST" else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.load(resp)["value"]

    def goto(self, url):
        self.call("POST", f"/session/{self.session}/url", {"url": url})

    def js(self, script, *args):
        return self.call("POST", f"/session/{self.session}/execute/sync",
                         {"script": script, "args": list(args)})

    def close(self):
        try:
            self.call("DELETE", f"/session/{self.session}")
        except OSError:
            pass
        self.driver.kill()
        self.driver.wait()
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if self.dir.encode() in f.read():
                        os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


# Notes each added exec row with the page's wall clock (ms since the epoch, sub-ms).
OBSERVER = """
window.__vgRows = [];
const seen = node => {
  if (node.nodeType !== 1) return;
  const rows = node.matches('tr[data-exec]') ? [node] : node.querySelectorAll('tr[data-exec]');
  for (const row of rows) {
    window.__vgRows.push({t: performance.timeOrigin + performance.now(), text: row.textContent});
  }
};
new MutationObserver(records => {
  for (const r of records) for (const n of r.addedNodes) seen(n);
}).observe(document.body, {childList: true, subtree: true});
return true;
"""

SCRIPT = r"""#!/bin/bash
# Waits for the page to be open (the `go` file), then runs EXECS execs, each timed in
# the process that execs: a subshell writes $EPOCHREALTIME, then becomes /bin/true.
until [ -e go ]; do sleep 0.05; done
for i in $(seq 1 "$1"); do
  (echo "$i $EPOCHREALTIME" >> times; exec /bin/true "vg-lat-$i")
  sleep 0.2
done
"""


def latency(scratch):
    home = os.path.join(scratch, "home-a")
    ws = os.path.join(scratch, "ws")
    os.makedirs(home)
    os.makedirs(ws)
    with open(os.path.join(ws, "lat.sh"), "w") as f:
        f.write(SCRIPT)
    if os.getuid() == 0:
        # As root the sandbox runs as the workspace's owner, who must not be root.
        shutil.chown(ws, "nobody")
    env = dict(os.environ, VECTRAGUARD_HOME=home)
    dash = Dashboard(home)
    browser = run = None
    try:
        run = subprocess.Popen([VG, "sandbox", "run", "-q", "--name", "latency", "--",
                                "bash", "./lat.sh", str(EXECS)], cwd=ws, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        def running_id():
            out = subprocess.run([VG, "ps", "--json"], env=env, capture_output=True, text=True)
            listed = json.loads(out.stdout or "[]")
            return listed[0]["id"] if listed else None
        sid = wait_for("the session to run", 30, running_id)
        browser = Browser(scratch)
        browser.goto(dash.url)
        browser.goto(f"http://{dash.host}:{dash.port}/sessions/{sid}")
        wait_for("the session page's commands table", 20,
                 lambda: browser.js("return !!document.querySelector('table#commands');"))
        browser.js(OBSERVER)
        open(os.path.join(ws, "go"), "w").close()
        if run.wait(EXECS * 2 + 60) != 0:
            raise SystemExit(f"dashboard bench: the sandboxed script failed: {run.stderr.read()}")

        def all_rows():
            rows = browser.js("return window.__vgRows;")
            marks = {m.group(1): r["t"] for r in rows
                     for m in [re.search(r"vg-lat-(\d+)\b", r["text"])] if m}
            return marks if len(marks) >= EXECS else None
        rows = wait_for("every exec's row", 30, all_rows)
        with open(os.path.join(ws, "times")) as f:
            execs = dict(line.split() for line in f)
        lat = [rows[i] - float(t) * 1000 for i, t in execs.items()]
        print(f"(a) exec in the sandbox -> its row in the open session page, {len(lat)} execs")
        print(f"    median {statistics.median(lat):6.1f} ms   p90 {pct(lat, 90):6.1f} ms"
              f"   min {min(lat):6.1f} ms   max {max(lat):6.1f} ms   (target <= 100 ms median)")
    finally:
        if browser:
            browser.close()
        if run and run.poll() is None:
            run.kill()
            run.wait()
        dash.stop()


def sessions_list(scratch):
    home = os.path.join(scratch, "home-b")
    os.makedirs(home)
    made = time.perf_counter()
    subprocess.run([MANY, str(SESSIONS), home], check=True, stdout=subprocess.DEVNULL)
    made = time.perf_counter() - made
    dash = Dashboard(home)
    try:
        conn = dash.connection()
        first, status, body = dash.get(conn, "/api/sessions")
        if status != 200:
            raise SystemExit(f"dashboard bench: /api/sessions answered {status}: {body[:300]!r}")
        page = json.loads(body)
        if page.get("total") != SESSIONS:
            raise SystemExit(f"dashboard bench: total {page.get('total')}, expected {SESSIONS}")
        now = time.time()
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 10 * 24 * 3600))
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 9 * 24 * 3600))
        q = urllib.parse.quote
        paths = {
            "first page": "/api/sessions",
            "second page (cursor)": "/api/sessions?cursor=" + q(str(page.get("next") or "")),
            "agent + status": "/api/sessions?agent=agent-1&status=timeout",
            "name": "/api/sessions?name=job-42",
            "one day (since/until)": f"/api/sessions?since={q(since)}&until={q(until)}",
            "sessions page /": "/",
        }
        times = {k: [] for k in paths}
        totals = {}
        for _ in range(RUNS):
            for label, path in paths.items():
                t, status, body = dash.get(conn, path)
                if status != 200:
                    raise SystemExit(f"dashboard bench: {path} answered {status}: {body[:300]!r}")
                times[label].append(t * 1000)
                if path.startswith("/api/"):
                    reply = json.loads(body)
                    totals[label] = f"{len(reply['sessions'])} of {reply['total']}"
        print(f"(b) {SESSIONS} sessions (written in {made:.1f} s), {RUNS} requests each, "
              "in turn, one kept-alive connection")
        print(f"    start-up (until the URL is printed): {dash.start_time * 1000:7.1f} ms")
        print(f"    first request after start: {first * 1000:7.1f} ms")
        for label, ms in times.items():
            shown = totals.get(label, "html")
            print(f"    {label:24} median {statistics.median(ms):7.1f} ms   p90 {pct(ms, 90):7.1f} ms"
                  f"   ({shown}; target <= 200 ms)")
    finally:
        dash.stop()


def main():
    global RUNS, EXECS
    RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else RUNS
    EXECS = int(sys.argv[2]) if len(sys.argv) > 2 else EXECS
    build()
    scratch = tempfile.mkdtemp(prefix="vg-bench-dashboard.")
    os.chmod(scratch, 0o755)
    try:
        if "a" in PARTS:
            latency(scratch)
        if "b" in PARTS:
            sessions_list(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
