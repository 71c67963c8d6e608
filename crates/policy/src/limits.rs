//! Resource limits as values: what the user asked for, parsed from flags and
//! configuration (`512m`, `1g`, `30s`, `0.5`), and the built-in defaults.
//!
//! Which mechanism enforces each limit (cgroups, rlimits, tmpfs sizes, the
//! supervisor's timer and output relays) is decided by `vg-sandbox` and the CLI.

use std::fmt;
use std::time::Duration;

/// Limits of one sandbox. `None` means "not limited by this setting".
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    /// Memory of the whole sandbox, in bytes.
    pub memory: Option<u64>,
    /// CPU time as a number of CPUs (0.5 = half of one CPU).
    pub cpus: Option<f64>,
    /// Processes (and threads) alive at once in the sandbox.
    pub pids: Option<u64>,
    /// Wall-clock time of the session.
    pub timeout: Option<Duration>,
    /// Bytes recorded and shown per output stream.
    pub max_output: Option<u64>,
    /// Bytes recorded per output stream (`stdout.log`, `stderr.log`, `tty.cast`);
    /// past it the user still sees the output, the record keeps a marker.
    pub max_record: Option<u64>,
    /// Size of each private writable area (`/tmp`, `$HOME`).
    pub disk: Option<u64>,
    /// Time between SIGTERM and SIGKILL when the session is stopped.
    pub kill_grace: Option<Duration>,
    /// Pseudo-terminals open at once in the sandbox's own devpts (its `max=`).
    pub ptys: Option<u64>,
    /// Run even when a requested limit cannot be enforced on this host.
    pub best_effort: Option<bool>,
}

impl Limits {
    /// Higher-precedence values replace ours, one limit at a time.
    pub fn overlay(&mut self, higher: Limits) {
        let Limits {
            memory,
            cpus,
            pids,
            timeout,
            max_output,
            max_record,
            disk,
            kill_grace,
            ptys,
            best_effort,
        } = higher;
        set(&mut self.memory, memory);
        set(&mut self.cpus, cpus);
        set(&mut self.pids, pids);
        set(&mut self.timeout, timeout);
        set(&mut self.max_output, max_output);
        set(&mut self.max_record, max_record);
        set(&mut self.disk, disk);
        set(&mut self.kill_grace, kill_grace);
        set(&mut self.ptys, ptys);
        set(&mut self.best_effort, best_effort);
    }

    /// These limits with `ceiling` (a project file's) applied on top, which may only
    /// tighten: each limit becomes the smaller of ours and the ceiling's, where ours
    /// unset means the default that would apply (pids, disk, kill grace, ptys,
    /// max-record) or no limit at all (cpus, timeout, max-output). Memory's default
    /// depends on the host ([`default_memory`]); without it here, a memory ceiling
    /// applies as given (`tightened_over` takes it into account). `best_effort` is
    /// never taken from the ceiling: it weakens.
    pub fn tightened_by(self, ceiling: &Limits) -> Limits {
        self.tightened_over(ceiling, None)
    }

    /// [`Limits::tightened_by`], knowing the host's default memory cap: a memory
    /// ceiling at or above it leaves memory unset (the default, however it is
    /// enforced), so that a project file can never raise it.
    pub fn tightened_over(self, ceiling: &Limits, default_memory: Option<u64>) -> Limits {
        fn min<T: PartialOrd + Copy>(
            ours: Option<T>,
            default: Option<T>,
            cap: Option<T>,
        ) -> Option<T> {
            match (ours.or(default), cap) {
                (Some(ours), Some(cap)) if ours < cap => Some(ours),
                (_, Some(cap)) => Some(cap),
                (_, None) => ours,
            }
        }
        let memory = match (self.memory, default_memory, ceiling.memory) {
            (None, Some(default), Some(cap)) if cap >= default => None,
            (ours, _, cap) => min(ours, None, cap),
        };
        Limits {
            memory,
            cpus: min(self.cpus, None, ceiling.cpus),
            pids: min(self.pids, Some(DEFAULT_PIDS), ceiling.pids),
            timeout: min(self.timeout, None, ceiling.timeout),
            max_output: min(self.max_output, None, ceiling.max_output),
            max_record: min(
                self.max_record,
                Some(DEFAULT_MAX_RECORD),
                ceiling.max_record,
            ),
            disk: min(self.disk, Some(DEFAULT_DISK), ceiling.disk),
            kill_grace: min(
                self.kill_grace,
                Some(DEFAULT_KILL_GRACE),
                ceiling.kill_grace,
            ),
            ptys: min(self.ptys, Some(DEFAULT_PTYS), ceiling.ptys),
            best_effort: self.best_effort,
        }
    }

