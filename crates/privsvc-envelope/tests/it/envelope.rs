//! Sealing, strict parsing and signer recovery of envelopes.

use alloy_primitives::Address;
use k256::ecdsa::SigningKey;
use privsvc_attributes::{AttrType, Attributes, U256};
use privsvc_envelope::*;
use proptest::prelude::*;

fn key(b: u8) -> SigningKey {
    SigningKey::from_slice(&[b; 32]).unwrap()
}

fn attrs() -> Attributes {
    let mut a = Attributes::new();
    a.insert("project", "demo").unwrap();
    a.insert("tag", "A".repeat(60)).unwrap();
    a.insert("level", -3i32).unwrap();
    a.insert("score", 77u64).unwrap();
    a
}

/// The hour every test body is sealed in (2026-03-28).
const HOUR: u64 = 494_000;

fn body(a: &Attributes, data: &[u8]) -> EnvelopeBody {
    EnvelopeBody {
        app: "demo".into(),
        exp: 86_400,
        hour: HOUR,
        ct: "application/json".into(),
        enc: false,
        types: a.types(),
        data: data.to_vec(),
    }
}

fn sealed() -> (String, Attributes, SigningKey) {
    let a = attrs();
    let k = key(3);
    (
        seal_envelope(&body(&a, b"{\"x\":1}"), &a, &k).unwrap(),
        a,
        k,
    )
}

/// Replaces the first occurrence of `from`, without padding.
fn edit_str(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from} not in {text}");
    text.trim_end_matches(' ').replacen(from, to, 1)
}

/// Replaces the first occurrence of `from` and re-pads, so only the change under test differs.
fn edit(text: &str, from: &str, to: &str) -> Vec<u8> {
    assert!(text.contains(from), "{from} not in {text}");
    let t = text.trim_end_matches(' ').replacen(from, to, 1);
    pad_envelope(&t).unwrap().into_bytes()
}

#[test]
fn seal_parse_and_recover() {
    let (text, a, k) = sealed();
    assert_eq!(text.len(), 512);
    let parsed = parse_envelope(text.as_bytes()).unwrap();
    assert_eq!(parsed.body, body(&a, b"{\"x\":1}"));
    assert_eq!(
        envelope_signer(&parsed, &a).unwrap(),
        Address::from_private_key(&k)
    );
    assert!(matches!(parsed.signature[64], 27 | 28));
    // Signing is deterministic (RFC 6979).
    assert_eq!(seal_envelope(&parsed.body, &a, &k).unwrap(), text);
}

#[test]
fn signer_depends_on_every_attribute_value() {
    let (text, mut a, k) = sealed();
    let parsed = parse_envelope(text.as_bytes()).unwrap();
    a.insert("score", 78u64).unwrap();
    let other = envelope_signer(&parsed, &a).unwrap();
    assert_ne!(other, Address::from_private_key(&k));
}

#[test]
fn signer_refuses_attributes_whose_types_differ() {
    let (text, a, _) = sealed();
    let parsed = parse_envelope(text.as_bytes()).unwrap();
    let mut wrong_type = a.clone();
    wrong_type.insert("score", 77i32).unwrap();
    let e = envelope_signer(&parsed, &wrong_type)
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"score\" is i32, the envelope says u64"), "{e}");
    let mut extra = a.clone();
    extra.insert("more", 1i32).unwrap();
    assert!(envelope_signer(&parsed, &extra)
        .unwrap_err()
        .to_string()
        .contains("\"more\" is not listed"));
    let mut missing = a.clone();
    missing.remove("level");
    assert!(envelope_signer(&parsed, &missing)
        .unwrap_err()
        .to_string()
        .contains("\"level\" (i32) is listed"));
    // Sealing refuses the mismatch too.
    let b = body(&a, b"");
    assert!(matches!(
        seal_envelope(&b, &missing, &key(1)),
        Err(EnvelopeError::TypesMismatch(_))
    ));
}

