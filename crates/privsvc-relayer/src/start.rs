//! The steps of [`crate::Relayer::start_with`]: the ledger checked and wrapped in retries, the
//! state restored from the queue's database, the shared state, the routes, the listeners and
//! the background tasks.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

use axum::Router;
use privsvc_ledger::{LedgerReader, LedgerWriter};
use privsvc_ohttp::{OhttpGateway, PeerIp, PrivateListener};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tower_http::cors::CorsLayer;

use crate::clock::{Anchor, Timeline};
use crate::config::{RelayerConfig, TokenMode};
use crate::state::{HealthFigures, RelayerState};
use crate::store::{Store, StoredRecord};
use crate::{
    api, driver, health, issuer_mount, metrics, queue, ratelimit, retry, tokencheck, RelayerError,
    SerializedWriter,
};

/// The ledger reader and writer, each call retried on its own (jittered backoff) and counted
/// for health, once the ledger's chain id is the configured one.
pub(crate) struct RetryingLedger {
    pub(crate) reader: Arc<dyn LedgerReader>,
    pub(crate) writer: Arc<dyn LedgerWriter>,
    pub(crate) health: Arc<retry::LedgerHealth>,
    pub(crate) chain_id: u64,
}

/// Wraps `reader` and `writer` in retries and checks the chain id against `CHAIN_ID`.
pub(crate) async fn retrying_ledger(
    config: &RelayerConfig,
    reader: Arc<dyn LedgerReader>,
    writer: Arc<dyn LedgerWriter>,
) -> Result<RetryingLedger, RelayerError> {
    let health = Arc::new(retry::LedgerHealth::default());
    let reader: Arc<dyn LedgerReader> =
        Arc::new(retry::RetryingReader::new(reader, health.clone()));
    let writer: Arc<dyn LedgerWriter> =
        Arc::new(retry::RetryingWriter::new(writer, health.clone()));
    let chain_id = reader.chain_id().await?;
    if let Some(expected) = config.chain_id {
        if expected != chain_id {
            return Err(RelayerError::ChainIdMismatch {
                expected,
                actual: chain_id,
            });
        }
    }
    Ok(RetryingLedger {
        reader,
        writer,
        health,
        chain_id,
    })
}

/// What a restarted relayer takes back from its database.
pub(crate) struct Restored {
    /// Records waiting in the queue.
    queued: Vec<StoredRecord>,
    /// Records in a batch being sent.
    sending: usize,
    /// The next submission sequence number.
    next_seq: u64,
    /// The health figures kept across restarts.
    live: HealthFigures,
}

/// The relayer's timeline, resumed after the anchor its last run stored (a fresh one at the
/// wall time when there is none; an anchor that does not parse is reported and not used).
pub(crate) fn timeline(config: &RelayerConfig, store: &Store) -> Result<Timeline, RelayerError> {
    let anchor = match store.meta(health::ANCHOR_KEY)? {
        None => None,
        Some(text) => {
            let anchor = Anchor::decode(&text);
            if anchor.is_none() {
                tracing::error!(
                    "the stored timeline anchor does not parse (the database may be damaged); the timeline starts at the wall time"
                );
            }
            anchor
        }
    };
    Ok(Timeline::start(config.clock.clone(), anchor))
}

impl Restored {
    /// Reads the queue and the kept figures from `store`. A queued record whose stored fields
    /// do not parse is marked failed (named in the log by its error), never queued.
    pub(crate) async fn load(store: &Store, time: &Timeline) -> Result<Restored, RelayerError> {
        let number = |key: &str| -> Result<Option<u64>, RelayerError> {
            Ok(store.meta(key)?.and_then(|v| v.parse().ok()))
        };
        let (queued, damaged) = store.load_queued()?;
        if !damaged.is_empty() {
            tracing::error!(
                records = damaged.len(),
                "queued records whose stored fields do not parse: failed, not written"
            );
        }
        for (rowid, e) in damaged {
            let reason = format!(
                "the relayer's stored copy of this record is damaged ({e}); it was not written"
            );
            store.fail_row(rowid, reason, time.now_ms()).await?;
        }
        Ok(Restored {
            queued,
            sending: store.count_sending()? as usize,
            next_seq: store.max_seq()? + 1,
            live: HealthFigures {
                batches: number("batches")?.unwrap_or(0),
                last_flush_block: number("last_flush_block")?,
                heartbeat: store.meta("heartbeat")?.and_then(|v| v.parse().ok()),
                last_beat_ms: number("last_beat")?.unwrap_or(0),
                ..HealthFigures::default()
            },
        })
    }
}

