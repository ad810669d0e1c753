//! Ownership proofs: signed by the vault, checked by our verifier and by alloy's independent
//! EIP-712 implementations (dynamic `TypedData` and static `sol!` structs).

use std::sync::Mutex;

use alloy_primitives::{Address, B256, U256};
use alloy_sol_types::{eip712_domain, sol, SolStruct};
use async_trait::async_trait;
use privsvc_attributes::Attributes;
use privsvc_client::RejectReason;
use privsvc_client::{
    proof_typed_data, sign_ownership_proof, verify_ownership_proof, ProofExpectation, ProofParams,
    ProofRejection,
};
use privsvc_envelope::{hour_of, EnvelopeBody};
use privsvc_ledger::{
    ArkivValue, Attribute, Entity, LedgerError, LedgerReader, QueryOptions, QueryPage,
};
use privsvc_vault::{KeyVault, Vault, NETWORK_CHAIN_ID};

sol! {
    struct OwnershipProof {
        bytes32 entityKey;
        string challenge;
        string verifier;
        uint64 notBefore;
        uint64 notAfter;
    }
}

/// A ledger holding one record entity with a settable owner and creation block timestamp (only
/// what the verifier reads).
struct OneEntity {
    key: B256,
    owner: Mutex<Option<Address>>,
    /// The sealed envelope and its attributes.
    payload: Vec<u8>,
    attributes: Vec<Attribute>,
    /// Timestamp of the creation block (block 10).
    created: Mutex<u64>,
    /// The owner also holds an earlier entity with the same envelope: this one is a copy.
    earlier_copy: Mutex<bool>,
}

#[async_trait]
impl LedgerReader for OneEntity {
    async fn chain_id(&self) -> Result<u64, LedgerError> {
        Ok(NETWORK_CHAIN_ID)
    }
    async fn block_number(&self) -> Result<u64, LedgerError> {
        Ok(1)
    }
    /// A verifier asks for the owner's entities: the one entity, and with `earlier_copy` an
    /// entity created before it with the same envelope (the record it copies).
    async fn query(&self, _: &str, _: &QueryOptions) -> Result<QueryPage, LedgerError> {
        let mut entities: Vec<Entity> = self.entity(self.key, None).await?.into_iter().collect();
        if *self.earlier_copy.lock().unwrap() {
            entities.push(Entity {
                key: B256::repeat_byte(0xee),
                created_at: Some(5),
                ..entities[0].clone()
            });
        }
        Ok(QueryPage {
            entities,
            block_number: 10,
            cursor: None,
        })
    }
    async fn entity(&self, key: B256, _: Option<u64>) -> Result<Option<Entity>, LedgerError> {
        let owner = *self.owner.lock().unwrap();
        Ok((key == self.key).then_some(()).and(owner).map(|o| Entity {
            key,
            owner: Some(o),
            creator: Some(Address::repeat_byte(0x42)),
            created_at: Some(10),
            payload: Some(self.payload.clone()),
            attributes: Some(self.attributes.clone()),
            ..Entity::default()
        }))
    }
    async fn block_timestamp(&self, block: u64) -> Result<Option<u64>, LedgerError> {
        Ok((block == 10).then(|| *self.created.lock().unwrap()))
    }
    async fn code_at(&self, _: Address) -> Result<Vec<u8>, LedgerError> {
        Ok(Vec::new())
    }
    async fn entity_nonce(&self, _: Address) -> Result<u64, LedgerError> {
        Ok(0)
    }
    async fn balance(&self, _: Address) -> Result<U256, LedgerError> {
        Ok(U256::ZERO)
    }
}

const NOW: u64 = 1_800_000_000;

async fn signed() -> (KeyVault, privsvc_client::OwnershipProof, OneEntity) {
    let (vault, _code) = KeyVault::random("notes");
    let record = vault.new_record();
    let key = B256::repeat_byte(0xab);
    let proof = sign_ownership_proof(
        &vault,
        &record,
        &ProofParams {
            entity_key: key,
            challenge: "nonce-123".into(),
            verifier: "shop.example".into(),
            ttl_seconds: None,
            chain_id: None,
            now: Some(NOW),
        },
    )
    .await
    .unwrap();
    let owner = Vault::address_of(&vault, &record).await.unwrap();
    assert_eq!(proof.owner, owner);
    let mut attrs = Attributes::new();
    attrs.insert("project", "notes").unwrap();
    let body = EnvelopeBody {
        app: "notes".into(),
        exp: 3600,
        hour: hour_of(NOW),
        ct: "text/plain".into(),
        enc: false,
        types: attrs.types(),
        data: b"hello".to_vec(),
    };
    let sealed = Vault::sign_envelope(&vault, &record, &body, &attrs)
        .await
        .unwrap();
    let ledger = OneEntity {
        key,
        owner: Mutex::new(Some(owner)),
        payload: sealed.into_bytes(),
        attributes: vec![Attribute {
            name: "project".into(),
            value: ArkivValue::Str("notes".into()),
        }],
        created: Mutex::new(NOW),
        earlier_copy: Mutex::new(false),
    };
    (vault, proof, ledger)
}

