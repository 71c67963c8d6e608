//! The network side of a session: which mode and rules apply, what the sandbox needs
//! for them (a TUN interface, our `/etc/resolv.conf`), and how the mediator's
//! decisions are recorded.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use vg_netstack::{NetEvent, PolicyHandle, Verdict, addr};
use vg_policy::config::Settings;
use vg_policy::network::NetworkPolicy;
use vg_policy::view::NodeKind;
use vg_policy::{MountOp, NetworkMode};
use vg_records::event::kind::NETWORK;
use vg_records::{Event, Metadata};
use vg_sandbox::{SandboxNetwork, TunConfig};

/// The network a session gets.
pub struct Plan {
    pub mode: NetworkMode,
    /// In `allow` mode: the rules and pinned names.
    pub policy: Option<NetworkPolicy>,
    /// Files generated for the sandbox, removed when the session ends.
    generated: Option<Generated>,
}

impl Plan {
    /// The mode from the settings: `allow` when rules were given without a mode.
    pub fn new(settings: &Settings) -> Result<Self> {
        let has_rules = !(settings.network_rules.is_empty() && settings.add_hosts.is_empty());
        let mode = settings.network.unwrap_or(if has_rules {
            NetworkMode::Allow
        } else {
            NetworkMode::None
        });
        let policy = match mode {
            // Whether this host lets us create the TUN interface is found out by init,
            // which fails closed with the fix (`doctor` checks it too).
            NetworkMode::Allow => Some(NetworkPolicy {
                rules: settings.network_rules.clone(),
                hosts: settings.add_hosts.clone(),
            }),
            NetworkMode::None | NetworkMode::Host => None,
        };
        if mode == NetworkMode::Host {
            eprintln!(
                "vectraguard: warning: --network host: the sandbox shares this machine's network with no mediation and no records of connections"
            );
        }
        let generated = match mode {
            NetworkMode::Allow => Some(Generated::write(&addr::resolv_conf())?),
            _ => None,
        };
        Ok(Self {
            mode,
            policy,
            generated,
        })
    }

    pub fn sandbox_network(&self) -> SandboxNetwork {
        match self.mode {
            NetworkMode::None => SandboxNetwork::Loopback,
            NetworkMode::Host => SandboxNetwork::Host,
            NetworkMode::Allow => SandboxNetwork::Tun(TunConfig {
                name: addr::INTERFACE,
                address: addr::SANDBOX,
                netmask: addr::NETMASK,
                gateway: addr::GATEWAY,
                mtu: addr::MTU,
            }),
        }
    }

    /// Mounts the sandbox needs on top of the default view.
    pub fn mounts(&self) -> Vec<MountOp> {
        self.generated
            .iter()
            .map(|g| MountOp::Bind {
                src: g.resolv_conf.clone(),
                dst: PathBuf::from("/etc/resolv.conf"),
                read_only: true,
                kind: NodeKind::File,
                dev: false,
            })
            .collect()
    }

    /// The policy handle the mediator decides with.
    pub fn handle(&self) -> Option<PolicyHandle> {
        self.policy.clone().map(PolicyHandle::new)
    }

    /// Mode and rules in the session's metadata; `host` is flagged loudly.
    pub fn record(&self, meta: &mut Metadata) {
        meta.network.mode = Some(self.mode.to_string());
        if let Some(policy) = &self.policy {
            meta.network.rules = policy.rules.iter().map(|r| r.text.clone()).collect();
            meta.network.extra.insert(
                "add_hosts".into(),
                policy
                    .hosts
                    .iter()
                    .map(|h| Value::from(h.to_string()))
                    .collect(),
            );
            meta.network
                .extra
                .insert("default".into(), Value::from("deny"));
        }
        if self.mode == NetworkMode::Host {
            meta.network.extra.insert(
                "warning".into(),
                Value::from("host network: no isolation, connections not mediated or recorded"),
            );
        }
    }
}

/// A private folder holding the sandbox's generated `/etc/resolv.conf`.
struct Generated {
    dir: PathBuf,
    resolv_conf: PathBuf,
}

impl Generated {
    fn write(resolv_conf: &str) -> Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let base = std::env::temp_dir();
        let dir = (0..16)
            .map(|i| base.join(format!("vectraguard-net-{}-{i}", std::process::id())))
            .find(|d| std::fs::DirBuilder::new().mode(0o755).create(d).is_ok())
            .with_context(|| {
                format!(
                    "cannot create a private folder under {} for the sandbox's resolv.conf: check that it is writable, or set TMPDIR",
                    base.display()
                )
            })?;
        let path = dir.join("resolv.conf");
        let generated = Self {
            dir,
            resolv_conf: path.clone(),
        };
        std::fs::write(&path, resolv_conf)
            .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)))
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(generated)
    }
}

impl Drop for Generated {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.resolv_conf);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Checks flags that only make sense together.
pub fn check_flags(mode: Option<NetworkMode>, rules: usize, hosts: usize) -> Result<()> {
    match mode {
        Some(m @ (NetworkMode::None | NetworkMode::Host)) if rules + hosts > 0 => bail!(
            "--allow, --deny and --add-host mediate the network, which --network {m} does not: drop --network {m} (the rules imply --network allow)"
        ),
        _ => Ok(()),
    }
}

/// One mediator event as a line of `events.jsonl` (type `network`).
pub fn to_record(event: NetEvent) -> Event {
    fn verdict_fields(event: Event, v: &Verdict) -> Event {
        event
            .with("decision", v.decision())
            .with("rule", v.rule.clone().map_or(Value::Null, Value::from))
            .with("reason", v.reason.clone())
    }
    match event {
        NetEvent::Dns {
            time,
            name,
            qtype,
            verdict,
            addresses,
            rcode,
        } => verdict_fields(
            Event::new(NETWORK)
                .at(time)
                .with("event", "dns")
                .with("protocol", "dns")
                .with("name", name)
                .with("qtype", qtype)
                .with("rcode", rcode)
                .with(
                    "addresses",
                    addresses
                        .iter()
                        .map(|a| Value::from(a.to_string()))
                        .collect::<Vec<_>>(),
                ),
            &verdict,
        ),
        NetEvent::Connect {
            id,
            time,
            protocol,
            name,
            address,
            port,
            verdict,
        } => verdict_fields(
            Event::new(NETWORK)
                .at(time)
                .with("event", "connect")
                .with("connection", id)
                .with("protocol", protocol)
                .with("name", name.map_or(Value::Null, Value::from))
                .with("address", address.to_string())
                .with("port", port),
            &verdict,
        ),
        NetEvent::Closed {
            id,
            time,
            protocol,
            name,
            address,
            port,
            bytes_out,
            bytes_in,
            duration,
            error,
        } => Event::new(NETWORK)
            .at(time)
            .with("event", "close")
            .with("connection", id)
            .with("protocol", protocol)
            .with("name", name.map_or(Value::Null, Value::from))
            .with("address", address.to_string())
            .with("port", port)
            .with("bytes_out", bytes_out)
            .with("bytes_in", bytes_in)
            .with(
                "duration_ms",
                u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            )
            .with("error", error.map_or(Value::Null, Value::from)),
    }
}
