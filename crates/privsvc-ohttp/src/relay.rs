//! The OHTTP relay: forwards encapsulated requests to verified relayers' `/v1/ohttp`.
//!
//! A target is verified when a live heartbeat on the ledger names its URL and the relayer's
//! `GET /v1/info` answers the heartbeat creator's address. The set is refreshed periodically
//! ([`OhttpRelay::spawn_refresh`]), and on demand when a request names an unknown target (at
//! most once per `on_demand_refresh_gap`, so a relayer that has just started is reachable
//! without waiting for the next period). The relay forwards only the body and the content type (no
//! client header at all), logs no client address, never follows redirects and keeps one pooled
//! HTTP client per target.
//!
//! Rate limit: relayers cannot limit OHTTP traffic per client (they see only the relay), so the
//! relay does: at most [`RelayConfig::rate_limit_per_min`] `POST /ohttp` requests (default
//! [`DEFAULT_RATE_LIMIT_PER_MIN`]) per source address in each one-minute window (fixed windows
//! counted from the relay's start), answered 429 with a JSON `{ "error": ... }` body and a
//! `Retry-After` header beyond that. An IPv6 source counts by its /64 prefix (an IPv4-mapped
//! address as its IPv4 address). The counts live in memory only, are dropped when their window
//! ends, and are never logged or persisted. The address comes from the listener: serve through
//! [`PrivateListener::keeping_ip`] (its [`PeerIp`] prints as `<peer>`, so axum's connection
//! traces show nothing), as [`OhttpRelay::serve`] does. A relay served by another listener (for
//! instance [`PrivateListener::anonymous`]) sees no address and cannot limit; it says so once,
//! at WARN level.
//!
//! Rounds ([`RelayConfig::round`], `ROUND_MS`; zero, the default, forwards each request at
//! once): requests that arrive during a round are held, and at the round's end forwarded
//! together in a uniformly random order (OS RNG); each answer goes back as soon as it comes.
//! Whoever watches the relay's inbound and outbound links (an onlooker with a relayer) then
//! sees a round's requests leave together, not one request leave right after each arrival.
//! At most [`RelayConfig::max_held`] requests are held at once; one more is answered 503 with
//! a JSON `{ "error": ... }` body and a `Retry-After` header. A round's requests wait for its
//! end: half a round on average, a whole round at most.
//!
//! Counters ([`OhttpRelay::metrics_router`], for a separate listener): requests forwarded,
//! rounds, requests held now and refused because too many were held. The relay cannot tell a
//! dummy ([`crate::dummy`]) from a real request, by design; the relayers' gateways count them.
//!
//! ```no_run
//! # async fn run(relay: privsvc_ohttp::OhttpRelay) -> std::io::Result<()> {
//! let tcp = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! relay.serve(tcp).await
//! # }
//! ```

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use alloy_primitives::Address;
use axum::extract::connect_info::IntoMakeServiceWithConnectInfo;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use privsvc_ledger::LedgerReader;
use rand::rngs::OsRng;
use rand::seq::SliceRandom;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tower_http::cors::CorsLayer;

use crate::ledger_heartbeats::{live_heartbeats, DEFAULT_HEARTBEAT_INTERVAL};
use privsvc_rt::normalize_relayer_url;

use crate::http_util::{
    declared_too_large, has_content_type, json_error, read_body, read_response, BodyError,
};
use crate::listener::{PeerIp, PrivateListener};
use crate::source::SourceKey;
use crate::{
    OhttpError, CONTENT_TYPE_OHTTP_REQ, MAX_ENCAPSULATED_BYTES, MAX_RESPONSE_BYTES, TARGET_HEADER,
};

