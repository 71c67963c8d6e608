// Vectra Guard dashboard. Plain JavaScript, no build step.
// Everything that comes from a record is put in the page with textContent (via
// el()), never as HTML: a session's argv, output or host names are untrusted.
"use strict";

const app = document.getElementById("app");

// The token: taken from the printed URL's ?token= on first load, kept in
// localStorage (scoped to scheme, host and port: no other server on this host
// can read it, unlike a cookie) and taken out of the address bar at once.
const TOKEN_KEY = "vectraguard-dashboard-token";
const TOKEN = (() => {
  const params = new URLSearchParams(location.search);
  const given = params.get("token");
  if (given !== null) {
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
    if (given) {
      try { localStorage.setItem(TOKEN_KEY, given); } catch (_) { /* kept for this page only */ }
      return given;
    }
  }
  try { return localStorage.getItem(TOKEN_KEY); } catch (_) { return null; }
})();
const auth = () => ({ Authorization: "Bearer " + TOKEN });

// No token, or one this dashboard does not know (it was restarted: a new token):
// nothing can be shown; say what to open.
let locked = false;
function showLocked(stale) {
  if (locked) return;
  locked = true;
  stopLive();
  const state = document.getElementById("live-state");
  state.textContent = "not signed in";
  state.classList.remove("on");
  document.getElementById("pending-count").hidden = true;
  app.replaceChildren(el("div", { id: "no-token", class: "panel" },
    el("h1", { text: stale ? "This dashboard does not know your token" : "Open the dashboard by its URL" }),
    el("p", { text: (stale ? "The token this browser kept is not the current one (the dashboard was restarted, or the link was wrong). " : "This page needs the dashboard's token. ") +
      "Open the URL that `vectraguard dashboard` printed in its terminal: http://HOST:PORT/?token=…" }),
    el("p", { class: "muted", text: "The token is kept in this browser for this address and port only, and sent with each request; it is never a cookie." })));
}
const listeners = []; // handlers of live events for the page shown

// ---------------------------------------------------------------- helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

class Locked extends Error {}

async function api(path, options) {
  if (locked) throw new Locked("not signed in");
  const opts = Object.assign({ credentials: "omit", cache: "no-store" }, options);
  opts.headers = Object.assign({}, opts.headers || {}, auth());
  const response = await fetch(path, opts);
  if (response.status === 401) {
    showLocked(true);
    throw new Locked("not signed in");
  }
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try {
      const body = await response.json();
      if (body.error) message = body.error;
    } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

async function getJson(path) {
  return (await api(path)).json();
}

async function post(path, body) {
  const response = await api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  return response.json();
}

let toastTimer = null;
function toast(message, isError) {
  if (locked) return;
  const t = document.getElementById("toast");
  t.textContent = message;
  t.className = isError ? "error" : "";
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, isError ? 7000 : 3000);
}

function fmtTime(rfc) {
  if (!rfc) return "";
  const d = new Date(rfc);
  if (isNaN(d)) return rfc;
  const pad = (n) => String(n).padStart(2, "0");
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
    pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
}

function duration(start, end) {
  if (!start) return "";
  const ms = (end ? new Date(end) : new Date()) - new Date(start);
  if (!(ms >= 0)) return "";
  if (ms < 10000) return (ms / 1000).toFixed(1) + "s";
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
}

function statusBadge(status, exitCode) {
  let cls = "status " + status;
  if (status === "exited") cls += exitCode === 0 ? " ok" : " fail";
  return el("span", { class: cls, text: status });
}

function exitText(exit) {
  if (!exit) return "";
  if (exit.kind === "code") return String(exit.value);
  if (exit.kind === "signal") return "signal " + exit.value;
  return "denied";
}

function exitCell(exit) {
  const cls = "exit-code" + (exit ? (exit.kind === "code" && exit.value === 0 ? " ok" : " fail") : "");
  return el("td", { class: cls, text: exitText(exit) });
}

// An argv as a shell would need it typed: unambiguous where spaces or quotes are
// part of an argument.
function shellQuote(argv) {
  return (argv || []).map((a) => /^[A-Za-z0-9_\-.,/:=@%+]+$/.test(a) ? a : "'" + String(a).replace(/'/g, "'\\''") + "'").join(" ");
}

function kv(key, value, mono) {
  return el("div", { class: "kv" },
    el("span", { class: "k", text: key }),
    el("span", { class: "v" + (mono ? " mono" : ""), text: value === null || value === undefined || value === "" ? "—" : value }));
}

function setNav(which) {
  for (const id of ["nav-sessions", "nav-approvals"]) {
    document.getElementById(id).classList.toggle("active", id === which);
  }
}

// ---------------------------------------------------------------- live updates

// The live feed: /api/live read with fetch (EventSource cannot send the
// Authorization header) and parsed as server-sent events; reconnected with
// back-off. A reconnection may have missed events: the page is told to resync.
let liveAbort = null;
let liveStopped = false;
function stopLive() {
  liveStopped = true;
  if (liveAbort) liveAbort.abort();
}

function dispatch(kind, raw) {
  let data = {};
  try { data = JSON.parse(raw); } catch (_) { return; }
  if (kind === "approval") refreshPendingCount();
  for (const l of listeners.slice()) l(kind, data);
}

// Splits an SSE stream into events; returns what is left of an unfinished one.
function parseSse(buffer, onEvent) {
  buffer = buffer.replace(/\r\n?/g, "\n");
  let end;
  while ((end = buffer.indexOf("\n\n")) >= 0) {
    const block = buffer.slice(0, end);
    buffer = buffer.slice(end + 2);
    let kind = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue; // a comment: the keep-alive
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") kind = value;
      else if (field === "data") data.push(value);
    }
    if (data.length) onEvent(kind, data.join("\n"));
  }
  return buffer;
}

async function connectLive() {
  const state = document.getElementById("live-state");
  let delay = 500;
  let connectedBefore = false;
  while (!liveStopped) {
    liveAbort = new AbortController();
    try {
      const response = await fetch("/api/live", {
        headers: Object.assign({ Accept: "text/event-stream" }, auth()),
        credentials: "omit",
        cache: "no-store",
        signal: liveAbort.signal,
      });
      if (response.status === 401) { showLocked(true); return; }
      if (!response.ok || !response.body) throw new Error(response.status + " " + response.statusText);
      state.textContent = "live";
      state.classList.add("on");
      delay = 500;
      if (connectedBefore) dispatch("resync", "{}");
      connectedBefore = true;
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = parseSse(buffer + decoder.decode(value, { stream: true }), dispatch);
      }
    } catch (_) { /* reconnected below */ }
    if (liveStopped) return;
    state.textContent = "reconnecting…";
    state.classList.remove("on");
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 10000);
  }
}

