//! Transaction verification, execution semantics, reverts, history, expiry and persistence,
//! all over JSON-RPC with real signatures.

use alloy_consensus::TxEip1559;
use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use alloy_sol_types::SolError;
use privsvc_devnet::testing::abi;
use privsvc_devnet::{BlockTime, DevSigner, Devnet, DevnetConfig, DevnetHandle, ARKIV_ADDRESS};
use serde_json::{json, Value as Json};

use crate::common::*;

async fn node() -> DevnetHandle {
    Devnet::start(DevnetConfig::on_demand()).await.unwrap()
}

fn key_of(r: &Json, i: usize) -> B256 {
    r["logs"][i]["topics"][1].as_str().unwrap().parse().unwrap()
}

async fn call(url: &str, from: Address, ops: Vec<abi::Operation>) -> Result<Json, RpcErr> {
    rpc(
        url,
        "eth_call",
        json!([{"from": from, "to": ARKIV_ADDRESS, "data": execute_calldata(ops)}, "latest"]),
    )
    .await
}

/// The revert data of an `eth_call` of `ops` from `from`, which must fail.
async fn revert_data(url: &str, from: Address, ops: Vec<abi::Operation>) -> Json {
    call(url, from, ops).await.unwrap_err().data.unwrap()
}

/// Whether revert data starts with the 4-byte `selector` (0x-prefixed hex).
fn has_selector(data: &Json, selector: &str) -> bool {
    data.as_str().unwrap().starts_with(selector)
}

/// `err` as the revert data a JSON-RPC error carries.
fn encoded(err: impl SolError) -> Json {
    json!(Bytes::from(err.abi_encode()))
}

#[tokio::test]
async fn create_patch_extend_transfer_delete_with_permissions() {
    let node = node().await;
    let url = node.url();
    let (a, b) = (DevSigner::dev(0), DevSigner::dev(1));
    let mut cells = sys_cells("text/plain", b"hello");
    cells.push(str_cell("project", "t"));
    let r = send_batch(
        &node,
        &a,
        vec![
            create_op(7, 0, 100, 0, cells.clone()),
            create_op(8, 0, 100, 1, cells),
        ],
    )
    .await;
    assert_eq!(r["status"], "0x1");
    let (k1, k2) = (key_of(&r, 0), key_of(&r, 1));
    let created = q(&r["blockNumber"]);
    assert_eq!(
        k1,
        privsvc_devnet::testing::exec::derive_key(node.chain_id(), a.address(), 0, 7)
    );
    // Gas: intrinsic + 2 × (80 000 + 16 × (10 + 5) + 5 000 × 1) with the native schedule.
    let tx = rpc(
        &url,
        "eth_getTransactionByHash",
        json!([r["transactionHash"]]),
    )
    .await
    .unwrap();
    let input: Bytes = tx["input"].as_str().unwrap().parse().unwrap();
    let intrinsic = privsvc_devnet::testing::exec::intrinsic_gas(&input);
    assert_eq!(q(&r["gasUsed"]), intrinsic + 2 * (80_000 + 16 * 15 + 5_000));

    // A stranger cannot patch: NotOwner(key, caller, owner) in eth_call's error data.
    let e = call(
        &url,
        b.address(),
        vec![patch_op(k1, vec![str_cell("x", "1")])],
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 3);
    let want = abi::NotOwner {
        entityKey: k1,
        caller: b.address(),
        owner: a.address(),
    }
    .abi_encode();
    assert_eq!(e.data.unwrap(), json!(Bytes::from(want)));
    // Patch of a never-created key: EntityNotFound.
    let ghost = B256::repeat_byte(0x11);
    assert_eq!(
        revert_data(
            &url,
            a.address(),
            vec![patch_op(ghost, vec![str_cell("x", "1")])]
        )
        .await,
        encoded(abi::EntityNotFound { entityKey: ghost })
    );
    // execute([]) : EmptyBatch; uppercase attribute name: Ident32InvalidByte.
    assert_eq!(
        revert_data(&url, a.address(), vec![]).await,
        encoded(abi::EmptyBatch {})
    );
    assert!(
        has_selector(
            &revert_data(
                &url,
                a.address(),
                vec![patch_op(k1, vec![str_cell("test/attribute", "1")])]
            )
            .await,
            "0x276f7798"
        ),
        "Ident32InvalidByte"
    );
    // Readonly entity cannot be patched.
    assert_eq!(
        revert_data(
            &url,
            a.address(),
            vec![patch_op(k2, vec![str_cell("x", "1")])]
        )
        .await,
        encoded(abi::ReadOnlyEntity { entityKey: k2 })
    );
    // eth_estimateGas reverts the same way.
    let e = rpc(&url, "eth_estimateGas", json!([{"from": b.address(), "to": ARKIV_ADDRESS, "data": execute_calldata(vec![delete_op(k1)])}]))
        .await
        .unwrap_err();
    assert_eq!(e.code, 3);

    // Owner patches, extends (shorter reverts), transfers; the old owner then loses its rights.
    let r = send_batch(
        &node,
        &a,
        vec![
            patch_op(k1, vec![str_cell("x", "1")]),
            extend_op(k1, 0, 500),
        ],
    )
    .await;
    assert_eq!(r["status"], "0x1");
    assert!(
        has_selector(
            &revert_data(&url, a.address(), vec![extend_op(k1, 0, 10)]).await,
            "0x33268a0d"
        ),
        "ExpiryNotExtended"
    );
    assert_eq!(
        revert_data(&url, a.address(), vec![transfer_op(k1, a.address())]).await,
        encoded(abi::TransferToSelf { entityKey: k1 })
    );
    let r = send_batch(&node, &a, vec![transfer_op(k1, b.address())]).await;
    assert_eq!(
        r["logs"][0]["topics"][3],
        json!(B256::left_padding_from(b.address().as_slice()))
    );
    assert!(
        has_selector(
            &revert_data(&url, a.address(), vec![delete_op(k1)]).await,
            "0xa3221ef2"
        ),
        "NotOwner after transfer"
    );
    let r = send_batch(&node, &b, vec![delete_op(k1)]).await;
    assert_eq!(r["status"], "0x1");
    let head = node.block_number();
    // History: at the creation block the entity is there, now it is gone.
    assert!(rpc(&url, "arkiv_getEntity", json!([k1]))
        .await
        .unwrap()
        .is_null());
    let old = rpc(&url, "arkiv_getEntity", json!([k1, created]))
        .await
        .unwrap();
    assert_eq!(old["owner"], json!(a.address().to_checksum(None)));
    let n = rpc(
        &url,
        "arkiv_getEntityCount",
        json!([{"query": "project = str('t')", "block": head - 1}]),
    )
    .await
    .unwrap();
    assert_eq!(n, json!(2));
    let n = rpc(
        &url,
        "arkiv_getEntityCount",
        json!([{"query": "project = str('t')"}]),
    )
    .await
    .unwrap();
    assert_eq!(n, json!(1));
    node.shutdown().await;
}

