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
//! Idempotence (docs/PROTOCOL.md §7): a valid submission whose sealed envelope is already stored
//! (queued, in flight, written or failed) is answered 202 with the existing id, whatever its token:
//! nothing is stored, no token is spent, and the answer is the one the first submission got. The
//! store finds the digest before it spends a token; a refusal (no, invalid or spent token, full
//! queue) is answered only after the digest was looked up. The first submission's token,
//! minAnonymity and maxHoldMs stand.
//!
//! Privacy: no handler logs the peer address or any part of a body; the peer address is used
//! only by the in-memory rate limiter when tokens are off. A request inside `POST /v1/ohttp`
//! from an address not in `OHTTP_RELAY_IPS` carries that address ([`OhttpSource`]) to the
//! limiter, so encapsulating a submission does not escape the per-address limit.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::config::TokenMode;
use crate::entities::API_VERSION;
use crate::state::RelayerState;
use crate::store::{envelope_sha256, SpentToken, StoreError, StoredRecord, StoredState};
use crate::tokencheck::{check_token, TokenRefusal};
use crate::validate::{validate_at, Limits};
use privsvc_ohttp::PeerIp;

/// Submit body limit (docs/PROTOCOL.md §9.3: 64 KiB).
pub const MAX_SUBMIT_BYTES: usize = 64 * 1024;

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

/// The API routes (without `/v1/ohttp`, the issuer and CORS, which [`crate::Relayer`] adds).
pub fn api_router(shared: Arc<RelayerState>) -> Router {
    Router::new()
        .route("/v1/info", get(info))
        .route("/v1/records", post(submit))
        .route("/v1/records/{id}", get(status))
        .route("/healthz", get(healthz))
        .with_state(shared)
}

/// `GET /metrics` and the exact `GET /healthz`, for the `METRICS_BIND` listener.
pub fn metrics_router(shared: Arc<RelayerState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(exact_healthz))
        .with_state(shared)
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
    shared: Arc<RelayerState>,
    gateway: Option<Arc<privsvc_ohttp::OhttpGateway>>,
    inner: Router,
}

/// `POST /v1/ohttp`: opens the request with `gateway` (404 when `None`) and serves it with
/// `inner`; a request from an address outside `OHTTP_RELAY_IPS` carries [`OhttpSource`].
pub fn ohttp_router(
    shared: Arc<RelayerState>,
    gateway: Option<Arc<privsvc_ohttp::OhttpGateway>>,
    inner: Router,
) -> Router {
    Router::new()
        .route("/v1/ohttp", post(ohttp))
        .with_state(OhttpState {
            shared,
            gateway,
            inner,
        })
}

async fn ohttp(State(o): State<OhttpState>, req: Request) -> Response {
    let source = req
        .extensions()
        .get::<ConnectInfo<PeerIp>>()
        .and_then(|c| c.0.ip())
        .filter(|ip| !o.shared.cfg.limits.ohttp_relay_ips.contains(ip));
    let (parts, body) = req.into_parts();
    let inner = match source {
        Some(ip) => o.inner.clone().layer(Extension(OhttpSource(ip))),
        None => o.inner.clone(),
    };
    privsvc_ohttp::serve_ohttp(o.gateway.as_deref(), &inner, &parts.headers, body).await
}

/// The relayer info document.
pub fn info_json(s: &RelayerState) -> Value {
    let mut v = json!({
        "address": s.address.to_checksum(None),
        "version": API_VERSION,
        "chainId": s.chain_id,
        "minBatch": s.cfg.batching.min_batch,
        "maxWaitMs": u64::try_from(s.cfg.batching.max_wait.as_millis()).unwrap_or(u64::MAX),
        "minIntervalBlocks": s.cfg.batching.min_interval_blocks,
        "tokensRequired": s.cfg.tokens == TokenMode::Required,
        "maxMinAnonymity": s.cfg.batching.max_min_anonymity,
        "maxHoldMs": s.cfg.batching.max_hold_ms(),
    });
    if s.cfg.tokens == TokenMode::Required {
        if let Some(i) = s.issuer {
            v["issuer"] = Value::String(i.to_checksum(None));
        }
        if let Some(u) = &s.issuer_url {
            v["issuerUrl"] = Value::String(u.clone());
        }
    }
    if let Some(k) = &s.ohttp_key {
        v["ohttpKey"] = Value::String(k.clone());
    }
    v
}

