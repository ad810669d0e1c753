//! Runs every vector in `conformance/vault/*.json` against this crate. The JSON files are
//! committed and independently recomputed by `conformance/vault/verify.py`; this test never
//! writes them.

use std::path::PathBuf;

use alloy_primitives::{Signature, B256};
use privsvc_vault::testing::kdf;
use privsvc_vault::{
    derivation_typed_data, proof_signer, proof_signing_hash, tag_from_text, tag_to_text,
    DeriveOptions, KeyVault, LocalWallet, OwnershipProofBody, RecordRef, RecoveryCode, Wallet,
};
use serde_json::Value;

fn load(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../conformance/vault")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("vector field {key} missing in {v}"))
}

fn bytes(v: &Value, key: &str) -> Vec<u8> {
    let text = s(v, key);
    hex::decode(text.strip_prefix("0x").unwrap_or(text)).expect("hex field")
}

fn array<const N: usize>(v: &Value, key: &str) -> [u8; N] {
    bytes(v, key).try_into().expect("field length")
}

fn signature(v: &Value, key: &str) -> Signature {
    Signature::from_raw(&bytes(v, key)).expect("65-byte signature")
}

fn record(v: &Value, key: &str) -> RecordRef {
    s(v, key).parse().expect("record ref")
}

fn cases(file: &Value) -> &Vec<Value> {
    let cases = file["cases"].as_array().expect("cases array");
    assert!(
        !cases.is_empty(),
        "a vector file without cases checks nothing"
    );
    cases
}

/// The vault every file but derivation/recovery is built on, checked against its stated root.
fn vault_of(file: &Value) -> (KeyVault, [u8; 32]) {
    let setup = &file["vault"];
    let app = s(setup, "app");
    let sig = signature(setup, "signature");
    let root = kdf::root_from_signature(&sig, app);
    assert_eq!(
        hex::encode(*root),
        s(setup, "root"),
        "root of the vector vault"
    );
    (KeyVault::from_signature(&sig, app), *root)
}

#[tokio::test]
async fn derivation_vectors() {
    let file = load("derivation.json");
    let wallet = LocalWallet::from_hex(s(&file, "walletKey")).unwrap();
    assert_eq!(wallet.address().to_string(), s(&file, "walletAddress"));
    for case in cases(&file) {
        let app = s(case, "app");
        let chain_id = case["chainId"].as_u64().unwrap();
        let hash = derivation_typed_data(app, Some(chain_id))
            .eip712_signing_hash()
            .unwrap();
        assert_eq!(hash.to_string(), s(case, "typedDataHash"), "{case}");
        let opts = DeriveOptions::for_chain(chain_id);
        let sig = KeyVault::sign_derivation(&wallet, app, &opts)
            .await
            .unwrap();
        assert_eq!(sig, signature(case, "signature"), "{case}");
        let root = kdf::root_from_signature(&sig, app);
        assert_eq!(hex::encode(*root), s(case, "root"), "{case}");
        assert_eq!(hex::encode(*kdf::tag_key(&root)), s(case, "tagKey"));
    }
}

#[test]
fn owner_vectors() {
    let file = load("owners.json");
    let (vault, root) = vault_of(&file);
    for case in cases(&file) {
        let r = record(case, "ref");
        let counter = u8::try_from(case["counter"].as_u64().unwrap()).unwrap();
        let key = kdf::owner_key_candidate(&root, r.as_bytes(), counter);
        assert_eq!(hex::encode(*key), s(case, "ownerKey"));
        let address = vault.address_of(&r).unwrap();
        assert_eq!(address.to_string(), s(case, "address"), "{case}");
        assert_eq!(vault.signer(&r).unwrap().address(), address);
    }
}

#[test]
fn scope_vectors() {
    let file = load("scopes.json");
    let (vault, root) = vault_of(&file);
    for case in cases(&file) {
        let name = s(case, "name");
        let r = vault.scope_record(name);
        assert_eq!(r.to_hex(), s(case, "ref"), "{case}");
        assert_eq!(kdf::scope_ref_bytes(&root, name), *r.as_bytes());
        assert_eq!(
            vault.address_of(&r).unwrap().to_string(),
            s(case, "address")
        );
    }
}

#[test]
fn tag_vectors() {
    let file = load("tags.json");
    let (vault, root) = vault_of(&file);
    assert_eq!(hex::encode(*kdf::tag_key(&root)), s(&file, "tagKey"));
    let mut all = Vec::new();
    for case in cases(&file) {
        let r = record(case, "ref");
        let tag = vault.make_tag_with_nonce(&r, &array(case, "nonce"));
        assert_eq!(hex::encode(tag), s(case, "tag"), "{case}");
        assert_eq!(tag_to_text(&tag), s(case, "text"));
        assert_eq!(tag_from_text(s(case, "text")), Some(tag));
        all.push((tag, r));
    }
    let tags: Vec<_> = all.iter().map(|(t, _)| *t).collect();
    let expected: Vec<_> = all.iter().map(|(_, r)| Some(*r)).collect();
    assert_eq!(vault.open_tags(&tags), expected);
}

#[test]
fn encryption_vectors() {
    let file = load("encryption.json");
    let (vault, root) = vault_of(&file);
    for case in cases(&file) {
        let r = record(case, "ref");
        assert_eq!(
            hex::encode(*kdf::enc_key(&root, r.as_bytes())),
            s(case, "encKey")
        );
        let plaintext = bytes(case, "plaintext");
        let stored = vault.encrypt_with_nonce(&r, &array(case, "nonce"), &plaintext);
        assert_eq!(hex::encode(&stored), s(case, "stored"), "{case}");
        assert_eq!(
            vault.decrypt(&r, &bytes(case, "stored")).unwrap(),
            plaintext
        );
    }
}

#[test]
fn proof_vectors() {
    let file = load("proofs.json");
    let (vault, _) = vault_of(&file);
    for case in cases(&file) {
        let body: OwnershipProofBody = serde_json::from_value(case["body"].clone()).unwrap();
        let chain_id = case["chainId"].as_u64().unwrap();
        let hash = proof_signing_hash(&body, Some(chain_id)).unwrap();
        assert_eq!(hash.to_string(), s(case, "typedDataHash"), "{case}");
        let signer = vault.signer(&record(case, "signerRef")).unwrap();
        assert_eq!(signer.address().to_string(), s(case, "signer"));
        let sig = signer.sign_proof_on_chain(&body, Some(chain_id)).unwrap();
        assert_eq!(sig, signature(case, "signature"), "{case}");
        assert_eq!(
            proof_signer(&body, Some(chain_id), &sig).unwrap(),
            signer.address()
        );
        assert_ne!(hash, B256::ZERO);
    }
}

#[test]
fn recovery_vectors() {
    let file = load("recovery.json");
    for case in cases(&file) {
        let entropy: [u8; 32] = array(case, "entropy");
        let code = RecoveryCode::from_entropy(&entropy);
        assert_eq!(code.as_str(), s(case, "code"), "{case}");
        let app = s(case, "app");
        assert_eq!(
            hex::encode(*kdf::root_from_entropy(&entropy, app)),
            s(case, "root")
        );
        let vault = KeyVault::from_recovery_code(s(case, "code"), app).unwrap();
        assert_eq!(
            vault.scope_record("default").to_hex(),
            s(case, "scopeDefault")
        );
    }
}