#[tokio::test]
async fn reverted_batch_rolls_back_and_charges_gas() {
    let node = node().await;
    let url = node.url();
    let a = DevSigner::dev(0);
    let before = node.account(a.address());
    // create + delete of a phantom key (op-054): whole batch reverts.
    let r = send_batch(
        &node,
        &a,
        vec![
            create_op(1, 0, 10, 0, sys_cells("text/plain", b"x")),
            delete_op(B256::repeat_byte(9)),
        ],
    )
    .await;
    assert_eq!(r["status"], "0x0");
    assert!(r["logs"].as_array().unwrap().is_empty());
    assert_eq!(
        rpc(&url, "arkiv_getEntityCount", json!([])).await.unwrap(),
        json!(0)
    );
    let after = node.account(a.address());
    assert_eq!(after.nonce, before.nonce + 1, "the nonce is consumed");
    assert_eq!(
        after.entity_nonce, before.entity_nonce,
        "the entity nonce is not"
    );
    assert!(after.balance < before.balance, "gas is charged");
    // Out of gas: a gas limit below the schedule reverts with Error("out of gas").
    let data = execute_calldata(vec![create_op(1, 0, 10, 0, sys_cells("text/plain", b"x"))]);
    let raw = a
        .sign_arkiv_call(node.chain_id(), after.nonce, data, 60_000, 2_000_000_000)
        .unwrap();
    let h = rpc(&url, "eth_sendRawTransaction", json!([raw]))
        .await
        .unwrap();
    let r = rpc(&url, "eth_getTransactionReceipt", json!([h]))
        .await
        .unwrap();
    assert_eq!(r["status"], "0x0");
    assert_eq!(q(&r["gasUsed"]), 60_000);
    node.shutdown().await;
}