let pendingSeq = 0;
async function refreshPendingCount() {
  const seq = ++pendingSeq;
  try {
    const { pending } = await getJson("/api/approvals");
    if (seq !== pendingSeq) return; // a later count is on its way

    const badge = document.getElementById("pending-count");
    badge.textContent = String(pending.length);
    badge.hidden = pending.length === 0;
  } catch (_) { /* shown on the page itself */ }
}

// ---------------------------------------------------------------- sessions page

function sessionsPage() {
  setNav("nav-sessions");
  document.title = "Sessions — Vectra Guard";
  const params = new URLSearchParams(location.search);
  const state = { cursors: [null], page: 0 };
  const agent = el("input", { id: "filter-agent", placeholder: "any agent", value: params.get("agent") || "" });
  const name = el("input", { id: "filter-name", placeholder: "any name", value: params.get("name") || "" });
  const status = el("select", { id: "filter-status" },
    el("option", { value: "", text: "any status" }),
    ...["running", "exited", "signalled", "timeout", "failed-to-start", "interrupted"]
      .map((s) => el("option", { value: s, text: s })));
  status.value = params.get("status") || "";
  const since = el("input", { id: "filter-since", type: "datetime-local" });
  const until = el("input", { id: "filter-until", type: "datetime-local" });
  const tbody = el("tbody");
  const total = el("span", { class: "muted" });
  const prev = el("button", { id: "prev-page", text: "← Newer", disabled: true });
  const next = el("button", { id: "next-page", text: "Older →", disabled: true });
  const table = el("table", { id: "sessions" },
    el("thead", {}, el("tr", {},
      ...["Session", "Name", "Agent", "Command", "Status", "Started", "Duration", "Exit"].map((h) => el("th", { text: h })))),
    tbody);

  const query = () => {
    const q = new URLSearchParams();
    if (agent.value.trim()) q.set("agent", agent.value.trim());
    if (name.value.trim()) q.set("name", name.value.trim());
    if (status.value) q.set("status", status.value);
    if (since.value) q.set("since", new Date(since.value).toISOString());
    if (until.value) q.set("until", new Date(until.value).toISOString());
    q.set("limit", "50");
    const c = state.cursors[state.page];
    if (c) q.set("cursor", c);
    return q;
  };

  const row = (s) => el("tr", { dataset: { sessionId: s.id } },
    el("td", { class: "mono nowrap" }, el("a", { href: "/sessions/" + encodeURIComponent(s.id), text: s.id })),
    el("td", { class: "nowrap", text: s.name || "" }),
    el("td", { text: s.agent || "" }),
    el("td", { class: "cmd" }, el("span", { class: "clamp", title: s.command_line || "", text: s.command_line || shellQuote(s.command) })),
    el("td", { class: "status-cell" }, statusBadge(s.status, s.exit_code)),
    el("td", { class: "started nowrap", text: fmtTime(s.started) }),
    el("td", { text: duration(s.started, s.ended) }),
    el("td", { class: "exit-code", text: s.exit_code === null || s.exit_code === undefined ? "" : String(s.exit_code) }));

  // Only the newest load is shown: an older answer may finish last.
  let loadSeq = 0;
  let loading = false;
  async function load() {
    const seq = ++loadSeq;
    loading = true;
    try {
      const data = await getJson("/api/sessions?" + query().toString());
      if (seq !== loadSeq) return;
      loading = false;
      tbody.replaceChildren(...data.sessions.map(row));
      if (data.sessions.length === 0) {
        tbody.append(el("tr", {}, el("td", { colspan: 8, class: "empty", text: "No sessions match." })));
      }
      // .status is the badge inside the cell: what tests and readers look at.
      for (const tr of tbody.querySelectorAll("tr[data-session-id]")) {
        tr.querySelector(".status-cell > span").classList.add("status");
      }
      total.textContent = data.total + " session" + (data.total === 1 ? "" : "s");
      state.cursors[state.page + 1] = data.next;
      next.disabled = !data.next;
      prev.disabled = state.page === 0;
    } catch (e) {
      if (seq === loadSeq) loading = false;
      toast(e.message, true);
    }
  }

  let timer = null;
  const reload = () => { clearTimeout(timer); timer = setTimeout(() => { state.page = 0; state.cursors = [null]; load(); }, 200); };
  for (const input of [agent, name]) input.addEventListener("input", reload);
  for (const input of [status, since, until]) input.addEventListener("change", reload);
  next.addEventListener("click", () => { if (state.cursors[state.page + 1]) { state.page++; load(); } });
  prev.addEventListener("click", () => { if (state.page > 0) { state.page--; load(); } });

  const fresh = new Set();
  let startedTimer = null;
  listeners.push((kind, data) => {
    if (kind === "resync") { load(); return; }
    if (kind !== "session") return;
    const tr = tbody.querySelector('tr[data-session-id="' + CSS.escape(data.session) + '"]');
    if (data.change === "started" && state.page === 0) {
      // Many sessions starting at once make one reload.
      fresh.add(data.session);
      clearTimeout(startedTimer);
      startedTimer = setTimeout(() => load().then(() => {
        for (const id of fresh) {
          const tr = tbody.querySelector('tr[data-session-id="' + CSS.escape(id) + '"]');
          if (tr) tr.classList.add("row-new");
        }
        fresh.clear();
      }), 30);
    } else if (data.change === "removed" && tr) {
      tr.remove();
    } else if (tr && data.row) {
      tr.replaceWith(row(data.row));
    } else if (!tr && loading) {
      // The rows on their way may predate this change: load again.
      load();
    }
  });

  app.replaceChildren(
    el("h1", { text: "Sessions" }),
    el("div", { class: "filters" },
      el("label", {}, "Agent", agent),
      el("label", {}, "Name", name),
      el("label", {}, "Status", status),
      el("label", {}, "Started after", since),
      el("label", {}, "Started before", until)),
    el("div", { class: "panel flush" }, table, el("div", { class: "pager" }, total, el("div", { class: "chips" }, prev, next))));
  load();
}

