//! Decoding and validation of `execute((uint8,bytes)[])` calldata, as the native node does it.

use alloy_primitives::{Address, B256};
use alloy_sol_types::{SolCall, SolValue};

use crate::abi;
use crate::entity::StoredAttr;
use crate::revert::Revert;
use crate::value::{is_valid_value, type_id};

/// Maximum cells (attributes, including system cells) per operation.
pub const MAX_CELLS: usize = 32;
/// Maximum payload size in bytes.
pub const MAX_PAYLOAD_BYTES: usize = 131_072;

/// One decoded, validated operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeOp {
    /// Create (owner = creator = sender).
    Create {
        /// Key salt.
        salt: u128,
        /// Absolute expiry (0 = only the floor).
        expires_at: u64,
        /// Relative floor.
        min_lifetime: u64,
        /// Creation flags (validated).
        flags: u8,
        /// `$contentType` (empty if absent).
        content_type: String,
        /// `$payload` (empty if absent).
        payload: Vec<u8>,
        /// User attributes, sorted by name.
        attrs: Vec<StoredAttr>,
    },
    /// Patch.
    Patch {
        /// Target.
        key: B256,
        /// New content type.
        content_type: Option<String>,
        /// New payload.
        payload: Option<Vec<u8>>,
        /// Attributes to set.
        set: Vec<StoredAttr>,
        /// Attributes to unset.
        unset: Vec<String>,
    },
    /// Extend expiry.
    Extend {
        /// Target.
        key: B256,
        /// Absolute expiry.
        expires_at: u64,
        /// Relative floor.
        min_lifetime: u64,
    },
    /// Transfer ownership.
    Transfer {
        /// Target.
        key: B256,
        /// New owner.
        new_owner: Address,
    },
    /// Delete.
    Delete {
        /// Target.
        key: B256,
    },
}

/// Which view or mutation a calldata addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `execute(...)`.
    Execute(Vec<NodeOp>),
    /// `entityNonce(address)`.
    EntityNonce(Address),
}

/// Decode calldata sent to the Arkiv address.
pub fn decode_call(data: &[u8]) -> Result<Call, Revert> {
    if data.len() < 4 {
        return Err(Revert::Message("calldata too short".into()));
    }
    let sel: [u8; 4] = data[..4].try_into().expect("4 bytes");
    if sel == abi::entityNonceCall::SELECTOR {
        let c = abi::entityNonceCall::abi_decode(data)
            .map_err(|e| Revert::Message(format!("cannot decode entityNonce call: {e}")))?;
        return Ok(Call::EntityNonce(c.owner));
    }
    if sel != abi::executeCall::SELECTOR {
        return Err(Revert::Message(format!(
            "unknown selector 0x{}",
            hex::encode(sel)
        )));
    }
    let call = abi::executeCall::abi_decode(data)
        .map_err(|e| Revert::Message(format!("cannot decode execute calldata: {e}")))?;
    decode_ops(&call.ops).map(Call::Execute)
}

/// Validate and decode the operations of one batch.
pub fn decode_ops(ops: &[abi::Operation]) -> Result<Vec<NodeOp>, Revert> {
    if ops.is_empty() {
        return Err(Revert::EmptyBatch);
    }
    ops.iter().map(decode_op).collect()
}

fn canonical<T: SolValue + From<<T::SolType as alloy_sol_types::SolType>::RustType>>(
    tag: u8,
    data: &[u8],
) -> Result<T, Revert> {
    let v = T::abi_decode(data)
        .map_err(|e| Revert::Message(format!("cannot decode operation {tag} data: {e}")))?;
    if v.abi_encode() != data {
        return Err(Revert::NonCanonical(tag));
    }
    Ok(v)
}

