//! The native Arkiv ABI (SDK 0.8.1): `execute((uint8,bytes)[])` calldata, the operation structs,
//! the five events, the 21 custom errors and the `entityNonce(address)` view.
//!
//! [`encode_operations`] turns [`crate::Operation`]s into canonical calldata;
//! [`decode_operations`] is the node side: it parses calldata with every rule the node applies
//! before touching state and returns a [`DecodeError`] that maps to the node's revert data
//! ([`DecodeError::revert_data`]). [`decode_revert`] renders any revert data as text.

use alloy_primitives::{address, Address, Bytes, B256, U256};
use alloy_sol_types::{sol, SolCall, SolError, SolInterface, SolValue};

use crate::codec::{
    self, check_ident32_word, name_to_bytes32, CodecError, NameError, MAX_NAME_BYTES, TYPE_BYTES,
    TYPE_STR, TYPE_TOMBSTONE,
};
use crate::entity::{ArkivValue, Attribute as ModelAttribute, CreationFlags};
use crate::error::{LedgerError, Revert};
use crate::ops::{Create as ModelCreate, Operation as ModelOperation};

/// The native Arkiv entrypoint (no bytecode; the node executes calls natively).
pub const ARKIV_ADDRESS: Address = address!("4400000000000000000000000000000000000044");

/// Operation tag of a create.
pub const OP_CREATE: u8 = 1;
/// Operation tag of a patch.
pub const OP_PATCH: u8 = 2;
/// Operation tag of an expiry extension.
pub const OP_EXTEND_EXPIRY: u8 = 3;
/// Operation tag of an ownership transfer.
pub const OP_TRANSFER_OWNERSHIP: u8 = 4;
/// Operation tag of a delete.
pub const OP_DELETE: u8 = 5;

/// Most attribute cells in one create or patch, system cells included.
pub const MAX_ATTRIBUTES: usize = 32;
/// Name of the payload system cell (typeId 7).
pub const PAYLOAD_ATTRIBUTE: &str = "$payload";
/// Name of the content-type system cell (typeId 8).
pub const CONTENT_TYPE_ATTRIBUTE: &str = "$contentType";
/// Creation-flag bit: readonly.
pub const FLAG_READONLY: u8 = 1;
/// Creation-flag bit: anyone may extend.
pub const FLAG_PERMISSIONLESS_EXTENSION: u8 = 2;
/// Mask of the defined creation-flag bits; others are `ReservedCreationFlags`.
pub const FLAGS_MASK: u8 = 0b11;
/// `expiresAt` of a permanent entity.
pub const PERMANENT: u64 = u64::MAX;

#[allow(missing_docs)]
mod bindings {
    use super::sol;

    sol! {
        /// The native Arkiv entrypoint at `0x44…44`.
        #[derive(Debug, PartialEq, Eq)]
        interface Arkiv {
            /// One operation: a tag and `abi.encode` of the struct the tag names.
            struct Operation { uint8 operation; bytes operationData; }
            /// One attribute cell: null-padded name, typeId, value bytes.
            struct Attribute { bytes32 name; uint8 typeId; bytes value; }
            /// operationData of tag 1.
            struct Create { uint128 salt; uint64 expiresAt; uint64 minLifetime; uint8 creationFlags; Attribute[] attributes; }
            /// operationData of tag 2.
            struct Patch { bytes32 entityKey; Attribute[] mutations; }
            /// operationData of tag 3.
            struct ExtendExpiry { bytes32 entityKey; uint64 expiresAt; uint64 minLifetime; }
            /// operationData of tag 4.
            struct TransferOwnership { bytes32 entityKey; address newOwner; }
            /// operationData of tag 5.
            struct Delete { bytes32 entityKey; }

            /// Apply a batch atomically; returns the created keys.
            function execute(Operation[] ops) external returns (bytes32[] keys);
            /// The per-creator count of creates (the key-derivation nonce).
            function entityNonce(address owner) external view returns (uint64);
            /// The custom attribute names of an entity.
            function customAttributeNames(bytes32 entityKey) external view returns (bytes32[]);
            /// The typeId of one attribute of an entity.
            function attributeTypeId(bytes32 entityKey, bytes32 name) external view returns (uint8);

            /// A create (owner = creator = sender).
            event EntityCreated(bytes32 indexed entityKey, address indexed owner, uint64 expiresAt, uint8 creationFlags);
            /// A patch.
            event EntityPatched(bytes32 indexed entityKey, address indexed owner);
            /// An expiry extension (owner = the entity's owner, not necessarily the sender).
            event ExpiryExtended(bytes32 indexed entityKey, address indexed owner, uint64 expiresAt);
            /// An ownership transfer.
            event OwnershipTransferred(bytes32 indexed entityKey, address indexed previousOwner, address indexed newOwner);
            /// A delete (owner = the prior owner).
            event EntityDeleted(bytes32 indexed entityKey, address indexed owner);

            error EmptyBatch();
            error InvalidOpType(uint8 operation);
            error NonCanonicalOperationData(uint8 operation);
            error AttributesNotSorted();
            error TooManyAttributes(uint256 count, uint256 maxCount);
            error EmptyMutations(bytes32 entityKey);
            error TombstoneInCreate(bytes32 name);
            error TombstoneValueNotEmpty(bytes32 name);
            error SystemAttributeNotWritable(bytes32 name);
            error InvalidValueType(bytes32 name, uint8 typeId);
            error Ident32Empty();
            error Ident32InvalidByte(uint256 position, bytes1 value);
            error EntityNotFound(bytes32 entityKey);
            error EntityExpired(bytes32 entityKey, uint64 expiresAt);
            error NotOwner(bytes32 entityKey, address caller, address owner);
            error ReadOnlyEntity(bytes32 entityKey);
            error ReservedCreationFlags(uint8 creationFlags);
            error ExpiryDeadOnArrival(uint64 target, uint64 currentBlock);
            error ExpiryNotExtended(bytes32 entityKey, uint64 newExpiresAt, uint64 currentExpiresAt);
            error TransferToZeroAddress(bytes32 entityKey);
            error TransferToSelf(bytes32 entityKey);
        }
    }

