//! Runs Arkiv's own test cases (`conformance/arkiv/*.json`, split verbatim from Arkiv's
//! collection of vectors, see `conformance/arkiv/README.md`) against privsvc-ledger: the
//! attribute codec, the execute() ABI (including the five live Cheesecake transactions), key
//! derivation, selectors and topics, revert data, and the query builder.
//!
//! Every case of the six sections is accounted for: it is either checked, or listed in
//! [`KNOWN`] with the reason it is not checked as written (a case we believe wrong or
//! superseded, or one that belongs to the node rather than to this crate). The test fails when a
//! case is neither, when a listed id no longer exists, or when a checked case fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use alloy_primitives::{keccak256, Address, B256, I256, U256};
use alloy_sol_types::{SolCall, SolError, SolEvent, SolValue};
use privsvc_ledger::testing::abi::{self, ArkivEvents, DecodeError};
use privsvc_ledger::testing::codec::{self, CodecError, NameError};
use privsvc_ledger::testing::query::{self, Expr};
use privsvc_ledger::testing::wire;
use privsvc_ledger::{
    decode_operations, decode_revert, encode_operations, entity_key, predict_entity_keys,
    ArkivValue, Attribute, Create, CreationFlags, Operation,
};
use privsvc_ledger::{resolve_expiry, ExpiryError};
use serde_json::Value;

/// Cases not checked as written, with the reason. Kept in the test on purpose: nothing is
/// dropped silently.
const KNOWN: &[(&str, &str)] = &[
    // --- attributes
    ("attr-002", "superseded pre-u64 typeId numbering (str = 7, key = 9); the vectors themselves say do not use it. We assert that our table differs from it."),
    // --- operations
    ("op-017", "summary of a live create whose 105,098-hex-char calldata is not included in the vectors; nothing to compare byte for byte."),
    ("op-052", "partly superseded: written with the pre-u64 numbering. 'unknown typeId 0/10' no longer applies (0 = tombstone, 10 = key) and 'typeId bytes in a user attribute' is accepted by the node's decode (decode.rs@11b8f77 pushes any decodable value, bytes included), which our decode mirrors. We check the parts that still hold: a sign-extension fault and typeId 255 give InvalidValueType."),
    ("op-054", "executor behaviour (atomic revert of a batch whose second op fails on state); not decidable from calldata. Exercised by the privsvc-devnet tests."),
    // --- errors
    ("err-34", "transport behaviour of the node (revert data inside the JSON-RPC error of eth_call); RpcLedger decodes it and is tested against privsvc-devnet."),
    ("err-35", "node query error code (-32001); parsed and produced by privsvc-devnet."),
    ("err-36", "node query error code (-32002); parsed and produced by privsvc-devnet."),
    ("err-37", "node query error code (-32003); parsed and produced by privsvc-devnet."),
    ("err-38", "node query error code (-32004); parsed and produced by privsvc-devnet."),
    ("err-39", "node query error code (-32005); parsed and produced by privsvc-devnet."),
    ("err-40", "node query error code (-32006); parsed and produced by privsvc-devnet."),
    ("err-41", "node invalid-params code (-32602); parsed and produced by privsvc-devnet."),
    // --- query_render: operators the SDK renders but the node rejects (-32002). Our builder
    // deliberately does not offer them, so there is nothing to render.
    ("render-018", "ne() renders '!=', which the node rejects with -32002; privsvc's builder has no ne()."),
    ("render-039", "ne() renders '!=', which the node rejects with -32002; privsvc's builder has no ne()."),
    ("render-060", "exists() renders EXISTS(..), which the node rejects with -32002; privsvc's builder has no exists()."),
    ("render-061", "hasType() renders TYPEOF(..), which the node rejects with -32002; privsvc's builder has no hasType()."),
    ("render-066", "not(exists(..)) renders NOT EXISTS(..), rejected by the node (-32002); no exists() in privsvc's builder."),
    ("render-076", "the SDK's worked example contains EXISTS (the vector itself notes the node rejects it) and abbreviates a key as 0xab…; the rest of its shape is covered by render-069/071/056/040."),
];

fn vectors(section: &str) -> Vec<Value> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../conformance/arkiv")
        .join(format!("{section}.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn h(s: &str) -> Vec<u8> {
    codec::parse_hex(s).unwrap_or_else(|| panic!("bad hex {s}"))
}

fn b32(s: &str) -> B256 {
    B256::from_slice(&h(s))
}

fn addr(s: &str) -> Address {
    Address::from_slice(&h(s))
}

fn num_u256(v: &Value) -> U256 {
    match v {
        Value::Number(n) => U256::from(n.as_u64().unwrap()),
        Value::String(s) => codec::parse_uint(s).unwrap_or_else(|| panic!("bad number {s}")),
        _ => panic!("not a number: {v}"),
    }
}

fn num_u64(v: &Value) -> u64 {
    u64::try_from(num_u256(v)).unwrap()
}

/// Collects the outcome of every case of a section.
struct Run {
    section: &'static str,
    ids: Vec<String>,
    checked: BTreeSet<String>,
    failures: Vec<String>,
}

impl Run {
    fn new(section: &'static str, cases: &[Value]) -> Self {
        Run {
            section,
            ids: cases
                .iter()
                .map(|c| c["id"].as_str().unwrap().to_owned())
                .collect(),
            checked: BTreeSet::new(),
            failures: Vec::new(),
        }
    }

    fn check(&mut self, id: &str, f: impl FnOnce() -> Result<(), String>) {
        self.checked.insert(id.to_owned());
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.failures.push(format!("{id}: {e}")),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                self.failures.push(format!("{id}: panicked: {msg}"));
            }
        }
    }

    fn finish(self) {
        let known: BTreeMap<&str, &str> = KNOWN.iter().copied().collect();
        let mut problems = self.failures;
        for id in &self.ids {
            let is_known = known.contains_key(id.as_str());
            let is_checked = self.checked.contains(id);
            if !is_known && !is_checked {
                problems.push(format!("{id}: neither checked nor listed in KNOWN"));
            }
            if is_known && is_checked {
                problems.push(format!("{id}: listed in KNOWN but also checked"));
            }
        }
        let prefix = match self.section {
            "attributes" => "attr-",
            "operations" => "op-",
            "keys" => "key-",
            "selectors" => "sel-",
            "errors" => "err-",
            _ => "render-",
        };
        for id in known.keys().filter(|k| k.starts_with(prefix)) {
            if !self.ids.iter().any(|i| i == id) {
                problems.push(format!(
                    "{id}: listed in KNOWN but not in {}.json",
                    self.section
                ));
            }
        }
        for (id, reason) in KNOWN.iter().filter(|(k, _)| k.starts_with(prefix)) {
            eprintln!("[{}] known: {id}: {reason}", self.section);
        }
        eprintln!(
            "[{}] {} cases: {} checked, {} known",
            self.section,
            self.ids.len(),
            self.checked.len(),
            known.keys().filter(|k| k.starts_with(prefix)).count()
        );
        assert!(
            problems.is_empty(),
            "{}:\n{}",
            self.section,
            problems.join("\n")
        );
    }
}

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(msg())
    }
}

fn eq_or<T: PartialEq + std::fmt::Debug>(got: T, want: T) -> Result<(), String> {
    ensure(got == want, || format!("got {got:?}, want {want:?}"))
}

/// A value of `type` from a vector's `value` field.
fn value_of(ty: &str, v: &Value) -> ArkivValue {
    match ty {
        "bool" => ArkivValue::Bool(v.as_bool().unwrap()),
        "i32" => ArkivValue::I32(i32::try_from(v.as_i64().unwrap()).unwrap()),
        "u64" => ArkivValue::U64(num_u64(v)),
        "u256" => ArkivValue::U256(num_u256(v)),
        "dec" => ArkivValue::Dec(codec::parse_dec(v.as_str().unwrap()).unwrap()),
        "bytes32" => ArkivValue::Bytes32(b32(v.as_str().unwrap())),
        "key" => ArkivValue::Key(b32(v.as_str().unwrap())),
        "str" => ArkivValue::Str(v.as_str().unwrap().to_owned()),
        "addr" => ArkivValue::Addr(addr(v.as_str().unwrap())),
        "bytes" => {
            let arr: Vec<u8> = serde_json::from_str(v.as_str().unwrap()).unwrap();
            ArkivValue::Bytes(arr)
        }
        other => panic!("unknown type {other}"),
    }
}

