//! Conversions between JavaScript's plain values and the crates' types.

use alloy_primitives::{Address, Signature, B256};
use privsvc_attributes::Attributes;
use privsvc_vault::RecordRef;

use crate::error::WasmError;

/// The largest integer a JavaScript number holds exactly (2^53 - 1).
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// A non-negative integer given as a JavaScript number.
pub fn to_u64(what: &'static str, x: f64) -> Result<u64, WasmError> {
    if !(x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x <= MAX_SAFE_INTEGER) {
        return Err(WasmError::argument(
            what,
            format!("{x} is not a non-negative safe integer"),
        ));
    }
    Ok(x as u64)
}

/// A record reference in its hex form (32 characters, `0x` optional).
pub fn to_ref(text: &str) -> Result<RecordRef, WasmError> {
    let bytes = decode_hex("record reference", text)?;
    let array: [u8; 16] = bytes.try_into().map_err(|_| {
        WasmError::argument("record reference", "expected 16 bytes (32 hex characters)")
    })?;
    Ok(RecordRef(array))
}

/// Hex text to bytes, with or without `0x`.
pub fn decode_hex(what: &'static str, text: &str) -> Result<Vec<u8>, WasmError> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    hex::decode(digits).map_err(|e| WasmError::argument(what, e.to_string()))
}

/// A 32-byte entity key in hex.
pub fn to_b256(what: &'static str, text: &str) -> Result<B256, WasmError> {
    let bytes = decode_hex(what, text)?;
    if bytes.len() != 32 {
        return Err(WasmError::argument(
            what,
            "expected 32 bytes (64 hex characters)",
        ));
    }
    Ok(B256::from_slice(&bytes))
}

/// A 65-byte `r || s || v` signature in hex; `v` may be 0, 1, 27 or 28.
pub fn to_signature(what: &'static str, text: &str) -> Result<Signature, WasmError> {
    let bytes = decode_hex(what, text)?;
    Signature::try_from(bytes.as_slice())
        .map_err(|e| WasmError::argument(what, format!("not a 65-byte signature: {e}")))
}

/// `0x` + 130 lowercase hex characters, `v` written as 27 or 28.
pub use privsvc_vault::signature_hex;

/// An address in its EIP-55 form.
pub fn address_text(address: &Address) -> String {
    address.to_checksum(None)
}

/// Attributes in their wire form (`{ name: { type, value } }`) as JSON text.
pub fn to_attributes(json: &str) -> Result<Attributes, WasmError> {
    Ok(Attributes::from_wire_json(json.as_bytes())?)
}

/// Parsing of a proof body given as JSON.
pub struct ProofBodyInput;

impl ProofBodyInput {
    /// The body of `json` (`{ entityKey, challenge, verifier, notBefore, notAfter }`).
    pub fn parse(json: &str) -> Result<privsvc_vault::OwnershipProofBody, WasmError> {
        serde_json::from_str(json).map_err(|e| WasmError::argument("proof body", e.to_string()))
    }
}
