//! A session's start on a slow node (every query page and timestamp read takes 150 ms): it
//! lists the project once (its first scan uses that listing), contacts its relayer while that
//! listing is on its way, and its first scan's burst sends its reads at once
//! (docs/PROTOCOL.md §8.2 and §8.4). Before, the relayer was contacted first, the first scan
//! listed again, and the burst's reads went one after the other: a returning browser session
//! spent most of its start waiting on them in turn.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use privsvc_client::{EntitiesQuery, LocalWallet, SessionSchedule};
use privsvc_ledger::LedgerReader;
use privsvc_ohttp::{Fetch, FetchRequest, FetchResponse, HttpError, ReqwestFetch};

use crate::common::{fast_schedule, note, CountingReader, ReadKind, Stack, StackOptions};

/// Passes requests to reqwest, each 150 ms late (a distant relayer), and writes down when each
/// was answered.
struct Timed {
    inner: ReqwestFetch,
    answered: Mutex<Vec<(String, Instant)>>,
}

#[async_trait]
impl Fetch for Timed {
    async fn fetch(
        &self,
        request: FetchRequest,
        timeout: Duration,
        max_body: usize,
    ) -> Result<FetchResponse, HttpError> {
        let url = request.url.clone();
        tokio::time::sleep(Duration::from_millis(150)).await;
        let answer = self.inner.fetch(request, timeout, max_body).await;
        self.answered.lock().unwrap().push((url, Instant::now()));
        answer
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lists_once_contacts_its_relayers_meanwhile_and_sends_its_burst_at_once() {
    let stack = Stack::start(StackOptions::plain()).await;
    let alice = Arc::new(LocalWallet::random());
    // Alice's record, final for covers and past its fetch age: a new session's first scan
    // fetches its batch.
    let first = stack
        .builder(&alice)
        .memory_stores(true)
        .build()
        .await
        .expect("client builds");
    first.create_entity(note("one")).await.expect("write");
    drop(first);
    stack.settle().await;

    // A new session of Alice's (a fresh device), with no tail or scan of its own before the
    // test looks.
    let counting = Arc::new(CountingReader::with_delay(
        stack.reader.clone(),
        Duration::from_millis(150),
    ));
    let quiet = SessionSchedule {
        tail: (Duration::from_secs(600), Duration::from_secs(600)),
        scan: (Duration::from_secs(600), Duration::from_secs(600)),
        ..fast_schedule()
    };
    let timed = Arc::new(Timed {
        inner: ReqwestFetch::new(Duration::from_secs(10)).unwrap(),
        answered: Mutex::new(Vec::new()),
    });
    let client = stack
        .builder(&alice)
        .reader(counting.clone() as Arc<dyn LedgerReader>)
        .fetch(timed.clone())
        .memory_stores(true)
        .schedule(quiet)
        .build()
        .await
        .expect("client builds");
    let mine = client.my_entities(&EntitiesQuery::new()).await.unwrap();
    assert_eq!(
        mine.len(),
        1,
        "the first scan found and verified the record"
    );
    assert!(mine[0].verified);

    let queries = counting.queries.lock().unwrap().clone();
    let listings: Vec<&String> = queries
        .iter()
        .filter(|q| !q.contains("$createdAt = "))
        .collect();
    assert_eq!(listings.len(), 1, "one listing at the start: {listings:?}");

    // The listing's page was asked for before the relayer answered its /v1/info.
    let listing_asked = counting
        .reads
        .lock()
        .unwrap()
        .iter()
        .find(|r| matches!(&r.0, ReadKind::Query(q) if q == listings[0]))
        .map(|r| r.1)
        .expect("the listing's page was read");
    let answered = timed.answered.lock().unwrap().clone();
    let info = answered
        .iter()
        .find(|(url, _)| url.ends_with("/v1/info"))
        .map(|(_, at)| *at)
        .unwrap_or_else(|| panic!("no /v1/info: {answered:?}"));
    assert!(
        listing_asked < info,
        "the listing waited for the relayer: asked {listing_asked:?}, /v1/info answered {info:?}"
    );

    // The burst: Alice's batch (no other batch is there to cover it) and its block's
    // timestamp, in flight together.
    let block = mine[0].created_at;
    let batch = format!("$createdAt = u64({block})");
    assert_eq!(counting.batch_fetches(), 1, "{queries:?}");
    assert!(
        counting.overlapped(
            |r| matches!(r, ReadKind::Query(q) if q.contains(&batch)),
            |r| *r == ReadKind::Timestamp(block),
        ),
        "the batch fetch and its block's timestamp read went one after the other: {:?}",
        counting.reads.lock().unwrap()
    );
    drop(client);
    stack.shutdown().await;
}
