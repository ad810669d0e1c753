//! The `Transport` trait: how a client reaches a relayer (plain HTTP, OHTTP or in-process).
//!
//! The trait lives in `privsvc-ohttp` because this is the one crate that both the client and
//! the examples already depend on and that owns the non-trivial implementation
//! ([`OhttpTransport`]); the client crate holds an `Arc<dyn Transport>` and never needs to know
//! which implementation it got.
//!
//! Implementations: [`HttpTransport`] (direct, reqwest with rustls), [`OhttpTransport`] (every
//! call through an OHTTP relay) and [`InProcessTransport`] (axum routers in the same process,
//! for tests).

use async_trait::async_trait;

mod http;
#[cfg(feature = "server")]
mod in_process;
mod ohttp;

pub use self::http::HttpTransport;
#[cfg(feature = "server")]
pub use self::in_process::InProcessTransport;
pub use self::ohttp::OhttpTransport;

/// One request to a relayer endpoint, e.g. `POST /v1/records` with a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayerRequest {
    /// HTTP method, upper case (`GET`, `POST`).
    pub method: String,
    /// Path and query, starting with `/` (e.g. `/v1/records/abc`).
    pub path: String,
    /// Request body (JSON for every relayer endpoint), if any.
    pub body: Option<Vec<u8>>,
}

/// A relayer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayerResponse {
    /// HTTP status code.
    pub status: u16,
    /// Response body.
    pub body: Vec<u8>,
}

/// Sends relayer requests. Object safe: clients hold an `Arc<dyn Transport>`.
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
pub trait Transport: privsvc_rt::MaybeSend + privsvc_rt::MaybeSync {
    /// Send `request` to the relayer whose base URL is `relayer_url` and return its answer.
    /// A non-2xx status is an `Ok` answer; `Err` means the relayer could not be reached.
    async fn send(
        &self,
        relayer_url: &str,
        request: RelayerRequest,
    ) -> Result<RelayerResponse, crate::OhttpError>;

    /// Whether this transport encapsulates requests to the relayers' gateway keys (OHTTP).
    /// Such a transport cannot ask a relayer who it is without a key, so a client finds the
    /// key in the heartbeats of the account that owns the relayer's URL and gives it with
    /// [`Transport::bind_relayer`] before its first call. Default: false.
    fn uses_gateway_keys(&self) -> bool {
        false
    }

    /// `relayer_url` belongs to `account` (DESIGN 10, "Relayer identity"): from now on use
    /// `gateway_key`, the key of that account's newest live heartbeat, or with `None` look the
    /// key up in that account's heartbeats only, never in another account's. Transports
    /// without gateway keys ignore it (the default). A wrapper around another transport should
    /// forward it.
    fn bind_relayer(
        &self,
        relayer_url: &str,
        account: alloy_primitives::Address,
        gateway_key: Option<&str>,
    ) -> Result<(), crate::OhttpError> {
        let _ = (relayer_url, account, gateway_key);
        Ok(())
    }
}
