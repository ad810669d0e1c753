//! Execution of decoded operations against a state view, with the documented permissions,
//! expiry resolution, key derivation, gas schedule and events.

use std::collections::HashMap;

use alloy_primitives::{keccak256, Address, Bytes, B256, U256};
use alloy_sol_types::SolEvent;

use crate::abi::{self, ARKIV_ADDRESS};
use crate::decode::NodeOp;
use crate::entity::EntityData;
use crate::revert::Revert;
use crate::types::LogEntry;

/// Base transaction gas.
pub const TX_BASE_GAS: u64 = 21_000;
/// Create: base gas.
pub const CREATE_GAS: u64 = 80_000;
/// Patch: base gas.
pub const PATCH_GAS: u64 = 40_000;
/// Per attribute (create) or mutation (patch).
pub const PER_ATTRIBUTE_GAS: u64 = 5_000;
/// Per byte of content type and payload (create) or value (patch).
pub const PER_BYTE_GAS: u64 = 16;
/// Extend.
pub const EXTEND_GAS: u64 = 10_000;
/// Transfer.
pub const TRANSFER_GAS: u64 = 20_000;
/// Delete.
pub const DELETE_GAS: u64 = 10_000;

/// Intrinsic gas: 21 000 + 4 per zero and 16 per non-zero calldata byte.
pub fn intrinsic_gas(input: &[u8]) -> u64 {
    TX_BASE_GAS
        + input
            .iter()
            .map(|&b| if b == 0 { 4 } else { 16 })
            .sum::<u64>()
}

/// Execution gas of the operations (the native schedule).
pub fn ops_gas(ops: &[NodeOp]) -> u64 {
    ops.iter()
        .map(|op| match op {
            NodeOp::Create {
                content_type,
                payload,
                attrs,
                ..
            } => {
                CREATE_GAS
                    + PER_BYTE_GAS * (content_type.len() + payload.len()) as u64
                    + PER_ATTRIBUTE_GAS * attrs.len() as u64
            }
            NodeOp::Patch {
                content_type,
                payload,
                set,
                unset,
                ..
            } => {
                let n = set.len()
                    + unset.len()
                    + content_type.is_some() as usize
                    + payload.is_some() as usize;
                let bytes = set.iter().map(|a| a.value.len()).sum::<usize>()
                    + content_type.as_ref().map_or(0, |c| c.len())
                    + payload.as_ref().map_or(0, |p| p.len());
                PATCH_GAS + PER_ATTRIBUTE_GAS * n as u64 + PER_BYTE_GAS * bytes as u64
            }
            NodeOp::Extend { .. } => EXTEND_GAS,
            NodeOp::Transfer { .. } => TRANSFER_GAS,
            NodeOp::Delete { .. } => DELETE_GAS,
        })
        .sum()
}

/// The entity key: keccak256(u256 chainId ‖ 0x44…44 ‖ owner ‖ u64 nonce ‖ u128 salt).
pub fn derive_key(chain_id: u64, owner: Address, nonce: u64, salt: u128) -> B256 {
    let mut pre = [0u8; 96];
    pre[..32].copy_from_slice(&U256::from(chain_id).to_be_bytes::<32>());
    pre[32..52].copy_from_slice(ARKIV_ADDRESS.as_slice());
    pre[52..72].copy_from_slice(owner.as_slice());
    pre[72..80].copy_from_slice(&nonce.to_be_bytes());
    pre[80..96].copy_from_slice(&salt.to_be_bytes());
    keccak256(pre)
}

/// Resolve `max(expires_at, block + min_lifetime)`, which must exceed `block`.
pub fn resolve_expiry(block: u64, expires_at: u64, min_lifetime: u64) -> Result<u64, Revert> {
    let floor = block
        .checked_add(min_lifetime)
        .ok_or_else(|| Revert::Message(format!("expiry overflow ({block} + {min_lifetime})")))?;
    let target = expires_at.max(floor);
    if target <= block {
        return Err(Revert::DeadOnArrival(target, block));
    }
    Ok(target)
}

/// What the executor reads: the state before the batch.
pub trait StateView {
    /// Current state of an entity (expired or not), `None` if absent or deleted.
    fn entity(&self, key: &B256) -> Option<EntityData>;
    /// The entity nonce of an account.
    fn entity_nonce(&self, who: &Address) -> u64;
}

/// The effects of a successful batch.
#[derive(Debug, Default, Clone)]
pub struct Effects {
    /// New entity states (None = deleted).
    pub entities: HashMap<B256, Option<EntityData>>,
    /// The sender's entity nonce after the batch.
    pub entity_nonce: u64,
    /// Logs in operation order.
    pub logs: Vec<LogEntry>,
    /// Keys of created entities (the `execute` return value).
    pub created: Vec<B256>,
}

fn log(ev: impl SolEvent) -> LogEntry {
    let d = ev.encode_log_data();
    LogEntry {
        address: ARKIV_ADDRESS,
        topics: d.topics().to_vec(),
        data: d.data,
    }
}

