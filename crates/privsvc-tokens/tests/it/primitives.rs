//! Token primitives: message layout, ids, epochs, issuance text, wire form, and real blind RSA
//! round trips with 2048-bit keys.

use base64::Engine as _;
use privsvc_tokens::*;
use sha2::{Digest, Sha256};

#[test]
fn token_message_layout_and_id() {
    let nonce = [0xabu8; 32];
    let m = token_message("my-app", 0x01020304, &nonce).unwrap();
    let mut want = b"privsvc token v1".to_vec();
    want.extend_from_slice(&[0, 6]);
    want.extend_from_slice(b"my-app");
    want.extend_from_slice(&[1, 2, 3, 4]);
    want.extend_from_slice(&nonce);
    assert_eq!(m, want);
    assert_eq!(token_id(&m).to_vec(), Sha256::digest(&want).to_vec());
    assert!(matches!(
        token_message("", 1, &nonce),
        Err(TokenError::InvalidApp { len: 0 })
    ));
    // An app name has 1 to 128 bytes, as the issuer takes it.
    assert!(matches!(
        token_message(&"a".repeat(129), 1, &nonce),
        Err(TokenError::InvalidApp { len: 129 })
    ));
    assert!(matches!(
        token_message(&"a".repeat(65_535), 1, &nonce),
        Err(TokenError::InvalidApp { len: 65_535 })
    ));
    token_message(&"é".repeat(64), 1, &nonce).unwrap();
}

#[test]
fn epochs_are_utc_days() {
    assert_eq!(epoch_of(0), 0);
    assert_eq!(epoch_of(DAY_MS - 1), 0);
    assert_eq!(epoch_of(DAY_MS), 1);
    // 2024-01-01T00:00:00Z = 1704067200000 ms = day 19723.
    assert_eq!(epoch_of(1_704_067_200_000), 19_723);
    assert_eq!(acceptable_epochs(1_704_067_200_000), [19_723, 19_722]);
    assert_eq!(acceptable_epochs(1_704_067_199_999), [19_722, 19_721]);
}

#[test]
fn issuance_message_text() {
    let b64 = base64::engine::general_purpose::STANDARD;
    let issuer: alloy_primitives::Address = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
        .parse()
        .unwrap();
    let req = IssueRequest {
        issuer,
        chain_id: 60_138_453_025,
        app: "notes".into(),
        epoch: 20_000,
        wallet: alloy_primitives::Address::ZERO,
        blinded: vec![b64.encode([1u8, 2]), b64.encode([3u8])],
        ts: 1_728_000_000_123,
        wallet_signature: String::new(),
        attestation: None,
    };
    let digest = hex::encode(Sha256::digest([1u8, 2, 3]));
    assert_eq!(
        issuance_message(&req, 1_728_000_000_123).unwrap(),
        format!("privsvc token issuance v2\nissuer: 0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed\nchain: 60138453025\napp: notes\nepoch: 20000\nts: 1728000000123\nblinded: {digest}")
    );
    // Another issuer or chain is another message (a signature does not carry over).
    let mut other = req.clone();
    other.issuer = alloy_primitives::Address::ZERO;
    assert_ne!(
        issuance_message(&other, 1).unwrap(),
        issuance_message(&req, 1).unwrap()
    );
    other = req.clone();
    other.chain_id = 1;
    assert_ne!(
        issuance_message(&other, 1).unwrap(),
        issuance_message(&req, 1).unwrap()
    );
    let mut bad = req.clone();
    bad.blinded.push("***".into());
    assert!(issuance_message(&bad, 1).is_err());
}