#[test]
fn signatures_are_low_s_and_high_s_is_refused() {
    let (text, a, _) = sealed();
    let parsed = parse_envelope(text.as_bytes()).unwrap();
    // s' = n - s with the flipped recovery id is the same signature in high-s form.
    let n = U256::from_str_radix(
        "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141",
        16,
    )
    .unwrap();
    let s = U256::from_be_slice(&parsed.signature[32..64]);
    assert!(s <= n >> 1);
    let mut high = parsed.signature;
    high[32..64].copy_from_slice(&(n - s).to_be_bytes::<32>());
    high[64] = if high[64] == 27 { 28 } else { 27 };
    let forged = SealedEnvelope {
        body: parsed.body.clone(),
        signature: high,
    };
    assert_eq!(envelope_signer(&forged, &a), Err(EnvelopeError::HighS));
    assert_eq!(
        seal_with_signature(&parsed.body, &high),
        Err(EnvelopeError::HighS)
    );
    let hex_sig = format!("0x{}", hex::encode(parsed.signature));
    let bad = edit(&text, &hex_sig, &format!("0x{}", hex::encode(high)));
    assert_eq!(parse_envelope(&bad), Err(EnvelopeError::HighS));
}

#[test]
fn padding_rules() {
    assert_eq!(pad_envelope("{}").unwrap().len(), 512);
    assert_eq!(pad_envelope(&"x".repeat(512)).unwrap().len(), 512);
    assert_eq!(pad_envelope(&"x".repeat(513)).unwrap().len(), 1024);
    assert_eq!(pad_envelope(&"x".repeat(1025)).unwrap().len(), 4096);
    assert_eq!(pad_envelope(&"x".repeat(16384)).unwrap().len(), 16384);
    assert_eq!(
        pad_envelope(&"x".repeat(16385)),
        Err(EnvelopeError::Oversize { len: 16385 })
    );
    assert!(pad_envelope("{}").unwrap().starts_with("{}   "));
    assert!(pad_envelope("{}").unwrap().ends_with("   "));
    // A payload too large for 16384 bytes cannot be sealed.
    let a = attrs();
    let big = body(&a, &vec![0u8; 12_300]);
    assert!(matches!(
        seal_envelope(&big, &a, &key(2)),
        Err(EnvelopeError::Oversize { .. })
    ));
    let fits = body(&a, &vec![0u8; 11_900]);
    assert_eq!(seal_envelope(&fits, &a, &key(2)).unwrap().len(), 16384);
}

