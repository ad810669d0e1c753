//! Ownership proofs without a ledger (docs/PROTOCOL.md §8.5): the signed form handed to a
//! verifier, the limits on its window, assembling one from a signature, and every check a
//! verifier makes before it reads the ledger (window, challenge, verifier, chain, signature).
//!
//! The ledger checks (the entity exists, its owner is the signer, it is a valid record) belong
//! to the client; a client signs with [`proof_body`] then [`OwnershipProof::new`], and verifies
//! with [`OwnershipProof::check_terms`] then [`OwnershipProof::check_signature`].

use alloy_primitives::{Address, Signature, B256};
use serde::{Deserialize, Serialize};

use crate::sign::{signature_from_hex, signature_hex};
use crate::typed_data::{proof_signer, OwnershipProofBody};

/// Default validity of a proof, seconds (docs/PROTOCOL.md §9.7).
pub const DEFAULT_PROOF_TTL_SECONDS: u64 = 300;

/// The longest validity window of an ownership proof (`notAfter - notBefore`), seconds.
pub const MAX_PROOF_WINDOW_SECONDS: u64 = 3_600;

/// A signed ownership proof, as handed to a verifier (JSON with camelCase fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnershipProof {
    /// The signed fields.
    #[serde(flatten)]
    pub body: OwnershipProofBody,
    /// The EIP-712 domain chain id.
    pub chain_id: u64,
    /// The claimed owner (the record's one-time owner address).
    pub owner: Address,
    /// `0x` + 130 hex: r || s || v (v 27/28).
    pub signature: String,
}

/// Why a proof cannot be signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
// Exhaustive on purpose: privsvc-client maps each reason to its own, one to one.
pub enum ProofSignError {
    /// The asked validity is longer than [`MAX_PROOF_WINDOW_SECONDS`].
    #[error("an ownership proof is valid at most {max} s, {0} s asked; ask the verifier for a fresh challenge instead of a long-lived proof", max = MAX_PROOF_WINDOW_SECONDS)]
    TtlTooLong(u64),
    /// The signature is high-s or malformed, so every verifier would refuse it.
    #[error("the vault produced a high-s or malformed proof signature; use a low-s signer")]
    BadSignature,
}

/// Why a proof fails a check that needs no ledger (the message is meant for the verifier's user).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
// Exhaustive on purpose: privsvc-client maps each reason to its own, one to one.
pub enum ProofCheckError {
    /// The window has not started yet.
    #[error("the proof is not valid before {not_before} (now {now})")]
    NotYetValid {
        /// Window start.
        not_before: u64,
        /// The time checked.
        now: u64,
    },
    /// The window is longer than [`MAX_PROOF_WINDOW_SECONDS`]: a proof meant to be replayed.
    #[error("the proof is valid for {seconds} s, at most {max} s is accepted; ask for a fresh proof", max = MAX_PROOF_WINDOW_SECONDS)]
    WindowTooLong {
        /// `notAfter - notBefore` (saturating).
        seconds: u64,
    },
    /// The window has ended.
    #[error("the proof expired at {not_after} (now {now}); ask for a fresh one")]
    Expired {
        /// Window end.
        not_after: u64,
        /// The time checked.
        now: u64,
    },
    /// The challenge is not the one issued.
    #[error("the proof answers another challenge")]
    WrongChallenge,
    /// The proof is for another verifier.
    #[error("the proof is addressed to verifier {0:?}")]
    WrongVerifier(String),
    /// The proof's chain id is not the ledger's.
    #[error("the proof is for chain {proof}, the ledger is chain {ledger}")]
    WrongChain {
        /// Chain id in the proof.
        proof: u64,
        /// The ledger's chain id.
        ledger: u64,
    },
    /// The signature is malformed or does not recover to the claimed owner.
    #[error("the proof signature is invalid or not by the claimed owner")]
    BadSignature,
}

/// The body to sign for a proof about `entity_key`, valid from `now` for `ttl_seconds`
/// (default [`DEFAULT_PROOF_TTL_SECONDS`]); a validity over [`MAX_PROOF_WINDOW_SECONDS`] is
/// refused.
pub fn proof_body(
    entity_key: B256,
    challenge: &str,
    verifier: &str,
    now: u64,
    ttl_seconds: Option<u64>,
) -> Result<OwnershipProofBody, ProofSignError> {
    let ttl = ttl_seconds.unwrap_or(DEFAULT_PROOF_TTL_SECONDS);
    if ttl > MAX_PROOF_WINDOW_SECONDS {
        return Err(ProofSignError::TtlTooLong(ttl));
    }
    Ok(OwnershipProofBody {
        entity_key,
        challenge: challenge.to_owned(),
        verifier: verifier.to_owned(),
        not_before: now,
        not_after: now.saturating_add(ttl),
    })
}

