//! Wire parsing, canonical form and Arkiv mapping of attributes.

use privsvc_attributes::{
    AttrType, AttrValue, AttributeError, Attributes, MAX_ATTRIBUTES, MAX_STR_BYTES, U256,
};
use proptest::prelude::*;
use serde_json::{json, Value};

fn wire_err(v: Value) -> String {
    Attributes::from_wire(&v).unwrap_err().to_string()
}

#[test]
fn parses_every_type_at_its_limits() {
    let wire = json!({
        "project": {"type": "str", "value": "app"},
        "lo": {"type": "i32", "value": -2147483648i64},
        "hi": {"type": "i32", "value": 2147483647},
        "n": {"type": "u64", "value": "18446744073709551615"},
        "z": {"type": "u64", "value": "0"},
        "w": {"type": "u256", "value": U256::MAX.to_string()},
        "s": {"type": "str", "value": "é".repeat(64)},
    });
    let a = Attributes::from_wire(&wire).unwrap();
    assert_eq!(a.get("lo"), Some(&AttrValue::I32(i32::MIN)));
    assert_eq!(a.get("hi"), Some(&AttrValue::I32(i32::MAX)));
    assert_eq!(a.get("n"), Some(&AttrValue::U64(u64::MAX)));
    assert_eq!(a.get("z"), Some(&AttrValue::U64(0)));
    assert_eq!(a.get("w"), Some(&AttrValue::U256(U256::MAX)));
    assert_eq!(a.types()["w"], AttrType::U256);
    assert_eq!(a.to_wire(), wire);
    assert_eq!(a.len(), 7);
}

