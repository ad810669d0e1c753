//! The key schedule of docs/PROTOCOL.md §1: HKDF-SHA256 with no salt and `info = label || extra`.
//!
//! These pure functions are public so that third parties (and the conformance vectors) can
//! recompute every value; a [`crate::KeyVault`] is the usual way to use them.

use alloy_primitives::Signature;
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

/// HKDF info label of the root derived from a wallet signature.
pub const LABEL_ROOT: &str = "privsvc root v1";
/// HKDF info label of the root derived from random recovery entropy.
pub const LABEL_RANDOM_ROOT: &str = "privsvc random root v1";
/// HMAC message prefix of scope references.
pub const LABEL_SCOPE: &str = "privsvc scope v1";
/// HKDF info label of one-time owner keys.
pub const LABEL_OWNER: &str = "privsvc owner v1";
/// HKDF info label of the tag key.
pub const LABEL_TAG: &str = "privsvc tag v1";
/// HKDF info label of per-record payload encryption keys.
pub const LABEL_ENC: &str = "privsvc enc v1";
/// HKDF info label of the cover key, and HMAC message prefix of cover scores.
pub const LABEL_COVER: &str = "privsvc cover v1";

/// HKDF info label of the key of the client's persisted scan cache.
pub const LABEL_SCAN_CACHE: &str = "privsvc scan cache v1";

/// A batch as cover scores name it: u64 big-endian block || 20-byte creator address.
pub type BatchBytes = [u8; 28];

/// A 32-byte secret that is wiped from memory when dropped.
pub type Secret32 = Zeroizing<[u8; 32]>;

/// `kdf(ikm, label, extra)` = HKDF-SHA256(ikm, salt = none, info = label || extra), 32 bytes.
pub fn kdf(ikm: &[u8], label: &str, extra: &[u8]) -> Secret32 {
    let hk = Hkdf::<Sha256>::new(None, ikm);
    let mut out = Zeroizing::new([0u8; 32]);
    // HKDF-SHA256 can produce up to 8160 bytes; 32 always succeeds.
    hk.expand_multi_info(&[label.as_bytes(), extra], out.as_mut())
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    out
}

/// The cover key: `kdf(root, "privsvc cover v1", empty)`. It only ranks cover batches.
pub fn cover_key(root: &[u8; 32]) -> Secret32 {
    kdf(root, LABEL_COVER, &[])
}

/// The scan-cache key: `kdf(root, "privsvc scan cache v1", empty)`. It seals the client's
/// persisted listing and nothing else.
pub fn scan_cache_key(root: &[u8; 32]) -> Secret32 {
    kdf(root, LABEL_SCAN_CACHE, &[])
}

/// Cover score of `candidate` for the user's batch `anchor`:
/// `HMAC-SHA256(key = cover_key, "privsvc cover v1" || anchor || candidate)`.
pub fn cover_score(cover_key: &[u8; 32], anchor: &BatchBytes, candidate: &BatchBytes) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(cover_key)
        .expect("HMAC-SHA256 accepts keys of any length");
    mac.update(LABEL_COVER.as_bytes());
    mac.update(anchor);
    mac.update(candidate);
    mac.finalize().into_bytes().into()
}

/// Root from a derivation signature: `kdf(r || s || v (65 bytes, v = 27/28), "privsvc root v1", app)`.
pub fn root_from_signature(signature: &Signature, app: &str) -> Secret32 {
    let bytes = Zeroizing::new(signature.as_bytes());
    kdf(bytes.as_ref(), LABEL_ROOT, app.as_bytes())
}

/// Root of random-root mode: `kdf(entropy, "privsvc random root v1", app)`.
pub fn root_from_entropy(entropy: &[u8; 32], app: &str) -> Secret32 {
    kdf(entropy, LABEL_RANDOM_ROOT, app.as_bytes())
}

/// Scope reference bytes: `HMAC-SHA256(key = root, "privsvc scope v1" || name)[0..16]`.
pub fn scope_ref_bytes(root: &[u8; 32], name: &str) -> [u8; 16] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(root)
        .expect("HMAC-SHA256 accepts keys of any length");
    mac.update(LABEL_SCOPE.as_bytes());
    mac.update(name.as_bytes());
    let full = mac.finalize().into_bytes();
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}

/// Candidate owner-key bytes: `kdf(root, "privsvc owner v1", ref || counter)`.
pub fn owner_key_candidate(root: &[u8; 32], record: &[u8; 16], counter: u8) -> Secret32 {
    let mut extra = [0u8; 17];
    extra[..16].copy_from_slice(record);
    extra[16] = counter;
    kdf(root, LABEL_OWNER, &extra)
}

/// The tag key: `kdf(root, "privsvc tag v1", empty)`.
pub fn tag_key(root: &[u8; 32]) -> Secret32 {
    kdf(root, LABEL_TAG, &[])
}

/// The payload key of a record: `kdf(root, "privsvc enc v1", ref)`.
pub fn enc_key(root: &[u8; 32], record: &[u8; 16]) -> Secret32 {
    kdf(root, LABEL_ENC, record)
}
