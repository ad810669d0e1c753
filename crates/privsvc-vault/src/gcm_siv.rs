//! AES-256-GCM-SIV decryption (RFC 8452) for the one shape of a tag: a 16-byte plaintext, no
//! associated data, many messages under one key-generating key.
//!
//! It opens exactly what `aes_gcm_siv::Aes256GcmSiv::decrypt` opens (the tests below prove it),
//! composed from the `aes` block cipher and the `polyval` universal hash, so that the part every
//! tag shares is batched: the six key-derivation blocks of every tag are encrypted under the
//! key-generating key in one `encrypt_blocks` call, which the `aes` crate runs in parallel lanes
//! (4 blocks per pass of its bitsliced software AES in wasm, pipelined AES-NI natively) instead of
//! one block at a time. Per tag there remain the message-encryption key schedule, two blocks
//! under it and two POLYVAL multiplications. The received authentication tag is compared in
//! constant time (`subtle`); derived keys, key schedules and the derivation blocks are wiped.

use aes09::cipher::{Array, BlockCipherEncrypt, KeyInit};
use aes09::Aes256;
use polyval::universal_hash::UniversalHash;
use polyval::Polyval;
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, Zeroizing};

use crate::aes256x4;

/// Size of a nonce.
pub(crate) const NONCE_BYTES: usize = 12;
/// Size of a sealed message: ciphertext(16) || authentication tag(16).
pub(crate) const SEALED_BYTES: usize = 32;

/// Blocks of key material derived per message (RFC 8452 section 4, AES-256).
const DERIVED_BLOCKS: usize = 6;
/// Messages whose derivation blocks are encrypted in one call: large enough to fill the cipher's
/// lanes, small enough that the buffer stays in the first-level cache.
const CHUNK: usize = 64;
/// POLYVAL's length block for no associated data and 16 bytes of plaintext:
/// `LE64(0) || LE64(128)` (bit lengths).
const LENGTH_BLOCK: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 128, 0, 0, 0, 0, 0, 0, 0];

/// One message: `nonce(12) || ciphertext(16) || authentication tag(16)`.
pub(crate) type Message = [u8; NONCE_BYTES + SEALED_BYTES];

/// Decrypts every message under `key` (the key-generating key): the 16-byte plaintext of each
/// message that authenticates, `None` for every other. No early exit: every message goes
/// through the whole decryption.
pub(crate) fn open_all(key: &[u8; 32], messages: &[Message]) -> Vec<Option<[u8; 16]>> {
    open_all_by(key, messages, PER_MESSAGE_KEYS)
}

/// How the keys of the messages are used: four at once by the bitsliced cipher where AES is in
/// software (wasm), one at a time where the processor has AES instructions (natively), which
/// are faster one block at a time than four software lanes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Keys {
    // Each build takes one way; the other is for the tests and the fuzz target.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    OneByOne,
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    FourAtOnce,
}

#[cfg(target_arch = "wasm32")]
const PER_MESSAGE_KEYS: Keys = Keys::FourAtOnce;
#[cfg(not(target_arch = "wasm32"))]
const PER_MESSAGE_KEYS: Keys = Keys::OneByOne;

/// [`open_all`] with the per-message keys used as `keys` says.
pub(crate) fn open_all_by(
    key: &[u8; 32],
    messages: &[Message],
    keys: Keys,
) -> Vec<Option<[u8; 16]>> {
    let key_generating = Aes256::new(<&Array<u8, _>>::from(key));
    let mut derived = Zeroizing::new(vec![[0u8; 16]; CHUNK * DERIVED_BLOCKS]);
    let mut opened = Vec::with_capacity(messages.len());
    for chunk in messages.chunks(CHUNK) {
        let blocks = &mut derived[..chunk.len() * DERIVED_BLOCKS];
        for (message, six) in chunk.iter().zip(blocks.chunks_exact_mut(DERIVED_BLOCKS)) {
            for (counter, block) in (0u32..).zip(six.iter_mut()) {
                block[..4].copy_from_slice(&counter.to_le_bytes());
                block[4..].copy_from_slice(&message[..NONCE_BYTES]);
            }
        }
        key_generating.encrypt_blocks(Array::cast_slice_from_core_mut(blocks));
        match keys {
            Keys::OneByOne => {
                for (message, six) in chunk.iter().zip(blocks.chunks_exact(DERIVED_BLOCKS)) {
                    opened.push(open_one(message, six));
                }
            }
            Keys::FourAtOnce => {
                for (four, derived) in chunk.chunks(4).zip(blocks.chunks(4 * DERIVED_BLOCKS)) {
                    open_four(four, derived, &mut opened);
                }
            }
        }
    }
    opened
}

/// The authentication and encryption keys of one message, from its six derivation blocks:
/// the first 8 bytes of each, 2 blocks of authentication key, 4 of encryption key.
fn message_keys(derived: &[[u8; 16]], auth_key: &mut [u8; 16], enc_key: &mut [u8; 32]) {
    for (half, block) in auth_key.chunks_exact_mut(8).zip(&derived[..2]) {
        half.copy_from_slice(&block[..8]);
    }
    for (half, block) in enc_key.chunks_exact_mut(8).zip(&derived[2..DERIVED_BLOCKS]) {
        half.copy_from_slice(&block[..8]);
    }
}

