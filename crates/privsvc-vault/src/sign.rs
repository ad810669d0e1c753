//! Raw secp256k1 signing of 32-byte digests (RFC 6979, low-s, recoverable), and the hex form of
//! signatures on the wire.

use alloy_primitives::{Signature, B256};
use k256::ecdsa::SigningKey;

use crate::error::VaultError;

/// Signs a 32-byte digest with `key`; the result is low-s with a recovery parity (v 27/28 on the wire).
pub(crate) fn sign_digest(key: &SigningKey, digest: &B256) -> Result<Signature, VaultError> {
    let (sig, recid) = key
        .sign_prehash_recoverable(digest.as_slice())
        .map_err(|e| VaultError::Wallet(Box::new(e)))?;
    Ok(Signature::from((sig, recid)))
}

/// Encodes a signature as `0x` + 130 lowercase hex characters, `r || s || v` with v in {27, 28}.
pub fn signature_hex(sig: &Signature) -> String {
    let mut bytes = [0u8; 65];
    bytes[..32].copy_from_slice(&sig.r().to_be_bytes::<32>());
    bytes[32..64].copy_from_slice(&sig.s().to_be_bytes::<32>());
    bytes[64] = 27 + u8::from(sig.v());
    format!("0x{}", hex::encode(bytes))
}

/// Decodes `0x` + 130 lowercase hex into a signature, as envelopes are: r and s valid, s low
/// (at most n/2), v 27 or 28. Anything else (v 0/1, high s, upper case) is `None`.
pub fn signature_from_hex(text: &str) -> Option<Signature> {
    let bytes = privsvc_envelope::parse_signature(text).ok()?;
    Some(Signature::from_bytes_and_parity(
        &bytes[..64],
        bytes[64] == 28,
    ))
}
