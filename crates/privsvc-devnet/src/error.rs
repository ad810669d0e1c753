//! Errors of the devnet.

/// Why the devnet could not start or persist.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DevnetError {
    /// Invalid configuration.
    #[error("invalid devnet configuration: {0}")]
    Config(String),
    /// SQLite failure.
    #[error("devnet storage error: {0}")]
    Storage(String),
    /// Could not bind or serve.
    #[error("devnet server error: {0}")]
    Server(String),
}
