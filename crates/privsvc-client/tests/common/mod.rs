//! The real stack on loopback: a devnet, two relayers (A runs the token issuer; both require
//! tokens and serve OHTTP), and an OHTTP relay. Real HTTP, real SQLite, real signatures.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256, U256};
use async_trait::async_trait;
use privsvc_client::{ClientBuilder, CreateParams, Expires, PrivateClient};
use privsvc_devnet::{BlockTime, Devnet, DevnetConfig, DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_ledger::{Entity, LedgerError, LedgerReader, LedgerWriter, QueryOptions, QueryPage};
use privsvc_ohttp::{OhttpRelay, RelayConfig};
use privsvc_relayer::{Health, OhttpSeed, Relayer, RelayerConfig, RelayerHandle, TokenMode};
use privsvc_vault::LocalWallet;
use tempfile::TempDir;

pub const APP: &str = "notes";
/// Minimum token age of the test clients (the default is 60 s).
pub const TOKEN_MIN_AGE_MS: u64 = 1_000;
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

pub struct Stack {
    pub node: DevnetHandle,
    pub reader: Arc<dyn LedgerReader>,
    pub a: Option<RelayerHandle>,
    pub b: Option<RelayerHandle>,
    pub a_url: String,
    pub b_url: String,
    pub relay_url: Option<String>,
    /// The OHTTP relay, when the stack has one.
    pub relay: Option<OhttpRelay>,
    relay_task: Option<tokio::task::JoinHandle<()>>,
    dirs: Vec<TempDir>,
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

fn base_config(dir: &TempDir) -> RelayerConfig {
    let mut c = RelayerConfig::for_tests(dir.path());
    c.block_time = Duration::from_millis(100);
    c.max_wait_ms = 100;
    c
}

impl Stack {
    pub async fn start(opts: StackOptions) -> Stack {
        let node = Devnet::start(DevnetConfig {
            block_time: BlockTime::OnDemand,
            ..Default::default()
        })
        .await
        .expect("devnet starts");
        let reader = reader(&node);
        let (da, db) = (TempDir::new().unwrap(), TempDir::new().unwrap());

        let mut ca = base_config(&da);
        if opts.tokens {
            ca.tokens = TokenMode::Required;
            ca.issuer_on = true;
        }
        if opts.ohttp {
            ca.ohttp_seed = Some(OhttpSeed::new([1u8; 32]));
        }
        if opts.a_slow {
            ca.min_batch = 2;
            ca.max_wait_ms = A_SLOW_WAIT_MS;
        }
        if opts.a_holds {
            ca.min_batch = 100;
            ca.max_wait_ms = 600_000;
        }
        let a = Relayer::start(ca, reader.clone(), writer(&node, 0))
            .await
            .expect("relayer A starts");

        let mut cb = base_config(&db);
        if opts.tokens {
            cb.tokens = TokenMode::Required;
            cb.issuer_address = Some(a.address());
            cb.issuer_url = Some(a.url().to_string());
        }
        if opts.ohttp {
            cb.ohttp_seed = Some(OhttpSeed::new([2u8; 32]));
        }
        let b = Relayer::start(cb, reader.clone(), writer(&node, 1))
            .await
            .expect("relayer B starts");

        // Both heartbeats must be on the ledger (discovery and the OHTTP relay read them).
        let deadline = Instant::now() + Duration::from_secs(20);
        while a.health().await.heartbeat.is_empty() || b.health().await.heartbeat.is_empty() {
            assert!(Instant::now() < deadline, "heartbeats not published");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        let (relay, relay_url, relay_task) = if opts.ohttp {
            let relay = OhttpRelay::new(
                reader.clone(),
                RelayConfig {
                    allow_http: true,
                    refresh_interval: Duration::from_millis(500),
                    // Every test client shares 127.0.0.1.
                    rate_limit_per_min: 1_000_000,
                    ..RelayConfig::default()
                },
            )
            .expect("relay");
            relay.refresh().await.expect("relay refresh");
            let _refresh = relay.spawn_refresh();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let served = relay.clone();
            let task = tokio::spawn(async move {
                served.serve(listener).await.ok();
            });
            (Some(relay), Some(url), Some(task))
        } else {
            (None, None, None)
        };

        Stack {
            a_url: a.url().to_string(),
            b_url: b.url().to_string(),
            node,
            reader,
            a: Some(a),
            b: Some(b),
            relay_url,
            relay,
            relay_task,
            dirs: vec![da, db],
        }
    }

    /// Requests the OHTTP relay forwarded to a relayer (0 without a relay).
    pub fn relayed(&self) -> u64 {
        self.relay.as_ref().map_or(0, OhttpRelay::forwarded)
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

    pub async fn client(&self) -> (Arc<LocalWallet>, PrivateClient) {
        let wallet = Arc::new(LocalWallet::random());
        let client = self.builder(&wallet).build().await.expect("client builds");
        (wallet, client)
    }

    /// Every live entity owned by `owner`.
    pub async fn owned_by(&self, owner: Address) -> Vec<Entity> {
        let q = format!("$owner = addr({})", owner.to_checksum(None));
        privsvc_client::read::query_pinned(
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
        if let Some(a) = self.a.take() {
            a.shutdown().await;
        }
        let mut c = base_config(&self.dirs[0]);
        c.min_batch = 1;
        let a = Relayer::start(c, self.reader.clone(), writer(&self.node, 0))
            .await
            .expect("relayer A restarts");
        self.a_url = a.url().to_string();
        self.a = Some(a);
    }

    pub async fn shutdown(mut self) {
        if let Some(t) = self.relay_task.take() {
            t.abort();
        }
        if let Some(a) = self.a.take() {
            a.shutdown().await;
        }
        if let Some(b) = self.b.take() {
            b.shutdown().await;
        }
        self.node.shutdown().await;
    }
}

/// A client builder for `wallet` on `reader` and `relayers` with fast test timings: no delay,
/// polls every 100 ms, inclusion timeout 5 s, no session-start token prefetch (its random
/// moments would make the issuer traffic of a test unpredictable; tests call
/// `prefetch_later` themselves).
pub fn fast_builder(
    wallet: Arc<LocalWallet>,
    reader: Arc<dyn LedgerReader>,
    relayers: impl IntoIterator<Item = String>,
) -> ClientBuilder {
    PrivateClient::builder(APP)
        .token_min_age_ms(TOKEN_MIN_AGE_MS)
        .wallet(wallet)
        .reader(reader)
        .relayers(relayers)
        .delay_ms(0, 0)
        .poll_interval(Duration::from_millis(100))
        .inclusion_timeout(Duration::from_secs(5))
        .token_prefetch(0, Duration::ZERO)
}

/// Polls `relayer`'s health every `every` until `done` holds; fails with `what` after 10 s.
pub async fn wait_for_health(
    relayer: &RelayerHandle,
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

/// A reader that records every query expression (to count batch fetches).
pub struct CountingReader {
    pub inner: Arc<dyn LedgerReader>,
    pub queries: Mutex<Vec<String>>,
}

impl CountingReader {
    pub fn new(inner: Arc<dyn LedgerReader>) -> Self {
        Self {
            inner,
            queries: Mutex::new(Vec::new()),
        }
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