    sol! {
        /// The standard `Error(string)` revert.
        #[derive(Debug, PartialEq, Eq)]
        error Error(string message);
        /// The standard `Panic(uint256)` revert.
        #[derive(Debug, PartialEq, Eq)]
        error Panic(uint256 code);
    }
}

pub use bindings::Arkiv::{self, *};
pub use bindings::{Error as ErrorString, Panic};

/// The calldata of `entityNonce(owner)`.
pub fn entity_nonce_calldata(owner: Address) -> Bytes {
    entityNonceCall { owner }.abi_encode().into()
}

/// The revert data of `Error(string)` (used for reasons without a typed error).
pub fn error_string_revert(message: &str) -> Bytes {
    ErrorString {
        message: message.to_owned(),
    }
    .abi_encode()
    .into()
}

fn name_word_lossy(name: &str) -> B256 {
    // Names longer than 32 bytes cannot be represented; keep the first 32 bytes
    // (`check_operations` refuses them before anything is sent).
    let bytes = name.as_bytes();
    let n = bytes.len().min(MAX_NAME_BYTES);
    let mut w = [0u8; 32];
    w[..n].copy_from_slice(&bytes[..n]);
    B256::from(w)
}

fn cell(name: &str, type_id: u8, value: Vec<u8>) -> Attribute {
    Attribute {
        name: name_word_lossy(name),
        typeId: type_id,
        value: value.into(),
    }
}

fn sorted(mut cells: Vec<Attribute>) -> Vec<Attribute> {
    cells.sort_by_key(|a| a.name);
    cells
}

/// The creation-flags byte of `flags`.
pub fn flags_byte(flags: CreationFlags) -> u8 {
    (if flags.readonly { FLAG_READONLY } else { 0 })
        | (if flags.permissionless_extension {
            FLAG_PERMISSIONLESS_EXTENSION
        } else {
            0
        })
}

/// The flags of a creation-flags byte; `None` when a reserved bit (2 to 7) is set.
pub fn flags_from_byte(byte: u8) -> Option<CreationFlags> {
    (byte & !FLAGS_MASK == 0).then_some(CreationFlags {
        readonly: byte & FLAG_READONLY != 0,
        permissionless_extension: byte & FLAG_PERMISSIONLESS_EXTENSION != 0,
    })
}

