//! HTTPS inspection's session side: which sessions get an inspector, the secrets it
//! injects (read from their sources on the host, each replaced inside by a placeholder
//! of the same length), the session CA the sandbox trusts (appended to the trust
//! bundles in its view and named by the variables clients read), and how the
//! inspector's events are recorded. The inspector itself is `vg-http`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use vg_http::{HttpEvent, Inspector, Secret};
use vg_policy::network::NetworkPolicy;
use vg_policy::secrets::{CA_VARIABLES, SecretSource, SecretSpec};
use vg_records::event::kind::NETWORK;
use vg_records::{Event, Metadata};
use zeroize::Zeroizing;

use crate::request::Request;

/// The trust bundles distributions keep, in the sandbox's view: each one present is
/// shown with the session CA appended.
const BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/ssl/cert.pem",
];

/// The largest `file:` secret source and `--upstream-ca` file read.
const MAX_SECRET_FILE: u64 = 64 * 1024;
const MAX_CA_FILE: u64 = 16 << 20;

/// A regular file's bytes, refused past `max` (a device like `/dev/zero` or a FIFO
/// would make the run hang or the supervisor grow).
fn read_small(path: &Path, max: u64) -> Result<Zeroizing<Vec<u8>>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking, so that opening a FIFO does not wait for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    let mut bytes = Zeroizing::new(Vec::new());
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > max {
        bail!("{} is larger than {} KiB", path.display(), max >> 10);
    }
    Ok(bytes)
}

/// How long a `cmd:` secret source may take.
const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Inspection as planned: data from the settings, and the values of the variables the
/// `env:` secrets name (read from the caller's environment, never shown).
#[derive(Clone, Default)]
pub struct Plan {
    pub secrets: Vec<SecretSpec>,
    pub upstream_ca: Vec<PathBuf>,
    /// The caller's folder, for `file:` sources given relative.
    cwd: PathBuf,
    env_values: Vec<(String, Zeroizing<String>)>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("secrets", &self.secrets)
            .field("upstream_ca", &self.upstream_ca)
            .finish_non_exhaustive()
    }
}

impl Plan {
    /// `None` when the session needs no inspector: no method and path rule and no
    /// secret. (A method and path rule added while it runs is then refused.)
    pub fn new(
        policy: Option<&NetworkPolicy>,
        secrets: &[SecretSpec],
        upstream_ca: &[PathBuf],
        request: &Request,
    ) -> Result<Option<Self>> {
        let Some(policy) = policy else {
            if let Some(secret) = secrets.first() {
                bail!(
                    "--secret {}: secrets are injected by the mediated network; add --network allow and a method and path rule for its hosts",
                    secret.name
                );
            }
            return Ok(None);
        };
        let inspected = policy.rules.iter().any(|r| r.http.is_some());
        if !inspected && secrets.is_empty() {
            return Ok(None);
        }
        for secret in secrets {
            for host in &secret.hosts {
                let named = policy.rules.iter().any(|r| {
                    r.http.is_some()
                        && r.action == vg_policy::network::Action::Allow
                        && covers(&r.target, host)
                });
                if !named {
                    bail!(
                        "--secret {}: no method and path rule allows requests to {host}, so nothing would carry it there; add e.g. --allow 'GET https://{}/**'",
                        secret.name,
                        example_host(host)
                    );
                }
                if policy.passthrough.iter().any(|p| covers(p, host)) {
                    bail!(
                        "--secret {}: {host} is under --tls-passthrough, whose requests are never inspected; drop one of the two",
                        secret.name
                    );
                }
            }
        }
        let mut names: Vec<&str> = secrets.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            bail!("--secret {} is given twice; keep one", w[0]);
        }
        let mut env_values = Vec::new();
        for secret in secrets {
            if let SecretSource::Env(var) = &secret.source {
                let value = request.env_var(var).with_context(|| {
                    format!(
                        "--secret {}: the variable {var} is not set; export it, or use file: or cmd:",
                        secret.name
                    )
                })?;
                env_values.push((var.clone(), Zeroizing::new(value.to_owned())));
            }
        }
        Ok(Some(Self {
            secrets: secrets.to_vec(),
            upstream_ca: upstream_ca.to_vec(),
            cwd: request.cwd.clone(),
            env_values,
        }))
    }
}

