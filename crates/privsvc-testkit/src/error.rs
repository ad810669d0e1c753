//! Why a local stack could not start.

/// A part of the stack failed to start or to come up in time.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StackError {
    /// The devnet did not start.
    #[error("devnet: {0}")]
    Devnet(#[from] privsvc_devnet::DevnetError),
    /// A ledger client could not be built or a ledger call failed.
    #[error("ledger: {0}")]
    Ledger(#[from] privsvc_ledger::LedgerError),
    /// A relayer did not start.
    #[error("relayer {name}: {source}")]
    Relayer {
        /// The relayer's name in the stack.
        name: String,
        /// Why it did not start.
        #[source]
        source: Box<privsvc_relayer::RelayerError>,
    },
    /// The OHTTP relay could not be built or did not verify its targets.
    #[error("OHTTP relay: {0}")]
    Relay(#[from] privsvc_ohttp::OhttpError),
    /// A socket could not be bound or a temporary directory made.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// The stack's description is inconsistent (an unknown relayer name, too few dev accounts).
    #[error("stack description: {0}")]
    Config(String),
    /// Something did not happen in time (heartbeats on the ledger, targets verified).
    #[error("timed out: {0}")]
    Timeout(String),
}
