//! The session's scheduler: its reads run here, on the session's own timers, with public inputs
//! only (the project, the chain, the relayers' heartbeats and `/v1/info`). The write path reads
//! nothing from the ledger or the issuer itself: it consumes what the tail listed and what the
//! refills stored (docs/PROTOCOL.md §8.2).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use privsvc_ledger::LedgerReader;
use tokio::sync::{watch, Mutex};

use crate::cache::EntityCache;
use crate::error::PrivsvcError;
use crate::rng::ClientRng;

/// What a scheduled task (the tail, the scans) shares with those who wait for it: how many runs
/// started, and how many finished (runs follow one another, so run n is the n-th to start and
/// to finish).
#[derive(Debug)]
pub(crate) struct Ticks {
    started: AtomicU64,
    done: watch::Sender<u64>,
}

impl Ticks {
    pub(crate) fn new() -> Self {
        Ticks {
            started: AtomicU64::new(0),
            done: watch::Sender::new(0),
        }
    }

    /// A receiver that sees every run from now on.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.done.subscribe()
    }

    /// Waits, at most `bound`, until a run that started after this call has finished: its
    /// listing was made after everything the caller did before calling. A run already under
    /// way when this is called may have listed at an older head, so it does not count.
    pub(crate) async fn next_started_after_now(&self, bound: Duration) {
        let mut done = self.done.subscribe();
        let want = self.started.load(Ordering::SeqCst).saturating_add(1);
        let _ = privsvc_rt::timeout(bound, done.wait_for(|n| *n >= want)).await;
    }

    /// How many runs have started so far.
    pub(crate) fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    pub(crate) fn starting(&self) {
        self.started.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn ran(&self) {
        self.done.send_modify(|n| *n = n.saturating_add(1));
    }
}

/// How the session lists its project.
#[derive(Clone)]
pub(crate) struct Lister {
    pub(crate) reader: Arc<dyn LedgerReader>,
    pub(crate) project: String,
    /// The session counts rarity, so it needs every attribute: its attribute listing
    /// ([`Lister::list_attributes`]) runs at its first tail. Until then listings select only
    /// `tag`.
    pub(crate) with_attributes: bool,
}

impl Lister {
    /// Brings the cached listing up to date: lists only the records created after the last
    /// listed block (everything the first time), at one pinned block, and drops what expired;
    /// then reads the newest block's timestamp (the chain's time, from which the envelope's
    /// `hour` is taken). Lists as the cached listing was made: every attribute once the
    /// session's attribute listing ran, else only `tag`. Returns how many records it listed.
    pub(crate) async fn update(&self, cache: &mut EntityCache) -> Result<usize, PrivsvcError> {
        let with_attributes = cache.with_attributes;
        let mut listed = 0;
        let after = cache.block;
        let block = crate::read::list_since(
            &self.reader,
            &self.project,
            after,
            with_attributes,
            |page| {
                listed += page.len();
                cache.add(page);
            },
        )
        .await?;
        cache.finish_listing(block);
        if let Some(t) = self.reader.head_timestamp().await? {
            cache.head_time = Some((t, privsvc_rt::Instant::now()));
        }
        Ok(listed)
    }

    /// The session's attribute listing: when the session counts rarity and has not made it
    /// yet, lists the project again from the start with every attribute (what the device
    /// knows of the user's records, its verified batches and covers are kept; the next scan
    /// opens the listed tags again). Runs on the tail only, after the session's first scan,
    /// never because the app asked. Returns whether it listed.
    pub(crate) async fn list_attributes(
        &self,
        cache: &mut EntityCache,
    ) -> Result<bool, PrivsvcError> {
        if !self.with_attributes || cache.with_attributes {
            return Ok(false);
        }
        cache.reset();
        cache.with_attributes = true;
        self.update(cache).await?;
        Ok(true)
    }
}

/// The tail: every `interval` (a random wait in the range each time), an incremental listing
/// of the project, whether or not a write is pending. Runs until aborted.
pub(crate) async fn run_tail(
    lister: Lister,
    cache: Arc<Mutex<EntityCache>>,
    tail: Arc<Ticks>,
    rng: Arc<ClientRng>,
    interval: (Duration, Duration),
) {
    let mut next = privsvc_rt::Instant::now() + rng.between(interval);
    loop {
        rng.tick(&mut next, interval).await;
        tail.starting();
        {
            let mut cache = cache.lock().await;
            let listed = match lister.list_attributes(&mut cache).await {
                Ok(true) => Ok(()),
                Ok(false) => lister.update(&mut cache).await.map(drop),
                Err(e) => Err(e),
            };
            if let Err(e) = listed {
                tracing::warn!(error = %e, "the session's tail could not list the project");
            }
        }
        tail.ran();
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_ends_with_the_first_tail_that_started_after_it_not_one_under_way() {
        let tail = Arc::new(Ticks::new());
        tail.starting(); // tail 1 is listing when the app asks
        let waiter = {
            let tail = tail.clone();
            tokio::spawn(async move {
                tail.next_started_after_now(Duration::from_secs(10)).await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        tail.ran(); // tail 1 ends: its listing may predate the call
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !waiter.is_finished(),
            "a tail under way at the call ended the wait"
        );
        tail.starting();
        tail.ran(); // tail 2 started after the call
        tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("the next tail ends the wait")
            .unwrap();
    }
}
