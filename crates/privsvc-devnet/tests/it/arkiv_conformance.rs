//! Every case of the Arkiv `query` and `rpc` vector sections, run against the devnet over
//! JSON-RPC (lexer- and literal-stage cases are also checked directly against the tokenizer and
//! literal parser, since the node exposes those stages only through whole queries).
//!
//! Known disagreements (kept, not dropped):
//! - q-098 (`rank = 30` must fail) is marked "superseded" in the vectors: the later grammar
//!   accepts a bare number as i32. We assert the later behaviour (ok, no match; see q-114).
//! - q-038's AST text says `u256-word 7` for `$createdAt >= u64(7)`: the node's internal word
//!   representation. We parse it as u64 (the documented type of `$createdAt`) and check the AST
//!   shape with `u64 7`.
//! - rpc-17..rpc-21 describe the SDK's `toRpcSelect()` (client side). We check that the node
//!   accepts and honours the resulting select objects; rpc-21 is an SDK-only error and is
//!   checked as "node accepts an all-false select" (nothing to reject on the node side).
//! - err-41 names -32602 for `limit 0/201` and unknown options while the e2e source asserts only
//!   an error; we assert -32602.

use std::collections::{BTreeSet, HashMap};

use alloy_primitives::{Address, Bytes, B256, U256};
use privsvc_devnet::testing::exec::derive_key;
use privsvc_devnet::testing::query::lexer::{tokenize, Tok};
use privsvc_devnet::testing::query::literal::{parse_i32, parse_tagged};
use privsvc_devnet::testing::query::{cursor, parse, Expr};
use privsvc_devnet::{DevSigner, Devnet, DevnetConfig, DevnetHandle, EntityData, StoredAttr};
use serde_json::{json, Value as Json};

use crate::common::*;

fn render_tok(t: &Tok) -> String {
    match t {
        Tok::Name(n) => format!("Name({n})"),
        Tok::SysName(n) => format!("SysName({n})"),
        Tok::Tagged { tag, body } => format!("Tagged({tag}, body {body:?})"),
        Tok::Str(s) if s.is_empty() => "Str(\"\")".into(),
        Tok::Str(s) => format!("Str({s})"),
        Tok::Int(s) => format!("Int({s:?})"),
        Tok::True => "True".into(),
        Tok::False => "False".into(),
        Tok::And => "And".into(),
        Tok::Or => "Or".into(),
        Tok::Not => "Not".into(),
        Tok::StartsWith => "StartsWith".into(),
        Tok::Exists => "Exists".into(),
        Tok::TypeOf => "TypeOf".into(),
        Tok::Eq => "Eq".into(),
        Tok::Neq => "Neq".into(),
        Tok::Lt => "Lt".into(),
        Tok::Lte => "Lte".into(),
        Tok::Gt => "Gt".into(),
        Tok::Gte => "Gte".into(),
        Tok::LParen => "LParen".into(),
        Tok::RParen => "RParen".into(),
        Tok::Star => "Star".into(),
    }
}

/// AST in the vectors' notation: leaves `Eq(name, tag value)`; inside compound nodes leaves are
/// abbreviated to the attribute name.
fn render_ast(e: &Expr, top: bool) -> String {
    match e {
        Expr::All => "All".into(),
        Expr::And(a, b) => format!("And({}, {})", render_ast(a, false), render_ast(b, false)),
        Expr::Or(a, b) => format!("Or({}, {})", render_ast(a, false), render_ast(b, false)),
        Expr::Not(a) => format!("Not({})", render_ast(a, false)),
        Expr::Pred(p) if !top => p.attr.to_string(),
        Expr::Pred(p) => {
            let op = match p.op {
                privsvc_devnet::testing::query::CmpOp::Eq => "Eq",
                privsvc_devnet::testing::query::CmpOp::Lt => "Lt",
                privsvc_devnet::testing::query::CmpOp::Lte => "Lte",
                privsvc_devnet::testing::query::CmpOp::Gt => "Gt",
                privsvc_devnet::testing::query::CmpOp::Gte => "Gte",
                privsvc_devnet::testing::query::CmpOp::StartsWith => "StartsWith",
            };
            let lit = p.value.render();
            let (tag, body) = match lit.split_once('(') {
                Some((t, b)) => (t.to_string(), b.trim_end_matches(')').to_string()),
                None => ("bool".to_string(), lit.clone()),
            };
            let body = if body.starts_with("0x") && body.len() > 6 {
                format!("{}…{}", &body[..4], &body[body.len() - 2..])
            } else {
                body
            };
            format!("{op}({}, {tag} {body})", p.attr)
        }
    }
}

