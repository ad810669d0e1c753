//! Entry points shared by the ledger's fuzz targets (`fuzz/fuzz_targets/ledger_*.rs`) and their
//! stable seed replay (`tests/it/fuzz_seeds.rs`).
//!
//! Each takes bytes as a node (or a relayer's calldata) would deliver them, returns whether they
//! were accepted, and panics only when an invariant of an accepted input is broken.

use alloy_sol_types::SolCall;

use crate::abi::{self, decode_operations, decode_revert, encode_operation, executeCall};
use crate::codec::TYPE_BYTES;
use crate::codec::TYPE_STR;
use crate::error::LedgerError;
use crate::ops::Operation;
use crate::rpc::{creation_tx_of, decode_answer, query_page_from_json, RpcLedger};
use crate::wire::{entity_from_json, entity_to_json};

/// A JSON-RPC answer to `eth_getTransactionReceipt`, decoded as `RpcWriter::receipt` does.
/// A JSON-RPC error has its revert data decoded (as `eth_call` errors are). Invariants of an
/// accepted receipt: it holds no more events than logs, and every created key is found again
/// by `creation_tx_of` among the same logs (what a verifier uses to find the creating
/// transaction).
pub fn receipt(data: &[u8]) -> bool {
    let result = match decode_answer("eth_getTransactionReceipt", data) {
        Ok(r) => r,
        Err(LedgerError::Reverted(revert)) => {
            let data = revert.data().expect("a decoded revert keeps its data");
            assert_eq!(revert.reason(), decode_revert(data));
            assert!(!revert.reason().is_empty());
            return false;
        }
        Err(_) => return false,
    };
    let Ok(receipt) = RpcLedger::parse_receipt(&result) else {
        return false;
    };
    let logs = result["logs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    assert!(
        receipt.created.len() + receipt.transfers.len() <= logs.len(),
        "more events than logs"
    );
    for created in &receipt.created {
        assert!(
            !matches!(creation_tx_of(logs, created.key), Ok(None)),
            "a created key of the receipt is not found among its logs"
        );
    }
    true
}

/// A JSON-RPC answer to `arkiv_query`, decoded as `RpcLedger::query` does. Invariants of an
/// accepted page: every entity renders to JSON that decodes to the same entity, and the tag
/// rows decoder (`RpcLedger::query_tags_many`) reads an answer only as the general decoder
/// does.
pub fn query_page(data: &[u8]) -> bool {
    if let Some(rows) = crate::rpc::tag_rows::tag_page(data) {
        let general = crate::rpc::decode_query_answer(data)
            .expect("an answer the tag rows decoder reads must decode");
        assert_eq!(rows, general.into(), "the two decoders disagree");
    }
    let Ok(result) = decode_answer("arkiv_query", data) else {
        return false;
    };
    let Ok(page) = query_page_from_json(&result) else {
        return false;
    };
    for entity in &page.entities {
        for with_schema in [false, true] {
            let again = entity_from_json(&entity_to_json(entity, with_schema))
                .expect("a rendered entity must decode");
            assert_eq!(&again, entity, "entity JSON round trip changed the entity");
        }
    }
    true
}

/// Revert data (as carried by a JSON-RPC error), rendered as text by `decode_revert`.
/// Accepted when it is one of the known errors (not `unknown revert` / `empty revert data`).
pub fn revert(data: &[u8]) -> bool {
    let text = decode_revert(data);
    assert!(!text.is_empty(), "revert text is empty");
    !text.starts_with("unknown revert") && !text.starts_with("empty revert data")
}

/// `execute()` calldata, decoded and validated as the node does (`decode_operations`).
/// Invariants of accepted calldata: re-encoding the decoded operations decodes to the same
/// operations; and where the codec is canonical (an operation other than a create, or a create
/// that carries its `$contentType` cell as a str and its `$payload` cell as bytes), every
/// operation re-encodes to the very bytes it was decoded from, and the whole calldata does
/// when its outer `Operation[]` encoding is canonical too.
pub fn execute(data: &[u8]) -> bool {
    let Ok(ops) = decode_operations(data) else {
        return false;
    };
    assert!(!ops.is_empty(), "an empty batch was accepted");
    let again = abi::encode_operations(&ops);
    assert_eq!(
        decode_operations(&again).as_ref(),
        Ok(&ops),
        "encode/decode round trip changed the operations"
    );
    let raw = executeCall::abi_decode_raw(&data[4..]).expect("decoded once already");
    let mut all_canonical = true;
    for (raw_op, op) in raw.ops.iter().zip(&ops) {
        let encoded = encode_operation(op);
        if canonical_form(raw_op, op) {
            assert_eq!(
                &encoded, raw_op,
                "a canonical operation re-encoded to other bytes"
            );
        } else {
            all_canonical &= encoded == *raw_op;
        }
    }
    if all_canonical && raw.abi_encode() == data {
        assert_eq!(
            again.as_ref(),
            data,
            "canonical calldata re-encoded to other bytes"
        );
    }
    true
}

/// Whether re-encoding `op` must give back `raw` byte for byte: always, except for a create
/// whose system cells are absent or typed otherwise than the encoder writes them.
fn canonical_form(raw: &abi::Operation, op: &Operation) -> bool {
    if !matches!(op, Operation::Create(_)) {
        return true;
    }
    let Ok(create) = <abi::Create as alloy_sol_types::SolValue>::abi_decode(&raw.operationData)
    else {
        return false;
    };
    let has = |name: &str, type_id: u8| {
        create.attributes.iter().any(|c| {
            crate::codec::bytes32_to_name(&c.name).as_deref() == Some(name) && c.typeId == type_id
        })
    };
    has(abi::CONTENT_TYPE_ATTRIBUTE, TYPE_STR) && has(abi::PAYLOAD_ATTRIBUTE, TYPE_BYTES)
}
