//! The privsvc relayer (docs/PROTOCOL.md §7, docs/ARCHITECTURE.md §2.3): validates sealed records,
//! stores them durably before answering 202, writes them to the ledger in batches (one
//! `execute()` per batch: create + transfer per record, plus a spends entity for tokens), holds
//! records for k-anonymity, publishes heartbeats and reports health.
//!
//! ```no_run
//! # async fn demo(ledger: std::sync::Arc<dyn privsvc_ledger::LedgerReader>,
//! #               writer: std::sync::Arc<dyn privsvc_ledger::LedgerWriter>) {
//! use privsvc_relayer::{Relayer, RelayerConfig};
//! let config = RelayerConfig::from_env_and_args(std::env::args()).expect("configuration");
//! let relayer = Relayer::start(config, ledger, writer).await.expect("start");
//! println!("listening on {}", relayer.url());
//! relayer.shutdown().await;
//! # }
//! ```
//!
//! Privacy: no log line, at any level, holds a client address or any part of a request body.
//! The listener (`privsvc_ohttp::PrivateListener`, shared with the OHTTP relay) gives axum an
//! unprintable peer address (used only by the
//! in-memory rate limiters of submissions and of the issuer routes, and dropped at accept when
//! tokens are required and `ISSUER` is off); log fields are an allowlist
//! (`retry::ledger_error_kind`). The `ohttp` crate's TRACE records (key material) are
//! compiled out by `privsvc-ohttp`; `privsvc_ohttp::SILENCE_OHTTP_LOGS` in a log filter is a
//! second guard.
//!
//! Rate limit: with tokens off, submissions are limited per source address (`RATE_LIMIT_PER_MIN`,
//! `ratelimit`), whether posted to `/v1/records` or encapsulated in `POST /v1/ohttp` by an
//! address that is not a configured OHTTP relay (`OHTTP_RELAY_IPS`). The configured relays are
//! not counted here (their clients are limited per client address at the OHTTP relay,
//! `privsvc_ohttp::RelayConfig::rate_limit_per_min`).
//!
//! Batches and idempotence (docs/PROTOCOL.md §7): the records of a batch, their transfers and the spends token
//! ids are in a random order (OS RNG), never arrival order (`batcher`); the same sealed envelope
//! submitted again gets the existing id and is never stored or written twice (UNIQUE envelope
//! digest, `store`); minAnonymity k counts records of the record's own `project` (`queue`), and
//! so does `batchSize`; `/metrics` is served only on `METRICS_BIND`; the double-spend count of
//! `/healthz` is refreshed in the background once a minute (`health`); `DATA_DIR` is 0700, the
//! queue database 0600, with `secure_delete` on.
//!
//! What a party can measure (docs/PROTOCOL.md §5.3 and §7): the public `/healthz` rounds `queue` up to a multiple
//! of 100 and makes no ledger call (its balance is read in the background every 10 s; exact figures
//! on `METRICS_BIND` only) (`health`); the planner batches the records whose holds it can meet
//! and skips the others, which never block the records behind them (`queue`); the issuer routes
//! are limited per source like submissions, also inside `POST /v1/ohttp`, and pad their OHTTP
//! answers to the 8 192-byte class (`issuer_mount`); IPv6 sources are limited per /64
//! (`ratelimit`); a store error while marking a record found on the ledger requeues it, never
//! writes it again (`batcher`).
//!
//! Reconciliation: a record found already on the ledger (its owner holds an entity with its
//! envelope) is marked written with the hash of the transaction that created that entity, read
//! with `LedgerReader::creation_tx` (`eth_getLogs`); the zero hash only when the node cannot
//! tell.
//!
//! A real machine (docs/RELIABILITY.md "The faults of a real machine"): every wait, deadline and
//! retry runs on a monotonic timeline continued across restarts, the wall clock only for the
//! protocol's wall times (`clock`); a record is written only while the ledger's newest block
//! leaves its envelope's bound an hour and more away (`batcher`); below the free-space floor
//! (`MIN_FREE_BYTES`, `diskspace`) and while the store cannot write, submissions get 503 with
//! `Retry-After` and `/healthz` says `storeFailing`; a mined batch the store cannot record is
//! recorded again until it can, its statuses `written` meanwhile; the database is checked at
//! start (`PRAGMA quick_check`), its fields parsed strictly, and each stored envelope checked
//! against its digest and signature before it enters a batch (`validate`).
//!
//! Module map: `config` (env and flags, [`RelayerConfig`]), `clock` (the timeline and the wall clock), `store`
//! (SQLite, group commit), `diskspace` (the free-space floor), `queue` (the batching decision), `planner` (the batcher's decisions, pure), `driver` (the batcher's
//! loop: applies the planner's actions), `batcher` (batch transactions), `reconcile` (restart),
//! `writer` (the one serialized writer; settles transactions of unknown fate), `retry`
//! (per-call retries and hedges, ledger health), `health` (heartbeats, retention, health record),
//! `decoys` (the relayer's own decoy records in each batch, `DECOYS_MAX`), `api` (HTTP),
//! `status` (the one shape of status answers), `validate` (400 checks), `tokencheck` (402/403), `ratelimit` (429),
//! `metrics` (Prometheus, on `METRICS_BIND` only).
#![forbid(unsafe_code)]