/// Largest `/v1/info` answer read during verification.
const MAX_INFO_BYTES: usize = 64 * 1024;
/// Verification calls in flight at once during a refresh.
const VERIFY_CONCURRENCY: usize = 16;
/// Default of [`RelayConfig::rate_limit_per_min`]: 120 `POST /ohttp` requests a minute per
/// source address. The relay cannot tell a submission from a status poll (both are encrypted);
/// a client polling every 2 s sends 30 a minute, so this leaves room for a few records at once
/// and for clients sharing an address, while a spammer gets at most 120 requests a minute,
/// across all relayers, per address.
pub const DEFAULT_RATE_LIMIT_PER_MIN: u32 = 120;
/// Default of [`RelayConfig::max_held`]: 1 000 requests held for a round at once (at most
/// about 131 MB of ciphertext, typically a few MB).
pub const DEFAULT_MAX_HELD: usize = 1_000;
/// Length of one rate-limit window.
const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Settings of an [`OhttpRelay`]: start from [`RelayConfig::default`] and set the fields you
/// need (the struct is `#[non_exhaustive]`: a setting added later is not a breaking change).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RelayConfig {
    /// How often the verified target set is rebuilt from the ledger.
    pub refresh_interval: Duration,
    /// The relayers' heartbeat interval (`HEARTBEAT_MS`); live = created within two intervals.
    pub heartbeat_interval: Duration,
    /// Time limit of one `/v1/info` verification call.
    pub info_timeout: Duration,
    /// Time limit of one forwarded request.
    pub forward_timeout: Duration,
    /// Accept `http://` targets (local development and tests); otherwise only `https://`.
    pub allow_http: bool,
    /// Shortest time between two refreshes triggered by requests for unknown targets.
    pub on_demand_refresh_gap: Duration,
    /// `POST /ohttp` requests a minute per source address, at most (429 beyond; 0 counts as 1).
    /// Default [`DEFAULT_RATE_LIMIT_PER_MIN`]. Applies only when the relay is served through
    /// [`PrivateListener::keeping_ip`] (see the module docs).
    pub rate_limit_per_min: u32,
    /// Length of a forwarding round (`ROUND_MS`): requests are held until the end of the round
    /// in which they arrived, then forwarded together in a random order. Zero (the default)
    /// forwards each request at once.
    pub round: Duration,
    /// Requests held for a round at once, at most (503 beyond; 0 counts as 1). Default
    /// [`DEFAULT_MAX_HELD`]. Unused when `round` is zero.
    pub max_held: usize,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            refresh_interval: Duration::from_secs(60),
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            info_timeout: Duration::from_secs(5),
            forward_timeout: Duration::from_secs(30),
            allow_http: false,
            on_demand_refresh_gap: Duration::from_secs(5),
            rate_limit_per_min: DEFAULT_RATE_LIMIT_PER_MIN,
            round: Duration::ZERO,
            max_held: DEFAULT_MAX_HELD,
        }
    }
}

/// A request held for the end of its round.
struct Held {
    target: String,
    client: reqwest::Client,
    message: Vec<u8>,
    answer: oneshot::Sender<Response>,
}

/// The requests of the current round and the relay's round counters.
#[derive(Default)]
struct Rounds {
    /// Held requests, in arrival order (never forwarded in that order).
    held: Mutex<Vec<Held>>,
    /// Whether the round task runs (started with the first held request).
    started: AtomicBool,
    /// Rounds that forwarded at least one request.
    flushed: AtomicU64,
    /// Requests refused because `max_held` were held.
    refused_full: AtomicU64,
}

/// Fixed one-minute windows, counted from the relay's start; a window's counts are dropped when
/// it ends. In memory only, never logged.
struct RateLimiter {
    per_min: u32,
    start: tokio::time::Instant,
    /// (window number, requests per source in that window).
    counts: Mutex<(u64, HashMap<SourceKey, u32>)>,
}

impl RateLimiter {
    fn new(per_min: u32) -> Self {
        Self {
            per_min: per_min.max(1),
            start: tokio::time::Instant::now(),
            counts: Mutex::new((0, HashMap::new())),
        }
    }

    /// Count one request from `ip`; `Err(seconds until the window ends)` when over the limit.
    fn allow(&self, ip: IpAddr) -> Result<(), u64> {
        self.allow_at(ip, self.start.elapsed())
    }

    /// [`RateLimiter::allow`] at `elapsed` since the start.
    fn allow_at(&self, ip: IpAddr, elapsed: Duration) -> Result<(), u64> {
        let window = elapsed.as_secs() / RATE_WINDOW.as_secs();
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if counts.0 != window {
            counts.0 = window;
            counts.1.clear();
        }
        let n = counts.1.entry(SourceKey::of(ip)).or_insert(0);
        if *n >= self.per_min {
            let window_end = RATE_WINDOW.as_secs() * (window + 1);
            return Err(window_end.saturating_sub(elapsed.as_secs()).max(1));
        }
        *n += 1;
        Ok(())
    }
}

