//! The token suite RSABSSA-SHA384-PSS-Deterministic (RFC 9474) over 2048-bit keys, issuer keys,
//! and token verification.

use blind_rsa_signatures::reexports::rsa::{
    hazmat::rsa_encrypt, traits::PublicKeyParts as _, BoxedUint, RsaPublicKey,
};
use blind_rsa_signatures::{
    BlindSignature, BlindingResult, DefaultRng, KeyPairSha384PSSDeterministic,
    PublicKeySha384PSSDeterministic, SecretKeySha384PSSDeterministic, Signature,
};
use zeroize::Zeroize;

use crate::error::{MalformedToken, TokenError};
use crate::message::{token_id, token_message};
use crate::protocol::TokenRedemption;

/// The RFC 9474 name of the suite.
pub const SUITE_NAME: &str = "RSABSSA-SHA384-PSS-Deterministic";
/// Issuer key size in bits.
pub const MODULUS_BITS: usize = 2048;
/// Size of a signature, a blinded message and a blind signature in bytes.
pub const MODULUS_BYTES: usize = MODULUS_BITS / 8;

/// The issuer's secret key type of the suite.
pub type IssuerSecretKey = SecretKeySha384PSSDeterministic;
/// The public key type of the suite.
pub type SuitePublicKey = PublicKeySha384PSSDeterministic;

/// The token suite: RSABSSA-SHA384-PSS-Deterministic with 2048-bit keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenSuite;

/// The token suite (RFC 9474 RSABSSA-SHA384-PSS-Deterministic, 2048-bit keys).
pub fn token_suite() -> TokenSuite {
    TokenSuite
}

/// A client's blinded message and its blinding secret. The secret is wiped on drop.
pub struct Blinded {
    inner: BlindingResult,
}

impl Blinded {
    /// The blinded message to send to the issuer.
    pub fn blinded_message(&self) -> &[u8] {
        &self.inner.blind_message.0
    }
}

impl std::fmt::Debug for Blinded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blinded").finish_non_exhaustive()
    }
}

impl Drop for Blinded {
    fn drop(&mut self) {
        self.inner.secret.0.zeroize();
    }
}

impl TokenSuite {
    /// The RFC 9474 suite name.
    pub fn name(&self) -> &'static str {
        SUITE_NAME
    }

    /// Generate a fresh 2048-bit issuer key (e = 65537). Slow (hundreds of ms): call it off the
    /// async executor.
    pub fn generate_key(&self) -> Result<IssuerSecretKey, TokenError> {
        let kp = KeyPairSha384PSSDeterministic::generate(&mut DefaultRng, MODULUS_BITS)?;
        Ok(kp.sk)
    }

    /// Client: blind `msg` for the issuer key.
    pub fn blind(&self, key: &IssuerKey, msg: &[u8]) -> Result<Blinded, TokenError> {
        Ok(Blinded {
            inner: key.key.blind(&mut DefaultRng, msg)?,
        })
    }

    /// Issuer: sign one blinded message, then check the result against the public key
    /// (`s^e mod n == m`) before it leaves the process, so that a faulty computation never
    /// reveals the key (fault attacks on CRT).
    pub fn blind_sign(&self, sk: &IssuerSecretKey, blinded: &[u8]) -> Result<Vec<u8>, TokenError> {
        let sig = sk.blind_sign(blinded)?;
        check_blind_signature(sk.as_ref(), blinded, &sig.0)?;
        Ok(sig.0)
    }

    /// Client: unblind the issuer's blind signature and verify the result.
    pub fn finalize(
        &self,
        key: &IssuerKey,
        blind_sig: &[u8],
        blinded: &Blinded,
        msg: &[u8],
    ) -> Result<Vec<u8>, TokenError> {
        key.key
            .finalize(&BlindSignature(blind_sig.to_vec()), &blinded.inner, msg)
            .map(|s| s.0)
            .map_err(|_| TokenError::BadBlindSignature)
    }

    /// Verify a signature over `msg`.
    pub fn verify(&self, key: &IssuerKey, sig: &[u8], msg: &[u8]) -> Result<(), TokenError> {
        key.key
            .verify(&Signature(sig.to_vec()), None, msg)
            .map_err(|_| TokenError::InvalidSignature)
    }
}

