//! The `layers` section of a session's metadata, from the `key=value` lines that the
//! sandbox's init reports once every layer is in place.

use vg_records::Layers;

/// Fills `layers` from init's report. Unknown keys are kept under their own name so
/// that nothing init says is lost.
pub fn record(layers: &mut Layers, enforced: &str) {
    for (key, value) in enforced.lines().filter_map(|l| l.split_once('=')) {
        let list = || -> Vec<String> {
            value
                .split(',')
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
                .collect()
        };
        match key {
            "namespaces" => layers.namespaces = list(),
            "no_new_privs" => layers.no_new_privs = Some(value == "1"),
            "capabilities" => layers.capabilities = Some(list()),
            "landlock_abi" => layers.landlock_abi = value.parse().ok(),
            "seccomp_mode" => layers.seccomp = Some(value.to_owned()),
            "landlock_scopes" => {
                layers.extra.insert(key.to_owned(), list().into());
            }
            _ => {
                let v = value
                    .parse::<u64>()
                    .map_or_else(|_| value.into(), serde_json::Value::from);
                layers.extra.insert(key.to_owned(), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_report_fills_the_layers() {
        let mut layers = Layers::default();
        record(
            &mut layers,
            "namespaces=user,mount,pid\nno_new_privs=1\ncapabilities=\nlandlock_abi=6\nlandlock_kernel_abi=7\nlandlock_scopes=signal,abstract_unix_socket\nseccomp_mode=filter+notify\nseccomp_instructions=170\n",
        );
        assert_eq!(layers.namespaces, ["user", "mount", "pid"]);
        assert_eq!(layers.no_new_privs, Some(true));
        assert_eq!(layers.capabilities, Some(vec![]));
        assert_eq!(layers.landlock_abi, Some(6));
        assert_eq!(layers.seccomp.as_deref(), Some("filter+notify"));
        assert_eq!(layers.extra["seccomp_instructions"], 170);
        assert_eq!(layers.extra["landlock_kernel_abi"], 7);
        assert_eq!(
            layers.extra["landlock_scopes"],
            serde_json::json!(["signal", "abstract_unix_socket"])
        );
    }
}
