//! The session's scheduler: its reads run here, on the session's own timers, with public inputs
//! only (the project, the chain, the relayers' heartbeats and `/v1/info`). The write path reads
//! nothing from the ledger or the issuer itself: it consumes what the tail listed and what the
//! refills stored (docs/PROTOCOL.md §8.2).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::B256;
use privsvc_ledger::LedgerReader;
use privsvc_vault::{RecordRef, Tag, Vault};
use tokio::sync::{watch, Mutex};

use crate::cache::{EntityCache, KnownClass, KnownClasses, Listed};
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

/// Rows whose tags are opened in one call to the vault, at most (when that many pages already
/// arrived): a call to a worker's vault costs a message each way.
const OPEN_AT_ONCE: usize = 4_096;
/// Batches of tags at the vault at once, at most: while it opens one, the next is staged and
/// sent (a worker's vault is otherwise idle while the page stages, and the page while it opens).
const OPENINGS_IN_FLIGHT: usize = 2;

/// How the session lists its project.
#[derive(Clone)]
pub(crate) struct Lister {
    pub(crate) reader: Arc<dyn LedgerReader>,
    /// Opens the listed tags as the pages arrive.
    pub(crate) vault: Arc<dyn Vault>,
    pub(crate) project: String,
    /// The session counts rarity, so it needs every attribute: its attribute listing
    /// ([`Lister::list_attributes`]) runs at its first tail. Until then listings select only
    /// `tag`.
    pub(crate) with_attributes: bool,
    /// The first listing, started before the session ([`crate::FirstListing`]).
    pub(crate) first: Option<crate::FirstListing>,
}

impl Lister {
    /// Brings the cached listing up to date: lists only the records created after the last
    /// listed block (everything the first time), at one pinned block, and drops what expired;
    /// reads the newest block's timestamp alongside (the chain's time, from which the
    /// envelope's `hour` is taken). Lists as the cached listing was made: every attribute once
    /// the session's attribute listing ran, else only `tag`. The tags of each page are opened as
    /// it arrives, while the next pages are on their way; the records that are not the user's
    /// become counts at once. Returns how many records it listed.
    pub(crate) async fn update(&self, cache: &mut EntityCache) -> Result<usize, PrivsvcError> {
        self.list_and_finish(cache, None).await
    }

    /// One listing ([`Lister::list_pages`]) and the chain's time, read while the pages are on
    /// their way (one round trip less than reading it after); then the listing ended: its
    /// counts kept and the expired dropped when it completed, its counts forgotten when it
    /// failed.
    async fn list_and_finish(
        &self,
        cache: &mut EntityCache,
        known: Option<&KnownClasses>,
    ) -> Result<usize, PrivsvcError> {
        // The time is kept with the instant it arrived: `chain_now` adds what elapsed since.
        let head_time = async {
            let t = self.reader.head_timestamp().await;
            (t, privsvc_rt::Instant::now())
        };
        let (listed, (head_time, read_at)) =
            futures::join!(self.list_pages(cache, known), head_time);
        if listed.is_err() {
            cache.abandon_listing();
        }
        let (listed, block) = listed?;
        cache.finish_listing(block);
        if let Some(t) = head_time? {
            cache.head_time = Some((t, read_at));
        }
        Ok(listed)
    }

    /// The pages of one listing placed in `cache`: how many records, and the pinned block.
    /// With `known` (a listing from the start), the tags of the records classified before are
    /// not opened again. Up to [`OPENINGS_IN_FLIGHT`] batches of tags are at the vault at once:
    /// the next pages are staged while the vault opens a batch, so that neither waits for the
    /// other.
    async fn list_pages(
        &self,
        cache: &mut EntityCache,
        known: Option<&KnownClasses>,
    ) -> Result<(usize, u64), PrivsvcError> {
        use futures::future::{select, Either};
        use futures::StreamExt;

        // The listing started before the session, for a first listing from the start (taken
        // once: a session that resumed its cache drops it).
        let early = self
            .first
            .as_ref()
            .and_then(|f| f.take(&self.project))
            .filter(|_| cache.block.is_none() && !cache.with_attributes);
        let mut pages = match early {
            Some(pages) => pages,
            None => {
                crate::read::start_listing(
                    &self.reader,
                    &self.project,
                    cache.block,
                    cache.with_attributes,
                )
                .await?
            }
        };
        let mut listed = 0;
        let mut openings = futures::stream::FuturesOrdered::new();
        let mut ended = false;
        loop {
            let take_pages = !ended && openings.len() < OPENINGS_IN_FLIGHT;
            let event = match (take_pages, openings.is_empty()) {
                (true, true) => Either::Left(pages.next().await),
                (true, false) => {
                    // Both are cancel-safe: a page or an opening not taken now is taken later.
                    let page = std::pin::pin!(pages.next());
                    let opened = std::pin::pin!(openings.next());
                    match select(page, opened).await {
                        Either::Left((page, _)) => Either::Left(page),
                        Either::Right((opened, _)) => Either::Right(opened),
                    }
                }
                (false, false) => Either::Right(openings.next().await),
                (false, true) => break,
            };
            match event {
                Either::Left(None) => ended = true,
                Either::Left(Some(page)) => {
                    let mut rows = cache.stage(page?);
                    // The pages that arrived meanwhile join it: one opening for all of them.
                    while rows.len() < OPEN_AT_ONCE {
                        match pages.ready() {
                            Some(page) => rows.extend(cache.stage(page?)),
                            None => break,
                        }
                    }
                    openings.push_back(self.open_rows(rows, known));
                }
                Either::Right(Some(opened)) => listed += place_opened(cache, opened),
                Either::Right(None) => {}
            }
        }
        Ok((listed, pages.block))
    }

