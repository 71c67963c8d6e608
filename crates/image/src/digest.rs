//! SHA-256 content digests (`sha256:<64 hex>`), the only algorithm OCI registries
//! require and the only one the store accepts, and readers that hash what they pass.

use std::fmt;
use std::io::{self, Read, Write};
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

use crate::error::ImageError;

/// A `sha256:` digest, held as its 64 lowercase hex digits.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(vg_records::layout::hex_encode(&Sha256::digest(bytes)))
    }

    /// Parses `sha256:<64 lowercase hex>`.
    pub fn parse(input: &str) -> Result<Self, ImageError> {
        let bad = |reason: &str| ImageError::BadReference {
            input: input.to_owned(),
            reason: reason.to_owned(),
        };
        let Some((alg, hex)) = input.split_once(':') else {
            return Err(bad("a digest is sha256:<64 hex digits>"));
        };
        if alg != "sha256" {
            return Err(bad(&format!(
                "digest algorithm {alg} is not supported; only sha256 is"
            )));
        }
        Self::from_hex(hex).ok_or_else(|| bad("a sha256 digest has 64 lowercase hex digits"))
    }

    /// From the 64 hex digits alone (a blob's file name).
    pub fn from_hex(hex: &str) -> Option<Self> {
        (hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| Self(hex.to_owned()))
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits, as `docker images` shows image ids.
    pub fn short(&self) -> &str {
        &self.0[..12]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.0)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = ImageError;
    fn from_str(s: &str) -> Result<Self, ImageError> {
        Self::parse(s)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl From<&Digest> for oci_spec::image::Digest {
    fn from(d: &Digest) -> Self {
        oci_spec::image::Sha256Digest::from_str(d.hex())
            .map(Into::into)
            .unwrap_or_else(|_| unreachable_digest())
    }
}

/// `Digest` only holds valid sha256 hex, which oci-spec always accepts.
#[cold]
fn unreachable_digest() -> oci_spec::image::Digest {
    oci_spec::image::Digest::from_str(
        "sha256:0000000000000000000000000000000000000000000000000000000000000000",
    )
    .unwrap_or_else(|_| std::process::abort())
}

impl TryFrom<&oci_spec::image::Digest> for Digest {
    type Error = ImageError;
    fn try_from(d: &oci_spec::image::Digest) -> Result<Self, ImageError> {
        Self::parse(d.as_ref())
    }
}

/// Hashes everything read through it.
pub struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Reads the rest (e.g. a tar archive's padding after its end marker), then
    /// returns the digest and length of everything read.
    pub fn finish(mut self) -> io::Result<(Digest, u64)> {
        io::copy(&mut self, &mut io::sink())?;
        Ok((
            Digest(vg_records::layout::hex_encode(&self.hasher.finalize())),
            self.count,
        ))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// Hashes everything written through it.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    count: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Bytes written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn finish(self) -> (W, Digest, u64) {
        let d = Digest(vg_records::layout::hex_encode(&self.hasher.finalize()));
        (self.inner, d, self.count)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_sha256_digests() {
        let d = Digest::of(b"");
        assert_eq!(
            d.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Digest::parse(&d.to_string()).unwrap(), d);
        assert_eq!(d.short(), "e3b0c44298fc");
        for bad in [
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "sha256:abc",
            "sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ] {
            assert!(Digest::parse(bad).is_err(), "{bad}");
        }
        let oci: oci_spec::image::Digest = (&d).into();
        assert_eq!(Digest::try_from(&oci).unwrap(), d);
    }

    #[test]
    fn hashing_reader_counts_the_tail_it_drains() {
        let mut r = HashingReader::new(&b"hello world"[..]);
        let mut first = [0u8; 5];
        r.read_exact(&mut first).unwrap();
        let (d, n) = r.finish().unwrap();
        assert_eq!((d, n), (Digest::of(b"hello world"), 11));
    }
}
