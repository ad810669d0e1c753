//! The Arkiv ledger as privsvc uses it (native protocol of SDK 0.8.1): the entity model, the
//! `LedgerReader` and `LedgerWriter` traits, the `execute()` ABI ([`abi`]), the typed attribute
//! codec ([`codec`]), entity key derivation ([`keys`]), expiry resolution ([`expiry`]), the query
//! builder ([`query`]), the JSON wire forms of query results ([`wire`]), the JSON-RPC client
//! ([`rpc`]: [`RpcLedger`], [`RpcWriter`], [`query_all`]) and privsvc's system entities
//! ([`system`]).
#![forbid(unsafe_code)]

pub mod abi;
pub mod codec;
pub mod entity;
pub mod error;
pub mod expiry;
#[cfg(feature = "fuzzing")]
pub mod fuzz_entry;
pub mod keys;
pub mod ops;
pub mod query;
pub mod reader;
pub mod rpc;
pub mod system;
pub mod wire;
pub mod writer;

pub use abi::{decode_operations, decode_revert, encode_operations, DecodeError, ARKIV_ADDRESS};
pub use entity::{
    ArkivValue, Attribute, AttributeSelect, CreationFlags, Entity, EntityKey, PageQuery,
    QueryOptions, QueryPage, Select,
};
pub use error::{LedgerError, Revert};
pub use keys::{entity_key, predict_entity_keys};
pub use ops::{Create, Operation};
pub use reader::LedgerReader;
pub use rpc::{query_all, query_all_pinned, RpcLedger, RpcWriter};
pub use writer::{BatchReceipt, CreatedEntity, LedgerWriter, PreparedTx, TransferredEntity};
