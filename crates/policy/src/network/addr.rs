//! Address ranges: CIDR networks, and the special-purpose space (private, loopback,
//! link-local, metadata, multicast, reserved) that stays closed unless a rule names it.
//!
//! An IPv6 address that stands for an IPv4 address (mapped `::ffff:a.b.c.d`,
//! compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) reaches that IPv4 host, so every
//! comparison goes through [`canonical`] first: `deny 10.0.0.0/8` also covers
//! `::ffff:10.0.0.1` and `64:ff9b::a00:1`, and this machine's own `192.0.2.2` is also
//! `::ffff:192.0.2.2`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{NetworkError, shown};

/// NAT64's well-known prefix (RFC 6052): `64:ff9b::/96` embeds an IPv4 address.
const NAT64: u128 = 0x0064_ff9b_0000_0000_0000_0000_0000_0000;
const LOW_32: u128 = 0xffff_ffff;

/// The form every address comparison uses: the IPv4 address an IPv4-mapped
/// (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`) or NAT64 (`64:ff9b::a.b.c.d`)
/// address stands for, or `addr` itself. `::` and `::1` stay IPv6 (unspecified and
/// loopback, not compatible addresses). Only for comparing: a connection still goes to
/// the address as resolved (a NAT64 address needs its gateway).
pub fn canonical(addr: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = addr else {
        return addr;
    };
    let bits = v6.to_bits();
    let embedded = Ipv4Addr::from_bits((bits & LOW_32) as u32);
    let prefix = bits & !LOW_32;
    let compatible = prefix == 0 && embedded.to_bits() > 1;
    if prefix == 0xffff << 32 || prefix == NAT64 || compatible {
        IpAddr::V4(embedded)
    } else {
        addr
    }
}

