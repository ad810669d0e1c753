//! `verify_record` on hand-built ledger entities: a genuine record passes, every kind of
//! tampering is refused with the matching reason.

use alloy_primitives::{Address, B256};
use k256::ecdsa::SigningKey;
use privsvc_attributes::{AttrValue, Attributes};
use privsvc_client::{verify_record, RejectReason, Unchecked, VerifyOptions};
use privsvc_envelope::{seal_envelope, EnvelopeBody};
use privsvc_ledger::{ArkivValue, Attribute, Entity};

const APP: &str = "notes";
/// The hour the test envelopes are sealed in.
const HOUR: u64 = 494_000;
/// The timestamp of the test entities' creation block: ten minutes into that hour.
const CREATED: u64 = HOUR * 3600 + 600;

fn ledger_attrs(attrs: &Attributes) -> Vec<Attribute> {
    attrs
        .iter()
        .map(|(n, v)| Attribute {
            name: n.clone(),
            value: match v {
                AttrValue::Str(s) => ArkivValue::Str(s.clone()),
                AttrValue::I32(x) => ArkivValue::I32(*x),
                AttrValue::U64(x) => ArkivValue::U64(*x),
                AttrValue::U256(x) => ArkivValue::U256(*x),
            },
        })
        .collect()
}

struct Fixture {
    entity: Entity,
    owner: Address,
    relayer: Address,
}

fn record(app: &str) -> Fixture {
    let key = SigningKey::random(&mut rand::rngs::OsRng);
    let owner = Address::from_private_key(&key);
    let relayer = Address::repeat_byte(0x42);
    let mut attrs = Attributes::new();
    attrs.insert("project", APP).unwrap();
    attrs.insert("tag", "x".repeat(60)).unwrap();
    attrs.insert("kind", "note").unwrap();
    attrs.insert("level", AttrValue::I32(3)).unwrap();
    let body = EnvelopeBody {
        app: app.into(),
        exp: 3600,
        hour: HOUR,
        ct: "text/plain".into(),
        enc: false,
        types: attrs.types(),
        data: b"hello".to_vec(),
    };
    let sealed = seal_envelope(&body, &attrs, &key).unwrap();
    let entity = Entity {
        key: B256::repeat_byte(7),
        owner: Some(owner),
        creator: Some(relayer),
        created_at: Some(100),
        updated_at: Some(100),
        expires_at: Some(100 + 1800),
        creation_flags: None,
        content_type: Some("application/json".into()),
        payload: Some(sealed.into_bytes()),
        attributes: Some(ledger_attrs(&attrs)),
    };
    Fixture {
        entity,
        owner,
        relayer,
    }
}

fn opts(f: &Fixture) -> VerifyOptions<'static> {
    VerifyOptions {
        app: Some(APP),
        relayers: None,
        owner: Some(f.owner),
        created_timestamp: Some(CREATED),
    }
}

/// No expectation but the (required) creation time.
fn no_expectation() -> VerifyOptions<'static> {
    VerifyOptions {
        created_timestamp: Some(CREATED),
        ..VerifyOptions::default()
    }
}

#[test]
fn genuine_record_verifies() {
    let f = record(APP);
    let trusted = [f.relayer];
    let v = verify_record(
        &f.entity,
        &VerifyOptions {
            relayers: Some(&trusted),
            ..opts(&f)
        },
    )
    .unwrap();
    assert_eq!(v.owner, f.owner);
    assert_eq!(v.creator, f.relayer);
    assert_eq!(v.body.data, b"hello");
    assert_eq!(
        v.attributes.get("kind"),
        Some(&AttrValue::Str("note".into()))
    );
    assert!(v.envelope.starts_with('{') && v.envelope.ends_with('}'));
    // Without any expectation it verifies as well (signature vs. the entity's owner).
    verify_record(&f.entity, &no_expectation()).unwrap();
}

#[test]
fn changed_attribute_value_breaks_the_signature() {
    let mut f = record(APP);
    for a in f.entity.attributes.as_mut().unwrap() {
        if a.name == "kind" {
            a.value = ArkivValue::Str("secret".into());
        }
    }
    let err = verify_record(&f.entity, &opts(&f)).unwrap_err();
    assert!(
        matches!(err, RejectReason::SignatureMismatch { owner, .. } if owner == f.owner),
        "{err:?}"
    );
}

#[test]
fn added_or_retyped_attribute_is_an_attribute_mismatch() {
    let mut f = record(APP);
    f.entity.attributes.as_mut().unwrap().push(Attribute {
        name: "extra".into(),
        value: ArkivValue::Str("x".into()),
    });
    assert!(matches!(
        verify_record(&f.entity, &opts(&f)).unwrap_err(),
        RejectReason::AttributesMismatch(m) if m.contains("extra")
    ));
    let mut f = record(APP);
    for a in f.entity.attributes.as_mut().unwrap() {
        if a.name == "level" {
            a.value = ArkivValue::U64(3);
        }
    }
    assert!(matches!(
        verify_record(&f.entity, &opts(&f)).unwrap_err(),
        RejectReason::AttributesMismatch(m) if m.contains("level")
    ));
}