struct RelayState {
    reader: Arc<dyn LedgerReader>,
    config: RelayConfig,
    /// Verified target URL -> its pooled client.
    targets: RwLock<HashMap<String, reqwest::Client>>,
    /// Client for `/v1/info` verification calls.
    verifier: reqwest::Client,
    /// When the last refresh finished (also serialises refreshes).
    last_refresh: tokio::sync::Mutex<Option<tokio::time::Instant>>,
    /// Per-source-address limit of `POST /ohttp`.
    limiter: RateLimiter,
    /// Whether the "no peer address, no rate limit" warning was given.
    warned_no_peer: AtomicBool,
    /// Requests forwarded to a relayer and answered (an aggregate; nothing about clients).
    forwarded: AtomicU64,
    /// Requests held for the current round, and round counters.
    rounds: Rounds,
}

/// The OHTTP relay. Cheap to clone (shared state).
#[derive(Clone)]
pub struct OhttpRelay {
    state: Arc<RelayState>,
}

impl std::fmt::Debug for OhttpRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OhttpRelay")
            .field("targets", &self.targets())
            .finish()
    }
}

fn no_redirects(timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
}

#[derive(serde::Deserialize)]
struct InfoAddress {
    address: String,
}

impl OhttpRelay {
    /// A relay reading heartbeats through `reader`. It starts with no verified target: call
    /// [`OhttpRelay::refresh`] or [`OhttpRelay::spawn_refresh`].
    pub fn new(reader: Arc<dyn LedgerReader>, config: RelayConfig) -> Result<Self, OhttpError> {
        let verifier = no_redirects(config.info_timeout)
            .build()
            .map_err(|e| OhttpError::from(privsvc_rt::HttpError::from(e)))?;
        Ok(Self {
            state: Arc::new(RelayState {
                reader,
                targets: RwLock::new(HashMap::new()),
                verifier,
                last_refresh: tokio::sync::Mutex::new(None),
                limiter: RateLimiter::new(config.rate_limit_per_min),
                warned_no_peer: AtomicBool::new(false),
                forwarded: AtomicU64::new(0),
                rounds: Rounds::default(),
                config,
            }),
        })
    }

    /// How many requests the relay has forwarded to a relayer and returned the relayer's answer
    /// for (refused requests and relayer failures are not counted). An aggregate count only.
    pub fn forwarded(&self) -> u64 {
        self.state.forwarded.load(Ordering::Relaxed)
    }

    /// Rounds that forwarded at least one request (zero when `round` is zero).
    pub fn rounds(&self) -> u64 {
        self.state.rounds.flushed.load(Ordering::Relaxed)
    }

