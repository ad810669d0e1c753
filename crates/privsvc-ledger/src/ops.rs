//! The five native `execute()` operations.

use alloy_primitives::{Address, B256};

use crate::entity::{Attribute, CreationFlags};

/// Create an entity (owner and creator = the sender).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Create {
    /// Salt chosen by the sender; part of the key preimage.
    pub salt: u128,
    /// Absolute expiry block (0 when only `min_lifetime` is used).
    pub expires_at: u64,
    /// Minimum lifetime in blocks from the including block.
    pub min_lifetime: u64,
    /// Creation flags.
    pub flags: CreationFlags,
    /// Content type (`$contentType` cell).
    pub content_type: String,
    /// Payload (`$payload` cell).
    pub payload: Vec<u8>,
    /// User attributes (sorted by the encoder).
    pub attributes: Vec<Attribute>,
}

/// One operation of an `execute()` batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// Tag 1.
    Create(Create),
    /// Tag 2: set attributes (`None` value = tombstone, i.e. unset).
    Patch {
        /// Target entity.
        key: B256,
        /// Mutations; a `None` value unsets the attribute.
        mutations: Vec<(String, Option<crate::entity::ArkivValue>)>,
    },
    /// Tag 3.
    Extend {
        /// Target entity.
        key: B256,
        /// Absolute expiry block (0 when only `min_lifetime` is used).
        expires_at: u64,
        /// Minimum lifetime in blocks from the including block.
        min_lifetime: u64,
    },
    /// Tag 4.
    Transfer {
        /// Target entity.
        key: B256,
        /// The new owner.
        new_owner: Address,
    },
    /// Tag 5.
    Delete {
        /// Target entity.
        key: B256,
    },
}