// ---------------------------------------------------------------- one session

function destOf(e) {
  return (e.name || e.address || e.host || "?") + ":" + e.port;
}

function hostOf(e) {
  return e.name || e.address || e.host || "";
}

function decisionWord(d) {
  if (d === "allow" || d === "allowed") return "allowed";
  if (d === "deny" || d === "denied") return "denied";
  return d || "";
}

async function sessionPage(id) {
  setNav("nav-sessions");
  document.title = id + " — Vectra Guard";
  // Live events are taken from before the first fetch, and kept until the page
  // is built: an exec, an approval or the end that happens while it loads would
  // otherwise be in neither the fetched records nor the applied events.
  let early = [];
  let handle = null;
  listeners.push((kind, data) => { if (handle) handle(kind, data); else early.push([kind, data]); });
  let info;
  try {
    info = await getJson("/api/sessions/" + encodeURIComponent(id));
  } catch (e) {
    handle = () => {}; // nothing to keep events for
    if (e instanceof Locked) return;
    app.replaceChildren(el("h1", { text: "Session not found" }), el("p", { class: "muted", text: e.message }),
      el("a", { href: "/", text: "← All sessions" }));
    return;
  }
  id = info.id;
  let running = info.running;
  const m = info.metadata;
  const enc = encodeURIComponent(id);

  // Header.
  const statusEl = statusBadge(info.status, m.exit_code);
  statusEl.id = "session-status";
  const stopBtn = el("button", { id: "stop-session", class: "danger", text: "Stop session", disabled: !running });
  stopBtn.addEventListener("click", async () => {
    try { await post("/api/sessions/" + enc + "/stop", { kill: false }); toast("Stopping " + id); }
    catch (e) { toast(e.message, true); }
  });
  // The archive needs the token, which a plain link cannot send: fetched, then
  // saved from an object URL.
  const download = el("a", { id: "download", href: "/api/sessions/" + enc + "/archive", download: id + ".tar.gz" },
    el("button", { text: "Download .tar.gz" }));
  download.addEventListener("click", async (ev) => {
    ev.preventDefault();
    try {
      const blob = await (await api("/api/sessions/" + enc + "/archive")).blob();
      const url = URL.createObjectURL(blob);
      const save = el("a", { href: url, download: id + ".tar.gz", hidden: true });
      document.body.append(save);
      save.click();
      save.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (e) { toast(e.message, true); }
  });
  const integrity = el("div", { id: "integrity", class: "integrity " + (info.integrity.ok ? "ok" : "bad"), text: info.integrity.message });
  const problems = el("ul", { class: "mono muted" }, ...(info.integrity.problems || []).map((p) => el("li", { text: p })));

  // Metadata and layers.
  const layers = info.layers || {};
  const ns = (layers.namespaces || []).map((n) => el("span", { class: "chip", text: n }));
  const layerChips = el("div", { class: "chips" },
    el("span", { class: "chip" + (layers.landlock_abi ? "" : " off"), text: "landlock " + (layers.landlock_abi ? "ABI " + layers.landlock_abi : "off") }),
    el("span", { class: "chip" + (layers.seccomp ? "" : " off"), text: "seccomp " + (layers.seccomp || "off") }),
    el("span", { class: "chip" + (layers.no_new_privs ? "" : " off"), text: "no_new_privs" }),
    el("span", { class: "chip" + (layers.cgroup_version ? "" : " off"), text: "cgroup " + (layers.cgroup_version || "none") }),
    el("span", { class: "chip", text: "caps: " + ((layers.capabilities || []).length ? layers.capabilities.join(",") : "none") }),
    ...ns);
  const limits = info.limits || {};
  const limitText = [
    limits.memory_bytes ? "memory " + Math.round(limits.memory_bytes / 1048576) + " MiB" : null,
    limits.cpus ? "cpus " + limits.cpus : null,
    limits.pids ? "pids " + limits.pids : null,
    limits.timeout_secs ? "timeout " + limits.timeout_secs + "s" : null,
    limits.disk_bytes ? "disk " + Math.round(limits.disk_bytes / 1048576) + " MiB" : null,
  ].filter(Boolean).join(" · ");
  const endedEl = el("span", { class: "v", text: m.end_time ? fmtTime(m.end_time) : "—" });
  const exitEl = el("span", { class: "v", text: m.exit_code === null || m.exit_code === undefined ? "—" : String(m.exit_code) });
  const metaGrid = el("div", { class: "grid" },
    kv("Name", m.name), kv("Agent", m.agent), kv("Origin", m.origin),
    kv("Command", m.script || (m.command || []).join(" "), true),
    kv("Started", fmtTime(m.start_time)),
    el("div", { class: "kv" }, el("span", { class: "k", text: "Ended" }), endedEl),
    el("div", { class: "kv" }, el("span", { class: "k", text: "Exit code" }), exitEl),
    kv("Working directory", m.cwd_inside || m.cwd, true),
    kv("Host directory", m.cwd_outside, true),
    kv("Image", m.image), kv("Network", (info.network && info.network.mode) || "none"),
    kv("Rules", ((info.network && info.network.rules) || []).join(", "), true),
    kv("Limits", limitText), kv("User", m.user && (m.user.name || m.user.uid)),
    kv("Version", m.version));
  if (m.prompt) metaGrid.append(kv("Prompt", m.prompt));
  if (m.error) metaGrid.append(kv("Error", m.error));

  // Commands.
  const cmdBody = el("tbody");
  const commands = el("table", { id: "commands" },
    el("thead", {}, el("tr", {}, ...["Time", "PID", "PPID", "Command", "Working dir", "Exit"].map((h) => el("th", { text: h })))),
    cmdBody);
  const depth = new Map(); // pid -> depth, for the exec tree's indentation
  const execRow = (x) => {
    const d = depth.has(x.ppid) ? depth.get(x.ppid) + 1 : 0;
    depth.set(x.pid, d);
    return el("tr", { dataset: { exec: "", pid: String(x.pid) } },
      el("td", { class: "mono muted", text: fmtTime(x.time).slice(11) }),
      el("td", { class: "mono", text: String(x.pid) }),
      el("td", { class: "mono muted", text: String(x.ppid) }),
      el("td", { class: "cmd" }, el("span", { class: "tree-indent", text: d ? "  ".repeat(d - 1) + "└ " : "" }),
        el("span", { class: "argv", text: x.command || x.argv.join(" ") }),
        // What the kernel started first (a #! script's interpreter, a program's own
        // loader), which the argv does not show.
        ...(x.interp ? [el("span", { class: "interp muted", text: " (runs " + (x.interp_ran || x.interp) + ")" })] : []),
        // The file its path reached through a symlink, whatever the link names now.
        ...(x.ran ? [el("span", { class: "ran muted", text: " (file " + x.ran + ")" })] : [])),
      el("td", { class: "mono muted", text: x.cwd }),
      exitCell(x.exit));
  };

  // Network.
  const netBody = el("tbody");
  const network = el("table", { id: "network" },
    el("thead", {}, el("tr", {}, ...["Destination", "Decision", "Why", "Connections", ""].map((h) => el("th", { text: h })))),
    netBody);
  const dests = new Map(); // "host:port" -> {row, count}
  // Allow or deny a destination: a live rule for its host; when the row is held
  // for approval, the held request is then decided the same way, so what waits
  // goes on at once (under the rule just added).
  const ruleButtons = (dest, host) => {
    if (!running) return [];
    const act = (action) => async () => {
      const added = await addRule(action, host);
      const d = dests.get(dest);
      if (added && d && d.pending !== undefined) {
        try {
          await post("/api/sessions/" + enc + "/approvals/" + d.pending, { decision: action === "allow" ? "approve" : "deny", scope: "once" });
        } catch (e) { toast(e.message, true); }
        loadPending();
      }
    };
    return [
      el("button", { class: "small good", dataset: { action: "allow", target: host }, text: "Allow", onclick: act("allow") }),
      el("button", { class: "small danger", dataset: { action: "deny", target: host }, text: "Deny", onclick: act("deny") }),
    ];
  };
  const noteDest = (dest, host, decision, why, dns) => {
    let d = dests.get(dest);
    if (!d) {
      const decisionEl = el("span", { class: "decision" });
      const whyEl = el("td", { class: "muted" });
      const countEl = el("td", { class: "mono" });
      // A name looked up (DNS) has no port: its row is data-dns, not data-dest.
      const row = el("tr", { dataset: dns ? { dns: host } : { dest } },
        el("td", { class: "mono" }, dns || dest.endsWith(":0") ? host : dest,
          dns || dest.endsWith(":0") ? el("span", { class: "muted", text: " (name lookup)" }) : null),
        el("td", {}, decisionEl), whyEl, countEl,
        el("td", { class: "actions-cell" }, ...ruleButtons(dest, host)));
      d = { row, decisionEl, whyEl, countEl, count: 0, pending: undefined };
      dests.set(dest, d);
      netBody.append(row);
    }
    if (decision !== "held") { d.count++; d.pending = undefined; }
    d.decisionEl.textContent = decision;
    d.decisionEl.className = "decision " + decision;
    d.whyEl.textContent = why || "";
    d.countEl.textContent = String(d.count);
    return d;
  };
  const netTarget = el("input", { id: "net-target", placeholder: "host, *.domain, IP or CIDR, optionally :PORT", disabled: !running });
  const netAllow = el("button", { id: "net-allow", class: "good", text: "Allow", disabled: !running, onclick: () => addRule("allow", netTarget.value) });
  const netDeny = el("button", { id: "net-deny", class: "danger", text: "Deny", disabled: !running, onclick: () => addRule("deny", netTarget.value) });
  const rulesList = el("div", { class: "chips" });
  async function addRule(action, target) {
    target = (target || "").trim();
    if (!target) { toast("Type a host, domain, address or CIDR first", true); return; }
    try {
      const { rule } = await post("/api/sessions/" + enc + "/net", { action, target });
      toast((rule.action === "allow" ? "Allowed " : "Denied ") + rule.target + " in " + id);
      loadRules();
      return true;
    } catch (e) { toast(e.message, true); return false; }
  }
  async function loadRules() {
    if (!running) return;
    try {
      const { rules } = await getJson("/api/sessions/" + enc + "/net");
      rulesList.replaceChildren(...rules.map((r) => el("span", { class: "chip", text: r.action + " " + r.target + (r.live ? " (live)" : "") })));
    } catch (_) { /* not in allow mode, or ended */ }
  }

  const httpBody = el("tbody");
  const http = el("table", { id: "http" },
    el("thead", {}, el("tr", {}, ...["Time", "Method", "URL", "Status", "Decision", "Bytes"].map((h) => el("th", { text: h })))),
    httpBody);

  // Approvals.
  const apBody = el("tbody");
  const approvals = el("table", { id: "approvals" },
    el("thead", {}, el("tr", {}, ...["#", "Level", "Request", "Reason", "Decide"].map((h) => el("th", { text: h })))),
    apBody);
  const history = el("tbody");
  const historyTable = el("table", { id: "approval-history" },
    el("thead", {}, el("tr", {}, ...["Time", "Request", "Decision", "By", "Scope"].map((h) => el("th", { text: h })))),
    history);

  // Violations and limits.
  const violBody = el("tbody");
  const violations = el("table", { id: "violations" },
    el("thead", {}, el("tr", {}, ...["Time", "Layer", "Access", "Path / call", "Process"].map((h) => el("th", { text: h })))),
    violBody);
  const limitBody = el("tbody");
  const limitsTable = el("table", { id: "limits" },
    el("thead", {}, el("tr", {}, ...["Time", "Limit", "Detail"].map((h) => el("th", { text: h })))),
    limitBody);

  const stdout = el("pre", { id: "stdout", class: "out" });
  const stderr = el("pre", { id: "stderr", class: "out err", hidden: true });
  const tabOut = el("button", { class: "active", text: "stdout" });
  const tabErr = el("button", { text: "stderr" });
  tabOut.onclick = () => { stdout.hidden = false; stderr.hidden = true; tabOut.classList.add("active"); tabErr.classList.remove("active"); };
  tabErr.onclick = () => { stdout.hidden = true; stderr.hidden = false; tabErr.classList.add("active"); tabOut.classList.remove("active"); };

  const sections = [
    el("div", { class: "head" },
      el("a", { href: "/", text: "← Sessions" }),
      el("h1", { class: "mono", text: id }), statusEl,
      el("div", { class: "actions" }, download, stopBtn)),
    el("div", { class: "panel" }, integrity, problems.children.length ? problems : null),
    el("div", { class: "panel" }, el("h2", { text: "Session" }), metaGrid,
      el("h2", { text: "Enforced layers", class: "spaced" }), layerChips),
    el("div", { class: "panel flush" }, el("h2", { text: "Commands" }), commands),
    el("div", { class: "panel flush" }, el("div", { class: "tabs" }, tabOut, tabErr), stdout, stderr),
    el("div", { class: "panel flush" }, el("h2", { text: "Approvals" }), approvals,
      el("h2", { text: "Decided", class: "spaced" }), historyTable),
    el("div", { class: "panel flush" }, el("h2", { text: "Network" }), network,
      // Rules apply to a mediated network only (`--network allow`).
      info.network && info.network.mode === "allow"
        ? el("div", { class: "rule-form" }, netTarget, netAllow, netDeny, rulesList) : null),
    el("div", { class: "panel flush" }, el("h2", { text: "HTTP requests" }), http),
    el("div", { class: "two" },
      el("div", { class: "panel flush" }, el("h2", { text: "Violations" }), violations),
      el("div", { class: "panel flush" }, el("h2", { text: "Limit hits" }), limitsTable)),
  ];
  let replay = null;
  if (info.has_cast) {
    replay = el("pre", { id: "replay", class: "out" });
    const play = el("button", { class: "primary", text: "▶ Replay" });
    play.onclick = () => playCast(enc, replay, play);
    const cut = el("p", { id: "replay-truncated", class: "notice", hidden: true });
    sections.splice(5, 0, el("div", { class: "panel flush" }, el("div", { class: "replay-bar" }, el("h2", { text: "Terminal", class: "inline" }), play), cut, replay));
  }
  app.replaceChildren(...sections);

  const emptyRow = (tbody, cols, text) => {
    if (!tbody.querySelector("tr:not(.placeholder)")) {
      tbody.replaceChildren(el("tr", { class: "placeholder" }, el("td", { colspan: cols, class: "empty", text })));
    }
  };
  const dropPlaceholder = (tbody) => { const p = tbody.querySelector("tr.placeholder"); if (p) p.remove(); };

  function addEvent(e) {
    if (e.type === "network" && (e.event === "connect" || e.event === "tls")) {
      dropPlaceholder(netBody);
      noteDest(destOf(e), hostOf(e), decisionWord(e.decision), e.reason);
    } else if (e.type === "network" && e.event === "dns" && decisionWord(e.decision) === "denied") {
      // Allowed lookups are followed by their connection; a denied one is all there is.
      dropPlaceholder(netBody);
      noteDest(e.name + " (dns)", e.name, "denied", e.reason, true);
    } else if (e.type === "network" && e.event === "http") {
      dropPlaceholder(httpBody);
      const url = (e.scheme || "https") + "://" + (e.host || "") + (e.port && e.port !== 443 && e.port !== 80 ? ":" + e.port : "") + (e.path || "");
      httpBody.append(el("tr", {},
        el("td", { class: "mono muted", text: fmtTime(e.time).slice(11) }),
        el("td", { class: "mono", text: e.method || "" }),
        el("td", { class: "cmd", text: url }),
        el("td", { class: "mono", text: e.status === null || e.status === undefined ? (e.error || "") : String(e.status) }),
        el("td", {}, el("span", { class: "decision " + decisionWord(e.decision), text: decisionWord(e.decision) })),
        el("td", { class: "mono muted", text: (e.bytes_out || 0) + " ↑ " + (e.bytes_in || 0) + " ↓" })));
    } else if (e.type === "violation" && e.event !== "summary") {
      dropPlaceholder(violBody);
      violBody.append(el("tr", {},
        el("td", { class: "mono muted", text: fmtTime(e.time).slice(11) }),
        el("td", { text: e.layer || "" }), el("td", { text: e.access || "" }),
        el("td", { class: "cmd", text: e.path || e.syscall || "" }),
        el("td", { class: "cmd muted", text: (e.exe || "") + (e.pid ? " (" + e.pid + ")" : "") })));
    } else if (e.type === "limit-hit") {
      dropPlaceholder(limitBody);
      const detail = Object.entries(e).filter(([k]) => !["time", "type", "limit"].includes(k)).map(([k, v]) => k + "=" + (typeof v === "string" ? v : JSON.stringify(v))).join(" ");
      limitBody.append(el("tr", {},
        el("td", { class: "mono muted", text: fmtTime(e.time).slice(11) }),
        el("td", { class: "mono", text: e.limit || "" }), el("td", { class: "mono muted", text: detail })));
    } else if (e.type === "approval" && e.event === "decided") {
      dropPlaceholder(history);
      const subject = e.subject || {};
      const heldRow = subject.kind === "destination" && dests.get(subject.name + ":" + subject.port);
      if (heldRow && heldRow.decisionEl.textContent === "held") {
        const word = e.decision === "approve" ? "allowed" : "denied";
        heldRow.decisionEl.textContent = word;
        heldRow.decisionEl.className = "decision " + word;
        heldRow.whyEl.textContent = "decided by " + (e.who ? e.who.by : "?");
        heldRow.pending = undefined;
      }
      const what = subject.kind === "exec" ? shellQuote(subject.argv) : (subject.name || "") + ":" + (subject.port || "");
      history.append(el("tr", {},
        el("td", { class: "mono muted", text: fmtTime(e.time).slice(11) }),
        el("td", { class: "cmd", text: what }),
        el("td", {}, el("span", { class: "decision " + (e.decision === "approve" ? "allowed" : "denied"), text: e.decision })),
        el("td", { text: e.who ? e.who.by + (e.who.uid !== undefined ? " (uid " + e.who.uid + ")" : "") : "" }),
        el("td", { text: e.scope || "" })));
    }
  }

  function pendingRow(p) {
    const s = p.subject || {};
    const what = s.kind === "exec" ? shellQuote(s.argv) : "connect to " + s.name + ":" + s.port;
    const decide = (decision, scope) => async () => {
      try {
        await post("/api/sessions/" + encodeURIComponent(p.session) + "/approvals/" + p.id, { decision, scope });
        toast((decision === "approve" ? "Approved" : "Denied") + " request " + p.id);
        loadPending();
      } catch (e) { toast(e.message, true); loadPending(); }
    };
    return el("tr", { dataset: { approvalId: String(p.id), sessionId: p.session } },
      el("td", { class: "mono", text: String(p.id) }),
      el("td", {}, el("span", { class: "level " + p.level, text: p.level })),
      el("td", { class: "cmd", text: what }),
      el("td", { class: "muted", text: p.reason || "" }),
      el("td", { class: "actions-cell" },
        el("button", { class: "small good", dataset: { decision: "approve", scope: "once" }, text: "Approve once", onclick: decide("approve", "once") }),
        el("button", { class: "small good", dataset: { decision: "approve", scope: "session" }, text: "For session", onclick: decide("approve", "session") }),
        el("button", { class: "small danger", dataset: { decision: "deny", scope: "once" }, text: "Deny", onclick: decide("deny", "once") })));
  }

  let pendingLoads = 0;
  async function loadPending() {
    const seq = ++pendingLoads;
    // Once it ended nothing is held (and a list asked for earlier is stale).
    if (!running) { apBody.replaceChildren(); emptyRow(apBody, 5, "Nothing held."); return; }
    try {
      const { pending } = await getJson("/api/approvals");
      if (seq !== pendingLoads) return; // a newer list is on its way
      const mine = pending.filter((p) => p.session === id);
      apBody.replaceChildren(...mine.map(pendingRow));
      for (const p of mine) {
        const s = p.subject || {};
        if (s.kind === "destination") {
          dropPlaceholder(netBody);
          const d = noteDest(s.name + ":" + s.port, s.name, "held", "waiting for approval (request " + p.id + ")");
          d.pending = p.id;
        }
      }
      emptyRow(apBody, 5, "Nothing held.");
    } catch (e) { toast(e.message, true); }
  }

  // Output, read incrementally while the session runs.
  const offsets = { stdout: 0, stderr: 0 };
  const screens = { stdout: new Screen(), stderr: new Screen() };
  // One read at a time (the timer and the end may ask together): each goes on
  // from the offset the previous one reached.
  let outputChain = Promise.resolve();
  const loadOutput = () => (outputChain = outputChain.then(readOutput, readOutput));
  async function readOutput() {
    for (const [name, pre] of [["stdout", stdout], ["stderr", stderr]]) {
      try {
        const r = await api("/api/sessions/" + enc + "/output/" + name + "?from=" + offsets[name]);
        const text = await r.text();
        offsets[name] = Number(r.headers.get("x-next-offset")) || offsets[name];
        if (text) {
          const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
          if (info.has_cast) {
            // A terminal's stream: shown as the terminal showed it.
            screens[name].write(text);
            pre.textContent = screens[name].text;
          } else {
            pre.append(document.createTextNode(text));
          }
          if (atBottom) pre.scrollTop = pre.scrollHeight;
        }
      } catch (_) { /* shown next time */ }
    }
    tabErr.textContent = "stderr" + (offsets.stderr ? " (" + offsets.stderr + " B)" : "");
    tabOut.textContent = "stdout" + (offsets.stdout ? " (" + offsets.stdout + " B)" : "");
  }

  let cmds, evs;
  try {
    [cmds, evs] = await Promise.all([
      getJson("/api/sessions/" + enc + "/commands"),
      getJson("/api/sessions/" + enc + "/events"),
    ]);
  } catch (e) {
    handle = () => {};
    if (!(e instanceof Locked)) toast(e.message, true);
    return;
  }
  const seenExec = new Set();
  for (const x of cmds.execs) { cmdBody.append(execRow(x)); seenExec.add(x.time + "/" + x.pid); }
  emptyRow(cmdBody, 6, "No command recorded.");
  // The fetched events, counted, so that one also taken live while the page
  // loaded is applied once.
  const fetched = new Map();
  for (const e of evs.events) {
    addEvent(e);
    const key = JSON.stringify(e);
    fetched.set(key, (fetched.get(key) || 0) + 1);
  }
  emptyRow(netBody, 5, info.network && info.network.mode === "allow" ? "No connection yet." : "Network mode: " + ((info.network && info.network.mode) || "none") + ".");
  emptyRow(httpBody, 6, "No HTTP request inspected.");
  emptyRow(violBody, 5, "No violation.");
  emptyRow(limitBody, 3, "No limit hit.");
  emptyRow(history, 5, "No decision.");
  loadPending();
  loadRules();
  loadOutput();
  const outputTimer = setInterval(() => { if (running) loadOutput(); }, 1000);

  const live = async (kind, data) => {
    if (kind === "resync") { location.reload(); return; }
    if (data.session !== id) return;
    if (kind === "exec" && data.line === "exec") {
      const key = data.exec.time + "/" + data.exec.pid;
      if (seenExec.has(key)) return;
      seenExec.add(key);
      dropPlaceholder(cmdBody);
      const tr = execRow(data.exec);
      tr.classList.add("row-new");
      cmdBody.append(tr);
    } else if (kind === "exec" && data.line === "exit") {
      const rows = cmdBody.querySelectorAll('tr[data-pid="' + data.pid + '"]');
      const last = rows[rows.length - 1];
      if (last) last.lastChild.replaceWith(exitCell(data.exit));
    } else if (kind === "event") {
      addEvent(data.event);
      if (data.event.type === "network" && data.event.event === "rule-added") loadRules();
    } else if (kind === "approval") {
      loadPending();
    } else if (kind === "session" && data.row) {
      const r = data.row;
      statusEl.textContent = r.status;
      statusEl.className = statusBadge(r.status, r.exit_code).className;
      if (!r.running && running) {
        running = false;
        stopBtn.disabled = true;
        for (const b of [netTarget, netAllow, netDeny]) b.disabled = true;
        for (const b of network.querySelectorAll("button[data-action]")) b.remove();
        endedEl.textContent = fmtTime(r.ended);
        exitEl.textContent = r.exit_code === null || r.exit_code === undefined ? "—" : String(r.exit_code);
        clearInterval(outputTimer);
        await loadOutput();
        loadPending();
        try {
          const fresh = await getJson("/api/sessions/" + enc);
          integrity.textContent = fresh.integrity.message;
          integrity.className = "integrity " + (fresh.integrity.ok ? "ok" : "bad");
        } catch (_) { /* kept */ }
      }
    }
  };
  // What arrived while the page loaded, then everything live. Execs are
  // deduplicated by seenExec, events against what was fetched; the rest
  // (exits, approvals, the status) are idempotent.
  while (early.length) {
    const batch = early;
    early = [];
    for (const [kind, data] of batch) {
      if (kind === "event" && data.session === id && data.event) {
        const key = JSON.stringify(data.event);
        const n = fetched.get(key) || 0;
        if (n > 0) { fetched.set(key, n - 1); continue; }
      }
      await live(kind, data);
    }
  }
  fetched.clear();
  handle = live;
}

// Terminal output as text: escape sequences dropped, a carriage return starts the
// line again (a progress bar redraws in place), backspace erases.
class Screen {
  constructor() { this.text = ""; this.cr = false; }
  write(data) {
    const clean = String(data)
      .replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, "")
      .replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, "")
      .replace(/\x1b[@-Z\\-_]/g, "");
    for (const ch of clean) {
      if (ch === "\r") { this.cr = true; continue; }
      if (ch === "\n") { this.text += "\n"; this.cr = false; continue; }
      if (ch === "\b") { if (!this.text.endsWith("\n")) this.text = this.text.slice(0, -1); continue; }
      if (ch < " " && ch !== "\t") continue;
      if (this.cr) { this.text = this.text.slice(0, this.text.lastIndexOf("\n") + 1); this.cr = false; }
      this.text += ch;
    }
  }
}

