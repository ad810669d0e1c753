//! Digest, signing, padding and signer recovery (docs/PROTOCOL.md §3).

use alloy_primitives::{keccak256, Address, B256};
use k256::ecdsa::{RecoveryId, Signature, SigningKey, VerifyingKey};
use privsvc_attributes::Attributes;

use crate::error::{InvalidSignatureReason, SigningReason};
use crate::{EnvelopeBody, EnvelopeError, SealedEnvelope};

/// Domain separation prefix of the envelope digest.
pub const DIGEST_DOMAIN: &[u8] = b"privsvc envelope v2";

/// The padded sizes, smallest first.
pub const PADDED_SIZES: [usize; 4] = [512, 1024, 4096, 16384];

/// The largest padded size.
pub const MAX_ENVELOPE_BYTES: usize = 16384;

/// The digest preimage: `"privsvc envelope v2" || 0x00 || canonical(body without sig) || 0x00
/// || canonical(attributes)`.
pub fn envelope_digest_preimage(body: &EnvelopeBody, attributes: &Attributes) -> Vec<u8> {
    let body_json = body.canonical_json();
    let attrs_json = attributes.canonical_json();
    let mut pre = Vec::with_capacity(DIGEST_DOMAIN.len() + 2 + body_json.len() + attrs_json.len());
    pre.extend_from_slice(DIGEST_DOMAIN);
    pre.push(0);
    pre.extend_from_slice(body_json.as_bytes());
    pre.push(0);
    pre.extend_from_slice(attrs_json.as_bytes());
    pre
}

/// keccak256 of [`envelope_digest_preimage`]: what the owner key signs.
pub fn envelope_digest(body: &EnvelopeBody, attributes: &Attributes) -> B256 {
    keccak256(envelope_digest_preimage(body, attributes))
}

/// The smallest padded size that holds `len` bytes.
pub fn padded_size(len: usize) -> Result<usize, EnvelopeError> {
    PADDED_SIZES
        .iter()
        .copied()
        .find(|s| len <= *s)
        .ok_or(EnvelopeError::Oversize { len })
}

/// Right-pads `text` with spaces to the smallest of 512, 1024, 4096 and 16384 bytes that fits.
pub fn pad_envelope(text: &str) -> Result<String, EnvelopeError> {
    let size = padded_size(text.len())?;
    let mut out = String::with_capacity(size);
    out.push_str(text);
    out.extend(std::iter::repeat_n(' ', size - text.len()));
    Ok(out)
}

/// The sealed, padded text of `body` with an existing 65-byte signature `r || s || v`.
pub fn seal_with_signature(
    body: &EnvelopeBody,
    signature: &[u8; 65],
) -> Result<String, EnvelopeError> {
    body.validate()?;
    check_signature_bytes(signature)?;
    pad_envelope(&body.canonical_sealed_json(signature))
}

/// Signs `body` with the one-time owner key (low-s, v in {27, 28}) and returns the sealed,
/// padded text. The attributes must have exactly the types listed in `body.types`.
pub fn seal_envelope(
    body: &EnvelopeBody,
    attributes: &Attributes,
    key: &SigningKey,
) -> Result<String, EnvelopeError> {
    body.validate()?;
    check_types(body, attributes)?;
    let signature = sign_digest(&envelope_digest(body, attributes), key)?;
    seal_with_signature(body, &signature)
}

/// Signs a 32-byte digest: 65 bytes `r || s || v`, low-s, v in {27, 28}.
pub fn sign_digest(digest: &B256, key: &SigningKey) -> Result<[u8; 65], EnvelopeError> {
    let (mut sig, mut recid) = key
        .sign_prehash_recoverable(digest.as_slice())
        .map_err(|_| EnvelopeError::Signing(SigningReason::SignerFailed))?;
    if let Some(low) = sig.normalize_s() {
        sig = low;
        recid = RecoveryId::new(!recid.is_y_odd(), recid.is_x_reduced());
    }
    if recid.is_x_reduced() {
        return Err(EnvelopeError::Signing(SigningReason::ReducedX));
    }
    let mut out = [0u8; 65];
    out[..64].copy_from_slice(&sig.to_bytes());
    out[64] = 27 + recid.to_byte();
    Ok(out)
}

/// Recovers the owner address that signed `sealed` over `attributes`. Fails when the
/// attributes' types differ from `body.types`, on high-s, or when nothing recovers.
pub fn envelope_signer(
    sealed: &SealedEnvelope,
    attributes: &Attributes,
) -> Result<Address, EnvelopeError> {
    check_types(&sealed.body, attributes)?;
    recover_digest_signer(
        &envelope_digest(&sealed.body, attributes),
        &sealed.signature,
    )
}

/// Recovers the address behind a 65-byte `r || s || v` signature over a digest (low-s only).
pub fn recover_digest_signer(
    digest: &B256,
    signature: &[u8; 65],
) -> Result<Address, EnvelopeError> {
    let sig = check_signature_bytes(signature)?;
    let recid = RecoveryId::from_byte(signature[64] - 27).ok_or(
        EnvelopeError::InvalidSignature(InvalidSignatureReason::BadRecoveryId),
    )?;
    let key = VerifyingKey::recover_from_prehash(digest.as_slice(), &sig, recid)
        .map_err(|_| EnvelopeError::InvalidSignature(InvalidSignatureReason::NotRecoverable))?;
    Ok(Address::from_public_key(&key))
}

/// Checks the form of `r || s || v`: r and s valid non-zero scalars, s low, v in {27, 28}.
pub(crate) fn check_signature_bytes(signature: &[u8; 65]) -> Result<Signature, EnvelopeError> {
    let v = signature[64];
    if v != 27 && v != 28 {
        return Err(EnvelopeError::BadRecoveryByte(v));
    }
    let sig = Signature::from_slice(&signature[..64])
        .map_err(|_| EnvelopeError::InvalidSignature(InvalidSignatureReason::ScalarOutOfRange))?;
    if sig.normalize_s().is_some() {
        return Err(EnvelopeError::HighS);
    }
    Ok(sig)
}

fn check_types(body: &EnvelopeBody, attributes: &Attributes) -> Result<(), EnvelopeError> {
    let given = attributes.types();
    if given == body.types {
        return Ok(());
    }
    for (name, ty) in &body.types {
        match given.get(name) {
            None => {
                return Err(EnvelopeError::TypesMismatch(format!(
                    "attribute {name:?} ({ty}) is listed in the envelope but missing"
                )))
            }
            Some(t) if t != ty => {
                return Err(EnvelopeError::TypesMismatch(format!(
                    "attribute {name:?} is {t}, the envelope says {ty}"
                )))
            }
            Some(_) => {}
        }
    }
    let extra = given
        .keys()
        .find(|k| !body.types.contains_key(*k))
        .cloned()
        .unwrap_or_default();
    Err(EnvelopeError::TypesMismatch(format!(
        "attribute {extra:?} is not listed in the envelope"
    )))
}