/// An IP network: an address with all host bits zero, and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `None` if `prefix` is longer than the address or `addr` has host bits set.
    /// A network of IPv6 addresses that all stand for IPv4 addresses ([`canonical`])
    /// becomes its IPv4 form: `::ffff:10.0.0.0/104` and `64:ff9b::a00:0/104` are
    /// `10.0.0.0/8`.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Self> {
        if prefix > width(addr) || network_of(addr, prefix) != addr {
            return None;
        }
        if let IpAddr::V6(first) = addr
            && prefix >= 96
        {
            let host = u128::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
            let last = IpAddr::V6(Ipv6Addr::from_bits(first.to_bits() | host));
            // First and last both convert: the whole range shares one IPv6 prefix
            // (`::` and `::1` at the start of the compatible range do not convert).
            if let (IpAddr::V4(v4), IpAddr::V4(_)) = (canonical(addr), canonical(last)) {
                return Some(Self {
                    addr: IpAddr::V4(v4),
                    prefix: prefix - 96,
                });
            }
        }
        Some(Self { addr, prefix })
    }

    /// `ADDRESS/PREFIX`, e.g. `10.0.0.0/8` or `2001:db8::/32`.
    pub fn parse(input: &str) -> Result<Self, NetworkError> {
        let fail = |problem: String| NetworkError::Cidr {
            input: shown(input),
            problem,
        };
        let (addr_text, prefix_text) = input
            .split_once('/')
            .ok_or_else(|| fail("it has no '/PREFIX', e.g. 10.0.0.0/8".to_owned()))?;
        let addr: IpAddr = addr_text.parse().map_err(|_| {
            fail(format!(
                "'{}' is not an IP address (IPv4 in dotted decimal, e.g. 10.0.0.0/8, or IPv6, e.g. fd00::/8)",
                shown(addr_text)
            ))
        })?;
        let max = width(addr);
        let prefix = prefix_text
            .parse::<u8>()
            .ok()
            .filter(|p| *p <= max && prefix_text.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                fail(format!(
                    "the prefix length '{}' is not a number from 0 to {max}",
                    shown(prefix_text)
                ))
            })?;
        Self::new(addr, prefix).ok_or_else(|| {
            fail(format!(
                "host bits are set after the first {prefix}; the network is {}/{prefix}",
                network_of(addr, prefix)
            ))
        })
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `addr` lies in this network, compared in [`canonical`] form.
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self.addr, canonical(addr)) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                same_prefix_v4(net.to_bits(), a.to_bits(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                same_prefix_v6(net.to_bits(), a.to_bits(), self.prefix)
            }
            _ => false,
        }
    }

    /// Whether every address of this network is special (see [`is_special`]): only then
    /// does a rule naming it open private space. `10.0.0.0/8` is; `0.0.0.0/0` is not.
    pub fn is_special(&self) -> bool {
        match self.addr {
            IpAddr::V4(a) => v4_within_special(a.to_bits(), self.prefix),
            IpAddr::V6(a) => v6_within_special(a.to_bits(), self.prefix),
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Whether `addr` is in special-purpose space that a public name must never resolve to
/// and a broad rule must never open: private, shared (CGNAT), loopback, link-local
/// (with the cloud metadata service 169.254.169.254), documentation, benchmarking,
/// multicast, reserved and broadcast; for IPv6 also unique-local, site-local and
/// discard space, and the IPv4 address embedded in mapped, NAT64 and 6to4 addresses.
pub fn is_special(addr: IpAddr) -> bool {
    match canonical(addr) {
        IpAddr::V4(a) => v4_within_special(a.to_bits(), 32),
        IpAddr::V6(a) => v6_within_special(a.to_bits(), 128),
    }
}

/// IANA special-purpose IPv4 blocks that are not reachable on the public internet.
const SPECIAL_V4: &[(Ipv4Addr, u8)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network"
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // private
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // shared address space (carrier-grade NAT)
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link-local, cloud metadata 169.254.169.254
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // private
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // documentation (TEST-NET-1)
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // private
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation (TEST-NET-2)
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // documentation (TEST-NET-3)
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved, and broadcast 255.255.255.255
];

/// How a special IPv6 block is judged.
#[derive(Clone, Copy)]
enum V6Block {
    /// Every address in it is special.
    Whole,
    /// It carries an IPv4 address in the 32 bits from bit `n` on; that address decides.
    EmbedsV4At(u8),
}

const SPECIAL_V6: &[(Ipv6Addr, u8, V6Block)] = &[
    // Unspecified (::), loopback (::1) and the deprecated IPv4-compatible addresses.
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 96, V6Block::Whole),
    // IPv4-mapped (addresses are converted before they get here; networks may not be).
    (
        Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0),
        96,
        V6Block::EmbedsV4At(96),
    ),
    // NAT64 well-known prefix: the gateway forwards to the embedded IPv4 address.
    (
        Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0),
        96,
        V6Block::EmbedsV4At(96),
    ),
    // NAT64 local-use prefix.
    (
        Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0),
        48,
        V6Block::Whole,
    ),
    // Discard-only.
    (
        Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0),
        64,
        V6Block::Whole,
    ),
    // Documentation.
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        V6Block::Whole,
    ),
    // 6to4: relays forward to the IPv4 address in bits 16..48.
    (
        Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0),
        16,
        V6Block::EmbedsV4At(16),
    ),
    // Unique local.
    (
        Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
        7,
        V6Block::Whole,
    ),
    // Link-local.
    (
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
        10,
        V6Block::Whole,
    ),
    // Site-local (deprecated, still routed by some networks).
    (
        Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0),
        10,
        V6Block::Whole,
    ),
    // Multicast.
    (
        Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0),
        8,
        V6Block::Whole,
    ),
];

/// Whether the network `bits/prefix` lies entirely inside the union of `SPECIAL_V4`.
/// A network that only partly overlaps special blocks is split in halves until each
/// half is inside one block or outside all of them (at most 32 levels).
fn v4_within_special(bits: u32, prefix: u8) -> bool {
    let mut overlaps = false;
    for &(block, len) in SPECIAL_V4 {
        if same_prefix_v4(bits, block.to_bits(), len.min(prefix)) {
            if len <= prefix {
                return true;
            }
            overlaps = true;
        }
    }
    overlaps && prefix < 32 && {
        let upper = bits | (1 << (31 - prefix));
        v4_within_special(bits, prefix + 1) && v4_within_special(upper, prefix + 1)
    }
}