#[tokio::test]
async fn proof_round_trip_and_window() {
    let (_vault, proof, ledger) = signed().await;
    assert_eq!(proof.body.not_after - proof.body.not_before, 300);
    let expect = |now| ProofExpectation {
        challenge: "nonce-123",
        verifier: "shop.example",
        reader: &ledger,
        now: Some(now),
    };
    verify_ownership_proof(&proof, &expect(NOW + 10))
        .await
        .unwrap();
    assert!(matches!(
        verify_ownership_proof(&proof, &expect(NOW + 301)).await,
        Err(ProofRejection::Expired { .. })
    ));
    // A proof for a copy (the owner holds an earlier entity with the same envelope: someone
    // created this one from a copied envelope and transferred it) is refused.
    *ledger.earlier_copy.lock().unwrap() = true;
    let copy = verify_ownership_proof(&proof, &expect(NOW + 10)).await;
    assert!(
        matches!(
            copy,
            Err(ProofRejection::InvalidRecord(
                privsvc_client::RejectReason::Copy { .. }
            ))
        ),
        "{copy:?}"
    );
    *ledger.earlier_copy.lock().unwrap() = false;
    assert!(matches!(
        verify_ownership_proof(&proof, &expect(NOW - 1)).await,
        Err(ProofRejection::NotYetValid { .. })
    ));
    let other_challenge = ProofExpectation {
        challenge: "nonce-999",
        ..expect(NOW)
    };
    assert_eq!(
        verify_ownership_proof(&proof, &other_challenge).await,
        Err(ProofRejection::WrongChallenge)
    );
    let other_verifier = ProofExpectation {
        verifier: "evil.example",
        ..expect(NOW)
    };
    assert!(matches!(
        verify_ownership_proof(&proof, &other_verifier).await,
        Err(ProofRejection::WrongVerifier(_))
    ));

    // JSON round trip keeps it valid; a changed field breaks the signature.
    let json = serde_json::to_string(&proof).unwrap();
    assert!(json.contains("\"entityKey\"") && json.contains("\"notAfter\""));
    let back: privsvc_client::OwnershipProof = serde_json::from_str(&json).unwrap();
    verify_ownership_proof(&back, &expect(NOW)).await.unwrap();
    let mut forged = back.clone();
    forged.body.not_after += 60;
    assert_eq!(
        verify_ownership_proof(&forged, &expect(NOW)).await,
        Err(ProofRejection::BadSignature)
    );

    // The same envelope republished (by a rogue relayer) after its window: the entity's
    // creation block is at (hour + 4) x 3600, so the proof is refused although every
    // signature is genuine.
    let deadline = (hour_of(NOW) + 4) * 3600;
    *ledger.created.lock().unwrap() = deadline - 1;
    verify_ownership_proof(&proof, &expect(NOW)).await.unwrap();
    *ledger.created.lock().unwrap() = deadline;
    assert_eq!(
        verify_ownership_proof(&proof, &expect(NOW)).await,
        Err(ProofRejection::InvalidRecord(RejectReason::Republished {
            hour: hour_of(NOW),
            created: deadline,
            deadline
        }))
    );
    *ledger.created.lock().unwrap() = NOW;

    // Ownership moved on the ledger: the proof no longer holds.
    let new_owner = Address::repeat_byte(5);
    *ledger.owner.lock().unwrap() = Some(new_owner);
    assert!(matches!(
        verify_ownership_proof(&proof, &expect(NOW)).await,
        Err(ProofRejection::NotOwner { owner, .. }) if owner == new_owner
    ));
    *ledger.owner.lock().unwrap() = None;
    assert!(matches!(
        verify_ownership_proof(&proof, &expect(NOW)).await,
        Err(ProofRejection::EntityNotFound(_))
    ));
}

#[tokio::test]
async fn alloy_eip712_recovers_the_owner() {
    let (_vault, proof, _ledger) = signed().await;
    let sig_bytes = hex::decode(proof.signature.trim_start_matches("0x")).unwrap();
    assert_eq!(sig_bytes.len(), 65);
    assert!(sig_bytes[64] == 27 || sig_bytes[64] == 28);
    let sig = alloy_primitives::Signature::try_from(&sig_bytes[..]).unwrap();

    // 1. alloy-dyn-abi TypedData, built from the JSON our proof_typed_data produces, re-parsed
    //    as a wallet would receive it (eth_signTypedData_v4 JSON).
    let td_json = serde_json::to_value(proof_typed_data(&proof.body, None)).unwrap();
    let td: alloy_dyn_abi::TypedData = serde_json::from_value(td_json).unwrap();
    let h1 = td.eip712_signing_hash().unwrap();
    assert_eq!(sig.recover_address_from_prehash(&h1).unwrap(), proof.owner);

    // 2. alloy-sol-types static struct and domain: no privsvc code involved.
    let domain = eip712_domain! {
        name: "privsvc",
        version: "1",
        chain_id: NETWORK_CHAIN_ID,
    };
    let s = OwnershipProof {
        entityKey: proof.body.entity_key,
        challenge: proof.body.challenge.clone(),
        verifier: proof.body.verifier.clone(),
        notBefore: proof.body.not_before,
        notAfter: proof.body.not_after,
    };
    assert_eq!(
        s.eip712_type_hash(),
        alloy_primitives::keccak256(
            "OwnershipProof(bytes32 entityKey,string challenge,string verifier,uint64 notBefore,uint64 notAfter)"
        )
    );
    let h2 = s.eip712_signing_hash(&domain);
    assert_eq!(h1, h2);
    assert_eq!(sig.recover_address_from_prehash(&h2).unwrap(), proof.owner);
}
