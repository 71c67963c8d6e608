//! The server name in a TLS ClientHello, read from the first bytes a sandbox sends on a
//! connection that is passed through uninspected. A connection is allowed for the
//! name the sandbox looked up; a ClientHello naming another host on the same address
//! (domain fronting through a shared CDN address) is cut before a byte of it leaves.
//!
//! Hand-written rather than a TLS library's acceptor: it must read exactly the
//! ClientHello, across records and TCP segments, and refuse what it cannot read,
//! whatever the library would tolerate.

/// What the first bytes of a connection say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FirstBytes {
    /// More bytes are needed.
    Incomplete,
    /// Not a TLS handshake: nothing to check.
    NotTls,
    /// A ClientHello, with its server name if it has one.
    ClientHello(Option<String>),
    /// A TLS handshake record that is not a readable ClientHello.
    Malformed(&'static str),
}

/// The most bytes read before a ClientHello must be complete (it is rarely above
/// 2 KiB; post-quantum key shares bring it near 1.5 KiB more).
pub(crate) const MAX_HELLO: usize = 64 * 1024;

const HANDSHAKE: u8 = 22;
const CLIENT_HELLO: u8 = 1;
const SERVER_NAME: u16 = 0;
const HOST_NAME: u8 = 0;

/// Reads `bytes`, the start of what the sandbox sent.
pub(crate) fn client_hello(bytes: &[u8]) -> FirstBytes {
    let Some(&first) = bytes.first() else {
        return FirstBytes::Incomplete;
    };
    // An SSLv2-format hello (length with the high bit set, then type 1) still opens
    // TLS on some servers, and carries no server name to check.
    if first & 0x80 != 0 {
        return match bytes.get(2) {
            None => FirstBytes::Incomplete,
            Some(1) => FirstBytes::Malformed("an SSLv2-format ClientHello"),
            Some(_) => FirstBytes::NotTls,
        };
    }
    if first != HANDSHAKE {
        return FirstBytes::NotTls;
    }
    // The handshake message may span records: join their fragments.
    let mut message = Vec::new();
    let mut rest = bytes;
    loop {
        if rest.len() < 5 {
            return incomplete(bytes);
        }
        if rest[0] != HANDSHAKE {
            return FirstBytes::Malformed(
                "a record other than a handshake before the ClientHello ended",
            );
        }
        if rest[1] != 3 {
            return FirstBytes::Malformed("not a TLS record version");
        }
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if len == 0 || len > 16_384 + 2048 {
            return FirstBytes::Malformed("a record length out of range");
        }
        if rest.len() < 5 + len {
            return incomplete(bytes);
        }
        message.extend_from_slice(&rest[5..5 + len]);
        rest = &rest[5 + len..];
        if message.len() >= 4 {
            if message[0] != CLIENT_HELLO {
                return FirstBytes::Malformed("the first handshake message is not a ClientHello");
            }
            let body = usize::from(message[1]) << 16
                | usize::from(message[2]) << 8
                | usize::from(message[3]);
            if 4 + body > MAX_HELLO {
                return FirstBytes::Malformed("the ClientHello is too large");
            }
            if message.len() >= 4 + body {
                return match parse_body(&message[4..4 + body]) {
                    Ok(name) => FirstBytes::ClientHello(name),
                    Err(problem) => FirstBytes::Malformed(problem),
                };
            }
        }
    }
}

fn incomplete(bytes: &[u8]) -> FirstBytes {
    if bytes.len() >= MAX_HELLO {
        FirstBytes::Malformed("the ClientHello is too large")
    } else {
        FirstBytes::Incomplete
    }
}

/// A cursor over a ClientHello's body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("the ClientHello is cut short");
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, &'static str> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn vec8(&mut self) -> Result<&'a [u8], &'static str> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    fn vec16(&mut self) -> Result<&'a [u8], &'static str> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

