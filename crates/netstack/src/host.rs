//! This machine's own IP addresses, read from procfs (`/proc/net/fib_trie` for IPv4
//! local routes, `/proc/net/if_inet6` for IPv6) when the mediator starts. They are
//! kept and looked up in canonical form ([`OwnAddresses`]), so `::ffff:192.0.2.2` is
//! this machine too when `192.0.2.2` is.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vg_policy::network::OwnAddresses;

pub(crate) fn addresses() -> OwnAddresses {
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string("/proc/net/fib_trie") {
        out.extend(local_v4(&text));
    }
    if let Ok(text) = std::fs::read_to_string("/proc/net/if_inet6") {
        out.extend(local_v6(&text));
    }
    out.into_iter().collect()
}

/// In `fib_trie`, each local address is a `|-- A.B.C.D` line followed by
/// `/32 host LOCAL`.
fn local_v4(text: &str) -> Vec<IpAddr> {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[1].contains("/32 host LOCAL"))
        .filter_map(|w| {
            w[0].trim()
                .trim_start_matches("|--")
                .trim()
                .parse::<Ipv4Addr>()
                .ok()
        })
        .map(IpAddr::V4)
        .collect()
}

/// `if_inet6`: 32 hex digits of address, then index, prefix, scope, flags, name.
fn local_v6(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|hex| u128::from_str_radix(hex, 16).ok())
        .map(|n| IpAddr::V6(Ipv6Addr::from(n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_local_addresses() {
        let trie = "Local:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 10.1.2.3\n        /32 host LOCAL\n     |-- 10.1.2.255\n        /32 link BROADCAST\n";
        assert_eq!(local_v4(trie), vec![IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3))]);
        let inet6 = "00000000000000000000000000000001 01 80 10 80       lo\n";
        assert_eq!(local_v6(inet6), vec![IpAddr::V6(Ipv6Addr::LOCALHOST)]);
        // The real files parse on this machine (loopback at least).
        assert!(addresses().contains(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert!(addresses().contains("::ffff:127.0.0.1".parse().unwrap()));
    }
}
