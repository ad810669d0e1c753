//! Entry point shared by the `vault_open_tags` fuzz target and its stable seed replay: the
//! batched tag opener (`gcm_siv`) against the `aes-gcm-siv` crate on the same input.

use aes_gcm_siv::aead::{Aead, KeyInit};
use aes_gcm_siv::{Aes256GcmSiv, Nonce};

use crate::gcm_siv::{open_all, open_all_by, Keys, Message};

/// Reads `data` as a key (32 bytes) and a mode byte, then either (mode even) raw 44-byte
/// messages, or (mode odd) groups of a nonce (12), a plaintext (16) and a 44-byte XOR mask: each
/// plaintext is sealed by `aes-gcm-siv` and the mask applied, so that authentic and nearly
/// authentic tags are explored, not only random ones. Every message is opened by the batched
/// opener (its per-message keys used one by one and four at once) and by `aes-gcm-siv`; they
/// must agree. Returns whether any message opened. Panics only when they disagree.
pub fn open_tags_target(data: &[u8]) -> bool {
    let Some((key, rest)) = data.split_first_chunk::<32>() else {
        return false;
    };
    let Some((mode, rest)) = rest.split_first() else {
        return false;
    };
    let cipher = Aes256GcmSiv::new(key.into());
    let messages: Vec<Message> = if mode % 2 == 0 {
        rest.chunks_exact(44)
            .map(|c| Message::try_from(c).expect("44 bytes"))
            .collect()
    } else {
        rest.chunks_exact(12 + 16 + 44)
            .map(|c| {
                let (nonce, c) = c.split_at(12);
                let (plaintext, mask) = c.split_at(16);
                let sealed = cipher
                    .encrypt(Nonce::from_slice(nonce), plaintext)
                    .expect("16 bytes seal");
                let mut m = [0u8; 44];
                m[..12].copy_from_slice(nonce);
                m[12..].copy_from_slice(&sealed);
                for (b, x) in m.iter_mut().zip(mask) {
                    *b ^= x;
                }
                m
            })
            .collect()
    };
    let batched = open_all(key, &messages);
    // Both ways of using the per-message keys, whichever this build uses.
    for keys in [Keys::OneByOne, Keys::FourAtOnce] {
        assert_eq!(
            open_all_by(key, &messages, keys),
            batched,
            "the opener's {keys:?} way disagrees"
        );
    }
    let mut any = false;
    for (m, got) in messages.iter().zip(&batched) {
        let (nonce, sealed) = m.split_at(12);
        let expected = cipher
            .decrypt(Nonce::from_slice(nonce), sealed)
            .ok()
            .map(|p| <[u8; 16]>::try_from(p.as_slice()).expect("16 bytes"));
        assert_eq!(
            *got, expected,
            "the batched opener and aes-gcm-siv disagree"
        );
        any |= got.is_some();
    }
    any
}
