//! The real stack: privsvc-ledger's `RpcWriter` / `RpcLedger` against the devnet over HTTP.

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::{Address, B256};
use k256::ecdsa::SigningKey;
use privsvc_devnet::{BlockTime, DevSigner, Devnet, DevnetConfig, DevnetHandle, DEV_PRIVATE_KEYS};
use privsvc_ledger::{
    query_all, ArkivValue, Attribute, Create, CreationFlags, LedgerError, LedgerReader,
    LedgerWriter, Operation, QueryOptions, RpcLedger, RpcWriter, Select,
};

fn secret(i: usize) -> SigningKey {
    let raw = hex::decode(DEV_PRIVATE_KEYS[i].trim_start_matches("0x")).unwrap();
    SigningKey::from_slice(&raw).unwrap()
}

fn writer(node: &DevnetHandle, i: usize) -> RpcWriter {
    RpcWriter::new(
        RpcLedger::new(node.url()).unwrap(),
        secret(i),
        node.chain_id(),
    )
}

fn attr(name: &str, v: &str) -> Attribute {
    Attribute {
        name: name.into(),
        value: ArkivValue::Str(v.into()),
    }
}

fn create(salt: u128, min_lifetime: u64, project: &str, tag: &str) -> Operation {
    Operation::Create(Create {
        salt,
        expires_at: 0,
        min_lifetime,
        flags: CreationFlags::default(),
        content_type: "application/octet-stream".into(),
        payload: format!("payload-{salt}").into_bytes(),
        attributes: vec![attr("project", project), attr("tag", tag)],
    })
}

/// Every field and attribute except the attribute schema.
fn all_fields() -> Select {
    Select {
        attribute_schema: false,
        ..privsvc_ledger::select_all()
    }
}

async fn on_demand(db: Option<std::path::PathBuf>) -> DevnetHandle {
    let mut config = DevnetConfig::on_demand();
    config.db_path = db;
    Devnet::start(config).await.unwrap()
}

#[tokio::test]
async fn batch_of_creates_and_transfers_then_history_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.sqlite");
    let node = on_demand(Some(db.clone())).await;
    let relayer = writer(&node, 0);
    let owners: Vec<Address> = (1..4).map(|i| DevSigner::dev(i).address()).collect();
    let salts = [11u128, 12, 13];
    let keys = relayer.predict_keys(&salts).await.unwrap();
    let mut ops: Vec<Operation> = salts
        .iter()
        .map(|s| create(*s, 1000, "privsvc-test", "v1"))
        .collect();
    ops.extend(keys.iter().zip(&owners).map(|(k, o)| Operation::Transfer {
        key: *k,
        new_owner: *o,
    }));
    let receipt = relayer.execute(&ops).await.unwrap();
    assert!(receipt.success);
    assert_eq!(
        receipt.created.iter().map(|c| c.key).collect::<Vec<_>>(),
        keys
    );
    assert_eq!(receipt.transfers.len(), 3);
    for (t, o) in receipt.transfers.iter().zip(&owners) {
        assert_eq!((t.from, t.to), (relayer.address(), *o));
    }
    let reader = RpcLedger::new(node.url()).unwrap();
    for (k, o) in keys.iter().zip(&owners) {
        let e = reader.entity(*k, None).await.unwrap().expect("live");
        assert_eq!(e.owner, Some(*o), "owner is the new owner");
        assert_eq!(e.creator, Some(relayer.address()), "creator is the sender");
        assert_eq!(e.created_at, Some(receipt.block_number));
    }
    // Historical reads: the new owner patches its entity; the old block still shows v1.
    let owner1 = writer(&node, 1);
    let r = owner1
        .execute(&[Operation::Patch {
            key: keys[0],
            mutations: vec![("tag".into(), Some(ArkivValue::Str("v2".into())))],
        }])
        .await
        .unwrap();
    assert!(r.success);
    let now = reader.entity(keys[0], None).await.unwrap().unwrap();
    let then = reader
        .entity(keys[0], Some(receipt.block_number))
        .await
        .unwrap()
        .unwrap();
    let tag = |e: &privsvc_ledger::Entity| {
        e.attributes
            .as_ref()
            .unwrap()
            .iter()
            .find(|a| a.name == "tag")
            .unwrap()
            .value
            .clone()
    };
    assert_eq!(tag(&now), ArkivValue::Str("v2".into()));
    assert_eq!(tag(&then), ArkivValue::Str("v1".into()));
    let mut at = QueryOptions::new(all_fields());
    at.at_block = Some(receipt.block_number);
    at.limit = Some(10);
    let page = reader.query("tag = str('v1')", &at).await.unwrap();
    assert_eq!(page.entities.len(), 3);
    let mut head = at.clone();
    head.at_block = None;
    let page = reader.query("tag = str('v1')", &head).await.unwrap();
    assert_eq!(page.entities.len(), 2);
    // The relayer lost its rights: patching reverts with the decoded error at prepare time.
    let err = relayer
        .execute(&[Operation::Patch {
            key: keys[1],
            mutations: vec![("tag".into(), None)],
        }])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LedgerError::Reverted(r) if r.reason().starts_with("NotOwner(")),
        "{err:?}"
    );
    let head = reader.block_number().await.unwrap();
    node.shutdown().await;

    // Restart on the same file: everything is still there.
    let node = on_demand(Some(db)).await;
    let reader = RpcLedger::new(node.url()).unwrap();
    assert_eq!(reader.block_number().await.unwrap(), head);
    let e = reader.entity(keys[2], None).await.unwrap().unwrap();
    assert_eq!(e.owner, Some(owners[2]));
    assert_eq!(
        reader
            .entity_nonce(DevSigner::dev(0).address())
            .await
            .unwrap(),
        3
    );
    node.shutdown().await;
}

