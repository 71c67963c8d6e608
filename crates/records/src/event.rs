//! Session events (`events.jsonl`) and their fan-out to several consumers.
//!
//! Each event is one JSON object on one line: `time` (RFC 3339 UTC), `type`,
//! then free fields, e.g.
//! `{"time":"2025-12-19T10:10:53.123Z","type":"limit-hit","limit":"memory"}`.
//! The session's own `events.jsonl` always receives an event first (its write
//! can fail and is part of the hash chain); then every subscribed
//! [`EventSink`] gets it, so a live dashboard and other consumers can follow.

use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::SystemTime;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::time;

/// Well-known event types.
pub mod kind {
    pub const SESSION_START: &str = "session-start";
    pub const SESSION_END: &str = "session-end";
    pub const LIMIT_HIT: &str = "limit-hit";
    pub const FAILURE: &str = "failure";
    pub const NETWORK: &str = "network";
    pub const APPROVAL: &str = "approval";
    pub const VIOLATION: &str = "violation";
    /// A command started in a persistent sandbox (`sandbox exec`), and its end.
    pub const COMMAND: &str = "command";
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub time: SystemTime,
    /// Serialized as `type`.
    pub kind: String,
    /// Free fields; keys `time` and `type` are ignored when writing.
    pub fields: Map<String, Value>,
}

impl Event {
    /// An event of type `kind` happening now.
    pub fn new(kind: impl Into<String>) -> Self {
        Self {
            time: SystemTime::now(),
            kind: kind.into(),
            fields: Map::new(),
        }
    }

    pub fn at(mut self, time: SystemTime) -> Self {
        self.time = time;
        self
    }

    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.fields.insert(key.into(), value.into());
        self
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// The `events.jsonl` line, newline included.
    pub fn to_line(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut v = serde_json::to_vec(self)?;
        v.push(b'\n');
        Ok(v)
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("time", &time::format_rfc3339(self.time))?;
        m.serialize_entry("type", &self.kind)?;
        for (k, v) in &self.fields {
            if k != "time" && k != "type" {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut fields = Map::deserialize(d)?;
        let time = match fields.remove("time") {
            Some(Value::String(s)) => time::parse_rfc3339(&s).map_err(D::Error::custom)?,
            _ => return Err(D::Error::custom("event without a \"time\" string")),
        };
        let kind = match fields.remove("type") {
            Some(Value::String(s)) => s,
            _ => return Err(D::Error::custom("event without a \"type\" string")),
        };
        Ok(Self { time, kind, fields })
    }
}

/// A consumer of a session's events. Called from whichever thread recorded
/// the event, after it reached `events.jsonl`; must return quickly (hand
/// the event to a queue rather than doing I/O inline).
pub trait EventSink: Send + Sync {
    fn publish(&self, event: &Event);
}

/// A sink feeding an unbounded channel, for a consumer on another thread.
/// Events are dropped silently once the receiver is gone.
#[derive(Debug)]
pub struct ChannelSink {
    tx: Mutex<Sender<Event>>,
}

impl ChannelSink {
    pub fn new() -> (Self, Receiver<Event>) {
        let (tx, rx) = mpsc::channel();
        (Self { tx: Mutex::new(tx) }, rx)
    }
}

impl EventSink for ChannelSink {
    fn publish(&self, event: &Event) {
        let tx = self
            .tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = tx.send(event.clone());
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn event_json_shape() {
        let e = Event::new(kind::LIMIT_HIT)
            .at(UNIX_EPOCH + Duration::from_millis(1500))
            .with("limit", "memory")
            .with("bytes", 1024)
            .with("type", "ignored");
        let line = String::from_utf8(e.to_line().unwrap()).unwrap();
        assert_eq!(
            line,
            "{\"time\":\"1970-01-01T00:00:01.500Z\",\"type\":\"limit-hit\",\"bytes\":1024,\"limit\":\"memory\"}\n"
        );
        let back: Event = serde_json::from_str(&line).unwrap();
        assert_eq!(back.kind, "limit-hit");
        assert_eq!(back.get("limit"), Some(&Value::from("memory")));
        assert_eq!(back.time, e.time);
        assert!(serde_json::from_str::<Event>("{\"type\":\"x\"}").is_err());
    }

    #[test]
    fn channel_sink_delivers() {
        let (sink, rx) = ChannelSink::new();
        sink.publish(&Event::new("x"));
        assert_eq!(rx.recv().unwrap().kind, "x");
        drop(rx);
        sink.publish(&Event::new("y")); // receiver gone: no panic
    }
}