/// Check `sig^e mod n == blinded` with the public part of a key.
pub(crate) fn check_blind_signature(
    key: &impl blind_rsa_signatures::reexports::rsa::traits::PublicKeyParts,
    blinded: &[u8],
    sig: &[u8],
) -> Result<(), TokenError> {
    let bits = key.n_bits_precision();
    let fault = || {
        TokenError::crypto(
            "self-check of a blind signature",
            "the signature does not verify",
        )
    };
    let m = BoxedUint::from_be_slice(blinded, bits).map_err(|_| fault())?;
    let s = BoxedUint::from_be_slice(sig, bits).map_err(|_| fault())?;
    if s >= *key.n().as_ref() {
        return Err(fault());
    }
    let back = rsa_encrypt(key, &s).map_err(|_| fault())?;
    if back != m {
        return Err(fault());
    }
    Ok(())
}

/// An issuer public key as published on the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerKey {
    key: SuitePublicKey,
    spki: Vec<u8>,
}

impl IssuerKey {
    /// The canonical SPKI DER (algorithm rsaEncryption), as published in the key entity.
    pub fn spki(&self) -> &[u8] {
        &self.spki
    }

    /// The key as the `blind-rsa-signatures` type.
    pub fn public_key(&self) -> &SuitePublicKey {
        &self.key
    }

    /// The public part of an issuer secret key.
    pub fn from_secret(sk: &IssuerSecretKey) -> Result<Self, TokenError> {
        Self::from_public(sk.public_key()?)
    }

    fn from_public(key: SuitePublicKey) -> Result<Self, TokenError> {
        let inner: &RsaPublicKey = key.as_ref();
        if inner.n().as_ref().bits() as usize != MODULUS_BITS {
            return Err(TokenError::InvalidKey(
                format!("modulus is {} bits", inner.n().as_ref().bits()).into(),
            ));
        }
        if inner.e() != &BoxedUint::from(65537u32) {
            return Err(TokenError::InvalidKey(
                "public exponent is not 65537".into(),
            ));
        }
        let spki = key
            .to_der()
            .map_err(|e| TokenError::InvalidKey(Box::new(e)))?;
        Ok(IssuerKey { key, spki })
    }
}

/// Import an issuer key from SPKI DER. Accepts the rsaEncryption form (what WebCrypto exports)
/// and the RSASSA-PSS form of RFC 9474; always re-encodes to rsaEncryption SPKI, so two
/// encodings of one key compare equal.
pub fn import_issuer_key(spki: &[u8]) -> Result<IssuerKey, TokenError> {
    let key = SuitePublicKey::from_der(spki)
        .or_else(|_| SuitePublicKey::from_spki(spki))
        .map_err(|e| TokenError::InvalidKey(Box::new(e)))?;
    IssuerKey::from_public(key)
}

/// Verify a token redemption for `app` under the issuer key of its epoch. Returns the token id
/// (SHA-256 of the token message) that the relayer must record as spent.
///
/// Whether the epoch is still accepted ([`crate::acceptable_epochs`]) and whether the id was
/// spent before is the relayer's business.
pub fn verify_token(
    key: &IssuerKey,
    app: &str,
    token: &TokenRedemption,
) -> Result<[u8; 32], TokenError> {
    let nonce = token.nonce_bytes()?;
    let sig = token.signature_bytes()?;
    if sig.len() != MODULUS_BYTES {
        return Err(TokenError::Malformed(MalformedToken::SignatureLength {
            got: sig.len(),
            expected: MODULUS_BYTES,
        }));
    }
    let msg = token_message(app, token.epoch, &nonce)?;
    TokenSuite.verify(key, &sig, &msg)?;
    Ok(token_id(&msg))
}

#[cfg(test)]
mod rfc9474 {
    //! RFC 9474 appendix A test vectors (4096-bit key), run through this crate's signing path.
    use super::*;
    use blind_rsa_signatures::reexports::rsa::{rand_core, RsaPrivateKey};
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Vector {
        name: String,
        p: String,
        q: String,
        n: String,
        e: String,
        d: String,
        inv: String,
        msg: String,
        salt: String,
        blinded_msg: String,
        blind_sig: String,
        sig: String,
    }

