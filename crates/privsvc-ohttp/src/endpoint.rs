//! The relayer's gateway endpoint `POST /v1/ohttp`: open the encapsulated request, dispatch it
//! in-process to the relayer's own router, seal the answer.
//!
//! A relayer mounts it next to its API:
//!
//! ```
//! use std::sync::Arc;
//! use axum::{routing::get, Router};
//! use privsvc_ohttp::{gateway_router, OhttpGateway};
//!
//! let api: Router = Router::new().route("/v1/info", get(|| async { "{}" }));
//! let gateway = Arc::new(OhttpGateway::from_seed(&[9u8; 32]).unwrap());
//! // `api` itself has no /v1/ohttp route, so OHTTP cannot be nested in OHTTP.
//! let app: Router = api.clone().merge(gateway_router(Some(gateway), api));
//! ```
//!
//! Requests dispatched this way carry the [`ViaOhttp`] extension and no peer address
//! (`ConnectInfo` is absent): the relayer learns nothing about the client's network location.
//!
//! Dummies ([`dummy_request`](crate::dummy_request), `POST /v1/dummy` inside OHTTP) are answered by the gateway
//! itself, never dispatched: a `200` padded to the class the dummy asks for, after the time one
//! of the latest real answers took (drawn at random), so that neither the relayer's state nor
//! the answer's timing tells a dummy from a real request.
//!
//! Every answer is padded to its response class; an inner answer carrying the
//! [`MinResponseClass`] extension is padded to at least that class, so that all answers of one
//! kind (every answer of the token issuer, for instance) measure the same, whatever their
//! status or length.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use tower::ServiceExt;

use crate::binary::{encode_padded_response_at_least, BinaryRequest};
use crate::gateway::OhttpGateway;
use crate::http_util::{declared_too_large, has_content_type, json_error, read_body, BodyError};
use crate::padding::RESPONSE_CLASSES;
use crate::{
    CONTENT_TYPE_OHTTP_REQ, CONTENT_TYPE_OHTTP_RES, MAX_ENCAPSULATED_BYTES, MAX_RESPONSE_BYTES,
};

/// Request extension set on every request the gateway dispatches to the inner router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViaOhttp;

/// Response extension set by an inner handler (or a layer) to have the gateway pad its answer
/// to at least the response class holding `.0` bytes
/// ([`crate::padding::RESPONSE_CLASSES`]), whatever the answer's own length. Unused outside
/// OHTTP (a direct HTTP answer is not padded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinResponseClass(pub usize);

/// Inner request headers passed on to the relayer's router (everything else is dropped, in
/// particular any forwarding header a client might forge).
const INNER_REQUEST_HEADERS: [HeaderName; 2] = [header::CONTENT_TYPE, header::ACCEPT];
/// Inner response headers sealed into the answer.
const INNER_RESPONSE_HEADERS: [HeaderName; 2] = [header::CONTENT_TYPE, header::RETRY_AFTER];

#[derive(Clone)]
struct GatewayState {
    gateway: Option<Arc<OhttpGateway>>,
    inner: Router,
}

/// A router with `POST /v1/ohttp` that opens requests with `gateway` and dispatches them to
/// `inner`. With `None` (OHTTP off) the route answers 404.
pub fn gateway_router(gateway: Option<Arc<OhttpGateway>>, inner: Router) -> Router {
    Router::new()
        .route("/v1/ohttp", post(handle))
        .with_state(GatewayState { gateway, inner })
}

async fn handle(State(state): State<GatewayState>, headers: HeaderMap, body: Body) -> Response {
    serve_ohttp(state.gateway.as_deref(), &state.inner, &headers, body).await
}