impl OwnershipProof {
    /// The proof of `body` signed by `owner` for EIP-712 chain `chain_id`. A high-s signature
    /// is refused: a verifier must refuse it, so it is never handed out.
    pub fn new(
        body: OwnershipProofBody,
        chain_id: u64,
        owner: Address,
        signature: &Signature,
    ) -> Result<Self, ProofSignError> {
        let signature = signature_hex(signature);
        if signature_from_hex(&signature).is_none() {
            return Err(ProofSignError::BadSignature);
        }
        Ok(Self {
            body,
            chain_id,
            owner,
            signature,
        })
    }

    /// Checks the window at Unix time `now` (at most [`MAX_PROOF_WINDOW_SECONDS`] long, begun,
    /// not ended), then that the proof answers `challenge` and is addressed to `verifier`.
    pub fn check_terms(
        &self,
        challenge: &str,
        verifier: &str,
        now: u64,
    ) -> Result<(), ProofCheckError> {
        let b = &self.body;
        let window = b.not_after.saturating_sub(b.not_before);
        if window > MAX_PROOF_WINDOW_SECONDS {
            return Err(ProofCheckError::WindowTooLong { seconds: window });
        }
        if now < b.not_before {
            return Err(ProofCheckError::NotYetValid {
                not_before: b.not_before,
                now,
            });
        }
        if now > b.not_after {
            return Err(ProofCheckError::Expired {
                not_after: b.not_after,
                now,
            });
        }
        if b.challenge != challenge {
            return Err(ProofCheckError::WrongChallenge);
        }
        if b.verifier != verifier {
            return Err(ProofCheckError::WrongVerifier(b.verifier.clone()));
        }
        Ok(())
    }

