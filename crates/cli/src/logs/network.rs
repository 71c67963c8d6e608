//! `logs show SESSION --network`: the session's DNS questions and connections as one
//! table. A connection's attempt and its end are two events (the end carries the
//! byte counts and duration); they are joined here into one row by connection id.
//! Inspected requests (and refused TLS handshakes) follow in a second table.

use std::collections::HashMap;
use std::io::Write;

use anyhow::Result;
use serde_json::{Map, Value};
use vg_records::time::parse_rfc3339;

use super::format::{self, Table};

/// Writes the table for the lines of `events.jsonl`; other events are skipped.
pub fn write_table(out: &mut dyn Write, lines: &[Vec<u8>]) -> Result<()> {
    let events: Vec<Map<String, Value>> = lines
        .iter()
        .filter_map(|l| serde_json::from_slice::<Map<String, Value>>(l).ok())
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("network"))
        .collect();
    let closes: HashMap<u64, &Map<String, Value>> = events
        .iter()
        .filter(|e| text(e, "event") == "close")
        .filter_map(|e| {
            e.get("connection")
                .and_then(Value::as_u64)
                .map(|id| (id, e))
        })
        .collect();
    let mut table = Table::new(vec![
        "TIME",
        "PROTO",
        "NAME",
        "ADDRESS",
        "PORT",
        "DECISION",
        "SENT",
        "RECEIVED",
        "MS",
        "RULE / REASON",
    ]);
    let mut rows = 0;
    for e in &events {
        let kind = text(e, "event");
        let close = e
            .get("connection")
            .and_then(Value::as_u64)
            .and_then(|id| closes.get(&id));
        let (sent, recv, millis, detail) = match (kind.as_str(), close) {
            ("connect", Some(c)) => (
                number(c, "bytes_out").to_string(),
                number(c, "bytes_in").to_string(),
                number(c, "duration_ms").to_string(),
                match c.get("error").and_then(Value::as_str) {
                    Some(err) => format!("{}; {err}", rule_or_reason(e)),
                    None => rule_or_reason(e),
                },
            ),
            ("connect", None) | ("dns", _) => {
                ("-".into(), "-".into(), "-".into(), rule_or_reason(e))
            }
            // A close without its connect (a cut file): shown with what it has.
            ("close", _) if !has_connect(&events, e) => (
                number(e, "bytes_out").to_string(),
                number(e, "bytes_in").to_string(),
                number(e, "duration_ms").to_string(),
                text(e, "error"),
            ),
            _ => continue,
        };
        let time = e
            .get("time")
            .and_then(Value::as_str)
            .and_then(|t| parse_rfc3339(t).ok())
            .map(format::utc_millis)
            .unwrap_or_default();
        let address = match kind.as_str() {
            "dns" => e
                .get("addresses")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_str)
                .unwrap_or("-")
                .to_owned(),
            _ => text(e, "address"),
        };
        let port = match e.get("port").and_then(Value::as_u64) {
            Some(0) | None => "-".to_owned(),
            Some(p) => p.to_string(),
        };
        let decision = match kind.as_str() {
            "dns" => format!("{} {}", text(e, "decision"), text(e, "qtype")),
            _ => text(e, "decision"),
        };
        table.push(vec![
            time,
            text(e, "protocol"),
            format::safe(&or_dash(text(e, "name"))).into_owned(),
            address,
            port,
            decision,
            sent,
            recv,
            millis,
            format::safe(&detail).into_owned(),
        ]);
        rows += 1;
    }
    let requests = requests_table(&events);
    if rows == 0 && requests.is_none() {
        writeln!(
            out,
            "No network activity recorded (the session's network mode is in `logs show SESSION`)."
        )?;
        return Ok(());
    }
    if rows > 0 {
        table.write(out, "")?;
    }
    if let Some(requests) = requests {
        if rows > 0 {
            writeln!(out)?;
        }
        writeln!(out, "Inspected requests:")?;
        requests.write(out, "")?;
    }
    Ok(())
}

/// The `http` and `tls` events, one row each; `None` when there are none.
fn requests_table(events: &[Map<String, Value>]) -> Option<Table> {
    let mut table = Table::new(vec![
        "TIME",
        "CONN",
        "REQUEST",
        "STATUS",
        "DECISION",
        "SENT",
        "RECEIVED",
        "MS",
        "RULE / REASON",
    ]);
    let mut rows = 0;
    for e in events {
        let time = e
            .get("time")
            .and_then(Value::as_str)
            .and_then(|t| parse_rfc3339(t).ok())
            .map(format::utc_millis)
            .unwrap_or_default();
        let conn = number(e, "connection").to_string();
        let row = match text(e, "event").as_str() {
            "http" => {
                let mut detail = rule_or_reason(e);
                let secrets = injected(e);
                if !secrets.is_empty() {
                    detail.push_str(&format!("; secrets injected: {}", secrets.join(",")));
                }
                if let Some(name) = e.get("exfiltration").and_then(Value::as_str) {
                    detail.push_str(&format!("; POSSIBLE EXFILTRATION of {name}'s placeholder"));
                }
                if let Some(error) = e.get("error").and_then(Value::as_str) {
                    detail.push_str(&format!("; {error}"));
                }
                vec![
                    time,
                    conn,
                    format!(
                        "{} {} {}",
                        text(e, "method"),
                        request_url(e),
                        text(e, "protocol")
                    ),
                    e.get("status")
                        .and_then(Value::as_u64)
                        .map_or_else(|| "-".to_owned(), |c| c.to_string()),
                    text(e, "decision"),
                    number(e, "bytes_out").to_string(),
                    number(e, "bytes_in").to_string(),
                    number(e, "duration_ms").to_string(),
                    detail,
                ]
            }
            "tls" => vec![
                time,
                conn,
                format!(
                    "TLS {}:{} (server name {})",
                    text(e, "host"),
                    number(e, "port"),
                    or_dash(text(e, "sni"))
                ),
                "-".into(),
                text(e, "decision"),
                "-".into(),
                "-".into(),
                "-".into(),
                text(e, "error"),
            ],
            _ => continue,
        };
        table.push(
            row.into_iter()
                .map(|cell| format::safe(&cell).into_owned())
                .collect(),
        );
        rows += 1;
    }
    (rows > 0).then_some(table)
}

