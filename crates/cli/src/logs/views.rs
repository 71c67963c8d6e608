//! One line of `commands.log` or `events.jsonl`, rendered as text or JSON.
//! Shared by `logs show` and `logs show --follow`, which renders line by
//! line as the session writes them.

use std::fs;
use std::path::Path;

use anyhow::Result;
use serde_json::{Map, Value, json};
use vg_records::time::{format_rfc3339, parse_rfc3339};
use vg_records::{CommandExit, CommandLogLine, RecordsError};

use super::explain;
use super::format;

/// Which events to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventFilter {
    All,
    /// Only `network` events (and unreadable lines, which may have been).
    Network,
    /// Only `approval` events (and unreadable lines, which may have been).
    Approvals,
    /// Only `violation` events (and unreadable lines, which may have been).
    Violations,
}

/// Which line file a view reads, and how it filters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineView {
    Commands,
    Events(EventFilter),
}

impl LineView {
    /// The line as printed, without its newline; `None` when filtered out.
    pub fn text(self, line: &[u8]) -> Option<String> {
        match self {
            // Recorded lines are already quoted for a terminal; escaping
            // only changes a line that was edited after the fact.
            LineView::Commands => Some(format::safe_bytes(trim_newline(line))),
            LineView::Events(filter) => {
                let event = parse_event(line);
                admits(filter, event.as_ref()).then(|| event_text(line, event.as_ref()))
            }
        }
    }

    /// The line as a JSON object; `line_no` counts from 1.
    pub fn json(self, line_no: usize, line: &[u8]) -> Option<Value> {
        match self {
            LineView::Commands => Some(command_json(line_no, line)),
            LineView::Events(filter) => {
                let event = parse_event(line);
                admits(filter, event.as_ref()).then(|| match event {
                    Some(e) => Value::Object(e),
                    None => unparsed(line_no, line),
                })
            }
        }
    }
}

/// The lines of a file, newlines included (a last line may lack one).
pub fn read_lines(path: &Path) -> Result<Vec<Vec<u8>>> {
    let bytes = fs::read(path).map_err(|source| {
        explain(RecordsError::Read {
            path: path.to_owned(),
            source,
        })
    })?;
    Ok(bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect())
}

