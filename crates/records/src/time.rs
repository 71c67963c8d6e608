//! UTC timestamps and durations without a calendar dependency.
//!
//! Records use two spellings of a UTC instant:
//! - RFC 3339 with milliseconds, `2025-12-19T10:10:53.123Z`, inside files;
//! - the compact basic form, `20251219T101053Z`, in session folder names.
//!
//! The civil-date conversion is the usual days-from-epoch arithmetic on the
//! proleptic Gregorian calendar (400-year eras of 146,097 days).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::RecordsError;

const SECS_PER_DAY: i64 = 86_400;

/// A broken-down UTC instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    nanos: u32,
}

/// Seconds and nanoseconds relative to the Unix epoch (seconds may be negative).
fn split(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(e) => {
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() == 0 {
                (-secs, 0)
            } else {
                (-secs - 1, 1_000_000_000 - d.subsec_nanos())
            }
        }
    }
}

fn join(secs: i64, nanos: u32) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs.unsigned_abs(), nanos)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
            + Duration::from_nanos(u64::from(nanos))
    }
}

/// Days since 1970-01-01 to (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both are small and non-negative by construction.
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

/// (year, month, day) to days since 1970-01-01.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

fn to_civil(t: SystemTime) -> Civil {
    let (secs, nanos) = split(t);
    let days = secs.div_euclid(SECS_PER_DAY);
    let rem = secs.rem_euclid(SECS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let rem = u32::try_from(rem).unwrap_or(0);
    Civil {
        year,
        month,
        day,
        hour: rem / 3600,
        minute: rem / 60 % 60,
        second: rem % 60,
        nanos,
    }
}

fn from_civil(c: &Civil) -> SystemTime {
    let days = days_from_civil(c.year, c.month, c.day);
    let secs = days * SECS_PER_DAY
        + i64::from(c.hour) * 3600
        + i64::from(c.minute) * 60
        + i64::from(c.second);
    join(secs, c.nanos)
}

/// `t` rounded down to the millisecond, the precision kept on disk.
pub fn truncate_millis(t: SystemTime) -> SystemTime {
    let (secs, nanos) = split(t);
    join(secs, nanos - nanos % 1_000_000)
}

/// `2025-12-19T10:10:53.123Z` (UTC, millisecond precision).
pub fn format_rfc3339(t: SystemTime) -> String {
    let c = to_civil(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        c.year,
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second,
        c.nanos / 1_000_000
    )
}

/// `20251219T101053Z` (UTC, whole seconds), as used in session folder names.
pub fn format_compact(t: SystemTime) -> String {
    let c = to_civil(t);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

fn invalid_time(input: &str, reason: &str) -> RecordsError {
    RecordsError::InvalidTime {
        input: input.to_owned(),
        reason: reason.to_owned(),
    }
}

/// Reads exactly `n` ASCII digits at `*pos`.
fn digits(b: &[u8], pos: &mut usize, n: usize) -> Option<u32> {
    let s = b.get(*pos..*pos + n)?;
    let mut v = 0u32;
    for &d in s {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(d - b'0');
    }
    *pos += n;
    Some(v)
}

fn expect(b: &[u8], pos: &mut usize, c: u8) -> Option<()> {
    if b.get(*pos) == Some(&c) {
        *pos += 1;
        Some(())
    } else {
        None
    }
}

fn check_civil(c: &Civil) -> bool {
    (1..=12).contains(&c.month)
        && c.day >= 1
        && c.day <= days_in_month(c.year, c.month)
        && c.hour < 24
        && c.minute < 60
        && c.second < 60
}

/// Parses an RFC 3339 timestamp (`2025-12-19T10:10:53Z`, optional fraction,
/// `Z` or `±HH:MM` offset; `t`/space accepted for `T`) or a bare date
/// (`2025-12-19`, midnight UTC).
pub fn parse_rfc3339(input: &str) -> Result<SystemTime, RecordsError> {
    let bad = || {
        invalid_time(
            input,
            "expected RFC 3339, e.g. 2025-12-19T10:10:53Z or 2025-12-19",
        )
    };
    let b = input.trim().as_bytes();
    let mut p = 0;
    let year = digits(b, &mut p, 4).ok_or_else(bad)?;
    expect(b, &mut p, b'-').ok_or_else(bad)?;
    let month = digits(b, &mut p, 2).ok_or_else(bad)?;
    expect(b, &mut p, b'-').ok_or_else(bad)?;
    let day = digits(b, &mut p, 2).ok_or_else(bad)?;
    let mut c = Civil {
        year: i64::from(year),
        month,
        day,
        hour: 0,
        minute: 0,
        second: 0,
        nanos: 0,
    };
    if p == b.len() {
        if !check_civil(&c) {
            return Err(invalid_time(input, "no such date"));
        }
        return Ok(from_civil(&c));
    }
    match b.get(p) {
        Some(b'T' | b't' | b' ') => p += 1,
        _ => return Err(bad()),
    }
    c.hour = digits(b, &mut p, 2).ok_or_else(bad)?;
    expect(b, &mut p, b':').ok_or_else(bad)?;
    c.minute = digits(b, &mut p, 2).ok_or_else(bad)?;
    expect(b, &mut p, b':').ok_or_else(bad)?;
    c.second = digits(b, &mut p, 2).ok_or_else(bad)?;
    if expect(b, &mut p, b'.').is_some() {
        let start = p;
        let mut nanos = 0u32;
        let mut scale = 100_000_000u32;
        while let Some(d) = b.get(p).filter(|d| d.is_ascii_digit()) {
            nanos += u32::from(d - b'0') * scale;
            scale /= 10;
            p += 1;
        }
        if p == start {
            return Err(bad());
        }
        c.nanos = nanos;
    }
    let offset_secs: i64 = match b.get(p) {
        Some(b'Z' | b'z') => {
            p += 1;
            0
        }
        Some(&sign @ (b'+' | b'-')) => {
            p += 1;
            let h = digits(b, &mut p, 2).ok_or_else(bad)?;
            expect(b, &mut p, b':').ok_or_else(bad)?;
            let m = digits(b, &mut p, 2).ok_or_else(bad)?;
            if h > 23 || m > 59 {
                return Err(bad());
            }
            let s = i64::from(h * 3600 + m * 60);
            if sign == b'-' { -s } else { s }
        }
        _ => return Err(invalid_time(input, "missing time zone (add Z for UTC)")),
    };
    if p != b.len() {
        return Err(bad());
    }
    if !check_civil(&c) {
        return Err(invalid_time(input, "no such date or time"));
    }
    let (secs, nanos) = split(from_civil(&c));
    Ok(join(secs - offset_secs, nanos))
}

/// Parses the compact folder-name form `20251219T101053Z`.
pub fn parse_compact(input: &str) -> Option<SystemTime> {
    let b = input.as_bytes();
    if b.len() != 16 {
        return None;
    }
    let mut p = 0;
    let year = digits(b, &mut p, 4)?;
    let month = digits(b, &mut p, 2)?;
    let day = digits(b, &mut p, 2)?;
    expect(b, &mut p, b'T')?;
    let hour = digits(b, &mut p, 2)?;
    let minute = digits(b, &mut p, 2)?;
    let second = digits(b, &mut p, 2)?;
    expect(b, &mut p, b'Z')?;
    let c = Civil {
        year: i64::from(year),
        month,
        day,
        hour,
        minute,
        second,
        nanos: 0,
    };
    check_civil(&c).then(|| from_civil(&c))
}

fn invalid_duration(input: &str, reason: &str) -> RecordsError {
    RecordsError::InvalidDuration {
        input: input.to_owned(),
        reason: reason.to_owned(),
    }
}

/// Parses `45s`, `90m`, `12h`, `30d`, `2w`, or a sum such as `1h30m`.
pub fn parse_duration(input: &str) -> Result<Duration, RecordsError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(invalid_duration(
            input,
            "empty; use e.g. 30d, 12h, 90m or 45s",
        ));
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let n_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        if n_len == 0 {
            return Err(invalid_duration(
                input,
                "expected a number, e.g. 30d, 12h, 90m or 45s",
            ));
        }
        let (num, tail) = rest.split_at(n_len);
        let n: u64 = num
            .parse()
            .map_err(|_| invalid_duration(input, "number too large"))?;
        let u_len = tail.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = tail.split_at(u_len);
        let mult = match unit {
            "s" | "sec" | "secs" => 1,
            "m" | "min" | "mins" => 60,
            "h" | "hr" | "hrs" => 3600,
            "d" | "day" | "days" => 86_400,
            "w" | "week" | "weeks" => 7 * 86_400,
            "" => {
                return Err(invalid_duration(
                    input,
                    "missing unit; add s, m, h, d or w (e.g. 30d)",
                ));
            }
            _ => return Err(invalid_duration(input, "unknown unit; use s, m, h, d or w")),
        };
        total = n
            .checked_mul(mult)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| invalid_duration(input, "duration too large"))?;
        rest = tail;
    }
    Ok(Duration::from_secs(total))
}