fn parse_body(body: &[u8]) -> Result<Option<String>, &'static str> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // legacy version, random
    if r.vec8()?.len() > 32 {
        return Err("a session id longer than 32 bytes");
    }
    r.vec16()?; // cipher suites
    r.vec8()?; // compression methods
    if r.0.is_empty() {
        return Ok(None); // no extensions at all
    }
    let mut extensions = Reader(r.vec16()?);
    if !r.0.is_empty() {
        return Err("bytes after the extensions");
    }
    let mut name = None;
    let mut seen_sni = false;
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vec16()?;
        if kind != SERVER_NAME {
            continue;
        }
        if seen_sni {
            return Err("two server name extensions");
        }
        seen_sni = true;
        let mut list = Reader(data);
        let mut names = Reader(list.vec16()?);
        if !list.0.is_empty() {
            return Err("bytes after the server name list");
        }
        while !names.0.is_empty() {
            let kind = names.u8()?;
            let host = names.vec16()?;
            if kind != HOST_NAME {
                continue;
            }
            if name.is_some() {
                return Err("two host names in the server name extension");
            }
            let host = std::str::from_utf8(host).map_err(|_| "a server name that is not text")?;
            name = Some(host.to_owned());
        }
    }
    Ok(name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A real ClientHello, as rustls sends it for `name`.
    fn rustls_hello(name: &str) -> Vec<u8> {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let server = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
        let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), server).unwrap();
        let mut out = Vec::new();
        conn.write_tls(&mut out).unwrap();
        out
    }

    /// A record-split copy: the handshake message cut into records of `size` bytes.
    fn split_records(hello: &[u8], size: usize) -> Vec<u8> {
        let message = &hello[5..];
        let mut out = Vec::new();
        for chunk in message.chunks(size) {
            out.extend_from_slice(&[HANDSHAKE, 3, 1]);
            out.extend_from_slice(&u16::try_from(chunk.len()).unwrap().to_be_bytes());
            out.extend_from_slice(chunk);
        }
        out
    }

    #[test]
    fn reads_the_name_of_a_real_client_hello_however_it_arrives() {
        let hello = rustls_hello("api.example.com");
        assert_eq!(
            client_hello(&hello),
            FirstBytes::ClientHello(Some("api.example.com".into()))
        );
        // Byte by byte, as separate segments would bring it.
        for cut in [0, 1, 4, 5, 6, 40, hello.len() - 1] {
            assert_eq!(
                client_hello(&hello[..cut]),
                FirstBytes::Incomplete,
                "cut at {cut}"
            );
        }
        // Spread over many records.
        let split = split_records(&hello, 7);
        assert_eq!(
            client_hello(&split),
            FirstBytes::ClientHello(Some("api.example.com".into()))
        );
        assert_eq!(
            client_hello(&split[..split.len() - 3]),
            FirstBytes::Incomplete
        );
        // An IP address is not sent as a server name.
        assert_eq!(
            client_hello(&rustls_hello("192.0.2.1")),
            FirstBytes::ClientHello(None)
        );
    }

    #[test]
    fn other_protocols_pass_and_broken_hellos_are_named() {
        assert_eq!(client_hello(b"GET / HTTP/1.1\r\n"), FirstBytes::NotTls);
        assert_eq!(client_hello(b"SSH-2.0-x"), FirstBytes::NotTls);
        // SSLv2-compatible hello: the length's high bit, then CLIENT-HELLO (1).
        assert!(matches!(
            client_hello(&[0x80, 0x2e, 0x01, 0x03, 0x01]),
            FirstBytes::Malformed(_)
        ));
        assert_eq!(client_hello(&[0x80]), FirstBytes::Incomplete);
        assert_eq!(client_hello(b""), FirstBytes::Incomplete);
        let hello = rustls_hello("a.test");
        let mut wrong_type = hello.clone();
        wrong_type[5] = 2; // a ServerHello
        assert!(matches!(
            client_hello(&wrong_type),
            FirstBytes::Malformed(_)
        ));
        let mut bad_version = hello.clone();
        bad_version[1] = 9;
        assert!(matches!(
            client_hello(&bad_version),
            FirstBytes::Malformed(_)
        ));
        // A body length that overruns its message.
        let mut long = hello.clone();
        long[8] = long[8].wrapping_add(1);
        assert!(matches!(
            client_hello(&long),
            FirstBytes::Incomplete | FirstBytes::Malformed(_)
        ));
        // A huge announced size never makes us wait for ever.
        let huge = [HANDSHAKE, 3, 1, 0x00, 0x04, CLIENT_HELLO, 0xff, 0xff, 0xff];
        assert!(matches!(client_hello(&huge), FirstBytes::Malformed(_)));
        // Never a panic on garbage after the handshake byte.
        for n in 0..300u32 {
            let bytes: Vec<u8> = std::iter::once(HANDSHAKE)
                .chain((0..n).map(|i| u8::try_from((i * 7919 + n) % 251).unwrap()))
                .collect();
            let _ = client_hello(&bytes);
        }
    }

    #[test]
    fn two_server_names_are_refused() {
        // The SNI extension's entry appended twice to the list: built by hand.
        let name = b"a.test";
        let mut entry = vec![HOST_NAME];
        entry.extend_from_slice(&u16::try_from(name.len()).unwrap().to_be_bytes());
        entry.extend_from_slice(name);
        let twice = [entry.clone(), entry].concat();
        let mut sni = u16::try_from(twice.len()).unwrap().to_be_bytes().to_vec();
        sni.extend_from_slice(&twice);
        let mut ext = SERVER_NAME.to_be_bytes().to_vec();
        ext.extend_from_slice(&u16::try_from(sni.len()).unwrap().to_be_bytes());
        ext.extend_from_slice(&sni);
        let mut body = vec![3, 3];
        body.extend_from_slice(&[0; 32]);
        body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
        body.extend_from_slice(&u16::try_from(ext.len()).unwrap().to_be_bytes());
        body.extend_from_slice(&ext);
        assert_eq!(
            parse_body(&body),
            Err("two host names in the server name extension")
        );
    }
}