#[test]
fn strict_parsing_rejects_with_precise_errors() {
    let (text, _, _) = sealed();
    let content = text.trim_end_matches(' ');
    let sig_hex = &content[content.find("\"sig\":\"").unwrap() + 7..][..132];
    let err = |bytes: &[u8]| parse_envelope(bytes).unwrap_err();

    assert_eq!(
        err(&vec![b' '; 16385]),
        EnvelopeError::Oversize { len: 16385 }
    );
    assert_eq!(
        err(content.as_bytes()),
        EnvelopeError::NotPadded { len: content.len() }
    );
    let mut far = content.to_owned();
    far.push_str(&" ".repeat(1024 - content.len()));
    assert!(matches!(
        err(far.as_bytes()),
        EnvelopeError::PaddedTooFar {
            len: 1024,
            expected: 512,
            ..
        }
    ));
    // Trailing byte other than a space inside the padding.
    let mut nl = text.clone().into_bytes();
    nl[content.len()] = b'\n';
    let at = content.len();
    assert_eq!(
        err(&nl),
        EnvelopeError::BadPadding {
            offset: at,
            byte: b'\n'
        }
    );
    let mut tab = text.clone().into_bytes();
    tab[content.len() + 5] = b'\t';
    assert_eq!(
        err(&tab),
        EnvelopeError::BadPadding {
            offset: at + 5,
            byte: b'\t'
        }
    );
    let mut junk = text.clone().into_bytes();
    junk[content.len() + 3] = b'x';
    assert!(matches!(
        err(&junk),
        EnvelopeError::Json(privsvc_attributes::json::StrictJsonError::TrailingBytes { .. })
    ));
    let mut nul = text.clone().into_bytes();
    nul[511] = 0;
    assert!(err(&nul)
        .to_string()
        .contains("unexpected byte 0x00 at offset 511"));
    // Duplicate keys, at the top level and inside types.
    let e = err(&edit(
        &text,
        "{\"app\":\"demo\"",
        "{\"app\":\"demo\",\"app\":\"demo\"",
    ));
    assert!(e.to_string().contains("duplicate key \"app\""), "{e}");
    let e = err(&edit(
        &text,
        "\"level\":\"i32\"",
        "\"level\":\"i32\",\"level\":\"i32\"",
    ));
    assert!(e.to_string().contains("duplicate key \"level\""), "{e}");
    // Version: only 2; a version 1 envelope (with or without hour) is refused by name.
    let v1 = err(&edit(&text, "\"v\":2", "\"v\":1"));
    assert_eq!(v1, EnvelopeError::UnsupportedVersion(1.into()));
    assert!(
        v1.to_string()
            .starts_with("unsupported envelope version 1:"),
        "{v1}"
    );
    assert!(
        v1.to_string().contains("only version 2 is accepted"),
        "{v1}"
    );
    let v1_body = edit(
        &edit_str(&text, &format!(",\"hour\":{HOUR}"), ""),
        "\"v\":2",
        "\"v\":1",
    );
    assert_eq!(err(&v1_body), EnvelopeError::UnsupportedVersion(1.into()));
    assert_eq!(
        err(&edit(&text, "\"v\":2", "\"v\":3")),
        EnvelopeError::UnsupportedVersion(3.into())
    );
    // The version is kept as the JSON value given: the string "2" is not the number 2.
    let text_two = err(&edit(&text, "\"v\":2", "\"v\":\"2\""));
    assert_eq!(text_two, EnvelopeError::UnsupportedVersion("2".into()));
    assert!(
        text_two
            .to_string()
            .starts_with("unsupported envelope version \"2\":"),
        "{text_two}"
    );
    assert_eq!(
        err(&edit(&text, ",\"v\":2", "")),
        EnvelopeError::MissingMember("v")
    );
    // Unknown and missing members.
    assert_eq!(
        err(&edit(&text, "\"v\":2", "\"v\":2,\"x\":0")),
        EnvelopeError::UnknownMember("x".into())
    );
    assert_eq!(
        err(&edit(&text, &format!(",\"hour\":{HOUR}"), "")),
        EnvelopeError::MissingMember("hour")
    );
    // hour: a non-negative integer in canonical form.
    for bad in [
        format!("\"hour\":\"{HOUR}\""),
        format!("\"hour\":-{HOUR}"),
        format!("\"hour\":{HOUR}.5"),
        "\"hour\":null".to_string(),
    ] {
        assert!(
            matches!(
                err(&edit(&text, &format!("\"hour\":{HOUR}"), &bad)),
                EnvelopeError::InvalidMember { member: "hour", .. }
            ),
            "{bad}"
        );
    }
    assert_eq!(
        err(&edit(&text, &format!("\"hour\":{HOUR}"), "\"hour\":4.94e5")),
        EnvelopeError::InvalidMember {
            member: "hour",
            reason: MemberReason::NotHour
        }
    );
    // A leading zero is not JSON at all.
    assert!(matches!(
        err(&edit(
            &text,
            &format!("\"hour\":{HOUR}"),
            &format!("\"hour\":0{HOUR}")
        )),
        EnvelopeError::Json(privsvc_attributes::json::StrictJsonError::Syntax(_))
    ));
    assert_eq!(
        err(&edit(&text, "\"enc\":false,", "")),
        EnvelopeError::MissingMember("enc")
    );
    // Member types and values.
    assert!(matches!(
        err(&edit(&text, "\"enc\":false", "\"enc\":0")),
        EnvelopeError::InvalidMember { member: "enc", .. }
    ));
    assert!(matches!(
        err(&edit(&text, "\"exp\":86400", "\"exp\":\"86400\"")),
        EnvelopeError::InvalidMember { member: "exp", .. }
    ));
    assert_eq!(
        err(&edit(&text, "\"exp\":86400", "\"exp\":86401")),
        EnvelopeError::NotABucket(86401)
    );
    assert!(matches!(
        err(&edit(&text, "\"app\":\"demo\"", "\"app\":\"\"")),
        EnvelopeError::InvalidMember { member: "app", .. }
    ));
    assert!(matches!(
        err(&edit(
            &text,
            "\"data\":\"eyJ4IjoxfQ==\"",
            "\"data\":\"eyJ4IjoxfQ\""
        )),
        EnvelopeError::InvalidMember { member: "data", .. }
    ));
    assert!(matches!(
        err(&edit(
            &text,
            "\"data\":\"eyJ4IjoxfQ==\"",
            "\"data\":\"eyJ4IjoxfR==\""
        )),
        EnvelopeError::InvalidMember { member: "data", .. }
    ));
    let e = err(&edit(&text, "\"level\":\"i32\"", "\"level\":\"bool\"")).to_string();
    assert!(
        e.contains("attribute \"level\": unknown type \"bool\""),
        "{e}"
    );
    let e = err(&edit(&text, "\"level\":\"i32\"", "\"Level\":\"i32\"")).to_string();
    assert!(
        e.contains("attribute \"Level\": names must be lowercase"),
        "{e}"
    );
    // Signature format.
    let upper = sig_hex.to_uppercase().replacen("0X", "0x", 1);
    assert!(matches!(
        err(&edit(&text, sig_hex, &upper)),
        EnvelopeError::BadSignatureFormat(SignatureFormatReason::NotLowercaseHex(_))
    ));
    assert_eq!(
        err(&edit(&text, sig_hex, &sig_hex[2..])),
        EnvelopeError::BadSignatureFormat(SignatureFormatReason::MissingPrefix)
    );
    assert_eq!(
        err(&edit(&text, sig_hex, &sig_hex[..130])),
        EnvelopeError::BadSignatureFormat(SignatureFormatReason::Length(128))
    );
    let v29 = format!("{}1d", &sig_hex[..130]);
    assert_eq!(
        err(&edit(&text, sig_hex, &v29)),
        EnvelopeError::BadRecoveryByte(29)
    );
    let zero_r = format!("0x{}{}", "0".repeat(64), &sig_hex[66..]);
    assert_eq!(
        err(&edit(&text, sig_hex, &zero_r)),
        EnvelopeError::InvalidSignature(privsvc_envelope::InvalidSignatureReason::ScalarOutOfRange)
    );
    // Valid JSON, valid members, but not canonical.
    assert_eq!(
        err(&edit(&text, "\"app\":\"demo\"", "\"app\":\"d\\u0065mo\"")),
        EnvelopeError::NonCanonical
    );
    assert_eq!(
        err(&edit(&text, "\"app\":\"demo\",", "\"app\": \"demo\",")),
        EnvelopeError::NonCanonical
    );
    let swapped = edit(
        &text,
        "\"app\":\"demo\",\"ct\":\"application/json\"",
        "\"ct\":\"application/json\",\"app\":\"demo\"",
    );
    assert_eq!(err(&swapped), EnvelopeError::NonCanonical);
    assert_eq!(
        err(&edit(&text, "\"exp\":86400", "\"exp\":8.64e4")),
        EnvelopeError::InvalidMember {
            member: "exp",
            reason: MemberReason::NotSeconds
        }
    );
    // Not JSON, not an object.
    assert!(matches!(
        err(&pad_envelope("not json").unwrap().into_bytes()),
        EnvelopeError::Json(_)
    ));
    assert_eq!(
        err(&pad_envelope("[]").unwrap().into_bytes()),
        EnvelopeError::NotAnObject
    );
    assert!(matches!(err(&[b' '; 512]), EnvelopeError::Json(_)));
}