fn err_text(e: &RpcErr) -> String {
    let d = e
        .data
        .as_ref()
        .and_then(|d| d["message"].as_str())
        .unwrap_or_default();
    format!("{} {}", e.message, d)
}

/// Start an on-demand devnet on chain 1337 and create the e2e-5 dataset with dev key 0.
async fn e2e5() -> (DevnetHandle, HashMap<String, B256>) {
    let mut config = DevnetConfig::on_demand();
    config.chain_id = 1337;
    let node = Devnet::start(config).await.unwrap();
    let signer = DevSigner::dev(0);
    let teams = ["red", "red", "blue", "blue", "green"];
    let ops = (0..5)
        .map(|i| {
            let mut c = sys_cells("text/plain", format!("e{i}").as_bytes());
            c.push(u256_cell("rank", 10 * (i as u128 + 1)));
            c.push(str_cell("team", teams[i]));
            create_op(0, 0, 1_000_000, 0, c)
        })
        .collect();
    let r = send_batch(&node, &signer, ops).await;
    assert_eq!(r["status"], "0x1");
    let mut keys = HashMap::new();
    for k in vectors("keys") {
        if let Some(label) = k["label"].as_str() {
            keys.insert(
                label.to_string(),
                k["key"].as_str().unwrap().parse::<B256>().unwrap(),
            );
        }
    }
    let logged: Vec<B256> = r["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["topics"][1].as_str().unwrap().parse().unwrap())
        .collect();
    let expected: Vec<B256> = (0..5).map(|i| keys[&format!("k{i}")]).collect();
    assert_eq!(
        logged, expected,
        "e2e-5 keys must equal the vectors' k0..k4"
    );
    (node, keys)
}

/// Genesis dataset seeded-2000 on chain 1337.
async fn seeded(n: u64) -> DevnetHandle {
    let owners = [DevSigner::dev(0).address(), DevSigner::dev(1).address()];
    let teams = ["red", "green", "blue"];
    let mut ents = Vec::new();
    let mut nonces = [0u64; 2];
    for i in 0..n {
        let o = (i % 2) as usize;
        let key = derive_key(1337, owners[o], nonces[o], 0);
        nonces[o] += 1;
        ents.push(EntityData {
            key,
            owner: owners[o],
            creator: owners[o],
            created_at: 0,
            updated_at: 0,
            expires_at: 1_000_000,
            flags: 0,
            content_type: "text/plain".into(),
            payload: Bytes::new(),
            attrs: vec![
                StoredAttr {
                    name: "rank".into(),
                    type_id: 4,
                    value: word_u((i % 100) as u128),
                },
                StoredAttr {
                    name: "team".into(),
                    type_id: 8,
                    value: Bytes::from(teams[(i % 3) as usize].as_bytes().to_vec()),
                },
            ],
        });
    }
    let mut config = DevnetConfig::on_demand();
    config.chain_id = 1337;
    config.genesis_entities = ents;
    let node = Devnet::start(config).await.unwrap();
    for (o, nn) in owners.iter().zip(nonces) {
        let mut a = node.account(*o);
        a.entity_nonce = nn;
        node.set_account(*o, a).unwrap();
    }
    node
}

#[tokio::test]
async fn query_section() {
    let (node, keys) = e2e5().await;
    let seeded_node = seeded(2000).await;
    let url = node.url();
    let mut checked = 0;
    for case in vectors("query") {
        let id = case["id"].as_str().unwrap();
        let input = case["input"].as_str().unwrap();
        let expect_ok = case["expect"] == "ok";
        let code = case["code"].as_i64();
        let msg = case["message_contains"].as_str();
        match case["stage"].as_str() {
            Some("lexer") => {
                let r = tokenize(input);
                if expect_ok {
                    let toks = r.unwrap_or_else(|e| panic!("{id}: {e:?}"));
                    if let Some(want) = case["tokens"].as_array() {
                        let got: Vec<String> = toks.iter().map(|t| render_tok(&t.tok)).collect();
                        let want: Vec<String> = want
                            .iter()
                            .map(|w| w.as_str().unwrap().to_string())
                            .collect();
                        assert_eq!(got, want, "{id}");
                    }
                    if let Some(pos) = case["token_positions"].as_array() {
                        let got: Vec<u64> = toks.iter().map(|t| t.pos as u64).collect();
                        let want: Vec<u64> = pos.iter().map(|p| p.as_u64().unwrap()).collect();
                        assert_eq!(got, want, "{id}");
                    }
                } else {
                    let e = r.expect_err(id);
                    assert_eq!(e.code(), code.unwrap_or(-32001), "{id}");
                    if let Some(m) = msg {
                        assert!(e.message.contains(m), "{id}: {:?} lacks {m:?}", e.message);
                    }
                    if let Some(p) = case["position"].as_u64() {
                        assert_eq!(e.position, Some(p as usize), "{id}");
                    }
                    if case["has_position"] == true {
                        assert!(e.position.is_some(), "{id}");
                    }
                    // The same text as a whole query fails over RPC with a syntax error.
                    let r = rpc(&url, "arkiv_query", json!([input, {}])).await;
                    assert_eq!(r.expect_err(id).code, -32001, "{id} over RPC");
                }
            }
            Some("literal") => {
                let (lit, bare) = match input.split_once(" (bare") {
                    Some((v, _)) => (v.to_string(), true),
                    None => (input.to_string(), false),
                };
                let direct = if bare {
                    parse_i32(&lit, 0, false).map(|v| json!(v))
                } else {
                    let (tag, body) = lit.split_once('(').unwrap();
                    parse_tagged(tag.trim(), body.strip_suffix(')').unwrap(), 0).map(|l| {
                        json!({"type": l.type_id, "bytes": format!("0x{}", hex::encode(&l.bytes))})
                    })
                };
                if expect_ok {
                    let v = direct.unwrap_or_else(|e| panic!("{id}: {e:?}"));
                    if let Some(w) = case["value_word"].as_str() {
                        assert_eq!(v["bytes"], w, "{id}");
                    }
                    if let Some(w) = case["value_int"].as_str() {
                        let b: B256 = v["bytes"].as_str().unwrap().parse().unwrap();
                        let got = alloy_primitives::I256::from_raw(U256::from_be_bytes(b.0));
                        assert_eq!(got.to_string(), w, "{id}");
                    }
                    if let Some(want) = case.get("value") {
                        if bare {
                            assert_eq!(&v, want, "{id}");
                        } else {
                            let t = v["type"].as_u64().unwrap() as u8;
                            let b =
                                hex::decode(v["bytes"].as_str().unwrap().trim_start_matches("0x"))
                                    .unwrap();
                            let j = privsvc_devnet::testing::value::to_json(t, &b);
                            let ok = match (t, want) {
                                (3, Json::String(s)) => U256::from_be_slice(&b).to_string() == *s,
                                (9, Json::String(s)) => j.as_str().unwrap().to_lowercase() == *s,
                                _ => &j == want,
                            };
                            assert!(ok, "{id}: {j} != {want}");
                        }
                    }
                } else {
                    let e = direct.expect_err(id);
                    assert_eq!(e.code(), code.unwrap_or(-32003), "{id}");
                    if let Some(m) = msg {
                        assert!(e.message.contains(m), "{id}: {:?} lacks {m:?}", e.message);
                    }
                }
                // Over RPC, as the value of a user attribute. (`abc (bare)` is a unit case of the
                // bare-i32 parser; in a whole query `x = abc` never reaches it: a name in value
                // position is a syntax error, so that one is checked only directly.)
                if bare
                    && !lit
                        .trim_start_matches('-')
                        .bytes()
                        .all(|c| c.is_ascii_digit())
                {
                    checked += 1;
                    continue;
                }
                let r = rpc(&url, "arkiv_query", json!([format!("x = {lit}"), {}])).await;
                match (expect_ok, r) {
                    (true, Ok(_)) => {}
                    (false, Err(e)) => assert_eq!(e.code, code.unwrap_or(-32003), "{id} over RPC"),
                    (ok, r) => panic!("{id} over RPC: expected ok={ok}, got {r:?}"),
                }
            }
            Some(other) => panic!("{id}: unknown stage {other}"),
            None => {
                if case["status"] == "superseded" {
                    // Superseded by the later grammar (see the module docs): assert the later
                    // behaviour instead.
                    let r = rpc(&url, "arkiv_query", json!([input, {}])).await;
                    assert!(r.is_ok(), "{id}: later grammar accepts it");
                    checked += 1;
                    continue;
                }
                let target = if case["dataset"] == "seeded-2000" {
                    seeded_node.url()
                } else {
                    url.clone()
                };
                if let Some(method) = case["method"].as_str() {
                    assert!(method.starts_with("arkiv_getEntityCount"), "{id}");
                    let mut arg = json!({"query": input});
                    if let Some(b) = case["block"].as_u64() {
                        arg["block"] = json!(b);
                    }
                    let n = rpc(&target, "arkiv_getEntityCount", json!([arg]))
                        .await
                        .unwrap();
                    assert_eq!(n, case["expect_count"], "{id}");
                    checked += 1;
                    continue;
                }
                let r = rpc(&target, "arkiv_query", json!([input, {"limit": "0xc8"}])).await;
                if expect_ok {
                    let res = r.unwrap_or_else(|e| panic!("{id}: {e:?}"));
                    if let Some(want) = case["expect_match"].as_array() {
                        let got: BTreeSet<B256> = res["data"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|row| row["key"].as_str().unwrap().parse().unwrap())
                            .collect();
                        let want: BTreeSet<B256> =
                            want.iter().map(|k| keys[k.as_str().unwrap()]).collect();
                        assert_eq!(got, want, "{id}");
                    }
                    let parsed = parse(input).unwrap();
                    if let Some(n) = case["normalized"].as_str() {
                        assert_eq!(parsed.to_string(), n, "{id} normalized");
                        assert_eq!(
                            parse(n).unwrap(),
                            parsed,
                            "{id}: normalized form parses to the same AST"
                        );
                    }
                    if let Some(a) = case["ast"].as_str() {
                        let a = a.replace("u256-word", "u64");
                        assert_eq!(render_ast(&parsed, true), a, "{id} ast");
                    }
                } else {
                    let e = r.expect_err(id);
                    assert_eq!(Some(e.code), code, "{id}: {e:?}");
                    if let Some(m) = msg {
                        assert!(err_text(&e).contains(m), "{id}: {e:?} lacks {m:?}");
                    }
                    if case["has_position"] == true {
                        assert!(
                            e.data.as_ref().is_some_and(|d| d.get("position").is_some()),
                            "{id}: {e:?}"
                        );
                    }
                }
            }
        }
        checked += 1;
    }
    assert_eq!(checked, vectors("query").len());
    node.shutdown().await;
    seeded_node.shutdown().await;
}

#[tokio::test]
async fn seeded_genesis_next_key() {
    // key-010: the first post-genesis create of 0xf39F… after a 2000-entity seed uses nonce 1000.
    let node = seeded(2000).await;
    let r = send_batch(
        &node,
        &DevSigner::dev(0),
        vec![create_op(0, 0, 100, 0, sys_cells("text/plain", b""))],
    )
    .await;
    let want = vectors("keys")
        .into_iter()
        .find(|k| k["id"] == "key-010")
        .unwrap();
    assert_eq!(r["logs"][0]["topics"][1], want["key"]);
    node.shutdown().await;
}

#[tokio::test]
async fn rpc_section() {
    let (node, keys) = e2e5().await;
    let url = node.url();
    let head = q(&rpc(&url, "eth_blockNumber", json!([])).await.unwrap());
    let all = rpc(&url, "arkiv_query", json!(["*", {}])).await.unwrap();
    for case in vectors("rpc") {
        let id = case["id"].as_str().unwrap().to_string();
        match case["kind"].as_str().unwrap() {
            "cursor_format" => {
                let c = cursor::encode("q", 1, &[1, 0], 5);
                assert!(c.starts_with("b64:"), "{id}");
                assert_eq!(c.len(), 4 + 22, "{id}: 16 bytes base64url without padding");
            }
            "cursor_example" => {
                let fp = match (
                    case["fingerprint_utf8"].as_str(),
                    case["fingerprint_hex"].as_str(),
                ) {
                    (Some(s), _) => s.as_bytes().to_vec(),
                    (_, Some(h)) => hex::decode(h.trim_start_matches("0x")).unwrap(),
                    _ => unreachable!(),
                };
                let q = case["query"].as_str().unwrap();
                let b = case["block"].as_u64().unwrap();
                let c = cursor::encode(q, b, &fp, case["entity_id"].as_u64().unwrap());
                assert_eq!(c, case["cursor"].as_str().unwrap(), "{id}");
                assert_eq!(
                    cursor::decode(&c, q, b, &fp),
                    Ok(case["entity_id"].as_u64().unwrap()),
                    "{id}"
                );
                if case["select"]
                    .as_str()
                    .is_some_and(|s| s.contains("default"))
                {
                    assert_eq!(
                        privsvc_devnet::testing::select::Projection::default().fingerprint(),
                        fp,
                        "{id}"
                    );
                }
            }
            "cursor_decode" => {
                let c = case["cursor"].as_str().unwrap();
                let want = case["expect"].as_str().unwrap();
                let (q, b, fp) = match case.get("decode_with") {
                    Some(d) => (
                        d["query"].as_str().unwrap().to_string(),
                        d["block"].as_u64().unwrap(),
                        d["fingerprint_utf8"].as_str().unwrap().as_bytes().to_vec(),
                    ),
                    None => (
                        "*".to_string(),
                        head,
                        privsvc_devnet::testing::select::Projection::default().fingerprint(),
                    ),
                };
                let e = cursor::decode(c, &q, b, &fp).expect_err(&id);
                assert_eq!(format!("{e:?}"), want, "{id}");
                // Over RPC: the node answers -32005.
                let r = rpc(
                    &url,
                    "arkiv_query",
                    json!(["*", {"cursor": c, "atBlock": format!("{head:#x}")}]),
                )
                .await;
                assert_eq!(
                    r.expect_err(&id).code,
                    case["code"].as_i64().unwrap(),
                    "{id} over RPC"
                );
            }
            "cursor_binding" => {
                let a = cursor::binding("ab", 0, b"");
                let b = cursor::binding("a", 0, b"b");
                assert_ne!(a, b, "{id}");
                let vals: Vec<Vec<u8>> = case["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| {
                        (0..8)
                            .map(|i| v[i.to_string()].as_u64().unwrap() as u8)
                            .collect()
                    })
                    .collect();
                assert_eq!(a.to_vec(), vals[0], "{id}");
                assert_eq!(b.to_vec(), vals[1], "{id}");
            }
            "select" => check_select(&node, &case).await,
            "arkiv_query_options" => {
                let c = case["case"].as_str().unwrap();
                match c {
                    "options whitelist" => {
                        for k in case["expect"]["allowed"].as_array().unwrap() {
                            assert!(["atBlock", "select", "limit", "cursor"]
                                .contains(&k.as_str().unwrap()));
                        }
                        let e = rpc(&url, "arkiv_query", json!(["*", {"resultsPerPage": "0x2"}]))
                            .await
                            .expect_err(&id);
                        assert_eq!(e.code, -32602, "{id}");
                    }
                    "limit 0" | "limit 201" => {
                        let n = if c == "limit 0" { "0x0" } else { "0xc9" };
                        let e = rpc(&url, "arkiv_query", json!(["*", {"limit": n}]))
                            .await
                            .expect_err(&id);
                        assert_eq!(e.code, -32602, "{id}");
                    }
                    c if c.starts_with("limit \"0x2\"") => {
                        let r = rpc(&url, "arkiv_query", json!(["*", {"limit": "0x2"}]))
                            .await
                            .unwrap();
                        assert_eq!(r["data"].as_array().unwrap().len(), 2, "{id}");
                    }
                    c if c.starts_with("params [") => {
                        let r = rpc(
                            &url,
                            "arkiv_query",
                            json!([format!("$key = key({})", keys["k0"])]),
                        )
                        .await
                        .unwrap();
                        assert_eq!(r["data"], json!([{"key": keys["k0"]}]), "{id}");
                        assert!(r["blockNumber"].as_str().unwrap().starts_with("0x"), "{id}");
                    }
                    c if c.starts_with("options {}") => {
                        for row in all["data"].as_array().unwrap() {
                            assert_eq!(
                                row.as_object().unwrap().keys().collect::<Vec<_>>(),
                                vec!["key"],
                                "{id}"
                            );
                        }
                    }
                    c if c.contains("(future)") => {
                        let e = rpc(&url, "arkiv_query", json!(["*", {"atBlock": "0x5f5e0ff"}]))
                            .await
                            .expect_err(&id);
                        assert_eq!(e.code, -32006, "{id}");
                        let d = e.data.unwrap();
                        assert_eq!(d["requested"], 0x5f5e0ff, "{id}");
                        assert_eq!(d["latest"], head, "{id}");
                    }
                    c if c.contains("\"pending\"") => {
                        let e = rpc(&url, "arkiv_query", json!(["*", {"atBlock": "pending"}]))
                            .await
                            .expect_err(&id);
                        assert_eq!(e.code, -32602, "{id}");
                    }
                    c if c.contains("limit 2 over 5") => {
                        let mut pages = 0;
                        let mut seen = Vec::new();
                        let mut cur: Option<String> = None;
                        loop {
                            let mut opts = json!({"limit": "0x2", "atBlock": format!("{head:#x}")});
                            if let Some(c) = &cur {
                                opts["cursor"] = json!(c);
                            }
                            let r = rpc(&url, "arkiv_query", json!(["*", opts])).await.unwrap();
                            pages += 1;
                            seen.extend(
                                r["data"]
                                    .as_array()
                                    .unwrap()
                                    .iter()
                                    .map(|x| x["key"].clone()),
                            );
                            match r.get("cursor").and_then(|c| c.as_str()) {
                                Some(c) => {
                                    assert!(c.starts_with(
                                        case["expect"]["cursor_prefix"].as_str().unwrap()
                                    ));
                                    cur = Some(c.to_string());
                                }
                                None => break,
                            }
                        }
                        assert_eq!(pages, case["expect"]["pages"].as_u64().unwrap(), "{id}");
                        assert_eq!(seen.len(), 5, "{id}");
                        // A cursor replayed with another query is refused (err-39).
                        let r = rpc(
                            &url,
                            "arkiv_query",
                            json!(["*", {"limit": "0x2", "atBlock": format!("{head:#x}")}]),
                        )
                        .await
                        .unwrap();
                        let c = r["cursor"].as_str().unwrap();
                        let e = rpc(&url, "arkiv_query", json!(["rank >= u256(10)", {"limit": "0x2", "atBlock": format!("{head:#x}"), "cursor": c}])).await.expect_err(&id);
                        assert_eq!(e.code, -32005, "{id}");
                    }
                    other => panic!("{id}: unhandled case {other}"),
                }
            }
            "method_shapes" => {
                let k0 = keys["k0"];
                let full = json!({"key": true, "owner": true, "creator": true, "createdAt": true, "updatedAt": true,
                    "expiresAt": true, "creationFlags": true, "contentType": true, "payload": true,
                    "attributeSchema": false, "attributes": true});
                let qr = rpc(
                    &url,
                    "arkiv_query",
                    json!([format!("$key = key({k0})"), {"select": full}]),
                )
                .await
                .unwrap();
                let ge = rpc(&url, "arkiv_getEntity", json!([k0])).await.unwrap();
                assert_eq!(ge, qr["data"][0], "{id}");
                let ge_at = rpc(&url, "arkiv_getEntity", json!([k0, head]))
                    .await
                    .unwrap();
                assert_eq!(ge_at, ge, "{id}");
                let before = rpc(&url, "arkiv_getEntity", json!([k0, head - 1]))
                    .await
                    .unwrap();
                assert!(before.is_null(), "{id}: not yet created one block earlier");
                assert_eq!(
                    rpc(&url, "arkiv_getEntityCount", json!([])).await.unwrap(),
                    json!(5),
                    "{id}"
                );
                assert_eq!(
                    rpc(
                        &url,
                        "arkiv_getEntityCount",
                        json!([{"query": "team = str('red')", "block": head}])
                    )
                    .await
                    .unwrap(),
                    json!(2),
                    "{id}"
                );
                let e = rpc(&url, "arkiv_getEntityCount", json!(["*"]))
                    .await
                    .expect_err(&id);
                assert_eq!(e.code, -32602, "{id}");
                let t = rpc(&url, "arkiv_getBlockTiming", json!([])).await.unwrap();
                assert_eq!(t["current_block"], json!(head), "{id}");
                assert!(
                    t["current_block_time"].is_u64() && t["duration"].is_u64(),
                    "{id}"
                );
            }
            other => panic!("{id}: unknown kind {other}"),
        }
    }
    node.shutdown().await;
}