/// The IPv6 counterpart of [`v4_within_special`].
fn v6_within_special(bits: u128, prefix: u8) -> bool {
    let mut overlaps = false;
    for &(block, len, kind) in SPECIAL_V6 {
        if same_prefix_v6(bits, block.to_bits(), len.min(prefix)) {
            if len <= prefix {
                return match kind {
                    V6Block::Whole => true,
                    V6Block::EmbedsV4At(start) => {
                        let o = Ipv6Addr::from_bits(bits).octets();
                        let at = usize::from(start / 8);
                        let v4 = u32::from_be_bytes([o[at], o[at + 1], o[at + 2], o[at + 3]]);
                        v4_within_special(v4, prefix.saturating_sub(start).min(32))
                    }
                };
            }
            overlaps = true;
        }
    }
    overlaps && prefix < 128 && {
        let upper = bits | (1 << (127 - prefix));
        v6_within_special(bits, prefix + 1) && v6_within_special(upper, prefix + 1)
    }
}

fn same_prefix_v4(a: u32, b: u32, len: u8) -> bool {
    // A shift by the full width (len 0) compares nothing.
    (a ^ b).checked_shr(32 - u32::from(len)).unwrap_or(0) == 0
}

fn same_prefix_v6(a: u128, b: u128, len: u8) -> bool {
    (a ^ b).checked_shr(128 - u32::from(len)).unwrap_or(0) == 0
}