/// The `POST /v1/ohttp` handler as a function, for relayers that route it themselves.
///
/// Answers 404 when `gateway` is `None`, 415 for a content type other than
/// `message/ohttp-req`, 413 over [`MAX_ENCAPSULATED_BYTES`], 400 when the request cannot be
/// opened (which includes a plaintext not padded to a request class); a dummy
/// ([`dummy_request`](crate::dummy_request)) gets the gateway's own sealed dummy answer; otherwise 200 with the
/// answer of `inner`, padded to its response class (at least the one its [`MinResponseClass`]
/// asks for) and sealed, as `message/ohttp-res`. An answer of `inner` too large for the
/// largest response class is replaced by a sealed 502 `{"error": ...}`.
pub async fn serve_ohttp(
    gateway: Option<&OhttpGateway>,
    inner: &Router,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let Some(gateway) = gateway else {
        return json_error(StatusCode::NOT_FOUND, "OHTTP is off on this relayer");
    };
    if !has_content_type(headers, CONTENT_TYPE_OHTTP_REQ) {
        return json_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content type must be message/ohttp-req",
        );
    }
    if declared_too_large(headers, MAX_ENCAPSULATED_BYTES) {
        return too_large();
    }
    let message = match read_body(body, MAX_ENCAPSULATED_BYTES).await {
        Ok(m) => m,
        Err(BodyError::TooLarge) => return too_large(),
        Err(BodyError::Broken) => {
            return json_error(StatusCode::BAD_REQUEST, "request body could not be read")
        }
    };
    let Ok((request, sealer)) = gateway.open(&message) else {
        tracing::debug!("ohttp request could not be opened");
        return json_error(
            StatusCode::BAD_REQUEST,
            "the encapsulated request cannot be opened",
        );
    };
    let (status, headers, body, at_least) = if crate::dummy::is_dummy(&request) {
        let at_least = crate::dummy::asked_response_class(&request);
        tokio::time::sleep(gateway.served_dummy(rand::random())).await;
        (
            200,
            vec![("content-type".to_string(), "application/json".to_string())],
            crate::dummy::DUMMY_ANSWER.to_vec(),
            at_least,
        )
    } else {
        let started = std::time::Instant::now();
        let answer = dispatch(inner, request, true).await;
        gateway.served_real(started.elapsed());
        answer
    };
    tracing::trace!(status, "ohttp request served");
    let largest = RESPONSE_CLASSES[RESPONSE_CLASSES.len() - 1];
    let plain = encode_padded_response_at_least(status, &headers, &body, at_least).or_else(|_| {
        let (status, headers, body) = inner_error(
            502,
            &format!("the relayer's answer is over {largest} bytes, too large for OHTTP"),
        );
        encode_padded_response_at_least(status, &headers, &body, at_least.min(largest))
    });
    match plain.and_then(|plain| sealer.seal_padded(&plain)) {
        Ok(sealed) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, CONTENT_TYPE_OHTTP_RES),
                (header::CACHE_CONTROL, "no-store"),
            ],
            sealed,
        )
            .into_response(),
        Err(_) => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the response could not be sealed",
        ),
    }
}

fn too_large() -> Response {
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("encapsulated request over {MAX_ENCAPSULATED_BYTES} bytes"),
    )
}

fn inner_error(status: u16, message: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    (
        status,
        vec![("content-type".into(), "application/json".into())],
        serde_json::json!({ "error": message })
            .to_string()
            .into_bytes(),
    )
}

/// An answer of the inner router: status, kept headers, body, and the least response class it
/// asked for ([`MinResponseClass`], 0 when none).
pub(crate) type Dispatched = (u16, Vec<(String, String)>, Vec<u8>, usize);

fn inner_error_dispatched(status: u16, message: &str) -> Dispatched {
    let (status, headers, body) = inner_error(status, message);
    (status, headers, body, 0)
}

/// Run a request against `inner` in-process and collect status, kept headers, body and the
/// answer's [`MinResponseClass`]. With `via_ohttp` the request carries the [`ViaOhttp`]
/// extension.
pub(crate) async fn dispatch(
    inner: &Router,
    request: BinaryRequest,
    via_ohttp: bool,
) -> Dispatched {
    let Ok(method) = Method::from_bytes(request.method.as_bytes()) else {
        return inner_error_dispatched(400, "invalid method");
    };
    let mut builder = Request::builder().method(method).uri(request.path.as_str());
    for (name, value) in &request.headers {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        if !INNER_REQUEST_HEADERS.contains(&name) {
            continue;
        }
        if let Ok(value) = HeaderValue::from_str(value) {
            builder = builder.header(name, value);
        }
    }
    let Ok(mut http_request) = builder.body(Body::from(request.body)) else {
        return inner_error_dispatched(400, "invalid request line");
    };
    if via_ohttp {
        http_request.extensions_mut().insert(ViaOhttp);
    }
    let response = match inner.clone().oneshot(http_request).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let status = response.status().as_u16();
    let at_least = response
        .extensions()
        .get::<MinResponseClass>()
        .map_or(0, |m| m.0);
    let headers = INNER_RESPONSE_HEADERS
        .iter()
        .filter_map(|name| {
            let value = response.headers().get(name)?.to_str().ok()?;
            Some((name.as_str().to_string(), value.to_string()))
        })
        .collect();
    match read_body(response.into_body(), MAX_RESPONSE_BYTES).await {
        Ok(body) => (status, headers, body, at_least),
        Err(_) => inner_error_dispatched(502, "the relayer's answer could not be read"),
    }
}