/// Parses a `--since` value: a duration ago (`12h`, `30d`) or an RFC 3339
/// timestamp / date.
pub fn parse_since(input: &str, now: SystemTime) -> Result<SystemTime, RecordsError> {
    let s = input.trim();
    if s.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && s.len() >= 10
        && s.as_bytes()[4] == b'-'
    {
        return parse_rfc3339(s);
    }
    let d = parse_duration(s).map_err(|_| {
        invalid_time(
            input,
            "expected a duration ago (e.g. 12h, 30d) or a timestamp (e.g. 2025-12-19T10:00:00Z)",
        )
    })?;
    now.checked_sub(d)
        .ok_or_else(|| invalid_time(input, "too far in the past"))
}

/// Serde helpers storing `SystemTime` as RFC 3339 text.
pub mod rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_rfc3339(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(d)?;
        super::parse_rfc3339(&s).map_err(serde::de::Error::custom)
    }

    /// For `Option<SystemTime>` fields.
    pub mod option {
        use std::time::SystemTime;

        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_str(&super::super::format_rfc3339(*t)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<SystemTime>, D::Error> {
            match Option::<std::borrow::Cow<str>>::deserialize(d)? {
                Some(s) => super::super::parse_rfc3339(&s)
                    .map(Some)
                    .map_err(serde::de::Error::custom),
                None => Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        let t = UNIX_EPOCH + Duration::from_millis(1_766_139_053_123);
        assert_eq!(format_rfc3339(t), "2025-12-19T10:10:53.123Z");
        assert_eq!(format_compact(t), "20251219T101053Z");
        assert_eq!(format_rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(format_compact(leap), "20000229T000000Z");
    }

    #[test]
    fn civil_round_trip_over_many_days() {
        for days in (-800_000..800_000).step_by(37) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn parses_rfc3339_variants() {
        let t = UNIX_EPOCH + Duration::from_millis(1_766_139_053_123);
        assert_eq!(parse_rfc3339("2025-12-19T10:10:53.123Z").ok(), Some(t));
        assert_eq!(parse_rfc3339(&format_rfc3339(t)).ok(), Some(t));
        assert_eq!(
            parse_rfc3339("2025-12-19T11:10:53.123+01:00").ok(),
            Some(t),
            "offsets are subtracted"
        );
        assert_eq!(
            parse_rfc3339("2025-12-19").ok(),
            Some(UNIX_EPOCH + Duration::from_secs(1_766_102_400))
        );
        assert!(parse_rfc3339("2025-02-30T00:00:00Z").is_err());
        assert!(parse_rfc3339("2025-12-19T10:10:53").is_err());
        assert!(parse_rfc3339("yesterday").is_err());
        assert_eq!(
            parse_compact("20251219T101053Z"),
            Some(t - Duration::from_millis(123))
        );
        assert_eq!(parse_compact("20251319T101053Z"), None);
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("45s").ok(), Some(Duration::from_secs(45)));
        assert_eq!(parse_duration("90m").ok(), Some(Duration::from_secs(5400)));
        assert_eq!(
            parse_duration("12h").ok(),
            Some(Duration::from_secs(43_200))
        );
        assert_eq!(
            parse_duration("30d").ok(),
            Some(Duration::from_secs(2_592_000))
        );
        assert_eq!(
            parse_duration("1h30m").ok(),
            Some(Duration::from_secs(5400))
        );
        for bad in ["", "30", "d", "3x", "-1d", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be rejected");
        }
        let e = parse_duration("30")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("missing unit"), "{e}");
    }

    #[test]
    fn parses_since() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(
            parse_since("1h", now).ok(),
            Some(UNIX_EPOCH + Duration::from_secs(1_000_000 - 3600))
        );
        assert_eq!(
            parse_since("1970-01-02", now).ok(),
            Some(UNIX_EPOCH + Duration::from_secs(86_400))
        );
        assert!(parse_since("soon", now).is_err());
    }
}