fn decode_op(op: &abi::Operation) -> Result<NodeOp, Revert> {
    let tag = op.operation;
    let data = &op.operationData[..];
    match tag {
        1 => {
            let c: abi::CreateOp = canonical(tag, data)?;
            if c.creationFlags & !0b11 != 0 {
                return Err(Revert::ReservedFlags(c.creationFlags));
            }
            check_cells(&c.attributes)?;
            let mut content_type = String::new();
            let mut payload = Vec::new();
            let mut attrs = Vec::new();
            for a in &c.attributes {
                let name = ident(&a.name)?;
                if a.typeId == type_id::TOMBSTONE {
                    return Err(Revert::TombstoneInCreate(a.name));
                }
                match system_cell(&name, a)? {
                    Some(SysCell::Payload(p)) => payload = p,
                    Some(SysCell::ContentType(t)) => content_type = t,
                    None => attrs.push(user_attr(name, a)?),
                }
            }
            Ok(NodeOp::Create {
                salt: c.salt,
                expires_at: c.expiresAt,
                min_lifetime: c.minLifetime,
                flags: c.creationFlags,
                content_type,
                payload,
                attrs,
            })
        }
        2 => {
            let p: abi::PatchOp = canonical(tag, data)?;
            if p.mutations.is_empty() {
                return Err(Revert::EmptyMutations(p.entityKey));
            }
            check_cells(&p.mutations)?;
            let (mut content_type, mut payload, mut set, mut unset) =
                (None, None, Vec::new(), Vec::new());
            for a in &p.mutations {
                let name = ident(&a.name)?;
                if a.typeId == type_id::TOMBSTONE {
                    if !a.value.is_empty() {
                        return Err(Revert::TombstoneValueNotEmpty(a.name));
                    }
                    match name.as_str() {
                        "$payload" => payload = Some(Vec::new()),
                        "$contentType" => content_type = Some(String::new()),
                        n if n.starts_with('$') => return Err(Revert::SystemNotWritable(a.name)),
                        _ => unset.push(name),
                    }
                    continue;
                }
                match system_cell(&name, a)? {
                    Some(SysCell::Payload(v)) => payload = Some(v),
                    Some(SysCell::ContentType(t)) => content_type = Some(t),
                    None => set.push(user_attr(name, a)?),
                }
            }
            Ok(NodeOp::Patch {
                key: p.entityKey,
                content_type,
                payload,
                set,
                unset,
            })
        }
        3 => {
            let e: abi::ExtendOp = canonical(tag, data)?;
            Ok(NodeOp::Extend {
                key: e.entityKey,
                expires_at: e.expiresAt,
                min_lifetime: e.minLifetime,
            })
        }
        4 => {
            let t: abi::TransferOp = canonical(tag, data)?;
            if t.newOwner == Address::ZERO {
                return Err(Revert::TransferToZero(t.entityKey));
            }
            Ok(NodeOp::Transfer {
                key: t.entityKey,
                new_owner: t.newOwner,
            })
        }
        5 => {
            let d: abi::DeleteOp = canonical(tag, data)?;
            Ok(NodeOp::Delete { key: d.entityKey })
        }
        other => Err(Revert::InvalidOpType(other)),
    }
}

fn check_cells(cells: &[abi::Attribute]) -> Result<(), Revert> {
    if cells.len() > MAX_CELLS {
        return Err(Revert::TooManyAttributes(cells.len(), MAX_CELLS));
    }
    if cells.windows(2).any(|w| w[0].name >= w[1].name) {
        return Err(Revert::NotSorted);
    }
    Ok(())
}

enum SysCell {
    Payload(Vec<u8>),
    ContentType(String),
}

fn system_cell(name: &str, a: &abi::Attribute) -> Result<Option<SysCell>, Revert> {
    match name {
        "$payload" => {
            if a.typeId != type_id::BYTES {
                return Err(Revert::InvalidValueType(a.name, a.typeId));
            }
            if a.value.len() > MAX_PAYLOAD_BYTES {
                return Err(Revert::Message(format!(
                    "payload of {} bytes exceeds {MAX_PAYLOAD_BYTES}",
                    a.value.len()
                )));
            }
            Ok(Some(SysCell::Payload(a.value.to_vec())))
        }
        "$contentType" => {
            if a.typeId != type_id::STR || !is_valid_value(type_id::STR, &a.value) {
                return Err(Revert::InvalidValueType(a.name, a.typeId));
            }
            Ok(Some(SysCell::ContentType(
                String::from_utf8_lossy(&a.value).into_owned(),
            )))
        }
        n if n.starts_with('$') => Err(Revert::SystemNotWritable(a.name)),
        _ => Ok(None),
    }
}

fn user_attr(name: String, a: &abi::Attribute) -> Result<StoredAttr, Revert> {
    if a.typeId == type_id::BYTES || a.typeId > type_id::KEY || !is_valid_value(a.typeId, &a.value)
    {
        return Err(Revert::InvalidValueType(a.name, a.typeId));
    }
    Ok(StoredAttr {
        name,
        type_id: a.typeId,
        value: a.value.clone(),
    })
}

/// Decode a bytes32 identifier: left-aligned, NUL-padded; user names `[a-z][a-z0-9._-]*`;
/// names starting with `$` are returned as-is for the system-cell check.
pub fn ident(word: &B256) -> Result<String, Revert> {
    let b = word.as_slice();
    let len = b.iter().position(|&c| c == 0).unwrap_or(32);
    if len == 0 {
        return Err(Revert::IdentEmpty);
    }
    if b[len..].iter().any(|&c| c != 0) {
        // An embedded NUL: the name continues after a zero byte.
        return Err(Revert::IdentInvalidByte(len, 0));
    }
    let name = &b[..len];
    if name[0] == b'$' {
        if name[1..].iter().all(|c| c.is_ascii_alphanumeric()) {
            return Ok(String::from_utf8_lossy(name).into_owned());
        }
        return Err(Revert::SystemNotWritable(*word));
    }
    for (i, &c) in name.iter().enumerate() {
        let ok = if i == 0 {
            c.is_ascii_lowercase()
        } else {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'_')
        };
        if !ok {
            return Err(Revert::IdentInvalidByte(i, c));
        }
    }
    Ok(String::from_utf8_lossy(name).into_owned())
}
