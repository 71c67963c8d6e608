//! The live note on the user's stderr the first time each destination is refused in a
//! session: what was refused, why, and what to do about it. Written by `vectraguard`
//! itself outside the sandbox, so it is never part of the command's `stderr.log`.
//!
//! Off with `--no-network-notes` or `VECTRAGUARD_QUIET=1`.

use std::collections::HashSet;
use std::io::Write;
use std::net::IpAddr;

use vg_netstack::{NetEvent, Verdict};

/// Destinations noted at most; past it one line says that more are not shown.
const MAX_NOTES: usize = 100;

/// Whether notes are wanted: not silenced by the flag or the environment.
pub fn wanted(no_network_notes: bool) -> bool {
    !no_network_notes && std::env::var_os("VECTRAGUARD_QUIET").is_none_or(|v| v != "1")
}

pub struct Notes {
    seen: HashSet<(String, u16)>,
    /// Our terminal is in raw mode (a `-t` session): lines end in `\r\n`.
    raw_terminal: bool,
}

impl Notes {
    pub fn new(raw_terminal: bool) -> Self {
        Self {
            seen: HashSet::new(),
            raw_terminal,
        }
    }

    /// Shows the note for `event` on stderr if it is the first refusal of its
    /// destination. Errors writing to stderr are ignored: the record has the event.
    pub fn show(&mut self, event: &NetEvent) {
        if let Some(line) = self.note(event) {
            let end = if self.raw_terminal { "\r\n" } else { "\n" };
            let _ = write!(std::io::stderr().lock(), "{line}{end}");
        }
    }

    /// The note for `event`, if it is the first refusal of its destination.
    fn note(&mut self, event: &NetEvent) -> Option<String> {
        let (key, text) = match event {
            NetEvent::Dns { name, verdict, .. } if !verdict.allowed => {
                ((name.clone(), 0), refused_name(name, verdict))
            }
            NetEvent::Connect {
                protocol,
                name,
                address,
                port,
                verdict,
                ..
            } if !verdict.allowed => {
                let dest = name.clone().unwrap_or_else(|| address.to_string());
                let text = refused_connection(protocol, name.as_deref(), *address, *port, verdict);
                ((dest, *port), text)
            }
            _ => return None,
        };
        if self.seen.contains(&key) {
            return None;
        }
        if self.seen.len() > MAX_NOTES {
            return None;
        }
        self.seen.insert(key);
        if self.seen.len() > MAX_NOTES {
            return Some(format!(
                "vectraguard: more than {MAX_NOTES} destinations refused; the rest are only in the session's records (`vectraguard logs show SESSION --network`)"
            ));
        }
        Some(format!("vectraguard: refused {text}"))
    }
}

/// A DNS question refused: the name got NXDOMAIN.
fn refused_name(name: &str, verdict: &Verdict) -> String {
    let name = safe(name);
    match (verdict.reason.as_str(), &verdict.rule) {
        ("rule", Some(rule)) => format!("the name {name} — denied by '{}'", safe(rule)),
        ("default deny", _) => format!(
            "the name {name} — no rule allows it; allow it with --allow {name} (or --allow {name}:PORT)"
        ),
        (reason, _) => format!("the name {name} — {}", safe(reason)),
    }
}

fn refused_connection(
    protocol: &str,
    name: Option<&str>,
    addr: IpAddr,
    port: u16,
    verdict: &Verdict,
) -> String {
    let shown_addr = match (addr, port) {
        (_, 0) => addr.to_string(),
        (IpAddr::V4(a), p) => format!("{a}:{p}"),
        (IpAddr::V6(a), p) => format!("[{a}]:{p}"),
    };
    let dest = match (name, port) {
        (Some(n), 0) => safe(n),
        (Some(n), p) => format!("{}:{p}", safe(n)),
        (None, 0) => format!("{protocol} to {shown_addr}"),
        (None, _) => shown_addr.clone(),
    };
    let target = name.map_or_else(|| addr.to_string(), safe);
    let port_suffix = if port == 0 {
        String::new()
    } else {
        format!(":{port}")
    };
    match (verdict.reason.as_str(), &verdict.rule) {
        ("rule", Some(rule)) => format!("{dest} — denied by '{}'", safe(rule)),
        ("default deny", _) => {
            format!("{dest} — no rule allows it; allow it with --allow {target}{port_suffix}")
        }
        ("private address", _) => format!(
            "{dest} — {addr} is a private or special-purpose address; only a rule naming it opens it: --allow {addr}{port_suffix}"
        ),
        ("dns rebinding", _) => format!(
            "{dest} — resolves to {addr}, a private or special-purpose address (DNS rebinding guard); if that is intended, pin it: --add-host {target}:{addr}"
        ),
        ("own address", _) => match name {
            Some(_) => format!(
                "{dest} — resolves to {addr}, this machine's own address; if that is intended, pin it: --add-host {target}:{addr}"
            ),
            None => format!(
                "{dest} — {addr} is this machine's own address; only a rule naming exactly it opens it: --allow {addr}{port_suffix}"
            ),
        },
        (reason, _) => format!("{dest} — {}", safe(reason)),
    }
}