fn width(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// `addr` with the bits after `prefix` cleared.
fn network_of(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let host = u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from_bits(a.to_bits() & !host))
        }
        IpAddr::V6(a) => {
            let host = u128::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from_bits(a.to_bits() & !host))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn cidr(s: &str) -> Cidr {
        Cidr::parse(s).unwrap()
    }

    #[test]
    fn canonical_forms_are_the_embedded_ipv4_address() {
        for (input, expected) in [
            ("::ffff:192.0.2.2", "192.0.2.2"),
            ("::ffff:8.8.8.8", "8.8.8.8"),
            ("::192.0.2.2", "192.0.2.2"),
            ("::0.0.0.2", "0.0.0.2"),
            ("64:ff9b::192.0.2.2", "192.0.2.2"),
            ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
            ("10.0.0.1", "10.0.0.1"),
            // Loopback and unspecified are not compatible addresses.
            ("::1", "::1"),
            ("::", "::"),
            // Other IPv6, including near misses of the three prefixes.
            ("fd00::2", "fd00::2"),
            ("::1:0:c000:202", "::1:0:c000:202"),
            ("::fffe:c000:202", "::fffe:c000:202"),
            ("64:ff9b:1::c000:202", "64:ff9b:1::c000:202"),
            ("64:ff9b::1:c000:202", "64:ff9b::1:c000:202"),
            ("2002:c000:202::", "2002:c000:202::"),
        ] {
            assert_eq!(canonical(ip(input)), ip(expected), "{input}");
        }
        // Canonical is a fixed point.
        for a in ["::ffff:1.2.3.4", "64:ff9b::1.2.3.4", "::1", "fe80::1"] {
            assert_eq!(canonical(canonical(ip(a))), canonical(ip(a)), "{a}");
        }
    }

    #[test]
    fn cidrs_parse_and_display() {
        assert_eq!(cidr("10.0.0.0/8").to_string(), "10.0.0.0/8");
        assert_eq!(cidr("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert_eq!(cidr("1.2.3.4/32").to_string(), "1.2.3.4/32");
        assert_eq!(cidr("2001:DB8::/32").to_string(), "2001:db8::/32");
        assert_eq!(cidr("::/0").prefix(), 0);
        // IPv4-mapped networks are IPv4 networks.
        assert_eq!(cidr("::ffff:10.0.0.0/104"), cidr("10.0.0.0/8"));
        assert_eq!(cidr("::ffff:0:0/96"), cidr("0.0.0.0/0"));
        // So are NAT64 and compatible networks that hold no `::` or `::1`.
        assert_eq!(cidr("64:ff9b::a00:0/104"), cidr("10.0.0.0/8"));
        assert_eq!(cidr("64:ff9b::c000:202/128"), cidr("192.0.2.2/32"));
        assert_eq!(cidr("::a00:0/104"), cidr("10.0.0.0/8"));
        assert_eq!(cidr("::/96").to_string(), "::/96");
        assert_eq!(cidr("::/127").to_string(), "::/127");
    }

    #[test]
    fn bad_cidrs_name_the_problem() {
        let err = |s: &str| Cidr::parse(s).unwrap_err().to_string();
        let msg = err("10.0.0.1/8");
        assert!(
            msg.contains("'10.0.0.1/8'") && msg.contains("host bits"),
            "{msg}"
        );
        assert!(msg.contains("the network is 10.0.0.0/8"), "{msg}");
        assert!(err("2001:db8::1/32").contains("2001:db8::/32"));
        assert!(err("10.0.0.0/33").contains("from 0 to 32"));
        assert!(err("fd00::/129").contains("from 0 to 128"));
        assert!(err("10.0.0.0/").contains("prefix length ''"));
        assert!(err("10.0.0.0/+8").contains("'+8'"));
        assert!(err("10.0.0.0/x").contains("'x'"));
        assert!(err("10.0.0/8").contains("not an IP address"));
        assert!(err("010.0.0.0/8").contains("not an IP address"));
        assert!(err("example.com/8").contains("not an IP address"));
        assert!(err("10.0.0.0").contains("no '/PREFIX'"));
        assert_eq!(Cidr::new(ip("10.0.0.1"), 8), None);
        assert_eq!(Cidr::new(ip("10.0.0.0"), 33), None);
    }

    #[test]
    fn contains_respects_prefix_and_family() {
        let net = cidr("10.0.0.0/8");
        assert!(net.contains(ip("10.255.0.1")));
        assert!(!net.contains(ip("11.0.0.0")));
        assert!(net.contains(ip("::ffff:10.1.2.3")), "mapped counts as IPv4");
        assert!(net.contains(ip("::a01:203")), "compatible counts as IPv4");
        assert!(net.contains(ip("64:ff9b::a01:203")), "NAT64 counts as IPv4");
        assert!(!net.contains(ip("64:ff9c::a01:203")), "not NAT64");
        assert!(cidr("0.0.0.0/0").contains(ip("8.8.8.8")));
        assert!(!cidr("0.0.0.0/0").contains(ip("2001:db8::1")));
        assert!(!cidr("::/0").contains(ip("8.8.8.8")));
        assert!(
            !cidr("::/0").contains(ip("::ffff:8.8.8.8")),
            "mapped is IPv4"
        );
        assert!(cidr("2001:db8::/32").contains(ip("2001:db8:ffff::1")));
        assert!(!cidr("2001:db8::/32").contains(ip("2001:db9::")));
        assert!(cidr("1.2.3.4/32").contains(ip("1.2.3.4")));
        assert!(!cidr("1.2.3.4/32").contains(ip("1.2.3.5")));
    }

    #[test]
    fn every_special_ipv4_block_is_special() {
        for addr in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "169.254.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.251",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(is_special(ip(addr)), "{addr}");
        }
        for addr in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.1",
            "192.169.0.1",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "140.82.112.3",
        ] {
            assert!(!is_special(ip(addr)), "{addr}");
        }
    }

    #[test]
    fn every_special_ipv6_block_is_special() {
        for addr in [
            "::",
            "::1",
            "::a00:1", // IPv4-compatible
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "100::1",
            "64:ff9b:1::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "64:ff9b::10.0.0.1",
            "64:ff9b::a9fe:a9fe", // 169.254.169.254
            "2002:7f00:1::",      // 6to4 of 127.0.0.1
        ] {
            assert!(is_special(ip(addr)), "{addr}");
        }
        for addr in [
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
            "fe00::1",
            "2001:db9::1",
        ] {
            assert!(!is_special(ip(addr)), "{addr}");
        }
    }

    #[test]
    fn a_network_is_special_only_when_all_of_it_is() {
        for net in [
            "10.0.0.0/8",
            "10.1.0.0/16",
            "127.0.0.1/32",
            "169.254.169.254/32",
            "192.168.0.0/16",
            // Two adjacent blocks together: 224/4 and 240/4.
            "224.0.0.0/3",
            "::1/128",
            "fc00::/7",
            "fd00::/8",
            "::ffff:10.0.0.0/104",
            "64:ff9b::a00:0/104", // NAT64 of 10/8
        ] {
            assert!(cidr(net).is_special(), "{net}");
        }
        for net in [
            "0.0.0.0/0",
            "8.0.0.0/5",
            "10.0.0.0/7",
            "128.0.0.0/1",
            "169.254.0.0/15",
            "::/0",
            "::ffff:0:0/96",
            "64:ff9b::/96",
            "2002::/16",
            "fc00::/6",
        ] {
            assert!(!cidr(net).is_special(), "{net}");
        }
    }
}