    /// Opens the tags of `rows` (those `known` does not classify already); the future owns what
    /// it needs, so that several can be at the vault while the listing goes on.
    fn open_rows(
        &self,
        rows: Vec<(B256, Listed)>,
        known: Option<&KnownClasses>,
    ) -> impl std::future::Future<Output = OpenedRows> {
        let mut opened: Vec<Option<RecordRef>> = vec![None; rows.len()];
        let mut to_open = Vec::new();
        let mut tags: Vec<Tag> = Vec::new();
        for (i, (key, e)) in rows.iter().enumerate() {
            let Some(tag) = e.tag else { continue };
            match known.map(|k| k.class_of(key, e.created_at)) {
                Some(KnownClass::Mine(r)) => opened[i] = Some(r),
                Some(KnownClass::Other) => {}
                Some(KnownClass::Unknown) | None => {
                    to_open.push(i);
                    tags.push(tag);
                }
            }
        }
        let vault = self.vault.clone();
        async move {
            let answer = if tags.is_empty() {
                Ok(Vec::new())
            } else {
                vault.open_tags(&tags).await
            };
            OpenedRows {
                rows,
                opened,
                to_open,
                answer,
            }
        }
    }

    /// The session's attribute listing: when the session counts rarity and has not made it
    /// yet, lists the project again from the start with every attribute (what the device
    /// knows of the user's records, its verified batches and covers are kept, and the tags it
    /// classified are not opened again). It is listed into a cache of its own and put in
    /// place of the session's listing when complete: the session's cache is not held while it
    /// runs (a listing of a million records with every attribute takes many seconds), so the
    /// app's reads, writes and the scheduled scans go on meanwhile. Runs on the tail only,
    /// after the session's first scan, never because the app asked. Returns whether it listed.
    pub(crate) async fn list_attributes(
        &self,
        cache: &Mutex<EntityCache>,
    ) -> Result<bool, PrivsvcError> {
        let known = {
            let cache = cache.lock().await;
            if !self.with_attributes || cache.with_attributes {
                return Ok(false);
            }
            cache.known_classes()
        };
        let mut listing = EntityCache::for_attribute_listing();
        self.list_and_finish(&mut listing, Some(&known)).await?;
        cache.lock().await.adopt_listing(listing);
        Ok(true)
    }
}

/// A batch of listed rows with the vault's answer for the tags it was asked to open.
struct OpenedRows {
    rows: Vec<(B256, Listed)>,
    /// What is known without the vault (the classes of a previous listing).
    opened: Vec<Option<RecordRef>>,
    /// The rows whose tags the vault was asked to open, in the order asked.
    to_open: Vec<usize>,
    answer: Result<Vec<Option<RecordRef>>, privsvc_vault::VaultError>,
}

/// Places an opened batch in `cache`; when the vault could not open its tags, they wait for the
/// next scan to (nothing is lost). Returns how many records it placed.
fn place_opened(cache: &mut EntityCache, batch: OpenedRows) -> usize {
    let OpenedRows {
        rows,
        mut opened,
        to_open,
        answer,
    } = batch;
    if !to_open.is_empty() {
        match answer {
            Ok(refs) if refs.len() == to_open.len() => {
                cache.note_tags_opened(to_open.len());
                for (i, r) in to_open.into_iter().zip(refs) {
                    opened[i] = r;
                }
            }
            Ok(_) => {
                tracing::warn!(
                    "the vault answered a different number of tags; the scan opens them"
                );
                return cache.place(rows, None);
            }
            Err(e) => {
                tracing::warn!(error = %e, "the vault could not open the listed tags; the scan opens them");
                return cache.place(rows, None);
            }
        }
    }
    cache.place(rows, Some(&opened))
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
        let listed = match lister.list_attributes(&cache).await {
            Ok(true) => Ok(()),
            Ok(false) => lister.update(&mut *cache.lock().await).await.map(drop),
            Err(e) => Err(e),
        };
        if let Err(e) = listed {
            tracing::warn!(error = %e, "the session's tail could not list the project");
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
