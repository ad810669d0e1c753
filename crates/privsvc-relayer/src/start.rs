//! The steps of [`crate::Relayer::start_with`]: the ledger checked and wrapped in retries, what
//! a restart takes back from the queue's database, the three owners (the intake, the batcher,
//! the beacon) and the channels between them, the routes, the listeners and the background
//! tasks.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use axum::Router;
use privsvc_ledger::{LedgerReader, LedgerWriter};
use privsvc_ohttp::{OhttpGateway, PeerIp, PrivateListener};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tower_http::cors::CorsLayer;

use crate::batcher::{BatchFigures, BatchSettings, Batcher};
use crate::clock::{Anchor, Timeline};
use crate::config::{RelayerConfig, TokenMode};
use crate::diskspace::DiskFloor;
use crate::health::{Beacon, BeaconFigures, HealthView};
use crate::identity::Identity;
use crate::intake::{Intake, IntakeSettings};
use crate::metrics::Metrics;
use crate::occupancy::Occupancy;
use crate::status::Statuses;
use crate::store::{Store, StoredRecord};
use crate::validate::Limits;
use crate::SerializedWriter;
use crate::{api, health, issuer_mount, queue, ratelimit, retry, tokencheck, RelayerError};

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
    /// The batcher's figures kept across restarts.
    batches: BatchFigures,
    /// The beacon's figures kept across restarts.
    beacon: BeaconFigures,
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
            batches: BatchFigures {
                batches: number("batches")?.unwrap_or(0),
                last_flush_block: number("last_flush_block")?,
            },
            beacon: BeaconFigures {
                heartbeat: store.meta("heartbeat")?.and_then(|v| v.parse().ok()),
                last_beat_ms: number("last_beat")?.unwrap_or(0),
                ..BeaconFigures::default()
            },
        })
    }
}

/// The relayer's parts: its three owners, what reads their figures, and what the routes and
/// the [`crate::Relayer`] handle need.
pub(crate) struct Built {
    /// Who the relayer is.
    pub(crate) identity: Arc<Identity>,
    /// The intake of submissions.
    pub(crate) intake: Arc<Intake>,
    /// The batcher (run as one task).
    pub(crate) batcher: Batcher,
    /// The beacon.
    pub(crate) beacon: Arc<Beacon>,
    /// Where statuses are read.
    pub(crate) statuses: Statuses,
    /// Where the health record is read.
    pub(crate) health: HealthView,
    /// The info document.
    pub(crate) info: Arc<Value>,
    /// Counters.
    pub(crate) metrics: Arc<Metrics>,
    /// Records held.
    pub(crate) occupancy: Arc<Occupancy>,
    /// The durable queue.
    pub(crate) store: Arc<Store>,
    /// The ledger reader (retried calls).
    pub(crate) ledger: Arc<dyn LedgerReader>,
    /// Every create of the account goes through it.
    pub(crate) serialized: SerializedWriter,
    /// With `OHTTP=on`.
    pub(crate) gateway: Option<Arc<OhttpGateway>>,
}

/// The relayer's parts, bound to `local_addr`.
pub(crate) fn assemble(
    config: &RelayerConfig,
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
    let identity = Arc::new(Identity {
        address,
        chain_id: ledger.chain_id,
        public_url,
        issuer,
        issuer_url,
        ohttp_key: gateway.as_ref().map(|g| g.public_key()),
    });
    let store = Arc::new(store);
    let floor = DiskFloor {
        dir: config.data_dir.clone(),
        min_free: config.limits.min_free_bytes,
    };
    let metrics =
        Arc::new(Metrics::with_ledger(ledger.health.clone()).with_gateway(gateway.clone()));
    let occupancy = Arc::new(Occupancy::new(restored.queued.len() + restored.sending));
    // The channels between the owners.
    let (inbox, incoming) = mpsc::unbounded_channel();
    let (reconciled, ready) = watch::channel(false);
    let (unrecorded_out, unrecorded) = watch::channel(Default::default());
    let (batch_figures, batches) = watch::channel(restored.batches);
    let (beacon_figures, beacon) = watch::channel(restored.beacon);
    let serialized = SerializedWriter::new(ledger.writer, config.receipt_timeout, ready)
        .with_round((config.block_time * 3).max(std::time::Duration::from_secs(1)));
    let leaks = config.leaks();
    let mut queue = queue::Queue::default();
    queue.set_oldest_only(leaks.planner_oldest_only);
    for r in restored.queued {
        queue.push(r);
    }
    let batcher = Batcher {
        queue,
        incoming,
        attempts: Default::default(),
        unrecorded: Default::default(),
        unrecorded_out,
        figures: batch_figures,
        reconciled,
        writer: serialized.clone(),
        store: store.clone(),
        ledger: ledger.reader.clone(),
        identity: identity.clone(),
        settings: BatchSettings {
            batching: config.batching.clone(),
            block_time: config.block_time,
            leaks,
        },
        occupancy: occupancy.clone(),
        metrics: metrics.clone(),
        time: time.clone(),
    };
    let intake = Arc::new(Intake {
        settings: IntakeSettings {
            tokens: config.tokens,
            submissions_per_min: config.limits.submissions_per_min,
            queue_capacity: config.limits.queue_capacity,
            limits: Limits {
                relayer: address,
                max_min_anonymity: config.batching.max_min_anonymity,
                max_hold_ms: config.batching.max_hold_ms(),
            },
            resubmissions_stored_again: leaks.resubmissions_stored_again,
        },
        issuer,
        store: store.clone(),
        limiter: ratelimit::RateLimiter::new(config.limits.submissions_per_min),
        issuer_keys: tokencheck::IssuerKeys::open(&config.data_dir)
            .map_err(|e| RelayerError::IssuerKeyPins(Box::new(e)))?,
        ledger: ledger.reader.clone(),
        seq: AtomicU64::new(restored.next_seq),
        occupancy: occupancy.clone(),
        metrics: metrics.clone(),
        time: time.clone(),
        floor: floor.clone(),
        batcher: inbox,
    });
    let beacon_owner = Arc::new(Beacon {
        identity: identity.clone(),
        writer: serialized.clone(),
        ledger: ledger.reader.clone(),
        store: store.clone(),
        metrics: metrics.clone(),
        time,
        heartbeat_interval: config.heartbeat_interval,
        figures: beacon_figures,
    });
    let health = HealthView {
        address,
        beacon,
        batches,
        unrecorded: unrecorded.clone(),
        occupancy: occupancy.clone(),
        ledger: ledger.health,
        store: store.clone(),
        floor,
    };
    Ok(Built {
        info: Arc::new(api::info_json(&identity, config)),
        identity,
        intake,
        batcher,
        beacon: beacon_owner,
        statuses: Statuses {
            store: store.clone(),
            unrecorded,
        },
        health,
        metrics,
        occupancy,
        store,
        ledger: ledger.reader,
        serialized,
        gateway,
    })
}

