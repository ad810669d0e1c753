//! Stable replay of the ledger fuzz seed corpora (fuzz/seeds/ledger_*/*) through the same entry
//! functions the cargo-fuzz targets call (`privsvc_ledger::fuzz_entry`).
//!
//! Files named `accept-*` must be accepted, `reject-*` refused; any other file (a minimised
//! crash kept as a regression seed) must only not panic. The seeds that need encoding work are
//! written by `write_generated_seeds` (ignored; run it with `-- --ignored` after a format
//! change, then review the diff).

use std::path::PathBuf;

use alloy_primitives::{Address, Bytes, LogData, B256, I256, U256};
use alloy_sol_types::{SolCall, SolError, SolEvent, SolValue};
use privsvc_ledger::entity_to_json;
use privsvc_ledger::fuzz_entry::{execute, query_page, receipt, revert};
use privsvc_ledger::testing::abi::{self, executeCall};
use privsvc_ledger::{
    encode_operations, ArkivValue, Attribute, Create, CreationFlags, Entity, Operation,
};
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
fn ledger_receipt_seeds() {
    let (accepted, rejected) = replay("ledger_receipt", receipt);
    assert!(
        accepted >= 2 && rejected >= 6,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn ledger_query_page_seeds() {
    let (accepted, rejected) = replay("ledger_query_page", query_page);
    assert!(
        accepted >= 2 && rejected >= 6,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn ledger_revert_seeds() {
    let (accepted, rejected) = replay("ledger_revert", revert);
    assert!(
        accepted >= 4 && rejected >= 3,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn ledger_execute_seeds() {
    let (accepted, rejected) = replay("ledger_execute", execute);
    assert!(
        accepted >= 3 && rejected >= 6,
        "{accepted} accepted, {rejected} rejected"
    );
}

// ----- seed generation -----

fn hex(b: &[u8]) -> String {
    format!("0x{}", alloy_primitives::hex::encode(b))
}

fn write(target: &str, name: &str, data: &[u8]) {
    let dir = seeds_dir(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), data).unwrap();
}

fn write_json(target: &str, name: &str, v: &Value) {
    write(target, name, serde_json::to_string(v).unwrap().as_bytes());
}

fn answer(result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "result": result})
}

fn log(d: &LogData, address: Address, tx: u8) -> Value {
    json!({
        "address": hex(address.as_slice()),
        "topics": d.topics().iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        "data": hex(&d.data),
        "transactionHash": B256::repeat_byte(tx).to_string(),
    })
}

fn full_entity() -> Entity {
    Entity {
        key: B256::repeat_byte(3),
        owner: Some(Address::repeat_byte(0xab)),
        creator: Some(Address::repeat_byte(0xcd)),
        created_at: Some(10),
        updated_at: Some(11),
        expires_at: Some(u64::MAX),
        creation_flags: Some(CreationFlags {
            readonly: true,
            permissionless_extension: false,
        }),
        content_type: Some("application/json".into()),
        payload: Some(b"{\"a\":1}".to_vec()),
        attributes: Some(vec![
            Attribute {
                name: "flag".into(),
                value: ArkivValue::Bool(true),
            },
            Attribute {
                name: "n".into(),
                value: ArkivValue::I32(-7),
            },
            Attribute {
                name: "rank".into(),
                value: ArkivValue::U256(U256::from(7)),
            },
            Attribute {
                name: "price".into(),
                value: ArkivValue::Dec(I256::try_from(-1_500_000_000_000_000_000i128).unwrap()),
            },
            Attribute {
                name: "team".into(),
                value: ArkivValue::Str("red".into()),
            },
            Attribute {
                name: "who".into(),
                value: ArkivValue::Addr(Address::repeat_byte(9)),
            },
            Attribute {
                name: "ref".into(),
                value: ArkivValue::Key(B256::repeat_byte(4)),
            },
            Attribute {
                name: "w".into(),
                value: ArkivValue::Bytes32(B256::repeat_byte(5)),
            },
            Attribute {
                name: "big".into(),
                value: ArkivValue::U64(u64::MAX),
            },
        ]),
    }
}

fn create_op() -> Operation {
    Operation::Create(Create {
        salt: 42,
        expires_at: 0,
        min_lifetime: 1800,
        flags: CreationFlags::default(),
        content_type: "application/json".into(),
        payload: b"{\"x\":1}".to_vec(),
        attributes: vec![
            Attribute {
                name: "project".into(),
                value: ArkivValue::Str("notes".into()),
            },
            Attribute {
                name: "tag".into(),
                value: ArkivValue::Str("a".into()),
            },
        ],
    })
}

fn raw_execute(ops: Vec<abi::Operation>) -> Vec<u8> {
    executeCall { ops }.abi_encode()
}

fn raw_op(tag: u8, data: Vec<u8>) -> abi::Operation {
    abi::Operation {
        operation: tag,
        operationData: data.into(),
    }
}

fn cell(name: &str, type_id: u8, value: Vec<u8>) -> abi::Attribute {
    let mut w = [0u8; 32];
    w[..name.len()].copy_from_slice(name.as_bytes());
    abi::Attribute {
        name: B256::from(w),
        typeId: type_id,
        value: Bytes::from(value),
    }
}

#[test]
#[ignore = "writes fuzz/seeds; run by hand after a format change"]
fn write_generated_seeds() {
    // ledger_receipt
    let key = B256::repeat_byte(9);
    let relayer = Address::repeat_byte(0xaa);
    let created = abi::EntityCreated {
        entityKey: key,
        owner: relayer,
        expiresAt: 77,
        creationFlags: 0,
    }
    .encode_log_data();
    let moved = abi::OwnershipTransferred {
        entityKey: key,
        previousOwner: relayer,
        newOwner: Address::repeat_byte(0xbb),
    }
    .encode_log_data();
    let receipt = |status: &str, logs: Vec<Value>| {
        json!({
            "transactionHash": B256::repeat_byte(5).to_string(),
            "blockNumber": "0x10",
            "status": status,
            "gasUsed": "0x5208",
            "logs": logs,
        })
    };
    let good = receipt(
        "0x1",
        vec![
            log(&created, abi::ARKIV_ADDRESS, 5),
            log(&created, Address::repeat_byte(1), 5),
            log(&moved, abi::ARKIV_ADDRESS, 5),
        ],
    );
    write_json(
        "ledger_receipt",
        "accept-create-and-transfer.json",
        &answer(good.clone()),
    );
    write_json(
        "ledger_receipt",
        "accept-reverted.json",
        &answer(receipt("0x0", vec![])),
    );
    let mut short_topic = good.clone();
    short_topic["logs"][0]["topics"][1] = json!("0x1234");
    write_json(
        "ledger_receipt",
        "reject-topic-not-32-bytes.json",
        &answer(short_topic),
    );
    let mut bad_data = good.clone();
    bad_data["logs"][0]["data"] = json!("0xzz");
    write_json(
        "ledger_receipt",
        "reject-log-data-not-hex.json",
        &answer(bad_data),
    );
    let mut no_status = good.clone();
    no_status.as_object_mut().unwrap().remove("status");
    write_json(
        "ledger_receipt",
        "reject-without-status.json",
        &answer(no_status),
    );
    let mut big_block = good;
    big_block["blockNumber"] = json!("0x10000000000000000");
    write_json(
        "ledger_receipt",
        "reject-block-beyond-u64.json",
        &answer(big_block),
    );
    write_json(
        "ledger_receipt",
        "reject-null-result.json",
        &answer(Value::Null),
    );
    let not_found = abi::EntityNotFound { entityKey: key }.abi_encode();
    write_json(
        "ledger_receipt",
        "reject-error-with-revert-data.json",
        &json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 3, "message": "execution reverted", "data": hex(&not_found)}}),
    );
    write_json(
        "ledger_receipt",
        "reject-error-with-nested-revert-data.json",
        &json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "x", "data": {"data": hex(&not_found)}}}),
    );
    write("ledger_receipt", "reject-not-json.txt", b"<html>502</html>");

    // ledger_query_page
    let entity = full_entity();
    write_json(
        "ledger_query_page",
        "accept-full-entity-with-cursor.json",
        &answer(
            json!({"data": [entity_to_json(&entity, true)], "blockNumber": "0x20", "cursor": "b64:abc"}),
        ),
    );
    write_json(
        "ledger_query_page",
        "accept-empty-page.json",
        &answer(json!({"data": [], "blockNumber": 32})),
    );
    let mut page = json!({"data": [entity_to_json(&entity, false)], "blockNumber": "0x20"});
    write_json(
        "ledger_query_page",
        "accept-without-schema.json",
        &answer(page.clone()),
    );
    let variants: [(&str, &str, Value); 7] = [
        ("reject-entity-without-key.json", "key", Value::Null),
        (
            "reject-owner-19-bytes.json",
            "owner",
            json!(hex(&[1u8; 19])),
        ),
        ("reject-flags-not-a-byte.json", "creationFlags", json!(256)),
        ("reject-payload-odd-hex.json", "payload", json!("0x123")),
        (
            "reject-attribute-unknown-type.json",
            "attributes",
            json!([{"name": "a", "type": "float", "value": "1.5"}]),
        ),
        (
            "reject-u64-attribute-too-large.json",
            "attributes",
            json!([{"name": "a", "type": "uint64", "value": "18446744073709551616"}]),
        ),
        ("reject-expires-negative.json", "expiresAt", json!(-1)),
    ];
    for (name, field, v) in variants {
        let mut p = page.clone();
        p["data"][0][field] = v;
        write_json("ledger_query_page", name, &answer(p));
    }
    // A tags-only page, as a scan's first listing reads it (the tag rows decoder's shape).
    let tag_row = json!({
        "key": B256::repeat_byte(4).to_string(),
        "creator": Address::repeat_byte(5).to_string(),
        "createdAt": "0x4a",
        "expiresAt": "0x1c6a",
        "attributes": [{"name": "tag", "type": "str", "value": "A".repeat(56) + "AAA="}],
    });
    write_json(
        "ledger_query_page",
        "accept-tags-only-rows.json",
        &answer(
            json!({"data": [tag_row.clone(), {"key": B256::repeat_byte(6).to_string(), "attributes": []}], "blockNumber": "0x772", "cursor": "b64:RWkl5geOeesAAAAAAAAADg"}),
        ),
    );
    let mut bad_tag_row = tag_row;
    bad_tag_row["createdAt"] = json!("0x");
    write_json(
        "ledger_query_page",
        "reject-tags-only-row-empty-quantity.json",
        &answer(json!({"data": [bad_tag_row], "blockNumber": "0x772"})),
    );
    page.as_object_mut().unwrap().remove("blockNumber");
    write_json(
        "ledger_query_page",
        "reject-without-block-number.json",
        &answer(page),
    );
    write_json(
        "ledger_query_page",
        "reject-answer-without-result.json",
        &json!({"jsonrpc": "2.0", "id": 1}),
    );

    // ledger_revert
    write(
        "ledger_revert",
        "accept-error-string.bin",
        &abi::error_string_revert("not allowed"),
    );
    write(
        "ledger_revert",
        "accept-panic.bin",
        &abi::Panic {
            code: U256::from(0x11),
        }
        .abi_encode(),
    );
    write("ledger_revert", "accept-entity-not-found.bin", &not_found);
    write(
        "ledger_revert",
        "accept-not-owner.bin",
        &abi::NotOwner {
            entityKey: key,
            caller: relayer,
            owner: Address::repeat_byte(2),
        }
        .abi_encode(),
    );
    write(
        "ledger_revert",
        "accept-invalid-value-type.bin",
        &abi::InvalidValueType {
            name: cell("rank", 0, vec![]).name,
            typeId: 3,
        }
        .abi_encode(),
    );
    write("ledger_revert", "reject-empty.bin", b"");
    write(
        "ledger_revert",
        "reject-unknown-selector.bin",
        &[0xde, 0xad, 0xbe, 0xef, 0],
    );
    let mut truncated = abi::error_string_revert("not allowed").to_vec();
    truncated.truncate(40);
    write(
        "ledger_revert",
        "reject-truncated-error-string.bin",
        &truncated,
    );

    // ledger_execute
    write(
        "ledger_execute",
        "accept-create.bin",
        &encode_operations(&[create_op()]),
    );
    let all = vec![
        create_op(),
        Operation::Patch {
            key,
            mutations: vec![
                ("tag".into(), None),
                ("team".into(), Some(ArkivValue::Str("blue".into()))),
            ],
        },
        Operation::Extend {
            key,
            expires_at: 1000,
            min_lifetime: 10,
        },
        Operation::Transfer {
            key,
            new_owner: Address::repeat_byte(7),
        },
        Operation::Delete { key },
    ];
    write(
        "ledger_execute",
        "accept-all-five-operations.bin",
        &encode_operations(&all),
    );
    // A create without system cells decodes (content type and payload empty).
    let bare = abi::Create {
        salt: 1,
        expiresAt: 0,
        minLifetime: 5,
        creationFlags: 3,
        attributes: vec![cell("a", 3, U256::from(5).to_be_bytes::<32>().to_vec())],
    };
    write(
        "ledger_execute",
        "accept-create-without-system-cells.bin",
        &raw_execute(vec![raw_op(1, bare.abi_encode())]),
    );
    write(
        "ledger_execute",
        "reject-empty-batch.bin",
        &raw_execute(vec![]),
    );
    write("ledger_execute", "reject-too-short.bin", &[0x49, 0x65]);
    let mut wrong_selector = encode_operations(&[create_op()]).to_vec();
    wrong_selector[0] ^= 1;
    write(
        "ledger_execute",
        "reject-unknown-selector.bin",
        &wrong_selector,
    );
    write(
        "ledger_execute",
        "reject-unknown-tag.bin",
        &raw_execute(vec![raw_op(6, abi::Delete { entityKey: key }.abi_encode())]),
    );
    let mut unsorted = bare.clone();
    unsorted.attributes = vec![
        cell("b", 1, U256::from(1).to_be_bytes::<32>().to_vec()),
        cell("a", 1, U256::from(1).to_be_bytes::<32>().to_vec()),
    ];
    write(
        "ledger_execute",
        "reject-attributes-not-sorted.bin",
        &raw_execute(vec![raw_op(1, unsorted.abi_encode())]),
    );
    let mut tombstone = bare.clone();
    tombstone.attributes = vec![cell("a", 0, vec![])];
    write(
        "ledger_execute",
        "reject-tombstone-in-create.bin",
        &raw_execute(vec![raw_op(1, tombstone.abi_encode())]),
    );
    let mut flags = bare.clone();
    flags.creationFlags = 4;
    write(
        "ledger_execute",
        "reject-reserved-flags.bin",
        &raw_execute(vec![raw_op(1, flags.abi_encode())]),
    );
    let mut upper = bare.clone();
    upper.attributes = vec![cell("Ab", 1, U256::from(1).to_be_bytes::<32>().to_vec())];
    write(
        "ledger_execute",
        "reject-upper-case-name.bin",
        &raw_execute(vec![raw_op(1, upper.abi_encode())]),
    );
    let mut system = bare;
    system.attributes = vec![cell("$owner", 9, vec![0; 32])];
    write(
        "ledger_execute",
        "reject-system-attribute.bin",
        &raw_execute(vec![raw_op(1, system.abi_encode())]),
    );
    let mut padded = abi::Delete { entityKey: key }.abi_encode();
    padded.extend_from_slice(&[0; 32]);
    write(
        "ledger_execute",
        "reject-non-canonical-delete.bin",
        &raw_execute(vec![raw_op(5, padded)]),
    );
    write(
        "ledger_execute",
        "reject-transfer-to-zero.bin",
        &raw_execute(vec![raw_op(
            4,
            abi::TransferOwnership {
                entityKey: key,
                newOwner: Address::ZERO,
            }
            .abi_encode(),
        )]),
    );
}