    /// Requests held for the current round now.
    pub fn held(&self) -> usize {
        self.state
            .rounds
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// The verified target URLs, sorted.
    pub fn targets(&self) -> Vec<String> {
        let targets = self.state.targets.read().unwrap_or_else(|p| p.into_inner());
        let mut urls: Vec<String> = targets.keys().cloned().collect();
        urls.sort();
        urls
    }

    /// Rebuild the verified target set from the live heartbeats; returns its size. On a ledger
    /// error the previous set is kept.
    pub async fn refresh(&self) -> Result<usize, OhttpError> {
        let mut last = self.state.last_refresh.lock().await;
        let result = self.rebuild().await;
        *last = Some(tokio::time::Instant::now());
        result
    }

    /// Refresh unless a refresh finished less than `on_demand_refresh_gap` ago (or is running:
    /// then wait for it).
    async fn refresh_on_demand(&self) {
        let mut last = self.state.last_refresh.lock().await;
        let gap = self.state.config.on_demand_refresh_gap;
        if last.is_some_and(|t| t.elapsed() < gap) {
            return;
        }
        if let Err(e) = self.rebuild().await {
            tracing::warn!(error = %e, "relay target refresh failed; keeping the previous set");
        }
        *last = Some(tokio::time::Instant::now());
    }

    async fn rebuild(&self) -> Result<usize, OhttpError> {
        let state = &self.state;
        let heartbeats =
            live_heartbeats(state.reader.as_ref(), state.config.heartbeat_interval).await?;
        let candidates: HashSet<(String, Address)> = heartbeats
            .into_iter()
            .filter(|h| state.config.allow_http || h.url.starts_with("https://"))
            .map(|h| (h.url, h.creator))
            .collect();
        let checks = candidates.into_iter().map(|(url, creator)| async move {
            let ok = self.verify(&url, creator).await;
            if !ok {
                tracing::debug!(target_url = %url, "relay target not verified");
            }
            ok.then_some(url)
        });
        // At most VERIFY_CONCURRENCY `/v1/info` calls at a time, however many heartbeats exist.
        let verified: HashSet<String> = futures::stream::iter(checks)
            .buffer_unordered(VERIFY_CONCURRENCY)
            .filter_map(|url| async move { url })
            .collect()
            .await;
        let mut next = HashMap::new();
        {
            let current = state.targets.read().unwrap_or_else(|p| p.into_inner());
            for url in verified {
                let client = match current.get(&url) {
                    Some(c) => c.clone(),
                    None => no_redirects(state.config.forward_timeout)
                        .pool_max_idle_per_host(1)
                        .build()
                        .map_err(|e| OhttpError::from(privsvc_rt::HttpError::from(e)))?,
                };
                next.insert(url, client);
            }
        }
        let count = next.len();
        *state.targets.write().unwrap_or_else(|p| p.into_inner()) = next;
        tracing::info!(targets = count, "relay targets refreshed");
        Ok(count)
    }

    /// Whether `GET {url}/v1/info` answers `creator` as its address.
    async fn verify(&self, url: &str, creator: Address) -> bool {
        let Ok(response) = self
            .state
            .verifier
            .get(format!("{url}/v1/info"))
            .send()
            .await
        else {
            return false;
        };
        if !response.status().is_success() {
            return false;
        }
        let Ok(body) = read_response(response, MAX_INFO_BYTES).await else {
            return false;
        };
        serde_json::from_slice::<InfoAddress>(&body)
            .ok()
            .and_then(|info| info.address.parse::<Address>().ok())
            .is_some_and(|address| address == creator)
    }

    /// The pooled client of a verified target.
    fn client_for(&self, url: &str) -> Option<reqwest::Client> {
        let targets = self.state.targets.read().unwrap_or_else(|p| p.into_inner());
        targets.get(url).cloned()
    }

    /// Refresh now and then every `refresh_interval`, until the task is aborted.
    pub fn spawn_refresh(&self) -> tokio::task::JoinHandle<()> {
        let relay = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(relay.state.config.refresh_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = relay.refresh().await {
                    tracing::warn!(error = %e, "relay target refresh failed; keeping the previous set");
                }
            }
        })
    }

    /// Serve the relay on `tcp` through [`PrivateListener::keeping_ip`] (so that the rate limit applies),
    /// until the task is dropped or an I/O error occurs.
    pub async fn serve(&self, tcp: TcpListener) -> std::io::Result<()> {
        axum::serve(PrivateListener::keeping_ip(tcp), self.into_make_service()).await
    }

    /// [`OhttpRelay::router`] as a service for `axum::serve` with a [`PrivateListener::keeping_ip`], carrying
    /// each connection's [`PeerIp`] to the rate limit:
    /// `axum::serve(PrivateListener::keeping_ip(tcp), relay.into_make_service())` (add
    /// `.with_graceful_shutdown(..)` as needed). To add layers, build it yourself:
    /// `relay.router().layer(..).into_make_service_with_connect_info::<PeerIp>()`.
    pub fn into_make_service(&self) -> IntoMakeServiceWithConnectInfo<Router, PeerIp> {
        self.router()
            .into_make_service_with_connect_info::<PeerIp>()
    }

    /// `GET /metrics`: the relay's counters in the Prometheus text format (aggregates only).
    /// Serve it on a separate, private listener, never next to [`OhttpRelay::router`]: its
    /// counters would tell anyone when requests arrive.
    pub fn metrics_router(&self) -> Router {
        Router::new()
            .route("/metrics", get(metrics))
            .with_state(self.clone())
    }

    /// The relay's HTTP interface: `POST /ohttp` and `GET /healthz` (CORS open). Served without
    /// [`PrivateListener::keeping_ip`] it has no peer address and no rate limit (see the module docs).
    pub fn router(&self) -> Router {
        Router::new()
            .route("/ohttp", post(forward))
            .route("/healthz", get(healthz))
            .layer(CorsLayer::permissive())
            .with_state(self.clone())
    }
}

