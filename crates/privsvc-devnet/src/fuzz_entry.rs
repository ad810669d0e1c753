//! Entry points shared by the devnet's fuzz targets (`fuzz/fuzz_targets/devnet_*.rs`) and their
//! stable seed replay (`tests/it/fuzz_seeds.rs`).
//!
//! Each takes bytes as a JSON-RPC client would send them, returns whether they were accepted,
//! and panics only when an invariant of an accepted input is broken.

use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{keccak256, U256};

use crate::chain::{decode_raw, Chain, Genesis, Params};
use crate::decode::{decode_call, Call, NodeOp, MAX_CELLS, MAX_PAYLOAD_BYTES};
use crate::query::parser::{MAX_PREDICATES, MAX_QUERY_BYTES};
use crate::query::{lexer::tokenize, parse};
use crate::types::Account;

/// A query text (`arkiv_query`'s first parameter; non-UTF-8 is refused as serde would).
/// Invariants: every error position lies within the text; an accepted query has at most
/// [`MAX_PREDICATES`] predicates, and its canonical text (when it fits the size limit) parses
/// to the same expression and renders to the same text again.
pub fn query(data: &[u8]) -> bool {
    let Ok(src) = std::str::from_utf8(data) else {
        return false;
    };
    if let Err(e) = tokenize(src) {
        assert!(e.position.is_none_or(|p| p <= src.len()), "lexer position");
    }
    let expr = match parse(src) {
        Ok(e) => e,
        Err(e) => {
            assert!(
                e.position.is_none_or(|p| p <= src.len()),
                "error position {:?} beyond the text ({} bytes)",
                e.position,
                src.len()
            );
            return false;
        }
    };
    assert!(expr.predicate_count() <= MAX_PREDICATES);
    let canonical = expr.to_string();
    if canonical.len() <= MAX_QUERY_BYTES {
        let again = parse(&canonical).expect("the canonical text of a query must parse");
        assert_eq!(again, expr, "canonical text parsed to another expression");
        assert_eq!(again.to_string(), canonical, "canonical text is not stable");
    }
    true
}

/// Balance given to the sender of a fuzzed transaction (10^21 wei).
const FUZZ_BALANCE: u128 = 1_000_000_000_000_000_000_000;

/// A raw signed transaction (`eth_sendRawTransaction`), decoded as the node does, then
/// submitted to a fresh in-memory chain (chain id 1337) on which its sender, whoever the
/// signature recovers to, holds 10^21 wei, and mined. Invariants of an accepted (decoded)
/// transaction: its hash is keccak256 of exactly the bytes received (so the hash the node
/// reports is the one the sender computed), and they are the canonical EIP-2718 encoding of what
/// was decoded; submitting and mining never panic; a transaction the pool took with the
/// sender's next nonce is mined with a receipt, and the sender never ends up richer.
pub fn raw_transaction(data: &[u8]) -> bool {
    let Ok(rec) = decode_raw(data) else {
        return false;
    };
    assert_eq!(
        rec.hash,
        keccak256(data),
        "hash is not keccak256 of the raw bytes"
    );
    let mut buf = data;
    let env =
        <alloy_consensus::TxEnvelope as alloy_eips::eip2718::Decodable2718>::decode_2718(&mut buf)
            .expect("decoded once already");
    assert_eq!(
        env.encoded_2718(),
        data,
        "accepted transaction bytes are not canonical"
    );
    assert!(matches!(rec.tx_type, 0 | 2));

    let funded = Account {
        balance: U256::from(FUZZ_BALANCE),
        ..Account::default()
    };
    let genesis = Genesis {
        number: 0,
        timestamp: 1_700_000_000,
        accounts: vec![(rec.from, funded)],
        entities: Vec::new(),
    };
    let params = Params {
        chain_id: 1337,
        gas_limit: 30_000_000,
        base_fee: 7,
    };
    let mut chain = Chain::open(params, genesis, None).expect("an in-memory chain opens");
    if chain.submit_raw(data).is_ok() {
        chain
            .mine(1_700_000_012)
            .expect("mining an in-memory chain works");
        if rec.nonce == 0 {
            let mined = chain.tx(&rec.hash).expect("a pooled transaction is known");
            assert!(
                mined.receipt.is_some(),
                "the next-nonce transaction was not mined"
            );
        }
        assert!(
            chain.account(&rec.from).balance <= U256::from(FUZZ_BALANCE),
            "the sender ended up richer"
        );
    }
    true
}

/// Calldata sent to the Arkiv address (`eth_call`, `eth_estimateGas`, a transaction's input),
/// decoded and validated as the node does. Invariants of accepted calldata: a batch is never
/// empty, no operation holds more than [`MAX_CELLS`] cells, and payloads stay within
/// [`MAX_PAYLOAD_BYTES`].
pub fn calldata(data: &[u8]) -> bool {
    let Ok(call) = decode_call(data) else {
        return false;
    };
    if let Call::Execute(ops) = call {
        assert!(!ops.is_empty(), "an empty batch was accepted");
        for op in &ops {
            match op {
                NodeOp::Create { attrs, payload, .. } => {
                    assert!(attrs.len() <= MAX_CELLS);
                    assert!(payload.len() <= MAX_PAYLOAD_BYTES);
                }
                NodeOp::Patch {
                    set,
                    unset,
                    payload,
                    ..
                } => {
                    assert!(set.len() + unset.len() <= MAX_CELLS);
                    assert!(payload
                        .as_ref()
                        .is_none_or(|p| p.len() <= MAX_PAYLOAD_BYTES));
                }
                _ => {}
            }
        }
    }
    true
}