/// The CTR mode's initial counter block: the received tag with its top bit set.
fn initial_counter(received: &[u8]) -> [u8; 16] {
    let mut counter = [0u8; 16];
    counter.copy_from_slice(received);
    counter[15] |= 0x80;
    counter
}

/// The block the expected tag encrypts: POLYVAL(auth_key, plaintext, lengths) ^ nonce, with
/// its top bit cleared.
fn tag_input(auth_key: &[u8; 16], plaintext: &[u8; 16], nonce: &[u8]) -> [u8; 16] {
    let mut polyval = Polyval::new(<&Array<u8, _>>::from(auth_key));
    polyval.update(&[Array::from(*plaintext), Array::from(LENGTH_BLOCK)]);
    let mut s: [u8; 16] = polyval.finalize().into();
    for (s, n) in s.iter_mut().zip(nonce) {
        *s ^= n;
    }
    s[15] &= 0x7f;
    s
}

/// Decrypts up to four messages given their derivation blocks (six each), pushing each one's
/// result onto `opened`: their four encryption keys are scheduled and used at once.
fn open_four(messages: &[Message], derived: &[[u8; 16]], opened: &mut Vec<Option<[u8; 16]>>) {
    debug_assert!(messages.len() <= 4);
    let mut auth_keys = Zeroizing::new([[0u8; 16]; 4]);
    let mut enc_keys = Zeroizing::new([[0u8; 32]; 4]);
    let mut counters = [[0u8; 16]; 4];
    for (i, (message, six)) in messages
        .iter()
        .zip(derived.chunks_exact(DERIVED_BLOCKS))
        .enumerate()
    {
        message_keys(six, &mut auth_keys[i], &mut enc_keys[i]);
        counters[i] = initial_counter(&message[NONCE_BYTES + 16..]);
    }
    // Lanes past the messages run on zero keys and blocks, and are not read.
    let round_keys = aes256x4::key_schedule(&enc_keys);
    let keystream = Zeroizing::new(aes256x4::encrypt(&round_keys, &counters));
    let mut plaintexts = Zeroizing::new([[0u8; 16]; 4]);
    let mut tag_inputs = Zeroizing::new([[0u8; 16]; 4]);
    for (i, message) in messages.iter().enumerate() {
        let ciphertext = &message[NONCE_BYTES..NONCE_BYTES + 16];
        for ((p, c), k) in plaintexts[i].iter_mut().zip(ciphertext).zip(&keystream[i]) {
            *p = c ^ k;
        }
        tag_inputs[i] = tag_input(&auth_keys[i], &plaintexts[i], &message[..NONCE_BYTES]);
    }
    let expected = Zeroizing::new(aes256x4::encrypt(&round_keys, &tag_inputs));
    for (i, message) in messages.iter().enumerate() {
        let received = &message[NONCE_BYTES + 16..];
        let authentic = bool::from(expected[i].as_slice().ct_eq(received));
        opened.push(authentic.then_some(plaintexts[i]));
    }
}

