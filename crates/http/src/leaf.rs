//! Leaf certificates for the names the sandbox connects to, minted on demand by the
//! session's CA and cached, and the rustls resolver that presents them.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::crypto::KeyProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use time::{Duration, OffsetDateTime};
use vg_policy::network::HostName;

use crate::ca::{SessionCa, serial};
use crate::error::Error;

/// Leaves kept at most; the oldest goes first.
const CAPACITY: usize = 1024;
/// A leaf is valid 90 days; one older than this is minted anew.
const REMINT_AFTER: std::time::Duration = std::time::Duration::from_secs(30 * 86400);

pub(crate) struct LeafCache {
    ca: Arc<SessionCa>,
    keys: &'static dyn KeyProvider,
    cached: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    by_name: HashMap<String, (Arc<CertifiedKey>, Instant)>,
    order: VecDeque<String>,
}

impl LeafCache {
    pub(crate) fn new(ca: Arc<SessionCa>, keys: &'static dyn KeyProvider) -> Self {
        Self {
            ca,
            keys,
            cached: Mutex::default(),
        }
    }

    /// The leaf for `name` (a DNS name in canonical lower case, or an IP address).
    pub(crate) fn get(&self, name: &str) -> Result<Arc<CertifiedKey>, Error> {
        {
            let cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((leaf, minted)) = cached.by_name.get(name)
                && minted.elapsed() < REMINT_AFTER
            {
                return Ok(Arc::clone(leaf));
            }
        }
        // Minted outside the lock: two racing handshakes may both mint, harmlessly.
        let leaf = Arc::new(self.mint(name)?);
        let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        let Cached { by_name, order } = &mut *cached;
        if by_name
            .insert(name.to_owned(), (Arc::clone(&leaf), Instant::now()))
            .is_none()
        {
            order.push_back(name.to_owned());
        }
        while by_name.len() > CAPACITY {
            let Some(oldest) = order.pop_front() else {
                break;
            };
            by_name.remove(&oldest);
        }
        Ok(leaf)
    }

    /// A fresh P-256 key and a certificate for `name`: SAN the name (an IP SAN for an
    /// address), subject and authority key identifiers (Python 3.13 refuses a leaf
    /// without the latter), serverAuth only, valid from a day ago for 90 days.
    fn mint(&self, name: &str) -> Result<CertifiedKey, Error> {
        let fail = |problem: String| Error::Leaf {
            name: name.to_owned(),
            problem,
        };
        let san = match name.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => {
                let canonical = HostName::parse(name).map_err(|e| fail(e.to_string()))?;
                if canonical.as_str() != name {
                    return Err(fail("not a DNS name in canonical form".to_owned()));
                }
                SanType::DnsName(
                    name.to_owned()
                        .try_into()
                        .map_err(|e: rcgen::Error| fail(e.to_string()))?,
                )
            }
        };
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![san];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        // ExplicitNoCa writes basicConstraints CA:FALSE and the subject key identifier.
        params.is_ca = IsCa::ExplicitNoCa;
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(1);
        params.not_after = now + Duration::days(90);
        params.serial_number = Some(serial()?);
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| fail(e.to_string()))?;
        let cert = params
            .signed_by(&key, self.ca.issuer())
            .map_err(|e| fail(e.to_string()))?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing = self
            .keys
            .load_private_key(der)
            .map_err(|e| fail(e.to_string()))?;
        Ok(CertifiedKey::new(
            vec![cert.der().clone(), self.ca.der().clone()],
            signing,
        ))
    }
}

/// Presents the leaf for the ClientHello's server name, or for `fallback` (the
/// connection's address) when the client sent none. The SNI was checked against the
/// connection before the handshake reaches here.
#[derive(Clone)]
pub(crate) struct Resolver {
    cache: Arc<LeafCache>,
    fallback: Option<String>,
}

impl Resolver {
    pub(crate) fn new(cache: Arc<LeafCache>, fallback: Option<String>) -> Self {
        Self { cache, fallback }
    }
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let name = match hello.server_name() {
            Some(sni) => sni.trim_end_matches('.').to_ascii_lowercase(),
            None => self.fallback.clone()?,
        };
        self.cache.get(&name).ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use x509_parser::extensions::{GeneralName, ParsedExtension};
    use x509_parser::prelude::*;

    use super::*;

    fn cache() -> LeafCache {
        let provider = rustls::crypto::ring::default_provider();
        let keys: &'static dyn KeyProvider = provider.key_provider;
        LeafCache::new(Arc::new(SessionCa::generate().unwrap()), keys)
    }