#[tokio::test]
async fn transaction_verification() {
    let node = node().await;
    let url = node.url();
    let a = DevSigner::dev(0);
    let data = execute_calldata(vec![create_op(1, 0, 10, 0, sys_cells("text/plain", b"x"))]);
    // Wrong chain id.
    let raw = a
        .sign_arkiv_call(1, 0, data.clone(), 1_000_000, 2_000_000_000)
        .unwrap();
    let e = rpc(&url, "eth_sendRawTransaction", json!([raw]))
        .await
        .unwrap_err();
    assert!(e.message.contains("chain id"), "{e:?}");
    // Nonce too low after one mined tx.
    let raw = a
        .sign_arkiv_call(node.chain_id(), 0, data.clone(), 1_000_000, 2_000_000_000)
        .unwrap();
    rpc(&url, "eth_sendRawTransaction", json!([raw.clone()]))
        .await
        .unwrap();
    // Resending the identical transaction is not an error.
    rpc(&url, "eth_sendRawTransaction", json!([raw]))
        .await
        .unwrap();
    let raw = a
        .sign_arkiv_call(node.chain_id(), 0, data.clone(), 1_000_001, 2_000_000_000)
        .unwrap();
    let e = rpc(&url, "eth_sendRawTransaction", json!([raw]))
        .await
        .unwrap_err();
    assert!(e.message.contains("nonce too low"), "{e:?}");
    // An unfunded sender.
    let poor =
        DevSigner::from_hex("0x0101010101010101010101010101010101010101010101010101010101010101")
            .unwrap();
    let raw = poor
        .sign_arkiv_call(node.chain_id(), 0, data.clone(), 1_000_000, 2_000_000_000)
        .unwrap();
    let e = rpc(&url, "eth_sendRawTransaction", json!([raw]))
        .await
        .unwrap_err();
    assert!(e.message.contains("insufficient funds"), "{e:?}");
    // A tampered signature recovers another (unfunded) sender or fails.
    let mut bad = a
        .sign_arkiv_call(node.chain_id(), 1, data.clone(), 1_000_000, 2_000_000_000)
        .unwrap()
        .to_vec();
    let n = bad.len();
    bad[n - 5] ^= 0x01;
    assert!(
        rpc(&url, "eth_sendRawTransaction", json!([Bytes::from(bad)]))
            .await
            .is_err()
    );
    // Contract creation is refused.
    let raw = a
        .sign_eip1559(TxEip1559 {
            chain_id: node.chain_id(),
            nonce: 1,
            gas_limit: 100_000,
            max_fee_per_gas: 2_000_000_000,
            max_priority_fee_per_gas: 0,
            to: TxKind::Create,
            value: U256::ZERO,
            access_list: Default::default(),
            input: Bytes::from(vec![0x60]),
        })
        .unwrap();
    let e = rpc(&url, "eth_sendRawTransaction", json!([raw]))
        .await
        .unwrap_err();
    assert!(e.message.contains("contract creation"), "{e:?}");
    // Plain value transfer works and the entity nonce view answers through eth_call.
    let b = DevSigner::dev(1).address();
    let raw = a
        .sign_eip1559(TxEip1559 {
            chain_id: node.chain_id(),
            nonce: 1,
            gas_limit: 21_000,
            max_fee_per_gas: 2_000_000_000,
            max_priority_fee_per_gas: 0,
            to: TxKind::Call(b),
            value: U256::from(12345u64),
            access_list: Default::default(),
            input: Bytes::new(),
        })
        .unwrap();
    let before = node.account(b).balance;
    rpc(&url, "eth_sendRawTransaction", json!([raw]))
        .await
        .unwrap();
    assert_eq!(node.account(b).balance, before + U256::from(12345u64));
    let nonce_call =
        alloy_sol_types::SolCall::abi_encode(&abi::entityNonceCall { owner: a.address() });
    let r = rpc(
        &url,
        "eth_call",
        json!([{"to": ARKIV_ADDRESS, "data": Bytes::from(nonce_call)}, "latest"]),
    )
    .await
    .unwrap();
    assert_eq!(
        U256::from_str_radix(r.as_str().unwrap().trim_start_matches("0x"), 16).unwrap(),
        U256::from(1u64)
    );
    // Unknown method.
    assert_eq!(
        rpc(&url, "eth_fillTransaction", json!([]))
            .await
            .unwrap_err()
            .code,
        -32601
    );
    node.shutdown().await;
}

