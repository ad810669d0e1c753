//! The Arkiv ledger as privsvc uses it: the entity model, the `LedgerReader` and `LedgerWriter`
//! traits, and (to come) the JSON-RPC implementation, codecs, query builder and system entities.
#![forbid(unsafe_code)]

pub mod entity;
pub mod error;
pub mod ops;
pub mod reader;
pub mod writer;

pub use entity::{
    ArkivValue, Attribute, AttributeSelect, CreationFlags, Entity, EntityKey, QueryOptions,
    QueryPage, Select,
};
pub use error::LedgerError;
pub use ops::{Create, Operation};
pub use reader::LedgerReader;
pub use writer::{BatchReceipt, CreatedEntity, LedgerWriter, PreparedTx, TransferredEntity};
