//! The OHTTP relay: forwards encapsulated requests to verified relayers' `/v1/ohttp`.
//!
//! A target is verified when a live heartbeat on the ledger names its URL and the relayer's
//! `GET /v1/info` answers the heartbeat creator's address. The set is refreshed periodically
//! ([`OhttpRelay::spawn_refresh`]), and on demand when a request names an unknown target (at
//! most once per `on_demand_refresh_gap`, so a relayer that has just started is reachable
//! without waiting for the next period). The relay forwards only the body and the content type (no
//! client header at all), logs no client address, never follows redirects and keeps one pooled
//! HTTP client per target.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use alloy_primitives::Address;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use privsvc_ledger::LedgerReader;
use tower_http::cors::CorsLayer;

use crate::heartbeat::{live_heartbeats, DEFAULT_HEARTBEAT_INTERVAL};
use crate::http_util::{
    declared_too_large, has_content_type, json_error, normalize_relayer_url, read_body,
    read_response, BodyError,
};
use crate::{
    OhttpError, CONTENT_TYPE_OHTTP_REQ, MAX_ENCAPSULATED_BYTES, MAX_RESPONSE_BYTES, TARGET_HEADER,
};

/// Largest `/v1/info` answer read during verification.
const MAX_INFO_BYTES: usize = 64 * 1024;
/// Verification calls in flight at once during a refresh.
const VERIFY_CONCURRENCY: usize = 16;

/// Settings of an [`OhttpRelay`].
#[derive(Debug, Clone)]
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
        }
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
            .map_err(|e| OhttpError::Transport(e.to_string()))?;
        Ok(Self {
            state: Arc::new(RelayState {
                reader,
                config,
                targets: RwLock::new(HashMap::new()),
                verifier,
                last_refresh: tokio::sync::Mutex::new(None),
            }),
        })
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
                        .map_err(|e| OhttpError::Transport(e.to_string()))?,
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

    /// The relay's HTTP interface: `POST /ohttp` and `GET /healthz` (CORS open).
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

async fn forward(State(relay): State<OhttpRelay>, headers: HeaderMap, body: Body) -> Response {
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
        "encapsulated request over 128 KB",
    )
}

fn relayer_failed() -> Response {
    json_error(StatusCode::BAD_GATEWAY, "the relayer failed")
}