#[tokio::test]
async fn pagination_across_450_entities() {
    let node = on_demand(None).await;
    let w = writer(&node, 0);
    for b in 0..3u128 {
        let ops: Vec<Operation> = (0..150)
            .map(|i| create(b * 1000 + i, 1000, "page", &format!("t{i}")))
            .collect();
        assert!(w.execute(&ops).await.unwrap().success);
    }
    let reader = RpcLedger::new(node.url()).unwrap();
    let all = query_all(&reader, "project = str('page')", &all_fields(), None)
        .await
        .unwrap();
    assert_eq!(all.len(), 450);
    let mut keys: Vec<B256> = all.iter().map(|e| e.key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 450, "no duplicates across pages");
    // Page by page: 200 + 200 + 50, cursors pinned to the first page's block, even while new
    // blocks arrive in between.
    let mut opts = QueryOptions::new(all_fields());
    opts.limit = Some(200);
    let mut sizes = Vec::new();
    loop {
        let page = reader.query("project = str('page')", &opts).await.unwrap();
        sizes.push(page.entities.len());
        node.mine().unwrap();
        match page.cursor {
            Some(c) => {
                opts.at_block = Some(page.block_number);
                opts.cursor = Some(c);
            }
            None => break,
        }
    }
    assert_eq!(sizes, vec![200, 200, 50]);
    node.shutdown().await;
}

#[tokio::test]
async fn expiry_after_the_right_number_of_blocks() {
    let node = on_demand(None).await;
    let w = writer(&node, 0);
    let r = w.execute(&[create(1, 4, "exp", "x")]).await.unwrap();
    let created = &r.created[0];
    assert_eq!(created.expires_at, r.block_number + 4);
    let reader = RpcLedger::new(node.url()).unwrap();
    while node.block_number() < created.expires_at - 1 {
        assert!(reader.entity(created.key, None).await.unwrap().is_some());
        node.mine().unwrap();
    }
    assert!(
        reader.entity(created.key, None).await.unwrap().is_some(),
        "live at expiresAt - 1"
    );
    node.mine().unwrap();
    assert!(
        reader.entity(created.key, None).await.unwrap().is_none(),
        "gone at expiresAt"
    );
    let page = reader
        .query("project = str('exp')", &QueryOptions::default())
        .await
        .unwrap();
    assert!(page.entities.is_empty());
    node.shutdown().await;
}

