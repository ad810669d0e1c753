//! Errors of the ledger crate.

use crate::answer::{AnswerError, EntityProblem};

/// Everything that can go wrong reading or writing the ledger.
///
/// A node's JSON-RPC error is read in one place (`rpc::node_error`): what a caller decides on
/// has its own variant ([`LedgerError::NonceTooLow`], [`LedgerError::ExceedsBlockGasLimit`],
/// [`LedgerError::ReplacementUnderpriced`], [`LedgerError::AlreadyKnown`],
/// [`LedgerError::Reverted`]), whatever the node's wording; the rest is [`LedgerError::Rpc`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// The node answered garbage at the HTTP level (not JSON-RPC), or a host's ledger
    /// transport failed; the source says which.
    #[error("ledger transport error: {0}")]
    Transport(#[source] ChannelError),
    /// The HTTP exchange with the node failed (unreachable, timed out, cut off).
    #[error("ledger transport error: {method}: {source}")]
    Http {
        /// The JSON-RPC method asked (or `connect` for building the client).
        method: &'static str,
        /// The HTTP client's error.
        #[source]
        source: privsvc_rt::HttpError,
    },
    /// The node refused a transaction whose nonce the account has already used (another
    /// transaction of the account took it, or this one was mined already).
    #[error("the node refused the transaction: its nonce is too low ({0})")]
    NonceTooLow(RpcError),
    /// The node refused a transaction that asks for more gas than a block holds: it can never
    /// be included.
    #[error("the node refused the transaction: it exceeds the block gas limit ({0})")]
    ExceedsBlockGasLimit(RpcError),
    /// The node holds another transaction with this nonce, and this one does not pay enough
    /// more to replace it.
    #[error("the node refused the transaction: replacement underpriced ({0})")]
    ReplacementUnderpriced(RpcError),
    /// The node already holds this very transaction.
    #[error("the node already knows the transaction")]
    AlreadyKnown,
    /// The node answered another JSON-RPC error.
    #[error("ledger RPC error {0}")]
    Rpc(RpcError),
    /// A transaction or simulation reverted.
    #[error("batch reverted: {0}")]
    Reverted(Revert),
    /// An answer from the node (or a system entity in it) could not be decoded; the source
    /// says what is wrong.
    #[error("cannot decode ledger answer: {0}")]
    Decode(#[source] AnswerError),
    /// A value given by the caller cannot be encoded (bad attribute name, value too long, ...).
    /// The source is the encoder's error (a [`crate::DecodeError`] of the calldata, a
    /// [`crate::QueryBuildError`], serde_json's, ...), or what is wrong in words.
    #[error("invalid input: {0}")]
    Invalid(#[source] BoxError),
    /// The receipt of a sent transaction did not come in time.
    #[error("timed out: no receipt for {tx_hash} within {waited:?}")]
    Timeout {
        /// The transaction waited for.
        tx_hash: alloy_primitives::B256,
        /// How long it was waited for.
        waited: std::time::Duration,
    },
}

/// Why an exchange with the node brought back no JSON-RPC answer ([`LedgerError::Transport`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// The answer is not JSON; the source is serde_json's error.
    #[error("the answer is not JSON-RPC: {0}")]
    NotJsonRpc(#[source] serde_json::Error),
    /// The node answered an error status with a body that is not JSON-RPC (a gateway's error
    /// page).
    #[error("HTTP {0}, and the answer is not JSON-RPC")]
    Status(u16),
    /// A host's ledger transport (the JavaScript client's reader functions) failed; the
    /// source is its own error.
    #[error("{0}")]
    Host(#[source] BoxError),
}

/// A node's JSON-RPC error object, as the node gave it: its words are the whole information.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// JSON-RPC error code (e.g. -32001 parse error in a query).
    pub code: i64,
    /// The node's message.
    pub message: String,
    /// The raw `error.data`, if any.
    pub data: Option<serde_json::Value>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl From<AnswerError> for LedgerError {
    fn from(e: AnswerError) -> Self {
        LedgerError::Decode(e)
    }
}

impl LedgerError {
    /// [`LedgerError::Decode`] of the system entity `key` because of `problem`.
    pub fn entity(key: alloy_primitives::B256, problem: EntityProblem) -> Self {
        LedgerError::Decode(AnswerError::Entity { key, problem })
    }
}

/// An error underneath (this crate's encoders', serde_json's, k256's) kept as a source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl LedgerError {
    /// [`LedgerError::Invalid`] because of `source` (an error, or what is wrong in words).
    pub fn invalid(source: impl Into<BoxError>) -> Self {
        LedgerError::Invalid(source.into())
    }
}

/// Why a transaction or a simulation reverted: the node's revert data when it gave some
/// (decoded as an Arkiv error, `Error(string)` or `Panic`), else the reason as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revert {
    data: Option<Vec<u8>>,
    reason: String,
}

impl Revert {
    /// A revert with its reason and, when the node gave some, its data
    /// ([`Revert::from_data`], with the reason decoded from the data, is in `abi`).
    pub(crate) fn new(reason: String, data: Option<Vec<u8>>) -> Self {
        Revert { data, reason }
    }

    /// A revert known by its reason only (a receipt without revert data, a caller's check).
    pub fn from_reason(reason: impl Into<String>) -> Self {
        Revert::new(reason.into(), None)
    }

    /// The revert data, when the node gave some.
    pub fn data(&self) -> Option<&[u8]> {
        self.data.as_deref()
    }

    /// The 4-byte selector of the error, when the node gave revert data.
    pub fn selector(&self) -> Option<[u8; 4]> {
        self.data.as_deref()?.get(..4)?.try_into().ok()
    }

    /// The reason as text (`EntityNotFound(0x…)`, `Error("out of gas")`, ...).
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The reason as text, owned.
    pub fn into_reason(self) -> String {
        self.reason
    }
}

impl std::fmt::Display for Revert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}
