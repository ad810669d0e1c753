//! The relayer's HTTP API (docs/PROTOCOL.md §9.1): `GET /v1/info`, `POST /v1/records`,
//! `GET /v1/records/{id}`, `GET /healthz`, and `POST /v1/ohttp` ([`ohttp_router`]). `GET
//! /metrics` is served only on its own listener (`METRICS_BIND`, [`metrics_router`]), never on
//! the public one: its counters would tell anyone when each submission was accepted. The
//! public `/healthz` rounds `queue` up to a multiple of 100; the exact record is served on
//! `METRICS_BIND` too. A status answer has one shape and length in every state and gives no
//! queue position (`crate::status`). Errors are `{ "error": reason }`; a 503 to a submission (a full queue,
//! `DATA_DIR` below `MIN_FREE_BYTES`, a store that cannot write) carries `Retry-After`
//! ([`RETRY_AFTER_SECS`]). A record the relayer knows is on the ledger answers `written`, also
//! while its store cannot record that yet.
//!
//! A submission goes through the intake ([`crate::intake`]: validation, tokens, limits,
//! idempotence); a valid resubmission of a stored envelope is answered 202 with the existing id.
//!
//! Privacy: no handler logs the peer address or any part of a body; the peer address is used
//! only by the in-memory rate limiter when tokens are off. A request inside `POST /v1/ohttp`
//! from an address not in `OHTTP_RELAY_IPS` carries that address ([`OhttpSource`]) to the
//! limiter, so encapsulating a submission does not escape the per-address limit.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::config::{RelayerConfig, TokenMode};
use crate::entities::API_VERSION;
use crate::health::HealthView;
use crate::identity::Identity;
use crate::intake::Intake;
use crate::metrics::Metrics;
use crate::occupancy::Occupancy;
use crate::status::Statuses;
use privsvc_ohttp::PeerIp;

/// `Retry-After` (seconds) of a submission refused with 503: the queue is full, or the store
/// cannot take it (a full disk, `DATA_DIR` below `MIN_FREE_BYTES`).
pub const RETRY_AFTER_SECS: u64 = 30;

fn error(status: StatusCode, reason: impl Into<String>) -> Response {
    let mut response = (status, Json(json!({ "error": reason.into() }))).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, RETRY_AFTER_SECS.into());
    }
    response
}

/// The API routes (without `/v1/ohttp`, the issuer and CORS, which [`crate::Relayer`] adds):
/// each handler gets only what it reads.
pub(crate) fn api_router(
    info: Arc<Value>,
    intake: Arc<Intake>,
    statuses: Statuses,
    health: HealthView,
) -> Router {
    Router::new()
        .route("/v1/info", get(info_document))
        .with_state(info)
        .merge(
            Router::new()
                .route("/v1/records", post(submit))
                .with_state(intake),
        )
        .merge(
            Router::new()
                .route("/v1/records/{id}", get(status))
                .with_state(statuses),
        )
        .merge(
            Router::new()
                .route("/healthz", get(healthz))
                .with_state(health),
        )
}

/// `GET /metrics` and the exact `GET /healthz`, for the `METRICS_BIND` listener.
pub(crate) fn metrics_router(
    metrics: Arc<Metrics>,
    occupancy: Arc<Occupancy>,
    health: HealthView,
) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .with_state((metrics, occupancy))
        .merge(
            Router::new()
                .route("/healthz", get(exact_healthz))
                .with_state(health),
        )
}

/// The source address of an OHTTP request that did not come from a configured OHTTP relay,
/// attached to the encapsulated request so that a submission or an issuer request inside it
/// counts against that address's limit like a direct one.
#[derive(Clone, Copy)]
pub struct OhttpSource(IpAddr);

impl OhttpSource {
    /// The address that posted the `/v1/ohttp` request (only the rate limiters may use it).
    pub(crate) fn ip(self) -> IpAddr {
        self.0
    }
}

/// The source a rate limit counts a request against: the connection's address, or for a
/// request inside `POST /v1/ohttp` the address that posted it ([`OhttpSource`]); `None` for
/// requests from a configured OHTTP relay (it limits its own clients) and for in-process
/// requests without an address.
pub(crate) fn request_source(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<PeerIp>>()
        .and_then(|c| c.0.ip())
        .or_else(|| extensions.get::<OhttpSource>().map(|s| s.ip()))
}