#[test]
fn expiry_buckets_and_seconds() {
    assert_eq!(expiry_bucket(0), Err(EnvelopeError::ZeroExpiry));
    for (s, b) in [
        (1, 3600),
        (3600, 3600),
        (3601, 86400),
        (86400, 86400),
        (604_800, 604_800),
        (604_801, 2_592_000),
        (7_776_000, 7_776_000),
    ] {
        assert_eq!(expiry_bucket(s).unwrap(), b, "{s}");
    }
    assert_eq!(
        expiry_bucket(7_776_001),
        Err(EnvelopeError::ExpiryTooLong(7_776_001))
    );
    assert_eq!(
        expiry_bucket(u64::MAX),
        Err(EnvelopeError::ExpiryTooLong(u64::MAX))
    );
    assert_eq!(expiry_seconds(Expires::Seconds(5)), 5);
    assert_eq!(expiry_seconds(Expires::Minutes(2)), 120);
    assert_eq!(expiry_seconds(Expires::Hours(3)), 10_800);
    assert_eq!(expiry_seconds(Expires::Weeks(1)), 604_800);
    assert_eq!(expiry_seconds(Expires::Months(3)), 7_776_000);
    assert_eq!(expiry_seconds(Expires::Days(u64::MAX)), u64::MAX);
}