fn raw_op(tag: u8, data: Vec<u8>) -> abi::Operation {
    abi::Operation {
        operation: tag,
        operationData: data.into(),
    }
}

fn raw_calldata(ops: Vec<abi::Operation>) -> Vec<u8> {
    abi::executeCall { ops }.abi_encode()
}

fn word(name: &str) -> B256 {
    codec::name_to_bytes32(name).unwrap()
}

fn cell(name: &str, v: &ArkivValue) -> abi::Attribute {
    abi::Attribute {
        name: word(name),
        typeId: v.type_id(),
        value: v.abi_bytes().into(),
    }
}

fn raw_patch(cells: Vec<abi::Attribute>) -> Vec<u8> {
    let p = abi::Patch {
        entityKey: B256::repeat_byte(1),
        mutations: cells,
    };
    raw_calldata(vec![raw_op(abi::OP_PATCH, p.abi_encode())])
}

fn raw_create(flags: u8, cells: Vec<abi::Attribute>) -> Vec<u8> {
    let c = abi::Create {
        salt: 0,
        expiresAt: 0,
        minLifetime: 1,
        creationFlags: flags,
        attributes: cells,
    };
    raw_calldata(vec![raw_op(abi::OP_CREATE, c.abi_encode())])
}

fn revert_text(r: Result<Vec<Operation>, DecodeError>) -> Result<String, String> {
    match r {
        Ok(ops) => Err(format!("accepted: {ops:?}")),
        Err(e) => Ok(decode_revert(&e.revert_data())),
    }
}

fn create_op(
    salt: u128,
    expires_at: u64,
    min_lifetime: u64,
    flags: CreationFlags,
    content_type: &str,
    payload: &[u8],
    attrs: Vec<(&str, ArkivValue)>,
) -> Operation {
    Operation::Create(Create {
        salt,
        expires_at,
        min_lifetime,
        flags,
        content_type: content_type.into(),
        payload: payload.to_vec(),
        attributes: attrs
            .into_iter()
            .map(|(n, v)| Attribute {
                name: n.into(),
                value: v,
            })
            .collect(),
    })
}

// ------------------------------------------------------------------------------------------
// attributes
// ------------------------------------------------------------------------------------------

#[test]
fn attributes() {
    let cases = vectors("attributes");
    let mut run = Run::new("attributes", &cases);
    let known: BTreeSet<&str> = KNOWN.iter().map(|k| k.0).collect();
    for c in &cases {
        let id = c["id"].as_str().unwrap();
        if known.contains(id) {
            if id == "attr-002" {
                assert_ne!(codec::type_id_of("str"), Some(7));
                assert_ne!(codec::type_id_of("key"), Some(9));
            }
            continue;
        }
        let kind = c["kind"].as_str().unwrap();
        match kind {
            "type_table" => run.check(id, || {
                for (name, idv) in c["table"].as_object().unwrap() {
                    let want = u8::try_from(idv.as_u64().unwrap()).unwrap();
                    if name == "tombstone" {
                        eq_or(codec::TYPE_TOMBSTONE, want)?;
                    } else {
                        eq_or(codec::type_id_of(name), Some(want))?;
                        eq_or(codec::type_name(want), Some(name.as_str()))?;
                    }
                }
                eq_or(codec::type_name(0), None)?;
                eq_or(codec::type_name(11), None)
            }),
            "encode" => run.check(id, || check_encode(c)),
            "decode" => run.check(id, || check_decode(c)),
            "abi_attribute" => run.check(id, || {
                let name = c["name"].as_str().unwrap();
                let value = match c["value"].as_str().unwrap() {
                    "tombstone" => None,
                    "i32(10)" => Some(ArkivValue::I32(10)),
                    other => return Err(format!("unhandled value {other}")),
                };
                let calldata = encode_operations(&[Operation::Patch {
                    key: B256::ZERO,
                    mutations: vec![(name.into(), value)],
                }]);
                let call = abi::executeCall::abi_decode(&calldata).unwrap();
                let p = abi::Patch::abi_decode(&call.ops[0].operationData).unwrap();
                let cell = &p.mutations[0];
                let e = &c["expect"];
                eq_or(cell.name, b32(e["name"].as_str().unwrap()))?;
                eq_or(u64::from(cell.typeId), e["typeId"].as_u64().unwrap())?;
                eq_or(cell.value.to_vec(), h(e["value"].as_str().unwrap()))
            }),
            "name" => run.check(id, || {
                eq_or(
                    codec::name_to_bytes32(c["name"].as_str().unwrap()).unwrap(),
                    b32(c["bytes32"].as_str().unwrap()),
                )
            }),
            "round_trip" => run.check(id, || {
                let values = [
                    ArkivValue::Bool(true),
                    ArkivValue::Bool(false),
                    ArkivValue::I32(-42),
                    ArkivValue::I32(i32::MIN),
                    ArkivValue::I32(i32::MAX),
                    ArkivValue::U64(0),
                    ArkivValue::U64(u64::MAX),
                    ArkivValue::U256(U256::from(42)),
                    ArkivValue::Dec(I256::from_raw(U256::MAX)),
                    ArkivValue::Bytes32(B256::repeat_byte(0x5a)),
                    ArkivValue::Str("hello".into()),
                    ArkivValue::Str("é".repeat(64)),
                    ArkivValue::Bytes(vec![0xee; 4096]),
                    ArkivValue::Addr(Address::repeat_byte(0x11)),
                    ArkivValue::Key(B256::repeat_byte(0x77)),
                ];
                eq_or(values.len(), c["values"].as_array().unwrap().len())?;
                for v in values {
                    eq_or(ArkivValue::from_abi(v.type_id(), &v.abi_bytes()), Ok(v))?;
                }
                Ok(())
            }),
            "rpc_json" => run.check(id, || {
                let ty = c["type"].as_str().unwrap();
                let j = &c["value_json"];
                if id == "attr-075" {
                    // Placeholder "0x<hex quantity>": the form is a minimal 0x quantity.
                    return eq_or(ArkivValue::U64(1800).to_json(), Value::from("0x708"));
                }
                let v = ArkivValue::from_json(ty, j).map_err(|e| e.to_string())?;
                eq_or(v.type_name(), ty)?;
                eq_or(&v.to_json(), j)
            }),
            "rpc_json_entity" => run.check(id, || {
                let attrs =
                    wire::attributes_from_json(&c["attributes"]).map_err(|e| e.to_string())?;
                eq_or(&wire::attributes_to_json(&attrs), &c["attributes"])?;
                if let Some(schema) = c.get("attributeSchema_for_same_entity") {
                    let schema = wire::attribute_schema_from_json(schema).unwrap();
                    let ours: Vec<(String, String)> = attrs
                        .iter()
                        .map(|a| (a.name.clone(), a.value.type_name().to_owned()))
                        .collect();
                    eq_or(ours, schema)?;
                }
                Ok(())
            }),
            "sdk_decode_rpc" => run.check(id, || check_sdk_decode(c)),
            "name_rule" => match c["layer"].as_str().unwrap() {
                "node" => run.check(id, || check_node_name(c)),
                _ => run.check(id, || {
                    let name = c["name"].as_str().unwrap();
                    let r = codec::validate_sdk_name(name);
                    match c["expect"].as_str().unwrap() {
                        "ok" => r.map_err(|e| format!("refused: {e}")),
                        _ => {
                            let e = r.err().ok_or("accepted")?;
                            let want = c["message_contains"].as_str().unwrap();
                            ensure(e.contains(want), || format!("{e:?} lacks {want:?}"))
                        }
                    }
                }),
            },
            other => run.check(id, || Err(format!("unhandled kind {other}"))),
        }
    }
    run.finish();
}