#[test]
fn rejections_name_the_attribute_and_reason() {
    let cases = [
        (
            json!({"Foo": {"type": "str", "value": "x"}}),
            r#"attribute "Foo": names must be lowercase"#,
        ),
        (
            json!({"a": {"type": "bool", "value": true}}),
            r#"attribute "a": unknown type "bool""#,
        ),
        (
            json!({"a": {"type": "str"}}),
            r#"attribute "a": missing "value""#,
        ),
        (
            json!({"a": {"value": "x"}}),
            r#"attribute "a": missing "type""#,
        ),
        (
            json!({"a": {"type": "str", "value": "x", "x": 1}}),
            r#"attribute "a": unknown member "x""#,
        ),
        (json!({"a": "x"}), r#"attribute "a": expected an object"#),
        (
            json!({"a": {"type": 1, "value": "x"}}),
            r#"attribute "a": "type" must be a string"#,
        ),
        (
            json!({"a": {"type": "str", "value": 1}}),
            r#"attribute "a": str values must be JSON strings"#,
        ),
        (
            json!({"a": {"type": "str", "value": "x".repeat(MAX_STR_BYTES + 1)}}),
            "at most 128 bytes of UTF-8, this one has 129",
        ),
        (
            json!({"a": {"type": "str", "value": "a\nb"}}),
            "control characters, found U+000A at byte 1",
        ),
        (
            json!({"a": {"type": "str", "value": "a\u{85}"}}),
            "control characters, found U+0085",
        ),
        (
            json!({"a": {"type": "i32", "value": 2147483648u64}}),
            "i32 value 2147483648 is out of range",
        ),
        (
            json!({"a": {"type": "i32", "value": -2147483649i64}}),
            "i32 value -2147483649 is out of range",
        ),
        (
            json!({"a": {"type": "i32", "value": u64::MAX}}),
            "out of range",
        ),
        (
            json!({"a": {"type": "i32", "value": 1.5}}),
            "must be integers without fraction, exponent or minus zero, got 1.5",
        ),
        (
            json!({"a": {"type": "i32", "value": "1"}}),
            "i32 values must be JSON numbers, got a string",
        ),
        (
            json!({"a": {"type": "u64", "value": 1}}),
            "u64 values must be decimal strings",
        ),
        (
            json!({"a": {"type": "u64", "value": "18446744073709551616"}}),
            "u64 value 18446744073709551616 is out of range",
        ),
        (
            json!({"a": {"type": "u64", "value": "01"}}),
            r#"u64 value "01" has leading zeros"#,
        ),
        (
            json!({"a": {"type": "u64", "value": "00"}}),
            "leading zeros",
        ),
        (
            json!({"a": {"type": "u64", "value": "-1"}}),
            "only the digits 0-9",
        ),
        (
            json!({"a": {"type": "u64", "value": "+1"}}),
            "only the digits 0-9",
        ),
        (
            json!({"a": {"type": "u64", "value": " 1"}}),
            "only the digits 0-9",
        ),
        (
            json!({"a": {"type": "u64", "value": "0x10"}}),
            "only the digits 0-9",
        ),
        (json!({"a": {"type": "u64", "value": ""}}), "empty string"),
        (
            json!({"a": {"type": "u256", "value": (U256::MAX.to_string() + "0")}}),
            "u256 value",
        ),
        (
            json!({"a": {"type": "u256", "value": "115792089237316195423570985008687907853269984665640564039457584007913129639936"}}),
            "out of range",
        ),
        (
            json!({"a": {"type": "u256", "value": "1".repeat(200)}}),
            "out of range",
        ),
        (json!([]), "must be a JSON object"),
        (json!({"a": {"type": "i32", "value": -0.0}}), "minus zero"),
    ];
    for (wire, want) in cases {
        let got = wire_err(wire.clone());
        assert!(got.contains(want), "{wire}: got {got:?}, want {want:?}");
    }
}

#[test]
fn count_limit_is_thirty() {
    let mut obj = serde_json::Map::new();
    for i in 0..MAX_ATTRIBUTES {
        obj.insert(format!("a{i}"), json!({"type": "i32", "value": i}));
    }
    let full = Attributes::from_wire(&Value::Object(obj.clone())).unwrap();
    assert_eq!(full.len(), 30);
    obj.insert("one_more".into(), json!({"type": "i32", "value": 0}));
    let err = Attributes::from_wire(&Value::Object(obj)).unwrap_err();
    assert_eq!(err, AttributeError::TooMany { count: 31 });
    assert!(err.to_string().contains("at most 30"));

    let mut a = full.clone();
    assert!(matches!(
        a.insert("extra", 1i32),
        Err(AttributeError::TooMany { count: 31 })
    ));
    // Replacing an existing attribute does not count as a new one.
    assert_eq!(a.insert("a0", 5i32).unwrap(), Some(AttrValue::I32(0)));
}

#[test]
fn insert_checks_values() {
    let mut a = Attributes::new();
    let e = a.insert("note", "x".repeat(129)).unwrap_err().to_string();
    assert!(
        e.starts_with(r#"attribute "note": str values are at most 128 bytes"#),
        "{e}"
    );
    assert!(a.insert("n", "tab\there").is_err());
    assert!(a.is_empty());
}

#[test]
fn json_text_parsing_refuses_duplicates_and_trailing_bytes() {
    let dup = br#"{"a":{"type":"str","value":"x"},"a":{"type":"str","value":"y"}}"#;
    let e = Attributes::from_wire_json(dup).unwrap_err().to_string();
    assert!(e.contains("duplicate key \"a\""), "{e}");
    let inner = br#"{"a":{"type":"str","type":"str","value":"y"}}"#;
    assert!(Attributes::from_wire_json(inner)
        .unwrap_err()
        .to_string()
        .contains("duplicate key \"type\""));
    let trailing = br#"{"a":{"type":"str","value":"x"}} x"#;
    assert!(Attributes::from_wire_json(trailing)
        .unwrap_err()
        .to_string()
        .contains("offset 33"));
}

#[test]
fn canonical_form_is_jcs_with_strings_for_big_numbers() {
    let mut a = Attributes::new();
    a.insert("zeta", "\"quoted\" é").unwrap();
    a.insert("alpha", -7i32).unwrap();
    a.insert("mid", U256::from(10u8).pow(U256::from(30u8)))
        .unwrap();
    assert_eq!(
        a.canonical_json(),
        r#"{"alpha":{"type":"i32","value":-7},"mid":{"type":"u256","value":"1000000000000000000000000000000"},"zeta":{"type":"str","value":"\"quoted\" é"}}"#
    );
    // Insertion order does not matter.
    let mut b = Attributes::new();
    b.insert("mid", U256::from(10u8).pow(U256::from(30u8)))
        .unwrap();
    b.insert("zeta", "\"quoted\" é").unwrap();
    b.insert("alpha", -7i32).unwrap();
    assert_eq!(a.canonical_json(), b.canonical_json());
    assert_eq!(Attributes::new().canonical_json(), "{}");
}

#[test]
fn arkiv_mapping_uses_native_types_and_sorted_names() {
    let mut a = Attributes::new();
    a.insert("b", -2i32).unwrap();
    a.insert("ab", 0x0102u64).unwrap();
    a.insert("a", "hi").unwrap();
    a.insert("c", U256::from(1u8) << 255).unwrap();
    let cells = a.arkiv_attributes();
    let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["a", "ab", "b", "c"]);
    let words: Vec<[u8; 32]> = cells.iter().map(|c| c.name_word()).collect();
    assert!(
        words.windows(2).all(|w| w[0] < w[1]),
        "names must be strictly ascending as bytes32"
    );
    assert_eq!(cells[0].type_id, 8);
    assert_eq!(cells[0].value, b"hi");
    assert_eq!(cells[1].type_id, 3);
    assert_eq!(hex(&cells[1].value), format!("{}0102", "00".repeat(30)));
    assert_eq!(cells[2].type_id, 2);
    assert_eq!(hex(&cells[2].value), format!("{}fe", "ff".repeat(31)));
    assert_eq!(cells[3].type_id, 4);
    assert_eq!(hex(&cells[3].value), format!("80{}", "00".repeat(31)));
    assert_eq!(
        hex(&AttrValue::I32(5).arkiv_value_bytes()),
        format!("{}05", "00".repeat(31))
    );
    assert_eq!(&cells[0].name_word()[..2], b"a\0");
}

#[test]
fn serde_uses_the_wire_form() {
    let text = r#"{"level":{"type":"i32","value":4},"id":{"type":"u64","value":"9"}}"#;
    let a: Attributes = serde_json::from_str(text).unwrap();
    assert_eq!(a.get("id"), Some(&AttrValue::U64(9)));
    assert_eq!(serde_json::to_value(&a).unwrap(), a.to_wire());
    assert!(serde_json::from_str::<Attributes>(r#"{"A":{"type":"i32","value":4}}"#).is_err());
    assert_eq!(serde_json::to_string(&AttrType::U256).unwrap(), "\"u256\"");
    assert_eq!(
        serde_json::from_str::<AttrType>("\"i32\"").unwrap(),
        AttrType::I32
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn arb_value() -> impl Strategy<Value = AttrValue> {
    prop_oneof![
        "[^\\p{Cc}]{0,40}"
            .prop_filter("fits 128 bytes", |s: &String| s.len() <= MAX_STR_BYTES)
            .prop_map(AttrValue::Str),
        any::<i32>().prop_map(AttrValue::I32),
        any::<u64>().prop_map(AttrValue::U64),
        any::<[u8; 32]>().prop_map(|b| AttrValue::U256(U256::from_be_bytes(b))),
    ]
}

fn arb_attributes() -> impl Strategy<Value = Attributes> {
    proptest::collection::btree_map("[a-z][a-z0-9_]{0,31}", arb_value(), 0..=MAX_ATTRIBUTES)
        .prop_map(|m| {
            let mut a = Attributes::new();
            for (k, v) in m {
                a.insert(k, v).unwrap();
            }
            a
        })
}

proptest! {
    #[test]
    fn wire_round_trip(a in arb_attributes()) {
        let wire = a.to_wire();
        prop_assert_eq!(&Attributes::from_wire(&wire).unwrap(), &a);
        let text = serde_json::to_string(&wire).unwrap();
        prop_assert_eq!(&Attributes::from_wire_json(text.as_bytes()).unwrap(), &a);
        prop_assert_eq!(&Attributes::from_wire_json(a.canonical_json().as_bytes()).unwrap(), &a);
        prop_assert!(privsvc_attributes::fuzz_entry::attributes_from_wire(text.as_bytes()));
    }

    #[test]
    fn arbitrary_json_never_panics(text in "\\PC{0,80}") {
        let _ = privsvc_attributes::fuzz_entry::attributes_from_wire(text.as_bytes());
    }
}

#[test]
fn arkiv_cells_decode_back_strictly() {
    let wire = json!({
        "s": {"type": "str", "value": "héllo"},
        "neg": {"type": "i32", "value": -5},
        "pos": {"type": "i32", "value": 2147483647},
        "n": {"type": "u64", "value": "18446744073709551615"},
        "w": {"type": "u256", "value": "12345678901234567890123456789"},
    });
    let a = Attributes::from_wire(&wire).unwrap();
    let cells = a.arkiv_attributes();
    assert_eq!(Attributes::from_arkiv_attributes(&cells).unwrap(), a);

    let mut bad = cells.clone();
    let i = bad.iter().position(|c| c.name == "neg").unwrap();
    bad[i].value[0] = 0x00; // not sign-extended
    assert!(Attributes::from_arkiv_attributes(&bad)
        .unwrap_err()
        .to_string()
        .contains("attribute \"neg\": the Arkiv i32 word"));
    let mut bad = cells.clone();
    let i = bad.iter().position(|c| c.name == "n").unwrap();
    bad[i].value[0] = 1;
    assert!(Attributes::from_arkiv_attributes(&bad)
        .unwrap_err()
        .to_string()
        .contains("non-zero upper bytes"));
    let mut bad = cells.clone();
    bad[0].type_id = 9;
    assert!(Attributes::from_arkiv_attributes(&bad)
        .unwrap_err()
        .to_string()
        .contains("typeId 9"));
    let mut bad = cells.clone();
    let i = bad.iter().position(|c| c.name == "w").unwrap();
    bad[i].value.pop();
    assert!(Attributes::from_arkiv_attributes(&bad)
        .unwrap_err()
        .to_string()
        .contains("must be 32 bytes, got 31"));
    let mut twice = cells.clone();
    twice.push(cells[0].clone());
    assert!(Attributes::from_arkiv_attributes(&twice)
        .unwrap_err()
        .to_string()
        .contains("appears twice"));
    assert_eq!(
        AttrValue::from_arkiv(8, &[0xff]),
        Err("the Arkiv str value is not UTF-8".into())
    );
}