#[test]
fn base64_is_strict() {
    assert_eq!(to_base64(b"hi"), "aGk=");
    assert_eq!(from_base64("aGk=").unwrap(), b"hi");
    for bad in ["aGk", "aGl=", "aG k=", "aGk=\n", "a-_="] {
        assert!(from_base64(bad).is_err(), "{bad}");
    }
}

#[test]
fn seal_validates_the_body() {
    let a = attrs();
    let mut b = body(&a, b"");
    b.exp = 3601;
    assert_eq!(
        seal_envelope(&b, &a, &key(1)),
        Err(EnvelopeError::NotABucket(3601))
    );
    let mut b = body(&a, b"");
    b.ct = String::new();
    assert!(matches!(
        seal_envelope(&b, &a, &key(1)),
        Err(EnvelopeError::InvalidMember { member: "ct", .. })
    ));
    let mut b = body(&a, b"");
    b.types.insert("Bad".into(), AttrType::Str);
    assert!(seal_with_signature(&b, &[27; 65])
        .unwrap_err()
        .to_string()
        .contains("attribute \"Bad\""));
}

#[test]
fn hour_is_signed_and_bounded() {
    let (text, a, k) = sealed();
    let parsed = parse_envelope(text.as_bytes()).unwrap();
    assert_eq!(parsed.body.hour, HOUR);
    // An onlooker who rewrites hour (to move the copy into a later window) breaks the
    // signature: the envelope still parses but no longer recovers to the owner.
    let moved = edit(
        &text,
        &format!("\"hour\":{HOUR}"),
        &format!("\"hour\":{}", HOUR + 5),
    );
    let moved = parse_envelope(&moved).unwrap();
    assert_eq!(moved.body.hour, HOUR + 5);
    assert_ne!(
        envelope_signer(&moved, &a).unwrap(),
        Address::from_private_key(&k)
    );
    // The digest covers hour and the v2 domain.
    let mut later = body(&a, b"{\"x\":1}");
    later.hour += 1;
    assert_ne!(
        envelope_digest(&later, &a),
        envelope_digest(&parsed.body, &a)
    );
    assert!(envelope_digest_preimage(&parsed.body, &a).starts_with(b"privsvc envelope v2\0"));
    assert!(parsed
        .body
        .canonical_json()
        .contains(&format!("\"hour\":{HOUR}")));
    // hour beyond the exact JSON integers cannot be sealed (it would not parse back).
    let mut huge = body(&a, b"");
    huge.hour = MAX_HOUR + 1;
    assert!(matches!(
        seal_envelope(&huge, &a, &k),
        Err(EnvelopeError::InvalidMember { member: "hour", .. })
    ));
    huge.hour = MAX_HOUR;
    let text = seal_envelope(&huge, &a, &k).unwrap();
    assert_eq!(parse_envelope(text.as_bytes()).unwrap().body.hour, MAX_HOUR);
}

