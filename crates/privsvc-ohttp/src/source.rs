//! What a per-address rate limit counts a client as: an IPv4 address, or the /64 prefix of an
//! IPv6 address. One host usually holds a whole /64 (2^64 addresses), so counting IPv6
//! addresses one by one would give it 2^64 separate limits. IPv4-mapped IPv6 addresses
//! (`::ffff:a.b.c.d`, what a dual-stack listener sees for IPv4 clients) count as their IPv4
//! address: as /64 prefixes they would all share one count.
//!
//! Used by the OHTTP relay's limit and by the relayer's limits, so that every limit of the
//! service keys sources the same way.

use std::net::IpAddr;

/// The rate-limit key of a source address (see the module docs). It has no `Debug` or
/// `Display`: it holds (part of) a client address and must never be logged.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceKey(Key);

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    V4(u32),
    V6Prefix(u64),
}

impl SourceKey {
    /// The key `ip` is counted under.
    ///
    /// ```
    /// use privsvc_ohttp::SourceKey;
    /// let key = |s: &str| SourceKey::of(s.parse().unwrap());
    /// assert!(key("2001:db8:1:2::1") == key("2001:db8:1:2:ffff:ffff:ffff:ffff"));
    /// assert!(key("2001:db8:1:2::1") != key("2001:db8:1:3::1"));
    /// assert!(key("192.0.2.1") == key("::ffff:192.0.2.1"));
    /// assert!(key("192.0.2.1") != key("192.0.2.2"));
    /// ```
    pub fn of(ip: IpAddr) -> Self {
        SourceKey(match ip {
            IpAddr::V4(v4) => Key::V4(u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Key::V4(u32::from(v4)),
                None => Key::V6Prefix((u128::from(v6) >> 64) as u64),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) -> bool {
        SourceKey::of(a.parse().unwrap()) == SourceKey::of(b.parse().unwrap())
    }

    #[test]
    fn ipv6_counts_per_slash_64_and_ipv4_per_address() {
        assert!(same("2001:db8:1:2::1", "2001:db8:1:2:ffff::9"));
        assert!(same("2001:db8:1:2::", "2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert!(!same("2001:db8:1:2::1", "2001:db8:1:3::1"));
        assert!(!same("2001:db8:1:2::1", "2001:db9:1:2::1"));
        assert!(same("10.0.0.1", "::ffff:10.0.0.1"));
        assert!(!same("10.0.0.1", "10.0.0.2"));
        // Two IPv4 clients seen through a dual-stack listener are two sources, not one /64.
        assert!(!same("::ffff:10.0.0.1", "::ffff:10.0.0.2"));
        // An IPv4 address and an IPv6 prefix with the same bits are different sources.
        assert!(!same("0.0.0.1", "0:0:0:1::"));
    }
}
