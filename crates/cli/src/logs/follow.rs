//! `logs show --follow`: print a file from its start, then what the running
//! session appends to it, until the session ends or its supervisor dies.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use vg_records::{Follower, LineBuffer, RecordFile};

use super::explain;
use super::show::{View, file_of};
use super::views::LineView;

/// Pause between two looks at the files: new output shows up within this,
/// and an idle session costs a few reads per second.
const POLL_INTERVAL: Duration = Duration::from_millis(150);

/// How one chunk of new bytes is printed.
enum Printer {
    /// Raw bytes, as recorded.
    Stream,
    /// Whole lines only (a partial line waits for its newline), as text or
    /// as one JSON object per line.
    Lines {
        view: LineView,
        json: bool,
        buffer: LineBuffer,
        line_no: usize,
    },
}

impl Printer {
    fn lines(view: LineView, json: bool) -> Self {
        Printer::Lines {
            view,
            json,
            buffer: LineBuffer::default(),
            line_no: 0,
        }
    }

    fn print(&mut self, data: &[u8], out: &mut dyn Write) -> Result<()> {
        match self {
            Printer::Stream => out.write_all(data)?,
            Printer::Lines { buffer, .. } => {
                for line in buffer.push(data) {
                    self.print_line(&line, out)?;
                }
            }
        }
        Ok(())
    }

    fn print_line(&mut self, line: &[u8], out: &mut dyn Write) -> Result<()> {
        let Printer::Lines {
            view,
            json,
            line_no,
            ..
        } = self
        else {
            return Ok(());
        };
        *line_no += 1;
        if *json {
            if let Some(v) = view.json(*line_no, line) {
                serde_json::to_writer(&mut *out, &v)?;
                writeln!(out)?;
            }
        } else if let Some(text) = view.text(line) {
            writeln!(out, "{text}")?;
        }
        Ok(())
    }

    /// A last line without its newline: the session ended mid-line.
    fn finish(&mut self, out: &mut dyn Write) -> Result<()> {
        if let Printer::Lines { buffer, .. } = self
            && let Some(rest) = std::mem::take(buffer).finish()
        {
            self.print_line(&rest, out)?;
        }
        Ok(())
    }
}

/// Follows the file of `view`; the summary view follows the commands.
pub fn follow(dir: &Path, view: View, json: bool, out: &mut dyn Write) -> Result<i32> {
    let (file, mut printer) = match view {
        View::Stream(file) => (file, Printer::Stream),
        View::Lines(lines) => (file_of(lines), Printer::lines(lines, json)),
        View::Summary => (
            RecordFile::Commands,
            Printer::lines(LineView::Commands, json),
        ),
    };
    let mut follower = Follower::new(dir, file).map_err(explain)?;
    loop {
        let poll = follower.poll().map_err(explain)?;
        printer.print(&poll.data, out)?;
        if poll.ended {
            printer.finish(out)?;
            out.flush()?;
            return Ok(0);
        }
        out.flush()?;
        std::thread::sleep(POLL_INTERVAL);
    }
}
