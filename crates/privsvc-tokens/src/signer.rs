//! The issuer's blind-signing path: RSA-CRT from the `rsa` crate with a cached blinding pair
//! and exactly one fault check.
//!
//! `blind-rsa-signatures` signs through `rsa::hazmat::rsa_decrypt_and_check`, which draws a
//! fresh blinding factor for every signature (a random `r`, a constant-time inversion mod n
//! and `r^e`: about 200 µs, a sixth of a signature) and checks `s^e = m` once. This signer
//! keeps OpenSSL's approach (`BN_BLINDING`): a blinding pair `(r^e, r^-1)` drawn once and
//! updated by squaring both values after each use (`(r^2)^e = (r^e)^2`), redrawn every
//! [`BLINDING_REFRESH`] uses. The private-key operation itself is the crate's constant-time
//! CRT code. Results are byte-identical to the crate's (RSA is deterministic), which the
//! RFC 9474 vectors pin.

use std::sync::Mutex;

use blind_rsa_signatures::reexports::crypto_bigint::modular::{BoxedMontyForm, BoxedMontyParams};
use blind_rsa_signatures::reexports::crypto_bigint::{NonZero, RandomMod};
use blind_rsa_signatures::reexports::rsa::hazmat::rsa_decrypt;
use blind_rsa_signatures::reexports::rsa::traits::PublicKeyParts as _;
use blind_rsa_signatures::reexports::rsa::{BoxedUint, RsaPrivateKey};
use blind_rsa_signatures::DefaultRng;
use zeroize::Zeroize;

use crate::error::{MalformedToken, TokenError};
use crate::suite::{check_blind_signature, IssuerSecretKey};

/// Uses of one blinding pair (squared after each) before a fresh one is drawn.
pub const BLINDING_REFRESH: u32 = 32;

/// A blinding pair in Montgomery form: `vi = r^e`, `vf = r^-1` (mod n).
struct BlindingPair {
    vi: BoxedMontyForm,
    vf: BoxedMontyForm,
    uses: u32,
}

impl Drop for BlindingPair {
    fn drop(&mut self) {
        self.vi.as_montgomery_mut().zeroize();
        self.vf.as_montgomery_mut().zeroize();
    }
}

/// Signs blinded messages with one issuer key. Share it across threads (`Send + Sync`).
pub struct BlindSigner {
    key: RsaPrivateKey,
    params: BoxedMontyParams,
    n: NonZero<BoxedUint>,
    size: usize,
    pair: Mutex<Option<BlindingPair>>,
}

impl BlindSigner {
    /// A signer for `sk` (its CRT values are precomputed when it was generated or loaded).
    pub fn new(sk: &IssuerSecretKey) -> Result<Self, TokenError> {
        let mut key: RsaPrivateKey = sk.as_ref().clone();
        key.precompute()
            .map_err(|e| TokenError::crypto("CRT precomputation", e))?;
        Ok(BlindSigner {
            params: key.n_params().clone(),
            n: key.n().clone(),
            size: key.size(),
            key,
            pair: Mutex::new(None),
        })
    }

    fn fresh_pair(&self) -> Result<BlindingPair, TokenError> {
        loop {
            let r = BoxedUint::random_mod_vartime(&mut DefaultRng, &self.n);
            let Some(r_inv) = Option::<BoxedUint>::from(r.invert_mod(&self.n)) else {
                continue;
            };
            let r_m = BoxedMontyForm::new(r, &self.params);
            let vi = r_m.pow_bounded_exp(self.key.e(), self.key.e().bits());
            let vf = BoxedMontyForm::new(r_inv, &self.params);
            return Ok(BlindingPair { vi, vf, uses: 0 });
        }
    }

    /// The next blinding pair: each call gets a distinct one.
    fn next_pair(&self) -> Result<(BoxedMontyForm, BoxedMontyForm), TokenError> {
        let mut slot = self.pair.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_none_or(|p| p.uses >= BLINDING_REFRESH) {
            *slot = Some(self.fresh_pair()?);
        }
        let pair = slot.as_mut().expect("set above");
        let out = (pair.vi.clone(), pair.vf.clone());
        pair.vi = pair.vi.square();
        pair.vf = pair.vf.square();
        pair.uses += 1;
        Ok(out)
    }

    /// The bare RSA-CRT private-key operation (no blinding, no check) for benchmarks: the
    /// floor of any signing path built on the `rsa` crate. Never use it to answer requests.
    #[doc(hidden)]
    pub fn raw_private_op(&self, blinded: &[u8]) -> Result<Vec<u8>, TokenError> {
        let c = BoxedUint::from_be_slice(blinded, self.n.bits_precision()).map_err(|_| {
            TokenError::crypto("decoding the blinded message", "not a number below 2^bits")
        })?;
        let m = rsa_decrypt::<DefaultRng>(None, &self.key, &c)
            .map_err(|e| TokenError::crypto("RSA private operation", e))?;
        Ok(m.to_be_bytes().to_vec())
    }

    /// Sign one blinded message (`blinded^d mod n`), checking `s^e = blinded` before returning.
    pub fn sign(&self, blinded: &[u8]) -> Result<Vec<u8>, TokenError> {
        if blinded.len() != self.size {
            return Err(TokenError::Malformed(MalformedToken::BlindedLength {
                got: blinded.len(),
                expected: self.size,
            }));
        }
        let bits = self.n.bits_precision();
        let c = BoxedUint::from_be_slice(blinded, bits).map_err(|_| {
            TokenError::crypto("decoding the blinded message", "not a number below 2^bits")
        })?;
        if c >= *self.n.as_ref() {
            return Err(TokenError::Malformed(
                MalformedToken::BlindedNotBelowModulus,
            ));
        }
        let (mut vi, mut vf) = self.next_pair()?;
        let blinded_c = (BoxedMontyForm::new(c, &self.params) * &vi).retrieve();
        let m = rsa_decrypt::<DefaultRng>(None, &self.key, &blinded_c)
            .map_err(|e| TokenError::crypto("RSA private operation", e))?;
        let s = (BoxedMontyForm::new(m, &self.params) * &vf).retrieve();
        vi.as_montgomery_mut().zeroize();
        vf.as_montgomery_mut().zeroize();
        let bytes = s.to_be_bytes();
        let mut out = vec![0u8; self.size];
        out[self.size - bytes.len().min(self.size)..]
            .copy_from_slice(&bytes[bytes.len().saturating_sub(self.size)..]);
        check_blind_signature(&self.key, blinded, &out)?;
        Ok(out)
    }
}