fn trim_newline(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A line that is not what the writer writes (edited, or cut by a crash).
fn unparsed(line_no: usize, line: &[u8]) -> Value {
    json!({
        "line": line_no,
        "type": "unparsed",
        "time": Value::Null,
        "text": lossy(trim_newline(line)),
    })
}

fn exit_json(exit: Option<CommandExit>) -> (Value, Value) {
    match exit {
        Some(CommandExit::Code(c)) => (c.into(), Value::Null),
        Some(CommandExit::Signal(s)) => (Value::Null, s.into()),
        Some(CommandExit::Denied(_)) | None => (Value::Null, Value::Null),
    }
}

/// `{"line", "type": "exec", "time", "pid", "ppid", "cwd", "exe", "argv", "command",
/// "truncated", "status", "signal", "denied"}` (`denied`: the approval gate refused
/// it, so it never ran; `truncated`: the argv's full size, `{"args",
/// "bytes"}`, when the line keeps only part of it), `{"line", "type": "exit", "time", "pid", "status",
/// "signal"}`, or `{"line", "type": "unparsed", "time": null, "text"}`.
/// `argv` and `cwd` replace bytes that are not UTF-8; `command` (quoted for
/// a shell) keeps them exactly.
pub fn command_json(line_no: usize, line: &[u8]) -> Value {
    let parsed = std::str::from_utf8(line)
        .ok()
        .and_then(CommandLogLine::parse);
    match parsed {
        Some(CommandLogLine::Exec(e)) => {
            let (status, signal) = exit_json(e.exit);
            json!({
                "line": line_no,
                "type": "exec",
                "time": format_rfc3339(e.time),
                "pid": e.pid,
                "ppid": e.ppid,
                "cwd": lossy(&e.cwd),
                "exe": e.exe.as_deref().map(lossy),
                "ran": e.ran.as_deref().map(lossy),
                "interp": e.interp.as_deref().map(lossy),
                "interp_ran": e.interp_ran.as_deref().map(lossy),
                "argv": e.argv.iter().map(|a| lossy(a)).collect::<Vec<_>>(),
                "command": e.command,
                "truncated": e.truncated.map(|t| json!({"args": t.args, "bytes": t.bytes})),
                "status": status,
                "signal": signal,
                "denied": matches!(e.exit, Some(CommandExit::Denied(_))),
            })
        }
        Some(CommandLogLine::Exit { time, pid, exit }) => {
            let (status, signal) = exit_json(Some(exit));
            json!({
                "line": line_no,
                "type": "exit",
                "time": format_rfc3339(time),
                "pid": pid,
                "status": status,
                "signal": signal,
            })
        }
        None => unparsed(line_no, line),
    }
}

/// An `events.jsonl` line as written: an object with `time` and `type`.
fn parse_event(line: &[u8]) -> Option<Map<String, Value>> {
    let object: Map<String, Value> = serde_json::from_slice(line).ok()?;
    let typed = object.get("time").is_some_and(Value::is_string)
        && object.get("type").is_some_and(Value::is_string);
    typed.then_some(object)
}

fn admits(filter: EventFilter, event: Option<&Map<String, Value>>) -> bool {
    match (filter, event) {
        (EventFilter::All, _) | (_, None) => true,
        (EventFilter::Network, Some(e)) => e.get("type").and_then(Value::as_str) == Some("network"),
        (EventFilter::Approvals, Some(e)) => {
            e.get("type").and_then(Value::as_str) == Some("approval")
        }
        (EventFilter::Violations, Some(e)) => {
            e.get("type").and_then(Value::as_str) == Some("violation")
        }
    }
}

/// `2025-12-19 10:10:53.123  network        host=example.com port=443`.
fn event_text(line: &[u8], event: Option<&Map<String, Value>>) -> String {
    let Some(e) = event else {
        return format!(
            "?                        unreadable     {}",
            format::safe_bytes(trim_newline(line))
        );
    };
    let str_field = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
    let time = parse_rfc3339(str_field("time"))
        .map(format::stamp)
        .unwrap_or_else(|_| str_field("time").to_owned());
    let mut text = format!("{time:<23}  {:<13}", str_field("type"));
    if str_field("type") == "approval"
        && let Some(line) = approval_text(e)
    {
        text.push(' ');
        text.push_str(&line);
        return format::safe(&text).into_owned();
    }
    if str_field("type") == "violation" {
        text.push(' ');
        text.push_str(&violation_text(e));
        return format::safe(&text).into_owned();
    }
    if str_field("type") == "network" && str_field("event") == "http" {
        text.push(' ');
        text.push_str(&http_text(e));
        return format::safe(&text).into_owned();
    }
    for (k, v) in e.iter().filter(|(k, _)| *k != "time" && *k != "type") {
        text.push(' ');
        text.push_str(k);
        text.push('=');
        text.push_str(&field_text(v));
    }
    format::safe(text.trim_end()).into_owned()
}

/// An inspected request in words: `http GET https://api.test/x → 200 allow (rule
/// …) 12 B out, 3401 B in, 41 ms, secrets GH_TOKEN`.
fn http_text(e: &Map<String, Value>) -> String {
    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let n = |k: &str| e.get(k).and_then(Value::as_u64).unwrap_or(0);
    let status = e
        .get("status")
        .and_then(Value::as_u64)
        .map_or_else(|| "-".to_owned(), |c| c.to_string());
    let mut text = format!(
        "http {} {} → {status} {} {}",
        s("method"),
        super::network::request_url(e),
        s("decision"),
        s("protocol"),
    );
    match e.get("rule").and_then(Value::as_str) {
        Some(rule) => text.push_str(&format!(" by '{rule}'")),
        None => text.push_str(&format!(" ({})", s("reason"))),
    }
    text.push_str(&format!(
        ", {} B out, {} B in, {} ms",
        n("bytes_out"),
        n("bytes_in"),
        n("duration_ms")
    ));
    let secrets = super::network::injected(e);
    if !secrets.is_empty() {
        text.push_str(&format!(", secrets injected: {}", secrets.join(",")));
    }
    if let Some(name) = e.get("exfiltration").and_then(Value::as_str) {
        text.push_str(&format!(
            ", POSSIBLE EXFILTRATION of the placeholder of {name}"
        ));
    }
    if let Some(error) = e.get("error").and_then(Value::as_str) {
        text.push_str(&format!(", error: {error}"));
    }
    text
}

/// A `violation` event in words: `read ~/.ssh/id_rsa refused by the view (hidden:
/// not in the sandbox's view) by pid 7 /usr/bin/cat`, `syscall mount refused by
/// seccomp by pid 9 /usr/bin/python3`, or the end-of-session count.
fn violation_text(e: &Map<String, Value>) -> String {
    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let n = |k: &str| e.get(k).and_then(Value::as_u64).unwrap_or(0);
    if s("event") == "summary" {
        return format!(
            "{} refused in all, {} distinct{}",
            n("total"),
            n("distinct"),
            match n("not_recorded") {
                0 => String::new(),
                k => format!(", {k} distinct ones past the cap counted only"),
            }
        );
    }
    let what = match e.get("syscall").and_then(Value::as_str) {
        Some(syscall) if s("layer") == "seccomp" => format!("syscall {syscall}"),
        _ => format!("{} {}", s("access"), s("path")),
    };
    let mut text = format!("{what} refused by {}", s("layer"));
    if !s("reason").is_empty() {
        text.push_str(&format!(" ({})", s("reason")));
    }
    if let Some(pid) = e.get("pid").and_then(Value::as_i64) {
        text.push_str(&format!(" by pid {pid}"));
    }
    if !s("exe").is_empty() {
        text.push_str(&format!(" {}", s("exe")));
    }
    if n("count") > 1 {
        text.push_str(&format!(" ({} times)", n("count")));
    }
    text
}

/// An `approval` event in words: `asked #3 CRITICAL exec rm -rf /tmp/x (rule …:
/// reason)` or `decided #3 deny by client uid=1000 pid=42 scope=once after 1.6s`.
fn approval_text(e: &Map<String, Value>) -> Option<String> {
    let str_of = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
    let request = e
        .get("request")
        .and_then(Value::as_u64)
        .map_or_else(|| "-".to_owned(), |id| format!("#{id}"));
    let subject = e.get("subject").and_then(Value::as_object);
    let what = match subject.map(|s| str_of(s.get("kind"))).as_deref() {
        Some("exec") => {
            let argv: Vec<Vec<u8>> = subject
                .and_then(|s| s.get("argv"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().unwrap_or("").as_bytes().to_vec())
                        .collect()
                })
                .unwrap_or_default();
            format!("exec {}", vg_records::quote_argv(&argv))
        }
        Some("destination") => {
            let port = subject
                .and_then(|s| s.get("port"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let name = str_of(subject.and_then(|s| s.get("name")));
            if port == 0 {
                format!("resolve {name}")
            } else {
                format!("connect {name}:{port}")
            }
        }
        _ => String::new(),
    };
    let level = str_of(e.get("level"));
    match str_of(e.get("event")).as_str() {
        "asked" => Some(format!(
            "asked {request} {level} {what} (rule {}: {})",
            str_of(e.get("rule")),
            str_of(e.get("reason"))
        )),
        "decided" => {
            let who = e.get("who").and_then(Value::as_object);
            let by = str_of(who.and_then(|w| w.get("by")));
            let by = match (
                who.and_then(|w| w.get("uid")),
                who.and_then(|w| w.get("pid")),
            ) {
                (Some(uid), Some(pid)) => format!("{by} uid={uid} pid={pid}"),
                _ => by,
            };
            let remembered = e
                .get("remembered_from")
                .and_then(Value::as_u64)
                .map(|from| format!(", as #{from}"))
                .unwrap_or_default();
            let ms = e.get("latency_ms").and_then(Value::as_u64).unwrap_or(0);
            Some(format!(
                "decided {request} {} by {by} scope={}{remembered} after {:.1}s: {level} {what}",
                str_of(e.get("decision")),
                str_of(e.get("scope")),
                ms as f64 / 1000.0
            ))
        }
        "refused" => Some(format!(
            "refused without asking: {}",
            str_of(e.get("reason"))
        )),
        _ => None,
    }
}

/// Plain words bare, anything else as JSON (strings quoted).
fn field_text(v: &Value) -> String {
    match v {
        Value::String(s)
            if !s.is_empty()
                && !s
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || "\"'=\\".contains(c)) =>
        {
            s.clone()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXEC: &[u8] =
        b"2025-12-19T10:10:53.123Z exec pid=42 ppid=1 cwd='/a b' -- grep -r 'x y' $'\\xff'\n";

    #[test]
    fn command_lines_become_json() {
        let v = command_json(3, EXEC);
        assert_eq!(v["line"], 3);
        assert_eq!(v["type"], "exec");
        assert_eq!(v["time"], "2025-12-19T10:10:53.123Z");
        assert_eq!(v["cwd"], "/a b");
        assert_eq!(v["argv"], json!(["grep", "-r", "x y", "\u{fffd}"]));
        assert_eq!(v["command"], "grep -r 'x y' $'\\xff'");
        assert_eq!(
            (v["status"].clone(), v["signal"].clone()),
            (Value::Null, Value::Null)
        );
        let v = command_json(4, b"2025-12-19T10:10:54Z exit pid=42 signal=9\n");
        assert_eq!(
            (v["type"].as_str(), v["signal"].as_i64()),
            (Some("exit"), Some(9))
        );
        let v = command_json(5, b"edited \xff\n");
        assert_eq!(
            v,
            json!({"line": 5, "type": "unparsed", "time": null, "text": "edited \u{fffd}"})
        );
    }

    #[test]
    fn command_text_is_the_line_made_safe() {
        assert_eq!(
            LineView::Commands.text(EXEC).unwrap(),
            String::from_utf8_lossy(&EXEC[..EXEC.len() - 1])
        );
        assert_eq!(
            LineView::Commands.text(b"x\x1b[2J\n").unwrap(),
            "x\\u{1b}[2J"
        );
    }

    #[test]
    fn events_are_readable_and_filtered() {
        let http = br#"{"time":"2025-12-19T10:10:53.123Z","type":"network","event":"http","protocol":"HTTP/2","method":"POST","scheme":"https","host":"api.test","port":8443,"path":"/x?q=REDACTED","status":403,"bytes_out":0,"bytes_in":40,"duration_ms":2,"decision":"deny","rule":null,"reason":"no method and path rule","secrets":[],"exfiltration":"GH","error":null}"#;
        let e = parse_event(http);
        assert_eq!(
            event_text(http, e.as_ref()),
            "2025-12-19 10:10:53.123  network       http POST https://api.test:8443/x?q=REDACTED → 403 deny HTTP/2 (no method and path rule), 0 B out, 40 B in, 2 ms, POSSIBLE EXFILTRATION of the placeholder of GH"
        );
        let net = br#"{"time":"2025-12-19T10:10:53.123Z","type":"network","host":"example.com","port":443,"note":"a b"}"#;
        let start = br#"{"time":"2025-12-19T10:10:53.000Z","type":"session-start","origin":"cli"}"#;
        let view = LineView::Events(EventFilter::All);
        assert_eq!(
            view.text(net).unwrap(),
            "2025-12-19 10:10:53.123  network       host=example.com note=\"a b\" port=443"
        );
        assert_eq!(
            view.text(start).unwrap(),
            "2025-12-19 10:10:53.000  session-start origin=cli"
        );
        let only_net = LineView::Events(EventFilter::Network);
        assert!(only_net.text(start).is_none());
        assert!(only_net.json(1, net).is_some());
        assert!(
            only_net
                .text(b"not json\n")
                .unwrap()
                .contains("unreadable     not json")
        );
        assert_eq!(view.json(2, start).unwrap()["origin"], "cli");
        assert_eq!(view.json(7, b"{\"type\":1}").unwrap()["type"], "unparsed");
    }
}