/// The attribute names of the first row of an `arkiv_query` answer, in order.
fn first_row_attribute_names(r: &Json) -> Vec<&str> {
    r["data"][0]["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect()
}

async fn check_select(_node: &DevnetHandle, case: &Json) {
    let id = case["id"].as_str().unwrap();
    // A dedicated node whose genesis holds the entity of the view.rs fixture.
    let owner: Address = "0x3333333333333333333333333333333333333333"
        .parse()
        .unwrap();
    let creator: Address = "0x2222222222222222222222222222222222222222"
        .parse()
        .unwrap();
    let key = B256::repeat_byte(0x11);
    let e = EntityData {
        key,
        owner,
        creator,
        created_at: 0x191,
        updated_at: 0x1bb,
        expires_at: 0x2000,
        flags: 3,
        content_type: "application/json".into(),
        payload: Bytes::from(vec![0x7b, 0x22]),
        attrs: vec![
            StoredAttr {
                name: "balance".into(),
                type_id: 4,
                value: word_u(5),
            },
            StoredAttr {
                name: "projectId".into(),
                type_id: 8,
                value: Bytes::from(b"p".to_vec()),
            },
            StoredAttr {
                name: "version".into(),
                type_id: 8,
                value: Bytes::from(b"v1".to_vec()),
            },
        ],
    };
    let mut config = DevnetConfig::on_demand();
    config.start_block = 0x1bb;
    config.genesis_entities = vec![e];
    let node = Devnet::start(config).await.unwrap();
    let url = node.url();
    let query = |sel: Json| {
        let url = url.clone();
        async move { rpc(&url, "arkiv_query", json!(["*", {"select": sel}])).await }
    };
    match id {
        "rpc-12" => {
            let r = rpc(&url, "arkiv_query", json!(["*", {"select": null}]))
                .await
                .unwrap();
            assert_eq!(
                r["data"][0].as_object().unwrap().keys().collect::<Vec<_>>(),
                vec!["key"],
                "{id}"
            );
        }
        "rpc-13" => {
            let e = query(case["select"].clone()).await.expect_err(id);
            assert_eq!(e.code, -32602, "{id}");
        }
        "rpc-14" => {
            let r = query(case["select"].clone()).await.unwrap();
            let row = &r["data"][0];
            for (k, v) in case["expect"].as_object().unwrap() {
                if k == "absent" {
                    for f in v.as_array().unwrap() {
                        assert!(
                            row.get(f.as_str().unwrap()).is_none(),
                            "{id}: {f} must be absent"
                        );
                    }
                } else {
                    let got = row[k].as_str().unwrap().to_lowercase();
                    assert_eq!(got, v.as_str().unwrap().to_lowercase(), "{id}: {k}");
                }
            }
        }
        "rpc-15" => {
            let r = query(case["select"].clone()).await.unwrap();
            let names = first_row_attribute_names(&r);
            let want: Vec<&str> = case["expect"]["attribute_names"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            assert_eq!(names, want, "{id}");
        }
        "rpc-16" => {
            let r = query(case["select"].clone()).await.unwrap();
            assert_eq!(
                r["data"][0]["creationFlags"], case["expect"]["creationFlags"],
                "{id}"
            );
        }
        "rpc-17" | "rpc-18" => {
            let sel = case["expect"].clone();
            let r = query(sel.clone()).await.unwrap();
            let row = r["data"][0].as_object().unwrap();
            for (k, on) in sel.as_object().unwrap() {
                assert_eq!(row.contains_key(k), on == &json!(true), "{id}: field {k}");
            }
        }
        "rpc-19" => {
            let sel = json!({"key": true, "attributes": case["expect"]["attributes"].clone()});
            let r = query(sel).await.unwrap();
            let names = first_row_attribute_names(&r);
            assert_eq!(names, vec!["projectId"], "{id}");
        }
        "rpc-20" => {
            let r = query(json!({"key": true, "attributes": false}))
                .await
                .unwrap();
            assert!(r["data"][0].get("attributes").is_none(), "{id}");
        }
        "rpc-21" => {
            // SDK-only error; the node accepts an all-false select and returns empty rows.
            let r = query(json!({"key": false})).await.unwrap();
            assert_eq!(r["data"][0], json!({}), "{id}");
        }
        other => panic!("unhandled select case {other}"),
    }
    node.shutdown().await;
}
