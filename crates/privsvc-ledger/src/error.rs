//! Errors of the ledger crate.

/// Everything that can go wrong reading or writing the ledger.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// The node answered garbage at the HTTP level (not JSON-RPC), or a JavaScript ledger
    /// transport failed (its own words).
    #[error("ledger transport error: {0}")]
    Transport(String),
    /// The HTTP exchange with the node failed (unreachable, timed out, cut off).
    #[error("ledger transport error: {method}: {source}")]
    Http {
        /// The JSON-RPC method asked (or `connect` for building the client).
        method: String,
        /// The HTTP client's error.
        #[source]
        source: privsvc_rt::http::HttpError,
    },
    /// The node answered a JSON-RPC error.
    #[error("ledger RPC error {code}: {message}")]
    Rpc {
        /// JSON-RPC error code (e.g. -32001 parse error in a query).
        code: i64,
        /// The node's message.
        message: String,
        /// The raw `error.data`, if any (revert data for reverts).
        data: Option<serde_json::Value>,
    },
    /// A transaction or simulation reverted with a decoded Arkiv error.
    #[error("batch reverted: {0}")]
    Reverted(String),
    /// An answer from the node could not be decoded.
    #[error("cannot decode ledger answer: {0}")]
    Decode(String),
    /// A value given by the caller cannot be encoded (bad attribute name, value too long, ...).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// Waiting for something on the ledger took too long.
    #[error("timed out: {0}")]
    Timeout(String),
}
