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

/// Bytes of one opened tag in a packed answer: its index (u32, little-endian), then its record
/// reference.
// Used by the wasm build's vault adapter (js_traits.rs); natively by the tests only.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
const OPENED_BYTES: usize = 4 + 16;

/// The answer to opening `count` tags from its packed form (`RawKeyVault.openTagBytes`): one
/// entry of [`OPENED_BYTES`] for each tag that opened, in increasing index order.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub fn opened_from_packed(packed: &[u8], count: usize) -> Result<Vec<Option<RecordRef>>, String> {
    if !packed.len().is_multiple_of(OPENED_BYTES) {
        return Err(format!(
            "openTags answered {} bytes, not {OPENED_BYTES} per opened tag",
            packed.len()
        ));
    }
    let mut opened = vec![None; count];
    let mut next = 0;
    for entry in packed.chunks_exact(OPENED_BYTES) {
        let (index, reference) = entry.split_at(4);
        let index = u32::from_le_bytes(index.try_into().expect("4 bytes")) as usize;
        if index < next || index >= count {
            return Err(format!(
                "openTags answered tag {index} out of order or out of {count}"
            ));
        }
        opened[index] = Some(RecordRef(reference.try_into().expect("16 bytes")));
        next = index + 1;
    }
    Ok(opened)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u32, byte: u8) -> Vec<u8> {
        let mut e = index.to_le_bytes().to_vec();
        e.extend([byte; 16]);
        e
    }

    #[test]
    fn a_packed_answer_places_each_opened_tag_at_its_index() {
        let packed = [entry(1, 7), entry(3, 9)].concat();
        let opened = opened_from_packed(&packed, 4).unwrap();
        assert_eq!(
            opened,
            vec![
                None,
                Some(RecordRef([7; 16])),
                None,
                Some(RecordRef([9; 16]))
            ]
        );
        assert_eq!(opened_from_packed(&[], 3).unwrap(), vec![None; 3]);
    }

    #[test]
    fn a_packed_answer_out_of_order_out_of_range_or_cut_is_refused() {
        for (packed, count) in [
            ([entry(2, 1), entry(1, 1)].concat(), 3),
            ([entry(1, 1), entry(1, 1)].concat(), 3),
            (entry(3, 1), 3),
            (entry(0, 1)[..19].to_vec(), 3),
        ] {
            let e = opened_from_packed(&packed, count).unwrap_err();
            assert!(e.contains("openTags answered"), "{e}");
        }
    }
}
