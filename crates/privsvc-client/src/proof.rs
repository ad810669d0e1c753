//! Ownership proofs (docs/PROTOCOL.md §8.5): an EIP-712 `OwnershipProof` signed by a record's owner
//! key, and its verification against the ledger. The proof's form and every check that needs no
//! ledger live in `privsvc_vault`; this module signs with a [`Vault`] and adds the ledger checks.

use std::fmt;

use privsvc_rt::{SystemTime, UNIX_EPOCH};

use alloy_primitives::{Address, B256};
use privsvc_ledger::LedgerReader;
use privsvc_vault::{proof_body, ProofCheckError, ProofSignError, RecordRef, Vault};

pub use privsvc_vault::{
    proof_signing_hash, proof_typed_data, signature_from_hex as parse_signature, signature_hex,
    OwnershipProof, OwnershipProofBody,
};

use crate::error::PrivsvcError;
use crate::verify::{verify_record_on_ledger, RejectReason, VerifyOptions};

/// Parameters of [`sign_ownership_proof`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProofParams {
    /// The record's entity key.
    pub entity_key: B256,
    /// The verifier's challenge.
    pub challenge: String,
    /// Who the proof is for.
    pub verifier: String,
    /// Validity in seconds from `now` (default 300).
    pub ttl_seconds: Option<u64>,
    /// EIP-712 chain id (default: the privsvc network id).
    pub chain_id: Option<u64>,
    /// Start of the window, Unix seconds (default: the current time).
    pub now: Option<u64>,
}

/// Current Unix time in seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Low-level proof signing with the owner key of `record` in `vault`.
pub async fn sign_ownership_proof(
    vault: &dyn Vault,
    record: &RecordRef,
    params: &ProofParams,
) -> Result<OwnershipProof, PrivsvcError> {
    let now = params.now.unwrap_or_else(unix_now);
    let body = proof_body(
        params.entity_key,
        &params.challenge,
        &params.verifier,
        now,
        params.ttl_seconds,
    )
    .map_err(sign_error)?;
    let chain_id = params.chain_id.unwrap_or(privsvc_vault::NETWORK_CHAIN_ID);
    let signature = vault
        .sign_proof_on_chain(record, &body, Some(chain_id))
        .await?;
    let owner = vault.address_of(record).await?;
    OwnershipProof::new(body, chain_id, owner, &signature).map_err(sign_error)
}

/// The client error for a proof that cannot be signed: a too long validity is the caller's
/// configuration, a high-s signature the vault's fault.
fn sign_error(e: ProofSignError) -> PrivsvcError {
    match e {
        ProofSignError::TtlTooLong(_) => PrivsvcError::Config(e.to_string()),
        ProofSignError::BadSignature => PrivsvcError::ProofSignature(e),
    }
}

/// What a verifier expects of a proof.
pub struct ProofExpectation<'a> {
    /// The challenge the verifier issued.
    pub challenge: &'a str,
    /// The verifier's own name.
    pub verifier: &'a str,
    /// Reader for the entity's current owner.
    pub reader: &'a dyn LedgerReader,
    /// The time to check the window at, Unix seconds (default: now).
    pub now: Option<u64>,
}

/// Why a proof was not accepted. The first seven reasons are the checks that need no ledger
/// ([`ProofCheckError`], with the same messages); the others come from the ledger.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProofRejection {
    /// The window has not started yet.
    NotYetValid {
        /// Window start.
        not_before: u64,
        /// The time checked.
        now: u64,
    },
    /// The window is longer than [`MAX_PROOF_WINDOW_SECONDS`](privsvc_vault::MAX_PROOF_WINDOW_SECONDS): a proof meant to be replayed.
    WindowTooLong {
        /// `notAfter - notBefore` (saturating).
        seconds: u64,
    },
    /// The window has ended.
    Expired {
        /// Window end.
        not_after: u64,
        /// The time checked.
        now: u64,
    },
    /// The challenge is not the one issued.
    WrongChallenge,
    /// The proof is for another verifier.
    WrongVerifier(String),
    /// The proof's chain id is not the ledger's.
    WrongChain {
        /// Chain id in the proof.
        proof: u64,
        /// The ledger's chain id.
        ledger: u64,
    },
    /// The signature is malformed or does not recover to the claimed owner.
    BadSignature,
    /// The entity is not live on the ledger.
    EntityNotFound(B256),
    /// The entity's current owner is not the signer.
    NotOwner {
        /// The entity's owner on the ledger.
        owner: Address,
        /// The recovered signer.
        signer: Address,
    },
    /// The ledger could not be read.
    Ledger(String),
    /// The entity is not a valid privsvc record of the signer: bad envelope, or created at
    /// or after `(hour + 4) x 3600` (a copied envelope republished after its window).
    InvalidRecord(RejectReason),
}

impl From<ProofCheckError> for ProofRejection {
    fn from(e: ProofCheckError) -> Self {
        use ProofCheckError as C;
        match e {
            C::NotYetValid { not_before, now } => Self::NotYetValid { not_before, now },
            C::WindowTooLong { seconds } => Self::WindowTooLong { seconds },
            C::Expired { not_after, now } => Self::Expired { not_after, now },
            C::WrongChallenge => Self::WrongChallenge,
            C::WrongVerifier(v) => Self::WrongVerifier(v),
            C::WrongChain { proof, ledger } => Self::WrongChain { proof, ledger },
            C::BadSignature => Self::BadSignature,
        }
    }
}

