//! Each warning code with inputs that must warn and inputs that must not.

use privsvc_attributes::{AttrValue, Attributes, U256};
use privsvc_fingerprint::{check_rarity, check_record, CheckWarning, RecordCheck, WarningCode};

fn warnings_for(name: &str, value: impl Into<AttrValue>) -> Vec<CheckWarning> {
    let mut a = Attributes::new();
    a.insert(name, value).unwrap();
    check_record(&RecordCheck {
        attributes: Some(&a),
        ..Default::default()
    })
}

fn codes(w: &[CheckWarning]) -> Vec<WarningCode> {
    w.iter().map(|w| w.code).collect()
}

#[track_caller]
fn assert_warns(name: &str, value: impl Into<AttrValue>, code: WarningCode) {
    let value = value.into();
    let w = warnings_for(name, value.clone());
    assert!(
        w.iter()
            .any(|w| w.code == code && w.attribute.as_deref() == Some(name)),
        "{name} = {value:?} should warn {code}, got {w:?}"
    );
}

#[track_caller]
fn assert_silent(name: &str, value: impl Into<AttrValue>) {
    let value = value.into();
    let w = warnings_for(name, value.clone());
    assert!(
        w.is_empty(),
        "{name} = {value:?} should not warn, got {w:?}"
    );
}

#[test]
fn timestamp() {
    use WarningCode::Timestamp as T;
    assert_warns("seen", 1_716_212_345u64, T);
    assert_warns("seen", 1_716_212_345_678u64, T);
    assert_warns("seen", 1_716_212_345i32, T);
    assert_warns("seen", U256::from(1_716_212_345u64), T);
    assert_warns("seen", "1716212345", T);
    assert_warns("seen", "1716212345678", T);
    assert_warns("seen", "2024-05-20T13:39:05Z", T);
    assert_warns("seen", "2024-05-20 13:39", T);
    assert_warns("seen", "2024-05-20T13:00:00.123+02:00", T);
    // Whole hours, dates, small numbers and times outside 2000..2100 pass.
    assert_silent("seen", 1_716_210_000u64);
    assert_silent("seen", 1_716_210_000_000u64);
    assert_silent("seen", "2024-05-20");
    assert_silent("seen", "2024-05-20T13:00:00Z");
    assert_silent("seen", "2024-05-20T13:00+02:00");
    assert_silent("age", 42i32);
    assert_silent("count", 123_456_789u64);
    assert_silent("big", 5_000_000_000u64);
    assert_silent("code", "12345678901");
}

#[test]
fn precise_location() {
    use WarningCode::PreciseLocation as L;
    assert_warns("lat", "52.520008", L);
    assert_warns("home_lon", "-13.405", L);
    assert_warns("where", "52.520008,13.404954", L);
    assert_warns("where", "52.52, 13.405", L);
    assert_warns("lat_e6", 52_520_008i32, L);
    assert_warns("gps", -13_404_954i32, L);
    assert_warns("geohash", "u33dc0", L);
    assert_silent("lat", "52.52");
    assert_silent("lat", 52i32);
    assert_silent("lat_e2", 5_252i32);
    assert_silent("where", "52.52,13.40");
    assert_silent("pi", "3.14159");
    assert_silent("version", "1.2.10");
    assert_silent("geohash", "u33dc");
    assert_silent("latency_ms", 25_000u64);
    assert_silent("where", "100.123,200.456");
}

#[test]
fn postal_code() {
    use WarningCode::PostalCode as P;
    assert_warns("zip", "94103", P);
    assert_warns("postal_code", "10115", P);
    assert_warns("zip", 94_103u64, P);
    assert_warns("plz", 10_115i32, P);
    assert_warns("anything", "SW1A 1AA", P);
    assert_warns("anything", "EC1A1BB", P);
    assert_warns("postcode", "ec1a 1bb", P);
    assert_warns("anything", "K1A 0B1", P);
    assert_warns("anything", "1012 AB", P);
    assert_warns("anything", "94103-1234", P);
    assert_silent("zip", "941");
    assert_silent("postcode", "SW1");
    assert_silent("zip", 94i32);
    assert_silent("count", 94_103u64);
    assert_silent("anything", "94103");
    assert_silent("anything", "hello");
    assert_silent("anything", "A1B2");
    assert_silent("anything", "1012 ab");
    assert_silent("anything", "ec1a1bb");
    assert_silent("anything", "SW1A  1AA x");
}

#[test]
fn free_text() {
    use WarningCode::FreeText as F;
    assert_warns("note", "met Anna at the cafe", F);
    assert_warns("note", "one two three four", F);
    assert_warns("contact", "ada@example.org", F);
    assert_silent("note", "in progress");
    assert_silent("city", "new york city");
    assert_silent("status", "done");
    assert_silent("handle", "@ada");
    assert_silent("thing", "a@b");
}

fn expiry(seconds: u64) -> Vec<WarningCode> {
    codes(&check_record(&RecordCheck {
        expires: Some(seconds),
        ..Default::default()
    }))
}

