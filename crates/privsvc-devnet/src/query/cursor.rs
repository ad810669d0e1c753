//! Opaque pagination cursors bound to (query text, block, projection).
//!
//! Format: `"b64:" + base64url_nopad(binding[8] ‖ entity_id u64 BE)` where
//! `binding = keccak256("arkiv.cursor" ‖ u64be(len(query)) ‖ query ‖ u64be(block) ‖ fingerprint)[..8]`.

use alloy_primitives::keccak256;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// Why a cursor was refused (both map to -32005).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CursorError {
    /// Not a cursor this node issued.
    #[error("malformed cursor")]
    Malformed,
    /// Issued for another query, block or selection.
    #[error("cursor is bound to a different query, block or selection")]
    Mismatched,
}

/// The 8-byte binding of a cursor.
pub fn binding(query: &str, block: u64, fingerprint: &[u8]) -> [u8; 8] {
    let mut pre = Vec::with_capacity(12 + 8 + query.len() + 8 + fingerprint.len());
    pre.extend_from_slice(b"arkiv.cursor");
    pre.extend_from_slice(&(query.len() as u64).to_be_bytes());
    pre.extend_from_slice(query.as_bytes());
    pre.extend_from_slice(&block.to_be_bytes());
    pre.extend_from_slice(fingerprint);
    let h = keccak256(&pre);
    let mut out = [0u8; 8];
    out.copy_from_slice(&h[..8]);
    out
}

/// Encode a cursor pointing after `entity_id`.
pub fn encode(query: &str, block: u64, fingerprint: &[u8], entity_id: u64) -> String {
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&binding(query, block, fingerprint));
    raw[8..].copy_from_slice(&entity_id.to_be_bytes());
    format!("b64:{}", URL_SAFE_NO_PAD.encode(raw))
}

/// Decode a cursor and check its binding; returns the entity id.
pub fn decode(
    cursor: &str,
    query: &str,
    block: u64,
    fingerprint: &[u8],
) -> Result<u64, CursorError> {
    let body = cursor.strip_prefix("b64:").ok_or(CursorError::Malformed)?;
    let raw = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| CursorError::Malformed)?;
    if raw.len() != 16 {
        return Err(CursorError::Malformed);
    }
    if raw[..8] != binding(query, block, fingerprint) {
        return Err(CursorError::Mismatched);
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&raw[8..]);
    Ok(u64::from_be_bytes(id))
}