mod api;
mod batcher;
mod clock;
mod config;
mod decoys;
mod diskspace;
mod driver;
mod entities;
#[cfg(feature = "fuzzing")]
mod fuzz_entry;
mod health;
mod identity;
mod intake;
mod issuer_mount;
mod lab_leaks;
mod metrics;
mod occupancy;
mod planner;
mod project;
mod queue;
mod ratelimit;
mod reconcile;
mod retry;
mod start;
mod status;
mod store;
mod tokencheck;
mod validate;
mod writer;

/// Internals that the relayer's own tests, the fuzz targets and the attack lab reach; not part
/// of the API (no stability promise), as rustls does with its `internal` module.
#[doc(hidden)]
pub mod testing {
    /// The `relayer_submit` fuzz target's entry point (feature `fuzzing`).
    #[cfg(feature = "fuzzing")]
    pub mod fuzz_entry {
        pub use crate::fuzz_entry::*;
    }
    pub use crate::lab_leaks::LabLeaks;
    /// The batcher's decisions, pure.
    pub mod planner {
        pub use crate::planner::*;
    }
    pub use crate::queue::{PlanParams, Queue};
    pub use crate::store::{StoreFault, StoredRecord};

    /// The system's wall clock, Unix epoch ms (what tests seal envelopes with).
    pub fn now_ms() -> u64 {
        crate::Clock::system().wall_ms()
    }
    pub use crate::tokencheck::PINS_FILE;
    pub use crate::writer::SETTLE_ROUNDS;
}

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use privsvc_ledger::{LedgerError, LedgerReader, LedgerWriter};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::{
    AttestationCodes, Batching, Clock, ConfigError, IssuerSettings, Limits, OhttpSeed,
    RelayerConfig, RelayerKey, TokenMode, DEFAULT_MIN_FREE_BYTES,
};
pub use health::Health;
pub use store::{CorruptionError, StoreError};
pub use writer::SerializedWriter;