#[test]
fn wrong_owner_is_refused() {
    let mut f = record(APP);
    let stranger = Address::repeat_byte(0x99);
    f.entity.owner = Some(stranger);
    // Expecting the vault's owner: the entity is owned by someone else.
    assert_eq!(
        verify_record(&f.entity, &opts(&f)).unwrap_err(),
        RejectReason::WrongOwner {
            expected: f.owner,
            found: stranger
        }
    );
    // No expectation: the envelope was not signed by the entity's owner.
    assert!(matches!(
        verify_record(&f.entity, &no_expectation()).unwrap_err(),
        RejectReason::SignatureMismatch { signer, owner } if signer == f.owner && owner == stranger
    ));
}

#[test]
fn foreign_creator_is_refused_with_trusted_relayers() {
    let f = record(APP);
    let trusted = [Address::repeat_byte(0x11), Address::repeat_byte(0x12)];
    assert_eq!(
        verify_record(
            &f.entity,
            &VerifyOptions {
                relayers: Some(&trusted),
                ..opts(&f)
            }
        )
        .unwrap_err(),
        RejectReason::UntrustedCreator(f.relayer)
    );
}

#[test]
fn other_app_is_refused() {
    let f = record("other-app");
    assert!(matches!(
        verify_record(&f.entity, &opts(&f)).unwrap_err(),
        RejectReason::WrongApp { found, .. } if found == "other-app"
    ));
}

#[test]
fn lifetime_must_match_the_expiry_bucket() {
    let mut f = record(APP);
    f.entity.expires_at = Some(100 + 43_200);
    assert_eq!(
        verify_record(&f.entity, &opts(&f)).unwrap_err(),
        RejectReason::LifetimeMismatch {
            blocks: 43_200,
            exp_seconds: 3600,
            expected: 1800
        }
    );
    // Without block numbers the lifetime is not checked.
    f.entity.created_at = None;
    verify_record(&f.entity, &opts(&f)).unwrap();
}

#[test]
fn tampered_or_missing_payload_is_refused() {
    let mut f = record(APP);
    let mut payload = f.entity.payload.take().unwrap();
    assert_eq!(
        verify_record(&f.entity, &opts(&f)).unwrap_err(),
        RejectReason::MissingField("payload")
    );
    let pos = payload.iter().position(|b| *b == b'{').unwrap();
    payload[pos] = b'[';
    f.entity.payload = Some(payload);
    assert!(matches!(
        verify_record(&f.entity, &opts(&f)).unwrap_err(),
        RejectReason::BadEnvelope(_)
    ));
    let mut f = record(APP);
    f.entity.content_type = Some("text/plain".into());
    assert!(matches!(
        verify_record(&f.entity, &opts(&f)).unwrap_err(),
        RejectReason::WrongContentType(_)
    ));
}

#[test]
fn copy_republished_after_its_window_is_refused() {
    // The same genuine envelope, written (by a rogue relayer) at different times: accepted
    // while the creation block is before (hour + 4) x 3600, refused from then on.
    let f = record(APP);
    let deadline = (HOUR + 4) * 3600;
    for created in [HOUR * 3600, CREATED, deadline - 1] {
        let o = VerifyOptions {
            created_timestamp: Some(created),
            ..opts(&f)
        };
        verify_record(&f.entity, &o).unwrap_or_else(|e| panic!("{created}: {e}"));
    }
    for created in [deadline, deadline + 1, deadline + 90 * 86_400] {
        let o = VerifyOptions {
            created_timestamp: Some(created),
            ..opts(&f)
        };
        let e = verify_record(&f.entity, &o).unwrap_err();
        assert_eq!(
            e,
            RejectReason::Republished {
                hour: HOUR,
                created,
                deadline
            }
        );
        assert!(e.to_string().contains("republished"), "{e}");
    }
}

#[test]
fn without_a_creation_time_or_a_reader_the_unchecked_checks_are_named() {
    // The specification's form: `verify_record(entity, { app, relayers })`, no reader. A
    // genuine record verifies, and the verdict names what could not be checked.
    let f = record(APP);
    for o in [
        VerifyOptions::default(),
        VerifyOptions {
            created_timestamp: None,
            ..opts(&f)
        },
    ] {
        let v = verify_record(&f.entity, &o).expect("a genuine record");
        assert_eq!(
            v.unchecked,
            vec![Unchecked::CreationWindow, Unchecked::Copy]
        );
    }
    // With the creation time, only copies remain unchecked (they need a reader).
    let v = verify_record(&f.entity, &opts(&f)).unwrap();
    assert_eq!(v.unchecked, vec![Unchecked::Copy]);
    // Every other check is still made: a forged owner is refused without a reader too.
    let mut forged = record(APP);
    forged.entity.owner = Some(alloy_primitives::Address::repeat_byte(9));
    assert!(matches!(
        verify_record(&forged.entity, &VerifyOptions::default()),
        Err(RejectReason::SignatureMismatch { .. })
    ));
}

#[test]
fn version_1_envelopes_are_refused() {
    let mut f = record(APP);
    let text = String::from_utf8(f.entity.payload.take().unwrap()).unwrap();
    let v1 = text
        .trim_end_matches(' ')
        .replacen(&format!(",\"hour\":{HOUR}"), "", 1)
        .replacen("\"v\":2", "\"v\":1", 1);
    f.entity.payload = Some(privsvc_envelope::pad_envelope(&v1).unwrap().into_bytes());
    let e = verify_record(&f.entity, &opts(&f)).unwrap_err();
    assert!(
        matches!(
            &e,
            RejectReason::BadEnvelope(privsvc_envelope::EnvelopeError::UnsupportedVersion(v)) if *v == 1
        ),
        "{e}"
    );
}
