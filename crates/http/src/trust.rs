//! What upstream servers are verified against: the host's trust store plus the roots
//! given with `--upstream-ca`. Loaded on the first upstream connection; when nothing
//! can be trusted, every upstream connection fails closed with the reason.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// Where distributions keep their bundle of trusted roots, most common first.
pub(crate) const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/ssl/cert.pem",
];

pub(crate) struct Trust {
    provider: Arc<CryptoProvider>,
    extra: Vec<CertificateDer<'static>>,
    bundles: Vec<PathBuf>,
    configs: OnceLock<Result<Configs, String>>,
}

/// Client configurations by what the sandbox's side negotiated.
pub(crate) struct Configs {
    /// Offers `h2` and `http/1.1`.
    pub(crate) h2: Arc<ClientConfig>,
    /// Offers `http/1.1` only (the sandbox speaks HTTP/1.1: upgrades must work).
    pub(crate) h1: Arc<ClientConfig>,
}

impl Trust {
    /// `bundles`: the PEM files to try in order; the first with certificates is used.
    /// `SSL_CERT_FILE`, when set, is tried first, as OpenSSL would.
    pub(crate) fn new(
        provider: Arc<CryptoProvider>,
        extra: Vec<CertificateDer<'static>>,
        bundles: Vec<PathBuf>,
    ) -> Self {
        Self {
            provider,
            extra,
            bundles,
            configs: OnceLock::new(),
        }
    }

    pub(crate) fn system_bundles() -> Vec<PathBuf> {
        std::env::var_os("SSL_CERT_FILE")
            .map(PathBuf::from)
            .into_iter()
            .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
            .collect()
    }

    pub(crate) fn configs(&self) -> Result<&Configs, String> {
        self.configs
            .get_or_init(|| self.load())
            .as_ref()
            .map_err(Clone::clone)
    }

    fn load(&self) -> Result<Configs, String> {
        let mut roots = RootCertStore::empty();
        let mut tried = Vec::new();
        for path in &self.bundles {
            match CertificateDer::pem_file_iter(path) {
                Ok(certs) => {
                    let (added, _) = roots.add_parsable_certificates(certs.filter_map(Result::ok));
                    if added > 0 {
                        break;
                    }
                    tried.push(format!("{}: no certificates", path.display()));
                }
                Err(e) => tried.push(format!("{}: {e}", path.display())),
            }
        }
        let (extra, _) = roots.add_parsable_certificates(self.extra.iter().cloned());
        if roots.is_empty() {
            return Err(format!(
                "no trusted root certificates to verify the server with (host trust store: {}; --upstream-ca: {} usable); install the ca-certificates package or pass --upstream-ca FILE",
                if tried.is_empty() {
                    "none to try".to_owned()
                } else {
                    tried.join("; ")
                },
                extra
            ));
        }
        let verifier = WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::clone(&self.provider),
        )
        .build()
        .map_err(|e| format!("could not set up server verification: {e}"))?;
        let config = |alpn: &[&[u8]]| -> Result<Arc<ClientConfig>, String> {
            let mut config = ClientConfig::builder_with_provider(Arc::clone(&self.provider))
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("could not set up TLS: {e}"))?
                .with_webpki_verifier(Arc::clone(&verifier))
                .with_no_client_auth();
            config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            Ok(Arc::new(config))
        };
        Ok(Configs {
            h2: config(&[b"h2", b"http/1.1"])?,
            h1: config(&[b"http/1.1"])?,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    #[test]
    fn nothing_to_trust_fails_closed_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("vg-http-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let trust = Trust::new(
            provider(),
            Vec::new(),
            vec![dir.join("missing.pem"), empty.clone()],
        );
        let err = trust.configs().err().unwrap();
        assert!(
            err.contains("missing.pem") && err.contains("no certificates"),
            "{err}"
        );
        assert!(err.contains("--upstream-ca"), "{err}");
        // Extra roots alone are enough.
        let ca = rcgen::generate_simple_self_signed(vec!["x.test".to_owned()]).unwrap();
        let trust = Trust::new(provider(), vec![ca.cert.der().clone()], vec![empty]);
        assert!(trust.configs().is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
