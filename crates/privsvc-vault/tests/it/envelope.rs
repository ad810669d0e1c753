//! Vaults seal envelopes that the envelope crate parses and attributes to the record's owner.

use privsvc_attributes::{AttrType, Attributes};
use privsvc_envelope::{envelope_signer, parse_envelope, EnvelopeBody};
use privsvc_vault::{IsolatedVault, KeyVault, RecordRef, Vault, VaultError};

const APP: &str = "envelope-tests";

fn record_fixture(payload: Vec<u8>) -> (EnvelopeBody, Attributes) {
    let mut attributes = Attributes::new();
    attributes.insert("project", APP).unwrap();
    attributes.insert("tag", "A".repeat(60)).unwrap();
    attributes.insert("kind", "note").unwrap();
    attributes.insert("level", 3i32).unwrap();
    let body = EnvelopeBody {
        app: APP.into(),
        exp: 86_400,
        hour: 494_000,
        ct: "text/plain".into(),
        enc: false,
        types: attributes.types(),
        data: payload,
    };
    (body, attributes)
}

#[tokio::test]
async fn sealed_envelopes_verify_to_the_owner() {
    let (vault, code) = KeyVault::random(APP);
    let isolated = IsolatedVault::from_recovery_code(code.as_str(), APP).unwrap();
    let record = vault.new_record();
    let (body, attributes) = record_fixture(b"hello".to_vec());

    let sealed = vault
        .signer(&record)
        .unwrap()
        .sign_envelope(&body, &attributes)
        .unwrap();
    assert_eq!(sealed.len(), 512);
    let parsed = parse_envelope(sealed.as_bytes()).unwrap();
    assert_eq!(parsed.body, body);
    assert_eq!(
        envelope_signer(&parsed, &attributes).unwrap(),
        vault.address_of(&record).unwrap()
    );

    // Same text through the trait and from the isolated vault (RFC 6979 signatures).
    let via_trait = Vault::sign_envelope(&vault, &record, &body, &attributes)
        .await
        .unwrap();
    assert_eq!(via_trait, sealed);
    let via_thread = isolated
        .sign_envelope(&record, &body, &attributes)
        .await
        .unwrap();
    assert_eq!(via_thread, sealed);

    // Another record's owner signs differently and verifies to another address.
    let other = RecordRef([1; 16]);
    let other_sealed = vault
        .signer(&other)
        .unwrap()
        .sign_envelope(&body, &attributes)
        .unwrap();
    let other_parsed = parse_envelope(other_sealed.as_bytes()).unwrap();
    assert_eq!(
        envelope_signer(&other_parsed, &attributes).unwrap(),
        vault.address_of(&other).unwrap()
    );
    assert_ne!(other_sealed, sealed);

    // Larger payloads pad to the next size.
    let (big, big_attributes) = record_fixture(vec![7u8; 2000]);
    let sealed = isolated
        .sign_envelope(&record, &big, &big_attributes)
        .await
        .unwrap();
    assert_eq!(sealed.len(), 4096);
}

#[tokio::test]
async fn sealing_errors_are_reported() {
    let (vault, _code) = KeyVault::random(APP);
    let record = vault.new_record();
    let (mut body, attributes) = record_fixture(b"x".to_vec());
    body.types.insert("missing".into(), AttrType::U64);
    let err = vault
        .signer(&record)
        .unwrap()
        .sign_envelope(&body, &attributes)
        .unwrap_err();
    assert!(matches!(err, VaultError::Envelope(_)), "{err}");
    assert!(err.to_string().contains("missing"), "{err}");

    let (isolated, _code) = IsolatedVault::random(APP).unwrap();
    let (huge, huge_attributes) = record_fixture(vec![0u8; 20_000]);
    let err = isolated
        .sign_envelope(&record, &huge, &huge_attributes)
        .await
        .unwrap_err();
    assert!(matches!(err, VaultError::Envelope(_)), "{err}");
    isolated.terminate();
    let err = isolated
        .sign_envelope(&record, &huge, &huge_attributes)
        .await
        .unwrap_err();
    assert!(matches!(err, VaultError::Terminated), "{err}");
}