    /// Seed 002's limits for running untrusted code snippets: 512 MiB, half a CPU,
    /// 1 GiB of disk, 30 s, 1 MiB of output per stream.
    pub fn code_exec() -> Limits {
        Limits {
            memory: Some(512 * MIB),
            cpus: Some(0.5),
            pids: Some(256),
            timeout: Some(Duration::from_secs(30)),
            max_output: Some(MIB),
            max_record: None,
            disk: Some(GIB),
            kill_grace: None,
            ptys: None,
            best_effort: None,
        }
    }
}

fn set<T>(slot: &mut Option<T>, higher: Option<T>) {
    if higher.is_some() {
        *slot = higher;
    }
}

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// Defaults that stop accidents without getting in the way: a process cap that no
/// build reaches but a fork bomb does, and the size of each private tmpfs.
pub const DEFAULT_PIDS: u64 = 4096;
pub const DEFAULT_DISK: u64 = GIB;
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(10);
/// Pseudo-terminals per sandbox: plenty for shells, tmux and test suites, and far from
/// the host's pool (`/proc/sys/kernel/pty/max`), which every user's terminals share.
pub const DEFAULT_PTYS: u64 = 64;
/// Bytes recorded per output stream when nothing says otherwise: a runaway printer
/// cannot fill the disk with its record, while the user still sees everything.
pub const DEFAULT_MAX_RECORD: u64 = GIB;

/// `--memory unlimited`: no memory cap at all, not even the default.
pub const UNLIMITED_MEMORY: u64 = u64::MAX;

/// The memory cap of a sandbox when nothing says otherwise: half of the host's
/// physical memory (`MemTotal`), so that a runaway program is stopped while the
/// host keeps room for everything else.
pub fn default_memory(mem_total: u64) -> u64 {
    mem_total / 2
}

/// `MemTotal` of `/proc/meminfo`'s text, in bytes.
pub fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(KIB),
        None => Some(value),
        Some(_) => None,
    }
}

/// A memory limit: a size as [`parse_size`] reads it, or `unlimited` (no cap at
/// all, [`UNLIMITED_MEMORY`]).
pub fn parse_memory(what: &'static str, input: &str) -> Result<u64, LimitError> {
    if input.trim().eq_ignore_ascii_case("unlimited") {
        return Ok(UNLIMITED_MEMORY);
    }
    parse_size(what, input).map_err(|e| LimitError {
        hint: "use a size such as 512m, 1g or 65536 (suffixes b, k, m, g, t; binary units), or unlimited",
        ..e
    })
}

/// A value that could not be parsed, with the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError {
    pub what: &'static str,
    pub value: String,
    pub hint: &'static str,
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {} '{}': {}", self.what, self.value, self.hint)
    }
}

impl std::error::Error for LimitError {}

