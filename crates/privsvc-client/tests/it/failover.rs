//! `create_entity` when the submission itself gets no answer, against the real stack (devnet,
//! two relayers, real HTTP on loopback): the project's listing is watched first (never a query
//! naming the owner), and only then is the same sealed envelope sent to another relayer. Never
//! two entities.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use privsvc_client::EntitiesQuery;
use privsvc_ledger::LedgerReader;
use privsvc_ohttp::{
    HttpError, HttpTransport, RelayerRequest, RelayerResponse, Transport, TransportError,
};
use privsvc_vault::LocalWallet;

use crate::common::*;

/// Real HTTP, except that the answer to `POST /v1/records` sent to `target` is lost: the
/// relayer receives the whole request and answers, and the client gets a transport error.
struct LoseSubmitAnswer {
    inner: HttpTransport,
    target: String,
    /// Submissions `target` accepted (202) whose answer was dropped.
    lost: AtomicUsize,
    /// Submissions sent to any other relayer.
    others: AtomicUsize,
}

#[async_trait]
impl Transport for LoseSubmitAnswer {
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, TransportError> {
        let is_submit = request.method == "POST" && request.path == "/v1/records";
        let answer = self.inner.send(relayer_url, request).await;
        if !is_submit {
            return answer;
        }
        if relayer_url != self.target {
            self.others.fetch_add(1, Ordering::SeqCst);
            return answer;
        }
        let answer = answer.expect("the target relayer is up");
        assert_eq!(answer.status, 202, "the target relayer accepts the record");
        self.lost.fetch_add(1, Ordering::SeqCst);
        Err(TransportError::Http(HttpError::Request(
            "connection reset before the answer arrived (test)".into(),
        )))
    }
}

/// Ledger queries naming `owner` (there must be none: the client never names itself).
fn owner_lookups(reader: &CountingReader, owner: alloy_primitives::Address) -> usize {
    let literal = owner.to_checksum(None);
    reader
        .queries
        .lock()
        .unwrap()
        .iter()
        .filter(|q| q.contains(&literal) || q.to_lowercase().contains(&literal.to_lowercase()))
        .count()
}

/// Incremental listings of the project (how the client learns that its record landed).
fn incremental_listings(reader: &CountingReader) -> usize {
    reader
        .queries
        .lock()
        .unwrap()
        .iter()
        .filter(|q| q.contains("$createdAt > u64("))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_submit_answer_is_recovered_from_the_ledger_not_resubmitted() {
    // A accepts and writes, but a lone record only after 1.5 s: longer than two polls.
    let stack = Stack::start(StackOptions {
        a_slow: true,
        ..StackOptions::plain()
    })
    .await;
    let a_address = stack.a().address();
    let transport = Arc::new(LoseSubmitAnswer {
        inner: HttpTransport::new().unwrap(),
        target: privsvc_ohttp::normalize_relayer_url(&stack.a_url).unwrap(),
        lost: AtomicUsize::new(0),
        others: AtomicUsize::new(0),
    });
    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let wallet = Arc::new(LocalWallet::random());
    let client = stack
        .builder(&wallet)
        .reader(counting.clone() as Arc<dyn LedgerReader>)
        .transport(transport.clone())
        .build()
        .await
        .unwrap();
    // Steer the submission to A.
    client.set_relayer_bad(&stack.b_url, true);

    let started = Instant::now();
    let r = client
        .create_entity(note("answer lost"))
        .await
        .expect("the record A accepted is found on the ledger");
    assert_eq!(
        transport.lost.load(Ordering::SeqCst),
        1,
        "A accepted it once"
    );
    assert!(
        r.recovered,
        "found on the ledger, not written by another relayer"
    );
    assert_eq!(r.relayer, "");
    assert_eq!(
        transport.others.load(Ordering::SeqCst),
        0,
        "the record was never sent to B"
    );
    assert!(started.elapsed() >= Duration::from_millis(A_SLOW_WAIT_MS));
    assert_eq!(
        owner_lookups(&counting, r.owner),
        0,
        "never asked for its owner"
    );
    assert!(incremental_listings(&counting) >= 2, "watched the listings");

    let on_ledger = stack
        .sole_entity(r.owner, r.entity_key, "exactly one entity")
        .await;
    assert_eq!(on_ledger.creator, Some(a_address), "A wrote it");
    // A lost answer may be the network's (or the OHTTP relay's) doing: the relayer is not
    // marked bad for it.
    assert!(client
        .relayers()
        .iter()
        .any(|x| x.url == transport.target && !x.bad));

    stack.settle().await;
    let mine = client
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].to_text(), "answer lost");
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_submit_looks_up_the_ledger_then_writes_through_the_live_relayer() {
    let mut stack = Stack::start(StackOptions::plain()).await;
    let b_address = stack.b().address();
    let counting = Arc::new(CountingReader::new(stack.reader.clone()));
    let wallet = Arc::new(LocalWallet::random());
    let client = stack
        .builder(&wallet)
        .reader(counting.clone() as Arc<dyn LedgerReader>)
        .build()
        .await
        .unwrap();
    // A goes down after the client met it: its port now refuses connections.
    stack.stop_a().await;
    let a_url = privsvc_ohttp::normalize_relayer_url(&stack.a_url).unwrap();
    let refused = HttpTransport::new()
        .unwrap()
        .send(
            &a_url,
            RelayerRequest {
                method: "GET".into(),
                path: "/v1/info".into(),
                body: None,
            },
        )
        .await;
    assert!(refused.is_err(), "A refuses connections");
    // Steer the first submission to A.
    client.set_relayer_bad(&stack.b_url, true);
    counting.clear();

    let r = client
        .create_entity(note("through B"))
        .await
        .expect("written through B");
    assert_eq!(r.relayer, stack.b_url);
    assert!(!r.recovered);
    // Before resubmitting, the client watched the listings (at least twice), never naming its
    // owner, and B wrote it.
    assert!(
        incremental_listings(&counting) >= 2,
        "the listing was watched before B got the record"
    );
    assert_eq!(
        owner_lookups(&counting, r.owner),
        0,
        "never asked for its owner"
    );
    let on_ledger = stack
        .sole_entity(r.owner, r.entity_key, "exactly one entity")
        .await;
    assert_eq!(on_ledger.creator, Some(b_address));
    // A refused connections: no answer of its own, so it is not marked bad (only a relayer's
    // own answers mark it).
    assert!(client.relayers().iter().any(|x| x.url == a_url && !x.bad));
    stack.shutdown().await;
}