#[test]
fn wire_forms() {
    let t = TokenRedemption::new(19_999, &[0x0fu8; 32], &[0xffu8; 4]);
    let v = serde_json::to_value(&t).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"epoch": 19999, "nonce": "0f".repeat(32), "signature": "/////w=="})
    );
    let back: TokenRedemption = serde_json::from_value(v).unwrap();
    assert_eq!(back, t);
    let v1 = serde_json::json!({
        "app": "a", "epoch": 1, "wallet": "0x0000000000000000000000000000000000000001",
        "blinded": ["AA=="], "ts": 5, "walletSignature": "0x00"
    });
    // A v1 request (no issuer, no chain) does not parse.
    assert!(serde_json::from_value::<IssueRequest>(v1.clone()).is_err());
    let mut v2 = v1;
    v2["issuer"] = "0x0000000000000000000000000000000000000002".into();
    v2["chainId"] = 7.into();
    let req: IssueRequest = serde_json::from_value(v2).unwrap();
    assert_eq!(req.chain_id, 7);
    assert_eq!(req.attestation, None);
    assert_eq!(req.wallet_signature, "0x00");
    let resp = IssueResponse {
        blind_signatures: vec!["AA==".into()],
        remaining: 3,
    };
    assert_eq!(
        serde_json::to_value(&resp).unwrap(),
        serde_json::json!({"blindSignatures": ["AA=="], "remaining": 3})
    );
}

struct Fixture {
    sk: IssuerSecretKey,
    key: IssuerKey,
}

fn fixture() -> Fixture {
    let sk = token_suite().generate_key().unwrap();
    let key = import_issuer_key(IssuerKey::from_secret(&sk).unwrap().spki()).unwrap();
    Fixture { sk, key }
}

fn issue_one(f: &Fixture, app: &str, epoch: u32, nonce: [u8; 32]) -> TokenRedemption {
    let suite = token_suite();
    let msg = token_message(app, epoch, &nonce).unwrap();
    let blinded = suite.blind(&f.key, &msg).unwrap();
    assert_ne!(blinded.blinded_message(), &msg[..]);
    let bs = suite.blind_sign(&f.sk, blinded.blinded_message()).unwrap();
    let sig = suite.finalize(&f.key, &bs, &blinded, &msg).unwrap();
    TokenRedemption::new(epoch, &nonce, &sig)
}