async fn info(State(s): State<Arc<RelayerState>>) -> Json<Value> {
    Json(info_json(&s))
}

async fn submit(State(s): State<Arc<RelayerState>>, req: Request) -> Response {
    let peer = request_source(req.extensions());
    let (status, response) = match accept(&s, peer, req.into_body()).await {
        Ok(id) => (
            StatusCode::ACCEPTED,
            (StatusCode::ACCEPTED, Json(json!({ "id": id }))).into_response(),
        ),
        Err((status, reason)) => (status, error(status, reason)),
    };
    s.metrics.submission(status.as_u16());
    tracing::debug!(status = status.as_u16(), "submission answered");
    response
}

type Refusal = (StatusCode, String);

/// The id of the stored record with this envelope digest when there is one (a resubmission
/// gets the first answer), else `refusal`.
fn existing_or(
    s: &RelayerState,
    digest: &[u8; 32],
    refusal: (StatusCode, String),
) -> Result<String, (StatusCode, String)> {
    match s.store.id_of_envelope(digest) {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(refusal),
        Err(e) => {
            tracing::error!(error = %e, "cannot read the store");
            Err(refusal)
        }
    }
}

/// The token a submission spends (`None` with tokens off), or the 402/403 refusal.
async fn token_of(
    s: &RelayerState,
    sub: &crate::validate::Submission,
    now: u64,
) -> Result<Option<SpentToken>, (StatusCode, String)> {
    Ok(match (s.cfg.tokens, &sub.token) {
        (TokenMode::Off, _) => None,
        (TokenMode::Required, None) => {
            return Err((
                StatusCode::PAYMENT_REQUIRED,
                "this relayer requires a token and none was sent".into(),
            ))
        }
        (TokenMode::Required, Some(t)) => {
            let issuer = s
                .issuer
                .ok_or((StatusCode::FORBIDDEN, "no issuer is configured".to_string()))?;
            match check_token(&s.issuer_keys, s.ledger.as_ref(), issuer, &sub.app, t, now).await {
                Ok((id, epoch)) => Some(SpentToken {
                    id,
                    epoch: u64::from(epoch),
                }),
                Err(TokenRefusal::Refused(r)) => return Err((StatusCode::FORBIDDEN, r)),
                Err(e @ TokenRefusal::Ledger(_)) => {
                    s.metrics.ledger_error();
                    return Err((StatusCode::FORBIDDEN, e.to_string()));
                }
            }
        }
    })
}

