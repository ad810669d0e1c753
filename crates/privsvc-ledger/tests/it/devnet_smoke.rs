//! RpcLedger and RpcWriter against the real embedded node (privsvc-devnet): a batch of creates
//! plus transfers to other owners with predicted keys, read-back, pagination pinned to a block,
//! a revert decoded at estimation, and a status-0 receipt with its re-simulated reason.

use std::time::Duration;

use alloy_consensus::TxEip1559;
use alloy_primitives::{Address, TxKind, B256, U256};
use privsvc_devnet::{Devnet, DevnetConfig, DEV_PRIVATE_KEYS};
use privsvc_ledger::{encode_operations, ARKIV_ADDRESS};
use privsvc_ledger::{
    query_all, ArkivValue, Attribute, Create, CreationFlags, LedgerError, LedgerReader,
    LedgerWriter, Operation, RpcLedger, RpcWriter,
};
use privsvc_ledger::{spends_query, SpendsEntity};
use privsvc_ledger::{AttributeSelect, Select};

fn secret(i: usize) -> [u8; 32] {
    let b = hex::decode(DEV_PRIVATE_KEYS[i].trim_start_matches("0x")).unwrap();
    b.try_into().unwrap()
}

fn create(salt: u128, n: i32) -> Operation {
    Operation::Create(Create {
        salt,
        expires_at: 0,
        min_lifetime: 100,
        flags: CreationFlags::default(),
        content_type: "application/json".into(),
        payload: format!("{{\"n\":{n}}}").into_bytes(),
        attributes: vec![
            Attribute {
                name: "kind".into(),
                value: ArkivValue::Str("smoke".into()),
            },
            Attribute {
                name: "n".into(),
                value: ArkivValue::I32(n),
            },
        ],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_and_reader_against_the_devnet() {
    let node = Devnet::start(DevnetConfig::on_demand()).await.unwrap();
    let writer = RpcWriter::connect(RpcLedger::new(node.url()).unwrap(), &secret(0))
        .await
        .unwrap();
    let reader = RpcLedger::new(node.url()).unwrap();
    assert_eq!(reader.chain_id().await.unwrap(), node.chain_id());
    assert!(reader.code_at(ARKIV_ADDRESS).await.unwrap().is_empty());
    assert!(reader.balance(writer.address()).await.unwrap() > U256::ZERO);

    // One batch: three creates, each transferred to a new owner by its predicted key, plus a
    // spends entity that stays with the relayer.
    let owners: Vec<Address> = (1..=3).map(|i| Address::repeat_byte(0x10 + i)).collect();
    let salts: Vec<u128> = vec![11, 12, 13, 14];
    let keys = writer.predict_keys(&salts).await.unwrap();
    let mut ops: Vec<Operation> = (0..3).map(|i| create(salts[i], i as i32)).collect();
    let spends = SpendsEntity {
        epoch: 20_000,
        token_ids: vec![[7u8; 32]],
    };
    ops.push(Operation::Create(spends.to_create(salts[3]).unwrap()));
    for (k, o) in keys.iter().zip(&owners) {
        ops.push(Operation::Transfer {
            key: *k,
            new_owner: *o,
        });
    }
    let r = writer.execute(&ops).await.unwrap();
    assert!(r.success, "{r:?}");
    assert_eq!(
        r.created.iter().map(|c| c.key).collect::<Vec<_>>(),
        keys,
        "created keys are the predicted ones"
    );
    assert_eq!(r.transfers.len(), 3);
    for (t, o) in r.transfers.iter().zip(&owners) {
        assert_eq!((t.from, t.to), (writer.address(), *o));
    }

    // Read back: owner is the new owner, creator the sender.
    let e = reader.entity(keys[1], None).await.unwrap().expect("live");
    assert_eq!(e.owner, Some(owners[1]));
    assert_eq!(e.creator, Some(writer.address()));
    assert_eq!(e.payload.as_deref(), Some(&b"{\"n\":1}"[..]));
    assert_eq!(e.expires_at, Some(r.block_number + 100));
    assert_eq!(
        reader.entity(B256::repeat_byte(0xee), None).await.unwrap(),
        None
    );
    let found = query_all(
        &reader,
        &spends_query(20_000),
        &privsvc_ledger::select_all(),
        None,
    )
    .await
    .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(SpendsEntity::from_entity(&found[0]).unwrap(), spends);

    // Pagination: query_all collects every page; a raw page size of 2 shows the cursor and the
    // continuation pinned to the first page's block.
    let select = Select {
        key: true,
        attributes: AttributeSelect::Named(vec!["n".into()]),
        ..Select::default()
    };
    let all = query_all(&reader, "kind = str('smoke')", &select, None)
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    let mut opts = privsvc_ledger::QueryOptions::new(select.clone());
    opts.limit = Some(2);
    let p1 = reader.query("kind = str('smoke')", &opts).await.unwrap();
    assert_eq!(p1.entities.len(), 2);
    let cursor = p1.cursor.clone().expect("a second page");
    // Another block arrives; the continuation stays on the first page's block.
    writer.execute(&[create(99, 9)]).await.unwrap();
    opts.at_block = Some(p1.block_number);
    opts.cursor = Some(cursor);
    let p2 = reader.query("kind = str('smoke')", &opts).await.unwrap();
    assert_eq!(p2.entities.len(), 1);
    assert_eq!(p2.cursor, None);
    assert_eq!(p2.block_number, p1.block_number);

    // Entity nonce advanced by the five creates.
    assert_eq!(reader.entity_nonce(writer.address()).await.unwrap(), 5);

    // A bad batch: estimation reverts with the decoded custom error.
    let missing = B256::repeat_byte(0x77);
    let err = writer
        .prepare(&[Operation::Delete { key: missing }], None)
        .await
        .unwrap_err();
    match err {
        LedgerError::Reverted(r) => assert_eq!(r.reason(), format!("EntityNotFound({missing})")),
        other => panic!("{other:?}"),
    }
    // The relayer can no longer touch a transferred entity.
    let err = writer
        .prepare(&[Operation::Delete { key: keys[0] }], None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LedgerError::Reverted(r) if r.reason().starts_with("NotOwner(")),
        "{err:?}"
    );
    // Client-side refusal before anything is sent.
    let err = writer
        .prepare(
            &[Operation::Transfer {
                key: keys[0],
                new_owner: Address::ZERO,
            }],
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Invalid(_)), "{err:?}");

    // A transaction that fails on chain (signed without estimation): status 0, and the reason
    // is recovered by re-simulation.
    let nonce = writer
        .ledger()
        .transaction_count(writer.address(), true)
        .await
        .unwrap();
    let (max_fee, prio) = writer.ledger().fees().await.unwrap();
    let tx = writer
        .sign(TxEip1559 {
            chain_id: writer.chain_id(),
            nonce,
            gas_limit: 200_000,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: prio,
            to: TxKind::Call(ARKIV_ADDRESS),
            value: U256::ZERO,
            access_list: Default::default(),
            input: encode_operations(&[Operation::Delete { key: missing }]),
        })
        .unwrap();
    writer.broadcast(&tx).await.unwrap();
    // Broadcasting the same transaction again is not an error.
    writer.broadcast(&tx).await.unwrap();
    let r = writer
        .wait_receipt(tx.hash, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(!r.success);
    assert_eq!(
        r.revert_reason.as_deref(),
        Some(format!("EntityNotFound({missing})").as_str())
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_timestamps_come_from_the_node() {
    let node = Devnet::start(DevnetConfig::on_demand()).await.unwrap();
    let reader = RpcLedger::new(node.url()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let head = reader.block_number().await.unwrap();
    let ts = reader
        .block_timestamp(head)
        .await
        .unwrap()
        .expect("head block");
    assert!(
        ts <= now + 1 && ts + 3600 > now,
        "head timestamp {ts}, now {now}"
    );
    assert_eq!(reader.block_timestamp(head + 1_000).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_devnet_answers_timestamps_of_blocks_below_its_genesis() {
    let mut config = DevnetConfig::on_demand();
    config.start_block = 1_000;
    let node = Devnet::start(config).await.unwrap();
    let reader = RpcLedger::new(node.url()).unwrap();
    let genesis = reader.block_timestamp(1_000).await.unwrap().unwrap();
    // Seeded entities were created in earlier blocks, 2 s apart, so verifiers can date them.
    assert_eq!(
        reader.block_timestamp(999).await.unwrap(),
        Some(genesis - 2)
    );
    assert_eq!(
        reader.block_timestamp(400).await.unwrap(),
        Some(genesis - 1_200)
    );
    assert_eq!(reader.block_timestamp(1_001).await.unwrap(), None);
}