/// Whether a rule's target `outer` covers every name of `inner`.
fn covers(outer: &vg_policy::network::Target, inner: &vg_policy::network::Target) -> bool {
    use vg_policy::network::Target;
    match inner {
        Target::Name(n) => outer.matches_name(n),
        Target::Wildcard(parent) => match outer {
            Target::AnyName => true,
            Target::Wildcard(p) => parent == p || parent.is_subdomain_of(p),
            _ => false,
        },
        Target::Ip(ip) => outer.matches_addr(*ip),
        Target::AnyName | Target::Cidr(_) => matches!(outer, Target::AnyName),
    }
}

fn example_host(host: &vg_policy::network::Target) -> String {
    match host {
        vg_policy::network::Target::Wildcard(parent) => format!("*.{parent}"),
        other => other.to_string(),
    }
}

/// Where the inspector's events go: the session record once it is attached.
type Sink = Arc<Mutex<Option<Box<dyn FnMut(HttpEvent) + Send>>>>;

/// The running inspection: the inspector and what the sandbox must be given.
pub struct Prepared {
    pub inspector: Arc<Inspector>,
    /// Environment additions: the placeholders and the CA variables.
    pub env: Vec<(String, String)>,
    /// Files bound over the sandbox's trust bundles (path inside, contents).
    pub files: Vec<(PathBuf, String)>,
    sink: Sink,
    /// For the record: names and hosts of the secrets (never their values or sources).
    secrets: Vec<(String, Vec<String>)>,
    upstream_ca: Vec<PathBuf>,
}

/// Reads the secrets and the upstream CAs, and creates the inspector and its CA.
/// `root` is the sandbox's root on the host (an image's tree), `None` for the host's
/// own folders.
pub fn prepare(
    plan: &Plan,
    handle: vg_netstack::PolicyHandle,
    root: Option<&Path>,
) -> Result<Prepared> {
    let mut secrets = Vec::new();
    let mut env = Vec::new();
    for spec in &plan.secrets {
        let value = read_source(spec, plan)?;
        let placeholder = vg_http::placeholder_for(&value)
            .map_err(|problem| anyhow::anyhow!("--secret {}: {problem}", spec.name))?;
        env.push((spec.name.clone(), placeholder.clone()));
        secrets.push(Secret {
            name: spec.name.clone(),
            value,
            placeholder,
            hosts: spec.hosts.clone(),
        });
    }
    let mut extra = Vec::new();
    for path in &plan.upstream_ca {
        extra.extend(read_certificates(path)?);
    }
    let sink: Sink = Arc::new(Mutex::new(None));
    let events = {
        let sink = Arc::clone(&sink);
        Arc::new(move |event: HttpEvent| {
            if let Ok(mut slot) = sink.lock()
                && let Some(record) = slot.as_mut()
            {
                record(event);
            }
        })
    };
    let inspector = Inspector::new(vg_http::Options {
        policy: handle,
        extra_upstream_roots: extra,
        secrets,
        events,
    })
    .context("cannot start HTTPS inspection")?;
    let ca = inspector.ca_pem().to_owned();
    let files = bundles(root, &ca);
    let Some((bundle, _)) = files.first() else {
        bail!(
            "HTTPS inspection needs a CA bundle in the sandbox to add its CA to, and none of {} exists; install the ca-certificates package (in the image, with --image)",
            BUNDLES.join(", ")
        );
    };
    let bundle = bundle.display().to_string();
    env.extend(
        CA_VARIABLES
            .iter()
            .map(|var| ((*var).to_owned(), bundle.clone())),
    );
    Ok(Prepared {
        inspector: Arc::new(inspector),
        env,
        files,
        sink,
        secrets: plan
            .secrets
            .iter()
            .map(|s| (s.name.clone(), s.hosts.iter().map(example_host).collect()))
            .collect(),
        upstream_ca: plan.upstream_ca.clone(),
    })
}

