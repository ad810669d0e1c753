//! A small reference implementation of RFC 9458 (X25519 / HKDF-SHA256 / AES-128-GCM only) on
//! the `hpke` crate (RFC 9180), independent of the `ohttp` crate our gateway and client use.
//! Shared by the `rfc_vectors` and `padding_vectors` modules of `tests/it` (declared in
//! `tests/it/main.rs`) and `examples/ohttp_vectors.rs` (both include this file with `#[path]`).
#![allow(dead_code)]

use std::convert::Infallible;

use aes_gcm::aead::{Aead as _, KeyInit as _};
use aes_gcm::Aes128Gcm;
use hkdf::Hkdf;
use hpke::aead::AesGcm128;
use hpke::kdf::HkdfSha256;
use hpke::kem::X25519HkdfSha256;
use hpke::{Deserializable, Kem as _, OpModeR, OpModeS, Serializable};
use sha2::Sha256;

/// The receiver's HPKE context.
pub type CtxR = hpke::aead::AeadCtxR<AesGcm128, HkdfSha256, X25519HkdfSha256>;
/// The sender's HPKE context.
pub type CtxS = hpke::aead::AeadCtxS<AesGcm128, HkdfSha256, X25519HkdfSha256>;

/// RFC 9458 request label.
pub const REQUEST_LABEL: &[u8] = b"message/bhttp request";
/// RFC 9458 response label.
pub const RESPONSE_LABEL: &[u8] = b"message/bhttp response";
/// The request header after the key id: KEM X25519 (0x0020), HKDF-SHA256 (1), AES-128-GCM (1).
pub const SUITE: [u8; 6] = [0x00, 0x20, 0x00, 0x01, 0x00, 0x01];
/// HKDF salt of privsvc's seed-to-key derivation (`privsvc_ohttp::OhttpGateway::from_seed`).
pub const SEED_SALT: &[u8] = b"privsvc ohttp gateway key v1";

/// An RNG that hands out exactly the given bytes, once: feeding `ikmE` to HPKE's
/// `GenerateKeyPair`, which is then `DeriveKeyPair(ikmE)` (RFC 9180 section 7.1.3), the way
/// RFC 9180 test vectors pin the ephemeral key.
pub struct FixedIkm(Option<[u8; 32]>);

impl FixedIkm {
    /// An RNG yielding `ikm` once.
    pub fn new(ikm: [u8; 32]) -> Self {
        Self(Some(ikm))
    }
}

impl rand_core::TryRng for FixedIkm {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        unimplemented!("only fill_bytes of 32 bytes is expected")
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        unimplemented!("only fill_bytes of 32 bytes is expected")
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        let ikm = self.0.take().expect("the fixed ikm is used once");
        assert_eq!(dst.len(), 32, "X25519 ikm is 32 bytes");
        dst.copy_from_slice(&ikm);
        Ok(())
    }
}

impl rand_core::TryCryptoRng for FixedIkm {}

/// The X25519 secret key privsvc derives for key `id` from `seed`: `DeriveKeyPair(HKDF-SHA256(
/// salt = "privsvc ohttp gateway key v1", ikm = seed, info = [id], 32 bytes))`.
pub fn gateway_secret(seed: &[u8], id: u8) -> Vec<u8> {
    let mut ikm = [0u8; 32];
    Hkdf::<Sha256>::new(Some(SEED_SALT), seed)
        .expand(&[id], &mut ikm)
        .unwrap();
    let (sk, _) = X25519HkdfSha256::derive_keypair(&ikm);
    sk.to_bytes().to_vec()
}

/// The public key of an X25519 secret key.
pub fn public_of(sk: &[u8]) -> Vec<u8> {
    let sk = <X25519HkdfSha256 as hpke::Kem>::PrivateKey::from_bytes(sk).unwrap();
    X25519HkdfSha256::sk_to_pk(&sk).to_bytes().to_vec()
}

fn request_info(key_id: u8) -> Vec<u8> {
    let mut info = REQUEST_LABEL.to_vec();
    info.push(0);
    info.push(key_id);
    info.extend_from_slice(&SUITE);
    info
}

