//! Oblivious HTTP for privsvc (RFC 9458 with Binary HTTP, RFC 9292), on the `ohttp` and
//! `bhttp` crates.
//!
//! - Gateway side: [`OhttpGateway`] (keys derived from a seed, several live key ids),
//!   [`gateway_router`] / [`serve_ohttp`] (the relayer's `POST /v1/ohttp`).
//! - Client side: [`ohttp_call`], [`encapsulate`]; cover traffic: [`send_dummy`] ([`dummy_request`]).
//! - The relay: [`OhttpRelay`] (`POST /ohttp`, `GET /healthz`), forwarding at once or in
//!   shuffled rounds ([`RelayConfig::round`]).
//! - The [`Transport`] trait and its implementations [`HttpTransport`], [`OhttpTransport`],
//!   [`InProcessTransport`].
//! - [`PrivateListener`]: serve axum with peer addresses that no log line can print (forgotten
//!   at accept, or kept for a rate limiter only).
//!
//! - Padding: every request and response plaintext is padded to a size class; an inner
//!   answer may ask for a larger one ([`MinResponseClass`]).
//! - Sources: how rate limits count a source address ([`SourceKey`]: IPv6 per /64).
//!
//! Feature `server` (default): the gateway endpoint, the relay, the anonymous listener and
//! `InProcessTransport` (axum, tower-http, tokio's network runtime). Without it the crate is
//! the client part ([`ohttp_call`], [`Transport`], [`HttpTransport`], [`OhttpTransport`],
//! heartbeats, [`OhttpGateway`]'s pure cryptography), which also builds for
//! `wasm32-unknown-unknown`.
//!
//! Suite: key id 1, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM; the `ohttpKey` is the
//! hex of the encoded key configuration.
#![forbid(unsafe_code)]

mod binary;
mod client;
mod dummy;
#[cfg(feature = "server")]
mod endpoint;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzz_entry;
mod gateway;
mod http_util;
mod ledger_heartbeats;
#[cfg(feature = "server")]
mod listener;
mod padding;
#[cfg(feature = "server")]
mod relay;
mod source;
mod transport;

pub use binary::{
    decode_padded_request, decode_padded_response, decode_request, decode_response,
    encode_padded_request, encode_padded_request_at_least, encode_padded_response,
    encode_padded_response_at_least, encode_request, encode_response, BinaryRequest, OhttpResponse,
};
pub use client::{
    decode_gateway_key, encapsulate, encapsulate_at_least, ohttp_call, to_binary_request,
    PendingResponse,
};
pub use dummy::{
    asked_response_class, dummy_request, is_dummy, send_dummy, DUMMY_ANSWER, DUMMY_METHOD,
    DUMMY_PATH,
};
#[cfg(feature = "server")]
pub use endpoint::{gateway_router, serve_ohttp, MinResponseClass, ViaOhttp};
pub use error::{BinaryHttpError, BoxError, OhttpError};
pub use gateway::{OhttpGateway, ResponseSealer, DEFAULT_KEY_ID, MIN_SEED_BYTES};
pub use ledger_heartbeats::{
    live_heartbeats, live_window_blocks, url_owner, LiveHeartbeat, UrlOwner,
    DEFAULT_HEARTBEAT_INTERVAL,
};
#[cfg(feature = "server")]
pub use listener::{PeerIp, PrivateListener};
pub use padding::{
    class_of, is_class, min_request_class, pad, pad_at_least, REQUEST_CLASSES, REQUEST_OVERHEAD,
    RESPONSE_CLASSES, RESPONSE_OVERHEAD, SUBMISSION_CLASS, SUBMISSION_ROUTE,
};
/// The HTTP seam of the transports and of `ohttp_call` (a host may bring its own HTTP stack).
pub use privsvc_rt::{Fetch, FetchRequest, FetchResponse, HttpError, ReqwestFetch};
#[cfg(feature = "server")]
pub use relay::{
    OhttpRelay, RelayConfig, DEFAULT_MAX_HELD, DEFAULT_RATE_LIMIT_PER_MIN, RECOMMENDED_ROUND_MS,
};
pub use source::SourceKey;
#[cfg(feature = "server")]
pub use transport::InProcessTransport;
pub use transport::{
    normalize_relayer_url, HttpTransport, OhttpTransport, RelayerRequest, RelayerResponse,
    RelayerUrl, Transport, TransportError,
};

/// Largest encapsulated request accepted by `POST /v1/ohttp` and `POST /ohttp`: the largest
/// request class (131 072 bytes) plus the OHTTP overhead (55 bytes), 131 127 bytes.
pub const MAX_ENCAPSULATED_BYTES: usize =
    REQUEST_CLASSES[REQUEST_CLASSES.len() - 1] + REQUEST_OVERHEAD;
/// Largest response body read from a relayer (gateway answers, direct calls): 1 MiB.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// Time limit of one call to a relayer or a relay by the transports (30 s); in wasm32 it is
/// applied per request (see `privsvc_rt::send`).
pub const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Content type of an encapsulated request.
pub const CONTENT_TYPE_OHTTP_REQ: &str = "message/ohttp-req";
/// Content type of an encapsulated response.
pub const CONTENT_TYPE_OHTTP_RES: &str = "message/ohttp-res";
/// The header naming the relayer a relay should forward to.
pub const TARGET_HEADER: &str = "x-privsvc-target";
/// A `tracing_subscriber::EnvFilter` directive that silences the `ohttp` crate: a second guard.
///
/// The `ohttp` crate logs derived response keys at TRACE level (through the `log` crate). This
/// crate already compiles every `log` record above DEBUG out of any build that links it (the
/// `log` features `max_level_debug` and `release_max_level_debug`), so no filter can let them
/// through; binaries append this directive as well (`"info,ohttp=off"`, or
/// `format!("{user_filter},{SILENCE_OHTTP_LOGS}")`) in case a future `ohttp` logs at a lower
/// level.
pub const SILENCE_OHTTP_LOGS: &str = "ohttp=off";