impl Prepared {
    /// From now on the inspector's events go to `record`.
    pub fn record_to(&self, record: Box<dyn FnMut(HttpEvent) + Send>) {
        if let Ok(mut slot) = self.sink.lock() {
            *slot = Some(record);
        }
    }

    /// The CA, the secrets' names and hosts, and the upstream CAs, in the metadata.
    pub fn record(&self, meta: &mut Metadata) {
        let secrets: serde_json::Map<String, Value> = self
            .secrets
            .iter()
            .map(|(name, hosts)| (name.clone(), Value::from(hosts.clone())))
            .collect();
        meta.network.extra.insert(
            "inspection".into(),
            serde_json::json!({
                "ca_certificate": self.inspector.ca_pem(),
                "secrets": secrets,
                "upstream_ca": self.upstream_ca.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            }),
        );
    }
}

/// A secret's value from its source, on the host, as the invoking user. Fails closed
/// and never quotes the value.
fn read_source(spec: &SecretSpec, plan: &Plan) -> Result<Zeroizing<String>> {
    let name = &spec.name;
    let raw = match &spec.source {
        SecretSource::Env(var) => plan
            .env_values
            .iter()
            .find(|(v, _)| v == var)
            .map(|(_, value)| value.clone())
            .with_context(|| format!("--secret {name}: the variable {var} is not set"))?,
        SecretSource::File(path) => {
            let path = if path.is_absolute() {
                path.clone()
            } else {
                plan.cwd.join(path)
            };
            read_small(&path, MAX_SECRET_FILE)
                .map(|bytes| Zeroizing::new(String::from_utf8_lossy(&bytes).into_owned()))
                .map_err(|e| anyhow::anyhow!("--secret {name}: {e}"))?
        }
        SecretSource::Command(command) => run_source(name, command)?,
    };
    let value = raw
        .strip_suffix("\r\n")
        .or_else(|| raw.strip_suffix('\n'))
        .unwrap_or(&raw);
    if value.is_empty() {
        bail!(
            "--secret {name}: its source ({}) gave an empty value",
            spec.source
        );
    }
    Ok(Zeroizing::new(value.to_owned()))
}

/// Runs a `cmd:` source with `sh -c` on the host: its stdout is the value; a failure,
/// a signal or the time-out refuses the run.
fn run_source(name: &str, command: &str) -> Result<Zeroizing<String>> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("--secret {name}: cannot run its command"))?;
    let mut stdout = child.stdout.take().context("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut out = Zeroizing::new(Vec::new());
        let result = stdout.by_ref().take(1 << 20).read_to_end(&mut out);
        result.map(|_| out)
    });
    let deadline = std::time::Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "--secret {name}: its command did not finish within {} s",
                COMMAND_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let out = reader
        .join()
        .map_err(|_| anyhow::anyhow!("--secret {name}: reading its command's output failed"))?
        .with_context(|| format!("--secret {name}: cannot read its command's output"))?;
    if !status.success() {
        bail!("--secret {name}: its command failed ({status}); nothing was run");
    }
    let text = String::from_utf8(out.to_vec())
        .map_err(|_| anyhow::anyhow!("--secret {name}: its command's output is not UTF-8 text"))?;
    Ok(Zeroizing::new(text))
}

/// Certificates from a PEM file given with `--upstream-ca`.
fn read_certificates(path: &Path) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>> {
    use rustls_pki_types::pem::PemObject;
    let text = read_small(path, MAX_CA_FILE).map_err(|e| anyhow::anyhow!("--upstream-ca: {e}"))?;
    let certs: Vec<_> = rustls_pki_types::CertificateDer::pem_slice_iter(&text)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            anyhow::anyhow!(
                "--upstream-ca {}: not a PEM certificate file ({e})",
                path.display()
            )
        })?;
    if certs.is_empty() {
        bail!(
            "--upstream-ca {}: no certificate in it; give a PEM file with -----BEGIN CERTIFICATE----- blocks",
            path.display()
        );
    }
    Ok(certs)
}