    #[test]
    fn leaves_carry_san_ski_aki_server_auth_and_a_past_not_before() {
        let cache = cache();
        let leaf = cache.get("api.example.com").unwrap();
        assert_eq!(leaf.cert.len(), 2, "leaf then CA");
        let (_, cert) = X509Certificate::from_der(&leaf.cert[0]).unwrap();
        let (_, ca) = X509Certificate::from_der(&leaf.cert[1]).unwrap();
        assert_eq!(cert.issuer(), ca.subject());
        let exts = cert.extensions();
        let ski = exts.iter().find_map(|e| match e.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0.to_vec()),
            _ => None,
        });
        let aki = exts.iter().find_map(|e| match e.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(a) => {
                a.key_identifier.as_ref().map(|k| k.0.to_vec())
            }
            _ => None,
        });
        let ca_ski = ca
            .extensions()
            .iter()
            .find_map(|e| match e.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0.to_vec()),
                _ => None,
            });
        assert!(ski.is_some(), "subject key identifier");
        assert_eq!(aki, ca_ski, "authority key identifier names the CA's key");
        let san = cert.subject_alternative_name().unwrap().unwrap();
        assert_eq!(
            san.value.general_names,
            [GeneralName::DNSName("api.example.com")]
        );
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && !eku.client_auth);
        let bc = cert.basic_constraints().unwrap().unwrap().value;
        assert!(!bc.ca);
        let now = ASN1Time::now();
        let before = now.timestamp() - cert.validity().not_before.timestamp();
        assert!(
            (86_000..=86_500).contains(&before),
            "a day in the past: {before}"
        );
        let after = cert.validity().not_after.timestamp() - now.timestamp();
        assert!((89 * 86400..=90 * 86400 + 60).contains(&after));
        assert!(leaf.keys_match().is_ok());
    }

    /// OpenSSL's strict checks (what Python 3.13 turns on by default) accept the chain.
    /// Skipped where the `openssl` command is missing.
    #[test]
    fn openssl_verifies_a_leaf_strictly() {
        let pem = |der: &[u8]| {
            let body = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der);
            let lines: Vec<&str> = body
                .as_bytes()
                .chunks(64)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                lines.join("\n")
            )
        };
        let cache = cache();
        let leaf = cache.get("api.example.com").unwrap();
        let dir = std::env::temp_dir().join(format!("vg-http-leaf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), cache.ca.pem()).unwrap();
        std::fs::write(dir.join("leaf.pem"), pem(&leaf.cert[0])).unwrap();
        let run = std::process::Command::new("openssl")
            .args(["verify", "-x509_strict", "-purpose", "sslserver"])
            .args(["-verify_hostname", "api.example.com", "-CAfile"])
            .arg(dir.join("ca.pem"))
            .arg(dir.join("leaf.pem"))
            .output();
        std::fs::remove_dir_all(&dir).unwrap();
        // `scripts/test` installs openssl (Debian's package): a missing one fails.
        let out = run.expect("openssl is needed for this check: apt-get install openssl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.contains(": OK"), "{text}");
    }

    #[test]
    fn addresses_get_ip_sans() {
        let cache = cache();
        for (text, bytes) in [
            ("10.1.2.3", vec![10, 1, 2, 3]),
            (
                "fd00::1",
                "fd00::1"
                    .parse::<std::net::Ipv6Addr>()
                    .unwrap()
                    .octets()
                    .to_vec(),
            ),
        ] {
            let leaf = cache.get(text).unwrap();
            let (_, cert) = X509Certificate::from_der(&leaf.cert[0]).unwrap();
            let san = cert.subject_alternative_name().unwrap().unwrap();
            assert_eq!(san.value.general_names, [GeneralName::IPAddress(&bytes)]);
        }
    }

    #[test]
    fn leaves_are_cached_and_bounded() {
        let cache = cache();
        let a = cache.get("a.test").unwrap();
        assert!(Arc::ptr_eq(&a, &cache.get("a.test").unwrap()));
        assert!(!Arc::ptr_eq(&a, &cache.get("b.test").unwrap()));
        assert!(cache.get("bad name!").is_err());
        {
            let mut cached = cache.cached.lock().unwrap();
            for i in 0..CAPACITY {
                let name = format!("n{i}.test");
                cached
                    .by_name
                    .insert(name.clone(), (Arc::clone(&a), Instant::now()));
                cached.order.push_back(name);
            }
        }
        cache.get("last.test").unwrap();
        let cached = cache.cached.lock().unwrap();
        assert_eq!(cached.by_name.len(), CAPACITY);
        assert!(!cached.by_name.contains_key("a.test"), "the oldest went");
        assert!(cached.by_name.contains_key("last.test"));
    }
}
