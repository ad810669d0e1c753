//! The Arkiv entity model as privsvc sees it: keys, metadata, typed attributes and selections.

use alloy_primitives::{Address, B256, I256, U256};

/// An entity key (32 bytes), derived by the node from chain id, creator, entity nonce and salt.
pub type EntityKey = B256;

/// Creation flags of an entity (immutable after create).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CreationFlags {
    /// Payload, content type and attributes can never change.
    pub readonly: bool,
    /// Anyone may extend the entity's expiry.
    pub permissionless_extension: bool,
}

/// A typed Arkiv attribute value (the ten native types; `bytes` is system-only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArkivValue {
    /// typeId 1.
    Bool(bool),
    /// typeId 2.
    I32(i32),
    /// typeId 3.
    U64(u64),
    /// typeId 4.
    U256(U256),
    /// typeId 5: a signed decimal with 18 fractional digits, stored as value × 10^18.
    Dec(I256),
    /// typeId 6.
    Bytes32(B256),
    /// typeId 7 (only `$payload`).
    Bytes(Vec<u8>),
    /// typeId 8: UTF-8, at most 128 bytes.
    Str(String),
    /// typeId 9.
    Addr(Address),
    /// typeId 10.
    Key(B256),
}

/// One named, typed attribute of an entity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// The attribute name (node rule `[a-z][a-z0-9._-]*`, at most 32 bytes).
    pub name: String,
    /// The typed value.
    pub value: ArkivValue,
}

/// An entity as returned by the ledger. Every field but `key` is present only when selected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entity {
    /// The entity key.
    pub key: EntityKey,
    /// Current owner.
    pub owner: Option<Address>,
    /// The account whose transaction created the entity (never changes).
    pub creator: Option<Address>,
    /// Block of creation.
    pub created_at: Option<u64>,
    /// Block of the last mutation.
    pub updated_at: Option<u64>,
    /// First block at which the entity is no longer live.
    pub expires_at: Option<u64>,
    /// Creation flags.
    pub creation_flags: Option<CreationFlags>,
    /// Content type of the payload.
    pub content_type: Option<String>,
    /// The payload bytes.
    pub payload: Option<Vec<u8>>,
    /// User attributes, in stored order.
    pub attributes: Option<Vec<Attribute>>,
}

/// Which attributes a query returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AttributeSelect {
    /// No attributes.
    #[default]
    None,
    /// Every attribute.
    All,
    /// Only the named attributes.
    Named(Vec<String>),
}

/// The projection of `arkiv_query` (`select`). The node's default is the key only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Select {
    /// Entity key.
    pub key: bool,
    /// Current owner.
    pub owner: bool,
    /// Creator.
    pub creator: bool,
    /// Creation block.
    pub created_at: bool,
    /// Last-mutation block.
    pub updated_at: bool,
    /// Expiry block.
    pub expires_at: bool,
    /// Creation flags.
    pub creation_flags: bool,
    /// Content type.
    pub content_type: bool,
    /// Payload.
    pub payload: bool,
    /// Attribute names and types.
    pub attribute_schema: bool,
    /// Attribute values.
    pub attributes: AttributeSelect,
}

/// Options of one `arkiv_query` page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueryOptions {
    /// Evaluate at this block (default: head).
    pub at_block: Option<u64>,
    /// Projection.
    pub select: Select,
    /// Page size, 1 to 200 (default: the node's).
    pub limit: Option<u32>,
    /// Continuation cursor from the previous page.
    pub cursor: Option<String>,
}

impl QueryOptions {
    /// Options with this projection: at the head, the node's page size, no cursor.
    pub fn new(select: Select) -> Self {
        QueryOptions {
            select,
            ..Default::default()
        }
    }
}

/// One page to ask for: an `arkiv_query` expression in the typed grammar and its options
/// ([`crate::LedgerReader::query_many`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageQuery {
    /// The query expression.
    pub expression: String,
    /// Its options (block, projection, page size, cursor).
    pub options: QueryOptions,
}

/// One page of query results.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryPage {
    /// The entities on this page.
    pub entities: Vec<Entity>,
    /// The block the page was evaluated at.
    pub block_number: u64,
    /// Present when more pages follow.
    pub cursor: Option<String>,
}