#[test]
fn project_must_be_a_string() {
    let mut a = Attributes::new();
    a.insert("project", 7i32).unwrap();
    let b = body(&a, b"");
    assert_eq!(
        seal_envelope(&b, &a, &key(1)),
        Err(EnvelopeError::ProjectNotStr(AttrType::I32))
    );
    // A parser refuses it too, even with a valid signature over those types.
    let sig = sign_digest(&envelope_digest(&b, &a), &key(1)).unwrap();
    let text = pad_envelope(&b.canonical_sealed_json(&sig)).unwrap();
    let e = parse_envelope(text.as_bytes()).unwrap_err();
    assert_eq!(e, EnvelopeError::ProjectNotStr(AttrType::I32));
    assert!(
        e.to_string().contains("\"project\" must have type str"),
        "{e}"
    );
    let mut a = Attributes::new();
    a.insert("project", 7u64).unwrap();
    assert_eq!(
        seal_envelope(&body(&a, b""), &a, &key(1)),
        Err(EnvelopeError::ProjectNotStr(AttrType::U64))
    );
}

#[test]
fn zero_lifetime_is_refused() {
    let a = attrs();
    let mut b = body(&a, b"");
    b.exp = 0;
    assert_eq!(
        seal_envelope(&b, &a, &key(1)),
        Err(EnvelopeError::NotABucket(0))
    );
    let (text, _, _) = sealed();
    assert_eq!(
        parse_envelope(&edit(&text, "\"exp\":86400", "\"exp\":0")).unwrap_err(),
        EnvelopeError::NotABucket(0)
    );
}

#[test]
fn submission_window_is_two_hours_back_one_ahead() {
    assert_eq!(hour_of(0), 0);
    assert_eq!(hour_of(3_599), 0);
    assert_eq!(hour_of(3_600), 1);
    assert_eq!(hour_of(HOUR * 3_600 + 1_800), HOUR);
    for offset in [0, 1, 1_800, 3_599] {
        let now = HOUR * 3_600 + offset;
        for ok in [HOUR - 2, HOUR - 1, HOUR, HOUR + 1] {
            assert_eq!(check_hour_window(ok, now), Ok(()), "{ok} at {now}");
        }
        for bad in [0, HOUR - 3, HOUR + 2, HOUR + 100, u64::MAX] {
            assert_eq!(
                check_hour_window(bad, now),
                Err(EnvelopeError::HourOutsideWindow {
                    hour: bad,
                    now_hour: HOUR,
                    earliest: HOUR - 2,
                    latest: HOUR + 1,
                }),
                "{bad} at {now}"
            );
        }
    }
    // Near the epoch the window saturates instead of wrapping.
    assert_eq!(check_hour_window(0, 0), Ok(()));
    assert_eq!(check_hour_window(1, 0), Ok(()));
    assert!(check_hour_window(2, 0).is_err());
    assert!(check_hour_window(hour_of(u64::MAX), u64::MAX).is_ok());
    let e = check_hour_window(HOUR - 3, HOUR * 3_600)
        .unwrap_err()
        .to_string();
    assert!(e.contains("outside the accepted window"), "{e}");
}

