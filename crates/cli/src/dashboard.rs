//! `vectraguard dashboard`: the live web dashboard (`vg_dashboard`) over the
//! records folder the other commands use, until SIGINT or SIGTERM.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::{Context, Result, anyhow};
use clap::Args;

use crate::live::exit_code;

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Listen on ADDR:PORT (port 0: any free port). Anything but a loopback
    /// address lets other machines reach the page (token still needed): a
    /// warning is printed
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7420")]
    pub listen: String,
}

/// The warning for an address other machines can reach, if any.
fn exposure_warning(addr: SocketAddr) -> Option<String> {
    (!addr.ip().is_loopback()).then(|| {
        format!(
            "the dashboard listens on {addr}, which other machines may reach: anyone with the \
             token can see every session and stop, allow or approve in them. Prefer \
             127.0.0.1 and an SSH tunnel"
        )
    })
}

fn parse_listen(listen: &str) -> Result<SocketAddr> {
    listen.parse().with_context(|| {
        format!("--listen {listen}: use ADDR:PORT, e.g. 127.0.0.1:7420 (or 127.0.0.1:0 for any free port)")
    })
}

pub fn serve(args: &DashboardArgs) -> i32 {
    exit_code(|| {
        let listen = parse_listen(&args.listen)?;
        let root = vg_session::home::records_root()?;
        if let Some(w) = exposure_warning(listen) {
            crate::report::warning(format_args!("{w}"));
        }
        let options = vg_dashboard::Options { listen, root };
        vg_dashboard::serve(options, |started| {
            // One line, flushed: scripts (and the tests) read the URL from it.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "vectraguard: dashboard on {} (Ctrl-C to stop)",
                started.url
            );
            let _ = out.flush();
        })
        .map_err(|e| anyhow!("{e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_binds_go_unwarned() {
        assert!(exposure_warning("127.0.0.1:7420".parse().unwrap()).is_none());
        assert!(exposure_warning("[::1]:7420".parse().unwrap()).is_none());
        for wide in ["0.0.0.0:7420", "[::]:7420", "192.168.1.9:80"] {
            let w = exposure_warning(wide.parse().unwrap()).unwrap();
            assert!(w.contains("other machines"), "{w}");
        }
        assert!(parse_listen("localhost:7420").is_err());
        let e = format!("{:#}", parse_listen("7420").unwrap_err());
        assert!(e.contains("ADDR:PORT"), "{e}");
    }
}