#[test]
fn blind_issue_and_verify_round_trip() {
    let f = fixture();
    assert_eq!(token_suite().name(), "RSABSSA-SHA384-PSS-Deterministic");
    let token = issue_one(&f, "app", 77, [9u8; 32]);
    let id = verify_token(&f.key, "app", &token).unwrap();
    assert_eq!(id, token_id(&token_message("app", 77, &[9u8; 32]).unwrap()));
    assert_eq!(token.token_id("app").unwrap(), id);

    // PSS salts are random: a second issuance of the same message gives another signature,
    // but the same token id (spending either spends the token).
    let again = issue_one(&f, "app", 77, [9u8; 32]);
    assert_ne!(again.signature, token.signature);
    assert_eq!(verify_token(&f.key, "app", &again).unwrap(), id);

    // Bound to app, epoch, nonce and key.
    assert!(matches!(
        verify_token(&f.key, "other", &token),
        Err(TokenError::InvalidSignature)
    ));
    let mut t = token.clone();
    t.epoch = 78;
    assert!(matches!(
        verify_token(&f.key, "app", &t),
        Err(TokenError::InvalidSignature)
    ));
    let mut t = token.clone();
    t.nonce = "08".repeat(32);
    assert!(matches!(
        verify_token(&f.key, "app", &t),
        Err(TokenError::InvalidSignature)
    ));
    let mut sig = token.signature_bytes().unwrap();
    sig[0] ^= 1;
    let mut t = token.clone();
    t.signature = base64::engine::general_purpose::STANDARD.encode(&sig);
    assert!(matches!(
        verify_token(&f.key, "app", &t),
        Err(TokenError::InvalidSignature)
    ));
    let other = fixture();
    assert!(matches!(
        verify_token(&other.key, "app", &token),
        Err(TokenError::InvalidSignature)
    ));

    // Malformed fields, each with its typed reason (the decoder's error kept as the source).
    let mut t = token.clone();
    t.nonce = "zz".repeat(32);
    let e = verify_token(&f.key, "app", &t).unwrap_err();
    assert!(
        matches!(e, TokenError::Malformed(MalformedToken::NonceNotHex(_))),
        "{e:?}"
    );
    assert!(
        std::error::Error::source(&e)
            .and_then(std::error::Error::source)
            .and_then(|s| s.downcast_ref::<hex::FromHexError>())
            .is_some(),
        "{e:?}"
    );
    let mut t = token.clone();
    t.nonce = "ab".repeat(31);
    assert!(matches!(
        verify_token(&f.key, "app", &t),
        Err(TokenError::Malformed(MalformedToken::NonceLength {
            got: 62,
            expected: 64
        }))
    ));
    let mut t = token.clone();
    t.signature = "not base64!".into();
    let e = verify_token(&f.key, "app", &t).unwrap_err();
    assert!(
        matches!(
            e,
            TokenError::Malformed(MalformedToken::SignatureNotBase64(_))
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("malformed token: signature is not base64: "),
        "{e}"
    );
    let mut t = token;
    t.signature = base64::engine::general_purpose::STANDARD.encode([1u8; 255]);
    assert!(matches!(
        verify_token(&f.key, "app", &t),
        Err(TokenError::Malformed(MalformedToken::SignatureLength {
            got: 255,
            expected: MODULUS_BYTES
        }))
    ));
}

#[test]
fn finalize_rejects_a_wrong_blind_signature() {
    let f = fixture();
    let suite = token_suite();
    let msg = token_message("app", 1, &[1u8; 32]).unwrap();
    let blinded = suite.blind(&f.key, &msg).unwrap();
    let mut bs = suite.blind_sign(&f.sk, blinded.blinded_message()).unwrap();
    bs[5] ^= 0x10;
    assert!(matches!(
        suite.finalize(&f.key, &bs, &blinded, &msg),
        Err(TokenError::BadBlindSignature)
    ));
}

#[test]
fn issuer_key_import() {
    let f = fixture();
    // rsaEncryption SPKI: 294 bytes for RSA-2048.
    assert_eq!(f.key.spki().len(), 294);
    let again = import_issuer_key(f.key.spki()).unwrap();
    assert_eq!(again, f.key);
    // The RSASSA-PSS SPKI form of the same key imports to the same canonical key.
    let pss = f.key.public_key().to_spki().unwrap();
    assert_ne!(pss, f.key.spki());
    assert_eq!(import_issuer_key(&pss).unwrap(), f.key);
    let garbage = import_issuer_key(b"garbage").unwrap_err();
    assert!(matches!(garbage, TokenError::InvalidKey(_)), "{garbage:?}");
    // The DER decoder's error is kept as the source.
    assert!(std::error::Error::source(&garbage).is_some(), "{garbage:?}");
    let mut cut = f.key.spki().to_vec();
    cut.truncate(200);
    assert!(import_issuer_key(&cut).is_err());
}

#[test]
fn issuer_signer_agrees_with_the_crate_and_refuses_bad_input() {
    let f = fixture();
    let signer = BlindSigner::new(&f.sk).unwrap();
    let suite = token_suite();
    for i in 0..40u8 {
        let msg = token_message("app", 5, &[i; 32]).unwrap();
        let blinded = suite.blind(&f.key, &msg).unwrap();
        let fast = signer.sign(blinded.blinded_message()).unwrap();
        assert_eq!(
            fast,
            suite.blind_sign(&f.sk, blinded.blinded_message()).unwrap()
        );
        suite.finalize(&f.key, &fast, &blinded, &msg).unwrap();
    }
    assert!(matches!(
        signer.sign(&[0xff; MODULUS_BYTES]),
        Err(TokenError::Malformed(
            MalformedToken::BlindedNotBelowModulus
        ))
    ));
    assert!(matches!(
        signer.sign(&[1; 10]),
        Err(TokenError::Malformed(MalformedToken::BlindedLength {
            got: 10,
            expected: MODULUS_BYTES
        }))
    ));
}
