//! Stable replay of the token fuzz seed corpora (fuzz/seeds/tokens_*/*) through the entry
//! functions the cargo-fuzz targets call (`privsvc_tokens::fuzz_entry`). The seeds are written
//! by `write_generated_seeds` (ignored; run it with `-- --ignored` after a format change, then
//! review the diff).

use std::path::PathBuf;

use alloy_primitives::Address;
use privsvc_attributes::fuzz_entry::replay_seed_corpus;
use privsvc_tokens::fuzz_entry::{issue_request, token_redemption};
use privsvc_tokens::{IssueRequest, TokenRedemption};
use serde_json::{json, Value};

fn seeds_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target)
}

fn replay(target: &str, entry: fn(&[u8]) -> bool) -> (usize, usize) {
    replay_seed_corpus(&seeds_dir(target), entry)
}

#[test]
fn tokens_redemption_seeds() {
    let (accepted, rejected) = replay("tokens_redemption", token_redemption);
    assert!(
        accepted >= 2 && rejected >= 4,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn tokens_issue_request_seeds() {
    let (accepted, rejected) = replay("tokens_issue_request", issue_request);
    assert!(
        accepted >= 2 && rejected >= 3,
        "{accepted} accepted, {rejected} rejected"
    );
}

fn write(target: &str, name: &str, v: &Value) {
    std::fs::create_dir_all(seeds_dir(target)).unwrap();
    std::fs::write(seeds_dir(target).join(name), serde_json::to_vec(v).unwrap()).unwrap();
}

#[test]
#[ignore = "writes fuzz/seeds; run by hand after a format change"]
fn write_generated_seeds() {
    let t = "tokens_redemption";
    let good = serde_json::to_value(TokenRedemption::new(20_416, &[7u8; 32], &[9u8; 256])).unwrap();
    write(t, "accept-redemption.json", &good);
    let mut upper = good.clone();
    upper["nonce"] = json!(good["nonce"].as_str().unwrap().to_uppercase());
    write(t, "accept-upper-case-nonce.json", &upper);
    let edit = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        f(&mut v);
        write(t, name, &v);
    };
    edit("reject-short-nonce.json", &|v| v["nonce"] = json!("0707"));
    edit("reject-nonce-not-hex.json", &|v| {
        v["nonce"] = json!("zz".repeat(32))
    });
    edit("reject-signature-not-base64.json", &|v| {
        v["signature"] = json!("%%%")
    });
    edit("reject-epoch-negative.json", &|v| v["epoch"] = json!(-1));
    edit("reject-epoch-missing.json", &|v| {
        v.as_object_mut().unwrap().remove("epoch");
    });

    let t = "tokens_issue_request";
    let request = IssueRequest {
        issuer: Address::repeat_byte(0xab),
        chain_id: 7_738_577,
        app: "notes".into(),
        epoch: 20_416,
        wallet: Address::repeat_byte(0x12),
        blinded: vec![base64_of(&[1u8; 256]), base64_of(&[2u8; 256])],
        ts: 1_763_942_400_000,
        wallet_signature: format!("0x{}", "11".repeat(65)),
        attestation: None,
    };
    let good = serde_json::to_value(&request).unwrap();
    write(t, "accept-request.json", &good);
    let mut coded = good.clone();
    coded["attestation"] = json!("code-1");
    write(t, "accept-with-attestation.json", &coded);
    let edit = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        f(&mut v);
        write(t, name, &v);
    };
    edit("reject-blinded-not-base64.json", &|v| {
        v["blinded"] = json!(["***"])
    });
    edit("reject-issuer-missing.json", &|v| {
        v.as_object_mut().unwrap().remove("issuer");
    });
    edit("reject-chain-not-a-number.json", &|v| {
        v["chainId"] = json!("7738577")
    });
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
