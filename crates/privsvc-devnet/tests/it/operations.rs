//! The node-side decode rules and revert encodings of the `operations` and `errors` vector
//! sections, exercised through `eth_call` (revert data in `error.data`) and real transactions.

use alloy_primitives::{Address, Bytes, B256, U256};
use alloy_sol_types::SolError;
use privsvc_devnet::testing::abi::{self, Operation};
use privsvc_devnet::testing::revert::Revert;
use privsvc_devnet::{DevSigner, Devnet, DevnetConfig, ARKIV_ADDRESS};
use serde_json::{json, Value as Json};

use crate::common::*;

async fn revert_of(url: &str, from: Address, data: Bytes) -> String {
    let e = rpc(
        url,
        "eth_call",
        json!([{"from": from, "to": ARKIV_ADDRESS, "data": data}, "latest"]),
    )
    .await
    .expect_err("must revert");
    assert_eq!(e.code, 3, "{e:?}");
    e.data.unwrap().as_str().unwrap().to_string()
}

fn hexd(v: Vec<u8>) -> String {
    format!("0x{}", hex::encode(v))
}

#[tokio::test]
async fn decode_rules_over_eth_call() {
    let node = Devnet::start(DevnetConfig::on_demand()).await.unwrap();
    let url = node.url();
    let a = DevSigner::dev(0).address();
    let k = B256::repeat_byte(0x09);
    let sys = || sys_cells("text/plain", b"hi");
    let cases: Vec<(&str, Bytes, String)> = vec![
        (
            "op-034",
            execute_calldata(vec![create_op(1, 0, 10, 0b100, sys())]),
            hexd(abi::ReservedCreationFlags { flags: 4 }.abi_encode()),
        ),
        (
            "op-035",
            execute_calldata(vec![create_op(1, 0, 10, 0x80, sys())]),
            hexd(abi::ReservedCreationFlags { flags: 0x80 }.abi_encode()),
        ),
        (
            "op-036",
            execute_calldata(vec![create_op(1, 0, 10, 0xff, sys())]),
            hexd(abi::ReservedCreationFlags { flags: 0xff }.abi_encode()),
        ),
        (
            "op-037",
            execute_calldata(vec![create_op(
                1,
                0,
                10,
                0,
                vec![cell("gone", 0, Bytes::new())],
            )]),
            hexd(
                abi::TombstoneInCreate {
                    name: name32("gone"),
                }
                .abi_encode(),
            ),
        ),
        (
            "op-041",
            execute_calldata(vec![patch_op(k, vec![])]),
            hexd(abi::EmptyMutations { entityKey: k }.abi_encode()),
        ),
        (
            "op-042",
            execute_calldata(vec![transfer_op(k, Address::ZERO)]),
            hexd(abi::TransferToZeroAddress { entityKey: k }.abi_encode()),
        ),
        (
            "op-043",
            execute_calldata(vec![]),
            hexd(abi::EmptyBatch {}.abi_encode()),
        ),
        (
            "op-044",
            execute_calldata(vec![Operation {
                operation: 99,
                operationData: Bytes::new(),
            }]),
            hexd(abi::InvalidOpType { op: 99 }.abi_encode()),
        ),
        (
            "op-045",
            execute_calldata(vec![Operation {
                operation: 5,
                operationData: [k.as_slice(), &[0u8; 32]].concat().into(),
            }]),
            hexd(abi::NonCanonicalOperationData { op: 5 }.abi_encode()),
        ),
        (
            "op-047",
            execute_calldata(vec![Operation {
                operation: 2,
                operationData: alloy_sol_types::SolValue::abi_encode(&abi::PatchOp {
                    entityKey: k,
                    mutations: vec![str_cell("b", "1"), str_cell("a", "1")],
                })
                .into(),
            }]),
            hexd(abi::AttributesNotSorted {}.abi_encode()),
        ),
        (
            "op-048",
            execute_calldata(vec![Operation {
                operation: 2,
                operationData: alloy_sol_types::SolValue::abi_encode(&abi::PatchOp {
                    entityKey: k,
                    mutations: vec![str_cell("b", "1"), str_cell("b", "2")],
                })
                .into(),
            }]),
            hexd(abi::AttributesNotSorted {}.abi_encode()),
        ),
        (
            "op-051",
            execute_calldata(vec![create_op(
                1,
                0,
                10,
                0,
                (0..33)
                    .map(|i| str_cell(&format!("a{i:02}"), "x"))
                    .collect(),
            )]),
            hexd(
                abi::TooManyAttributes {
                    count: U256::from(33),
                    max: U256::from(32),
                }
                .abi_encode(),
            ),
        ),
        (
            "op-052",
            execute_calldata(vec![create_op(
                1,
                0,
                10,
                0,
                vec![cell("n", 2, word_u(u128::MAX))],
            )]),
            hexd(
                abi::InvalidValueType {
                    name: name32("n"),
                    typeId: 2,
                }
                .abi_encode(),
            ),
        ),
        (
            "op-052b",
            execute_calldata(vec![create_op(
                1,
                0,
                10,
                0,
                vec![cell("n", 7, Bytes::from_static(b"x"))],
            )]),
            hexd(
                abi::InvalidValueType {
                    name: name32("n"),
                    typeId: 7,
                }
                .abi_encode(),
            ),
        ),
        (
            "err-31",
            execute_calldata(vec![create_op(
                1,
                0,
                10,
                0,
                vec![cell("$owner", 9, word_u(1))],
            )]),
            hexd(
                abi::SystemAttributeNotWritable {
                    name: name32("$owner"),
                }
                .abi_encode(),
            ),
        ),
        (
            "err-29",
            execute_calldata(vec![create_op(1, 0, 10, 0, vec![str_cell("testIng", "x")])]),
            hexd(
                abi::Ident32InvalidByte {
                    position: U256::from(4),
                    value: b1(b'I'),
                }
                .abi_encode(),
            ),
        ),
        (
            "ident-nul",
            execute_calldata(vec![create_op(1, 0, 10, 0, vec![str_cell("a\0b", "x")])]),
            hexd(
                abi::Ident32InvalidByte {
                    position: U256::from(1),
                    value: b1(0),
                }
                .abi_encode(),
            ),
        ),
        (
            "ident-empty",
            execute_calldata(vec![create_op(1, 0, 10, 0, vec![str_cell("", "x")])]),
            hexd(abi::Ident32Empty {}.abi_encode()),
        ),
    ];
    for (id, data, want) in cases {
        assert_eq!(revert_of(&url, a, data).await, want, "{id}");
    }
    // Error(string) cases: undecodable delete data, unknown selector, too-short calldata.
    let err_string = &hexd(alloy_sol_types::Revert::SELECTOR.to_vec())[..10];
    for (id, data) in [
        (
            "op-046",
            execute_calldata(vec![Operation {
                operation: 5,
                operationData: Bytes::from_static(&[0xab, 0xcd]),
            }]),
        ),
        (
            "op-049",
            Bytes::from_static(&[0xde, 0xad, 0xbe, 0xef, 0x00]),
        ),
        ("op-050", Bytes::from_static(&[0x01, 0x02])),
    ] {
        assert!(
            revert_of(&url, a, data).await.starts_with(err_string),
            "{id}"
        );
    }
    // op-038..040: valid creates and patches simulate fine and return the created keys.
    let ok = rpc(&url, "eth_call", json!([{"from": a, "to": ARKIV_ADDRESS,
        "data": execute_calldata(vec![create_op(0, 0, 10, 3, { let mut c = sys(); c.push(u256_cell("rank", 3)); c })])}, "latest"]))
        .await
        .unwrap();
    let keys: Vec<B256> = alloy_sol_types::SolValue::abi_decode(
        &hex::decode(ok.as_str().unwrap().trim_start_matches("0x")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        keys,
        vec![privsvc_devnet::testing::exec::derive_key(
            node.chain_id(),
            a,
            0,
            0
        )]
    );
    node.shutdown().await;
}

#[test]
fn revert_data_vectors() {
    let h = |s: &Json| s.as_str().unwrap().parse::<B256>().unwrap();
    let ad = |s: &Json| s.as_str().unwrap().parse::<Address>().unwrap();
    let n = |s: &Json| s.as_str().unwrap().parse::<u64>().unwrap();
    let mut checked = 0;
    for c in vectors("errors") {
        match c["kind"].as_str().unwrap() {
            "revert_data" => {
                let a = c["args"].as_array().unwrap();
                let r = match c["error"].as_str().unwrap() {
                    "EntityNotFound" => Revert::NotFound(h(&a[0])),
                    "NotOwner" => Revert::NotOwner(h(&a[0]), ad(&a[1]), ad(&a[2])),
                    "EntityExpired" => Revert::Expired(h(&a[0]), n(&a[1])),
                    "ExpiryNotExtended" => Revert::NotExtended(h(&a[0]), n(&a[1]), n(&a[2])),
                    "TooManyAttributes" => {
                        Revert::TooManyAttributes(n(&a[0]) as usize, n(&a[1]) as usize)
                    }
                    "Ident32InvalidByte" => Revert::IdentInvalidByte(
                        n(&a[0]) as usize,
                        u8::from_str_radix(a[1].as_str().unwrap().trim_start_matches("0x"), 16)
                            .unwrap(),
                    ),
                    "ReservedCreationFlags" => Revert::ReservedFlags(n(&a[0]) as u8),
                    "SystemAttributeNotWritable" => Revert::SystemNotWritable(h(&a[0])),
                    "TombstoneInCreate" => Revert::TombstoneInCreate(h(&a[0])),
                    "Error(string)" => Revert::Message(a[0].as_str().unwrap().to_string()),
                    other => panic!("unhandled {other}"),
                };
                assert_eq!(json!(r.data()), c["data"], "{}", c["id"]);
                checked += 1;
            }
            "custom_error" => {
                // Selectors of the node's error set (recomputed from the sol! definitions).
                let sig = c["signature"].as_str().unwrap();
                let sel = alloy_primitives::keccak256(sig.as_bytes());
                assert_eq!(
                    hexd(sel[..4].to_vec()),
                    c["selector"].as_str().unwrap(),
                    "{sig}"
                );
                checked += 1;
            }
            _ => {}
        }
    }
    assert!(checked >= 30);
}

#[tokio::test]
async fn calldata_write_path_vector() {
    // op-061: create(minLifetime 50, payload "hello", no $contentType) by 0xAA…AA on chain 1 at
    // block 10, start nonce 0 -> key 0x69c2…, expires_at 60, empty content type.
    let case = vectors("operations")
        .into_iter()
        .find(|c| c["id"] == "op-061")
        .unwrap();
    let sender = Address::repeat_byte(0xaa);
    let mut config = DevnetConfig::on_demand();
    config.chain_id = 1;
    config.start_block = 9;
    config.prefund = vec![(sender, U256::from(10u64).pow(U256::from(18u64)))];
    let node = Devnet::start(config).await.unwrap();
    let data: Bytes = case["calldata"].as_str().unwrap().parse().unwrap();
    let hash = node
        .send_impersonated(sender, ARKIV_ADDRESS, data, None)
        .unwrap();
    let r = rpc(&node.url(), "eth_getTransactionReceipt", json!([hash]))
        .await
        .unwrap();
    assert_eq!(q(&r["blockNumber"]), 10);
    assert_eq!(r["logs"][0]["topics"][1], case["expect"]["key"]);
    let e = rpc(
        &node.url(),
        "arkiv_getEntity",
        json!([case["expect"]["key"]]),
    )
    .await
    .unwrap();
    assert_eq!(
        q(&e["expiresAt"]),
        case["expect"]["expires_at"].as_u64().unwrap()
    );
    assert_eq!(e["payload"], json!(Bytes::from_static(b"hello")));
    assert_eq!(e["contentType"], "");
    assert_eq!(
        e["owner"].as_str().unwrap().to_lowercase(),
        case["expect"]["owner"]
    );
    // The vectors' pinned operationData encodings decode on the node and re-encode canonically.
    for c in vectors("operations") {
        if let Some(cd) = c["calldata"].as_str() {
            let raw = hex::decode(cd.trim_start_matches("0x")).unwrap();
            let decoded = privsvc_devnet::testing::decode::decode_call(&raw);
            assert!(decoded.is_ok(), "{}: {decoded:?}", c["id"]);
        }
    }
    node.shutdown().await;
}

/// The ledger crate's decoder (what clients and relayers check their own calldata with) and the
/// node refuse the same cell types: `bytes` (typeId 7) is for `$payload` only, `$payload` is
/// `bytes`, `$contentType` is `str`; a tombstone may still unset `$payload` in a patch.
#[test]
fn the_ledger_decoder_and_the_node_agree_on_cell_types() {
    let ct = |t: u8, v: &'static [u8]| cell("$contentType", t, Bytes::from_static(v));
    let payload = |t: u8, v: &'static [u8]| cell("$payload", t, Bytes::from_static(v));
    let k = B256::repeat_byte(7);
    let cases = vec![
        (
            "a valid create",
            create_op(1, 0, 10, 0, sys_cells("text/plain", b"hi")),
            true,
        ),
        (
            "a user attribute of type bytes",
            create_op(
                1,
                0,
                10,
                0,
                vec![
                    ct(8, b"text/plain"),
                    payload(7, b"hi"),
                    cell("blob", 7, Bytes::from_static(b"\x01")),
                ],
            ),
            false,
        ),
        (
            "$payload as str",
            create_op(1, 0, 10, 0, vec![ct(8, b"text/plain"), payload(8, b"hi")]),
            false,
        ),
        (
            "$contentType as bytes",
            create_op(1, 0, 10, 0, vec![ct(7, b"text/plain"), payload(7, b"hi")]),
            false,
        ),
        (
            "a patch setting a bytes attribute",
            patch_op(k, vec![cell("blob", 7, Bytes::from_static(b"\x01"))]),
            false,
        ),
        (
            "a patch unsetting $payload",
            patch_op(k, vec![payload(0, b"")]),
            true,
        ),
        (
            "a patch setting $payload",
            patch_op(k, vec![payload(7, b"new")]),
            true,
        ),
    ];
    for (what, op, ok) in cases {
        let data = execute_calldata(vec![op]);
        let node = privsvc_devnet::testing::decode::decode_call(&data);
        let ledger = privsvc_ledger::decode_operations(&data);
        assert_eq!(node.is_ok(), ok, "{what}: the node says {:?}", node.err());
        assert_eq!(
            ledger.is_ok(),
            ok,
            "{what}: the ledger decoder says {:?}",
            ledger.err()
        );
    }
}
