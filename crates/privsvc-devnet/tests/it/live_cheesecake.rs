//! The five live Cheesecake (chain 7733102) transactions of the vectors, replayed on a devnet.
//!
//! The vectors carry calldata and receipts but no raw signed transactions, and the keys depend on
//! the sender, so the calldata is replayed from the original senders through the devnet's
//! impersonation helper (`DevnetHandle::send_impersonated`), in the original block numbers:
//! genesis at 219289, the senders prefunded, `0xca4b…`'s entity nonce set to 646 (found by the
//! vector authors), and the two pre-existing entities (`0xbc77…` owned by `0xa4da…`, `0x8863…`
//! owned by `0xca4b…`) seeded at genesis. Created keys, logs and block numbers must equal the
//! live receipts.

use alloy_primitives::{Address, Bytes, B256, U256};
use privsvc_devnet::{Account, Devnet, DevnetConfig, EntityData, ARKIV_ADDRESS};
use serde_json::{json, Value as Json};

use crate::common::*;

fn seeded(key: &str, owner: Address, expires_at: u64) -> EntityData {
    EntityData {
        key: key.parse().unwrap(),
        owner,
        creator: owner,
        created_at: 219_000,
        updated_at: 219_000,
        expires_at,
        flags: 0,
        content_type: "application/json".into(),
        payload: Bytes::from(b"{}".to_vec()),
        attrs: vec![],
    }
}

#[tokio::test]
async fn live_transactions_replay_identically() {
    let txs: Vec<Json> = vectors("operations")
        .into_iter()
        .filter(|c| c["kind"] == "live_transaction")
        .collect();
    assert_eq!(txs.len(), 5);
    let by = |label: &str| txs.iter().find(|t| t["label"] == label).unwrap().clone();
    let alice: Address = "0xca4b166ee155cb2816dc25f94dc1fd102a26c997"
        .parse()
        .unwrap();
    let bob: Address = "0xa4da51ca5cd10dd60101456919a9569a10016fe8"
        .parse()
        .unwrap();
    let eth = U256::from(10u64).pow(U256::from(18u64));
    let mut config = DevnetConfig::on_demand();
    config.chain_id = 7_733_102;
    config.start_block = 219_289;
    config.prefund = vec![(alice, eth), (bob, eth)];
    config.genesis_entities = vec![
        seeded(
            "0xbc7713534bc76ca8ab92f6e98681b251b4ea318b58a98fbc3649035f8ab3a61c",
            bob,
            300_000,
        ),
        seeded(
            "0x8863dac4f91b14da979331f4c5277036f257f97bb6bcd5cac8048acbdbc0e057",
            alice,
            222_600,
        ),
    ];
    let node = Devnet::start(config).await.unwrap();
    node.set_account(
        alice,
        Account {
            balance: eth,
            nonce: 0,
            entity_nonce: 646,
        },
    )
    .unwrap();
    let url = node.url();
    // In block order: delete (219290), patch (222492), extend (222495), create (222498), batch (222500).
    for label in ["delete", "patch", "extend_expiry", "create", "batch"] {
        let t = by(label);
        let block = t["blockNumber"].as_u64().unwrap();
        let head = node.block_number();
        node.mine_blocks(block - 1 - head).unwrap();
        let from: Address = t["from"].as_str().unwrap().parse().unwrap();
        let input: Bytes = t["input"].as_str().unwrap().parse().unwrap();
        let hash = node
            .send_impersonated(from, ARKIV_ADDRESS, input, None)
            .unwrap();
        let r = rpc(&url, "eth_getTransactionReceipt", json!([hash]))
            .await
            .unwrap();
        assert_eq!(r["status"], t["status"], "{label}");
        assert_eq!(q(&r["blockNumber"]), block, "{label}");
        let got: Vec<Json> = r["logs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                json!({
                    "address": l["address"].as_str().unwrap().to_lowercase(),
                    "topics": l["topics"],
                    "data": l["data"],
                })
            })
            .collect();
        let want: Vec<Json> = t["logs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| json!({"address": l["address"].as_str().unwrap().to_lowercase(), "topics": l["topics"], "data": l["data"]}))
            .collect();
        assert_eq!(got, want, "{label}: logs must equal the live receipt");
    }
    // The created keys are live, with the resolved expiries and flags of the receipts.
    let k: B256 = "0x9fd2dc236609c501340cfc8a807067a3033eb32e8b09a907b0aba5979855eb4e"
        .parse()
        .unwrap();
    let e = rpc(&url, "arkiv_getEntity", json!([k])).await.unwrap();
    assert_eq!(e["expiresAt"], "0x36540");
    assert_eq!(e["creationFlags"]["readonly"], true);
    assert_eq!(e["contentType"], "application/json");
    assert_eq!(node.account(alice).entity_nonce, 649);
    // The deleted entity is gone; the patched one carries `batched = yes`.
    let gone: B256 = "0xbc7713534bc76ca8ab92f6e98681b251b4ea318b58a98fbc3649035f8ab3a61c"
        .parse()
        .unwrap();
    assert!(rpc(&url, "arkiv_getEntity", json!([gone]))
        .await
        .unwrap()
        .is_null());
    let p = rpc(
        &url,
        "arkiv_query",
        json!(["batched = str('yes')", {"select": {"key": true, "expiresAt": true}}]),
    )
    .await
    .unwrap();
    assert_eq!(
        p["data"][0]["key"],
        "0x8863dac4f91b14da979331f4c5277036f257f97bb6bcd5cac8048acbdbc0e057"
    );
    assert_eq!(p["data"][0]["expiresAt"], "0x365b5");
    node.shutdown().await;
}
