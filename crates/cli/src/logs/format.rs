//! Text helpers for the `logs` views: times, durations, sizes, terminal-safe
//! cells and a plain column table.

use std::borrow::Cow;
use std::io::{self, Write};
use std::time::{Duration, SystemTime};

use vg_records::escape_hidden;
use vg_records::time::format_rfc3339;

/// `2025-12-19 10:10:53` (UTC, whole seconds), for tables.
pub fn utc_seconds(t: SystemTime) -> String {
    let s = format_rfc3339(t);
    // `2025-12-19T10:10:53.123Z`: the first 19 characters are ASCII.
    s.get(..19).unwrap_or(&s).replacen('T', " ", 1)
}

/// `2025-12-19 10:10:53.123` (UTC), for event lines.
pub fn stamp(t: SystemTime) -> String {
    let s = format_rfc3339(t);
    s.strip_suffix('Z').unwrap_or(&s).replacen('T', " ", 1)
}

/// `2025-12-19 10:10:53.123 UTC`, for the session summary.
pub fn utc_millis(t: SystemTime) -> String {
    format!("{} UTC", stamp(t))
}

/// The time of day `10:10:53.123`, prefixed with the date when it is not
/// `day` (the date of the session's start, `2025-12-19`).
pub fn time_of_day(t: SystemTime, day: &str) -> String {
    let s = format_rfc3339(t);
    match (s.get(..10), s.get(11..23)) {
        (Some(date), Some(tod)) if date == day => tod.to_owned(),
        (Some(date), Some(tod)) => format!("{date} {tod}"),
        _ => s,
    }
}

/// The UTC date of `t`, `2025-12-19`.
pub fn utc_date(t: SystemTime) -> String {
    let s = format_rfc3339(t);
    s.get(..10).unwrap_or(&s).to_owned()
}

/// A short duration: `850ms`, `4.9s`, `12m03s`, `2h05m`, `3d04h`.
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0 => format!("{}ms", d.subsec_millis()),
        1..60 => format!("{secs}.{}s", d.subsec_millis() / 100),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..86_400 => format!("{}h{:02}m", secs / 3600, secs / 60 % 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs / 3600 % 24),
    }
}

/// `end - start`, or zero when the clock went backwards.
pub fn elapsed(start: SystemTime, end: SystemTime) -> Duration {
    end.duration_since(start).unwrap_or_default()
}

/// Milliseconds as a JSON number (saturating).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `1.5 GiB`, `512 MiB`, `100 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Text from a record, safe to print on a terminal (names, descriptions
/// and errors are free text that may hold escape sequences).
pub fn safe(text: &str) -> Cow<'_, str> {
    escape_hidden(text)
}

/// Bytes from a record, shown as text: invalid UTF-8 replaced, hidden
/// characters escaped.
pub fn safe_bytes(bytes: &[u8]) -> String {
    escape_hidden(&String::from_utf8_lossy(bytes)).into_owned()
}

/// `text` cut to at most `width` characters, ending with `…` when cut.
pub fn truncate(text: &str, width: usize) -> Cow<'_, str> {
    if text.chars().count() <= width {
        return Cow::Borrowed(text);
    }
    let keep = width.saturating_sub(1);
    let mut out: String = text.chars().take(keep).collect();
    out.push('…');
    Cow::Owned(out)
}

/// Columns separated by two spaces, each as wide as its widest cell; the
/// last column is not padded.
#[derive(Debug)]
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: Vec<&'static str>) -> Self {
        Self {
            headers,
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Width of each column, in characters.
    pub fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(slot) = w.get_mut(i) {
                    *slot = (*slot).max(cell.chars().count());
                }
            }
        }
        w
    }

    /// Cuts the last column so that lines fit in `total` characters, but
    /// never below `min_last` characters.
    pub fn fit_last(&mut self, total: usize, min_last: usize) {
        let widths = self.widths();
        let fixed: usize = widths.iter().rev().skip(1).map(|w| w + 2).sum();
        let room = total.saturating_sub(fixed).max(min_last);
        for row in &mut self.rows {
            if let Some(last) = row.last_mut()
                && let Cow::Owned(cut) = truncate(last, room)
            {
                *last = cut;
            }
        }
    }

    pub fn write(&self, out: &mut dyn Write, indent: &str) -> io::Result<()> {
        let widths = self.widths();
        let headers: Vec<String> = self.headers.iter().map(|h| (*h).to_owned()).collect();
        for row in std::iter::once(&headers).chain(&self.rows) {
            let mut line = String::from(indent);
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let pad = widths[i].saturating_sub(cell.chars().count());
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad + 2));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    #[test]
    fn times_are_utc_and_compact() {
        let t = UNIX_EPOCH + Duration::from_millis(1_766_139_053_123);
        assert_eq!(utc_seconds(t), "2025-12-19 10:10:53");
        assert_eq!(utc_millis(t), "2025-12-19 10:10:53.123 UTC");
        assert_eq!(stamp(t), "2025-12-19 10:10:53.123");
        assert_eq!(utc_date(t), "2025-12-19");
        assert_eq!(time_of_day(t, "2025-12-19"), "10:10:53.123");
        assert_eq!(time_of_day(t, "2025-12-18"), "2025-12-19 10:10:53.123");
    }

    #[test]
    fn durations_are_short() {
        let ms = Duration::from_millis;
        assert_eq!(duration(ms(0)), "0ms");
        assert_eq!(duration(ms(850)), "850ms");
        assert_eq!(duration(ms(4_960)), "4.9s");
        assert_eq!(duration(ms(59_999)), "59.9s");
        assert_eq!(duration(ms(723_000)), "12m03s");
        assert_eq!(duration(ms(7_500_000)), "2h05m");
        assert_eq!(duration(ms(273_600_000)), "3d04h");
        let t = UNIX_EPOCH + ms(5_000);
        assert_eq!(elapsed(t, UNIX_EPOCH), Duration::ZERO);
        assert_eq!(millis(elapsed(UNIX_EPOCH, t)), 5_000);
    }

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(bytes(100), "100 B");
        assert_eq!(bytes(1024), "1 KiB");
        assert_eq!(bytes(1536 * 1024 * 1024), "1.5 GiB");
        assert_eq!(bytes(512 << 20), "512 MiB");
    }

    #[test]
    fn cells_are_cut_and_made_safe() {
        assert_eq!(truncate("abcdef", 6), "abcdef");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("ééé", 2), "é…");
        assert_eq!(safe("evil\x1b[2J"), "evil\\u{1b}[2J");
        assert_eq!(safe_bytes(b"a\xffb\n"), "a\u{fffd}b\\n");
    }

    #[test]
    fn table_aligns_columns_and_fits_the_last() {
        let mut t = Table::new(vec!["ID", "COMMAND"]);
        t.push(vec!["a".into(), "make -j4 all".into()]);
        t.push(vec!["long-id".into(), "ls".into()]);
        t.fit_last(16, 5);
        let mut out = Vec::new();
        t.write(&mut out, "").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ID       COMMAND\na        make -\u{2026}\nlong-id  ls\n"
        );
        // The last column keeps its minimum even when the others are wide.
        t.fit_last(3, 4);
        assert_eq!(t.rows[0][1], "mak…");
    }
}