fn check_encode(c: &Value) -> Result<(), String> {
    let ty = c["type"].as_str().unwrap();
    if let Some(expect) = c.get("expect") {
        // Limit cases: the value is described, not given.
        let want = expect["error"].as_str().unwrap();
        let err = match c["id"].as_str().unwrap() {
            "attr-049" => ArkivValue::Str("x".repeat(129)).validate(),
            "attr-050" => ArkivValue::Bytes(vec![0; codec::MAX_PAYLOAD_BYTES + 1]).validate(),
            other => return Err(format!("unhandled {other}")),
        }
        .err()
        .ok_or("accepted")?;
        let want = want.replace(
            "MAX_PAYLOAD_BYTES + 1",
            &(codec::MAX_PAYLOAD_BYTES + 1).to_string(),
        );
        let text = err.to_string();
        return ensure(text.contains(&want), || format!("{text:?} lacks {want:?}"));
    }
    let v = value_of(ty, &c["value"]);
    if let Some(t) = c.get("typeId") {
        eq_or(u64::from(v.type_id()), t.as_u64().unwrap())?;
    }
    let want = h(c["value_hex"].as_str().unwrap());
    eq_or(v.abi_bytes(), want.clone())?;
    eq_or(ArkivValue::from_abi(v.type_id(), &want), Ok(v.clone()))?;
    if let Some(s) = c.get("scaled_int") {
        let ArkivValue::Dec(d) = v else {
            return Err("scaled_int on a non-dec".into());
        };
        eq_or(d.to_string(), s.as_str().unwrap().to_owned())?;
    }
    Ok(())
}

fn check_decode(c: &Value) -> Result<(), String> {
    let type_id = u8::try_from(c["typeId"].as_u64().unwrap()).unwrap();
    let bytes = h(c["value_hex"].as_str().unwrap());
    let err = codec::decode_cell(type_id, &bytes)
        .err()
        .ok_or("accepted")?;
    let text = err.to_string();
    let e = &c["expect"];
    if let Some(want) = e.get("error").and_then(Value::as_str) {
        ensure(text.contains(want), || format!("{text:?} lacks {want:?}"))?;
    }
    if let Some(want) = e.get("invalid").and_then(Value::as_str) {
        let ok = match want {
            "sign extension" => err == CodecError::BadSignExtension,
            "32 bytes" => matches!(err, CodecError::BadWordLength { len: 1, .. }),
            "non-zero padding" => matches!(err, CodecError::NonZeroValuePadding { .. }),
            "tombstone with a value" => err == CodecError::TombstoneNotEmpty(1),
            _ => false,
        };
        ensure(ok, || format!("{err:?} is not {want:?}"))?;
    }
    if let Some(rev) = e.get("revert").and_then(Value::as_str) {
        // Through the node path: a patch cell named "flag" with this typeId and value.
        let calldata = raw_patch(vec![abi::Attribute {
            name: word("flag"),
            typeId: type_id,
            value: bytes.into(),
        }]);
        let got = revert_text(decode_operations(&calldata))?;
        let want = rev.replace("name", "\"flag\"").replace(", ", ",");
        eq_or(got, want)?;
    }
    Ok(())
}

