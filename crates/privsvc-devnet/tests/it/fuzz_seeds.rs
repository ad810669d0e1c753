//! Stable replay of the devnet fuzz seed corpora (fuzz/seeds/devnet_*/*) through the same entry
//! functions the cargo-fuzz targets call (`privsvc_devnet::fuzz_entry`).
//!
//! Files named `accept-*` must be accepted, `reject-*` refused; any other file (a minimised
//! crash kept as a regression seed) must only not panic. Signed transactions and calldata are
//! written by `write_generated_seeds` (ignored; run it with `-- --ignored` after a format
//! change, then review the diff); query seeds are plain text written by hand.

use std::path::PathBuf;

use alloy_consensus::{TxEip1559, TxEip2930, TxLegacy};
use alloy_primitives::{Address, Bytes, TxKind, B256, U256};
use privsvc_devnet::fuzz_entry::{calldata, query, raw_transaction, rpc_request};
use privsvc_devnet::{DevSigner, ARKIV_ADDRESS};
use privsvc_ledger::{encode_operations, ArkivValue, Attribute, Create, CreationFlags, Operation};
use serde_json::{json, Value};

fn seeds_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target)
}

fn replay(target: &str, entry: fn(&[u8]) -> bool) -> (usize, usize) {
    privsvc_attributes::fuzz_entry::replay_seed_corpus(&seeds_dir(target), entry)
}