/// Why the relayer could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayerError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The queue database could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The ledger could not be reached or answered in error.
    #[error("ledger: {0}")]
    Ledger(#[from] LedgerError),
    /// The ledger at this JSON-RPC URL could not be connected to.
    #[error("cannot connect to the ledger at {url}: {source}")]
    LedgerConnect {
        /// The `LEDGER_RPC_URL`.
        url: url::Url,
        /// Why.
        #[source]
        source: Box<LedgerError>,
    },
    /// The ledger's chain is not the configured `CHAIN_ID`.
    #[error("CHAIN_ID is {expected} but the ledger reports {actual}")]
    ChainIdMismatch {
        /// The configured `CHAIN_ID`.
        expected: u64,
        /// The ledger's chain id.
        actual: u64,
    },
    /// The listen address could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, #[source] std::io::Error),
    /// The token issuer (`ISSUER=on`) could not be opened.
    #[error("token issuer: {0}")]
    Issuer(#[source] Box<privsvc_tokens::IssuerError>),
    /// The store of pinned issuer keys (`TOKENS=required`) could not be opened.
    #[error("issuer key pins: {0}")]
    IssuerKeyPins(#[source] Box<privsvc_tokens::TokenError>),
    /// The OHTTP gateway could not be built.
    #[error("OHTTP gateway: {0}")]
    Ohttp(#[source] Box<privsvc_ohttp::OhttpError>),
}

/// How long [`Relayer::shutdown`] waits for the relayer's tasks (a batcher waiting on an
/// unresponsive ledger is abandoned after it, as in a crash).
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// A running relayer: start one with [`Relayer::start`] (or [`Relayer::start_on_ledger`]),
/// stop it with [`Relayer::shutdown`].
pub struct Relayer {
    url: String,
    local_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    router: Router,
    address: alloy_primitives::Address,
    store: Arc<store::Store>,
    writer: SerializedWriter,
    beacon: Arc<health::Beacon>,
    health: health::HealthView,
    metrics: Arc<metrics::Metrics>,
    occupancy: Arc<occupancy::Occupancy>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Relayer {
    /// Open the queue in `config.data_dir`, bind `config.bind`, and start serving, batching,
    /// heartbeats and pruning; with `ISSUER=on` the token issuer (data in
    /// `<data_dir>/issuer`) is mounted and publishes its keys through the relayer's serialized
    /// writer. `writer` must be the only writer of its account.
    pub async fn start(
        config: RelayerConfig,
        ledger: Arc<dyn LedgerReader>,
        writer: Arc<dyn LedgerWriter>,
    ) -> Result<Relayer, RelayerError> {
        Self::start_with(config, ledger, writer, |_| None).await
    }

    /// Connects to the ledger `config` names ([`RelayerConfig::connect_ledger`]) and starts
    /// the relayer on it, as a relayer binary does. The key is needed only to connect the
    /// writer; the relayer keeps it in that writer alone.
    pub async fn start_on_ledger(mut config: RelayerConfig) -> Result<Relayer, RelayerError> {
        let (reader, writer) = config.connect_ledger().await?;
        config.key = None;
        Self::start(config, reader, writer).await
    }

    /// Like [`Relayer::start`], with `extra` building additional routes (e.g. the token issuer)
    /// from the relayer's serialized writer, which every create from the account must use.
    pub async fn start_with(
        config: RelayerConfig,
        ledger: Arc<dyn LedgerReader>,
        writer: Arc<dyn LedgerWriter>,
        extra: impl FnOnce(&SerializedWriter) -> Option<Router>,
    ) -> Result<Relayer, RelayerError> {
        config.validate()?;
        let ledger = start::retrying_ledger(&config, ledger, writer).await?;
        let store = store::Store::open(&config.data_dir)?;
        let time = start::timeline(&config, &store)?;
        let restored = start::Restored::load(&store, &time).await?;
        let listener = tokio::net::TcpListener::bind(config.bind)
            .await
            .map_err(|e| RelayerError::Bind(config.bind, e))?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| RelayerError::Bind(config.bind, e))?;
        let built = start::assemble(&config, ledger, store, restored, time.clone(), local_addr)?;
        // The health record's ledger check, read once before serving and then in the
        // background (never per request).
        built.beacon.refresh_ledger_check().await;
        let (router, issuer) = start::routes(&config, &built, extra)?;
        let (stop, stop_rx) = watch::channel(false);
        let metrics_routes = api::metrics_router(
            built.metrics.clone(),
            built.occupancy.clone(),
            built.health.clone(),
        );
        let (metrics_addr, mut tasks) =
            start::serve(&config, listener, &router, metrics_routes, &stop_rx).await?;
        let start::Built {
            identity,
            batcher,
            beacon,
            health,
            metrics,
            occupancy,
            store,
            serialized,
            ..
        } = built;
        let housekeeping = (store.clone(), time);
        tasks.extend(start::background(
            &config,
            batcher,
            &beacon,
            housekeeping,
            issuer,
            stop_rx,
        ));
        let url = identity.public_url.clone();
        tracing::info!(url = %url, "relayer started");
        Ok(Relayer {
            url,
            local_addr,
            metrics_addr,
            router,
            address: identity.address,
            store,
            writer: serialized,
            beacon,
            health,
            metrics,
            occupancy,
            stop,
            tasks,
        })
    }
}

impl Relayer {
    /// The public base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound socket address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound address of the `GET /metrics` listener (`METRICS_BIND`), when on.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The database file of the queue.
    pub fn store_path(&self) -> &std::path::Path {
        self.store.path()
    }

    /// Recount double spends now instead of waiting for the background task (which counts
    /// once a minute); for operators' tools and tests, not reachable over HTTP.
    pub async fn refresh_double_spends(&self) {
        self.beacon.refresh_double_spends().await;
    }

    /// The relayer's address.
    pub fn address(&self) -> alloy_primitives::Address {
        self.address
    }

    /// The full router (API, OHTTP gateway, extra routes, CORS) for in-process use. It does not
    /// serve `/metrics` (see [`Relayer::metrics_text`]).
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// The serialized writer of the relayer account (hand it to anything that creates entities
    /// from this account, such as the token issuer).
    pub fn writer(&self) -> SerializedWriter {
        self.writer.clone()
    }

    /// The current health record, with the exact queue length (the public `/healthz` rounds
    /// it up). Makes no ledger call: the balance is the background read's, at most
    /// `health::LEDGER_CHECK_REFRESH` old.
    pub async fn health(&self) -> Health {
        self.health.health()
    }

    /// The Prometheus text of the counters.
    pub fn metrics_text(&self) -> String {
        self.metrics.render(self.occupancy.get())
    }

    /// Stop serving and batching, waiting up to [`SHUTDOWN_GRACE`] for the tasks to end; a task
    /// still waiting on the ledger then is abandoned, as in a crash. A batch in flight stays
    /// stored and is reconciled at the next start (docs/PROTOCOL.md §7).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        for mut t in self.tasks {
            if tokio::time::timeout_at(deadline, &mut t).await.is_err() {
                tracing::warn!(
                    "a relayer task did not stop within the shutdown grace period; abandoned (its batch is reconciled at the next start)"
                );
                t.abort();
                let _ = t.await;
            }
        }
    }

    /// Put a fault on the queue database's writer (tests of a full disk or a read-only file;
    /// not part of the API).
    #[doc(hidden)]
    pub async fn set_store_fault(&self, fault: testing::StoreFault) -> Result<(), StoreError> {
        self.store.set_fault(fault).await
    }

    /// Stop every task at once, without any clean-up (simulates a crash in tests).
    pub async fn crash(self) {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
    }
}