#[test]
fn expiry_rounded_and_too_long() {
    assert_eq!(expiry(3_601), [WarningCode::ExpiryRounded]);
    assert_eq!(expiry(1), [WarningCode::ExpiryRounded]);
    assert_eq!(expiry(0), [WarningCode::ExpiryRounded]);
    for bucket in [3_600, 86_400, 604_800, 2_592_000, 7_776_000] {
        assert!(expiry(bucket).is_empty(), "{bucket}");
    }
    assert_eq!(expiry(7_776_001), [WarningCode::ExpiryTooLong]);
    assert_eq!(expiry(u64::MAX), [WarningCode::ExpiryTooLong]);
    let w = check_record(&RecordCheck {
        expires: Some(90_000),
        ..Default::default()
    });
    assert!(
        w[0].message.contains("rounded up to 604800"),
        "{}",
        w[0].message
    );
    assert_eq!(w[0].attribute, None);
}

#[test]
fn payload_too_large() {
    let check = |n: usize| {
        let payload = vec![0u8; n];
        codes(&check_record(&RecordCheck {
            payload: Some(&payload),
            ..Default::default()
        }))
    };
    assert!(check(0).is_empty());
    assert!(check(2048).is_empty());
    assert_eq!(check(2049), [WarningCode::PayloadTooLarge]);
    assert_eq!(check(20_000), [WarningCode::PayloadTooLarge]);
    let big = vec![0u8; 20_000];
    let w = check_record(&RecordCheck {
        payload: Some(&big),
        ..Default::default()
    });
    assert!(w[0].message.contains("does not fit"), "{}", w[0].message);
}

#[test]
fn library_attributes_are_not_inspected_and_order_is_stable() {
    let mut a = Attributes::new();
    a.insert("project", "my app with four words").unwrap();
    a.insert("tag", "A".repeat(60)).unwrap();
    a.insert("b_note", "a b c d").unwrap();
    a.insert("a_time", 1_716_212_345u64).unwrap();
    let w = check_record(&RecordCheck {
        attributes: Some(&a),
        expires: Some(5),
        payload: Some(&[0; 3000]),
    });
    let got: Vec<(WarningCode, Option<&str>)> =
        w.iter().map(|w| (w.code, w.attribute.as_deref())).collect();
    assert_eq!(
        got,
        [
            (WarningCode::Timestamp, Some("a_time")),
            (WarningCode::FreeText, Some("b_note")),
            (WarningCode::ExpiryRounded, None),
            (WarningCode::PayloadTooLarge, None),
        ]
    );
    assert!(check_record(&RecordCheck::default()).is_empty());
}

#[test]
fn codes_serialise_as_docs_api_lists_them() {
    let all = [
        (WarningCode::Timestamp, "timestamp"),
        (WarningCode::PreciseLocation, "precise-location"),
        (WarningCode::PostalCode, "postal-code"),
        (WarningCode::FreeText, "free-text"),
        (WarningCode::ExpiryRounded, "expiry-rounded"),
        (WarningCode::ExpiryTooLong, "expiry-too-long"),
        (WarningCode::PayloadTooLarge, "payload-too-large"),
        (WarningCode::RareCombination, "rare-combination"),
    ];
    for (code, text) in all {
        assert_eq!(serde_json::to_value(code).unwrap(), serde_json::json!(text));
        assert_eq!(code.as_str(), text);
        assert_eq!(
            serde_json::from_value::<WarningCode>(serde_json::json!(text)).unwrap(),
            code
        );
    }
}

fn rec(pairs: &[(&str, &str)]) -> Attributes {
    let mut a = Attributes::new();
    a.insert("project", "app").unwrap();
    for (k, v) in pairs {
        a.insert(*k, *v).unwrap();
    }
    a
}

#[test]
fn rare_combination() {
    let existing = vec![
        rec(&[("colour", "red"), ("size", "s"), ("tag", "t1")]),
        rec(&[("colour", "red"), ("size", "s"), ("tag", "t2")]),
        rec(&[("colour", "red"), ("size", "m"), ("tag", "t3")]),
        rec(&[("colour", "blue"), ("size", "m"), ("tag", "t4")]),
        rec(&[("colour", "blue"), ("size", "m"), ("tag", "t5")]),
    ];
    // Shared by 2 records with k = 2: no warning, though the tag is unique.
    let common = rec(&[("colour", "red"), ("size", "s"), ("tag", "new")]);
    assert!(check_rarity(&common, &existing, 2).is_empty());
    // Each value is common (red: 3, m: 3) but the combination is held by 1 record.
    let combo = rec(&[("colour", "red"), ("size", "m")]);
    let w = check_rarity(&combo, &existing, 2);
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].code, w[0].attribute.as_deref()),
        (WarningCode::RareCombination, None)
    );
    assert!(w[0].message.contains("only 1 of 5"), "{}", w[0].message);
    // A value nobody has: the attribute and the combination.
    let unique = rec(&[("colour", "green")]);
    let w = check_rarity(&unique, &existing, 2);
    let attrs: Vec<Option<&str>> = w.iter().map(|w| w.attribute.as_deref()).collect();
    assert_eq!(attrs, [Some("colour"), None]);
    // k = 0 disables; an empty app warns for any k > 0.
    assert!(check_rarity(&unique, &existing, 0).is_empty());
    assert_eq!(check_rarity(&rec(&[]), &[], 3).len(), 1);
    assert!(check_rarity(&rec(&[]), &existing, 5).is_empty());
    assert_eq!(check_rarity(&rec(&[]), &existing, 6).len(), 1);
}