#[test]
fn devnet_query_seeds() {
    let (accepted, rejected) = replay("devnet_query", query);
    assert!(
        accepted >= 8 && rejected >= 8,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn devnet_raw_tx_seeds() {
    let (accepted, rejected) = replay("devnet_raw_tx", raw_transaction);
    assert!(
        accepted >= 3 && rejected >= 4,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn devnet_rpc_request_seeds() {
    let (accepted, rejected) = replay("devnet_rpc_request", rpc_request);
    assert!(
        accepted >= 4 && rejected >= 5,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn devnet_calldata_seeds() {
    let (accepted, rejected) = replay("devnet_calldata", calldata);
    assert!(
        accepted >= 3 && rejected >= 3,
        "{accepted} accepted, {rejected} rejected"
    );
}

/// Over real HTTP: a legacy transaction whose EIP-155 `v` cannot fit 64 bits (a huge chain id)
/// is refused with a JSON-RPC error naming the chain id (before the fix, decoding it overflowed
/// and the handler panicked, so the sender got no answer at all); a transaction whose cost
/// exceeds 2^256 is refused for insufficient funds; the node keeps serving.
#[tokio::test]
async fn oversized_chain_id_and_overflowing_cost_are_refused_over_rpc() {
    let node = privsvc_devnet::Devnet::start(privsvc_devnet::DevnetConfig::default())
        .await
        .unwrap();
    let raw =
        std::fs::read(seeds_dir("devnet_raw_tx").join("reject-legacy-chain-id-overflows-v.bin"))
            .unwrap();
    let call = |method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let url = node.url();
        async move {
            reqwest::Client::new()
                .post(url)
                .json(&body)
                .send()
                .await
                .expect("the node answers")
                .json::<Value>()
                .await
                .expect("a JSON-RPC answer")
        }
    };
    let answer = call(
        "eth_sendRawTransaction",
        json!([format!("0x{}", alloy_primitives::hex::encode(&raw))]),
    )
    .await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("chain id"),
        "{answer}"
    );
    // A value so large that gas × price + value exceeds 2^256 is refused for insufficient
    // funds (the cost once wrapped around to a tiny amount and passed the balance check).
    let overflow = DevSigner::dev(0)
        .sign_eip1559(TxEip1559 {
            chain_id: privsvc_devnet::DevnetConfig::default().chain_id,
            to: TxKind::Call(Address::repeat_byte(7)),
            value: U256::MAX,
            gas_limit: 21_000,
            ..eip1559(Bytes::new())
        })
        .unwrap();
    let answer = call(
        "eth_sendRawTransaction",
        json!([format!("0x{}", alloy_primitives::hex::encode(&overflow))]),
    )
    .await;
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("insufficient funds")),
        "{answer}"
    );
    let head = call("eth_blockNumber", json!([])).await;
    assert!(head["result"].is_string(), "{head}");
    node.shutdown().await;
}

// ----- seed generation -----

fn write(target: &str, name: &str, data: &[u8]) {
    let dir = seeds_dir(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), data).unwrap();
}

fn create_op() -> Operation {
    Operation::Create(Create {
        salt: 42,
        expires_at: 0,
        min_lifetime: 1800,
        flags: CreationFlags::default(),
        content_type: "application/json".into(),
        payload: b"{\"x\":1}".to_vec(),
        attributes: vec![Attribute {
            name: "project".into(),
            value: ArkivValue::Str("notes".into()),
        }],
    })
}

fn eip1559(input: Bytes) -> TxEip1559 {
    TxEip1559 {
        chain_id: 1337,
        nonce: 0,
        gas_limit: 200_000,
        max_fee_per_gas: 2_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: TxKind::Call(ARKIV_ADDRESS),
        value: U256::ZERO,
        access_list: Default::default(),
        input,
    }
}

#[test]
#[ignore = "writes fuzz/seeds; run by hand after a format change"]
fn write_generated_seeds() {
    let signer = DevSigner::dev(0);
    let execute = encode_operations(&[create_op()]);
    let key = B256::repeat_byte(9);

    // devnet_rpc_request: a page of one of the three entities, and the page after it.
    let fp = privsvc_devnet::testing::select::Projection::from_json(None)
        .unwrap()
        .fingerprint();
    let cursor = privsvc_devnet::testing::query::cursor::encode("*", 0, &fp, 1);
    let page = |c: &str| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "arkiv_query",
               "params": ["*", {"limit": 1, "cursor": c}]})
        .to_string()
    };
    write(
        "devnet_rpc_request",
        "accept-query-cursor.json",
        page(&cursor).as_bytes(),
    );
    let other_block = privsvc_devnet::testing::query::cursor::encode("*", 5, &fp, 1);
    write(
        "devnet_rpc_request",
        "reject-cursor-of-another-block.json",
        page(&other_block).as_bytes(),
    );

    // devnet_raw_tx
    let tx = signer.sign_eip1559(eip1559(execute.clone())).unwrap();
    write("devnet_raw_tx", "accept-eip1559-create.bin", &tx);
    let legacy = signer
        .sign_legacy(TxLegacy {
            chain_id: Some(1337),
            nonce: 0,
            gas_price: 1_000_000_000,
            gas_limit: 21_000,
            to: TxKind::Call(Address::repeat_byte(7)),
            value: U256::from(1),
            input: Bytes::new(),
        })
        .unwrap();
    write(
        "devnet_raw_tx",
        "accept-legacy-eip155-transfer.bin",
        &legacy,
    );
    let pre155 = signer
        .sign_legacy(TxLegacy {
            chain_id: None,
            nonce: 0,
            gas_price: 1,
            gas_limit: 21_000,
            to: TxKind::Create,
            value: U256::ZERO,
            input: Bytes::from_static(b"\x60\x00"),
        })
        .unwrap();
    write(
        "devnet_raw_tx",
        "accept-legacy-pre-eip155-create.bin",
        &pre155,
    );
    // EIP-155 v = 35 + 2 × chainId + parity does not fit in 64 bits for this chain id: the
    // node once panicked (overflow) on it while holding the chain lock; now it is refused.
    let huge_chain = signer
        .sign_legacy(TxLegacy {
            chain_id: Some(u64::MAX - 1),
            nonce: 0,
            gas_price: 1,
            gas_limit: 21_000,
            to: TxKind::Call(Address::repeat_byte(7)),
            value: U256::ZERO,
            input: Bytes::new(),
        })
        .unwrap();
    write(
        "devnet_raw_tx",
        "reject-legacy-chain-id-overflows-v.bin",
        &huge_chain,
    );
    // gas × price + value beyond 2^256: the balance check once computed the cost with
    // wrapping arithmetic, so it could wrap to a tiny cost; now refused as insufficient funds.
    let overflow = signer
        .sign_eip1559(TxEip1559 {
            to: TxKind::Call(Address::repeat_byte(7)),
            value: U256::MAX,
            gas_limit: 21_000,
            ..eip1559(Bytes::new())
        })
        .unwrap();
    write(
        "devnet_raw_tx",
        "accept-value-overflowing-the-cost.bin",
        &overflow,
    );
    let mut trailing = tx.to_vec();
    trailing.push(0);
    write("devnet_raw_tx", "reject-trailing-byte.bin", &trailing);
    let mut truncated = tx.to_vec();
    truncated.truncate(tx.len() - 1);
    write("devnet_raw_tx", "reject-truncated.bin", &truncated);
    let mut bad_sig = tx.to_vec();
    let n = bad_sig.len();
    bad_sig[n - 33..n - 1].fill(0xff);
    write(
        "devnet_raw_tx",
        "reject-signature-out-of-range.bin",
        &bad_sig,
    );
    write("devnet_raw_tx", "reject-empty.bin", b"");
    write("devnet_raw_tx", "reject-unknown-type-5.bin", &[5, 0xc0]);
    // An EIP-2930 transaction: decodes, but the node refuses its type.
    let tx2930 = TxEip2930 {
        chain_id: 1337,
        nonce: 0,
        gas_price: 1_000_000_000,
        gas_limit: 21_000,
        to: TxKind::Call(Address::repeat_byte(7)),
        value: U256::ZERO,
        access_list: Default::default(),
        input: Bytes::new(),
    };
    {
        use alloy_consensus::{SignableTransaction, TxEnvelope};
        use alloy_eips::eip2718::Encodable2718;
        use k256::ecdsa::SigningKey;
        let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let (sig, recid) = key
            .sign_prehash_recoverable(tx2930.signature_hash().as_slice())
            .unwrap();
        let sig = alloy_primitives::Signature::from_signature_and_parity(sig, recid.is_y_odd());
        let env = TxEnvelope::from(tx2930.into_signed(sig));
        write("devnet_raw_tx", "reject-eip2930.bin", &env.encoded_2718());
    }

    // devnet_calldata
    write("devnet_calldata", "accept-execute-create.bin", &execute);
    write(
        "devnet_calldata",
        "accept-execute-patch-delete.bin",
        &encode_operations(&[
            Operation::Patch {
                key,
                mutations: vec![
                    ("tag".into(), None),
                    ("team".into(), Some(ArkivValue::Str("blue".into()))),
                ],
            },
            Operation::Delete { key },
        ]),
    );
    write(
        "devnet_calldata",
        "accept-entity-nonce.bin",
        &privsvc_ledger::entity_nonce_calldata(Address::repeat_byte(3)),
    );
    write(
        "devnet_calldata",
        "reject-empty-batch.bin",
        &encode_operations(&[]),
    );
    write("devnet_calldata", "reject-too-short.bin", &[0x49, 0x65, 0]);
    let mut sel = execute.to_vec();
    sel[3] ^= 0xff;
    write("devnet_calldata", "reject-unknown-selector.bin", &sel);
    write(
        "devnet_calldata",
        "reject-transfer-to-zero.bin",
        &encode_operations(&[Operation::Transfer {
            key,
            new_owner: Address::ZERO,
        }]),
    );
}
