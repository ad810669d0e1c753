//! Payload encryption (docs/PROTOCOL.md §1.5): AES-256-GCM-SIV under the record's key, no AAD,
//! stored as nonce(12) || ciphertext.

use aes_gcm_siv::aead::{Aead, KeyInit};
use aes_gcm_siv::{Aes256GcmSiv, Nonce};

use crate::error::VaultError;

/// Size of the nonce that prefixes an encrypted payload.
pub const PAYLOAD_NONCE_BYTES: usize = 12;
/// Size of the authentication tag at the end of an encrypted payload.
pub const PAYLOAD_AUTH_BYTES: usize = 16;

/// Encrypts `plaintext` with `key` and `nonce`; returns nonce || ciphertext.
pub(crate) fn seal(key: &[u8; 32], nonce: &[u8; 12], plaintext: &[u8]) -> Vec<u8> {
    let cipher = Aes256GcmSiv::new(key.into());
    let ct = cipher
        .encrypt(Nonce::from_slice(nonce), plaintext)
        .expect("AES-GCM-SIV encryption fails only beyond 2^36 bytes, far over any payload limit");
    let mut out = Vec::with_capacity(PAYLOAD_NONCE_BYTES + ct.len());
    out.extend_from_slice(nonce);
    out.extend_from_slice(&ct);
    out
}

/// Decrypts nonce || ciphertext with `key`.
pub(crate) fn open(key: &[u8; 32], data: &[u8]) -> Result<Vec<u8>, VaultError> {
    if data.len() < PAYLOAD_NONCE_BYTES + PAYLOAD_AUTH_BYTES {
        return Err(VaultError::CiphertextTooShort(data.len()));
    }
    let (nonce, ct) = data.split_at(PAYLOAD_NONCE_BYTES);
    Aes256GcmSiv::new(key.into())
        .decrypt(Nonce::from_slice(nonce), ct)
        .map_err(|_| VaultError::DecryptionFailed)
}
