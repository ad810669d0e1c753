//! Shared helpers of the devnet tests: a JSON-RPC client, vector loading, calldata building.

use std::path::PathBuf;

use alloy_primitives::{Address, Bytes, FixedBytes, B256};
use alloy_sol_types::SolValue;
use privsvc_devnet::testing::abi::{self, Attribute, Operation};
/// A create operation (cells sorted by name) and `execute(ops)` calldata: the crate's own
/// builders, under the names the tests use (not every test binary uses both).
#[allow(unused_imports)]
pub use privsvc_devnet::testing::abi::{
    create_operation as create_op, encode_execute as execute_calldata,
};
use privsvc_devnet::{DevSigner, DevnetHandle};
use serde_json::{json, Value as Json};

/// A JSON-RPC error as received.
#[derive(Debug, Clone)]
pub struct RpcErr {
    pub code: i64,
    pub message: String,
    pub data: Option<Json>,
}

/// One JSON-RPC call over HTTP.
pub async fn rpc(url: &str, method: &str, params: Json) -> Result<Json, RpcErr> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp: Json = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("devnet reachable")
        .json()
        .await
        .expect("JSON answer");
    if let Some(e) = resp.get("error") {
        return Err(RpcErr {
            code: e["code"].as_i64().expect("code"),
            message: e["message"].as_str().unwrap_or_default().to_string(),
            data: e.get("data").cloned(),
        });
    }
    Ok(resp["result"].clone())
}

/// Load one section of the Arkiv vectors, `conformance/arkiv/<section>.json`.
pub fn vectors(section: &str) -> Vec<Json> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../conformance/arkiv")
        .join(format!("{section}.json"));
    let s = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str::<Json>(&s)
        .expect("valid JSON")
        .as_array()
        .expect("array")
        .clone()
}

/// A left-aligned, NUL-padded bytes32 name.
pub fn name32(n: &str) -> B256 {
    let mut w = [0u8; 32];
    w[..n.len()].copy_from_slice(n.as_bytes());
    B256::from(w)
}

/// A 32-byte word holding `v`.
pub fn word_u(v: u128) -> Bytes {
    let mut w = [0u8; 32];
    w[16..].copy_from_slice(&v.to_be_bytes());
    Bytes::from(w.to_vec())
}

/// A cell (name, typeId, value bytes).
pub fn cell(name: &str, type_id: u8, value: impl Into<Bytes>) -> Attribute {
    Attribute {
        name: name32(name),
        typeId: type_id,
        value: value.into(),
    }
}

/// A patch operation (cells sorted here).
pub fn patch_op(key: B256, mut cells: Vec<Attribute>) -> Operation {
    cells.sort_by_key(|a| a.name);
    let data = abi::PatchOp {
        entityKey: key,
        mutations: cells,
    }
    .abi_encode();
    Operation {
        operation: 2,
        operationData: data.into(),
    }
}

/// An extend operation.
pub fn extend_op(key: B256, expires_at: u64, min_lifetime: u64) -> Operation {
    let data = abi::ExtendOp {
        entityKey: key,
        expiresAt: expires_at,
        minLifetime: min_lifetime,
    }
    .abi_encode();
    Operation {
        operation: 3,
        operationData: data.into(),
    }
}

/// A transfer operation.
pub fn transfer_op(key: B256, to: Address) -> Operation {
    let data = abi::TransferOp {
        entityKey: key,
        newOwner: to,
    }
    .abi_encode();
    Operation {
        operation: 4,
        operationData: data.into(),
    }
}

/// A delete operation.
pub fn delete_op(key: B256) -> Operation {
    Operation {
        operation: 5,
        operationData: abi::DeleteOp { entityKey: key }.abi_encode().into(),
    }
}

/// Sign and send an execute batch from `signer`; returns the receipt (on-demand devnets mine at
/// once).
pub async fn send_batch(node: &DevnetHandle, signer: &DevSigner, ops: Vec<Operation>) -> Json {
    let url = node.url();
    let data = execute_calldata(ops);
    let nonce = rpc(
        &url,
        "eth_getTransactionCount",
        json!([signer.address(), "pending"]),
    )
    .await
    .unwrap();
    let nonce = u64::from_str_radix(nonce.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    let raw = signer
        .sign_arkiv_call(node.chain_id(), nonce, data, 100_000_000, 2_000_000_000)
        .unwrap();
    let hash = rpc(&url, "eth_sendRawTransaction", json!([raw]))
        .await
        .expect("accepted");
    for _ in 0..100 {
        let r = rpc(&url, "eth_getTransactionReceipt", json!([hash]))
            .await
            .unwrap();
        if !r.is_null() {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no receipt for {hash}");
}

/// Typed value helpers.
pub fn u256_cell(name: &str, v: u128) -> Attribute {
    cell(name, 4, word_u(v))
}

/// A str cell.
pub fn str_cell(name: &str, v: &str) -> Attribute {
    cell(name, 8, Bytes::from(v.as_bytes().to_vec()))
}

/// The system cells of an SDK create.
pub fn sys_cells(content_type: &str, payload: &[u8]) -> Vec<Attribute> {
    vec![
        cell(
            "$contentType",
            8,
            Bytes::from(content_type.as_bytes().to_vec()),
        ),
        cell("$payload", 7, Bytes::from(payload.to_vec())),
    ]
}

/// Parse a hex quantity.
pub fn q(v: &Json) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex string").trim_start_matches("0x"), 16).expect("hex")
}

/// A bytes1 helper for error checks.
pub fn b1(b: u8) -> FixedBytes<1> {
    FixedBytes::from([b])
}
