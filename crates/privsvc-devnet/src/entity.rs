//! The node-side entity record.

use alloy_primitives::{Address, Bytes, B256};
use serde::{Deserialize, Serialize};

/// One user attribute as stored: name, typeId and canonical ABI value bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAttr {
    /// Attribute name (node rule `[a-z][a-z0-9._-]*`).
    pub name: String,
    /// typeId 1..=10 (never 7).
    pub type_id: u8,
    /// ABI value bytes.
    pub value: Bytes,
}

/// The full state of one entity version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityData {
    /// Entity key.
    pub key: B256,
    /// Current owner.
    pub owner: Address,
    /// Creator (never changes).
    pub creator: Address,
    /// Block of creation.
    pub created_at: u64,
    /// Block of the last mutation.
    pub updated_at: u64,
    /// First block at which the entity is no longer live.
    pub expires_at: u64,
    /// Creation flags byte (bit 0 readonly, bit 1 permissionless extension).
    pub flags: u8,
    /// Content type.
    pub content_type: String,
    /// Payload.
    pub payload: Bytes,
    /// User attributes sorted by name.
    pub attrs: Vec<StoredAttr>,
}

impl EntityData {
    /// The attribute called `name`, if set.
    pub fn attr(&self, name: &str) -> Option<&StoredAttr> {
        self.attrs
            .binary_search_by(|a| a.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.attrs[i])
    }

    /// Set (insert or replace) an attribute, keeping the list sorted.
    pub fn set_attr(&mut self, a: StoredAttr) {
        match self.attrs.binary_search_by(|x| x.name.cmp(&a.name)) {
            Ok(i) => self.attrs[i] = a,
            Err(i) => self.attrs.insert(i, a),
        }
    }

    /// Remove an attribute if present.
    pub fn unset_attr(&mut self, name: &str) {
        if let Ok(i) = self.attrs.binary_search_by(|x| x.name.as_str().cmp(name)) {
            self.attrs.remove(i);
        }
    }

    /// True when the readonly flag is set.
    pub fn readonly(&self) -> bool {
        self.flags & 1 != 0
    }

    /// True when anyone may extend the entity.
    pub fn permissionless_extension(&self) -> bool {
        self.flags & 2 != 0
    }
}