async fn healthz(State(relay): State<OhttpRelay>) -> Response {
    let targets = relay
        .state
        .targets
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .len();
    Json(serde_json::json!({ "ok": true, "role": "ohttp-relay", "targets": targets }))
        .into_response()
}

async fn metrics(State(relay): State<OhttpRelay>) -> Response {
    let rounds = &relay.state.rounds;
    let targets = relay.targets().len();
    let lines = [
        ("privsvc_relay_forwarded_total", "counter", "Requests forwarded to a relayer and answered (dummies included: the relay cannot tell them).", relay.forwarded()),
        ("privsvc_relay_rounds_total", "counter", "Rounds that forwarded at least one request.", relay.rounds()),
        ("privsvc_relay_held", "gauge", "Requests held for the current round.", relay.held() as u64),
        ("privsvc_relay_refused_full_total", "counter", "Requests refused (503) because too many were held.", rounds.refused_full.load(Ordering::Relaxed)),
        ("privsvc_relay_targets", "gauge", "Verified relayers.", targets as u64),
    ];
    let mut out = String::new();
    for (name, kind, help, value) in lines {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        ));
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

/// The per-address check of `POST /ohttp`: `Some(429)` over the limit. Without a peer address
/// (not served through [`PrivateListener::keeping_ip`]) nothing can be counted: warn once, let it pass.
fn over_limit(relay: &OhttpRelay, request: &Request) -> Option<Response> {
    let peer = request
        .extensions()
        .get::<ConnectInfo<PeerIp>>()
        .and_then(|ConnectInfo(peer)| peer.ip());
    let Some(ip) = peer else {
        if !relay.state.warned_no_peer.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "relay served without PrivateListener::keeping_ip: no peer address, so no per-address rate limit"
            );
        }
        return None;
    };
    let retry_after = relay.state.limiter.allow(ip).err()?;
    let mut response = json_error(
        StatusCode::TOO_MANY_REQUESTS,
        &format!(
            "more than {} requests a minute from this address; retry in {retry_after} s",
            relay.state.limiter.per_min
        ),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    Some(response)
}

async fn forward(State(relay): State<OhttpRelay>, request: Request) -> Response {
    // Counted first, whatever follows: refused requests (unknown targets, which may trigger a
    // refresh) cost the relay work too.
    if let Some(refused) = over_limit(&relay, &request) {
        return refused;
    }
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let Some(raw_target) = headers.get(TARGET_HEADER).and_then(|v| v.to_str().ok()) else {
        return json_error(StatusCode::BAD_REQUEST, "missing x-privsvc-target header");
    };
    let Ok(target) = normalize_relayer_url(raw_target) else {
        return json_error(StatusCode::FORBIDDEN, "target not verified");
    };
    let client = match relay.client_for(&target) {
        Some(client) => client,
        None => {
            relay.refresh_on_demand().await;
            match relay.client_for(&target) {
                Some(client) => client,
                None => return json_error(StatusCode::FORBIDDEN, "target not verified"),
            }
        }
    };
    if !has_content_type(&headers, CONTENT_TYPE_OHTTP_REQ) {
        return json_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content type must be message/ohttp-req",
        );
    }
    if declared_too_large(&headers, MAX_ENCAPSULATED_BYTES) {
        return too_large();
    }
    let message = match read_body(body, MAX_ENCAPSULATED_BYTES).await {
        Ok(m) => m,
        Err(BodyError::TooLarge) => return too_large(),
        Err(BodyError::Broken) => {
            return json_error(StatusCode::BAD_REQUEST, "request body could not be read")
        }
    };
    if relay.state.config.round.is_zero() {
        return send(&relay, &client, &target, message).await;
    }
    let Some(answer) = relay.hold(target, client, message) else {
        relay
            .state
            .rounds
            .refused_full
            .fetch_add(1, Ordering::Relaxed);
        let mut response = json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the relay holds too many requests for its round; retry shortly",
        );
        let retry_after = relay.state.config.round.as_secs().max(1);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        return response;
    };
    answer.await.unwrap_or_else(|_| relayer_failed())
}