impl fmt::Display for ProofRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ProofCheckError as C;
        // The ledger reasons are worded here, the ledger-free ones as privsvc-vault words them.
        let check = match self {
            Self::EntityNotFound(key) => {
                return write!(
                    f,
                    "entity {key} is not on the ledger (expired or never written)"
                )
            }
            Self::NotOwner { owner, signer } => {
                return write!(
                    f,
                    "the entity is owned by {owner}, not by the proof's signer {signer}"
                )
            }
            Self::Ledger(e) => return write!(f, "cannot read the ledger to check the owner: {e}"),
            Self::InvalidRecord(reason) => {
                return write!(
                    f,
                    "the entity is not a valid record of the signer: {reason}"
                )
            }
            &Self::NotYetValid { not_before, now } => C::NotYetValid { not_before, now },
            &Self::WindowTooLong { seconds } => C::WindowTooLong { seconds },
            &Self::Expired { not_after, now } => C::Expired { not_after, now },
            Self::WrongChallenge => C::WrongChallenge,
            Self::WrongVerifier(v) => C::WrongVerifier(v.clone()),
            &Self::WrongChain { proof, ledger } => C::WrongChain { proof, ledger },
            Self::BadSignature => C::BadSignature,
        };
        write!(f, "{check}")
    }
}

/// Checks a proof: time window, challenge, verifier, chain, signature, that the entity's current
/// owner on the ledger is the signer, and that the entity is a record that passes
/// [`crate::verify_record`] for that owner (its creation block timestamp included).
pub async fn verify_ownership_proof(
    proof: &OwnershipProof,
    expect: &ProofExpectation<'_>,
) -> Result<(), ProofRejection> {
    let now = expect.now.unwrap_or_else(unix_now);
    proof.check_terms(expect.challenge, expect.verifier, now)?;
    let ledger_chain = expect
        .reader
        .chain_id()
        .await
        .map_err(|e| ProofRejection::Ledger(e.to_string()))?;
    let signer = proof.check_signature(ledger_chain)?;
    let entity = expect
        .reader
        .entity(proof.body.entity_key, None)
        .await
        .map_err(|e| ProofRejection::Ledger(e.to_string()))?
        .ok_or(ProofRejection::EntityNotFound(proof.body.entity_key))?;
    let owner = entity
        .owner
        .ok_or_else(|| ProofRejection::Ledger("the ledger returned no owner".into()))?;
    if owner != signer {
        return Err(ProofRejection::NotOwner { owner, signer });
    }
    // A proof for a copy (an entity made by anyone with a copied envelope and transferred to
    // the owner) is refused: the record is the earliest entity with that owner and envelope.
    verify_record_on_ledger(
        &entity,
        &VerifyOptions {
            owner: Some(signer),
            ..VerifyOptions::default()
        },
        expect.reader,
    )
    .await
    .map_err(ProofRejection::InvalidRecord)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ledger-free reason keeps its variant and its privsvc-vault message.
    #[test]
    fn ledger_free_reasons_keep_variant_and_message() {
        let cases = [
            (
                ProofCheckError::NotYetValid {
                    not_before: 5,
                    now: 4,
                },
                ProofRejection::NotYetValid {
                    not_before: 5,
                    now: 4,
                },
            ),
            (
                ProofCheckError::WindowTooLong { seconds: 7_200 },
                ProofRejection::WindowTooLong { seconds: 7_200 },
            ),
            (
                ProofCheckError::Expired {
                    not_after: 5,
                    now: 6,
                },
                ProofRejection::Expired {
                    not_after: 5,
                    now: 6,
                },
            ),
            (
                ProofCheckError::WrongChallenge,
                ProofRejection::WrongChallenge,
            ),
            (
                ProofCheckError::WrongVerifier("a.example".into()),
                ProofRejection::WrongVerifier("a.example".into()),
            ),
            (
                ProofCheckError::WrongChain {
                    proof: 1,
                    ledger: 2,
                },
                ProofRejection::WrongChain {
                    proof: 1,
                    ledger: 2,
                },
            ),
            (ProofCheckError::BadSignature, ProofRejection::BadSignature),
        ];
        for (check, rejection) in cases {
            assert_eq!(rejection.to_string(), check.to_string());
            assert_eq!(ProofRejection::from(check), rejection);
        }
    }

    #[test]
    fn ledger_reasons_read_as_before() {
        let key = B256::repeat_byte(1);
        assert_eq!(
            ProofRejection::EntityNotFound(key).to_string(),
            format!("entity {key} is not on the ledger (expired or never written)")
        );
        assert_eq!(
            ProofRejection::Ledger("timeout".into()).to_string(),
            "cannot read the ledger to check the owner: timeout"
        );
        let (owner, signer) = (Address::repeat_byte(2), Address::repeat_byte(3));
        assert_eq!(
            ProofRejection::NotOwner { owner, signer }.to_string(),
            format!("the entity is owned by {owner}, not by the proof's signer {signer}")
        );
    }

    #[test]
    fn signing_errors_keep_their_client_variants() {
        let long = sign_error(ProofSignError::TtlTooLong(7_200));
        assert!(matches!(long, PrivsvcError::Config(_)));
        assert_eq!(
            long.to_string(),
            "invalid client configuration: an ownership proof is valid at most 3600 s, 7200 s \
             asked; ask the verifier for a fresh challenge instead of a long-lived proof"
        );
        let bad = sign_error(ProofSignError::BadSignature);
        assert_eq!(
            bad.to_string(),
            "ownership proof: the vault produced a high-s or malformed proof signature; use a \
             low-s signer"
        );
        let source = std::error::Error::source(&bad).expect("the vault's error is the source");
        assert!(source.is::<ProofSignError>());
    }
}