// A terminal recording, played into a <pre>: text and line moves only (escape
// sequences are dropped), which is what a reader of the record needs.
async function playCast(enc, pre, button) {
  button.disabled = true;
  let text;
  let cutFrom = null;
  try {
    const response = await api("/api/sessions/" + enc + "/cast");
    cutFrom = response.headers.get("x-cast-truncated-from");
    text = await response.text();
  } catch (e) { toast(e.message, true); button.disabled = false; return; }
  // The server gives at most 32 MiB of a recording: say so when it was cut.
  const notice = document.getElementById("replay-truncated");
  if (notice) {
    const mib = (n) => (n / 1048576).toFixed(1) + " MiB";
    notice.hidden = !cutFrom;
    notice.textContent = cutFrom
      ? "This replay stops early: it shows the first " + mib(new TextEncoder().encode(text).length) + " of a " + mib(Number(cutFrom)) +
        " recording. The whole recording is in the archive (Download .tar.gz) and in `vectraguard logs`."
      : "";
  }
  const lines = text.split("\n").filter(Boolean);
  const events = [];
  for (const l of lines.slice(1)) {
    try {
      const ev = JSON.parse(l);
      if (Array.isArray(ev) && ev[1] === "o") events.push([Number(ev[0]) || 0, String(ev[2])]);
    } catch (_) { /* a damaged line: skipped */ }
  }
  pre.textContent = "";
  const term = new Screen();
  let last = 0;
  for (const [t, data] of events) {
    const gap = Math.min(Math.max(t - last, 0), 1) * 1000; // idle gaps cut to 1 s
    last = t;
    if (gap > 5) await new Promise((r) => setTimeout(r, gap));
    term.write(data);
    pre.textContent = term.text;
    pre.scrollTop = pre.scrollHeight;
  }
  button.disabled = false;
}