/// The `(tag, operationData)` of one operation, canonically encoded: create and patch with the
/// leading 0x20 offset word, extend, transfer and delete as bare static tuples; cells sorted by
/// their `bytes32` name; a create carries `$contentType` and `$payload` cells.
pub fn encode_operation(op: &ModelOperation) -> Operation {
    let (tag, data) = match op {
        ModelOperation::Create(c) => {
            let mut cells = vec![
                cell(
                    CONTENT_TYPE_ATTRIBUTE,
                    TYPE_STR,
                    c.content_type.as_bytes().to_vec(),
                ),
                cell(PAYLOAD_ATTRIBUTE, TYPE_BYTES, c.payload.clone()),
            ];
            cells.extend(
                c.attributes
                    .iter()
                    .map(|a| cell(&a.name, a.value.type_id(), a.value.abi_bytes())),
            );
            let data = Create {
                salt: c.salt,
                expiresAt: c.expires_at,
                minLifetime: c.min_lifetime,
                creationFlags: flags_byte(c.flags),
                attributes: sorted(cells),
            };
            (OP_CREATE, data.abi_encode())
        }
        ModelOperation::Patch { key, mutations } => {
            let cells = mutations
                .iter()
                .map(|(name, v)| match v {
                    Some(v) => cell(name, v.type_id(), v.abi_bytes()),
                    None => cell(name, TYPE_TOMBSTONE, Vec::new()),
                })
                .collect();
            let data = Patch {
                entityKey: *key,
                mutations: sorted(cells),
            };
            (OP_PATCH, data.abi_encode())
        }
        ModelOperation::Extend {
            key,
            expires_at,
            min_lifetime,
        } => (
            OP_EXTEND_EXPIRY,
            ExtendExpiry {
                entityKey: *key,
                expiresAt: *expires_at,
                minLifetime: *min_lifetime,
            }
            .abi_encode(),
        ),
        ModelOperation::Transfer { key, new_owner } => (
            OP_TRANSFER_OWNERSHIP,
            TransferOwnership {
                entityKey: *key,
                newOwner: *new_owner,
            }
            .abi_encode(),
        ),
        ModelOperation::Delete { key } => (OP_DELETE, Delete { entityKey: *key }.abi_encode()),
    };
    Operation {
        operation: tag,
        operationData: data.into(),
    }
}

/// The `execute()` calldata (selector `0x49650044`) of a batch, canonical as the node demands.
///
/// Encodes exactly what it is given, invalid names or values included (tests need that; the
/// node is the judge). Call [`check_operations`] first to refuse what the node would revert.
/// Names longer than 32 bytes are cut to 32 bytes.
pub fn encode_operations(ops: &[ModelOperation]) -> Bytes {
    executeCall {
        ops: ops.iter().map(encode_operation).collect(),
    }
    .abi_encode()
    .into()
}

/// Check a batch against every rule the node applies while decoding (non-empty batch, attribute
/// names and values, at most 32 cells, no tombstone in a create, transfer not to zero, …) plus
/// names longer than 32 bytes. The error names the operation and the rule.
pub fn check_operations(ops: &[ModelOperation]) -> Result<(), LedgerError> {
    for (i, op) in ops.iter().enumerate() {
        let names: Vec<&str> = match op {
            ModelOperation::Create(c) => c.attributes.iter().map(|a| a.name.as_str()).collect(),
            ModelOperation::Patch { mutations, .. } => {
                mutations.iter().map(|(n, _)| n.as_str()).collect()
            }
            _ => Vec::new(),
        };
        let mut seen = std::collections::HashSet::new();
        for name in names {
            if name.len() > MAX_NAME_BYTES {
                return Err(LedgerError::invalid(format!(
                    "operation {i}: {}",
                    NameError::TooLong(name.len())
                )));
            }
            if !seen.insert(name) {
                return Err(LedgerError::invalid(format!(
                    "operation {i}: attribute {name:?} appears twice"
                )));
            }
            if let ModelOperation::Create(c) = op {
                if c.attributes
                    .iter()
                    .any(|a| a.name == name && matches!(a.value, ArkivValue::Bytes(_)))
                {
                    return Err(LedgerError::invalid(format!(
                        "operation {i}: attribute {name:?} has type bytes, which only $payload \
                         may carry"
                    )));
                }
                if name.starts_with('$') {
                    return Err(LedgerError::invalid(format!(
                        "operation {i}: attribute {name:?} is a system attribute; set the \
                         payload and content type through their fields"
                    )));
                }
            }
        }
    }
    decode_operations(&encode_operations(ops))
        .map(|_| ())
        .map_err(|e| LedgerError::Invalid(Box::new(e)))
}

/// An operation decoded and validated by [`decode_operations`]: the crate's [`ModelOperation`]
/// (a create's `$contentType`/`$payload` cells lifted into its fields, empty when absent).
pub type DecodedOp = ModelOperation;

/// What is wrong with a cell's value in [`DecodeError::InvalidValueType`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidValueReason {
    /// The value does not decode as its type; the source is the codec's error.
    #[error("{0}")]
    Codec(#[source] CodecError),
    /// A system cell written with another typeId than its own.
    #[error("this system cell takes typeId {0}")]
    SystemCellType(u8),
    /// A bytes value (typeId 7) outside `$payload`.
    #[error("bytes (typeId 7) is for $payload only")]
    BytesOutsidePayload,
    /// A `$contentType` that is not UTF-8.
    #[error("$contentType must be UTF-8")]
    ContentTypeNotUtf8,
}

