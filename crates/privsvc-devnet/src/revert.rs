//! Revert reasons of the native executor and their ABI encoding.

use alloy_primitives::{Address, Bytes, FixedBytes, B256, U256};
use alloy_sol_types::{Revert as SolRevert, SolError};

use crate::abi;

/// Why an `execute()` batch reverted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revert {
    /// `EmptyBatch()`.
    EmptyBatch,
    /// `InvalidOpType(uint8)`.
    InvalidOpType(u8),
    /// `NonCanonicalOperationData(uint8)`.
    NonCanonical(u8),
    /// `AttributesNotSorted()`.
    NotSorted,
    /// `TooManyAttributes(uint256,uint256)`.
    TooManyAttributes(usize, usize),
    /// `EmptyMutations(bytes32)`.
    EmptyMutations(B256),
    /// `TombstoneInCreate(bytes32)`.
    TombstoneInCreate(B256),
    /// `TombstoneValueNotEmpty(bytes32)`.
    TombstoneValueNotEmpty(B256),
    /// `SystemAttributeNotWritable(bytes32)`.
    SystemNotWritable(B256),
    /// `InvalidValueType(bytes32,uint8)`.
    InvalidValueType(B256, u8),
    /// `Ident32Empty()`.
    IdentEmpty,
    /// `Ident32InvalidByte(uint256,bytes1)`.
    IdentInvalidByte(usize, u8),
    /// `EntityNotFound(bytes32)`.
    NotFound(B256),
    /// `EntityExpired(bytes32,uint64)`.
    Expired(B256, u64),
    /// `NotOwner(bytes32,address,address)` (key, caller, owner).
    NotOwner(B256, Address, Address),
    /// `ReadOnlyEntity(bytes32)`.
    ReadOnly(B256),
    /// `ReservedCreationFlags(uint8)`.
    ReservedFlags(u8),
    /// `ExpiryDeadOnArrival(uint64,uint64)` (target, current block).
    DeadOnArrival(u64, u64),
    /// `ExpiryNotExtended(bytes32,uint64,uint64)` (key, requested, current).
    NotExtended(B256, u64, u64),
    /// `TransferToZeroAddress(bytes32)`.
    TransferToZero(B256),
    /// `TransferToSelf(bytes32)`.
    TransferToSelf(B256),
    /// `Error(string)` for reasons without a typed error (already exists, out of gas, ...).
    Message(String),
}

impl Revert {
    /// The ABI-encoded revert data.
    pub fn data(&self) -> Bytes {
        let v = match self {
            Revert::EmptyBatch => abi::EmptyBatch {}.abi_encode(),
            Revert::InvalidOpType(op) => abi::InvalidOpType { op: *op }.abi_encode(),
            Revert::NonCanonical(op) => abi::NonCanonicalOperationData { op: *op }.abi_encode(),
            Revert::NotSorted => abi::AttributesNotSorted {}.abi_encode(),
            Revert::TooManyAttributes(c, m) => abi::TooManyAttributes {
                count: U256::from(*c),
                max: U256::from(*m),
            }
            .abi_encode(),
            Revert::EmptyMutations(k) => abi::EmptyMutations { entityKey: *k }.abi_encode(),
            Revert::TombstoneInCreate(n) => abi::TombstoneInCreate { name: *n }.abi_encode(),
            Revert::TombstoneValueNotEmpty(n) => {
                abi::TombstoneValueNotEmpty { name: *n }.abi_encode()
            }
            Revert::SystemNotWritable(n) => {
                abi::SystemAttributeNotWritable { name: *n }.abi_encode()
            }
            Revert::InvalidValueType(n, t) => abi::InvalidValueType {
                name: *n,
                typeId: *t,
            }
            .abi_encode(),
            Revert::IdentEmpty => abi::Ident32Empty {}.abi_encode(),
            Revert::IdentInvalidByte(p, b) => abi::Ident32InvalidByte {
                position: U256::from(*p),
                value: FixedBytes::<1>::from([*b]),
            }
            .abi_encode(),
            Revert::NotFound(k) => abi::EntityNotFound { entityKey: *k }.abi_encode(),
            Revert::Expired(k, e) => abi::EntityExpired {
                entityKey: *k,
                expiresAt: *e,
            }
            .abi_encode(),
            Revert::NotOwner(k, c, o) => abi::NotOwner {
                entityKey: *k,
                caller: *c,
                owner: *o,
            }
            .abi_encode(),
            Revert::ReadOnly(k) => abi::ReadOnlyEntity { entityKey: *k }.abi_encode(),
            Revert::ReservedFlags(f) => abi::ReservedCreationFlags { flags: *f }.abi_encode(),
            Revert::DeadOnArrival(t, c) => abi::ExpiryDeadOnArrival {
                target: *t,
                currentBlock: *c,
            }
            .abi_encode(),
            Revert::NotExtended(k, r, c) => abi::ExpiryNotExtended {
                entityKey: *k,
                requested: *r,
                current: *c,
            }
            .abi_encode(),
            Revert::TransferToZero(k) => abi::TransferToZeroAddress { entityKey: *k }.abi_encode(),
            Revert::TransferToSelf(k) => abi::TransferToSelf { entityKey: *k }.abi_encode(),
            Revert::Message(m) => SolRevert::from(m.as_str()).abi_encode(),
        };
        Bytes::from(v)
    }

    /// A short human description (`NotOwner(0x.., 0x.., 0x..)`).
    pub fn describe(&self) -> String {
        match self {
            Revert::Message(m) => m.clone(),
            other => format!("{other:?}"),
        }
    }
}