/// Names come from the sandbox: no control characters reach the terminal.
fn safe(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn connect(name: Option<&str>, addr: &str, port: u16, reason: &str) -> NetEvent {
        NetEvent::Connect {
            id: 1,
            time: SystemTime::now(),
            protocol: "tcp",
            name: name.map(str::to_owned),
            address: addr.parse().unwrap(),
            port,
            verdict: Verdict {
                allowed: false,
                rule: Some("allow *".into()),
                reason: reason.into(),
            },
        }
    }

    fn dns(name: &str, reason: &str, rule: Option<&str>, allowed: bool) -> NetEvent {
        NetEvent::Dns {
            time: SystemTime::now(),
            name: name.into(),
            qtype: "A".into(),
            verdict: Verdict {
                allowed,
                rule: rule.map(str::to_owned),
                reason: reason.into(),
            },
            addresses: vec![],
            rcode: "NXDomain".into(),
        }
    }

    #[test]
    fn each_refused_destination_is_noted_once_with_its_reason_and_fix() {
        let mut notes = Notes::new(false);
        let rebinding = notes
            .note(&connect(
                Some("pypi.org"),
                "192.0.2.9",
                443,
                "dns rebinding",
            ))
            .unwrap();
        assert!(
            rebinding.starts_with("vectraguard: refused pypi.org:443 — resolves to 192.0.2.9")
                && rebinding.contains("--add-host pypi.org:192.0.2.9"),
            "{rebinding}"
        );
        assert_eq!(
            notes.note(&connect(
                Some("pypi.org"),
                "192.0.2.9",
                443,
                "dns rebinding"
            )),
            None,
            "once per destination"
        );
        let other_port = notes
            .note(&connect(Some("pypi.org"), "192.0.2.9", 80, "dns rebinding"))
            .unwrap();
        assert!(other_port.contains("pypi.org:80"), "{other_port}");
        let own = notes
            .note(&connect(None, "192.0.2.2", 8080, "own address"))
            .unwrap();
        assert!(
            own.contains("192.0.2.2:8080 — 192.0.2.2 is this machine's own address")
                && own.contains("--allow 192.0.2.2:8080"),
            "{own}"
        );
        let private = notes
            .note(&connect(None, "fd00::1", 22, "private address"))
            .unwrap();
        assert!(
            private.contains("[fd00::1]:22") && private.contains("--allow fd00::1:22"),
            "{private}"
        );
        let name = notes
            .note(&dns("evil.test", "default deny", None, false))
            .unwrap();
        assert_eq!(
            name,
            "vectraguard: refused the name evil.test — no rule allows it; allow it with --allow evil.test (or --allow evil.test:PORT)"
        );
        let by_rule = notes
            .note(&dns("bad.test", "rule", Some("deny bad.test"), false))
            .unwrap();
        assert!(by_rule.ends_with("denied by 'deny bad.test'"), "{by_rule}");
        assert_eq!(
            notes.note(&dns("ok.test", "rule", Some("allow ok.test"), true)),
            None
        );
        let udp = notes
            .note(&NetEvent::Connect {
                id: 2,
                time: SystemTime::now(),
                protocol: "icmp",
                name: None,
                address: "8.8.8.8".parse().unwrap(),
                port: 0,
                verdict: Verdict::deny("ICMP is not mediated"),
            })
            .unwrap();
        assert_eq!(
            udp,
            "vectraguard: refused icmp to 8.8.8.8 — ICMP is not mediated"
        );
        let control = notes
            .note(&dns("a\u{1b}[2J.test", "invalid name", None, false))
            .unwrap();
        assert!(!control.contains('\u{1b}'), "{control:?}");
    }

    #[test]
    fn notes_stop_after_the_cap_with_one_line_saying_so() {
        let mut notes = Notes::new(true);
        let shown: Vec<String> = (1..=u16::try_from(MAX_NOTES + 50).unwrap())
            .filter_map(|port| notes.note(&connect(None, "8.8.8.8", port, "default deny")))
            .collect();
        assert_eq!(shown.len(), MAX_NOTES + 1);
        assert!(
            shown[MAX_NOTES].contains("more than 100"),
            "{}",
            shown[MAX_NOTES]
        );
    }
}