/// The relayer's routes: its API, the issuer's with `ISSUER=on` (served directly and through
/// the OHTTP gateway), the gateway endpoint, and `extra`'s; and the issuer, when mounted.
pub(crate) fn routes(
    config: &RelayerConfig,
    built: &Built,
    extra: impl FnOnce(&SerializedWriter) -> Option<Router>,
) -> Result<(Router, Option<Arc<privsvc_tokens::Issuer>>), RelayerError> {
    let (issuer_routes, issuer) = if config.issuer.on {
        let (routes, issuer) = issuer_mount::mount(
            config,
            built.identity.chain_id,
            built.ledger.clone(),
            &built.serialized,
        )?;
        (Some(routes), Some(issuer))
    } else {
        (None, None)
    };
    let mut api = api::api_router(
        built.info.clone(),
        built.intake.clone(),
        built.statuses.clone(),
        built.health.clone(),
    );
    if let Some(routes) = issuer_routes {
        api = api.merge(routes);
    }
    let ohttp = api::ohttp_router(
        &config.limits.ohttp_relay_ips,
        built.gateway.clone(),
        api.clone(),
    );
    let mut app = api.merge(ohttp);
    if let Some(extra) = extra(&built.serialized) {
        app = app.merge(extra);
    }
    let router = app.fallback(api::not_found).layer(CorsLayer::permissive());
    Ok((router, issuer))
}

/// Serves `router` on `listener` (addresses kept only where a limit needs them) and, with
/// `METRICS_BIND`, the `metrics` routes on their own listener, until `stop` changes; returns
/// the metrics address and the serving tasks.
pub(crate) async fn serve(
    config: &RelayerConfig,
    listener: TcpListener,
    router: &Router,
    metrics: Router,
    stop: &watch::Receiver<bool>,
) -> Result<(Option<SocketAddr>, Vec<JoinHandle<()>>), RelayerError> {
    let mut tasks = Vec::new();
    let mut metrics_addr = None;
    if let Some(bind) = config.metrics_bind {
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|e| RelayerError::Bind(bind, e))?;
        metrics_addr = Some(
            listener
                .local_addr()
                .map_err(|e| RelayerError::Bind(bind, e))?,
        );
        let service = metrics.into_make_service_with_connect_info::<PeerIp>();
        tasks.push(serve_until(
            PrivateListener::anonymous(listener),
            service,
            stop.clone(),
        ));
    }
    // Addresses are kept for the submission limit (tokens off) and the issuer routes' limit.
    let keep_peer = config.tokens == TokenMode::Off || config.issuer.on;
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

/// The background tasks: the batcher, the beacon's heartbeats, double-spend count and ledger
/// check, the issuer's schedule (when mounted), the timeline's anchor and pruning.
pub(crate) fn background(
    config: &RelayerConfig,
    batcher: Batcher,
    beacon: &Arc<Beacon>,
    housekeeping: (Arc<Store>, Timeline),
    issuer: Option<Arc<privsvc_tokens::Issuer>>,
    stop: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let (store, time) = housekeeping;
    let mut tasks = vec![
        tokio::spawn(batcher.run(stop.clone())),
        tokio::spawn(beacon.clone().run_heartbeats(stop.clone())),
        tokio::spawn(beacon.clone().run_double_spends(stop.clone())),
        tokio::spawn(beacon.clone().run_ledger_check(stop.clone())),
    ];
    if let Some(issuer) = issuer {
        tasks.push(tokio::spawn(issuer_mount::run_schedule(
            issuer,
            config.issuer.schedule_period,
            stop.clone(),
        )));
    }
    let floor = DiskFloor {
        dir: config.data_dir.clone(),
        min_free: config.limits.min_free_bytes,
    };
    tasks.push(tokio::spawn(health::run_anchor(
        store.clone(),
        time.clone(),
        floor,
        stop.clone(),
    )));
    tasks.push(tokio::spawn(health::run_pruning(
        store,
        time,
        config.status_retention,
        stop,
    )));
    tasks
}
