//! Per-source rate limits of the relayer: submissions when tokens are off
//! (`RATE_LIMIT_PER_MIN`) and the issuer routes (`ISSUER_RATE_LIMIT_PER_MIN`). In memory only:
//! the addresses are never persisted or logged, and a window's entries are dropped when it
//! ends.
//!
//! A source is an IPv4 address or the /64 prefix of an IPv6 address
//! ([`privsvc_ohttp::SourceKey`], the OHTTP relay's keying): one host usually holds a whole
//! /64, and counting its 2^64 addresses one by one would give it 2^64 limits.
//!
//! A request inside `POST /v1/ohttp` is counted against the address that posted it, unless
//! that address is a configured OHTTP relay (`OHTTP_RELAY_IPS`), which limits its own clients
//! per client address (`privsvc_ohttp::RelayConfig::rate_limit_per_min`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use privsvc_ohttp::SourceKey;

/// Fixed one-minute windows per source (IPv4 address, or IPv6 /64).
pub struct RateLimiter {
    per_min: u32,
    state: Mutex<(u64, HashMap<SourceKey, u32>)>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The counts are keyed by client addresses: never printed.
        f.debug_struct("RateLimiter")
            .field("per_min", &self.per_min)
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// At most `per_min` requests a minute per source.
    pub fn new(per_min: u32) -> Self {
        Self {
            per_min,
            state: Mutex::new((0, HashMap::new())),
        }
    }

    /// Count one request from `addr` at `now_ms`; false when its source is over the limit.
    pub fn allow(&self, addr: IpAddr, now_ms: u64) -> bool {
        let window = now_ms / 60_000;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.0 != window {
            st.0 = window;
            st.1.clear();
        }
        let n = st.1.entry(SourceKey::of(addr)).or_insert(0);
        if *n >= self.per_min {
            return false;
        }
        *n += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_address_per_minute() {
        let rl = RateLimiter::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(rl.allow(a, 1000));
        assert!(rl.allow(a, 2000));
        assert!(!rl.allow(a, 3000));
        assert!(rl.allow(b, 3000));
        assert!(rl.allow(a, 61_000));
    }

    #[test]
    fn an_ipv6_slash_64_is_one_source() {
        let rl = RateLimiter::new(3);
        // A host walking through the addresses of its /64 gets three requests, not 2^64 x 3.
        let mut allowed = 0;
        for i in 0..1_000u32 {
            let ip: IpAddr = format!("2001:db8:7:9:{:x}:{:x}::1", i >> 16, i & 0xffff)
                .parse()
                .unwrap();
            allowed += usize::from(rl.allow(ip, 1_000));
        }
        assert_eq!(allowed, 3);
        // The next /64 is another source; so is each IPv4 client of a dual-stack listener.
        assert!(rl.allow("2001:db8:7:a::1".parse().unwrap(), 1_000));
        assert!(rl.allow("::ffff:10.0.0.1".parse().unwrap(), 1_000));
        assert!(rl.allow("::ffff:10.0.0.2".parse().unwrap(), 1_000));
    }
}