/// The relayer's shared state, its one serialized writer and its OHTTP gateway.
pub(crate) struct Built {
    pub(crate) shared: Arc<RelayerState>,
    /// Every create of the account goes through it.
    pub(crate) serialized: SerializedWriter,
    /// With `OHTTP=on`.
    pub(crate) gateway: Option<Arc<OhttpGateway>>,
}

/// The state of a relayer bound to `local_addr`.
pub(crate) fn state(
    config: RelayerConfig,
    ledger: RetryingLedger,
    store: Store,
    restored: Restored,
    time: Timeline,
    local_addr: SocketAddr,
) -> Result<Built, RelayerError> {
    let address = ledger.writer.address();
    let public_url = config
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{local_addr}"));
    let gateway = match &config.ohttp_seed {
        Some(seed) => Some(Arc::new(
            OhttpGateway::from_seed(seed.bytes()).map_err(|e| RelayerError::Ohttp(Box::new(e)))?,
        )),
        None => None,
    };
    let (issuer, issuer_url) = if config.issuer.on {
        let url = config
            .issuer
            .url
            .clone()
            .unwrap_or_else(|| public_url.clone());
        (Some(config.issuer.address.unwrap_or(address)), Some(url))
    } else {
        (config.issuer.address, config.issuer.url.clone())
    };
    let mut q = queue::Queue::default();
    q.set_oldest_only(config.leaks().planner_oldest_only);
    let occupancy = restored.queued.len() + restored.sending;
    for r in restored.queued {
        q.push(r);
    }
    let (reconciled, ready) = watch::channel(false);
    let serialized = SerializedWriter::new(ledger.writer, config.receipt_timeout, ready)
        .with_round((config.block_time * 3).max(std::time::Duration::from_secs(1)));
    let shared = Arc::new(RelayerState {
        address,
        chain_id: ledger.chain_id,
        public_url,
        issuer,
        issuer_url,
        ohttp_key: gateway.as_ref().map(|g| g.public_key()),
        store,
        queue: Mutex::new(q),
        notify: Notify::new(),
        metrics: metrics::Metrics::with_ledger(ledger.health).with_gateway(gateway.clone()),
        limiter: ratelimit::RateLimiter::new(config.limits.submissions_per_min),
        ledger: ledger.reader,
        writer: serialized.clone(),
        seq: AtomicU64::new(restored.next_seq),
        occupancy: AtomicUsize::new(occupancy),
        issuer_keys: tokencheck::IssuerKeys::open(&config.data_dir)
            .map_err(|e| RelayerError::IssuerKeyPins(Box::new(e)))?,
        live: Mutex::new(restored.live),
        attempts: Mutex::new(Default::default()),
        time,
        unrecorded: Mutex::new(Default::default()),
        reconciled,
        cfg: config,
    });
    Ok(Built {
        shared,
        serialized,
        gateway,
    })
}