    fn bytes(s: &str) -> Vec<u8> {
        let s = s.trim_start_matches("0x");
        let s = if s.len() % 2 == 1 {
            format!("0{s}")
        } else {
            s.to_string()
        };
        hex::decode(s).unwrap()
    }

    fn uint(s: &str, bits: u32) -> BoxedUint {
        BoxedUint::from_be_slice(&bytes(s), bits).unwrap()
    }

    /// Hands out fixed byte strings in order (salt, then the blinding factor r).
    struct FixedRng(Vec<Vec<u8>>);
    impl rand_core::TryCryptoRng for FixedRng {}
    impl rand_core::TryRng for FixedRng {
        type Error = core::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            unreachable!("only fill_bytes is used")
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            unreachable!("only fill_bytes is used")
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            dst.copy_from_slice(&self.0.remove(0));
            Ok(())
        }
    }

    fn vectors() -> Vec<Vector> {
        serde_json::from_str(include_str!("../tests/rfc9474_vectors.json")).unwrap()
    }

    fn secret_key(v: &Vector) -> IssuerSecretKey {
        let bits = 4096;
        let inner = RsaPrivateKey::from_components(
            uint(&v.n, bits),
            uint(&v.e, bits),
            uint(&v.d, bits),
            vec![uint(&v.p, 2048), uint(&v.q, 2048)],
        )
        .unwrap();
        IssuerSecretKey::new(inner)
    }

    #[test]
    fn deterministic_suite_vector_end_to_end() {
        let v = vectors()
            .into_iter()
            .find(|v| v.name == SUITE_NAME)
            .expect("the RFC lists our suite");
        let sk = secret_key(&v);
        let pk = sk.public_key().unwrap();
        let n = uint(&v.n, 4096).to_nz().unwrap();
        let r = uint(&v.inv, 4096).invert_mod(&n).unwrap();
        let mut rng = FixedRng(vec![bytes(&v.salt), r.to_le_bytes().to_vec()]);
        let msg = bytes(&v.msg);

        let blinding = pk.blind(&mut rng, &msg).unwrap();
        assert_eq!(blinding.blind_message.0, bytes(&v.blinded_msg));

        let blind_sig = token_suite()
            .blind_sign(&sk, &blinding.blind_message.0)
            .unwrap();
        assert_eq!(blind_sig, bytes(&v.blind_sig));

        let sig = pk
            .finalize(&BlindSignature(blind_sig), &blinding, &msg)
            .unwrap();
        assert_eq!(sig.0, bytes(&v.sig));
        pk.verify(&sig, None, &msg).unwrap();
        let mut bad = sig.0.clone();
        bad[10] ^= 1;
        assert!(pk.verify(&Signature(bad), None, &msg).is_err());
    }

    #[test]
    fn every_vector_blind_signs_to_the_rfc_value() {
        for v in vectors() {
            let sk = secret_key(&v);
            let got = token_suite()
                .blind_sign(&sk, &bytes(&v.blinded_msg))
                .unwrap();
            assert_eq!(got, bytes(&v.blind_sig), "{}", v.name);
        }
    }

    #[test]
    fn fast_signer_matches_every_vector_across_blinding_refreshes() {
        for v in vectors() {
            let sk = secret_key(&v);
            let signer = crate::signer::BlindSigner::new(&sk).unwrap();
            let uses = if v.name == SUITE_NAME {
                crate::signer::BLINDING_REFRESH as usize + 3
            } else {
                2
            };
            for i in 0..uses {
                let got = signer.sign(&bytes(&v.blinded_msg)).unwrap();
                assert_eq!(got, bytes(&v.blind_sig), "{} use {i}", v.name);
            }
        }
    }

    #[test]
    fn self_check_rejects_a_wrong_blind_signature() {
        let v = &vectors()[0];
        let sk = secret_key(v);
        let mut sig = bytes(&v.blind_sig);
        assert!(check_blind_signature(sk.as_ref(), &bytes(&v.blinded_msg), &sig).is_ok());
        sig[100] ^= 0x40;
        assert!(check_blind_signature(sk.as_ref(), &bytes(&v.blinded_msg), &sig).is_err());
    }
}