/// Why the node refuses `execute()` calldata before touching state. Every variant but
/// [`DecodeError::Malformed`] is one of the node's custom errors; `Malformed` reverts with
/// `Error(string)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Calldata too short, unknown selector, an undecodable `Operation[]`, or an operationData
    /// that does not decode as its tag's struct at all.
    #[error("malformed execute() calldata: {0}")]
    Malformed(String),
    /// `EmptyBatch()`.
    #[error("the batch holds no operation (EmptyBatch)")]
    EmptyBatch,
    /// `InvalidOpType(uint8)`.
    #[error("unknown operation tag {0} (InvalidOpType)")]
    InvalidOpType(u8),
    /// `NonCanonicalOperationData(uint8)`.
    #[error("operationData of tag {0} is not canonically ABI-encoded (NonCanonicalOperationData)")]
    NonCanonicalOperationData(u8),
    /// `AttributesNotSorted()`.
    #[error("attributes must be strictly ascending by bytes32 name, without duplicates (AttributesNotSorted)")]
    AttributesNotSorted,
    /// `TooManyAttributes(uint256,uint256)`.
    #[error("{count} attribute cells in one operation; at most {max} (TooManyAttributes)")]
    TooManyAttributes {
        /// Cells in the operation.
        count: usize,
        /// The limit (32).
        max: usize,
    },
    /// `EmptyMutations(bytes32)`.
    #[error("patch of {0} has no mutation (EmptyMutations)")]
    EmptyMutations(B256),
    /// `TombstoneInCreate(bytes32)`.
    #[error("a create cannot unset attribute {} (TombstoneInCreate)", show_name(.0))]
    TombstoneInCreate(B256),
    /// `SystemAttributeNotWritable(bytes32)`.
    #[error("system attribute {} cannot be written (SystemAttributeNotWritable)", show_name(.0))]
    SystemAttributeNotWritable(B256),
    /// `InvalidValueType(bytes32,uint8)`.
    #[error("attribute {} has an invalid value for typeId {type_id}: {reason} (InvalidValueType)", show_name(.name))]
    InvalidValueType {
        /// The attribute name word.
        name: B256,
        /// The typeId given.
        type_id: u8,
        /// What is wrong (not part of the revert data).
        reason: InvalidValueReason,
    },
    /// `Ident32Empty()`.
    #[error("an attribute name is empty (Ident32Empty)")]
    Ident32Empty,
    /// `Ident32InvalidByte(uint256,bytes1)`.
    #[error("attribute name byte 0x{byte:02x} at position {index} is not allowed: names are a-z first, then a-z 0-9 . - _ (Ident32InvalidByte)")]
    Ident32InvalidByte {
        /// Byte position.
        index: usize,
        /// The byte.
        byte: u8,
    },
    /// `ReservedCreationFlags(uint8)`.
    #[error("creation flags 0x{0:02x} set reserved bits (ReservedCreationFlags)")]
    ReservedCreationFlags(u8),
    /// `TransferToZeroAddress(bytes32)`.
    #[error("transfer of {0} to the zero address (TransferToZeroAddress)")]
    TransferToZeroAddress(B256),
}

fn show_name(w: &B256) -> String {
    match codec::bytes32_to_name(w) {
        Some(n) if !n.is_empty() && n.bytes().all(|b| (0x20..0x7f).contains(&b)) => {
            format!("{n:?}")
        }
        _ => w.to_string(),
    }
}

impl DecodeError {
    /// The revert data the node returns for this error (custom error, or `Error(string)` for
    /// [`DecodeError::Malformed`]).
    pub fn revert_data(&self) -> Bytes {
        let v = match self {
            DecodeError::Malformed(m) => return error_string_revert(m),
            DecodeError::EmptyBatch => EmptyBatch {}.abi_encode(),
            DecodeError::InvalidOpType(t) => InvalidOpType { operation: *t }.abi_encode(),
            DecodeError::NonCanonicalOperationData(t) => {
                NonCanonicalOperationData { operation: *t }.abi_encode()
            }
            DecodeError::AttributesNotSorted => AttributesNotSorted {}.abi_encode(),
            DecodeError::TooManyAttributes { count, max } => TooManyAttributes {
                count: U256::from(*count),
                maxCount: U256::from(*max),
            }
            .abi_encode(),
            DecodeError::EmptyMutations(k) => EmptyMutations { entityKey: *k }.abi_encode(),
            DecodeError::TombstoneInCreate(n) => TombstoneInCreate { name: *n }.abi_encode(),
            DecodeError::SystemAttributeNotWritable(n) => {
                SystemAttributeNotWritable { name: *n }.abi_encode()
            }
            DecodeError::InvalidValueType { name, type_id, .. } => InvalidValueType {
                name: *name,
                typeId: *type_id,
            }
            .abi_encode(),
            DecodeError::Ident32Empty => Ident32Empty {}.abi_encode(),
            DecodeError::Ident32InvalidByte { index, byte } => Ident32InvalidByte {
                position: U256::from(*index),
                value: alloy_primitives::FixedBytes([*byte]),
            }
            .abi_encode(),
            DecodeError::ReservedCreationFlags(f) => {
                ReservedCreationFlags { creationFlags: *f }.abi_encode()
            }
            DecodeError::TransferToZeroAddress(k) => {
                TransferToZeroAddress { entityKey: *k }.abi_encode()
            }
        };
        v.into()
    }
}

