//! The client's own randomness: the operating system's, or a seeded generator for reproducible
//! tests (two clients with the same seed make the same choices).

use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What a random stream is for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Purpose {
    /// Delays, relayer choice, the status polls after `written`.
    Write = 1,
    /// The tail's waits.
    Tail = 2,
    /// The refills' waits.
    Refill = 3,
    /// Scans: the order of a burst's reads.
    Scan = 4,
    /// Token choice.
    Tokens = 5,
    /// The scans' timer (apart from the scans' own draws, which depend on what they find).
    ScanTimer = 6,
    /// The cover stream's slots and dummies.
    Cover = 7,
}

/// A random source shared by a client's tasks.
#[derive(Debug)]
pub(crate) struct ClientRng(Mutex<StdRng>);

impl ClientRng {
    /// Stream `purpose` of `seed`, or a generator seeded by the operating system. Each purpose
    /// (writes, the tail, refills, scans) has a stream of its own, so that one task's draws
    /// never shift another's: two clients with the same seed make the same choices.
    pub(crate) fn new(seed: Option<u64>, purpose: Purpose) -> Self {
        ClientRng(Mutex::new(match seed {
            Some(s) => {
                StdRng::seed_from_u64(s ^ (purpose as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
            }
            None => StdRng::from_entropy(),
        }))
    }

    /// Runs `f` with the generator.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Sleeps (a timer that keeps no process alive) until `*next`, then moves `*next` on by a
    /// uniform wait in `interval`. The moments of a timer driven this way follow from its
    /// randomness alone: how long each run takes does not shift the later ones.
    pub(crate) async fn tick(
        &self,
        next: &mut privsvc_rt::Instant,
        interval: (Duration, Duration),
    ) {
        let now = privsvc_rt::Instant::now();
        if *next > now {
            privsvc_rt::sleep_background(*next - now).await;
        }
        *next += self.between(interval);
    }

    /// A uniform duration in `[low, high]`.
    pub(crate) fn between(&self, (low, high): (Duration, Duration)) -> Duration {
        if high <= low {
            return low;
        }
        let span = (high - low).as_nanos().min(u128::from(u64::MAX)) as u64;
        low + Duration::from_nanos(self.with(|r| r.gen_range(0..=span)))
    }
}
