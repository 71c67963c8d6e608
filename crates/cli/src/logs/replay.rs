//! `logs replay`: plays a session's terminal recording (`tty.cast`) back to
//! stdout with its original timing. Only output events are written, byte
//! for byte as recorded, so `logs replay ID --speed 1000 > out` holds the
//! text the terminal showed; keystrokes (`i`) and resizes (`r`) are skipped,
//! and the terminal's own modes are left alone.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use vg_records::cast::code;
use vg_records::layout::{self, RecordFile};
use vg_records::{CastEvent, CastHeader, RecordsError, SessionStore};

use super::{ReplayArgs, explain};

pub fn replay(store: &SessionStore, args: &ReplayArgs, out: &mut dyn Write) -> Result<i32> {
    let dir = store.resolve(&args.session).map_err(explain)?;
    let id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let path = layout::file_path(&dir, RecordFile::Cast);
    let cast = Cast {
        path: &path,
        id: &id,
    };
    // Check every line first, so that a damaged file fails before anything
    // is played rather than halfway through.
    let cut = cast.read(|_| Ok(()))?;
    let mut timeline = Timeline::new(args.speed, args.idle_limit);
    let start = Instant::now();
    cast.read(|event| {
        if event.code != code::OUTPUT {
            return Ok(());
        }
        let at = timeline.next(event.time);
        if let Some(when) = start.checked_add(at) {
            std::thread::sleep(when.saturating_duration_since(Instant::now()));
        }
        out.write_all(event.data.as_bytes())?;
        out.flush()?;
        Ok(())
    })?;
    if let Some(line) = cut {
        crate::report::note(format_args!(
            "{} line {line} was cut short (the session did not finish \
             writing it); the replay stops before it",
            layout::CAST
        ));
    }
    Ok(0)
}

struct Cast<'a> {
    path: &'a Path,
    id: &'a str,
}

impl Cast<'_> {
    /// Reads the header, then hands every event to `play` in order.
    /// Returns the number of a last line cut short mid-write (no newline,
    /// not parseable), which a session still running or killed can leave.
    fn read(&self, mut play: impl FnMut(CastEvent) -> Result<()>) -> Result<Option<u64>> {
        let read_err = |source| {
            explain(RecordsError::Read {
                path: self.path.to_owned(),
                source,
            })
        };
        let file = match File::open(self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => bail!(
                "session {} has no terminal recording (it was not run with a terminal)",
                self.id
            ),
            Err(e) => return Err(read_err(e)),
        };
        let mut reader = BufReader::new(file);
        let mut raw = Vec::new();
        let mut line_no: u64 = 0;
        loop {
            raw.clear();
            if reader.read_until(b'\n', &mut raw).map_err(read_err)? == 0 {
                break;
            }
            line_no += 1;
            let complete = raw.last() == Some(&b'\n');
            let text = std::str::from_utf8(raw.strip_suffix(b"\n").unwrap_or(&raw))
                .map_err(|_| "not UTF-8 text".to_owned());
            if line_no == 1 {
                match text.and_then(CastHeader::parse) {
                    Ok(_) => continue,
                    Err(_) if !complete => return Ok(Some(line_no)),
                    Err(reason) => return Err(self.malformed(line_no, "v2 header", &reason)),
                }
            }
            match text.and_then(CastEvent::parse) {
                Ok(event) => play(event)?,
                Err(_) if !complete => return Ok(Some(line_no)),
                Err(reason) => {
                    return Err(self.malformed(line_no, "event [time, code, data]", &reason));
                }
            }
        }
        if line_no == 0 {
            bail!(
                "the terminal recording of session {} is empty ({} has no header): \
                 the session ended before its terminal started",
                self.id,
                self.path.display()
            );
        }
        Ok(None)
    }

    fn malformed(&self, line: u64, what: &str, reason: &str) -> anyhow::Error {
        anyhow!(
            "cannot replay session {id}: {file} line {line} is not an asciicast {what}: \
             {reason}; `vectraguard logs verify {id}` tells whether the file was changed",
            id = self.id,
            file = self.path.display(),
        )
    }
}

/// When each output event is due, counted from the start of the replay:
/// the recorded gaps, each cut to the idle limit, divided by the speed.
struct Timeline {
    speed: f64,
    idle_limit: Option<f64>,
    /// Recorded time of the previous output event.
    last: f64,
    /// Playback time of the previous output event, in seconds.
    at: f64,
}

impl Timeline {
    fn new(speed: f64, idle_limit: Option<f64>) -> Self {
        Self {
            speed,
            idle_limit,
            last: 0.0,
            at: 0.0,
        }
    }

    /// The playback time of an event recorded at `time` seconds. Times that
    /// go backwards count as no gap.
    fn next(&mut self, time: f64) -> Duration {
        let mut gap = (time - self.last).max(0.0);
        self.last = self.last.max(time);
        if let Some(limit) = self.idle_limit {
            gap = gap.min(limit);
        }
        self.at += gap / self.speed;
        Duration::try_from_secs_f64(self.at).unwrap_or(Duration::MAX)
    }
}

/// `--speed`: a finite number greater than 0.
pub fn parse_speed(input: &str) -> Result<f64, String> {
    match input.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err(format!(
            "invalid speed {input:?}: expected a number greater than 0 \
             (2 plays twice as fast, 0.5 at half speed)"
        )),
    }
}

/// `--idle-limit`: a finite number of seconds, 0 or more.
pub fn parse_idle_limit(input: &str) -> Result<f64, String> {
    match input.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err(format!(
            "invalid idle limit {input:?}: expected a number of seconds, 0 or more (e.g. 2 or 0.5)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(speed: f64, idle: Option<f64>, times: &[f64]) -> Vec<f64> {
        let mut t = Timeline::new(speed, idle);
        times.iter().map(|&x| t.next(x).as_secs_f64()).collect()
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn timing_follows_speed_and_idle_limit() {
        let times = [0.5, 1.0, 11.0, 11.25];
        assert!(close(&schedule(1.0, None, &times), &times));
        assert!(close(
            &schedule(2.0, None, &times),
            &[0.25, 0.5, 5.5, 5.625]
        ));
        assert!(close(
            &schedule(1.0, Some(1.0), &times),
            &[0.5, 1.0, 2.0, 2.25]
        ));
        assert!(close(
            &schedule(2.0, Some(1.0), &times),
            &[0.25, 0.5, 1.0, 1.125]
        ));
        // Going backwards is no gap; the next gap counts from the latest time.
        assert!(close(
            &schedule(1.0, None, &[2.0, 1.0, 3.0]),
            &[2.0, 2.0, 3.0]
        ));
        assert!(close(&schedule(1.0, Some(0.0), &[5.0, 100.0]), &[0.0, 0.0]));
    }

    #[test]
    fn speed_and_idle_limit_are_checked() {
        assert_eq!(parse_speed("2"), Ok(2.0));
        assert_eq!(parse_speed("0.5"), Ok(0.5));
        for bad in ["0", "-1", "x", "", "inf", "NaN"] {
            let e = parse_speed(bad).unwrap_err();
            assert!(e.contains("greater than 0"), "{e}");
        }
        assert_eq!(parse_idle_limit("0"), Ok(0.0));
        assert_eq!(parse_idle_limit("1.5"), Ok(1.5));
        for bad in ["-0.1", "x", "inf"] {
            assert!(parse_idle_limit(bad).is_err(), "{bad}");
        }
    }
}