async fn accept(
    s: &RelayerState,
    peer: Option<std::net::IpAddr>,
    body: Body,
) -> Result<String, Refusal> {
    let bytes = axum::body::to_bytes(body, MAX_SUBMIT_BYTES)
        .await
        .map_err(|_| (StatusCode::PAYLOAD_TOO_LARGE, "body over 64 KB".to_string()))?;
    // The timeline for the rate limit's windows and the record's acceptance (its batch window
    // and hold); the wall clock for what the protocol names in wall time (the envelope's hour
    // window, token epochs).
    let now = s.time.now_ms();
    let wall = s.time.wall_ms();
    if s.cfg.tokens == TokenMode::Off {
        if let Some(ip) = peer {
            if !s.limiter.allow(ip, now) {
                return Err((
                    StatusCode::TOO_MANY_REQUESTS,
                    format!(
                        "more than {} submissions a minute from this address",
                        s.cfg.limits.submissions_per_min
                    ),
                ));
            }
        }
    }
    let limits = Limits {
        relayer: s.address,
        max_min_anonymity: s.cfg.batching.max_min_anonymity,
        max_hold_ms: s.cfg.batching.max_hold_ms(),
    };
    let sub =
        validate_at(&bytes, &limits, wall / 1000).map_err(|r| (StatusCode::BAD_REQUEST, r))?;
    // The same sealed envelope again gets the first answer, nothing stored, no token spent:
    // the store's writer finds the digest before it looks at the token, and every refusal
    // below first looks the digest up ([`existing_or`]), so a copy without a token, with a
    // spent or invalid one, or arriving while the queue is full still gets its id. A new
    // envelope (the common case) costs no extra read.
    let envelope_digest = if s.cfg.leaks().resubmissions_stored_again {
        // The lab's leaky setting: no two submissions share a digest, so none is deduplicated.
        rand::random()
    } else {
        envelope_sha256(&sub.envelope)
    };
    let project = crate::project::project_key(&sub.attributes);
    let token = match token_of(s, &sub, wall).await {
        Ok(token) => token,
        Err(refusal) => return existing_or(s, &envelope_digest, refusal),
    };
    // Keep the disk's last bytes for recording the batches of records already accepted.
    // (Not logged per submission: the anchor task logs when the floor is crossed.)
    if crate::diskspace::below_floor(&s.cfg.data_dir, s.cfg.limits.min_free_bytes).is_some() {
        return existing_or(
            s,
            &envelope_digest,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "the relayer's disk is nearly full; it accepts no new records for now".into(),
            ),
        );
    }
    // Reserve a queue slot.
    let before = s.occupancy.fetch_add(1, Ordering::SeqCst);
    if before >= s.cfg.limits.queue_capacity {
        s.finished(1);
        return existing_or(
            s,
            &envelope_digest,
            (StatusCode::SERVICE_UNAVAILABLE, "queue full".into()),
        );
    }
    let record = StoredRecord {
        id: uuid::Uuid::new_v4().to_string(),
        seq: s.seq.fetch_add(1, Ordering::SeqCst),
        app: sub.app,
        project,
        envelope_digest,
        owner: sub.owner,
        envelope: sub.envelope,
        attributes: sub.attributes.canonical_json(),
        exp_seconds: sub.exp_seconds,
        min_anonymity: sub.min_anonymity,
        max_hold_ms: sub.max_hold_ms,
        token,
        accepted_ms: now,
    };
    let id = record.id.clone();
    let record = match s.store.insert(record).await {
        Ok(r) => r,
        Err(StoreError::AlreadyStored(id)) => {
            // An identical submission was stored meanwhile (e.g. in the same group commit).
            s.finished(1);
            return Ok(id);
        }
        Err(StoreError::TokenSpent) => {
            s.finished(1);
            return existing_or(
                s,
                &envelope_digest,
                (StatusCode::FORBIDDEN, "token already spent".into()),
            );
        }
        Err(e) => {
            s.finished(1);
            tracing::error!(error = %e, "cannot store a submission");
            return Err((
                StatusCode::SERVICE_UNAVAILABLE,
                "the queue cannot store the record right now".into(),
            ));
        }
    };
    s.queue
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(record);
    s.notify.notify_one();
    Ok(id)
}

async fn status(State(s): State<Arc<RelayerState>>, Path(id): Path<String>) -> Response {
    // On the ledger but not recorded yet (the store cannot write): never "queued".
    let unrecorded = s
        .unrecorded
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&id)
        .cloned();
    // Otherwise always the store, never the in-memory queue: every id costs one indexed read,
    // whatever its state and however many records are queued.
    let state = match unrecorded {
        Some(w) => Ok(Some(StoredState::Written(w))),
        None => s.store.state(&id),
    };
    let (status, body) = crate::status::answer(&id, state);
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// The public health record: `queue` rounded up, no ledger call (see [`crate::health`]).
async fn healthz(State(s): State<Arc<RelayerState>>) -> Response {
    Json(crate::health::public_health(&s).await).into_response()
}

/// The health record with the exact queue length (`METRICS_BIND` only).
async fn exact_healthz(State(s): State<Arc<RelayerState>>) -> Response {
    Json(crate::health::health(&s).await).into_response()
}

async fn metrics(State(s): State<Arc<RelayerState>>) -> Response {
    let body = s.metrics.render(s.occupancy.load(Ordering::SeqCst));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// JSON 404 for unknown paths.
pub async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "no such endpoint")
}
