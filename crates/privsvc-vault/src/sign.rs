//! Raw secp256k1 signing of 32-byte digests (RFC 6979, low-s, recoverable).

use alloy_primitives::{Signature, B256};
use k256::ecdsa::SigningKey;

use crate::error::VaultError;

/// Signs a 32-byte digest with `key`; the result is low-s with a recovery parity (v 27/28 on the wire).
pub(crate) fn sign_digest(key: &SigningKey, digest: &B256) -> Result<Signature, VaultError> {
    let (sig, recid) = key
        .sign_prehash_recoverable(digest.as_slice())
        .map_err(|e| VaultError::Wallet(format!("secp256k1 signing failed: {e}")))?;
    Ok(Signature::from((sig, recid)))
}