/// `512m`, `1g`, `64k`, `1.5g`, `1048576` (bytes), `2GiB`, `100MB` (binary units:
/// memory and tmpfs sizes are counted in pages, not decimal megabytes).
pub fn parse_size(what: &'static str, input: &str) -> Result<u64, LimitError> {
    let err = || LimitError {
        what,
        value: input.to_owned(),
        hint: "use a size such as 512m, 1g or 65536 (suffixes b, k, m, g, t; binary units)",
    };
    let s = input.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let multiplier = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => KIB,
        "m" => MIB,
        "g" => GIB,
        "t" => GIB << 10,
        _ => return Err(err()),
    };
    if unit == "ib" {
        return Err(err());
    }
    let value: f64 = number.parse().map_err(|_| err())?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > (u64::MAX / 2) as f64 {
        return Err(err());
    }
    // Sizes are whole bytes; a fractional result is rounded down (the range was
    // checked above, so nothing is lost but the fraction).
    #[allow(clippy::cast_possible_truncation)]
    Ok(bytes as u64)
}

/// `30s`, `5m`, `1h`, `1h30m`, `500ms`, `90` (seconds), `2.5s`.
pub fn parse_duration(what: &'static str, input: &str) -> Result<Duration, LimitError> {
    let err = || LimitError {
        what,
        value: input.to_owned(),
        hint: "use a duration such as 30s, 5m, 1h30m or 500ms (a bare number is seconds)",
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return positive(Duration::try_from_secs_f64(secs).map_err(|_| err())?).ok_or_else(err);
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        let (number, tail) = rest.split_at(split);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let value: f64 = number.parse().map_err(|_| err())?;
        let seconds = match unit {
            "ms" => value / 1000.0,
            "s" => value,
            "m" => value * 60.0,
            "h" => value * 3600.0,
            "d" => value * 86400.0,
            _ => return Err(err()),
        };
        total += Duration::try_from_secs_f64(seconds).map_err(|_| err())?;
        rest = next;
    }
    positive(total).ok_or_else(err)
}

fn positive(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

/// A number of CPUs: `0.5`, `2`, `1.25`. At least 0.01 (the kernel's scheduling
/// period makes smaller quotas meaningless), at most 1024.
pub fn parse_cpus(input: &str) -> Result<f64, LimitError> {
    let value: f64 = input.trim().parse().map_err(|_| LimitError {
        what: "--cpus",
        value: input.to_owned(),
        hint: "use a number of CPUs such as 0.5, 1 or 2",
    })?;
    if !(0.01..=1024.0).contains(&value) {
        return Err(LimitError {
            what: "--cpus",
            value: input.to_owned(),
            hint: "use a number of CPUs between 0.01 and 1024",
        });
    }
    Ok(value)
}

/// A process count: a whole number of at least 2 (init and the command).
pub fn parse_pids(input: &str) -> Result<u64, LimitError> {
    match input.trim().parse::<u64>() {
        Ok(n) if (2..=4_194_304).contains(&n) => Ok(n),
        _ => Err(LimitError {
            what: "--pids",
            value: input.to_owned(),
            hint: "use a whole number of processes between 2 and 4194304",
        }),
    }
}

/// A number of pseudo-terminals: at least 1 (`-t` takes one), at most 4096 (the
/// kernel's default size of the whole host's pool).
pub fn parse_ptys(input: &str) -> Result<u64, LimitError> {
    match input.trim().parse::<u64>() {
        Ok(n) if (1..=4096).contains(&n) => Ok(n),
        _ => Err(LimitError {
            what: "--ptys",
            value: input.to_owned(),
            hint: "use a whole number of pseudo-terminals between 1 and 4096",
        }),
    }
}

/// A byte count for people: `11.7 GiB`, `512 MiB`, `64 KiB`, `100 bytes`.
pub fn human_size(bytes: u64) -> String {
    for (unit, size) in [("TiB", GIB << 10), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)] {
        if bytes >= size {
            let value = bytes as f64 / size as f64;
            return if bytes.is_multiple_of(size) {
                format!("{} {unit}", bytes / size)
            } else {
                format!("{value:.1} {unit}")
            };
        }
    }
    format!("{bytes} bytes")
}