impl From<NameError> for DecodeError {
    fn from(e: NameError) -> Self {
        match e {
            NameError::Empty => DecodeError::Ident32Empty,
            NameError::InvalidByte { index, byte } => {
                DecodeError::Ident32InvalidByte { index, byte }
            }
            // A bytes32 cannot hold more than 32 bytes; kept for completeness.
            NameError::TooLong(n) => DecodeError::Malformed(format!("name of {n} bytes")),
        }
    }
}

fn bad_value(name: B256, type_id: u8, e: CodecError) -> DecodeError {
    DecodeError::InvalidValueType {
        name,
        type_id,
        reason: InvalidValueReason::Codec(e),
    }
}

fn is_word(w: &B256, name: &str) -> bool {
    name_to_bytes32(name).map(|n| n == *w).unwrap_or(false)
}

/// Whether a name word is one of the two writable system cells.
fn is_user_managed(name: &B256) -> bool {
    is_word(name, PAYLOAD_ATTRIBUTE) || is_word(name, CONTENT_TYPE_ATTRIBUTE)
}

/// The node's system-name check (`$` names): a non-empty remainder and contiguous padding.
fn check_system_word(word: &B256) -> Result<(), DecodeError> {
    if word[1] == 0 {
        return Err(DecodeError::Ident32Empty);
    }
    let mut seen_zero = false;
    for (index, b) in word.iter().enumerate().skip(1) {
        if *b == 0 {
            seen_zero = true;
        } else if seen_zero {
            return Err(DecodeError::Ident32InvalidByte { index, byte: *b });
        }
    }
    Ok(())
}

/// The structural rules of every cell list, in the node's order: at most 32 cells, then each
/// name (`$` names other than `$payload`/`$contentType` are engine-owned; user names follow
/// `Ident32`), then strict ascending order.
fn check_cells(cells: &[Attribute]) -> Result<(), DecodeError> {
    if cells.len() > MAX_ATTRIBUTES {
        return Err(DecodeError::TooManyAttributes {
            count: cells.len(),
            max: MAX_ATTRIBUTES,
        });
    }
    for c in cells {
        if c.name[0] == b'$' {
            if !is_user_managed(&c.name) {
                return Err(DecodeError::SystemAttributeNotWritable(c.name));
            }
            check_system_word(&c.name)?;
        } else {
            check_ident32_word(&c.name)?;
        }
    }
    if cells.windows(2).any(|w| w[0].name >= w[1].name) {
        return Err(DecodeError::AttributesNotSorted);
    }
    Ok(())
}

/// One cell's value (`None` for a tombstone); an ill-formed value is `InvalidValueType`, and
/// so is a type the cell's name does not allow: `$payload` is `bytes` (typeId 7), `$contentType`
/// is `str` (8), and `bytes` is for `$payload` only.
fn cell_value(c: &Attribute) -> Result<Option<ArkivValue>, DecodeError> {
    let value =
        codec::decode_cell(c.typeId, &c.value).map_err(|e| bad_value(c.name, c.typeId, e))?;
    if value.is_none() {
        return Ok(None);
    }
    let expected = if is_word(&c.name, PAYLOAD_ATTRIBUTE) {
        Some(codec::TYPE_BYTES)
    } else if is_word(&c.name, CONTENT_TYPE_ATTRIBUTE) {
        Some(codec::TYPE_STR)
    } else {
        None
    };
    let allowed = match expected {
        Some(t) => c.typeId == t,
        None => c.typeId != codec::TYPE_BYTES,
    };
    if !allowed {
        return Err(DecodeError::InvalidValueType {
            name: c.name,
            type_id: c.typeId,
            reason: match expected {
                Some(t) => InvalidValueReason::SystemCellType(t),
                None => InvalidValueReason::BytesOutsidePayload,
            },
        });
    }
    Ok(value)
}

fn cell_name(c: &Attribute) -> String {
    codec::bytes32_to_name(&c.name).unwrap_or_default()
}

