//! How a client reaches a relayer: the [`Transport`] seam (it lives in `privsvc-rt`, beside
//! `Fetch`, with the plain-HTTP [`HttpTransport`]; re-exported here) and its OHTTP
//! implementations: [`OhttpTransport`] (every call through an OHTTP relay) and
//! [`InProcessTransport`] (axum routers in the same process, for tests).

#[cfg(feature = "server")]
mod in_process;
mod ohttp;

#[cfg(feature = "server")]
pub use self::in_process::InProcessTransport;
pub use self::ohttp::OhttpTransport;
pub use privsvc_rt::{
    normalize_relayer_url, HttpTransport, RelayerRequest, RelayerResponse, RelayerUrl, Transport,
    TransportError,
};