fn check_sdk_decode(c: &Value) -> Result<(), String> {
    let ty = match &c["type"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let r = ArkivValue::from_json(&ty, &c["input"]);
    let e = &c["expect"];
    if let Some(err) = e.get("error").and_then(Value::as_str) {
        let got = r.err().ok_or("accepted")?;
        return match err {
            "UnknownAttributeTypeError" => {
                ensure(matches!(got, CodecError::UnknownTypeName(_)), || {
                    format!("{got:?}")
                })
            }
            "InvalidValueError" => ensure(matches!(got, CodecError::InvalidValue { .. }), || {
                format!("{got:?}")
            }),
            msg => ensure(got.to_string().contains(msg), || {
                format!("{got} lacks {msg:?}")
            }),
        };
    }
    let v = r.map_err(|e| e.to_string())?;
    let rendered = match &v {
        ArkivValue::Bool(b) => Value::Bool(*b),
        ArkivValue::I32(i) => Value::from(*i),
        ArkivValue::U256(u) => Value::from(format!("{u}n")),
        ArkivValue::Dec(d) => Value::from(codec::format_dec(*d)),
        ArkivValue::Addr(a) => Value::from(a.to_checksum(None)),
        ArkivValue::Str(s) => Value::from(s.clone()),
        ArkivValue::Bytes32(b) | ArkivValue::Key(b) => Value::from(b.to_string()),
        ArkivValue::Bytes(b) => Value::from(format!("0x{}", hex::encode(b))),
        ArkivValue::U64(u) => Value::from(format!("{u}n")),
    };
    eq_or(&rendered, e)
}

fn check_node_name(c: &Value) -> Result<(), String> {
    let id = c["id"].as_str().unwrap();
    let name = c["name"].as_str().unwrap();
    let ok_expected = c["expect"].as_str().unwrap() == "ok";
    let one = ArkivValue::I32(1);
    // The word the node sees, and the string form where there is one.
    let (w, as_str): (B256, Option<&str>) = match id {
        "attr-110" => {
            let mut b = [0u8; 32];
            b[..5].copy_from_slice(&[0x61, 0x62, 0x00, 0x63, 0x00]);
            (B256::from(b), None)
        }
        "attr-111" => {
            let mut b = [0u8; 32];
            b[..2].copy_from_slice(b"ab");
            (B256::from(b), None)
        }
        "attr-113" => (B256::ZERO, None),
        "attr-121" => {
            // $payload and $contentType: lifted out on create, kept as mutations on patch.
            let op = create_op(
                1,
                0,
                1,
                CreationFlags::default(),
                "text/plain",
                b"x",
                vec![],
            );
            decode_operations(&encode_operations(&[op])).map_err(|e| e.to_string())?;
            let patch = Operation::Patch {
                key: B256::repeat_byte(2),
                mutations: vec![
                    (
                        "$contentType".into(),
                        Some(ArkivValue::Str("text/csv".into())),
                    ),
                    ("$payload".into(), Some(ArkivValue::Bytes(b"new".to_vec()))),
                ],
            };
            let ops = decode_operations(&encode_operations(std::slice::from_ref(&patch)))
                .map_err(|e| e.to_string())?;
            return eq_or(ops, vec![patch]);
        }
        _ if name.len() > 32 => {
            // Cannot be a bytes32 at all; the string rule refuses it.
            return eq_or(
                codec::validate_ident32(name),
                Err(NameError::TooLong(name.len())),
            );
        }
        _ => (word(name), Some(name)),
    };
    if let Some(s) = as_str {
        if !s.starts_with('$') {
            let r = codec::validate_ident32(s);
            ensure(r.is_ok() == ok_expected, || {
                format!("validate_ident32: {r:?}")
            })?;
        }
    }
    let word_check = codec::check_ident32_word(&w);
    if !name.starts_with('$') {
        ensure(word_check.is_ok() == ok_expected, || {
            format!("check_ident32_word: {word_check:?}")
        })?;
    }
    // Through the node path: a patch cell, a patch tombstone and a create cell.
    let cells = [
        raw_patch(vec![abi::Attribute {
            name: w,
            typeId: one.type_id(),
            value: one.abi_bytes().into(),
        }]),
        raw_patch(vec![abi::Attribute {
            name: w,
            typeId: 0,
            value: Vec::new().into(),
        }]),
        raw_create(
            0,
            vec![abi::Attribute {
                name: w,
                typeId: one.type_id(),
                value: one.abi_bytes().into(),
            }],
        ),
    ];
    for calldata in cells {
        let r = decode_operations(&calldata);
        if ok_expected {
            r.map_err(|e| e.to_string())?;
            continue;
        }
        let err = r.err().ok_or("accepted by decode_operations")?;
        let data = err.revert_data();
        if let Some(rev) = c.get("revert").and_then(Value::as_str) {
            let text = decode_revert(&data);
            let want = match rev {
                "SystemAttributeNotWritable(name)" => {
                    format!("SystemAttributeNotWritable({name:?})")
                }
                other => other.replace(", ", ","),
            };
            ensure(
                text.starts_with(want.trim_end_matches(')').trim_end_matches('(')),
                || format!("{text} is not {want}"),
            )?;
        } else {
            ensure(
                matches!(
                    err,
                    DecodeError::Ident32Empty | DecodeError::Ident32InvalidByte { .. }
                ),
                || format!("{err:?}"),
            )?;
        }
        if let Some(sel) = c.get("selector").and_then(Value::as_str) {
            eq_or(data[..4].to_vec(), h(sel))?;
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// operations
// ------------------------------------------------------------------------------------------

fn decode_single(tag: u8, data: &[u8]) -> Result<Operation, String> {
    let ops = decode_operations(&raw_calldata(vec![raw_op(tag, data.to_vec())]))
        .map_err(|e| e.to_string())?;
    Ok(ops.into_iter().next().unwrap())
}

/// The operations the vectors describe in words, built with the crate's model.
fn described_op(id: &str) -> Option<Operation> {
    let k11 = B256::repeat_byte(0x11);
    let k09 = B256::repeat_byte(0x09);
    Some(match id {
        "op-001" | "op-002" => create_op(
            0xfe216ccae479f6aeed5985d491fa8e16,
            0,
            30,
            CreationFlags {
                readonly: true,
                permissionless_extension: false,
            },
            "application/json",
            br#"{"probe":"smoke"}"#,
            vec![
                ("kind", ArkivValue::Str("smoke".into())),
                ("rank", ArkivValue::I32(2)),
            ],
        ),
        "op-003" | "op-004" => Operation::Patch {
            key: k11,
            mutations: vec![
                ("flag".into(), None),
                ("rank".into(), Some(ArkivValue::I32(2))),
                ("status".into(), Some(ArkivValue::Str("patched".into()))),
            ],
        },
        "op-005" | "op-006" => Operation::Extend {
            key: k11,
            expires_at: 0,
            min_lifetime: 150,
        },
        "op-007" | "op-008" => Operation::Transfer {
            key: k11,
            new_owner: addr("0xAbcd000000000000000000000000000000001234"),
        },
        "op-009" | "op-010" => Operation::Delete { key: k11 },
        "op-057" => Operation::Extend {
            key: k09,
            expires_at: 500,
            min_lifetime: 10,
        },
        "op-058" => Operation::Transfer {
            key: k09,
            new_owner: Address::repeat_byte(0xab),
        },
        "op-059" => Operation::Delete { key: k09 },
        "op-060" => create_op(
            4660,
            0,
            1800,
            CreationFlags::default(),
            "application/octet-stream",
            b"",
            // Given in sorted order, as they decode.
            vec![
                ("created_at", ArkivValue::U64(1_700_000_000_000)),
                ("entity_type", ArkivValue::Str("nft".into())),
                ("project", ArkivValue::Str("example_nfts".into())),
            ],
        ),
        _ => return None,
    })
}

fn tag_of(op: &Operation) -> u8 {
    match op {
        Operation::Create(_) => abi::OP_CREATE,
        Operation::Patch { .. } => abi::OP_PATCH,
        Operation::Extend { .. } => abi::OP_EXTEND_EXPIRY,
        Operation::Transfer { .. } => abi::OP_TRANSFER_OWNERSHIP,
        Operation::Delete { .. } => abi::OP_DELETE,
    }
}

#[test]
fn operations() {
    let cases = vectors("operations");
    let keys = vectors("keys");
    let mut run = Run::new("operations", &cases);
    let known: BTreeSet<&str> = KNOWN.iter().map(|k| k.0).collect();
    for c in &cases {
        let id = c["id"].as_str().unwrap();
        if known.contains(id) {
            if id == "op-052" {
                // The parts that still hold: ill-formed values are InvalidValueType.
                let bad_i32 = abi::Attribute {
                    name: word("level"),
                    typeId: codec::TYPE_I32,
                    value: U256::from(u32::MAX).to_be_bytes::<32>().to_vec().into(),
                };
                let unknown = abi::Attribute {
                    name: word("level"),
                    typeId: 255,
                    value: vec![0u8; 32].into(),
                };
                for cell in [bad_i32, unknown] {
                    let t = revert_text(decode_operations(&raw_patch(vec![cell]))).unwrap();
                    assert!(t.starts_with("InvalidValueType(\"level\""), "{t}");
                }
            }
            continue;
        }
        let kind = c["kind"].as_str().unwrap();
        match kind {
            "operationData" => run.check(id, || {
                let data = h(c["operationData"].as_str().unwrap());
                if id == "op-056" {
                    // create(7,100,50,1,[]): an SDK create without system cells. Our model
                    // always sends both cells, so check the ABI struct and the decode.
                    let raw = abi::Create {
                        salt: 7,
                        expiresAt: 100,
                        minLifetime: 50,
                        creationFlags: 1,
                        attributes: vec![],
                    };
                    eq_or(raw.abi_encode(), data.clone())?;
                    let want = create_op(
                        7,
                        100,
                        50,
                        CreationFlags {
                            readonly: true,
                            permissionless_extension: false,
                        },
                        "",
                        b"",
                        vec![],
                    );
                    return eq_or(decode_single(abi::OP_CREATE, &data)?, want);
                }
                let want = described_op(id).ok_or("no description")?;
                let enc = abi::encode_operation(&want);
                eq_or(enc.operationData.to_vec(), data.clone())?;
                if let Some(t) = c.get("tag") {
                    eq_or(u64::from(enc.operation), t.as_u64().unwrap())?;
                }
                eq_or(decode_single(tag_of(&want), &data)?, want)
            }),
            "calldata" => run.check(id, || {
                let data = h(c["calldata"].as_str().unwrap());
                if id == "op-061" {
                    // A create with $payload only (no $contentType), chain 1, caller 0xAA*20,
                    // block 10, start nonce 0.
                    let ops = decode_operations(&data).map_err(|e| e.to_string())?;
                    let Operation::Create(cr) = &ops[0] else {
                        return Err("not a create".into());
                    };
                    let e = &c["expect"];
                    eq_or(
                        cr.payload.as_slice(),
                        e["payload"].as_str().unwrap().as_bytes(),
                    )?;
                    eq_or(
                        cr.content_type.as_str(),
                        e["content_type"].as_str().unwrap(),
                    )?;
                    let owner = addr(e["owner"].as_str().unwrap());
                    eq_or(
                        entity_key(1, owner, 0, cr.salt),
                        b32(e["key"].as_str().unwrap()),
                    )?;
                    return eq_or(
                        resolve_expiry(10, cr.expires_at, cr.min_lifetime),
                        Ok(e["expires_at"].as_u64().unwrap()),
                    );
                }
                let want = described_op(id).ok_or("no description")?;
                eq_or(
                    encode_operations(std::slice::from_ref(&want)).to_vec(),
                    data.clone(),
                )?;
                eq_or(
                    decode_operations(&data).map_err(|e| e.to_string())?,
                    vec![want],
                )
            }),
            "rule" => run.check(id, || {
                let k = B256::repeat_byte(1);
                let sizes = [
                    Operation::Extend {
                        key: k,
                        expires_at: 1,
                        min_lifetime: 1,
                    },
                    Operation::Transfer {
                        key: k,
                        new_owner: Address::repeat_byte(2),
                    },
                    Operation::Delete { key: k },
                ]
                .iter()
                .map(|op| abi::encode_operation(op).operationData.len())
                .collect::<Vec<_>>();
                eq_or(sizes, vec![96, 64, 32])?;
                let create = create_op(1, 0, 1, CreationFlags::default(), "", b"", vec![]);
                let patch = Operation::Patch {
                    key: k,
                    mutations: vec![("a".into(), None)],
                };
                for op in [create, patch] {
                    let d = abi::encode_operation(&op).operationData;
                    eq_or(U256::from_be_slice(&d[..32]), U256::from(0x20))?;
                }
                Ok(())
            }),
            "live_transaction" => run.check(id, || check_live(c, &keys)),
            "expiry_resolution" => run.check(id, || {
                let cur = num_u64(&c["currentBlock"]);
                let exp = num_u64(&c["expiresAt"]);
                let min = num_u64(&c["minLifetime"]);
                let r = resolve_expiry(cur, exp, min);
                let e = &c["expect"];
                if let Some(rev) = e.get("revert").and_then(Value::as_str) {
                    let err = r.err().ok_or("resolved")?;
                    let text = decode_revert(&err.revert_data());
                    if rev.starts_with("ExpiryDeadOnArrival") {
                        ensure(matches!(err, ExpiryError::DeadOnArrival { .. }), || {
                            format!("{err:?}")
                        })?;
                        ensure(text.starts_with("ExpiryDeadOnArrival("), || text.clone())
                    } else {
                        // Error(string) "expiry overflow (100 + 18446744073709551615)"
                        let msg = rev.trim_start_matches("Error(string) ");
                        eq_or(text, format!("Error({msg})"))
                    }
                } else {
                    eq_or(r, Ok(num_u64(e)))
                }
            }),
            "decode_rule" => run.check(id, || check_decode_rule(id)),
            "constructor_round_trip" => run.check(id, || {
                let k = B256::repeat_byte(9);
                let ops = vec![
                    create_op(
                        7,
                        100,
                        50,
                        CreationFlags {
                            readonly: true,
                            permissionless_extension: false,
                        },
                        "",
                        b"",
                        vec![],
                    ),
                    Operation::Patch {
                        key: k,
                        mutations: vec![("a".into(), Some(ArkivValue::U256(U256::from(1))))],
                    },
                    Operation::Extend {
                        key: k,
                        expires_at: 500,
                        min_lifetime: 10,
                    },
                    Operation::Transfer {
                        key: k,
                        new_owner: Address::repeat_byte(0xab),
                    },
                    Operation::Delete { key: k },
                ];
                eq_or(c["cases"].as_array().unwrap().len(), ops.len())?;
                eq_or(
                    decode_operations(&encode_operations(&ops)).map_err(|e| e.to_string())?,
                    ops,
                )
            }),
            "creation_flags" => run.check(id, || {
                let Some(byte) = c.get("byte") else {
                    // op-066: mask 0b11; bits 2..7 reserved.
                    eq_or(abi::FLAGS_MASK, 0b11)?;
                    for k in 2..8 {
                        eq_or(abi::flags_from_byte(1 << k), None)?;
                    }
                    return Ok(());
                };
                let f = c["flags"].as_str().unwrap();
                let flags = CreationFlags {
                    readonly: f.contains("readonly:true"),
                    permissionless_extension: f.contains("permissionlessExtension:true"),
                };
                eq_or(u64::from(abi::flags_byte(flags)), byte.as_u64().unwrap())?;
                eq_or(
                    abi::flags_from_byte(u8::try_from(byte.as_u64().unwrap()).unwrap()),
                    Some(flags),
                )
            }),
            "sdk_create_layout" => run.check(id, || check_sdk_layout(id, c)),
            other => run.check(id, || Err(format!("unhandled kind {other}"))),
        }
    }
    run.finish();
}

/// Re-encode a live transaction's calldata from its decode, and reproduce its receipt logs
/// (keys from the entity nonces in keys.json, resolved expiries, owners, order).
fn check_live(c: &Value, keys: &[Value]) -> Result<(), String> {
    let input = h(c["input"].as_str().unwrap());
    let ops = decode_operations(&input).map_err(|e| e.to_string())?;
    eq_or(encode_operations(&ops).to_vec(), input)?;
    let chain = c["chainId"].as_u64().unwrap();
    let from = addr(c["from"].as_str().unwrap());
    let block = c["blockNumber"].as_u64().unwrap();
    let hash = c["hash"].as_str().unwrap();
    eq_or(addr(c["to"].as_str().unwrap()), abi::ARKIV_ADDRESS)?;
    // The entity nonces of this transaction's creates (keys.json, live cases).
    let mut nonces: Vec<u64> = keys
        .iter()
        .filter(|k| k.get("tx").and_then(Value::as_str) == Some(hash))
        .map(|k| k["nonce"].as_u64().unwrap())
        .collect();
    nonces.sort_unstable();
    let creates: Vec<&Create> = ops
        .iter()
        .filter_map(|o| match o {
            Operation::Create(c) => Some(c),
            _ => None,
        })
        .collect();
    eq_or(nonces.len(), creates.len())?;
    if let Some(first) = nonces.first() {
        let salts: Vec<u128> = creates.iter().map(|c| c.salt).collect();
        eq_or(
            predict_entity_keys(chain, from, *first, &salts),
            creates
                .iter()
                .zip(&nonces)
                .map(|(c, n)| entity_key(chain, from, *n, c.salt))
                .collect(),
        )?;
    }
    let logs = c["logs"].as_array().unwrap();
    eq_or(logs.len(), ops.len())?;
    let mut create_i = 0;
    for (op, log) in ops.iter().zip(logs) {
        eq_or(addr(log["address"].as_str().unwrap()), abi::ARKIV_ADDRESS)?;
        let topics: Vec<B256> = log["topics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| b32(t.as_str().unwrap()))
            .collect();
        let ev = abi::decode_log(&topics, &h(log["data"].as_str().unwrap()))
            .ok_or("log does not decode as an Arkiv event")?;
        match (op, ev) {
            (Operation::Create(cr), ArkivEvents::EntityCreated(e)) => {
                eq_or(
                    e.entityKey,
                    entity_key(chain, from, nonces[create_i], cr.salt),
                )?;
                create_i += 1;
                eq_or(e.owner, from)?;
                eq_or(
                    Ok(e.expiresAt),
                    resolve_expiry(block, cr.expires_at, cr.min_lifetime),
                )?;
                eq_or(e.creationFlags, abi::flags_byte(cr.flags))?;
            }
            (Operation::Patch { key, .. }, ArkivEvents::EntityPatched(e)) => {
                eq_or(e.entityKey, *key)?;
                eq_or(e.owner, from)?;
            }
            (
                Operation::Extend {
                    key,
                    expires_at,
                    min_lifetime,
                },
                ArkivEvents::ExpiryExtended(e),
            ) => {
                eq_or(e.entityKey, *key)?;
                eq_or(
                    Ok(e.expiresAt),
                    resolve_expiry(block, *expires_at, *min_lifetime),
                )?;
            }
            (Operation::Transfer { key, new_owner }, ArkivEvents::OwnershipTransferred(e)) => {
                eq_or(e.entityKey, *key)?;
                eq_or(e.newOwner, *new_owner)?;
            }
            (Operation::Delete { key }, ArkivEvents::EntityDeleted(e)) => {
                eq_or(e.entityKey, *key)?;
                eq_or(e.owner, from)?;
            }
            (op, ev) => return Err(format!("log {ev:?} does not match {op:?}")),
        }
    }
    Ok(())
}

fn check_decode_rule(id: &str) -> Result<(), String> {
    let key = B256::repeat_byte(1);
    let rev = |calldata: Vec<u8>| revert_text(decode_operations(&calldata));
    let user = |n: &str, v: ArkivValue| cell(n, &v);
    match id {
        "op-033" => {
            let ops = decode_operations(&raw_create(0b11, vec![])).map_err(|e| e.to_string())?;
            let Operation::Create(c) = &ops[0] else {
                return Err("not a create".into());
            };
            eq_or(abi::flags_byte(c.flags), 3)
        }
        "op-034" | "op-035" | "op-036" => {
            let f = match id {
                "op-034" => 0b100,
                "op-035" => 0b1000_0000,
                _ => 0xff,
            };
            eq_or(
                rev(raw_create(f, vec![]))?,
                format!("ReservedCreationFlags({f})"),
            )
        }
        "op-037" => {
            let t = abi::Attribute {
                name: word("gone"),
                typeId: 0,
                value: Vec::new().into(),
            };
            eq_or(
                rev(raw_create(0, vec![t]))?,
                "TombstoneInCreate(\"gone\")".into(),
            )
        }
        "op-038" => {
            let cells = vec![
                user("$contentType", ArkivValue::Str("text/plain".into())),
                user("$payload", ArkivValue::Bytes(b"hi".to_vec())),
                user("rank", ArkivValue::U256(U256::from(3))),
            ];
            let ops = decode_operations(&raw_create(0, cells)).map_err(|e| e.to_string())?;
            let Operation::Create(c) = &ops[0] else {
                return Err("not a create".into());
            };
            eq_or(c.content_type.as_str(), "text/plain")?;
            eq_or(c.payload.as_slice(), b"hi".as_slice())?;
            eq_or(
                c.attributes
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>(),
                vec!["rank"],
            )
        }
        "op-039" => {
            let cells = vec![
                user("color", ArkivValue::Str("blue".into())),
                abi::Attribute {
                    name: word("size"),
                    typeId: 0,
                    value: Vec::new().into(),
                },
            ];
            let ops = decode_operations(&raw_patch(cells)).map_err(|e| e.to_string())?;
            eq_or(
                ops,
                vec![Operation::Patch {
                    key,
                    mutations: vec![
                        ("color".into(), Some(ArkivValue::Str("blue".into()))),
                        ("size".into(), None),
                    ],
                }],
            )
        }
        "op-040" => {
            let cells = vec![user("$payload", ArkivValue::Bytes(b"new".to_vec()))];
            let ops = decode_operations(&raw_patch(cells)).map_err(|e| e.to_string())?;
            eq_or(
                ops,
                vec![Operation::Patch {
                    key,
                    mutations: vec![("$payload".into(), Some(ArkivValue::Bytes(b"new".to_vec())))],
                }],
            )
        }
        "op-041" => eq_or(rev(raw_patch(vec![]))?, format!("EmptyMutations({key})")),
        "op-042" => {
            let t = abi::TransferOwnership {
                entityKey: key,
                newOwner: Address::ZERO,
            };
            let cd = raw_calldata(vec![raw_op(abi::OP_TRANSFER_OWNERSHIP, t.abi_encode())]);
            eq_or(rev(cd)?, format!("TransferToZeroAddress({key})"))
        }
        "op-043" => eq_or(rev(raw_calldata(vec![]))?, "EmptyBatch()".into()),
        "op-044" => eq_or(
            rev(raw_calldata(vec![raw_op(99, vec![])]))?,
            "InvalidOpType(99)".into(),
        ),
        "op-045" => {
            let mut d = abi::Delete { entityKey: key }.abi_encode();
            d.extend_from_slice(&[0u8; 32]);
            eq_or(
                rev(raw_calldata(vec![raw_op(abi::OP_DELETE, d)]))?,
                "NonCanonicalOperationData(5)".into(),
            )
        }
        "op-046" => {
            let t = rev(raw_calldata(vec![raw_op(abi::OP_DELETE, vec![0xab, 0xcd])]))?;
            ensure(t.starts_with("Error(\""), || t.clone())
        }
        "op-047" | "op-048" => {
            let second = if id == "op-047" { "a" } else { "b" };
            let cells = vec![
                user("b", ArkivValue::U256(U256::from(1))),
                user(second, ArkivValue::U256(U256::from(2))),
            ];
            eq_or(rev(raw_patch(cells))?, "AttributesNotSorted()".into())
        }
        "op-049" | "op-050" => {
            let cd = if id == "op-049" {
                vec![0xde, 0xad, 0xbe, 0xef, 0x00]
            } else {
                vec![0x01, 0x02]
            };
            let t = rev(cd)?;
            ensure(t.starts_with("Error(\""), || t.clone())
        }
        "op-051" => {
            let cells = (0..33)
                .map(|i| user(&format!("a{i:02}"), ArkivValue::I32(i)))
                .collect();
            eq_or(rev(raw_patch(cells))?, "TooManyAttributes(33,32)".into())
        }
        "op-053" => {
            let owner = Address::repeat_byte(0xaa);
            let ops = vec![
                create_op(5, 0, 1, CreationFlags::default(), "", b"", vec![]),
                create_op(6, 0, 1, CreationFlags::default(), "", b"", vec![]),
            ];
            decode_operations(&encode_operations(&ops)).map_err(|e| e.to_string())?;
            eq_or(
                predict_entity_keys(1, owner, 41, &[5, 6]),
                vec![entity_key(1, owner, 41, 5), entity_key(1, owner, 42, 6)],
            )
        }
        other => Err(format!("unhandled decode rule {other}")),
    }
}

fn check_sdk_layout(id: &str, c: &Value) -> Result<(), String> {
    let cells_of = |op: &Operation| -> Vec<abi::Attribute> {
        let call =
            abi::executeCall::abi_decode(&encode_operations(std::slice::from_ref(op))).unwrap();
        abi::Create::abi_decode(&call.ops[0].operationData)
            .unwrap()
            .attributes
    };
    let e = &c["expect"];
    match id {
        "op-067" => {
            let op = create_op(
                0,
                0,
                1,
                CreationFlags::default(),
                "application/octet-stream",
                &[0xde, 0xad],
                vec![("level", ArkivValue::I32(1))],
            );
            let cells = cells_of(&op);
            let names: Vec<String> = cells
                .iter()
                .map(|a| codec::bytes32_to_name(&a.name).unwrap())
                .collect();
            let first: Vec<String> = serde_json::from_value(e["first_names"].clone()).unwrap();
            eq_or(names[..2].to_vec(), first)?;
            for (name, t) in e["typeIds"].as_object().unwrap() {
                let cell = cells
                    .iter()
                    .find(|a| a.name == word(name))
                    .ok_or("missing")?;
                eq_or(u64::from(cell.typeId), t.as_u64().unwrap())?;
            }
            eq_or(
                cells[1].value.to_vec(),
                h(e["$payload_value"].as_str().unwrap()),
            )
        }
        "op-068" => {
            let op = create_op(
                0,
                0,
                1,
                CreationFlags::default(),
                "",
                b"",
                vec![
                    ("zebra", ArkivValue::I32(1)),
                    ("apple", ArkivValue::Str("x".into())),
                    ("mango", ArkivValue::U256(U256::from(2))),
                ],
            );
            // Our creates always carry the two system cells first; the user cells follow.
            let ids: Vec<u64> = cells_of(&op)[2..]
                .iter()
                .map(|a| u64::from(a.typeId))
                .collect();
            let want: Vec<u64> =
                serde_json::from_value(e["typeIds_in_sorted_order"].clone()).unwrap();
            eq_or(ids, want)
        }
        "op-069" => {
            let op = create_op(
                0,
                0,
                1,
                CreationFlags::default(),
                "",
                b"",
                vec![
                    ("n", ArkivValue::I32(-42)),
                    ("big", ArkivValue::U256(U256::from(1))),
                    ("d", ArkivValue::Dec(codec::parse_dec("1.5").unwrap())),
                    ("s", ArkivValue::Str("hi".into())),
                ],
            );
            let cells = cells_of(&op);
            let get = |n: &str| {
                cells
                    .iter()
                    .find(|a| a.name == word(n))
                    .unwrap()
                    .value
                    .to_vec()
            };
            eq_or(get("n"), h(e["n"].as_str().unwrap()))?;
            eq_or(get("big"), h(e["big"].as_str().unwrap()))?;
            eq_or(get("s"), h(e["s"].as_str().unwrap()))?;
            eq_or(
                I256::from_raw(U256::from_be_slice(&get("d"))).to_string(),
                e["d_scaled"].as_str().unwrap().to_owned(),
            )
        }
        other => Err(format!("unhandled {other}")),
    }
}

// ------------------------------------------------------------------------------------------
// keys
// ------------------------------------------------------------------------------------------

#[test]
fn keys() {
    let cases = vectors("keys");
    let mut run = Run::new("keys", &cases);
    for c in &cases {
        let id = c["id"].as_str().unwrap();
        if c.get("kind").and_then(Value::as_str) == Some("formula") {
            run.check(id, || {
                // Recompute one key from the documented 96-byte preimage.
                let owner = addr("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
                let mut pre = Vec::new();
                pre.extend_from_slice(&U256::from(1337).to_be_bytes::<32>());
                pre.extend_from_slice(abi::ARKIV_ADDRESS.as_slice());
                pre.extend_from_slice(owner.as_slice());
                pre.extend_from_slice(&3u64.to_be_bytes());
                pre.extend_from_slice(&9u128.to_be_bytes());
                eq_or(pre.len(), 96)?;
                eq_or(keccak256(&pre), entity_key(1337, owner, 3, 9))
            });
            continue;
        }
        run.check(id, || {
            let chain = c["chainId"].as_u64().unwrap();
            let owner = addr(c["owner"].as_str().unwrap());
            let nonce = c["nonce"].as_u64().unwrap();
            let salt = u128::try_from(num_u256(&c["salt"])).unwrap();
            let base = entity_key(chain, owner, nonce, salt);
            eq_or(base, b32(c["key"].as_str().unwrap()))?;
            if let Some(ne) = c.get("assert_not_equal") {
                for (what, k) in ne.as_object().unwrap() {
                    let other = match what.as_str() {
                        "chain 2" => entity_key(2, owner, nonce, salt),
                        "nonce 6" => entity_key(chain, owner, 6, salt),
                        "salt 8" => entity_key(chain, owner, nonce, 8),
                        w if w.starts_with("owner") => {
                            entity_key(chain, Address::repeat_byte(0xbb), nonce, salt)
                        }
                        w => return Err(format!("unhandled variation {w}")),
                    };
                    eq_or(other, b32(k.as_str().unwrap()))?;
                    ensure(other != base, || format!("{what} did not change the key"))?;
                }
            }
            Ok(())
        });
    }
    run.finish();
}

// ------------------------------------------------------------------------------------------
// selectors
// ------------------------------------------------------------------------------------------

#[test]
fn selectors() {
    let cases = vectors("selectors");
    let mut run = Run::new("selectors", &cases);
    let functions: BTreeMap<&str, [u8; 4]> = [
        (abi::executeCall::SIGNATURE, abi::executeCall::SELECTOR),
        (
            abi::entityNonceCall::SIGNATURE,
            abi::entityNonceCall::SELECTOR,
        ),
        (
            abi::customAttributeNamesCall::SIGNATURE,
            abi::customAttributeNamesCall::SELECTOR,
        ),
        (
            abi::attributeTypeIdCall::SIGNATURE,
            abi::attributeTypeIdCall::SELECTOR,
        ),
    ]
    .into_iter()
    .collect();
    let events: BTreeMap<&str, B256> = [
        (
            abi::EntityCreated::SIGNATURE,
            abi::EntityCreated::SIGNATURE_HASH,
        ),
        (
            abi::EntityPatched::SIGNATURE,
            abi::EntityPatched::SIGNATURE_HASH,
        ),
        (
            abi::ExpiryExtended::SIGNATURE,
            abi::ExpiryExtended::SIGNATURE_HASH,
        ),
        (
            abi::OwnershipTransferred::SIGNATURE,
            abi::OwnershipTransferred::SIGNATURE_HASH,
        ),
        (
            abi::EntityDeleted::SIGNATURE,
            abi::EntityDeleted::SIGNATURE_HASH,
        ),
    ]
    .into_iter()
    .collect();
    for c in &cases {
        let id = c["id"].as_str().unwrap();
        match c["kind"].as_str().unwrap() {
            "function" => run.check(id, || {
                let sig = c["signature"].as_str().unwrap();
                let want = h(c["selector"].as_str().unwrap());
                eq_or(keccak256(sig.as_bytes())[..4].to_vec(), want.clone())?;
                match functions.get(sig) {
                    Some(sel) => eq_or(sel.to_vec(), want),
                    None if sig.starts_with("execute(") => {
                        // The retired generation-1 execute: refused, not decoded.
                        let mut cd = want.clone();
                        cd.extend_from_slice(&[0u8; 64]);
                        let e = decode_operations(&cd).err().ok_or("accepted")?;
                        ensure(matches!(e, DecodeError::Malformed(_)), || format!("{e:?}"))
                    }
                    // purgeExpired: protocol-only, not part of the client ABI.
                    None => Ok(()),
                }
            }),
            "event" => run.check(id, || {
                let sig = c["signature"].as_str().unwrap();
                let want = b32(c["topic0"].as_str().unwrap());
                eq_or(keccak256(sig.as_bytes()), want)?;
                eq_or(events.get(sig).copied(), Some(want))
            }),
            "op_tags" => run.check(id, || {
                let t = &c["tags"];
                eq_or(u64::from(abi::OP_CREATE), t["create"].as_u64().unwrap())?;
                eq_or(u64::from(abi::OP_PATCH), t["patch"].as_u64().unwrap())?;
                eq_or(
                    u64::from(abi::OP_EXTEND_EXPIRY),
                    t["extend_expiry"].as_u64().unwrap(),
                )?;
                eq_or(
                    u64::from(abi::OP_TRANSFER_OWNERSHIP),
                    t["transfer_ownership"].as_u64().unwrap(),
                )?;
                eq_or(u64::from(abi::OP_DELETE), t["delete"].as_u64().unwrap())?;
                let e = decode_operations(&raw_calldata(vec![raw_op(6, vec![])])).err();
                eq_or(e, Some(DecodeError::InvalidOpType(6)))
            }),
            "address" => run.check(id, || {
                eq_or(abi::ARKIV_ADDRESS, addr(c["value"].as_str().unwrap()))
            }),
            other => run.check(id, || Err(format!("unhandled kind {other}"))),
        }
    }
    run.finish();
}

// ------------------------------------------------------------------------------------------
// errors
// ------------------------------------------------------------------------------------------

fn custom_errors() -> BTreeMap<&'static str, [u8; 4]> {
    macro_rules! errs {
        ($($t:ident),*) => { [$((abi::$t::SIGNATURE, abi::$t::SELECTOR)),*].into_iter().collect() };
    }
    errs!(
        EmptyBatch,
        InvalidOpType,
        NonCanonicalOperationData,
        AttributesNotSorted,
        TooManyAttributes,
        EmptyMutations,
        TombstoneInCreate,
        TombstoneValueNotEmpty,
        SystemAttributeNotWritable,
        InvalidValueType,
        Ident32Empty,
        Ident32InvalidByte,
        EntityNotFound,
        EntityExpired,
        NotOwner,
        ReadOnlyEntity,
        ReservedCreationFlags,
        ExpiryDeadOnArrival,
        ExpiryNotExtended,
        TransferToZeroAddress,
        TransferToSelf
    )
}

#[test]
fn errors() {
    let cases = vectors("errors");
    let mut run = Run::new("errors", &cases);
    let known: BTreeSet<&str> = KNOWN.iter().map(|k| k.0).collect();
    let ours = custom_errors();
    assert_eq!(ours.len(), 21);
    for c in &cases {
        let id = c["id"].as_str().unwrap();
        if known.contains(id) {
            continue;
        }
        match c["kind"].as_str().unwrap() {
            "custom_error" | "standard_error" => run.check(id, || {
                let sig = c["signature"].as_str().unwrap();
                let want = h(c["selector"].as_str().unwrap());
                eq_or(keccak256(sig.as_bytes())[..4].to_vec(), want.clone())?;
                if sig == "Error(string)" {
                    return eq_or(abi::ErrorString::SELECTOR.to_vec(), want);
                }
                eq_or(ours.get(sig).map(|s| s.to_vec()), Some(want))
            }),
            "revert_data" => run.check(id, || check_revert_data(c)),
            other => run.check(id, || Err(format!("unhandled kind {other}"))),
        }
    }
    run.finish();
}

fn check_revert_data(c: &Value) -> Result<(), String> {
    let args: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let want = h(c["data"].as_str().unwrap());
    let k = || b32(&args[0]);
    let n = |i: usize| args[i].parse::<u64>().unwrap();
    let data: Vec<u8> = match c["error"].as_str().unwrap() {
        "EntityNotFound" => abi::EntityNotFound { entityKey: k() }.abi_encode(),
        "NotOwner" => abi::NotOwner {
            entityKey: k(),
            caller: addr(&args[1]),
            owner: addr(&args[2]),
        }
        .abi_encode(),
        "EntityExpired" => abi::EntityExpired {
            entityKey: k(),
            expiresAt: n(1),
        }
        .abi_encode(),
        "ExpiryNotExtended" => abi::ExpiryNotExtended {
            entityKey: k(),
            newExpiresAt: n(1),
            currentExpiresAt: n(2),
        }
        .abi_encode(),
        "TooManyAttributes" => DecodeError::TooManyAttributes {
            count: n(0) as usize,
            max: n(1) as usize,
        }
        .revert_data()
        .to_vec(),
        "Ident32InvalidByte" => DecodeError::Ident32InvalidByte {
            index: n(0) as usize,
            byte: h(&args[1])[0],
        }
        .revert_data()
        .to_vec(),
        "ReservedCreationFlags" => DecodeError::ReservedCreationFlags(n(0) as u8)
            .revert_data()
            .to_vec(),
        "SystemAttributeNotWritable" => DecodeError::SystemAttributeNotWritable(k())
            .revert_data()
            .to_vec(),
        "TombstoneInCreate" => DecodeError::TombstoneInCreate(k()).revert_data().to_vec(),
        "Error(string)" => abi::error_string_revert(&args[0]).to_vec(),
        other => return Err(format!("unhandled error {other}")),
    };
    eq_or(data, want.clone())?;
    // And the text rendering names the error.
    let text = decode_revert(&want);
    let name = c["error"].as_str().unwrap().trim_end_matches("(string)");
    ensure(text.starts_with(&format!("{name}(")), || text.clone())
}

// ------------------------------------------------------------------------------------------
// query_render
// ------------------------------------------------------------------------------------------

/// A value of the small JavaScript subset the builder column is written in.
#[derive(Debug, Clone)]
enum Js {
    Num(String),
    Big(String),
    Str(String),
    Bool(bool),
    Hex(String),
    Arr(Vec<Js>),
    Val(ArkivValue),
    Expr(Expr),
    /// An operator privsvc's builder does not offer (ne, exists, hasType).
    Unsupported(String),
}

struct JsParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsParser<'_> {
    fn ws(&mut self) {
        loop {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
            if self.s[self.i..].starts_with(b"//") {
                self.i = self.s.len();
            } else {
                return;
            }
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn string(&mut self) -> Result<String, String> {
        let q = self.s[self.i];
        self.i += 1;
        let mut out = Vec::new();
        while self.i < self.s.len() && self.s[self.i] != q {
            if self.s[self.i] == b'\\' {
                self.i += 1;
                match self.s[self.i] {
                    b'u' => {
                        let hex = std::str::from_utf8(&self.s[self.i + 1..self.i + 5]).unwrap();
                        let cp = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(
                            char::from_u32(cp).unwrap().encode_utf8(&mut buf).as_bytes(),
                        );
                        self.i += 5;
                        continue;
                    }
                    b'n' => out.push(b'\n'),
                    other => out.push(other),
                }
            } else {
                out.push(self.s[self.i]);
            }
            self.i += 1;
        }
        self.i += 1;
        String::from_utf8(out).map_err(|e| e.to_string())
    }
    fn value(&mut self) -> Result<Js, String> {
        self.ws();
        let rest = &self.s[self.i..];
        if rest.starts_with(b"2n ** 256n - 1n") {
            self.i += 15;
            return Ok(Js::Big(U256::MAX.to_string()));
        }
        match rest.first() {
            Some(b'"') | Some(b'\'') => return Ok(Js::Str(self.string()?)),
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                while !self.eat(b']') {
                    items.push(self.value()?);
                    self.eat(b',');
                }
                return Ok(Js::Arr(items));
            }
            _ => {}
        }
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric()
                || matches!(self.s[self.i], b'_' | b'-' | b'.' | b'$'))
        {
            self.i += 1;
        }
        let tok = std::str::from_utf8(&self.s[start..self.i])
            .unwrap()
            .to_owned();
        if tok.is_empty() {
            return Err(format!("unexpected input at {}", self.i));
        }
        if self.eat(b'(') {
            let mut args = Vec::new();
            while !self.eat(b')') {
                args.push(self.value()?);
                self.eat(b',');
            }
            return call(&tok, args);
        }
        let clean = tok.replace('_', "");
        Ok(match tok.as_str() {
            "true" => Js::Bool(true),
            "false" => Js::Bool(false),
            t if t.starts_with("0x") => Js::Hex(t.to_owned()),
            _ if clean.ends_with('n') => Js::Big(clean.trim_end_matches('n').to_owned()),
            _ => Js::Num(clean),
        })
    }
}

fn to_value(v: Js) -> Result<ArkivValue, String> {
    Ok(match v {
        Js::Val(v) => v,
        Js::Num(n) => ArkivValue::I32(n.parse().map_err(|_| format!("{n} is not an i32"))?),
        Js::Big(b) => ArkivValue::U256(codec::parse_uint(&b).ok_or("bad bigint")?),
        Js::Str(s) => ArkivValue::str(s).map_err(|e| e.to_string())?,
        Js::Bool(b) => ArkivValue::Bool(b),
        other => return Err(format!("not a value: {other:?}")),
    })
}

fn to_expr(v: Js) -> Result<Result<Expr, String>, String> {
    match v {
        Js::Expr(e) => Ok(Ok(e)),
        Js::Unsupported(u) => Ok(Err(u)),
        other => Err(format!("not an expression: {other:?}")),
    }
}

fn call(name: &str, mut args: Vec<Js>) -> Result<Js, String> {
    let text = |v: &Js| match v {
        Js::Str(s) | Js::Hex(s) => Ok(s.clone()),
        other => Err(format!("expected text, got {other:?}")),
    };
    let b256 = |v: &Js| -> Result<B256, String> {
        let s = text(v)?;
        let b = codec::parse_hex(&s).ok_or("bad hex")?;
        <[u8; 32]>::try_from(b.as_slice())
            .map(B256::from)
            .map_err(|_| "not 32 bytes".to_string())
    };
    let v = match name {
        "i32" => match &args[0] {
            Js::Num(n) => ArkivValue::I32(n.parse().map_err(|_| "i32 out of range")?),
            other => return Err(format!("i32 of {other:?}")),
        },
        "u64" => ArkivValue::U64(match &args[0] {
            Js::Big(b) | Js::Num(b) => b.parse().map_err(|_| "u64 out of range")?,
            other => return Err(format!("u64 of {other:?}")),
        }),
        "u256" => match &args[0] {
            Js::Big(b) | Js::Num(b) => ArkivValue::U256(codec::parse_uint(b).ok_or("bad u256")?),
            other => return Err(format!("u256 of {other:?}")),
        },
        "dec" => ArkivValue::Dec(codec::parse_dec(&text(&args[0])?).map_err(|e| e.to_string())?),
        "str" => ArkivValue::str(text(&args[0])?).map_err(|e| e.to_string())?,
        "key" => ArkivValue::Key(b256(&args[0])?),
        "bytes32" => ArkivValue::Bytes32(b256(&args[0])?),
        "addr" => {
            let b = codec::parse_hex(&text(&args[0])?).ok_or("bad hex")?;
            ArkivValue::Addr(Address::try_from(b.as_slice()).map_err(|e| e.to_string())?)
        }
        _ => {
            return expr_call(name, &mut args);
        }
    };
    Ok(Js::Val(v))
}

fn expr_call(name: &str, args: &mut Vec<Js>) -> Result<Js, String> {
    let attr = |v: &Js| match v {
        Js::Str(s) => Ok(s.clone()),
        other => Err(format!("attribute name {other:?}")),
    };
    let built = match name {
        "ne" | "exists" | "hasType" => return Ok(Js::Unsupported(name.into())),
        "eq" | "gt" | "gte" | "lt" | "lte" => {
            let n = attr(&args[0])?;
            let v = to_value(args.remove(1))?;
            match name {
                "eq" => Expr::eq(&n, v),
                "gt" => Expr::gt(&n, v),
                "gte" => Expr::ge(&n, v),
                "lt" => Expr::lt(&n, v),
                _ => Expr::le(&n, v),
            }
        }
        "startsWith" => {
            let n = attr(&args[0])?;
            let v = to_value(args.remove(1))?;
            Expr::starts_with(&n, v)
        }
        "not" => match to_expr(args.remove(0))? {
            Ok(e) => Ok(Expr::negate(e)),
            Err(u) => return Ok(Js::Unsupported(u)),
        },
        "and" | "or" => {
            let items = match args.as_slice() {
                [Js::Arr(items)] => items.clone(),
                _ => args.clone(),
            };
            let mut list = Vec::new();
            for it in items {
                match to_expr(it)? {
                    Ok(e) => list.push(e),
                    Err(u) => return Ok(Js::Unsupported(u)),
                }
            }
            if name == "and" {
                Expr::and(list)
            } else {
                Expr::or(list)
            }
        }
        other => return Err(format!("unknown builder function {other}")),
    };
    built.map(Js::Expr).map_err(|e| e.to_string())
}

#[test]
fn query_render() {
    let cases = vectors("query_render");
    let mut run = Run::new("query_render", &cases);
    let known: BTreeSet<&str> = KNOWN.iter().map(|k| k.0).collect();
    for c in &cases {
        let id = c["id"].as_str().unwrap();
        if known.contains(id) {
            continue;
        }
        run.check(id, || {
            let builder = c["builder"].as_str().unwrap();
            let src = builder.trim_start_matches("skill guide: ");
            let mut p = JsParser {
                s: src.as_bytes(),
                i: 0,
            };
            let outcome = p.value();
            if let Some(want) = c.get("rendered").and_then(Value::as_str) {
                return match outcome? {
                    Js::Expr(e) => eq_or(e.to_string(), want.to_owned()),
                    Js::Val(v) => eq_or(query::literal(&v), want.to_owned()),
                    other => Err(format!("builder gave {other:?}")),
                };
            }
            // sdk_rejects: our builder must refuse too (or not offer the operator).
            match outcome {
                Err(e) => {
                    eprintln!("[query_render] {id} refused: {e}");
                    Ok(())
                }
                Ok(Js::Unsupported(u)) => {
                    eprintln!("[query_render] {id} not offered: {u}");
                    Ok(())
                }
                Ok(Js::Expr(e)) => Err(format!("accepted and rendered {e}")),
                Ok(other) => Err(format!("accepted: {other:?}")),
            }
        });
    }
    run.finish();
}