fn decode_canonical<T>(tag: u8, data: &[u8]) -> Result<T, DecodeError>
where
    T: SolValue + From<<T::SolType as alloy_sol_types::SolType>::RustType>,
{
    let v = T::abi_decode(data).map_err(|e| {
        DecodeError::Malformed(format!("operation {tag}: invalid operationData: {e}"))
    })?;
    if v.abi_encode() != data {
        return Err(DecodeError::NonCanonicalOperationData(tag));
    }
    Ok(v)
}

fn decode_create(data: &[u8]) -> Result<DecodedOp, DecodeError> {
    let c: Create = decode_canonical(OP_CREATE, data)?;
    let flags = flags_from_byte(c.creationFlags)
        .ok_or(DecodeError::ReservedCreationFlags(c.creationFlags))?;
    check_cells(&c.attributes)?;
    let mut content_type = String::new();
    let mut payload = Vec::new();
    let mut attributes = Vec::new();
    for cell in &c.attributes {
        let value = cell_value(cell)?.ok_or(DecodeError::TombstoneInCreate(cell.name))?;
        if is_word(&cell.name, PAYLOAD_ATTRIBUTE) {
            payload = value.abi_bytes();
        } else if is_word(&cell.name, CONTENT_TYPE_ATTRIBUTE) {
            content_type = String::from_utf8(value.abi_bytes()).map_err(|_| {
                DecodeError::InvalidValueType {
                    name: cell.name,
                    type_id: cell.typeId,
                    reason: InvalidValueReason::ContentTypeNotUtf8,
                }
            })?;
        } else {
            attributes.push(ModelAttribute {
                name: cell_name(cell),
                value,
            });
        }
    }
    Ok(ModelOperation::Create(ModelCreate {
        salt: c.salt,
        expires_at: c.expiresAt,
        min_lifetime: c.minLifetime,
        flags,
        content_type,
        payload,
        attributes,
    }))
}

fn decode_patch(data: &[u8]) -> Result<DecodedOp, DecodeError> {
    let p: Patch = decode_canonical(OP_PATCH, data)?;
    if p.mutations.is_empty() {
        return Err(DecodeError::EmptyMutations(p.entityKey));
    }
    check_cells(&p.mutations)?;
    let mutations = p
        .mutations
        .iter()
        .map(|c| Ok((cell_name(c), cell_value(c)?)))
        .collect::<Result<Vec<_>, DecodeError>>()?;
    Ok(ModelOperation::Patch {
        key: p.entityKey,
        mutations,
    })
}

fn decode_one(op: &Operation) -> Result<DecodedOp, DecodeError> {
    let data = op.operationData.as_ref();
    match op.operation {
        OP_CREATE => decode_create(data),
        OP_PATCH => decode_patch(data),
        OP_EXTEND_EXPIRY => {
            let e: ExtendExpiry = decode_canonical(OP_EXTEND_EXPIRY, data)?;
            Ok(ModelOperation::Extend {
                key: e.entityKey,
                expires_at: e.expiresAt,
                min_lifetime: e.minLifetime,
            })
        }
        OP_TRANSFER_OWNERSHIP => {
            let t: TransferOwnership = decode_canonical(OP_TRANSFER_OWNERSHIP, data)?;
            if t.newOwner == Address::ZERO {
                return Err(DecodeError::TransferToZeroAddress(t.entityKey));
            }
            Ok(ModelOperation::Transfer {
                key: t.entityKey,
                new_owner: t.newOwner,
            })
        }
        OP_DELETE => {
            let d: Delete = decode_canonical(OP_DELETE, data)?;
            Ok(ModelOperation::Delete { key: d.entityKey })
        }
        other => Err(DecodeError::InvalidOpType(other)),
    }
}

/// Decode and validate `execute()` calldata the way the node does before execution (mirrors
/// the Arkiv node's `decode_ops`): selector, non-empty batch, known tags, canonical
/// operationData (decoded, re-encoded and compared), creation flags, at most 32 cells,
/// `Ident32` names with only `$payload` and `$contentType` writable among `$` names, strictly
/// ascending names, exact value words (a tombstone is typeId 0 with an empty value), no
/// tombstone in a create, no transfer to zero. Expiry resolution ([`resolve_expiry`](crate::resolve_expiry)) and state
/// rules (existence, ownership, readonly) are the executor's job.
pub fn decode_operations(calldata: &[u8]) -> Result<Vec<DecodedOp>, DecodeError> {
    if calldata.len() < 4 {
        return Err(DecodeError::Malformed(
            "calldata too short for a selector".into(),
        ));
    }
    if calldata[..4] != executeCall::SELECTOR {
        return Err(DecodeError::Malformed(format!(
            // The node's wording (`{:02x?}` of the four bytes).
            "unknown selector {:02x?}",
            &calldata[..4]
        )));
    }
    // Like the node, the outer Operation[] is decoded leniently; every operationData must be
    // canonical.
    let call = executeCall::abi_decode_raw(&calldata[4..])
        .map_err(|e| DecodeError::Malformed(format!("invalid execute calldata: {e}")))?;
    if call.ops.is_empty() {
        return Err(DecodeError::EmptyBatch);
    }
    call.ops.iter().map(decode_one).collect()
}