#[tokio::test]
async fn expiry_after_the_right_number_of_blocks() {
    let node = node().await;
    let url = node.url();
    let a = DevSigner::dev(0);
    let r = send_batch(
        &node,
        &a,
        vec![create_op(1, 0, 3, 0, sys_cells("text/plain", b"x"))],
    )
    .await;
    let k = key_of(&r, 0);
    let b = q(&r["blockNumber"]);
    assert_eq!(
        rpc(&url, "arkiv_getEntity", json!([k])).await.unwrap()["expiresAt"],
        json!(format!("{:#x}", b + 3))
    );
    node.mine_blocks(b + 2 - node.block_number()).unwrap();
    assert!(
        !rpc(&url, "arkiv_getEntity", json!([k]))
            .await
            .unwrap()
            .is_null(),
        "live at b+2"
    );
    node.mine().unwrap();
    assert!(
        rpc(&url, "arkiv_getEntity", json!([k]))
            .await
            .unwrap()
            .is_null(),
        "gone at b+3"
    );
    assert_eq!(
        rpc(&url, "arkiv_getEntityCount", json!([])).await.unwrap(),
        json!(0)
    );
    // Still visible in history; a mutation now reverts EntityExpired.
    assert!(!rpc(&url, "arkiv_getEntity", json!([k, b + 2]))
        .await
        .unwrap()
        .is_null());
    assert!(
        has_selector(
            &revert_data(&url, a.address(), vec![extend_op(k, 0, 100)]).await,
            "0x2411cf56"
        ),
        "EntityExpired"
    );
    // Dead on arrival.
    assert!(has_selector(
        &revert_data(&url, a.address(), vec![create_op(1, 5, 0, 0, vec![])]).await,
        "0x26049d1c"
    ));
    node.shutdown().await;
}

#[tokio::test]
async fn persistence_across_restart_and_interval_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.sqlite");
    let mut cfg = DevnetConfig::on_demand();
    cfg.db_path = Some(path.clone());
    let node = Devnet::start(cfg.clone()).await.unwrap();
    let a = DevSigner::dev(0);
    let mut cells = sys_cells("text/plain", b"persist");
    cells.push(str_cell("project", "p"));
    let r = send_batch(&node, &a, vec![create_op(1, 0, 1000, 0, cells.clone())]).await;
    let k = key_of(&r, 0);
    let r2 = send_batch(&node, &a, vec![patch_op(k, vec![str_cell("project", "q")])]).await;
    let head = node.block_number();
    let acct = node.account(a.address());
    node.shutdown().await;

    let node = Devnet::start(cfg).await.unwrap();
    let url = node.url();
    assert_eq!(node.block_number(), head);
    assert_eq!(node.account(a.address()), acct);
    let e = rpc(&url, "arkiv_getEntity", json!([k])).await.unwrap();
    assert_eq!(e["attributes"][0]["value"], "q");
    let old = rpc(&url, "arkiv_getEntity", json!([k, q(&r["blockNumber"])]))
        .await
        .unwrap();
    assert_eq!(
        old["attributes"][0]["value"], "p",
        "history survives the restart"
    );
    let rec = rpc(
        &url,
        "eth_getTransactionReceipt",
        json!([r2["transactionHash"]]),
    )
    .await
    .unwrap();
    assert_eq!(rec["status"], "0x1");
    // The next create continues the entity nonce.
    let r3 = send_batch(&node, &a, vec![create_op(1, 0, 1000, 0, cells)]).await;
    assert_eq!(
        key_of(&r3, 0),
        privsvc_devnet::testing::exec::derive_key(node.chain_id(), a.address(), 1, 1)
    );
    node.shutdown().await;

    // Interval mode produces blocks by itself.
    let mut config = DevnetConfig::default();
    config.block_time = BlockTime::Interval(std::time::Duration::from_millis(50));
    let node = Devnet::start(config).await.unwrap();
    let start = node.block_number();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(node.block_number() >= start + 3);
    let url = node.url();
    let b = rpc(&url, "eth_getBlockByNumber", json!(["latest", false]))
        .await
        .unwrap();
    assert!(b["baseFeePerGas"].is_string() && b["hash"].is_string());
    node.shutdown().await;
}

