//! The Arkiv ledger as privsvc uses it (native protocol of SDK 0.8.1): the entity model
//! ([`Entity`], [`Operation`]), the [`LedgerReader`] and [`LedgerWriter`] traits, the
//! `execute()` ABI ([`encode_operations`], [`decode_revert`]), entity key derivation
//! ([`entity_key`]), expiry resolution ([`resolve_expiry`]), the query builder ([`Expr`]), the
//! JSON wire forms of query results ([`entity_from_json`]), the JSON-RPC client ([`RpcLedger`],
//! [`RpcWriter`], [`query_all`]) and privsvc's system entities ([`Heartbeat`],
//! [`SpendsEntity`], [`IssuerKeyEntity`]).
//!
//! Every item has one path: the crate root. The modules are private.
#![forbid(unsafe_code)]

mod abi;
mod answer;
mod codec;
mod entity;
mod error;
mod expiry;
#[cfg(feature = "fuzzing")]
pub mod fuzz_entry;
mod keys;
mod listing;
mod ops;
mod query;
mod reader;
mod rpc;
mod system;
mod wire;
mod writer;

/// Internals that the crate's own tests reach (the ABI bindings, the attribute codec, the
/// query builder's pieces); not part of the API (no stability promise).
#[doc(hidden)]
pub mod testing {
    /// The `execute()` ABI and its bindings.
    pub mod abi {
        pub use crate::abi::*;
    }
    /// The typed attribute codec.
    pub mod codec {
        pub use crate::codec::*;
    }
    /// The query builder.
    pub mod query {
        pub use crate::query::*;
    }
    /// The JSON wire forms.
    pub mod wire {
        pub use crate::wire::*;
    }
}

pub use abi::{
    check_operations, decode_operations, decode_revert, encode_operations, entity_nonce_calldata,
    DecodeError, DecodedOp, InvalidValueReason, ARKIV_ADDRESS,
};
pub use answer::{AnswerError, EntityProblem};
pub use codec::{CodecError, NameError, ValueReason};
pub use entity::{
    ArkivValue, Attribute, AttributeSelect, CreationFlags, Entity, EntityKey, PageQuery,
    QueryOptions, QueryPage, Select,
};
pub use error::{BoxError, ChannelError, LedgerError, Revert, RpcError};
pub use expiry::{resolve_expiry, seconds_to_blocks, ExpiryError, BLOCK_TIME_SECONDS};
pub use keys::{entity_key, predict_entity_keys};
pub use listing::{TagPage, TagRow, TAG_ATTRIBUTE, TAG_TEXT_LEN};
pub use ops::{Create, Operation};
pub use query::{literal, str_literal, CmpOp, Expr, QueryBuildError};
pub use reader::LedgerReader;
pub use rpc::{
    decode_answer, decode_query_answer, query_all, query_all_pinned, query_batch_body, RpcChannel,
    RpcLedger, RpcWriter, MAX_PAGE_SIZE,
};
pub use system::{
    issuer_keys_query, lifetime_blocks, live_heartbeats_query, record_create, spends_query,
    Heartbeat, IssuerKeyEntity, SpendsEntity, CONTENT_TYPE_BINARY, CONTENT_TYPE_JSON,
    HEARTBEAT_INTERVAL_MS, HEARTBEAT_LIFETIME_SECONDS, ISSUER_KEY_LIFETIME_SECONDS, KIND_ATTRIBUTE,
    KIND_HEARTBEAT, KIND_ISSUER_KEY, KIND_SPENDS, PRIVSVC_PROJECT, PROJECT_ATTRIBUTE,
    SPENDS_LIFETIME_SECONDS, TOKEN_ID_BYTES,
};
pub use wire::{entity_from_json, entity_to_json, select_all};
pub use writer::{BatchReceipt, CreatedEntity, LedgerWriter, PreparedTx, TransferredEntity};