#[derive(Clone)]
struct OhttpState {
    /// `OHTTP_RELAY_IPS`.
    relay_ips: Arc<[IpAddr]>,
    gateway: Option<Arc<privsvc_ohttp::OhttpGateway>>,
    inner: Router,
}

/// `POST /v1/ohttp`: opens the request with `gateway` (404 when `None`) and serves it with
/// `inner`; a request from an address outside `relay_ips` (`OHTTP_RELAY_IPS`) carries
/// [`OhttpSource`].
pub(crate) fn ohttp_router(
    relay_ips: &[IpAddr],
    gateway: Option<Arc<privsvc_ohttp::OhttpGateway>>,
    inner: Router,
) -> Router {
    Router::new()
        .route("/v1/ohttp", post(ohttp))
        .with_state(OhttpState {
            relay_ips: relay_ips.into(),
            gateway,
            inner,
        })
}

async fn ohttp(State(o): State<OhttpState>, req: Request) -> Response {
    let source = req
        .extensions()
        .get::<ConnectInfo<PeerIp>>()
        .and_then(|c| c.0.ip())
        .filter(|ip| !o.relay_ips.contains(ip));
    let (parts, body) = req.into_parts();
    let inner = match source {
        Some(ip) => o.inner.clone().layer(Extension(OhttpSource(ip))),
        None => o.inner.clone(),
    };
    privsvc_ohttp::serve_ohttp(o.gateway.as_deref(), &inner, &parts.headers, body).await
}

/// The relayer info document (fixed at start).
pub(crate) fn info_json(id: &Identity, cfg: &RelayerConfig) -> Value {
    let mut v = json!({
        "address": id.address.to_checksum(None),
        "version": API_VERSION,
        "chainId": id.chain_id,
        "minBatch": cfg.batching.min_batch,
        "maxWaitMs": u64::try_from(cfg.batching.max_wait.as_millis()).unwrap_or(u64::MAX),
        "minIntervalBlocks": cfg.batching.min_interval_blocks,
        "tokensRequired": cfg.tokens == TokenMode::Required,
        "maxMinAnonymity": cfg.batching.max_min_anonymity,
        "maxHoldMs": cfg.batching.max_hold_ms(),
    });
    if cfg.tokens == TokenMode::Required {
        if let Some(i) = id.issuer {
            v["issuer"] = Value::String(i.to_checksum(None));
        }
        if let Some(u) = &id.issuer_url {
            v["issuerUrl"] = Value::String(u.clone());
        }
    }
    if let Some(k) = &id.ohttp_key {
        v["ohttpKey"] = Value::String(k.clone());
    }
    v
}

async fn info_document(State(info): State<Arc<Value>>) -> Json<Value> {
    Json(info.as_ref().clone())
}

async fn submit(State(intake): State<Arc<Intake>>, req: Request) -> Response {
    let peer = request_source(req.extensions());
    let (status, response) = match intake.accept(peer, req.into_body()).await {
        Ok(id) => (
            StatusCode::ACCEPTED,
            (StatusCode::ACCEPTED, Json(json!({ "id": id }))).into_response(),
        ),
        Err((status, reason)) => (status, error(status, reason)),
    };
    intake.metrics.submission(status.as_u16());
    tracing::debug!(status = status.as_u16(), "submission answered");
    response
}

async fn status(State(statuses): State<Statuses>, Path(id): Path<String>) -> Response {
    let (status, body) = statuses.answer(&id);
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// The public health record: `queue` rounded up, no ledger call (see [`crate::health`]).
async fn healthz(State(health): State<HealthView>) -> Response {
    Json(health.public_health()).into_response()
}

/// The health record with the exact queue length (`METRICS_BIND` only).
async fn exact_healthz(State(health): State<HealthView>) -> Response {
    Json(health.health()).into_response()
}

async fn metrics_text(
    State((metrics, occupancy)): State<(Arc<Metrics>, Arc<Occupancy>)>,
) -> Response {
    let body = metrics.render(occupancy.get());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// JSON 404 for unknown paths.
pub async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "no such endpoint")
}