/// Renders a byte count the way `parse_size` reads it back.
pub fn format_size(bytes: u64) -> String {
    for (unit, size) in [("g", GIB), ("m", MIB), ("k", KIB)] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("--memory", "512m"), Ok(512 * MIB));
        assert_eq!(parse_size("--memory", "1g"), Ok(GIB));
        assert_eq!(parse_size("--memory", "1G"), Ok(GIB));
        assert_eq!(parse_size("--memory", "2GiB"), Ok(2 * GIB));
        assert_eq!(parse_size("--memory", "100MB"), Ok(100 * MIB));
        assert_eq!(parse_size("--memory", "64k"), Ok(64 * KIB));
        assert_eq!(parse_size("--memory", "1.5g"), Ok(GIB + GIB / 2));
        assert_eq!(parse_size("--memory", "4096"), Ok(4096));
        for bad in ["", "m", "-1m", "0", "12x", "1.2.3m", "1ib", "1e9", "nan"] {
            let e = parse_size("--memory", bad).unwrap_err();
            assert!(e.to_string().contains("--memory"), "{bad}: {e}");
        }
    }

    #[test]
    fn durations_take_units_and_bare_seconds() {
        let d = |s| parse_duration("--timeout", s);
        assert_eq!(d("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(d("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(d("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(d("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(d("90"), Ok(Duration::from_secs(90)));
        assert_eq!(d("2.5s"), Ok(Duration::from_millis(2500)));
        for bad in ["", "0", "0s", "s", "5x", "-3s", "1h-1m", "m5"] {
            assert!(d(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cpus_and_pids_are_bounded() {
        assert_eq!(parse_cpus("0.5"), Ok(0.5));
        assert_eq!(parse_cpus("2"), Ok(2.0));
        assert!(parse_cpus("0").is_err());
        assert!(parse_cpus("half").is_err());
        assert_eq!(parse_pids("100"), Ok(100));
        assert!(parse_pids("1").is_err());
        assert!(parse_pids("1.5").is_err());
    }

    #[test]
    fn ptys_are_bounded() {
        assert_eq!(parse_ptys("8"), Ok(8));
        assert!(parse_ptys("0").is_err());
        assert!(parse_ptys("4097").is_err());
        assert!(parse_ptys("x").is_err());
    }

    #[test]
    fn a_ceiling_only_tightens_defaults_included() {
        let huge = Limits {
            memory: Some(100 * GIB),
            cpus: Some(64.0),
            pids: Some(1_000_000),
            timeout: Some(Duration::from_secs(100 * 86400)),
            max_output: Some(100 * GIB),
            max_record: Some(100 * GIB),
            disk: Some(100 * GIB),
            kill_grace: Some(Duration::from_secs(3650 * 86400)),
            ptys: Some(4096),
            best_effort: Some(true),
        };
        // Over a built-in profile: every value stays the profile's, or the default
        // where the profile sets none; best_effort is never taken.
        let t = Limits::code_exec().tightened_by(&huge);
        assert_eq!(
            t,
            Limits {
                pids: Some(256),
                kill_grace: Some(DEFAULT_KILL_GRACE),
                ptys: Some(DEFAULT_PTYS),
                max_record: Some(DEFAULT_MAX_RECORD),
                ..Limits::code_exec()
            }
        );
        // Over nothing: unlimited ones take the ceiling, defaulted ones stay at most
        // the default.
        let t = Limits::default().tightened_by(&huge);
        assert_eq!(t.memory, Some(100 * GIB));
        assert_eq!(t.timeout, Some(Duration::from_secs(100 * 86400)));
        assert_eq!(t.pids, Some(DEFAULT_PIDS));
        assert_eq!(t.disk, Some(DEFAULT_DISK));
        assert_eq!(t.kill_grace, Some(DEFAULT_KILL_GRACE));
        assert_eq!(t.ptys, Some(DEFAULT_PTYS));
        assert_eq!(t.max_record, Some(DEFAULT_MAX_RECORD));
        assert_eq!(t.best_effort, None);
        // Smaller values win, one limit at a time; no ceiling leaves ours as it was.
        let small = Limits {
            memory: Some(MIB),
            cpus: Some(0.25),
            pids: Some(10),
            timeout: Some(Duration::from_secs(1)),
            max_output: Some(KIB),
            max_record: Some(KIB),
            disk: Some(MIB),
            kill_grace: Some(Duration::from_millis(100)),
            ptys: Some(2),
            best_effort: None,
        };
        assert_eq!(Limits::code_exec().tightened_by(&small), small);
        assert_eq!(
            Limits::code_exec().tightened_by(&Limits::default()),
            Limits::code_exec()
        );
    }

    #[test]
    fn the_default_memory_cap_is_half_of_mem_total() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        let total = parse_mem_total(meminfo).unwrap();
        assert_eq!(total, 24_576_000 * KIB);
        assert_eq!(default_memory(total), 12_288_000 * KIB);
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: lots kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: 5 MB\n"), None);
        assert_eq!(human_size(default_memory(24 * GIB)), "12 GiB");
        assert_eq!(human_size(12_288_000 * KIB), "11.7 GiB");
        assert_eq!(human_size(512 * MIB), "512 MiB");
        assert_eq!(human_size(100), "100 bytes");
    }

    #[test]
    fn memory_may_be_unlimited() {
        assert_eq!(parse_memory("--memory", "unlimited"), Ok(UNLIMITED_MEMORY));
        assert_eq!(
            parse_memory("--memory", " Unlimited "),
            Ok(UNLIMITED_MEMORY)
        );
        assert_eq!(parse_memory("--memory", "2g"), Ok(2 * GIB));
        let e = parse_memory("--memory", "infinite")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--memory") && e.contains("unlimited"), "{e}");
        assert!(parse_memory("--memory", "0").is_err());
    }

    #[test]
    fn a_memory_ceiling_never_raises_the_default_cap() {
        let default = Some(12 * GIB);
        let ceiling = |memory| Limits {
            memory: Some(memory),
            ..Limits::default()
        };
        // Above the default (or unlimited): the default stays, however enforced.
        let t = Limits::default().tightened_over(&ceiling(100 * GIB), default);
        assert_eq!(t.memory, None);
        let t = Limits::default().tightened_over(&ceiling(UNLIMITED_MEMORY), default);
        assert_eq!(t.memory, None);
        // Below it: the ceiling.
        let t = Limits::default().tightened_over(&ceiling(GIB), default);
        assert_eq!(t.memory, Some(GIB));
        // Over an explicit value, the smaller one; an explicit unlimited is capped.
        let mine = |memory| Limits {
            memory: Some(memory),
            ..Limits::default()
        };
        let t = mine(20 * GIB).tightened_over(&ceiling(16 * GIB), default);
        assert_eq!(t.memory, Some(16 * GIB));
        let t = mine(UNLIMITED_MEMORY).tightened_over(&ceiling(16 * GIB), default);
        assert_eq!(t.memory, Some(16 * GIB));
        // The record cap only tightens, from its default.
        let t = Limits::default().tightened_over(
            &Limits {
                max_record: Some(100 * GIB),
                ..Limits::default()
            },
            default,
        );
        assert_eq!(t.max_record, Some(DEFAULT_MAX_RECORD));
    }

    #[test]
    fn overlay_replaces_limit_by_limit() {
        let mut low = Limits::code_exec();
        low.overlay(Limits {
            memory: Some(GIB),
            ..Limits::default()
        });
        assert_eq!(low.memory, Some(GIB));
        assert_eq!(low.cpus, Some(0.5));
        assert_eq!(format_size(512 * MIB), "512m");
        assert_eq!(format_size(1000), "1000");
    }
}