/// Apply `ops` from `sender` in block `block`, all-or-nothing.
pub fn execute(
    view: &dyn StateView,
    chain_id: u64,
    sender: Address,
    block: u64,
    ops: &[NodeOp],
) -> Result<Effects, Revert> {
    let mut fx = Effects {
        entity_nonce: view.entity_nonce(&sender),
        ..Default::default()
    };
    let get = |fx: &Effects, key: &B256| -> Option<EntityData> {
        match fx.entities.get(key) {
            Some(e) => e.clone(),
            None => view.entity(key),
        }
    };
    // Fetch a live entity or revert NotFound/Expired.
    let live = |fx: &Effects, key: &B256| -> Result<EntityData, Revert> {
        let e = get(fx, key).ok_or(Revert::NotFound(*key))?;
        if e.expires_at <= block {
            return Err(Revert::Expired(*key, e.expires_at));
        }
        Ok(e)
    };
    for op in ops {
        match op {
            NodeOp::Create {
                salt,
                expires_at,
                min_lifetime,
                flags,
                content_type,
                payload,
                attrs,
            } => {
                let key = derive_key(chain_id, sender, fx.entity_nonce, *salt);
                fx.entity_nonce += 1;
                let target = resolve_expiry(block, *expires_at, *min_lifetime)?;
                if get(&fx, &key).is_some() {
                    return Err(Revert::Message(format!("entity {key} already exists")));
                }
                let e = EntityData {
                    key,
                    owner: sender,
                    creator: sender,
                    created_at: block,
                    updated_at: block,
                    expires_at: target,
                    flags: *flags,
                    content_type: content_type.clone(),
                    payload: Bytes::from(payload.clone()),
                    attrs: attrs.clone(),
                };
                fx.entities.insert(key, Some(e));
                fx.created.push(key);
                fx.logs.push(log(abi::EntityCreated {
                    entityKey: key,
                    owner: sender,
                    expiresAt: target,
                    creationFlags: *flags,
                }));
            }
            NodeOp::Patch {
                key,
                content_type,
                payload,
                set,
                unset,
            } => {
                let mut e = live(&fx, key)?;
                if e.owner != sender {
                    return Err(Revert::NotOwner(*key, sender, e.owner));
                }
                if e.readonly() {
                    return Err(Revert::ReadOnly(*key));
                }
                if let Some(c) = content_type {
                    e.content_type = c.clone();
                }
                if let Some(p) = payload {
                    e.payload = Bytes::from(p.clone());
                }
                for a in set {
                    e.set_attr(a.clone());
                }
                for n in unset {
                    e.unset_attr(n);
                }
                if e.attrs.len() + 2 > crate::decode::MAX_CELLS {
                    return Err(Revert::TooManyAttributes(
                        e.attrs.len() + 2,
                        crate::decode::MAX_CELLS,
                    ));
                }
                e.updated_at = block;
                let owner = e.owner;
                fx.entities.insert(*key, Some(e));
                fx.logs.push(log(abi::EntityPatched {
                    entityKey: *key,
                    owner,
                }));
            }
            NodeOp::Extend {
                key,
                expires_at,
                min_lifetime,
            } => {
                let mut e = live(&fx, key)?;
                if e.owner != sender && !e.permissionless_extension() {
                    return Err(Revert::NotOwner(*key, sender, e.owner));
                }
                let target = resolve_expiry(block, *expires_at, *min_lifetime)?;
                if target < e.expires_at {
                    return Err(Revert::NotExtended(*key, target, e.expires_at));
                }
                e.expires_at = target;
                e.updated_at = block;
                let owner = e.owner;
                fx.entities.insert(*key, Some(e));
                fx.logs.push(log(abi::ExpiryExtended {
                    entityKey: *key,
                    owner,
                    expiresAt: target,
                }));
            }
            NodeOp::Transfer { key, new_owner } => {
                let mut e = live(&fx, key)?;
                if e.owner != sender {
                    return Err(Revert::NotOwner(*key, sender, e.owner));
                }
                if *new_owner == Address::ZERO {
                    return Err(Revert::TransferToZero(*key));
                }
                if *new_owner == e.owner {
                    return Err(Revert::TransferToSelf(*key));
                }
                let prev = e.owner;
                e.owner = *new_owner;
                e.updated_at = block;
                fx.entities.insert(*key, Some(e));
                fx.logs.push(log(abi::OwnershipTransferred {
                    entityKey: *key,
                    previousOwner: prev,
                    newOwner: *new_owner,
                }));
            }
            NodeOp::Delete { key } => {
                let e = live(&fx, key)?;
                if e.owner != sender {
                    return Err(Revert::NotOwner(*key, sender, e.owner));
                }
                fx.entities.insert(*key, None);
                fx.logs.push(log(abi::EntityDeleted {
                    entityKey: *key,
                    owner: e.owner,
                }));
            }
        }
    }
    Ok(fx)
}