#[tokio::test]
async fn legacy_transactions_and_get_logs() {
    let node = node().await;
    let url = node.url();
    let a = DevSigner::dev(2);
    let data = execute_calldata(vec![create_op(
        5,
        0,
        50,
        2,
        sys_cells("text/plain", b"legacy"),
    )]);
    let raw = a
        .sign_legacy(alloy_consensus::TxLegacy {
            chain_id: Some(node.chain_id()),
            nonce: 0,
            gas_price: 2_000_000_000,
            gas_limit: 1_000_000,
            to: TxKind::Call(ARKIV_ADDRESS),
            value: U256::ZERO,
            input: data,
        })
        .unwrap();
    let h = rpc(&url, "eth_sendRawTransaction", json!([raw]))
        .await
        .unwrap();
    let r = rpc(&url, "eth_getTransactionReceipt", json!([h]))
        .await
        .unwrap();
    assert_eq!(r["status"], "0x1");
    assert_eq!(
        r["from"].as_str().unwrap().to_lowercase(),
        format!("{:#x}", a.address())
    );
    let t = rpc(&url, "eth_getTransactionByHash", json!([h]))
        .await
        .unwrap();
    assert_eq!(t["type"], "0x0");
    let k = key_of(&r, 0);
    // A stranger may extend a permissionless-extension entity; the log names the owner.
    let b = DevSigner::dev(3);
    let r2 = send_batch(&node, &b, vec![extend_op(k, 0, 500)]).await;
    assert_eq!(r2["status"], "0x1");
    assert_eq!(
        r2["logs"][0]["topics"][2],
        json!(B256::left_padding_from(a.address().as_slice()))
    );
    // eth_getLogs by address and by topic0 / key.
    let all = rpc(
        &url,
        "eth_getLogs",
        json!([{"fromBlock": "0x0", "toBlock": "latest", "address": ARKIV_ADDRESS}]),
    )
    .await
    .unwrap();
    assert_eq!(all.as_array().unwrap().len(), 2);
    let created_topic = r["logs"][0]["topics"][0].clone();
    let only = rpc(
        &url,
        "eth_getLogs",
        json!([{"fromBlock": "0x0", "topics": [created_topic, k]}]),
    )
    .await
    .unwrap();
    assert_eq!(only.as_array().unwrap().len(), 1);
    assert_eq!(only[0]["transactionHash"], h);
    let none = rpc(
        &url,
        "eth_getLogs",
        json!([{"fromBlock": "0x0", "address": Address::repeat_byte(1)}]),
    )
    .await
    .unwrap();
    assert!(none.as_array().unwrap().is_empty());
    let fh = rpc(&url, "eth_feeHistory", json!(["0x4", "latest", [25, 75]]))
        .await
        .unwrap();
    assert_eq!(
        fh["baseFeePerGas"].as_array().unwrap().len(),
        fh["gasUsedRatio"].as_array().unwrap().len() + 1
    );
    node.shutdown().await;
}

#[tokio::test]
async fn polling_filters() {
    let node = node().await;
    let url = node.url();
    let a = DevSigner::dev(0);
    let lf = rpc(&url, "eth_newFilter", json!([{"address": ARKIV_ADDRESS}]))
        .await
        .unwrap();
    let bf = rpc(&url, "eth_newBlockFilter", json!([])).await.unwrap();
    assert_eq!(
        rpc(&url, "eth_getFilterChanges", json!([lf]))
            .await
            .unwrap(),
        json!([])
    );
    let r = send_batch(
        &node,
        &a,
        vec![create_op(1, 0, 10, 0, sys_cells("text/plain", b"f"))],
    )
    .await;
    let changes = rpc(&url, "eth_getFilterChanges", json!([lf]))
        .await
        .unwrap();
    assert_eq!(changes.as_array().unwrap().len(), 1);
    assert_eq!(changes[0]["transactionHash"], r["transactionHash"]);
    assert_eq!(
        rpc(&url, "eth_getFilterChanges", json!([lf]))
            .await
            .unwrap(),
        json!([]),
        "changes are consumed"
    );
    let blocks = rpc(&url, "eth_getFilterChanges", json!([bf]))
        .await
        .unwrap();
    assert_eq!(blocks, json!([r["blockHash"]]));
    assert_eq!(
        rpc(&url, "eth_uninstallFilter", json!([lf])).await.unwrap(),
        json!(true)
    );
    assert!(rpc(&url, "eth_getFilterChanges", json!([lf]))
        .await
        .is_err());
    node.shutdown().await;
}