/// RFC 9458 section 4.3 encapsulation of `plain` to the key configuration `config` (bytes),
/// with the ephemeral key `DeriveKeyPair(ikm_e)` when given (random otherwise). Returns the
/// message, the sender context and `enc`.
pub fn encapsulate(
    config: &[u8],
    ikm_e: Option<[u8; 32]>,
    plain: &[u8],
) -> (Vec<u8>, CtxS, Vec<u8>) {
    let key_id = config[0];
    assert_eq!(&config[1..3], &SUITE[..2], "X25519 key configuration");
    let pk = <X25519HkdfSha256 as hpke::Kem>::PublicKey::from_bytes(&config[3..35]).unwrap();
    let info = request_info(key_id);
    let (encapped, mut ctx) = match ikm_e {
        Some(ikm) => hpke::setup_sender_with_rng::<AesGcm128, HkdfSha256, X25519HkdfSha256>(
            &OpModeS::Base,
            &pk,
            &info,
            &mut FixedIkm::new(ikm),
        ),
        None => hpke::setup_sender::<AesGcm128, HkdfSha256, X25519HkdfSha256>(
            &OpModeS::Base,
            &pk,
            &info,
        ),
    }
    .unwrap();
    let enc = encapped.to_bytes().to_vec();
    let mut message = vec![key_id];
    message.extend_from_slice(&SUITE);
    message.extend_from_slice(&enc);
    message.extend(ctx.seal(plain, b"").unwrap());
    (message, ctx, enc)
}

/// RFC 9458 section 4.3 decapsulation with the secret key `sk`: (plaintext, context, enc).
pub fn open(sk: &[u8], message: &[u8]) -> (Vec<u8>, CtxR, Vec<u8>) {
    let (header, rest) = message.split_at(7);
    assert_eq!(&header[1..], &SUITE);
    let (enc, ct) = rest.split_at(32);
    let info = request_info(header[0]);
    let sk = <X25519HkdfSha256 as hpke::Kem>::PrivateKey::from_bytes(sk).unwrap();
    let encapped = <X25519HkdfSha256 as hpke::Kem>::EncappedKey::from_bytes(enc).unwrap();
    let mut ctx = hpke::setup_receiver::<AesGcm128, HkdfSha256, X25519HkdfSha256>(
        &OpModeR::Base,
        &sk,
        &encapped,
        &info,
    )
    .unwrap();
    let plain = ctx.open(ct, b"").unwrap();
    (plain, ctx, enc.to_vec())
}

/// RFC 9458 section 4.4 response key schedule: (secret, aead key, aead nonce).
pub fn response_keys(
    export: impl Fn(&[u8], &mut [u8]),
    enc: &[u8],
    nonce: &[u8],
) -> ([u8; 16], [u8; 16], [u8; 12]) {
    let mut secret = [0u8; 16];
    export(RESPONSE_LABEL, &mut secret);
    let mut salt = enc.to_vec();
    salt.extend_from_slice(nonce);
    let prk = Hkdf::<Sha256>::new(Some(&salt), &secret);
    let mut key = [0u8; 16];
    let mut iv = [0u8; 12];
    prk.expand(b"key", &mut key).unwrap();
    prk.expand(b"nonce", &mut iv).unwrap();
    (secret, key, iv)
}

/// AES-128-GCM open (panics on a bad tag).
pub fn aes_open(key: &[u8], nonce: &[u8], ct: &[u8]) -> Vec<u8> {
    let nonce: aes_gcm::Nonce<aes_gcm::aead::consts::U12> = nonce.try_into().unwrap();
    Aes128Gcm::new_from_slice(key)
        .unwrap()
        .decrypt(&nonce, ct)
        .unwrap()
}

/// AES-128-GCM seal.
pub fn aes_seal(key: &[u8], nonce: &[u8], pt: &[u8]) -> Vec<u8> {
    let nonce: aes_gcm::Nonce<aes_gcm::aead::consts::U12> = nonce.try_into().unwrap();
    Aes128Gcm::new_from_slice(key)
        .unwrap()
        .encrypt(&nonce, pt)
        .unwrap()
}

/// RFC 9458 section 4.4: seal `plain` as the response to the request whose sender context is
/// `ctx` and whose `enc` is `enc`, with the response nonce `nonce` (16 bytes).
pub fn seal_response(ctx: &CtxS, enc: &[u8], nonce: &[u8], plain: &[u8]) -> Vec<u8> {
    seal_response_with(
        |label, out| ctx.export(label, out).unwrap(),
        enc,
        nonce,
        plain,
    )
}

/// [`seal_response`] with any HPKE context's `export` (the gateway's, for instance).
pub fn seal_response_with(
    export: impl Fn(&[u8], &mut [u8]),
    enc: &[u8],
    nonce: &[u8],
    plain: &[u8],
) -> Vec<u8> {
    let (_, key, iv) = response_keys(export, enc, nonce);
    let mut sealed = nonce.to_vec();
    sealed.extend(aes_seal(&key, &iv, plain));
    sealed
}

/// RFC 9458 section 4.4: open a response with the request's sender context.
pub fn open_response(ctx: &CtxS, enc: &[u8], sealed: &[u8]) -> Vec<u8> {
    let (nonce, ct) = sealed.split_at(16);
    let (_, key, iv) = response_keys(|label, out| ctx.export(label, out).unwrap(), enc, nonce);
    aes_open(&key, &iv, ct)
}
