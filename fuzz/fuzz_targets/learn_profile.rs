//! Learned profiles (`vg_learn`): a learning run's command chooses every path it
//! touches, every name it resolves and every program it runs, and these become the
//! profile file. Input: parts (see `common::split`): each part's first byte picks the
//! kind (path read/written/created/removed, destination name, program), the rest is
//! the text. Properties: the rendered profile always loads, and what it loads is
//! exactly what learning granted (no text the command chose becomes a key, a grant or
//! a rule of its own).
#![no_main]

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use vg_learn::{Access, Destination, Header, HostKind, HostProbe, LearnContext, Observations, Probe};

#[path = "common.rs"]
mod common;

/// A host where every path exists: a file when its last byte is odd, else a folder.
struct Everything;

impl HostProbe for Everything {
    fn probe(&self, path: &Path) -> Probe {
        match path.as_os_str().as_bytes().last() {
            Some(b) if b % 2 == 1 => Probe::Found(HostKind::File),
            _ => Probe::Found(HostKind::Dir),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut observations = Observations::new();
    for part in common::split(data) {
        let Some((&kind, text)) = part.split_first() else {
            continue;
        };
        let home_relative = Path::new("/home/u").join(std::ffi::OsStr::from_bytes(text));
        let path = if text.starts_with(b"/") {
            PathBuf::from(std::ffi::OsStr::from_bytes(text))
        } else {
            home_relative
        };
        match kind % 6 {
            0 => observations.file(&path, Access::Read),
            1 => observations.file(&path, Access::Write),
            2 => observations.file(&path, Access::Create),
            3 => observations.file(&path, Access::Remove),
            4 => observations.destination(Destination {
                name: std::str::from_utf8(text).ok().map(str::to_owned),
                ip: std::net::IpAddr::from([93, 184, 216, 34]),
                port: u16::from(kind),
                allowed: kind % 2 == 0,
            }),
            _ => observations.program(&path),
        }
    }
    let host = Everything;
    let cx = LearnContext::new("/home/u".into(), vec!["/home/u/ws".into()], &host);
    let learned = vg_learn::learn(&observations, &cx);
    let header = Header {
        name: "fuzz".into(),
        command: vec![String::from_utf8_lossy(data).into_owned()],
        learned_at: UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        session_id: "session-20270115T080000Z-abcdef".into(),
    };
    let text = learned.to_toml(&header);
    let file = vg_policy::config::parse_learned(&text, Path::new("/p/fuzz.toml"), "fuzz")
        .unwrap_or_else(|e| panic!("a rendered profile does not load: {e}\n{text}"));
    let settings = &file.profiles["fuzz"];
    let granted = |write: bool| -> Vec<PathBuf> {
        learned
            .grants
            .iter()
            .filter(|g| g.write == write)
            .map(|g| g.path.clone())
            .collect()
    };
    assert_eq!(settings.read_only, granted(false), "{text}");
    assert_eq!(settings.read_write, granted(true), "{text}");
    let rules: Vec<&str> = settings.network_rules.iter().map(|r| r.text.as_str()).collect();
    let learned_rules: Vec<&str> = learned.rules.iter().map(|r| r.rule.text.as_str()).collect();
    assert_eq!(rules, learned_rules, "{text}");
});