/// The trust bundles present in the sandbox's view, each with `ca` appended: one file
/// per real path (a bundle's other names are symlinks to it).
fn bundles(root: Option<&Path>, ca: &str) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for name in BUNDLES {
        let Some(real) = resolve_in(root, Path::new(name)) else {
            continue;
        };
        if out.iter().any(|(p, _)| *p == real) {
            continue;
        }
        let on_host = match root {
            Some(root) => root.join(real.strip_prefix("/").unwrap_or(&real)),
            None => real.clone(),
        };
        let Ok(mut text) = std::fs::read_to_string(&on_host) else {
            continue;
        };
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("# Vectra Guard session CA (HTTPS inspection)\n");
        text.push_str(ca);
        out.push((real, text));
    }
    out
}

/// `path` with its symlinks followed inside `root` (absolute links stay inside it), if
/// it ends at a regular file.
fn resolve_in(root: Option<&Path>, path: &Path) -> Option<PathBuf> {
    let host = |p: &Path| match root {
        Some(root) => root.join(p.strip_prefix("/").unwrap_or(p)),
        None => p.to_path_buf(),
    };
    let mut current = PathBuf::from("/");
    let mut pending: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(n.to_owned()),
            _ => None,
        })
        .collect();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        if part == ".." {
            current.pop();
            continue;
        }
        let next = current.join(&part);
        let meta = std::fs::symlink_metadata(host(&next)).ok()?;
        if meta.file_type().is_symlink() {
            links += 1;
            if links > 16 {
                return None;
            }
            let target = std::fs::read_link(host(&next)).ok()?;
            if target.is_absolute() {
                current = PathBuf::from("/");
            }
            for c in target.components().rev() {
                match c {
                    std::path::Component::Normal(n) => pending.push(n.to_owned()),
                    std::path::Component::ParentDir => pending.push("..".into()),
                    _ => {}
                }
            }
        } else {
            current = next;
        }
    }
    std::fs::metadata(host(&current))
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|_| current)
}

/// The most bytes of one text field of an inspector event that are recorded. The
/// sandbox chooses the method, path and host it sends (a path may fill the
/// 256 KiB request head, more with HTTP/2), so without this 100 000 events could
/// take tens of GiB of `events.jsonl`.
pub const MAX_EVENT_FIELD: usize = 4096;

/// `text` cut to [`MAX_EVENT_FIELD`] bytes (on a character boundary), and its
/// full size when it was cut.
fn clip(text: String) -> (String, Option<usize>) {
    if text.len() <= MAX_EVENT_FIELD {
        return (text, None);
    }
    let full = text.len();
    let mut end = MAX_EVENT_FIELD;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_owned(), Some(full))
}

/// Adds `key` (clipped), and `KEY_bytes` (its full size) when it was clipped.
fn with_clipped(event: Event, key: &str, text: String) -> Event {
    let (text, full) = clip(text);
    let event = event.with(key, text);
    match full {
        Some(n) => event.with(format!("{key}_bytes"), n),
        None => event,
    }
}

/// One inspector event as a line of `events.jsonl` (type `network`). Text the
/// sandbox controls is clipped to [`MAX_EVENT_FIELD`] bytes, its full size in
/// `FIELD_bytes`.
pub fn to_record(event: HttpEvent) -> Event {
    match event {
        HttpEvent::Exchange(x) => clipped_exchange(x),
        HttpEvent::Tls(t) => {
            let e = Event::new(NETWORK)
                .at(t.time)
                .with("event", "tls")
                .with("connection", t.connection);
            let e = with_clipped(e, "host", t.host)
                .with("port", t.port)
                .with("decision", "deny");
            let e = match t.sni {
                Some(sni) => with_clipped(e, "sni", sni),
                None => e.with("sni", Value::Null),
            };
            with_clipped(e, "error", t.error)
        }
    }
}

