//! The session's scheduler: its reads run here, on the session's own timers, with public inputs
//! only (the project, the chain, the relayers' heartbeats and `/v1/info`). The write path reads
//! nothing from the ledger or the issuer itself: it consumes what the tail listed and what the
//! refills stored (DESIGN 10, the transcript rule).

use std::sync::Arc;
use std::time::Duration;

use privsvc_ledger::LedgerReader;
use tokio::sync::{watch, Mutex};

use crate::cache::EntityCache;
use crate::error::PrivsvcError;
use crate::rng::ClientRng;

/// What the tail shares with those who wait for it: how many tails ran.
#[derive(Debug)]
pub(crate) struct Tail {
    done: watch::Sender<u64>,
}

impl Tail {
    pub(crate) fn new() -> Self {
        Tail {
            done: watch::Sender::new(0),
        }
    }

    /// A receiver that sees every tail from now on.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.done.subscribe()
    }

    fn ran(&self) {
        self.done.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// How the session lists its project.
#[derive(Clone)]
pub(crate) struct Lister {
    pub(crate) reader: Arc<dyn LedgerReader>,
    pub(crate) project: String,
    /// List every attribute (the rarity check needs them), not only `tag`.
    pub(crate) with_attributes: bool,
}

impl Lister {
    /// Brings the cached listing up to date: lists only the records created after the last
    /// listed block (everything the first time), at one pinned block, and drops what expired.
    /// Returns how many records it listed.
    pub(crate) async fn update(&self, cache: &mut EntityCache) -> Result<usize, PrivsvcError> {
        let with_attributes = self.with_attributes || cache.with_attributes;
        if cache.block.is_some() && !cache.with_attributes && with_attributes {
            cache.reset();
        }
        cache.with_attributes = with_attributes;
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
        Ok(listed)
    }
}

/// The tail: every `interval` (a random wait in the range each time), an incremental listing
/// of the project, whether or not a write is pending. Runs until aborted.
pub(crate) async fn run_tail(
    lister: Lister,
    cache: Arc<Mutex<EntityCache>>,
    tail: Arc<Tail>,
    rng: Arc<ClientRng>,
    interval: (Duration, Duration),
) {
    loop {
        privsvc_rt::sleep_background(rng.between(interval)).await;
        {
            let mut cache = cache.lock().await;
            if let Err(e) = lister.update(&mut cache).await {
                tracing::warn!(error = %e, "the session's tail could not list the project");
            }
        }
        tail.ran();
    }
}
