//! Adversary: an onlooker copies one of Alice's sealed envelopes and, once Alice's record has
//! expired, has it published again by a relayer gone rogue (written straight to the devnet with
//! the relayer's own account, then handed to the envelope's owner, exactly as a batch does).
//! Every signature on the copy is genuine; only the envelope's `hour` gives it away.
//!
//! Envelope v2 (docs/PROTOCOL.md §3): verifiers refuse an entity created at or after (hour + 4) x
//! 3600. Real devnet, real relayers, real client. Before v2 (no `hour`, no rule), the stale copy
//! verified, showed in `my_entities` and backed an ownership proof like a fresh record.

use alloy_primitives::{Address, B256};
use privsvc_attributes::Attributes;
use privsvc_client::unix_now;
use privsvc_client::{
    creation_timestamp, sign_ownership_proof, verify_ownership_proof, verify_record, EntitiesQuery,
    PrivateClient, PrivsvcError, ProofExpectation, ProofParams, ProofRejection, ProveParams,
    RejectReason, VerifyOptions,
};
use privsvc_envelope::{hour_of, EnvelopeBody};
use privsvc_ledger::{LedgerWriter, Operation};
use privsvc_vault::{tag_to_text, RecordRef};

use crate::common::{self, Stack, StackOptions};

/// A record of `client` sealed (as the client seals) with the given `hour`.
async fn seal_at(client: &PrivateClient, hour: u64) -> (RecordRef, Address, String, Attributes) {
    let vault = client.vault();
    let record = vault.new_record();
    let owner = vault.address_of(&record).await.unwrap();
    let tag = vault.make_tag(&record).await.unwrap();
    let mut attrs = Attributes::new();
    attrs.insert("project", client.project()).unwrap();
    attrs.insert("tag", tag_to_text(&tag)).unwrap();
    attrs.insert("kind", "note").unwrap();
    let body = EnvelopeBody {
        app: client.app().into(),
        exp: 3600,
        hour,
        ct: "text/plain".into(),
        enc: false,
        types: attrs.types(),
        data: format!("sealed in hour {hour}").into_bytes(),
    };
    let envelope = vault.sign_envelope(&record, &body, &attrs).await.unwrap();
    (record, owner, envelope, attrs)
}

/// What a rogue relayer does with a copied envelope: create the record entity with its own
/// account (relayer A's, a trusted creator) and transfer it to the envelope's owner.
async fn rogue_publish(
    writer: &dyn LedgerWriter,
    envelope: &str,
    attrs: &Attributes,
    owner: Address,
) -> B256 {
    let create =
        privsvc_ledger::record_create(attrs, envelope.as_bytes(), 3600, rand::random()).unwrap();
    let receipt = writer.execute(&[Operation::Create(create)]).await.unwrap();
    assert!(receipt.success);
    let key = receipt.created[0].key;
    let receipt = writer
        .execute(&[Operation::Transfer {
            key,
            new_owner: owner,
        }])
        .await
        .unwrap();
    assert!(receipt.success);
    key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_copy_written_by_a_rogue_relayer_is_rejected_by_every_verifier() {
    let stack = Stack::start(StackOptions::plain()).await;
    let (_wallet, alice) = stack.client().await;
    let rogue = common::writer(stack.node(), 0);
    assert!(alice
        .relayer_addresses()
        .contains(&privsvc_devnet::DevSigner::dev(0).address()));
    let now_hour = hour_of(unix_now());

    // Sealed 5 hours ago (the record, 1 h, expired long since) and copied; sealed now.
    let (stale_ref, stale_owner, stale_env, stale_attrs) = seal_at(&alice, now_hour - 5).await;
    let (fresh_ref, fresh_owner, fresh_env, fresh_attrs) = seal_at(&alice, now_hour).await;
    let stale = rogue_publish(rogue.as_ref(), &stale_env, &stale_attrs, stale_owner).await;
    let fresh = rogue_publish(rogue.as_ref(), &fresh_env, &fresh_attrs, fresh_owner).await;

    // verify_record, with the creation block's timestamp from the ledger.
    let trusted = alice.relayer_addresses();
    for (key, owner, hour) in [
        (stale, stale_owner, now_hour - 5),
        (fresh, fresh_owner, now_hour),
    ] {
        let entity = stack.reader.entity(key, None).await.unwrap().unwrap();
        assert_eq!(entity.owner, Some(owner));
        let created = creation_timestamp(stack.reader.as_ref(), &entity)
            .await
            .unwrap()
            .expect("the creation block exists");
        assert!(
            created.abs_diff(unix_now()) < 600,
            "devnet clock: {created}"
        );
        let verdict = verify_record(
            &entity,
            &VerifyOptions {
                app: Some(alice.app()),
                relayers: Some(&trusted),
                owner: Some(owner),
                created_timestamp: Some(created),
            },
        );
        if key == stale {
            assert_eq!(
                verdict.unwrap_err(),
                RejectReason::Republished {
                    hour,
                    created,
                    deadline: (hour + 4) * 3600
                }
            );
        } else {
            assert_eq!(verdict.expect("the fresh record verifies").body.hour, hour);
        }
    }

    // my_entities: the fresh record is Alice's, the stale copy is not (and is counted as
    // rejected: its tag opened, so the scan looked at it and refused it).
    common::settle(stack.node());
    let mine = alice
        .my_entities(&EntitiesQuery::new().refresh())
        .await
        .unwrap();
    let keys: Vec<B256> = mine.iter().map(|r| r.entity_key).collect();
    assert_eq!(keys, vec![fresh], "{mine:?}");
    let scan = alice.last_scan().await.unwrap();
    assert_eq!((scan.matched, scan.rejected), (2, 1), "{scan:?}");

    // Ownership proofs: signed by the genuine owner key in both cases; the verifier refuses the
    // stale copy.
    let expect = ProofExpectation {
        challenge: "c-1",
        verifier: "shop.example",
        reader: stack.reader.as_ref(),
        now: None,
    };
    for (key, record, hour) in [
        (stale, stale_ref, now_hour - 5),
        (fresh, fresh_ref, now_hour),
    ] {
        let proof = sign_ownership_proof(
            alice.vault().as_ref(),
            &record,
            &ProofParams {
                entity_key: key,
                challenge: "c-1".into(),
                verifier: "shop.example".into(),
                ttl_seconds: None,
                chain_id: Some(alice.chain_id()),
                now: None,
            },
        )
        .await
        .unwrap();
        let verdict = verify_ownership_proof(&proof, &expect).await;
        if key == stale {
            assert!(
                matches!(
                    verdict,
                    Err(ProofRejection::InvalidRecord(RejectReason::Republished { hour: h, .. }))
                        if h == hour
                ),
                "{verdict:?}"
            );
        } else {
            verdict.expect("a proof for the fresh record verifies");
        }
    }
    // The client itself will not prove ownership of the stale copy: it is not among its records.
    let params = ProveParams {
        challenge: "c-2".into(),
        verifier: "shop.example".into(),
        ttl_seconds: None,
    };
    assert!(matches!(
        alice.prove_ownership(stale, &params).await,
        Err(PrivsvcError::UnknownRecord { .. })
    ));
    let proof = alice.prove_ownership(fresh, &params).await.unwrap();
    verify_ownership_proof(
        &proof,
        &ProofExpectation {
            challenge: "c-2",
            ..expect
        },
    )
    .await
    .unwrap();

    stack.shutdown().await;
}
