//! The Arkiv node's errors (conformance/arkiv/errors.json) as a node answers them over
//! JSON-RPC, read by the one decoder every reader and writer uses: revert data of every error
//! the node returns becomes `LedgerError::Reverted` with the error's selector and name; a
//! query's error codes (-32001 to -32006, -32602) stay the node's error with its code, never a
//! transaction refusal, even when the message quotes refusal words.

use std::path::PathBuf;

use privsvc_ledger::decode_answer;
use privsvc_ledger::LedgerError;
use serde_json::{json, Value};

fn errors() -> Vec<Value> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../conformance/arkiv/errors.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str::<Vec<Value>>(&text).unwrap()
}

fn answer(error: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "error": error})
        .to_string()
        .into_bytes()
}

#[test]
fn the_arkiv_nodes_revert_data_is_a_typed_revert() {
    let cases: Vec<Value> = errors()
        .into_iter()
        .filter(|c| c["kind"] == "revert_data")
        .collect();
    assert!(cases.len() >= 10, "{}", cases.len());
    for c in cases {
        let data = c["data"].as_str().unwrap();
        let name = c["error"].as_str().unwrap().trim_end_matches("(string)");
        // The node's execution error (code 3), for a call and for a gas estimate; also with
        // the data inside an object, as some proxies wrap it.
        for (method, error) in [
            (
                "eth_call",
                json!({"code": 3, "message": "execution reverted", "data": data}),
            ),
            (
                "eth_estimateGas",
                json!({"code": -32000, "message": "execution reverted", "data": {"data": data}}),
            ),
        ] {
            match decode_answer(method, &answer(error)) {
                Err(LedgerError::Reverted(r)) => {
                    assert!(
                        r.reason().starts_with(&format!("{name}(")),
                        "{}: {r}",
                        c["id"]
                    );
                    assert_eq!(
                        r.data().map(hex::encode),
                        Some(data.trim_start_matches("0x").to_string())
                    );
                    assert_eq!(
                        r.selector().map(|s| s.to_vec()),
                        r.data().map(|d| d[..4].to_vec())
                    );
                }
                other => panic!("{}: {other:?}", c["id"]),
            }
        }
    }
}

#[test]
fn the_arkiv_nodes_query_error_codes_stay_query_errors() {
    let cases: Vec<Value> = errors()
        .into_iter()
        .filter(|c| c["kind"] == "rpc_error_code")
        .collect();
    assert_eq!(cases.len(), 7);
    for c in cases {
        let code = c["code"].as_i64().unwrap();
        let example = c["examples"][0].as_str().unwrap();
        let data = c
            .get("example_data")
            .cloned()
            .unwrap_or_else(|| json!({"position": 0, "message": c["meaning"]}));
        // A message that quotes the query, refusal words included: still the query's error.
        for message in [
            format!("{}: {example}", c["meaning"].as_str().unwrap()),
            format!("unexpected token in {example:?} near 'nonce too low'"),
        ] {
            let error = json!({"code": code, "message": message, "data": data});
            match decode_answer("arkiv_query", &answer(error)) {
                Err(LedgerError::Rpc(node)) => {
                    assert_eq!(node.code, code, "{}", c["id"]);
                    assert_eq!(node.message, message);
                    assert_eq!(node.data.as_ref(), Some(&data));
                }
                other => panic!("{}: {other:?}", c["id"]),
            }
        }
    }
}