fn clipped_exchange(x: vg_http::Exchange) -> Event {
    let e = Event::new(NETWORK)
        .at(x.time)
        .with("event", "http")
        .with("connection", x.connection)
        .with("protocol", x.version);
    let e = with_clipped(e, "method", x.method).with("scheme", x.scheme.as_str());
    let e = with_clipped(e, "host", x.host).with("port", x.port);
    let e = with_clipped(e, "path", x.path)
        .with("status", x.status.map_or(Value::Null, Value::from))
        .with("bytes_out", x.bytes_out)
        .with("bytes_in", x.bytes_in)
        .with(
            "duration_ms",
            u64::try_from(x.duration.as_millis()).unwrap_or(u64::MAX),
        )
        .with("decision", x.decision)
        .with("rule", x.rule.map_or(Value::Null, Value::from));
    let e = with_clipped(e, "reason", x.reason)
        .with("secrets", x.secrets)
        .with(
            "exfiltration",
            x.exfiltration.map_or(Value::Null, Value::from),
        );
    match x.error {
        Some(error) => with_clipped(e, "error", error),
        None => e.with("error", Value::Null),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn long_fields_are_clipped_on_a_character_boundary_with_their_size() {
        let short = "/ok".to_owned();
        assert_eq!(clip(short.clone()), (short, None));
        // 'é' is two bytes: 4095 ASCII bytes then 'é' straddles the limit.
        let long = format!(
            "{}é{}",
            "a".repeat(MAX_EVENT_FIELD - 1),
            "b".repeat(100_000)
        );
        let (cut, full) = clip(long.clone());
        assert_eq!(full, Some(long.len()));
        assert_eq!(cut, "a".repeat(MAX_EVENT_FIELD - 1));
        let e = with_clipped(Event::new(NETWORK), "path", long);
        assert_eq!(
            e.get("path_bytes"),
            Some(&Value::from(MAX_EVENT_FIELD + 100_001))
        );
        assert!(e.to_line().unwrap().len() < 2 * MAX_EVENT_FIELD);
    }

    #[test]
    fn sources_that_are_not_small_regular_files_are_refused() {
        let err = read_small(Path::new("/dev/zero"), MAX_SECRET_FILE).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let big = std::env::temp_dir().join(format!("vg-big-{}", std::process::id()));
        std::fs::write(&big, vec![b'a'; 70 * 1024]).unwrap();
        let err = read_small(&big, MAX_SECRET_FILE).unwrap_err();
        assert!(err.to_string().contains("larger than 64 KiB"), "{err}");
        std::fs::write(&big, b"token\n").unwrap();
        assert_eq!(&read_small(&big, MAX_SECRET_FILE).unwrap()[..], b"token\n");
        std::fs::remove_file(&big).unwrap();
    }

    #[test]
    fn bundles_are_found_through_symlinks_inside_the_root() {
        let dir = std::env::temp_dir().join(format!("vg-bundles-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("etc/ssl/certs")).unwrap();
        std::fs::write(dir.join("etc/ssl/certs/ca-certificates.crt"), "ROOTS").unwrap();
        // Alpine's cert.pem is an absolute symlink: it must resolve in the image.
        std::os::unix::fs::symlink(
            "/etc/ssl/certs/ca-certificates.crt",
            dir.join("etc/ssl/cert.pem"),
        )
        .unwrap();
        let files = bundles(Some(&dir), "CA\n");
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(
            files[0].0,
            PathBuf::from("/etc/ssl/certs/ca-certificates.crt")
        );
        assert!(files[0].1.starts_with("ROOTS\n") && files[0].1.ends_with("CA\n"));
        // A link pointing out of the root resolves inside it, never on the host.
        std::fs::remove_file(dir.join("etc/ssl/certs/ca-certificates.crt")).unwrap();
        std::os::unix::fs::symlink(
            "../../../../../../etc/hostname",
            dir.join("etc/ssl/certs/ca-certificates.crt"),
        )
        .unwrap();
        assert!(bundles(Some(&dir), "CA\n").is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
