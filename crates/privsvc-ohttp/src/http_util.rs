//! Small HTTP helpers shared by the gateway endpoint, the relay and the OHTTP client: size-limited
//! body reading, content types and JSON error answers.

#[cfg(feature = "server")]
use axum::body::Body;
#[cfg(feature = "server")]
use axum::http::{header, HeaderMap, StatusCode};
#[cfg(feature = "server")]
use axum::response::{IntoResponse, Response};
#[cfg(feature = "server")]
use futures::StreamExt;

#[cfg(feature = "server")]
use crate::OhttpError;

/// Why a body could not be read.
#[cfg(feature = "server")]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// Over the limit.
    TooLarge,
    /// The stream broke.
    Broken,
}

#[cfg(feature = "server")]
/// Whether the request announces a `Content-Length` over `limit`.
pub(crate) fn declared_too_large(headers: &HeaderMap, limit: usize) -> bool {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > limit as u64)
}

#[cfg(feature = "server")]
/// Read an axum body, failing as soon as it exceeds `limit` bytes.
pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut stream = body.into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| BodyError::Broken)?;
        if out.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Read a reqwest response body of at most `limit` bytes (the relay's calls to relayers).
#[cfg(feature = "server")]
pub(crate) async fn read_response(
    response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, OhttpError> {
    Ok(privsvc_rt::read_body(response, limit).await?)
}

#[cfg(feature = "server")]
/// Whether the `Content-Type` of `headers` is `expected` (parameters ignored).
pub(crate) fn has_content_type(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| is_content_type(v, expected))
}

/// Whether the `Content-Type` value `value` names `expected` (parameters ignored).
pub(crate) fn is_content_type(value: &str, expected: &str) -> bool {
    value
        .split(';')
        .next()
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(expected))
}

#[cfg(feature = "server")]
/// A JSON error answer `{ "error": message }`.
pub(crate) fn json_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({ "error": message }).to_string(),
    )
        .into_response()
}

/// The `error` text of a JSON error body, or an empty string.
pub(crate) fn error_text(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_default()
}