/// Entities of the node that [`rpc_request`] answers from (three, so a page of one has a cursor).
fn fuzz_entities() -> Vec<crate::entity::EntityData> {
    (1u8..=3)
        .map(|i| crate::entity::EntityData {
            key: alloy_primitives::B256::repeat_byte(i),
            owner: alloy_primitives::Address::repeat_byte(i),
            creator: alloy_primitives::Address::repeat_byte(0xcc),
            created_at: 0,
            updated_at: 0,
            expires_at: 1_000_000,
            flags: 0,
            content_type: "text/plain".into(),
            payload: vec![i; 4].into(),
            attrs: vec![crate::entity::StoredAttr {
                name: "project".into(),
                type_id: crate::value::type_id::STR,
                value: b"p".to_vec().into(),
            }],
        })
        .collect()
}

/// A JSON-RPC request body (one request or a batch) answered by a fresh in-memory node (chain
/// id 1337, mining on demand) holding three entities, through the same function as the HTTP
/// handler. Invariants for every input: the answer is a JSON-RPC 2.0 object (an array of as
/// many for a non-empty batch), each with exactly one of `result` and `error`, the request's
/// `id` echoed, and an error with an integer code and a message; a body that is not JSON gets
/// -32700. For an `arkiv_query` answered with a result: a cursor it was given decodes, under the
/// query's binding, to an entity id that encodes back to the same text (cursors are canonical),
/// and the cursor it returns decodes under the same binding.
pub fn rpc_request(data: &[u8]) -> bool {
    let genesis = Genesis {
        number: 0,
        timestamp: 1_700_000_000,
        accounts: Vec::new(),
        entities: fuzz_entities(),
    };
    let params = Params {
        chain_id: 1337,
        gas_limit: 30_000_000,
        base_fee: 7,
    };
    let chain = Chain::open(params, genesis, None).expect("an in-memory chain opens");
    let node = crate::rpc::Node {
        chain: std::sync::Mutex::new(chain),
        on_demand: true,
        filters: std::sync::Mutex::new(Default::default()),
    };
    let text = crate::rpc::reply(&node, data);
    let reply: serde_json::Value =
        serde_json::from_str(&text).expect("every answer of the devnet is JSON");
    let request: serde_json::Value = match serde_json::from_slice(data) {
        Ok(v) => v,
        Err(_) => {
            assert_eq!(reply["error"]["code"], -32700, "not JSON: {reply}");
            assert!(reply["id"].is_null());
            return false;
        }
    };
    match (&request, &reply) {
        (serde_json::Value::Array(reqs), serde_json::Value::Array(answers)) => {
            assert!(
                !reqs.is_empty(),
                "an empty batch was answered with an array"
            );
            assert_eq!(reqs.len(), answers.len(), "one answer per request");
            let mut ok = false;
            for (req, answer) in reqs.iter().zip(answers) {
                ok |= check_answer(req, answer);
            }
            ok
        }
        (serde_json::Value::Array(reqs), answer) => {
            assert!(reqs.is_empty(), "a batch got a single answer");
            assert_eq!(answer["error"]["code"], -32600);
            false
        }
        (req, answer) => check_answer(req, answer),
    }
}

/// The invariants of one answer to one request; true when it carries a result.
fn check_answer(req: &serde_json::Value, answer: &serde_json::Value) -> bool {
    assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
    let id = req.get("id").cloned().unwrap_or(serde_json::Value::Null);
    assert_eq!(answer["id"], id, "id not echoed");
    let (result, error) = (answer.get("result"), answer.get("error"));
    assert!(
        result.is_some() != error.is_some(),
        "exactly one of result and error: {answer}"
    );
    if let Some(e) = error {
        assert!(e["code"].is_i64(), "error code: {e}");
        assert!(
            e["message"].as_str().is_some_and(|m| !m.is_empty()),
            "error message: {e}"
        );
        return false;
    }
    if req["method"] == "arkiv_query" {
        check_cursors(req, answer);
    }
    true
}

/// Cursor invariants of an answered `arkiv_query`.
fn check_cursors(req: &serde_json::Value, answer: &serde_json::Value) {
    use crate::query::cursor;
    let text = req["params"][0]
        .as_str()
        .expect("answered queries have a text");
    let opts = &req["params"][1];
    let block = crate::rpc::parse_u64(&answer["result"]["blockNumber"]).expect("blockNumber");
    let fp = crate::select::Projection::from_json(opts.get("select"))
        .expect("answered queries have a valid selection")
        .fingerprint();
    if let Some(given) = opts.get("cursor").and_then(|c| c.as_str()) {
        let id = cursor::decode(given, text, block, &fp).expect("an accepted cursor decodes");
        assert_eq!(
            cursor::encode(text, block, &fp, id),
            given,
            "an accepted cursor is not canonical"
        );
    }
    if let Some(next) = answer["result"].get("cursor") {
        let next = next.as_str().expect("cursors are strings");
        cursor::decode(next, text, block, &fp).expect("a returned cursor decodes");
    }
}
