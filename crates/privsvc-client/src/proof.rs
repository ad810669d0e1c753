//! Ownership proofs (DESIGN 8): an EIP-712 `OwnershipProof` signed by a record's owner key, and
//! its verification against the ledger.

use privsvc_rt::{SystemTime, UNIX_EPOCH};

use alloy_primitives::{Address, Signature, B256};
use privsvc_ledger::LedgerReader;
use privsvc_vault::{proof_signer, RecordRef, Vault};
use serde::{Deserialize, Serialize};

pub use privsvc_vault::{proof_signing_hash, proof_typed_data, OwnershipProofBody};

use crate::error::PrivsvcError;
use crate::options::DEFAULT_PROOF_TTL_SECONDS;
use crate::verify::{creation_timestamp, verify_record, RejectReason, VerifyOptions};

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

/// Encodes a signature as `0x` + r || s || v with v in {27, 28}.
pub fn signature_hex(sig: &Signature) -> String {
    let mut bytes = [0u8; 65];
    bytes[..32].copy_from_slice(&sig.r().to_be_bytes::<32>());
    bytes[32..64].copy_from_slice(&sig.s().to_be_bytes::<32>());
    bytes[64] = 27 + u8::from(sig.v());
    format!("0x{}", hex::encode(bytes))
}

/// The longest validity window of an ownership proof (`notAfter - notBefore`), seconds.
pub const MAX_PROOF_WINDOW_SECONDS: u64 = 3_600;

/// Decodes `0x` + 130 lowercase hex into a signature, as envelopes are: r and s valid, s low
/// (at most n/2), v 27 or 28. Anything else (v 0/1, high s, upper case) is `None`.
pub fn parse_signature(text: &str) -> Option<Signature> {
    let bytes = privsvc_envelope::parse_signature(text).ok()?;
    Some(Signature::from_bytes_and_parity(
        &bytes[..64],
        bytes[64] == 28,
    ))
}

/// Low-level proof signing with the owner key of `record` in `vault`.
pub async fn sign_ownership_proof(
    vault: &dyn Vault,
    record: &RecordRef,
    params: &ProofParams,
) -> Result<OwnershipProof, PrivsvcError> {
    let now = params.now.unwrap_or_else(unix_now);
    let ttl = params.ttl_seconds.unwrap_or(DEFAULT_PROOF_TTL_SECONDS);
    if ttl > MAX_PROOF_WINDOW_SECONDS {
        return Err(PrivsvcError::Config(format!(
            "an ownership proof is valid at most {MAX_PROOF_WINDOW_SECONDS} s, {ttl} s asked; \
             ask the verifier for a fresh challenge instead of a long-lived proof"
        )));
    }
    let chain_id = params.chain_id.unwrap_or(privsvc_vault::NETWORK_CHAIN_ID);
    let body = OwnershipProofBody {
        entity_key: params.entity_key,
        challenge: params.challenge.clone(),
        verifier: params.verifier.clone(),
        not_before: now,
        not_after: now.saturating_add(ttl),
    };
    let signature = vault
        .sign_proof_on_chain(record, &body, Some(chain_id))
        .await?;
    let owner = vault.address_of(record).await?;
    let signature = signature_hex(&signature);
    // Refuse to hand out what a verifier must refuse (a high-s signature from a faulty vault).
    if parse_signature(&signature).is_none() {
        return Err(PrivsvcError::Envelope(
            "the vault produced a high-s or malformed proof signature; use a low-s signer".into(),
        ));
    }
    Ok(OwnershipProof {
        body,
        chain_id,
        owner,
        signature,
    })
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

/// Why a proof was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofRejection {
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
    /// The entity is not live on the ledger.
    #[error("entity {0} is not on the ledger (expired or never written)")]
    EntityNotFound(B256),
    /// The entity's current owner is not the signer.
    #[error("the entity is owned by {owner}, not by the proof's signer {signer}")]
    NotOwner {
        /// The entity's owner on the ledger.
        owner: Address,
        /// The recovered signer.
        signer: Address,
    },
    /// The ledger could not be read.
    #[error("cannot read the ledger to check the owner: {0}")]
    Ledger(String),
    /// The entity is not a valid privsvc record of the signer: bad envelope, or created at
    /// or after `(hour + 4) x 3600` (a copied envelope republished after its window).
    #[error("the entity is not a valid record of the signer: {0}")]
    InvalidRecord(RejectReason),
}

/// Checks a proof: time window, challenge, verifier, chain, signature, that the entity's current
/// owner on the ledger is the signer, and that the entity is a record that passes
/// [`verify_record`] for that owner (its creation block timestamp included).
pub async fn verify_ownership_proof(
    proof: &OwnershipProof,
    expect: &ProofExpectation<'_>,
) -> Result<(), ProofRejection> {
    let now = expect.now.unwrap_or_else(unix_now);
    let b = &proof.body;
    let window = b.not_after.saturating_sub(b.not_before);
    if window > MAX_PROOF_WINDOW_SECONDS {
        return Err(ProofRejection::WindowTooLong { seconds: window });
    }
    if now < b.not_before {
        return Err(ProofRejection::NotYetValid {
            not_before: b.not_before,
            now,
        });
    }
    if now > b.not_after {
        return Err(ProofRejection::Expired {
            not_after: b.not_after,
            now,
        });
    }
    if b.challenge != expect.challenge {
        return Err(ProofRejection::WrongChallenge);
    }
    if b.verifier != expect.verifier {
        return Err(ProofRejection::WrongVerifier(b.verifier.clone()));
    }
    let ledger_chain = expect
        .reader
        .chain_id()
        .await
        .map_err(|e| ProofRejection::Ledger(e.to_string()))?;
    if ledger_chain != proof.chain_id {
        return Err(ProofRejection::WrongChain {
            proof: proof.chain_id,
            ledger: ledger_chain,
        });
    }
    let signature = parse_signature(&proof.signature).ok_or(ProofRejection::BadSignature)?;
    let signer = proof_signer(b, Some(proof.chain_id), &signature)
        .map_err(|_| ProofRejection::BadSignature)?;
    if signer != proof.owner {
        return Err(ProofRejection::BadSignature);
    }
    let entity = expect
        .reader
        .entity(b.entity_key, None)
        .await
        .map_err(|e| ProofRejection::Ledger(e.to_string()))?
        .ok_or(ProofRejection::EntityNotFound(b.entity_key))?;
    let owner = entity
        .owner
        .ok_or_else(|| ProofRejection::Ledger("the ledger returned no owner".into()))?;
    if owner != signer {
        return Err(ProofRejection::NotOwner { owner, signer });
    }
    let created_timestamp = creation_timestamp(expect.reader, &entity)
        .await
        .map_err(|e| ProofRejection::Ledger(e.to_string()))?;
    verify_record(
        &entity,
        &VerifyOptions {
            owner: Some(signer),
            created_timestamp,
            ..VerifyOptions::default()
        },
    )
    .map_err(ProofRejection::InvalidRecord)?;
    Ok(())
}
