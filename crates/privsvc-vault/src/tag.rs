//! Record tags (docs/PROTOCOL.md §1.4): `nonce(12) || AES-256-GCM-SIV(tag_key, nonce, ref)`,
//! 44 bytes, and their ledger text form (standard base64 with padding, 60 characters).

use aes_gcm_siv::aead::{Aead, KeyInit};
use aes_gcm_siv::{Aes256GcmSiv, Nonce};
use base64::Engine;

use crate::gcm_siv;
use crate::record_ref::RecordRef;

/// Size of a tag in bytes.
pub const TAG_BYTES: usize = 44;
/// Size of a tag's nonce.
pub const TAG_NONCE_BYTES: usize = 12;
/// Length of a tag's base64 text on the ledger.
pub const TAG_TEXT_LEN: usize = 60;

/// A tag: nonce(12) || ciphertext(16) || authentication tag(16).
pub type Tag = [u8; TAG_BYTES];

/// Seals `record` under `tag_key` with `nonce`.
pub(crate) fn seal_tag(tag_key: &[u8; 32], record: &RecordRef, nonce: &[u8; 12]) -> Tag {
    let cipher = Aes256GcmSiv::new(tag_key.into());
    let sealed = cipher
        .encrypt(Nonce::from_slice(nonce), record.as_bytes().as_slice())
        .expect("AES-GCM-SIV encryption of 16 bytes cannot fail");
    let mut tag = [0u8; TAG_BYTES];
    tag[..TAG_NONCE_BYTES].copy_from_slice(nonce);
    tag[TAG_NONCE_BYTES..].copy_from_slice(&sealed);
    tag
}

/// Opens every tag under `tag_key`: one AES-256-GCM-SIV decryption per tag, batched where tags
/// share work (`crate::gcm_siv`). There is no early exit: each tag goes through a full
/// decryption whose authentication-tag comparison is constant time (`subtle`). Which tags open is
/// the result the caller gets anyway.
pub(crate) fn open_tags(tag_key: &[u8; 32], tags: &[Tag]) -> Vec<Option<RecordRef>> {
    gcm_siv::open_all(tag_key, tags)
        .into_iter()
        .map(|plain| plain.map(RecordRef))
        .collect()
}

/// The ledger form of a tag: standard base64 with padding (60 characters).
pub fn tag_to_text(tag: &Tag) -> String {
    base64::engine::general_purpose::STANDARD.encode(tag)
}

/// Parses the ledger form of a tag; `None` unless it is exactly 60 base64 characters for 44 bytes.
pub fn tag_from_text(text: &str) -> Option<Tag> {
    if text.len() != TAG_TEXT_LEN {
        return None;
    }
    // 60 characters decode to at most 45 bytes; no allocation per tag (users parse thousands).
    let mut bytes = [0u8; TAG_BYTES + 1];
    let len = base64::engine::general_purpose::STANDARD
        .decode_slice(text, &mut bytes)
        .ok()?;
    Tag::try_from(&bytes[..len]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips() {
        let tag = [0x5a; TAG_BYTES];
        let text = tag_to_text(&tag);
        assert_eq!(text.len(), TAG_TEXT_LEN);
        assert_eq!(tag_from_text(&text), Some(tag));
        assert_eq!(tag_from_text(&text[..59]), None);
        assert_eq!(tag_from_text(&"!".repeat(60)), None);
        // 60 characters without padding are 45 bytes, not a tag.
        assert_eq!(tag_from_text(&"A".repeat(60)), None);
        // Non-zero bits after the last byte are not canonical base64.
        let mut loose = text.clone().into_bytes();
        loose[58] = if loose[58] == b'B' { b'C' } else { b'B' };
        let loose = String::from_utf8(loose).unwrap();
        assert_eq!(tag_from_text(&loose), None);
    }

    #[test]
    fn tampered_tag_does_not_open() {
        let key = [9u8; 32];
        let r = RecordRef([3u8; 16]);
        let mut tag = seal_tag(&key, &r, &[1u8; 12]);
        assert_eq!(open_tags(&key, &[tag]), vec![Some(r)]);
        tag[20] ^= 1;
        assert_eq!(open_tags(&key, &[tag]), vec![None]);
    }
}