#[tokio::test]
async fn reverted_batch_reports_the_decoded_error() {
    let node = on_demand(None).await;
    let w = writer(&node, 0);
    let r = w.execute(&[create(1, 100, "rev", "x")]).await.unwrap();
    let key = r.created[0].key;
    // Two deletes of the same key signed up front: both simulate fine, the second reverts
    // on chain (status 0) and the writer decodes why.
    let first = w.prepare(&[Operation::Delete { key }], None).await.unwrap();
    let second = w
        .prepare(&[Operation::Delete { key }], Some(first.nonce + 1))
        .await
        .unwrap();
    w.broadcast(&first).await.unwrap();
    w.broadcast(&second).await.unwrap();
    let ok = w
        .wait_receipt(first.hash, Duration::from_secs(10))
        .await
        .unwrap();
    let bad = w
        .wait_receipt(second.hash, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(ok.success);
    assert!(!bad.success);
    let reason = bad.revert_reason.unwrap();
    assert!(reason.contains("EntityNotFound"), "{reason}");
    // A bad batch is refused before sending with the decoded error.
    let err = w
        .execute(&[Operation::Transfer {
            key: B256::repeat_byte(7),
            new_owner: Address::repeat_byte(1),
        }])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LedgerError::Reverted(r) if r.reason().starts_with("EntityNotFound(")),
        "{err:?}"
    );
    node.shutdown().await;
}

#[tokio::test]
async fn two_writers_racing_for_nonces() {
    let mut config = DevnetConfig::default();
    config.block_time = BlockTime::Interval(Duration::from_millis(100));
    let node = Devnet::start(config).await.unwrap();
    let a = Arc::new(writer(&node, 4));
    let b = Arc::new(writer(&node, 4));
    let (opa, opb) = ([create(1, 100, "race", "a")], [create(2, 100, "race", "b")]);
    // Both read the same pending nonce before either broadcasts: a guaranteed conflict.
    let (pa, pb) = tokio::join!(a.prepare(&opa, None), b.prepare(&opb, None));
    let (pa, pb) = (pa.unwrap(), pb.unwrap());
    assert_eq!(pa.nonce, pb.nonce);
    let (ba, bb) = tokio::join!(a.broadcast(&pa), b.broadcast(&pb));
    let mut done = 0;
    for (w, r, tx, salt) in [(&a, ba, &pa, 1u128), (&b, bb, &pb, 2u128)] {
        match r {
            Ok(()) => {
                let rec = w
                    .wait_receipt(tx.hash, Duration::from_secs(10))
                    .await
                    .unwrap();
                assert!(rec.success);
                done += 1;
            }
            // Only a nonce conflict may fail, read from the devnet's words into its type.
            Err(LedgerError::NonceTooLow { .. } | LedgerError::ReplacementUnderpriced { .. }) => {
                // The loser retries with a fresh pending nonce.
                let rec = w
                    .execute(&[create(salt + 10, 100, "race", "retry")])
                    .await
                    .unwrap();
                assert!(rec.success);
                done += 10;
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert_eq!(
        done, 11,
        "exactly one writer won the nonce, the other retried"
    );
    // Free-running race: whatever interleaving happens, every write lands exactly once.
    let (opc, opd) = ([create(3, 100, "race", "c")], [create(4, 100, "race", "d")]);
    let (rc, rd) = tokio::join!(a.execute(&opc), b.execute(&opd));
    for (w, r, salt) in [(&a, rc, 3u128), (&b, rd, 4u128)] {
        match r {
            Ok(rec) => assert!(rec.success),
            Err(LedgerError::NonceTooLow { .. } | LedgerError::ReplacementUnderpriced { .. }) => {
                assert!(
                    w.execute(&[create(salt + 10, 100, "race", "retry")])
                        .await
                        .unwrap()
                        .success
                );
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    let reader = RpcLedger::new(node.url()).unwrap();
    let page = reader
        .query("project = str('race')", &QueryOptions::default())
        .await
        .unwrap();
    assert_eq!(page.entities.len(), 4, "every write landed once");
    assert_eq!(node.account(a.address()).nonce, 4);
    node.shutdown().await;
}