/// The relayer's routes: its API, the issuer's with `ISSUER=on` (served directly and through
/// the OHTTP gateway), the gateway endpoint, and `extra`'s; and the issuer, when mounted.
pub(crate) fn routes(
    shared: &Arc<RelayerState>,
    serialized: &SerializedWriter,
    gateway: Option<Arc<OhttpGateway>>,
    extra: impl FnOnce(&SerializedWriter) -> Option<Router>,
) -> Result<(Router, Option<Arc<privsvc_tokens::Issuer>>), RelayerError> {
    let (issuer_routes, issuer) = if shared.cfg.issuer.on {
        let (routes, issuer) = issuer_mount::mount(shared, serialized)?;
        (Some(routes), Some(issuer))
    } else {
        (None, None)
    };
    let mut api = api::api_router(shared.clone());
    if let Some(routes) = issuer_routes {
        api = api.merge(routes);
    }
    let mut app = api
        .clone()
        .merge(api::ohttp_router(shared.clone(), gateway, api));
    if let Some(extra) = extra(serialized) {
        app = app.merge(extra);
    }
    let router = app.fallback(api::not_found).layer(CorsLayer::permissive());
    Ok((router, issuer))
}

/// Serves `router` on `listener` (addresses kept only where a limit needs them) and, with
/// `METRICS_BIND`, the metrics on their own listener, until `stop` changes; returns the
/// metrics address and the serving tasks.
pub(crate) async fn serve(
    shared: &Arc<RelayerState>,
    listener: TcpListener,
    router: &Router,
    stop: &watch::Receiver<bool>,
) -> Result<(Option<SocketAddr>, Vec<JoinHandle<()>>), RelayerError> {
    let mut tasks = Vec::new();
    let mut metrics_addr = None;
    if let Some(bind) = shared.cfg.metrics_bind {
        let metrics = TcpListener::bind(bind)
            .await
            .map_err(|e| RelayerError::Bind(bind, e))?;
        metrics_addr = Some(
            metrics
                .local_addr()
                .map_err(|e| RelayerError::Bind(bind, e))?,
        );
        let service =
            api::metrics_router(shared.clone()).into_make_service_with_connect_info::<PeerIp>();
        tasks.push(serve_until(
            PrivateListener::anonymous(metrics),
            service,
            stop.clone(),
        ));
    }
    // Addresses are kept for the submission limit (tokens off) and the issuer routes' limit.
    let keep_peer = shared.cfg.tokens == TokenMode::Off || shared.cfg.issuer.on;
    let listener = if keep_peer {
        PrivateListener::keeping_ip(listener)
    } else {
        PrivateListener::anonymous(listener)
    };
    let service = router
        .clone()
        .into_make_service_with_connect_info::<PeerIp>();
    tasks.push(serve_until(listener, service, stop.clone()));
    Ok((metrics_addr, tasks))
}

/// A task serving `service` on `listener` until `stop` changes.
fn serve_until(
    listener: PrivateListener,
    service: axum::extract::connect_info::IntoMakeServiceWithConnectInfo<Router, PeerIp>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let _ = axum::serve(listener, service)
            .with_graceful_shutdown(async move {
                let _ = stop.changed().await;
            })
            .await;
    })
}

/// The background tasks: the batch driver, heartbeats, the double-spend count, the ledger
/// check, the issuer's schedule (when mounted), the timeline's anchor and pruning.
pub(crate) fn background(
    shared: &Arc<RelayerState>,
    issuer: Option<Arc<privsvc_tokens::Issuer>>,
    stop: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![
        tokio::spawn(driver::run(shared.clone(), stop.clone())),
        tokio::spawn(health::run_heartbeats(shared.clone(), stop.clone())),
        tokio::spawn(health::run_double_spends(shared.clone(), stop.clone())),
        tokio::spawn(health::run_ledger_check(shared.clone(), stop.clone())),
    ];
    if let Some(issuer) = issuer {
        tasks.push(tokio::spawn(issuer_mount::run_schedule(
            issuer,
            shared.cfg.issuer.schedule_period,
            stop.clone(),
        )));
    }
    tasks.push(tokio::spawn(health::run_anchor(
        shared.clone(),
        stop.clone(),
    )));
    tasks.push(tokio::spawn(health::run_pruning(shared.clone(), stop)));
    tasks
}