/// An `http` event's URL: `scheme://host[:port]path`, the port left out when it is
/// the scheme's own.
pub(super) fn request_url(e: &Map<String, Value>) -> String {
    let scheme = text(e, "scheme");
    let default_port = if scheme == "http" { 80 } else { 443 };
    let port = match number(e, "port") {
        0 => String::new(),
        p if p == default_port => String::new(),
        p => format!(":{p}"),
    };
    format!("{scheme}://{}{port}{}", text(e, "host"), text(e, "path"))
}

/// The names of the secrets an `http` event says were injected.
pub(super) fn injected(e: &Map<String, Value>) -> Vec<&str> {
    e.get("secrets")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn has_connect(events: &[Map<String, Value>], close: &Map<String, Value>) -> bool {
    let id = close.get("connection");
    events
        .iter()
        .any(|e| text(e, "event") == "connect" && e.get("connection") == id)
}

fn text(e: &Map<String, Value>, key: &str) -> String {
    e.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn number(e: &Map<String, Value>, key: &str) -> u64 {
    e.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn or_dash(s: String) -> String {
    if s.is_empty() { "-".into() } else { s }
}

/// What decided: the rule, unless something other than a rule refused (default
/// deny, a private address, DNS rebinding, this machine's own address, a limit), when
/// a matching allow rule would only mislead.
fn rule_or_reason(e: &Map<String, Value>) -> String {
    let reason = text(e, "reason");
    let refused_by_guard = text(e, "decision") == "deny" && reason != "rule";
    match e.get("rule").and_then(Value::as_str) {
        Some(rule) if !refused_by_guard => rule.to_owned(),
        _ => reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<Vec<u8>> {
        text.lines()
            .map(|l| format!("{l}\n").into_bytes())
            .collect()
    }

    #[test]
    fn joins_a_connection_with_its_end() {
        let input = lines(concat!(
            r#"{"time":"2026-01-01T00:00:00.000Z","type":"session-start"}"#,
            "\n",
            r#"{"time":"2026-01-01T00:00:00.100Z","type":"network","event":"dns","protocol":"dns","name":"web.test","qtype":"A","rcode":"No Error","addresses":["127.0.0.1"],"decision":"allow","rule":"allow web.test:8080","reason":"rule"}"#,
            "\n",
            r#"{"time":"2026-01-01T00:00:00.200Z","type":"network","event":"connect","connection":3,"protocol":"tcp","name":"web.test","address":"127.0.0.1","port":8080,"decision":"allow","rule":"allow web.test:8080","reason":"rule"}"#,
            "\n",
            r#"{"time":"2026-01-01T00:00:00.300Z","type":"network","event":"connect","connection":4,"protocol":"tcp","name":null,"address":"1.1.1.1","port":443,"decision":"deny","rule":null,"reason":"default deny"}"#,
            "\n",
            r#"{"time":"2026-01-01T00:00:00.400Z","type":"network","event":"connect","connection":5,"protocol":"tcp","name":"evil.test","address":"10.0.0.1","port":443,"decision":"deny","rule":"allow evil.test","reason":"dns rebinding"}"#,
            "\n",
            r#"{"time":"2026-01-01T00:00:00.500Z","type":"network","event":"connect","connection":6,"protocol":"tcp","name":"bad.test","address":"8.8.8.8","port":443,"decision":"deny","rule":"deny bad.test","reason":"rule"}"#,
            "\n",
            r#"{"time":"2026-01-01T00:00:01.200Z","type":"network","event":"close","connection":3,"protocol":"tcp","name":"web.test","address":"127.0.0.1","port":8080,"bytes_out":78,"bytes_in":2048,"duration_ms":1000,"error":null}"#,
        ));
        let mut out = Vec::new();
        write_table(&mut out, &input).unwrap();
        let text = String::from_utf8(out).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 6, "{text}");
        assert!(rows[0].starts_with("TIME"));
        assert!(
            rows[1].contains("dns") && rows[1].contains("allow A"),
            "{text}"
        );
        assert!(
            rows[2].contains("web.test") && rows[2].contains("1000"),
            "{text}"
        );
        assert!(
            rows[2].contains(" 78 ") && rows[2].contains(" 2048 "),
            "{text}"
        );
        assert!(
            rows[3].contains("1.1.1.1") && rows[3].contains("default deny"),
            "{text}"
        );
        // Refused by a guard: the reason, not the allow rule that matched.
        assert!(
            rows[4].trim_end().ends_with("dns rebinding") && !rows[4].contains("allow evil"),
            "{text}"
        );
        // Refused by a deny rule: that rule is the reason.
        assert!(rows[5].trim_end().ends_with("deny bad.test"), "{text}");
    }

    #[test]
    fn says_so_when_there_is_nothing() {
        let mut out = Vec::new();
        write_table(
            &mut out,
            &lines(r#"{"time":"2026-01-01T00:00:00Z","type":"session-start"}"#),
        )
        .unwrap();
        assert!(
            String::from_utf8(out)
                .unwrap()
                .starts_with("No network activity")
        );
    }
}
