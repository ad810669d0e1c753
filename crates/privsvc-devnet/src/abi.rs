//! The native Arkiv ABI as the node sees it: `execute`, views, operation structs, errors, events.
#![allow(missing_docs)]

use alloy_primitives::{address, Address};

/// The native entrypoint (no bytecode; routed by the node).
pub const ARKIV_ADDRESS: Address = address!("4400000000000000000000000000000000000044");

alloy_sol_types::sol! {
    struct Attribute { bytes32 name; uint8 typeId; bytes value; }
    struct Operation { uint8 operation; bytes operationData; }
    struct CreateOp { uint128 salt; uint64 expiresAt; uint64 minLifetime; uint8 creationFlags; Attribute[] attributes; }
    struct PatchOp { bytes32 entityKey; Attribute[] mutations; }
    struct ExtendOp { bytes32 entityKey; uint64 expiresAt; uint64 minLifetime; }
    struct TransferOp { bytes32 entityKey; address newOwner; }
    struct DeleteOp { bytes32 entityKey; }

    function execute(Operation[] ops) returns (bytes32[] keys);
    function entityNonce(address owner) returns (uint64);
    function customAttributeNames(bytes32 entityKey) returns (bytes32[]);
    function attributeTypeId(bytes32 entityKey, bytes32 name) returns (uint8);

    error EmptyBatch();
    error InvalidOpType(uint8 op);
    error NonCanonicalOperationData(uint8 op);
    error AttributesNotSorted();
    error TooManyAttributes(uint256 count, uint256 max);
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
    error ReservedCreationFlags(uint8 flags);
    error ExpiryDeadOnArrival(uint64 target, uint64 currentBlock);
    error ExpiryNotExtended(bytes32 entityKey, uint64 requested, uint64 current);
    error TransferToZeroAddress(bytes32 entityKey);
    error TransferToSelf(bytes32 entityKey);

    event EntityCreated(bytes32 indexed entityKey, address indexed owner, uint64 expiresAt, uint8 creationFlags);
    event EntityPatched(bytes32 indexed entityKey, address indexed owner);
    event ExpiryExtended(bytes32 indexed entityKey, address indexed owner, uint64 expiresAt);
    event OwnershipTransferred(bytes32 indexed entityKey, address indexed previousOwner, address indexed newOwner);
    event EntityDeleted(bytes32 indexed entityKey, address indexed owner);
}

/// A cell: left-aligned, NUL-padded name (at most 32 bytes; longer names are cut), typeId, value.
pub fn cell(name: &str, type_id: u8, value: impl Into<alloy_primitives::Bytes>) -> Attribute {
    let mut w = [0u8; 32];
    let n = name.len().min(32);
    w[..n].copy_from_slice(&name.as_bytes()[..n]);
    Attribute {
        name: w.into(),
        typeId: type_id,
        value: value.into(),
    }
}

/// A create operation (cells are sorted by name here, as the node requires).
pub fn create_operation(
    salt: u128,
    expires_at: u64,
    min_lifetime: u64,
    flags: u8,
    mut cells: Vec<Attribute>,
) -> Operation {
    use alloy_sol_types::SolValue;
    cells.sort_by_key(|c| c.name);
    let data = CreateOp {
        salt,
        expiresAt: expires_at,
        minLifetime: min_lifetime,
        creationFlags: flags,
        attributes: cells,
    }
    .abi_encode();
    Operation {
        operation: 1,
        operationData: data.into(),
    }
}

/// `execute(ops)` calldata.
pub fn encode_execute(ops: Vec<Operation>) -> alloy_primitives::Bytes {
    use alloy_sol_types::SolCall;
    executeCall { ops }.abi_encode().into()
}
