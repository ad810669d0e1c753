//! The token issuer mounted on a relayer with `ISSUER=on`: its routes behind a per-source
//! rate limit (`ISSUER_RATE_LIMIT_PER_MIN`), and its key schedule as a background task.
//!
//! Limit (docs/PROTOCOL.md §5.3): a request is counted against its connection's address, or, inside
//! `POST /v1/ohttp`, against the address that posted it, unless that address is a configured
//! OHTTP relay (`OHTTP_RELAY_IPS`), exactly as for submissions; IPv6 sources count per /64
//! ([`crate::ratelimit`]). Otherwise anyone could get unlimited blind signatures by
//! encapsulating issue requests.
//!
//! Size (docs/PROTOCOL.md §5.3): every answer of the issuer routes, success or error (the limit's
//! 429 included), asks the OHTTP gateway for the 8 192-byte response class
//! ([`ISSUER_RESPONSE_CLASS`]): an issue response of three or more tokens needs that class, so
//! without it an onlooker of the client's link would tell token fetches from everything else by
//! size.
//!
//! The issuer publishes keys through the relayer's one serialized writer. Only the schedule
//! (a bounded number of keys a day) and signed issue requests within the new-app limit can make
//! it write; `GET /v1/issuer/key` never does.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use privsvc_ohttp::MinResponseClass;
use privsvc_tokens::{issuer_router, now_ms, Issuer, IssuerConfig};

use crate::api::request_source;
use crate::config::RelayerConfig;
use crate::ratelimit::RateLimiter;
use crate::writer::SerializedWriter;
use crate::RelayerError;

/// The response class every answer of the issuer routes is padded to through OHTTP: the class
/// of the largest issue response (20 blind signatures, about 7 KB of JSON).
pub const ISSUER_RESPONSE_CLASS: usize = privsvc_ohttp::RESPONSE_CLASSES[1];

/// Open the issuer (data in `<DATA_DIR>/issuer`) on chain `chain_id` with the relayer's
/// `writer` and `ledger`; returns its rate-limited routes and the issuer (for
/// [`run_schedule`]).
pub fn mount(
    cfg: &RelayerConfig,
    chain_id: u64,
    ledger: Arc<dyn privsvc_ledger::LedgerReader>,
    writer: &SerializedWriter,
) -> Result<(Router, Arc<Issuer>), RelayerError> {
    let mut config = IssuerConfig::new(cfg.data_dir.join("issuer"), chain_id);
    config.quota_per_wallet = cfg.issuer.quota;
    config.attestation_codes = cfg.issuer.codes.as_ref().map(|c| c.0.clone());
    config.apps = cfg.issuer.apps.clone();
    config.max_new_apps = cfg.issuer.max_new_apps;
    config.max_active_apps = cfg.issuer.max_active_apps;
    #[cfg(feature = "lab-leaks")]
    {
        config.lab_replays_signed_again = cfg.lab_leaks.issue_replays_signed_again;
    }
    let issuer = Arc::new(
        Issuer::open(config, Arc::new(writer.clone()), ledger)
            .map_err(|e| RelayerError::Issuer(Box::new(e)))?,
    );
    let limiter = Arc::new(IssuerLimit {
        limiter: RateLimiter::new(cfg.issuer.requests_per_min),
        per_min: cfg.issuer.requests_per_min,
    });
    // The size layer goes outside the limit, so a 429 is padded like every other answer.
    let routes = issuer_router(issuer.clone())
        .layer(axum::middleware::from_fn_with_state(limiter, limit))
        .layer(axum::middleware::map_response(issuer_size));
    Ok((routes, issuer))
}

/// The issuer's key schedule until `stop` (see `Issuer::run_key_schedule`).
pub async fn run_schedule(
    issuer: Arc<Issuer>,
    period: std::time::Duration,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    issuer.run_key_schedule(period, stop).await;
}

/// The issuer routes' own limiter (separate from the submissions' one).
struct IssuerLimit {
    limiter: RateLimiter,
    per_min: u32,
}

/// Mark an issuer answer for the [`ISSUER_RESPONSE_CLASS`] (used only by the OHTTP gateway).
async fn issuer_size(mut response: Response) -> Response {
    response
        .extensions_mut()
        .insert(MinResponseClass(ISSUER_RESPONSE_CLASS));
    response
}

/// 429 with `Retry-After` (seconds to the next one-minute window) and a JSON reason when the
/// request's source ([`request_source`]: its address, or the address that posted it inside
/// `POST /v1/ohttp`) is over its limit. Requests from a configured OHTTP relay are limited at
/// the relay, per client address.
async fn limit(State(l): State<Arc<IssuerLimit>>, req: Request, next: Next) -> Response {
    if let Some(ip) = request_source(req.extensions()) {
        let now = now_ms();
        if !l.limiter.allow(ip, now) {
            let retry = 60 - (now / 1000) % 60;
            let mut resp = (
                StatusCode::TOO_MANY_REQUESTS,
                Json(serde_json::json!({
                    "error": format!(
                        "more than {} issuer requests a minute from this address; retry in {retry} s",
                        l.per_min
                    )
                })),
            )
                .into_response();
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry));
            return resp;
        }
    }
    next.run(req).await
}
