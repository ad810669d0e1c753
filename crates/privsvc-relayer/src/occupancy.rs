//! How many records the relayer holds: accepted and not finished (queued, in a batch, being
//! stored). The intake reserves a place for each submission up to `QUEUE_CAPACITY`; the batcher
//! frees it when the record is written or failed; the health record and `/metrics` read it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The count of records accepted and not finished.
#[derive(Debug, Default)]
pub struct Occupancy(AtomicUsize);

impl Occupancy {
    /// Starts at `n` (the records a restart takes back).
    pub fn new(n: usize) -> Self {
        Occupancy(AtomicUsize::new(n))
    }

    /// Reserves a place when fewer than `capacity` are held; false (nothing reserved) when full.
    pub fn reserve(&self, capacity: usize) -> bool {
        let before = self.0.fetch_add(1, Ordering::SeqCst);
        if before >= capacity {
            self.release(1);
            return false;
        }
        true
    }

    /// Frees `n` places (records that left: written, failed, or never stored).
    pub fn release(&self, n: usize) {
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                Some(v.saturating_sub(n))
            });
    }

    /// Records held now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}
