//! privsvc-ohttp (under construction).
#![forbid(unsafe_code)]

pub mod transport;

pub use transport::{RelayerRequest, RelayerResponse, Transport};

/// Errors of the OHTTP crate (to be completed).
#[derive(Debug, thiserror::Error)]
pub enum OhttpError {
    /// The relayer or relay could not be reached.
    #[error("transport error: {0}")]
    Transport(String),
}
