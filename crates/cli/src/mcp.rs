//! `vectraguard mcp serve`: the MCP server (`vg_mcp`) with its sandboxes' options.

use anyhow::{Context, Result, bail};

use crate::cli::McpServeArgs;
use crate::live::exit_code;

/// What every MCP sandbox gets unless the options after `--` say otherwise: seed
/// 002's limits, a mediated network that allows nothing until a call asks, the
/// approval gate, and an idle time-out.
fn default_options(ask: &str, given: &[String]) -> Vec<String> {
    let has = |flag: &str| {
        given
            .iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
    let mut options = Vec::new();
    for (flag, value) in [
        ("--profile", "code-exec"),
        // Each call has a time-out of its own (`timeout`, at most 600 s); the
        // sandbox's must not cut it shorter.
        ("--timeout", "600s"),
        ("--network", "allow"),
        ("--ask", ask),
        ("--idle-timeout", "30m"),
    ] {
        if !has(flag) {
            options.push(flag.to_owned());
            options.push(value.to_owned());
        }
    }
    options.push("--no-network-notes".to_owned());
    options.extend(given.iter().cloned());
    options
}

fn host_of(url: &str) -> Result<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .with_context(|| format!("{url}: use an http:// or https:// URL"))?;
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    if host.is_empty() {
        bail!("{url}: no host in it");
    }
    Ok(host.to_owned())
}

/// The backends whose sandboxes can be persistent (`sandbox create`), as the
/// server's are: the native one, Docker and Podman, whose container runs our init
/// serving the commands, and gVisor, whose commands start through `runsc exec`.
const PERSISTENT_BACKENDS: [&str; 4] = ["native", "gvisor", "docker", "podman"];

/// The server's sandboxes are persistent (`sandbox create`): a backend without them
/// is refused now rather than at the first call.
fn refuse_other_backends(options: &[String]) -> Result<()> {
    let mut it = options.iter();
    while let Some(option) = it.next() {
        let value = match option.strip_prefix("--backend") {
            Some("") => it.next().map(String::as_str),
            Some(rest) => rest.strip_prefix('='),
            None => continue,
        };
        if let Some(value) = value
            && !PERSISTENT_BACKENDS.contains(&value)
        {
            anyhow::bail!(
                "--backend {value}: the MCP server's sandboxes are persistent (`sandbox create`), which only the native, gvisor, docker and podman backends have; use one of them"
            );
        }
    }
    Ok(())
}

pub fn serve(args: McpServeArgs) -> i32 {
    exit_code(|| {
        args.ask
            .parse::<vg_policy::risk::Ask>()
            .map_err(|e| anyhow::anyhow!("--ask {}: {e}", args.ask))?;
        refuse_other_backends(&args.sandbox_options)?;
        let mut pypi_hosts = vec![host_of(&args.pypi_index)?];
        if args.pypi_index.starts_with("https://pypi.org") {
            pypi_hosts.push("files.pythonhosted.org".into());
        }
        let settings = vg_mcp::Settings {
            exe: std::env::current_exe().context("cannot find this program")?,
            create_options: default_options(&args.ask, &args.sandbox_options),
            max_output: 1024 * 1024,
            pypi_hosts,
            npm_hosts: vec![host_of(&args.npm_registry)?],
            pypi_index: args.pypi_index.clone(),
            npm_registry: args.npm_registry.clone(),
            approval: args.ask != "never",
            made: std::sync::Arc::default(),
            pool: std::sync::Arc::new(vg_mcp::sandboxes::Pool::new(args.pool)),
        };
        match &args.http {
            None => vg_mcp::serve_stdio(settings),
            Some(addr) => {
                let addr: std::net::SocketAddr = addr
                    .parse()
                    .with_context(|| format!("--http {addr}: use IP:PORT, e.g. 127.0.0.1:8765"))?;
                let token = match std::env::var("VECTRAGUARD_MCP_TOKEN") {
                    Ok(t) if !t.is_empty() => t,
                    _ => random_token()?,
                };
                let shown = token.clone();
                vg_mcp::serve_http(settings, addr, token, move |bound| {
                    eprintln!(
                        "vectraguard: MCP server on http://{bound}/mcp\nvectraguard: bearer token: {shown}"
                    );
                })
            }
        }
    })
}

fn random_token() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for the token")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_without_persistent_sandboxes_are_refused_in_either_spelling() {
        let opts = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(refuse_other_backends(&opts(&["--backend", "native", "--pids", "5"])).is_ok());
        for good in [
            &["--backend", "docker"][..],
            &["--backend=podman"][..],
            &["--backend", "gvisor"][..],
            &["--backend=gvisor"][..],
        ] {
            assert!(refuse_other_backends(&opts(good)).is_ok(), "{good:?}");
        }
        for bad in [&["--backend", "kvm"][..], &["--backend=kvm"][..]] {
            let e = refuse_other_backends(&opts(bad)).unwrap_err().to_string();
            assert!(e.contains("--backend kvm") && e.contains("gvisor"), "{e}");
        }
    }

    #[test]
    fn given_options_win_over_the_defaults() {
        let given = vec!["--network".to_owned(), "none".to_owned()];
        let options = default_options("high", &given);
        assert_eq!(options.iter().filter(|o| *o == "--network").count(), 1);
        assert!(options.windows(2).any(|w| w == ["--ask", "high"]));
        assert!(options.windows(2).any(|w| w == ["--network", "none"]));
        assert_eq!(
            host_of("https://pypi.org/simple").ok().as_deref(),
            Some("pypi.org")
        );
        assert_eq!(
            host_of("http://127.0.0.1:8080/simple/").ok().as_deref(),
            Some("127.0.0.1:8080")
        );
        assert!(host_of("pypi.org").is_err());
    }
}