// ---------------------------------------------------------------- approvals page

function approvalsPage() {
  setNav("nav-approvals");
  document.title = "Approvals — Vectra Guard";
  const tbody = el("tbody");
  const table = el("table", { id: "pending" },
    el("thead", {}, el("tr", {}, ...["Session", "#", "Level", "Request", "Reason", "Time left", "Decide"].map((h) => el("th", { class: "nowrap", text: h })))),
    tbody);
  const note = el("p", { class: "muted" });

  let loadSeq = 0;
  async function load() {
    const seq = ++loadSeq;
    try {
      const { pending, unreachable } = await getJson("/api/approvals");
      if (seq !== loadSeq) return; // a newer list is on its way
      tbody.replaceChildren(...pending.map((p) => {
        const s = p.subject || {};
        const what = s.kind === "exec" ? shellQuote(s.argv) : "connect to " + s.name + ":" + s.port;
        const decide = (decision, scope) => async () => {
          try {
            await post("/api/sessions/" + encodeURIComponent(p.session) + "/approvals/" + p.id, { decision, scope });
            toast((decision === "approve" ? "Approved" : "Denied") + " request " + p.id + " of " + p.session);
          } catch (e) { toast(e.message, true); }
          load();
        };
        const deadline = Date.now() + (p.timeout_in_ms || 0);
        const left = el("td", { class: "mono muted", dataset: { deadline: String(deadline) } });
        return el("tr", { dataset: { approvalId: String(p.id), sessionId: p.session } },
          el("td", { class: "mono nowrap" }, el("a", { href: "/sessions/" + encodeURIComponent(p.session), text: p.session })),
          el("td", { class: "mono", text: String(p.id) }),
          el("td", {}, el("span", { class: "level " + p.level, text: p.level })),
          el("td", { class: "cmd", text: what }),
          el("td", { class: "muted", text: p.reason || "" }),
          left,
          el("td", { class: "actions-cell" },
            el("button", { class: "small good", dataset: { decision: "approve", scope: "once" }, text: "Approve once", onclick: decide("approve", "once") }),
            el("button", { class: "small good", dataset: { decision: "approve", scope: "session" }, text: "For session", onclick: decide("approve", "session") }),
            el("button", { class: "small danger", dataset: { decision: "deny", scope: "once" }, text: "Deny", onclick: decide("deny", "once") })));
      }));
      if (!pending.length) tbody.append(el("tr", { class: "placeholder" }, el("td", { colspan: 7, class: "empty", text: "Nothing is waiting for a decision." })));
      note.textContent = unreachable.length ? "Not reachable: " + unreachable.join("; ") : "";
      tick();
    } catch (e) { toast(e.message, true); }
  }
  function tick() {
    for (const td of tbody.querySelectorAll("td[data-deadline]")) {
      const s = Math.max(0, Math.round((Number(td.dataset.deadline) - Date.now()) / 1000));
      td.textContent = s + "s";
    }
  }
  setInterval(tick, 1000);
  listeners.push((kind, data) => {
    if (kind === "approval" || kind === "resync" || (kind === "session" && data.change === "ended")) load();
  });
  app.replaceChildren(
    el("h1", { text: "Pending approvals" }),
    el("p", { class: "muted", text: "Commands and destinations held by sessions run with --ask, across every running session you can control." }),
    el("div", { class: "panel flush" }, table), note);
  load();
}

// ---------------------------------------------------------------- routing

function route() {
  const path = location.pathname;
  const m = path.match(/^\/sessions\/([^/]+)$/);
  if (m) sessionPage(decodeURIComponent(m[1]));
  else if (path === "/approvals") approvalsPage();
  else sessionsPage();
}

// A failure the page did not expect is said, not swallowed.
window.addEventListener("error", (e) => toast("The page failed: " + e.message, true));
window.addEventListener("unhandledrejection", (e) => {
  if (e.reason instanceof Locked) { e.preventDefault(); return; }
  toast("The page failed: " + (e.reason && e.reason.message || e.reason), true);
});

if (!TOKEN) {
  showLocked(false);
} else {
  connectLive();
  refreshPendingCount();
  route();
}