/// Decode one log of the Arkiv address into one of the five events (`None` for anything else).
pub fn decode_log(topics: &[B256], data: &[u8]) -> Option<ArkivEvents> {
    use alloy_sol_types::SolEventInterface;
    ArkivEvents::decode_raw_log(topics, data).ok()
}

fn name_arg(w: &B256) -> String {
    show_name(w)
}

impl Revert {
    /// The revert carrying the ABI-encoded error `data` (its reason: [`decode_revert`]).
    pub fn from_data(data: Vec<u8>) -> Self {
        Revert::new(decode_revert(&data), Some(data))
    }
}

/// Render revert data as text: a custom error with its arguments (`NotOwner(0x…,0x…,0x…)`,
/// names as quoted text when printable, addresses checksummed), `Error("…")`, `Panic(0x…)`, or
/// `unknown revert 0x…` for anything else (`empty revert data` when empty).
pub fn decode_revert(data: &[u8]) -> String {
    if data.is_empty() {
        return "empty revert data".into();
    }
    if let Ok(e) = ErrorString::abi_decode(data) {
        return format!("Error({:?})", e.message);
    }
    if let Ok(p) = Panic::abi_decode(data) {
        return format!("Panic({:#x})", p.code);
    }
    let Ok(e) = ArkivErrors::abi_decode(data) else {
        return format!("unknown revert 0x{}", hex::encode(data));
    };
    use ArkivErrors as E;
    match e {
        E::EmptyBatch(_) => "EmptyBatch()".into(),
        E::InvalidOpType(x) => format!("InvalidOpType({})", x.operation),
        E::NonCanonicalOperationData(x) => format!("NonCanonicalOperationData({})", x.operation),
        E::AttributesNotSorted(_) => "AttributesNotSorted()".into(),
        E::TooManyAttributes(x) => format!("TooManyAttributes({},{})", x.count, x.maxCount),
        E::EmptyMutations(x) => format!("EmptyMutations({})", x.entityKey),
        E::TombstoneInCreate(x) => format!("TombstoneInCreate({})", name_arg(&x.name)),
        E::TombstoneValueNotEmpty(x) => format!("TombstoneValueNotEmpty({})", name_arg(&x.name)),
        E::SystemAttributeNotWritable(x) => {
            format!("SystemAttributeNotWritable({})", name_arg(&x.name))
        }
        E::InvalidValueType(x) => format!("InvalidValueType({},{})", name_arg(&x.name), x.typeId),
        E::Ident32Empty(_) => "Ident32Empty()".into(),
        E::Ident32InvalidByte(x) => format!("Ident32InvalidByte({},{})", x.position, x.value),
        E::EntityNotFound(x) => format!("EntityNotFound({})", x.entityKey),
        E::EntityExpired(x) => format!("EntityExpired({},{})", x.entityKey, x.expiresAt),
        E::NotOwner(x) => format!("NotOwner({},{},{})", x.entityKey, x.caller, x.owner),
        E::ReadOnlyEntity(x) => format!("ReadOnlyEntity({})", x.entityKey),
        E::ReservedCreationFlags(x) => format!("ReservedCreationFlags({})", x.creationFlags),
        E::ExpiryDeadOnArrival(x) => {
            format!("ExpiryDeadOnArrival({},{})", x.target, x.currentBlock)
        }
        E::ExpiryNotExtended(x) => {
            format!(
                "ExpiryNotExtended({},{},{})",
                x.entityKey, x.newExpiresAt, x.currentExpiresAt
            )
        }
        E::TransferToZeroAddress(x) => format!("TransferToZeroAddress({})", x.entityKey),
        E::TransferToSelf(x) => format!("TransferToSelf({})", x.entityKey),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{b256, hex};

    fn create(attrs: Vec<ModelAttribute>) -> ModelOperation {
        ModelOperation::Create(ModelCreate {
            salt: 7,
            expires_at: 0,
            min_lifetime: 50,
            flags: CreationFlags::default(),
            content_type: "application/json".into(),
            payload: b"{}".to_vec(),
            attributes: attrs,
        })
    }

    fn attr(name: &str, value: ArkivValue) -> ModelAttribute {
        ModelAttribute {
            name: name.into(),
            value,
        }
    }

    #[test]
    fn selectors_are_pinned() {
        assert_eq!(hex::encode(executeCall::SELECTOR), "49650044");
        assert_eq!(hex::encode(entityNonceCall::SELECTOR), "36917bfd");
        assert_eq!(hex::encode(Ident32InvalidByte::SELECTOR), "276f7798");
        assert_eq!(
            <EntityCreated as alloy_sol_types::SolEvent>::SIGNATURE_HASH,
            b256!("b282d7c494b8899aa8015cd07be621530beb03409eb8c5e8fdc1411ba64356a5")
        );
    }

    #[test]
    fn create_round_trips_with_sorted_cells() {
        let op = create(vec![
            attr("zebra", ArkivValue::I32(1)),
            attr("apple", ArkivValue::Str("x".into())),
        ]);
        let calldata = encode_operations(std::slice::from_ref(&op));
        let decoded = decode_operations(&calldata).unwrap();
        let ModelOperation::Create(c) = &decoded[0] else {
            panic!("not a create")
        };
        assert_eq!(c.content_type, "application/json");
        assert_eq!(c.payload, b"{}");
        let names: Vec<_> = c.attributes.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["apple", "zebra"]);
    }

    #[test]
    fn rejects_what_the_node_rejects() {
        assert_eq!(
            decode_operations(&encode_operations(&[])),
            Err(DecodeError::EmptyBatch)
        );
        let bad = create(vec![attr("Level", ArkivValue::I32(1))]);
        assert_eq!(
            decode_operations(&encode_operations(&[bad])),
            Err(DecodeError::Ident32InvalidByte {
                index: 0,
                byte: b'L'
            })
        );
        let many = create(
            (0..31)
                .map(|i| attr(&format!("a{i:02}"), ArkivValue::I32(i)))
                .collect(),
        );
        assert_eq!(
            decode_operations(&encode_operations(&[many])),
            Err(DecodeError::TooManyAttributes { count: 33, max: 32 })
        );
        let tomb = ModelOperation::Patch {
            key: B256::repeat_byte(1),
            mutations: vec![("$owner".into(), None)],
        };
        assert!(matches!(
            decode_operations(&encode_operations(&[tomb])),
            Err(DecodeError::SystemAttributeNotWritable(_))
        ));
        let zero = ModelOperation::Transfer {
            key: B256::repeat_byte(1),
            new_owner: Address::ZERO,
        };
        // The refusal keeps the decoder's error, as the node would name it, as its source.
        let refused = check_operations(&[zero]).unwrap_err();
        let source = std::error::Error::source(&refused).expect("a source");
        assert!(
            source.downcast_ref::<DecodeError>().is_some(),
            "{refused:?}"
        );
        // Trailing bytes after a delete's word.
        let mut data = encode_operations(&[ModelOperation::Delete {
            key: B256::repeat_byte(9),
        }])
        .to_vec();
        let ops = executeCall::abi_decode(&data).unwrap().ops;
        let mut op = ops[0].clone();
        let mut od = op.operationData.to_vec();
        od.extend_from_slice(&[0u8; 32]);
        op.operationData = od.into();
        data = executeCall { ops: vec![op] }.abi_encode();
        assert_eq!(
            decode_operations(&data),
            Err(DecodeError::NonCanonicalOperationData(OP_DELETE))
        );
        assert!(matches!(
            decode_operations(&[0xde, 0xad, 0xbe, 0xef, 0]),
            Err(DecodeError::Malformed(_))
        ));
    }

    #[test]
    fn revert_text() {
        let d = DecodeError::Ident32InvalidByte {
            index: 4,
            byte: 0x49,
        }
        .revert_data();
        assert_eq!(decode_revert(&d), "Ident32InvalidByte(4,0x49)");
        let d = NotOwner {
            entityKey: B256::repeat_byte(0x11),
            caller: Address::repeat_byte(0xaa),
            owner: Address::repeat_byte(0xbb),
        }
        .abi_encode();
        assert!(decode_revert(&d).starts_with("NotOwner(0x1111"));
        assert_eq!(
            decode_revert(&error_string_revert("out of gas")),
            "Error(\"out of gas\")"
        );
        let d = DecodeError::SystemAttributeNotWritable(name_to_bytes32("$owner").unwrap())
            .revert_data();
        assert_eq!(decode_revert(&d), "SystemAttributeNotWritable(\"$owner\")");
        assert!(decode_revert(&[1, 2, 3, 4]).starts_with("unknown revert"));
    }
}
