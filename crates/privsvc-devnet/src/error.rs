//! Errors of the devnet.

/// Why the devnet could not start or persist.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DevnetError {
    /// The database holds another chain than the configuration asks for.
    #[error("invalid devnet configuration: database holds chain {stored} but the config asks for chain {configured}")]
    ChainMismatch {
        /// The database's chain id.
        stored: u64,
        /// The configured chain id.
        configured: u64,
    },
    /// A block interval of zero.
    #[error(
        "invalid devnet configuration: block interval must be positive; use BlockTime::OnDemand"
    )]
    ZeroBlockInterval,
    /// The devnet refused an impersonated transaction; the source is its refusal.
    #[error("the devnet refused the transaction: {0}")]
    Rejected(#[source] BoxError),
    /// SQLite failure.
    #[error("devnet storage error: {0}")]
    Storage(#[source] rusqlite::Error),
    /// A stored record cannot be read back; the source is the JSON decoder's (or the number
    /// parser's) error.
    #[error("devnet storage error: corrupt record: {0}")]
    Corrupt(#[source] BoxError),
    /// Could not bind the listening socket on 127.0.0.1.
    #[error("devnet server error: cannot bind 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
    /// Could not serve.
    #[error("devnet server error: {0}")]
    Server(#[source] std::io::Error),
}

/// An error of a crate underneath (serde_json, hex, k256) kept as a source without its type
/// becoming part of this crate's API.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
