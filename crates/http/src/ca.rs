//! The session's certificate authority: made when the session starts, its private key
//! only ever in this process's memory, its certificate added to the sandbox's trust
//! bundles so that clients inside accept the leaves [`crate::leaf`] mints.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use rustls_pki_types::CertificateDer;
use time::{Duration, OffsetDateTime};

use crate::error::Error;

pub(crate) struct SessionCa {
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
    pem: String,
}

impl SessionCa {
    /// An ECDSA P-256 CA valid from a day ago (clocks disagree) for a year, that may
    /// only sign leaves (path length 0).
    pub(crate) fn generate() -> Result<Self, Error> {
        let ca_error = |e: rcgen::Error| Error::Ca(e.to_string());
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(ca_error)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            format!("Vectra Guard session CA {}", hex(&random::<6>()?)),
        );
        dn.push(DnType::OrganizationName, "Vectra Guard");
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(1);
        params.not_after = now + Duration::days(365);
        params.serial_number = Some(serial()?);
        let cert = params.self_signed(&key).map_err(ca_error)?;
        Ok(Self {
            pem: cert.pem(),
            der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        })
    }

    pub(crate) fn issuer(&self) -> &Issuer<'static, KeyPair> {
        &self.issuer
    }

    pub(crate) fn der(&self) -> &CertificateDer<'static> {
        &self.der
    }

    pub(crate) fn pem(&self) -> &str {
        &self.pem
    }
}

/// A positive random 128-bit serial number, as RFC 5280 asks (unpredictable, ≤ 20 bytes).
pub(crate) fn serial() -> Result<SerialNumber, Error> {
    let mut bytes = random::<16>()?;
    bytes[0] = (bytes[0] & 0x7f) | 0x01;
    Ok(SerialNumber::from_slice(&bytes))
}

pub(crate) fn random<const N: usize>() -> Result<[u8; N], Error> {
    let mut bytes = [0u8; N];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| Error::Ca(format!("the system's random number source failed: {e}")))?;
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use x509_parser::extensions::ParsedExtension;
    use x509_parser::prelude::*;

    use super::*;

    #[test]
    fn the_ca_may_only_sign_leaves() {
        let ca = SessionCa::generate().unwrap();
        assert!(ca.pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let (_, cert) = X509Certificate::from_der(ca.der()).unwrap();
        let cn = cert.subject().iter_common_name().next().unwrap();
        assert!(
            cn.as_str().unwrap().starts_with("Vectra Guard session CA "),
            "{:?}",
            cn.as_str()
        );
        let bc = cert.basic_constraints().unwrap().unwrap();
        assert!(bc.critical && bc.value.ca);
        assert_eq!(bc.value.path_len_constraint, Some(0));
        let ku = cert.key_usage().unwrap().unwrap().value;
        assert!(ku.key_cert_sign() && ku.crl_sign() && !ku.digital_signature());
        let now = ASN1Time::now();
        assert!(cert.validity().not_before < now && now < cert.validity().not_after);
        let years = cert.validity().not_after.timestamp() - now.timestamp();
        assert!((364 * 86400..=366 * 86400).contains(&years));
        assert!(cert.extensions().iter().any(|e| matches!(
            e.parsed_extension(),
            ParsedExtension::SubjectKeyIdentifier(_)
        )));
        // Each session has its own.
        let other = SessionCa::generate().unwrap();
        assert_ne!(other.der(), ca.der());
    }
}
