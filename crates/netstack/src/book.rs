//! The synthetic address book: which name each synthetic address stands for, and
//! where that name really is.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use vg_policy::network::HostName;

use crate::addr;

/// What a synthetic address stands for.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub name: HostName,
    /// The real addresses, as last resolved on the host (or pinned).
    pub addrs: Vec<IpAddr>,
    /// The addresses came from `--add-host`.
    pub pinned: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Book {
    by_name: HashMap<HostName, Ipv4Addr>,
    by_addr: HashMap<Ipv4Addr, Entry>,
    next: u32,
}

impl Book {
    /// The synthetic address for `name`, updated to `addrs`; a name keeps its address
    /// for the whole session. `None` once the pool (about 130,000 names) is used up.
    pub fn assign(
        &mut self,
        name: &HostName,
        addrs: Vec<IpAddr>,
        pinned: bool,
    ) -> Option<Ipv4Addr> {
        let synthetic = match self.by_name.get(name) {
            Some(&a) => a,
            None => {
                let a = addr::synthetic(self.next)?;
                self.next += 1;
                self.by_name.insert(name.clone(), a);
                a
            }
        };
        self.by_addr.insert(
            synthetic,
            Entry {
                name: name.clone(),
                addrs,
                pinned,
            },
        );
        Some(synthetic)
    }

    pub fn lookup(&self, synthetic: Ipv4Addr) -> Option<&Entry> {
        self.by_addr.get(&synthetic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stable_address_per_name() {
        let mut book = Book::default();
        let a = HostName::parse("a.test").unwrap();
        let b = HostName::parse("b.test").unwrap();
        let first = book
            .assign(&a, vec!["192.0.2.1".parse().unwrap()], false)
            .unwrap();
        let other = book.assign(&b, vec![], true).unwrap();
        assert_ne!(first, other);
        let again = book
            .assign(&a, vec!["192.0.2.2".parse().unwrap()], false)
            .unwrap();
        assert_eq!(first, again);
        let entry = book.lookup(first).unwrap();
        assert_eq!(entry.name, a);
        assert_eq!(entry.addrs, vec!["192.0.2.2".parse::<IpAddr>().unwrap()]);
        assert!(book.lookup(Ipv4Addr::new(198, 18, 9, 9)).is_none());
    }
}
