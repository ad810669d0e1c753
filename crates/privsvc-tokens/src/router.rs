//! The issuer's HTTP endpoints as an axum `Router` (mounted by a relayer with `ISSUER=on`).

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use crate::issuer::{Issuer, IssuerError};
use crate::protocol::{ErrorBody, IssueRequest};

/// Largest accepted issue request body.
pub const MAX_ISSUE_BODY: usize = 64 * 1024;

/// `GET /v1/issuer/key?app=&epoch=` and `POST /v1/tokens/issue` over `issuer`.
///
/// Every error answers `{ "error": "<reason>" }`: 400 for malformed requests (and an epoch that
/// is neither today nor tomorrow on the key endpoint), 404 for an app without a published key
/// (the key endpoint never creates one), 403 for refused issuance (including a request for
/// another issuer or chain, or beyond the day's new-app limit), 409 when an issue request has
/// just created the app's first key (read it from the ledger, then ask again), 500/502 for
/// server faults.
pub fn issuer_router(issuer: Arc<Issuer>) -> Router {
    Router::new()
        .route("/v1/issuer/key", get(get_key))
        .route("/v1/tokens/issue", post(post_issue))
        .layer(DefaultBodyLimit::max(MAX_ISSUE_BODY))
        .with_state(issuer)
}

#[derive(Deserialize)]
struct KeyQuery {
    app: String,
    epoch: u32,
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        Json(ErrorBody {
            error: message.into(),
        }),
    )
        .into_response()
}

impl IntoResponse for IssuerError {
    fn into_response(self) -> Response {
        let status = match &self {
            IssuerError::BadRequest(_) => StatusCode::BAD_REQUEST,
            IssuerError::NoKey { .. } => StatusCode::NOT_FOUND,
            IssuerError::KeyCreated { .. } => StatusCode::CONFLICT,
            IssuerError::Refused(_) => StatusCode::FORBIDDEN,
            IssuerError::Ledger(_) => StatusCode::BAD_GATEWAY,
            IssuerError::KeyConflict { .. }
            | IssuerError::Store(_)
            | IssuerError::Internal { .. } => {
                tracing::error!(error = %self, "issuer failure");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        error(status, self.to_string())
    }
}

async fn get_key(
    State(issuer): State<Arc<Issuer>>,
    query: Result<Query<KeyQuery>, QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("expected query app and epoch: {e}"),
            )
        }
    };
    match issuer.issuer_key(&q.app, q.epoch).await {
        Ok(r) => Json(r).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn post_issue(
    State(issuer): State<Arc<Issuer>>,
    body: Result<Json<IssueRequest>, JsonRejection>,
) -> Response {
    let Json(req) = match body {
        Ok(b) => b,
        Err(JsonRejection::BytesRejection(e)) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("cannot read the body: {e}"),
            )
        }
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("invalid issue request: {}", e.body_text()),
            )
        }
    };
    match issuer.issue(&req).await {
        Ok(r) => Json(r).into_response(),
        Err(e) => e.into_response(),
    }
}