impl OhttpRelay {
    /// Hold a request for the end of the current round; `None` when `max_held` are held. The
    /// receiver gets the relayer's answer (or the relay's error) once it is forwarded.
    fn hold(
        &self,
        target: String,
        client: reqwest::Client,
        message: Vec<u8>,
    ) -> Option<oneshot::Receiver<Response>> {
        let (answer, receiver) = oneshot::channel();
        {
            let mut held = self
                .state
                .rounds
                .held
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if held.len() >= self.state.config.max_held.max(1) {
                return None;
            }
            held.push(Held {
                target,
                client,
                message,
                answer,
            });
        }
        if !self.state.rounds.started.swap(true, Ordering::SeqCst) {
            spawn_rounds(Arc::downgrade(&self.state), self.state.config.round);
        }
        Some(receiver)
    }
}

/// The round task: at the end of every round (a fixed period from the first held request),
/// take the held requests, shuffle them (OS RNG) and start forwarding them all in that order.
/// Ends when the relay is dropped.
fn spawn_rounds(state: Weak<RelayState>, round: Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + round, round);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(state) = state.upgrade() else {
                return;
            };
            let mut round =
                std::mem::take(&mut *state.rounds.held.lock().unwrap_or_else(|p| p.into_inner()));
            if round.is_empty() {
                continue;
            }
            round.shuffle(&mut OsRng);
            state.rounds.flushed.fetch_add(1, Ordering::Relaxed);
            let relay = OhttpRelay { state };
            for held in round {
                let relay = relay.clone();
                tokio::spawn(async move {
                    let answer = send(&relay, &held.client, &held.target, held.message).await;
                    // The client may have gone meanwhile: nothing to answer then.
                    let _ = held.answer.send(answer);
                });
            }
        }
    });
}

/// Forward one encapsulated request to `target`'s gateway and return its answer (502 when the
/// relayer fails).
async fn send(
    relay: &OhttpRelay,
    client: &reqwest::Client,
    target: &str,
    message: Vec<u8>,
) -> Response {
    let answer = client
        .post(format!("{target}/v1/ohttp"))
        .header(header::CONTENT_TYPE, CONTENT_TYPE_OHTTP_REQ)
        .body(message)
        .send()
        .await;
    let Ok(answer) = answer else {
        return relayer_failed();
    };
    let status = answer.status();
    if status.is_server_error() {
        return relayer_failed();
    }
    let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
    let Ok(body) = read_response(answer, MAX_RESPONSE_BYTES).await else {
        return relayer_failed();
    };
    relay.state.forwarded.fetch_add(1, Ordering::Relaxed);
    tracing::trace!(status = status.as_u16(), "relay forwarded a request");
    let mut response = (status, body).into_response();
    if let Some(ct) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    response
}

fn too_large() -> Response {
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("encapsulated request over {MAX_ENCAPSULATED_BYTES} bytes"),
    )
}

fn relayer_failed() -> Response {
    json_error(StatusCode::BAD_GATEWAY, "the relayer failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_ipv6_slash_64_is_one_source() {
        // The keying itself is tested in `crate::source`; here: the limiter uses it.
        let limiter = RateLimiter::new(2);
        let at = Duration::from_secs;
        for i in 1..=2 {
            let ip: IpAddr = format!("2001:db8:1:2::{i:x}").parse().unwrap();
            assert_eq!(limiter.allow_at(ip, at(1)), Ok(()));
        }
        for i in 3..=50 {
            let ip: IpAddr = format!("2001:db8:1:2:{i:x}::{i:x}").parse().unwrap();
            assert!(limiter.allow_at(ip, at(1)).is_err());
        }
        let next: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(limiter.allow_at(next, at(1)), Ok(()));
    }

    #[test]
    fn peer_ips_never_print() {
        let peer = PeerIp::from("192.0.2.7".parse::<IpAddr>().unwrap());
        assert_eq!(format!("{peer:?} {peer}"), "<peer> <peer>");
    }

    #[test]
    fn limits_per_source_per_window() {
        let limiter = RateLimiter::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let at = Duration::from_secs;
        assert_eq!(limiter.allow_at(a, at(0)), Ok(()));
        assert_eq!(limiter.allow_at(a, at(1)), Ok(()));
        assert_eq!(limiter.allow_at(a, at(15)), Err(45));
        assert_eq!(limiter.allow_at(b, at(15)), Ok(()));
        // The next window forgets the counts.
        assert_eq!(limiter.allow_at(a, at(60)), Ok(()));
        assert_eq!(limiter.counts.lock().unwrap().1.len(), 1);
        assert_eq!(RateLimiter::new(0).per_min, 1);
    }
}