/// Decrypts one message given its six derivation blocks (`AES(K, LE32(i) || nonce)`, i = 0..6).
fn open_one(message: &Message, derived: &[[u8; 16]]) -> Option<[u8; 16]> {
    let (nonce, sealed) = message.split_at(NONCE_BYTES);
    let (ciphertext, received) = sealed.split_at(16);

    let mut auth_key = Zeroizing::new([0u8; 16]);
    let mut enc_key = Zeroizing::new([0u8; 32]);
    message_keys(derived, &mut auth_key, &mut enc_key);
    let cipher = Aes256::new(<&Array<u8, _>>::from(&*enc_key));

    // CTR with the received tag (top bit set) as the initial counter; one block of keystream.
    let mut keystream = Array::from(initial_counter(received));
    cipher.encrypt_block(&mut keystream);
    let mut plaintext = [0u8; 16];
    for ((p, c), k) in plaintext.iter_mut().zip(ciphertext).zip(keystream.iter()) {
        *p = c ^ k;
    }
    keystream.zeroize();

    // The expected tag: AES(enc_key, POLYVAL(auth_key, plaintext, lengths) ^ nonce, top bit 0).
    let mut expected = Array::from(tag_input(&auth_key, &plaintext, nonce));
    cipher.encrypt_block(&mut expected);

    let authentic = bool::from(expected.as_slice().ct_eq(received));
    expected.zeroize();
    if authentic {
        Some(plaintext)
    } else {
        plaintext.zeroize();
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8452 Appendix C.2 (AEAD_AES_256_GCM_SIV), the vector with a 16-byte plaintext and no
    /// associated data.
    #[test]
    fn rfc8452_c2_vector() {
        let mut key = [0u8; 32];
        key[0] = 1;
        let mut message = [0u8; 44];
        message[0] = 3;
        let sealed =
            hex::decode("85a01b63025ba19b7fd3ddfc033b3e76c9eac6fa700942702e90862383c6c366")
                .unwrap();
        message[NONCE_BYTES..].copy_from_slice(&sealed);
        let mut plaintext = [0u8; 16];
        plaintext[0] = 1;
        for keys in [Keys::OneByOne, Keys::FourAtOnce] {
            assert_eq!(
                open_all_by(&key, &[message], keys),
                vec![Some(plaintext)],
                "{keys:?}"
            );
            for bit in 0..(44 * 8) {
                let mut flipped = message;
                flipped[bit / 8] ^= 1 << (bit % 8);
                let opened = open_all_by(&key, &[message, flipped, message], keys);
                assert_eq!(
                    opened,
                    vec![Some(plaintext), None, Some(plaintext)],
                    "{keys:?}, bit {bit} flipped"
                );
            }
        }
    }

    #[test]
    fn empty_input() {
        assert!(open_all(&[0u8; 32], &[]).is_empty());
    }
}

/// Equality with the `aes-gcm-siv` crate on random keys, nonces and plaintexts, on tampered and
/// on foreign messages, in batches that cross the chunk boundary.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod equivalence {
    use aes_gcm_siv::aead::{Aead, KeyInit};
    use aes_gcm_siv::{Aes256GcmSiv, Nonce};
    use proptest::prelude::*;

    use super::*;

    fn seal(key: &[u8; 32], nonce: &[u8; 12], plaintext: &[u8; 16]) -> Message {
        let sealed = Aes256GcmSiv::new(key.into())
            .encrypt(Nonce::from_slice(nonce), plaintext.as_slice())
            .unwrap();
        let mut message = [0u8; 44];
        message[..NONCE_BYTES].copy_from_slice(nonce);
        message[NONCE_BYTES..].copy_from_slice(&sealed);
        message
    }

    /// What the `aes-gcm-siv` crate decrypts, message by message.
    fn reference(key: &[u8; 32], messages: &[Message]) -> Vec<Option<[u8; 16]>> {
        let cipher = Aes256GcmSiv::new(key.into());
        messages
            .iter()
            .map(|m| {
                cipher
                    .decrypt(Nonce::from_slice(&m[..NONCE_BYTES]), &m[NONCE_BYTES..])
                    .ok()
                    .map(|p| <[u8; 16]>::try_from(p.as_slice()).unwrap())
            })
            .collect()
    }

    /// One message of the batch: sealed under `key` or `other`, then maybe tampered.
    #[derive(Debug, Clone)]
    struct Case {
        nonce: [u8; 12],
        plaintext: [u8; 16],
        foreign: bool,
        flip: Option<(usize, u8)>,
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            any::<[u8; 12]>(),
            any::<[u8; 16]>(),
            any::<bool>(),
            prop::option::of((0usize..44, 1u8..=255)),
        )
            .prop_map(|(nonce, plaintext, foreign, flip)| Case {
                nonce,
                plaintext,
                foreign,
                flip,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn same_as_aes_gcm_siv(
            key in any::<[u8; 32]>(),
            other in any::<[u8; 32]>(),
            cases in prop::collection::vec(case(), 0..(2 * CHUNK + 3)),
        ) {
            let messages: Vec<Message> = cases
                .iter()
                .map(|c| {
                    let mut m = seal(if c.foreign { &other } else { &key }, &c.nonce, &c.plaintext);
                    if let Some((at, mask)) = c.flip {
                        m[at] ^= mask;
                    }
                    m
                })
                .collect();
            let opened = open_all(&key, &messages);
            prop_assert_eq!(&opened, &reference(&key, &messages));
            prop_assert_eq!(&open_all_by(&key, &messages, Keys::FourAtOnce), &opened);
            prop_assert_eq!(&open_all_by(&key, &messages, Keys::OneByOne), &opened);
            for (c, o) in cases.iter().zip(&opened) {
                let genuine = (!c.foreign || key == other) && c.flip.is_none();
                prop_assert_eq!(o.is_some(), genuine);
                if genuine {
                    prop_assert_eq!(*o, Some(c.plaintext));
                }
            }
        }

        #[test]
        fn random_bytes_match_aes_gcm_siv(
            key in any::<[u8; 32]>(),
            raw in prop::collection::vec(any::<[u8; 32]>(), 1..8),
            nonces in prop::collection::vec(any::<[u8; 12]>(), 8),
        ) {
            let messages: Vec<Message> = raw
                .iter()
                .zip(&nonces)
                .map(|(sealed, nonce)| {
                    let mut m = [0u8; 44];
                    m[..NONCE_BYTES].copy_from_slice(nonce);
                    m[NONCE_BYTES..].copy_from_slice(sealed);
                    m
                })
                .collect();
            let expected = reference(&key, &messages);
            prop_assert_eq!(open_all(&key, &messages), expected.clone());
            prop_assert_eq!(open_all_by(&key, &messages, Keys::FourAtOnce), expected);
        }
    }
}
