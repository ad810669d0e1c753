//! Per-source-address rate limit for submissions when tokens are off. In memory only: the
//! addresses are never persisted or logged, and a window's entries are dropped when it ends.
//!
//! A submission inside `POST /v1/ohttp` is counted against the address that posted it, unless
//! that address is a configured OHTTP relay (`OHTTP_RELAY_IPS`), which limits its own clients
//! per client address (`privsvc_ohttp::RelayConfig::rate_limit_per_min`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// Fixed one-minute windows per address.
#[derive(Debug)]
pub struct RateLimiter {
    per_min: u32,
    state: Mutex<(u64, HashMap<IpAddr, u32>)>,
}

impl RateLimiter {
    /// At most `per_min` requests a minute per address.
    pub fn new(per_min: u32) -> Self {
        Self {
            per_min,
            state: Mutex::new((0, HashMap::new())),
        }
    }

    /// Count one request from `addr` at `now_ms`; false when over the limit.
    pub fn allow(&self, addr: IpAddr, now_ms: u64) -> bool {
        let window = now_ms / 60_000;
        let mut st = self.state.lock().expect("rate limiter lock");
        if st.0 != window {
            st.0 = window;
            st.1.clear();
        }
        let n = st.1.entry(addr).or_insert(0);
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
}