#[test]
fn republished_copies_are_refused_from_hour_plus_four() {
    let deadline = (HOUR + 4) * 3_600;
    assert_eq!(republish_deadline(HOUR), deadline);
    assert_eq!(check_created_in_time(HOUR, HOUR * 3_600), Ok(()));
    assert_eq!(check_created_in_time(HOUR, deadline - 1), Ok(()));
    // A record created before its hour (clock skew, at most one hour) is not refused.
    assert_eq!(check_created_in_time(HOUR, (HOUR - 1) * 3_600), Ok(()));
    for created in [deadline, deadline + 1, deadline + 90 * 86_400, u64::MAX] {
        assert_eq!(
            check_created_in_time(HOUR, created),
            Err(EnvelopeError::CreatedTooLate {
                hour: HOUR,
                created,
                deadline
            })
        );
    }
    // The largest hour saturates (never wraps to a small deadline).
    assert_eq!(republish_deadline(u64::MAX), u64::MAX);
    assert!(check_created_in_time(MAX_HOUR, 0).is_ok());
    // Every envelope a relayer accepts (hour >= now_hour - 2) leaves the relayer at least
    // one hour to write it before verifiers refuse it.
    let now = HOUR * 3_600 + 3_599;
    assert!(check_hour_window(HOUR - 2, now).is_ok());
    assert!(check_created_in_time(HOUR - 2, now + 1).is_ok());
    assert!(republish_deadline(HOUR - 2) - now >= 3_600);
}

fn arb_attrs() -> impl Strategy<Value = Attributes> {
    let value = prop_oneof![
        "[^\\p{Cc}]{0,30}".prop_map(privsvc_attributes::AttrValue::Str),
        any::<i32>().prop_map(privsvc_attributes::AttrValue::I32),
        any::<u64>().prop_map(privsvc_attributes::AttrValue::U64),
        any::<[u8; 32]>().prop_map(|b| privsvc_attributes::AttrValue::U256(U256::from_be_bytes(b))),
    ];
    proptest::collection::btree_map("[a-z][a-z0-9_]{0,31}", value, 0..=30).prop_map(|m| {
        let mut a = Attributes::new();
        // `project` must be a str (seal refuses another type; tested separately).
        for (k, v) in m.into_iter().filter(|(k, _)| k != "project") {
            a.insert(k, v).unwrap();
        }
        a
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn seal_then_parse_round_trips(
        a in arb_attrs(),
        app in "[^\\p{Cc}]{1,20}",
        ct in "[a-z]{1,10}/[a-z+.-]{1,10}",
        enc in any::<bool>(),
        exp in proptest::sample::select(EXPIRY_BUCKETS.to_vec()),
        hour in 0..=MAX_HOUR,
        data in proptest::collection::vec(any::<u8>(), 0..3000),
        k in 1u8..=254, // [0xff; 32] is not below the curve order
    ) {
        let body = EnvelopeBody { app, exp, hour, ct, enc, types: a.types(), data };
        let text = seal_envelope(&body, &a, &key(k)).unwrap();
        prop_assert!(PADDED_SIZES.contains(&text.len()));
        prop_assert_eq!(padded_size(text.trim_end_matches(' ').len()).unwrap(), text.len());
        let parsed = parse_envelope(text.as_bytes()).unwrap();
        prop_assert_eq!(&parsed.body, &body);
        prop_assert_eq!(envelope_signer(&parsed, &a).unwrap(), Address::from_private_key(&key(k)));
        prop_assert!(fuzz_entry::parse_envelope_target(text.as_bytes()));
    }

    #[test]
    fn mutated_envelopes_never_panic(pos in 0usize..512, byte in any::<u8>()) {
        let (text, _, _) = sealed();
        let mut bytes = text.into_bytes();
        bytes[pos] = byte;
        let _ = fuzz_entry::parse_envelope_target(&bytes);
    }
}
