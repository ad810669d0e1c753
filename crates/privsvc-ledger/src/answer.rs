//! What can be wrong with what the ledger answered: a node's JSON-RPC answer that does not
//! have the shape its method promises, or a privsvc system entity whose content does not
//! hold what its kind requires.

use alloy_primitives::{Address, B256};

use crate::codec::CodecError;

/// Why an answer from the ledger cannot be decoded ([`crate::LedgerError::Decode`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// A member the answer must have is absent.
    #[error("{0} is missing")]
    Missing(&'static str),
    /// A member has another JSON type than the one required.
    #[error("{field} is not {expected}")]
    NotA {
        /// The member (`attributes`, `contentType`, `eth_getLogs result`, ...).
        field: &'static str,
        /// What it must be (`an array`, `a string`, ...).
        expected: &'static str,
    },
    /// A member is not `0x` hex.
    #[error("{0} is not 0x hex")]
    NotHex(&'static str),
    /// A hex member does not have its length.
    #[error("{field} is {got} bytes, not {expected}")]
    WrongLength {
        /// The member.
        field: &'static str,
        /// The length it must have.
        expected: usize,
        /// The length it has.
        got: usize,
    },
    /// A quantity is not a u64 (as `0x` hex, a decimal string or a JSON number).
    #[error("a quantity is not a u64 (0x hex, a decimal string or a JSON number)")]
    NotU64,
    /// A number does not fit where it goes.
    #[error("{0} is out of range")]
    OutOfRange(&'static str),
    /// An attribute of an entity does not decode as its type; the source is the codec's error.
    #[error("an attribute's value: {0}")]
    Attribute(#[source] CodecError),
    /// ABI-encoded return data does not decode; the source is the ABI decoder's error
    /// (alloy's, boxed: its type is not part of this crate's API).
    #[error("{what}: {source}")]
    Abi {
        /// The call whose result it is.
        what: &'static str,
        /// The decoder's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A batch answer names an id that was not asked.
    #[error("a batch answer has an id that was not asked")]
    UnknownBatchId,
    /// A batch answer names one id twice.
    #[error("a batch answer repeats an id")]
    RepeatedBatchId,
    /// A batch answer lacks the answer of one of its requests.
    #[error("a batch answer misses a request's answer")]
    MissingBatchAnswer,
    /// A reader answered another number of pages than queries asked.
    #[error("the ledger reader answered {pages} pages to {queries} queries")]
    PageCount {
        /// Pages answered.
        pages: usize,
        /// Queries asked.
        queries: usize,
    },
    /// A listing returned the cursor it was asked with: it would never end.
    #[error("arkiv_query returned the same cursor twice")]
    RepeatedCursor,
    /// The node does not know a block it reported or that a record names.
    #[error("the node has no block {0}")]
    NoBlock(u64),
    /// The receipt of a transaction that creates an entity names no created entity.
    #[error("the receipt names no created entity")]
    NoCreatedEntity,
    /// A privsvc system entity does not hold what its kind requires.
    #[error("entity {key}: {problem}")]
    Entity {
        /// The entity.
        key: B256,
        /// What is wrong with it.
        #[source]
        problem: EntityProblem,
    },
}

/// What is wrong with a privsvc system entity (a heartbeat, an issuer key, a spends list).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EntityProblem {
    /// Its `project` or `privsvc_kind` attribute is not privsvc's and the kind's.
    #[error("it is not a privsvc {expected} entity")]
    WrongKind {
        /// The kind required.
        expected: &'static str,
    },
    /// It lacks an attribute.
    #[error("it has no attribute {0}")]
    MissingAttribute(&'static str),
    /// An attribute has another type.
    #[error("its attribute {name} is a {got}, expected {expected}")]
    AttributeType {
        /// The attribute.
        name: &'static str,
        /// Its required type.
        expected: &'static str,
        /// The type it has.
        got: &'static str,
    },
    /// It was read without its payload.
    #[error("it was read without its payload")]
    NoPayload,
    /// Its payload is not JSON; the source is serde_json's error.
    #[error("its payload is not JSON: {0}")]
    PayloadNotJson(#[source] serde_json::Error),
    /// Its payload lacks a member (or has one of another type).
    #[error("its payload lacks {0} (or it is not of its type)")]
    PayloadLacks(&'static str),
    /// Its payload's address is not an address; the source is the hex decoder's error (boxed:
    /// its type is not part of this crate's API).
    #[error("its payload's address is not an address: {0}")]
    BadAddress(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Its `url` attribute is not the URL of its payload.
    #[error("its url attribute differs from the payload's")]
    UrlMismatch,
    /// It was created by another account than the one its payload claims.
    #[error("it was created by {creator}, but claims {claimed}")]
    WrongCreator {
        /// The creator the ledger reports.
        creator: Address,
        /// The address in the payload.
        claimed: Address,
    },
    /// Its payload is not a list of 32-byte ids.
    #[error("its payload of {0} bytes is not a list of 32-byte ids")]
    NotIdList(usize),
}