    /// Checks that the proof is for the ledger's chain `ledger_chain_id` and that its signature
    /// is well formed (low-s, v 27/28) and recovers to the claimed owner; returns that signer.
    pub fn check_signature(&self, ledger_chain_id: u64) -> Result<Address, ProofCheckError> {
        if self.chain_id != ledger_chain_id {
            return Err(ProofCheckError::WrongChain {
                proof: self.chain_id,
                ledger: ledger_chain_id,
            });
        }
        let signature = signature_from_hex(&self.signature).ok_or(ProofCheckError::BadSignature)?;
        let signer = proof_signer(&self.body, Some(self.chain_id), &signature)
            .map_err(|_| ProofCheckError::BadSignature)?;
        if signer != self.owner {
            return Err(ProofCheckError::BadSignature);
        }
        Ok(signer)
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::U256;

    use super::*;
    use crate::{KeyVault, RecordRef, RecordSigner, NETWORK_CHAIN_ID};

    const NOW: u64 = 1_800_000_000;

    fn signer() -> RecordSigner {
        let (vault, _code) = KeyVault::random("notes");
        vault.signer(&vault.new_record()).unwrap()
    }

    /// A proof of `body` genuinely signed by `signer` for `chain_id`.
    fn sign(signer: &RecordSigner, body: OwnershipProofBody, chain_id: u64) -> OwnershipProof {
        let signature = signer.sign_proof_on_chain(&body, Some(chain_id)).unwrap();
        OwnershipProof::new(body, chain_id, signer.address(), &signature).unwrap()
    }

    fn fresh(signer: &RecordSigner) -> OwnershipProof {
        let key = B256::repeat_byte(0xab);
        let body = proof_body(key, "nonce-123", "shop.example", NOW, None).unwrap();
        sign(signer, body, NETWORK_CHAIN_ID)
    }

    /// The other valid form of `sig`: s replaced by n - s and the parity flipped (the same
    /// signer recovers; docs/PROTOCOL.md §8.5 accepts only the low-s form).
    fn high_s(sig: &Signature) -> Signature {
        let n = U256::from_str_radix(
            "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141",
            16,
        )
        .unwrap();
        Signature::new(sig.r(), n - sig.s(), !sig.v())
    }

    #[test]
    fn a_fresh_proof_passes_every_check_in_its_window() {
        let signer = signer();
        let proof = fresh(&signer);
        assert_eq!(proof.body.not_before, NOW);
        assert_eq!(proof.body.not_after, NOW + DEFAULT_PROOF_TTL_SECONDS);
        for now in [NOW, NOW + 150, NOW + DEFAULT_PROOF_TTL_SECONDS] {
            proof.check_terms("nonce-123", "shop.example", now).unwrap();
        }
        assert_eq!(
            proof.check_signature(NETWORK_CHAIN_ID),
            Ok(signer.address())
        );
    }

    #[test]
    fn window_too_long_is_refused_when_signing_and_when_checking() {
        let key = B256::repeat_byte(1);
        assert_eq!(
            proof_body(key, "c", "v", NOW, Some(MAX_PROOF_WINDOW_SECONDS + 1)),
            Err(ProofSignError::TtlTooLong(MAX_PROOF_WINDOW_SECONDS + 1))
        );
        let longest = proof_body(key, "c", "v", NOW, Some(MAX_PROOF_WINDOW_SECONDS)).unwrap();
        assert_eq!(
            longest.not_after - longest.not_before,
            MAX_PROOF_WINDOW_SECONDS
        );

        // The owner key signs a 2-hour window itself: the check still refuses it, in its window.
        let signer = signer();
        let mut body = longest;
        body.not_after = body.not_before + 7_200;
        let proof = sign(&signer, body, NETWORK_CHAIN_ID);
        assert_eq!(
            proof.check_terms("c", "v", NOW + 10),
            Err(ProofCheckError::WindowTooLong { seconds: 7_200 })
        );
        // A window that ends before it starts is empty, not huge.
        let mut backwards = proof.clone();
        backwards.body.not_after = NOW - 10;
        assert!(matches!(
            backwards.check_terms("c", "v", NOW),
            Err(ProofCheckError::Expired { .. })
        ));
    }

    #[test]
    fn expired_and_not_yet_valid() {
        let proof = fresh(&signer());
        let end = NOW + DEFAULT_PROOF_TTL_SECONDS;
        assert_eq!(
            proof.check_terms("nonce-123", "shop.example", end + 1),
            Err(ProofCheckError::Expired {
                not_after: end,
                now: end + 1
            })
        );
        assert_eq!(
            proof.check_terms("nonce-123", "shop.example", NOW - 1),
            Err(ProofCheckError::NotYetValid {
                not_before: NOW,
                now: NOW - 1
            })
        );
    }

    #[test]
    fn wrong_challenge_and_wrong_verifier() {
        let proof = fresh(&signer());
        assert_eq!(
            proof.check_terms("nonce-999", "shop.example", NOW),
            Err(ProofCheckError::WrongChallenge)
        );
        assert_eq!(
            proof.check_terms("nonce-123", "evil.example", NOW),
            Err(ProofCheckError::WrongVerifier("shop.example".into()))
        );
    }

    #[test]
    fn wrong_chain() {
        let signer = signer();
        let proof = fresh(&signer);
        assert_eq!(
            proof.check_signature(1),
            Err(ProofCheckError::WrongChain {
                proof: NETWORK_CHAIN_ID,
                ledger: 1
            })
        );
        // Signed for chain 1, relabelled as the ledger's chain: the domain differs, so the
        // signature no longer recovers to the owner.
        let mut relabelled = sign(&signer, proof.body.clone(), 1);
        assert_eq!(relabelled.check_signature(1), Ok(signer.address()));
        relabelled.chain_id = NETWORK_CHAIN_ID;
        assert_eq!(
            relabelled.check_signature(NETWORK_CHAIN_ID),
            Err(ProofCheckError::BadSignature)
        );
    }

    #[test]
    fn tampered_signature_body_or_owner_is_refused() {
        let proof = fresh(&signer());
        let raw = hex::decode(&proof.signature[2..]).unwrap();
        let refused = |signature: String| {
            let mut p = proof.clone();
            p.signature = signature;
            p.check_signature(NETWORK_CHAIN_ID)
        };
        // A flipped bit in r.
        let mut flipped = raw.clone();
        flipped[5] ^= 0x01;
        assert_eq!(
            refused(format!("0x{}", hex::encode(&flipped))),
            Err(ProofCheckError::BadSignature)
        );
        // The same signature with s replaced by n - s (and v flipped): same signer, high s.
        let genuine = signature_from_hex(&proof.signature).unwrap();
        assert_eq!(
            refused(signature_hex(&high_s(&genuine))),
            Err(ProofCheckError::BadSignature)
        );
        // v written 0/1, upper-case hex, truncated, not hex.
        let mut v01 = raw.clone();
        v01[64] -= 27;
        for bad in [
            format!("0x{}", hex::encode(&v01)),
            format!("0x{}", hex::encode_upper(&raw)),
            proof.signature[..proof.signature.len() - 2].to_owned(),
            "0xnothex".to_owned(),
        ] {
            assert_eq!(refused(bad), Err(ProofCheckError::BadSignature));
        }
        // A changed field, or another claimed owner, with the genuine signature.
        let mut later = proof.clone();
        later.body.not_after += 60;
        assert_eq!(
            later.check_signature(NETWORK_CHAIN_ID),
            Err(ProofCheckError::BadSignature)
        );
        let mut other = proof.clone();
        other.owner = Address::repeat_byte(5);
        assert_eq!(
            other.check_signature(NETWORK_CHAIN_ID),
            Err(ProofCheckError::BadSignature)
        );
    }

    #[test]
    fn a_high_s_signature_is_never_handed_out() {
        let signer = signer();
        let body = proof_body(B256::ZERO, "c", "v", NOW, None).unwrap();
        let sig = signer.sign_proof_on_chain(&body, None).unwrap();
        assert_eq!(
            OwnershipProof::new(body, NETWORK_CHAIN_ID, signer.address(), &high_s(&sig)),
            Err(ProofSignError::BadSignature)
        );
    }

    /// The JSON form the JS package and the example client exchange (conformance/vault/
    /// proofs.json, first case): field names, order and encodings must not change.
    #[test]
    fn json_form_is_pinned() {
        let wallet_sig: Signature = "0x99c5c9e39d0edca6a8ad94ec3f911b2dffda62131d895c8bc00d05228e19ab302df312799424ca5ac10666b84f47e162fde352504d5ba418757c614b10c1f50d1b".parse().unwrap();
        let vault = KeyVault::from_signature(&wallet_sig, "privsvc-conformance");
        let record: RecordRef = "0102030405060708090a0b0c0d0e0f10".parse().unwrap();
        let body = OwnershipProofBody {
            entity_key: B256::repeat_byte(0x11),
            challenge: "c-123".into(),
            verifier: "example.org".into(),
            not_before: 1_700_000_000,
            not_after: 1_700_000_300,
        };
        let proof = sign(&vault.signer(&record).unwrap(), body, NETWORK_CHAIN_ID);
        let json = serde_json::to_string(&proof).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"entityKey":"0x1111111111111111111111111111111111111111111111111111111111111111","#,
                r#""challenge":"c-123","verifier":"example.org","notBefore":1700000000,"#,
                r#""notAfter":1700000300,"chainId":7738577,"#,
                r#""owner":"0x5d8882b5cc74fbc8dc1bf3c0833f3df5e7f8aaac","#,
                r#""signature":"0x58bc0468794685a439e175b32bb5da357b74b70a20b114627087fdcf336790930cbcff9cb2f13b8870a4e61925f33adff7ba90c0bd663e0552d7486c83dcd67c1c"}"#
            )
        );
        let back: OwnershipProof = serde_json::from_str(&json).unwrap();
        assert_eq!(back, proof);
        assert_eq!(
            back.signature,
            signature_hex(&signature_from_hex(&back.signature).unwrap())
        );
    }

    /// Verifiers and tests show these texts to users; they are those of the client before the
    /// checks moved here.
    #[test]
    fn messages_are_unchanged() {
        let cases: [(&dyn std::fmt::Display, &str); 9] = [
            (&ProofSignError::TtlTooLong(7_200), "an ownership proof is valid at most 3600 s, 7200 s asked; ask the verifier for a fresh challenge instead of a long-lived proof"),
            (&ProofSignError::BadSignature, "the vault produced a high-s or malformed proof signature; use a low-s signer"),
            (&ProofCheckError::NotYetValid { not_before: 5, now: 4 }, "the proof is not valid before 5 (now 4)"),
            (&ProofCheckError::WindowTooLong { seconds: 7_200 }, "the proof is valid for 7200 s, at most 3600 s is accepted; ask for a fresh proof"),
            (&ProofCheckError::Expired { not_after: 5, now: 6 }, "the proof expired at 5 (now 6); ask for a fresh one"),
            (&ProofCheckError::WrongChallenge, "the proof answers another challenge"),
            (&ProofCheckError::WrongVerifier("a.example".into()), "the proof is addressed to verifier \"a.example\""),
            (&ProofCheckError::WrongChain { proof: 1, ledger: 2 }, "the proof is for chain 1, the ledger is chain 2"),
            (&ProofCheckError::BadSignature, "the proof signature is invalid or not by the claimed owner"),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }
}
