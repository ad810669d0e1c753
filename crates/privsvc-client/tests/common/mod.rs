//! The real stack on loopback: a devnet, two relayers (A runs the token issuer; both require
//! tokens and serve OHTTP), and an OHTTP relay. Real HTTP, real SQLite, real signatures.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256, U256};
use async_trait::async_trait;
use privsvc_client::{ClientBuilder, CreateParams, Expires, PrivateClient, SessionSchedule};
use privsvc_devnet::{DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_ledger::{Entity, LedgerError, LedgerReader, LedgerWriter, QueryOptions, QueryPage};
use privsvc_relayer::{Health, Relayer};
use privsvc_testkit::{LocalStack, RelayerSpec};
use privsvc_vault::LocalWallet;

pub const APP: &str = "notes";
/// Minimum token age of the test clients (the default is 60 s).
pub const TOKEN_MIN_AGE_MS: u64 = 1_000;
/// The oldest ripening age of the tests' session tokens (an hour by default).
pub const TOKEN_MAX_RIPE_MS: u64 = 2_000;
/// Relayer A's maxWaitMs with `a_slow`.
pub const A_SLOW_WAIT_MS: u64 = 1500;

/// Which relayers to run and how.
#[derive(Clone, Copy)]
pub struct StackOptions {
    pub tokens: bool,
    pub ohttp: bool,
    /// Relayer A holds records (huge minBatch, long wait): used to strand a record.
    pub a_holds: bool,
    /// Relayer A writes a lone record only after 1.5 s (minBatch 2, maxWaitMs 1500).
    pub a_slow: bool,
}

impl StackOptions {
    /// No tokens and no OHTTP relay: clients reach the relayers directly.
    pub fn plain() -> Self {
        Self {
            tokens: false,
            ohttp: false,
            ..Self::default()
        }
    }
}

impl Default for StackOptions {
    fn default() -> Self {
        Self {
            tokens: true,
            ohttp: true,
            a_holds: false,
            a_slow: false,
        }
    }
}

/// A one-hour plain-text note with `kind = note`.
pub fn note(text: &str) -> CreateParams {
    CreateParams::new(text.as_bytes().to_vec(), "text/plain", Expires::Hours(1))
        .attribute("kind", "note")
}

/// The stack of the client tests: relayer A (dev account 0) and B (dev account 1), built with
/// `privsvc_testkit::LocalStack`.
pub struct Stack {
    pub inner: LocalStack,
    pub reader: Arc<dyn LedgerReader>,
    pub a_url: String,
    pub b_url: String,
    pub relay_url: Option<String>,
}

pub fn reader(node: &DevnetHandle) -> Arc<dyn LedgerReader> {
    Arc::new(privsvc_ledger::RpcLedger::new(node.url()).expect("rpc reader"))
}

pub fn writer(node: &DevnetHandle, i: usize) -> Arc<dyn LedgerWriter> {
    let key = hex::decode(DEV_PRIVATE_KEYS[i].trim_start_matches("0x")).unwrap();
    let key = k256::ecdsa::SigningKey::from_slice(&key).unwrap();
    let ledger = privsvc_ledger::RpcLedger::new(node.url()).expect("rpc ledger");
    Arc::new(privsvc_ledger::RpcWriter::new(ledger, key, node.chain_id()))
}

impl Stack {
    pub async fn start(opts: StackOptions) -> Stack {
        let mut a = RelayerSpec::new("a");
        let mut b = RelayerSpec::new("b");
        if opts.tokens {
            a = a.issuer();
            b = b.tokens_from("a");
        }
        if opts.ohttp {
            a = a.ohttp_seed([1u8; 32]);
            b = b.ohttp_seed([2u8; 32]);
        }
        if opts.a_slow {
            a = a.with(|c| {
                c.batching.min_batch = 2;
                c.batching.max_wait = Duration::from_millis(A_SLOW_WAIT_MS);
            });
        }
        if opts.a_holds {
            a = a.with(|c| {
                c.batching.min_batch = 100;
                c.batching.max_wait = Duration::from_millis(600_000);
            });
        }
        let mut builder = LocalStack::builder().relayer(a).relayer(b);
        if opts.ohttp {
            builder = builder.ohttp_relay();
        }
        let inner = builder.start().await.expect("the local stack starts");
        Stack {
            reader: inner.reader(),
            a_url: inner.url("a"),
            b_url: inner.url("b"),
            relay_url: inner.relay_url(),
            inner,
        }
    }

    /// Relayer A.
    pub fn a(&self) -> &Relayer {
        self.inner.relayer("a")
    }

    /// Relayer B.
    pub fn b(&self) -> &Relayer {
        self.inner.relayer("b")
    }

    /// The devnet.
    pub fn node(&self) -> &DevnetHandle {
        self.inner.devnet()
    }

    /// Requests the OHTTP relay forwarded to a relayer (0 without a relay).
    pub fn relayed(&self) -> u64 {
        self.inner.relayed()
    }

    /// A client builder for `wallet` with fast test timings (both relayers, no delay).
    pub fn builder(&self, wallet: &Arc<LocalWallet>) -> ClientBuilder {
        let mut b = fast_builder(
            wallet.clone(),
            self.reader.clone(),
            [self.a_url.clone(), self.b_url.clone()],
        );
        if let Some(relay) = &self.relay_url {
            b = b.ohttp_relay(relay.clone());
        }
        b
    }

    /// A client of a fresh wallet, ready to write (holding a ripe token when tokens are on).
    pub async fn client(&self) -> (Arc<LocalWallet>, PrivateClient) {
        let wallet = Arc::new(LocalWallet::random());
        let client = self.builder(&wallet).build().await.expect("client builds");
        ready(&client).await;
        (wallet, client)
    }

    /// Every live entity owned by `owner`.
    pub async fn owned_by(&self, owner: Address) -> Vec<Entity> {
        let q = format!("$owner = addr({})", owner.to_checksum(None));
        privsvc_client::query_pinned(
            self.reader.as_ref(),
            &q,
            privsvc_ledger::Select {
                key: true,
                owner: true,
                creator: true,
                ..Default::default()
            },
            None,
        )
        .await
        .unwrap()
        .1
    }

    /// The one live entity owned by `owner`, which must be the one at `key`; `what` is the
    /// message when there is not exactly one.
    pub async fn sole_entity(&self, owner: Address, key: B256, what: &str) -> Entity {
        let on_ledger = self.owned_by(owner).await;
        assert_eq!(on_ledger.len(), 1, "{what}");
        assert_eq!(on_ledger[0].key, key);
        on_ledger.into_iter().next().unwrap()
    }

    /// Stops relayer A and starts it again on the same queue database, flushing at once.
    pub async fn restart_a_flushing(&mut self) {
        self.inner
            .restart_relayer("a", |c| {
                c.batching.min_batch = 1;
                c.batching.max_wait = Duration::from_millis(100);
            })
            .await
            .expect("relayer A restarts");
        self.a_url = self.inner.url("a");
    }

    /// Mines enough blocks for the covers of every batch so far to be final (a scan fetches a
    /// batch only 16 blocks after it; this devnet makes a block per transaction only).
    pub async fn settle(&self) {
        settle(self.node());
    }

    /// Stops relayer A cleanly.
    pub async fn stop_a(&mut self) {
        self.inner.stop_relayer("a").await;
    }

    /// Stops relayer A as in a crash.
    pub async fn crash_a(&mut self) {
        self.inner.crash_relayer("a").await;
    }

    pub async fn shutdown(self) {
        self.inner.shutdown().await;
    }
}

/// Mines `2 x COVER_WINDOW_BLOCKS` empty blocks on `node`: afterwards the covers of every
/// batch so far are final, and a scan fetches it.
pub fn settle(node: &DevnetHandle) {
    node.mine_blocks(2 * privsvc_client::COVER_WINDOW_BLOCKS)
        .expect("mining empty blocks");
}

/// The session timers of the tests: a tail every 100 to 300 ms, status polls for up to 300 ms
/// after `written`, the first token refill within 50 ms, later ones every 2 to 4 s.
pub fn fast_schedule() -> SessionSchedule {
    SessionSchedule {
        tail: (Duration::from_millis(100), Duration::from_millis(300)),
        status_tail: (Duration::ZERO, Duration::from_millis(300)),
        status_horizon_rounds: (1.0, 3.0),
        refill_below: 5,
        first_refill: (Duration::ZERO, Duration::from_millis(50)),
        later_refill: (Duration::from_secs(2), Duration::from_secs(4)),
        scan: (Duration::from_millis(100), Duration::from_millis(300)),
        fetch_age_blocks: (16, 16),
    }
}

/// Waits until `client` holds a ripe token when one of its relayers requires tokens (the
/// session's first refill, then the tokens' minimum age); fails after 15 s.
pub async fn ready(client: &PrivateClient) {
    if !client.relayers().iter().any(|r| r.info.tokens_required) {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while client.ripe_tokens() == 0 {
        assert!(Instant::now() < deadline, "no ripe token after 15 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client builder for `wallet` on `reader` and `relayers` with fast test timings: no delay,
/// polls every 100 ms, inclusion timeout 5 s, the [`fast_schedule`].
pub fn fast_builder(
    wallet: Arc<LocalWallet>,
    reader: Arc<dyn LedgerReader>,
    relayers: impl IntoIterator<Item = String>,
) -> ClientBuilder {
    PrivateClient::builder(APP)
        .token_min_age_ms(TOKEN_MIN_AGE_MS)
        .token_max_ripe_ms(TOKEN_MAX_RIPE_MS)
        .wallet(wallet)
        .reader(reader)
        .relayers(relayers)
        .delay_ms(0, 0)
        .poll_interval(Duration::from_millis(100))
        .inclusion_timeout(Duration::from_secs(5))
        .schedule(fast_schedule())
}

/// Polls `relayer`'s health every `every` until `done` holds; fails with `what` after 10 s.
pub async fn wait_for_health(
    relayer: &Relayer,
    every: Duration,
    what: &str,
    done: impl Fn(&Health) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(&relayer.health().await) {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(every).await;
    }
}

/// What a [`CountingReader`] read: a query (its expression) or a block's timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadKind {
    Query(String),
    Timestamp(u64),
}

/// The message of the JSON-RPC error of [`CountingReader::failing_queries`].
pub const OVERLOADED: &str = "the node is overloaded, try again later";

/// A reader that records every query expression (to count batch fetches), and with it the
/// fields and attributes it selected; with a delay, every query page and timestamp read takes that long,
/// and `reads` says when each was in flight.
pub struct CountingReader {
    pub inner: Arc<dyn LedgerReader>,
    pub queries: Mutex<Vec<String>>,
    pub selects: Mutex<Vec<(String, privsvc_ledger::Select)>>,
    pub delay: Duration,
    pub reads: Mutex<Vec<(ReadKind, Instant, Instant)>>,
    /// Every query page fails with a JSON-RPC error (still counted).
    pub queries_fail: bool,
}

impl CountingReader {
    pub fn new(inner: Arc<dyn LedgerReader>) -> Self {
        Self::with_delay(inner, Duration::ZERO)
    }

    /// A counting reader whose query pages and timestamp reads each take `delay` more.
    pub fn with_delay(inner: Arc<dyn LedgerReader>, delay: Duration) -> Self {
        Self {
            inner,
            queries: Mutex::new(Vec::new()),
            selects: Mutex::new(Vec::new()),
            delay,
            reads: Mutex::new(Vec::new()),
            queries_fail: false,
        }
    }

    /// A counting reader whose query pages all fail: the node answers them with a JSON-RPC
    /// error ([`OVERLOADED`]); the other reads pass through.
    pub fn failing_queries(inner: Arc<dyn LedgerReader>) -> Self {
        Self {
            queries_fail: true,
            ..Self::new(inner)
        }
    }

    /// Whether a read of `a` and a read of `b` were ever in flight at the same time.
    pub fn overlapped(&self, a: impl Fn(&ReadKind) -> bool, b: impl Fn(&ReadKind) -> bool) -> bool {
        let reads = self.reads.lock().unwrap();
        reads.iter().filter(|r| a(&r.0)).any(|x| {
            reads
                .iter()
                .filter(|r| b(&r.0))
                .any(|y| !std::ptr::eq(x, y) && x.1 < y.2 && y.1 < x.2)
        })
    }

    /// `read` run after the delay, recorded with when it was in flight.
    async fn timed<T>(&self, kind: ReadKind, read: impl std::future::Future<Output = T>) -> T {
        let start = Instant::now();
        tokio::time::sleep(self.delay).await;
        let out = read.await;
        self.reads
            .lock()
            .unwrap()
            .push((kind, start, Instant::now()));
        out
    }

    /// Batches requested by payload fetches (one `$createdAt` predicate per batch).
    pub fn batch_fetches(&self) -> usize {
        self.queries
            .lock()
            .unwrap()
            .iter()
            .map(|q| q.matches("$createdAt = ").count())
            .sum()
    }

    pub fn clear(&self) {
        self.queries.lock().unwrap().clear();
    }
}

#[async_trait]
impl LedgerReader for CountingReader {
    async fn chain_id(&self) -> Result<u64, LedgerError> {
        self.inner.chain_id().await
    }
    async fn block_number(&self) -> Result<u64, LedgerError> {
        self.inner.block_number().await
    }
    async fn query(&self, e: &str, o: &QueryOptions) -> Result<QueryPage, LedgerError> {
        // Continuation pages repeat the query: count first pages only.
        if o.cursor.is_none() {
            self.queries.lock().unwrap().push(e.to_string());
            let select = (e.to_string(), o.select.clone());
            self.selects.lock().unwrap().push(select);
        }
        if self.queries_fail {
            return Err(LedgerError::Rpc(privsvc_ledger::RpcError {
                code: -32000,
                message: OVERLOADED.into(),
                data: None,
            }));
        }
        self.timed(ReadKind::Query(e.to_string()), self.inner.query(e, o))
            .await
    }
    async fn entity(&self, k: B256, b: Option<u64>) -> Result<Option<Entity>, LedgerError> {
        self.inner.entity(k, b).await
    }
    async fn block_timestamp(&self, n: u64) -> Result<Option<u64>, LedgerError> {
        self.timed(ReadKind::Timestamp(n), self.inner.block_timestamp(n))
            .await
    }
    async fn code_at(&self, a: Address) -> Result<Vec<u8>, LedgerError> {
        self.inner.code_at(a).await
    }
    async fn entity_nonce(&self, a: Address) -> Result<u64, LedgerError> {
        self.inner.entity_nonce(a).await
    }
    async fn balance(&self, a: Address) -> Result<U256, LedgerError> {
        self.inner.balance(a).await
    }
}

/// A slow node: every listing (`query`) takes `delay`, and one that a new block has made stale
/// meanwhile (pinned at a block below today's head) takes `stale_delay` more: on a loaded
/// machine, the listing under way when a batch lands outlasts the write it serves.
pub struct StaleListingReader {
    pub inner: Arc<dyn LedgerReader>,
    pub delay: Duration,
    pub stale_delay: Duration,
}

#[async_trait]
impl LedgerReader for StaleListingReader {
    async fn chain_id(&self) -> Result<u64, LedgerError> {
        self.inner.chain_id().await
    }
    async fn block_number(&self) -> Result<u64, LedgerError> {
        self.inner.block_number().await
    }
    async fn query(&self, e: &str, o: &QueryOptions) -> Result<QueryPage, LedgerError> {
        tokio::time::sleep(self.delay).await;
        if let Some(at) = o.at_block {
            if self.inner.block_number().await? > at {
                tokio::time::sleep(self.stale_delay).await;
            }
        }
        self.inner.query(e, o).await
    }
    async fn entity(&self, k: B256, b: Option<u64>) -> Result<Option<Entity>, LedgerError> {
        self.inner.entity(k, b).await
    }
    async fn block_timestamp(&self, n: u64) -> Result<Option<u64>, LedgerError> {
        self.inner.block_timestamp(n).await
    }
    async fn code_at(&self, a: Address) -> Result<Vec<u8>, LedgerError> {
        self.inner.code_at(a).await
    }
    async fn entity_nonce(&self, a: Address) -> Result<u64, LedgerError> {
        self.inner.entity_nonce(a).await
    }
    async fn balance(&self, a: Address) -> Result<U256, LedgerError> {
        self.inner.balance(a).await
    }
}
