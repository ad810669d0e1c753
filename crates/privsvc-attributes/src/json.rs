//! Strict JSON parsing and RFC 8785 (JCS) canonical serialisation.
//!
//! [`parse_strict`] is `serde_json` with two extra rules: an object may not repeat a key, and
//! nothing but JSON white space may follow the value. [`canonical`] writes a value as RFC 8785
//! JSON: object members sorted by their UTF-16 code units, no white space, strings escaped
//! exactly as ECMAScript's `JSON.stringify`, and numbers in the ECMAScript shortest form of
//! their IEEE 754 double value.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// Why [`parse_strict`] refused its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StrictJsonError {
    /// The input is not JSON (serde_json's message with line and column).
    #[error("not valid JSON: {0}")]
    Syntax(String),
    /// An object repeats a key.
    #[error("{0} (each key may appear once per object)")]
    DuplicateKey(String),
    /// Something other than white space follows the JSON value.
    #[error("unexpected byte 0x{byte:02x} at offset {offset} after the end of the JSON value")]
    TrailingBytes {
        /// Byte offset of the first unexpected byte.
        offset: usize,
        /// The unexpected byte.
        byte: u8,
    },
}

/// A JSON value deserialised with duplicate-key detection.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            let StrictValue(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Parses one JSON value, refusing duplicate object keys and anything but white space after it.
///
/// ```
/// use privsvc_attributes::json::{parse_strict, StrictJsonError};
/// assert!(parse_strict(br#"{"a":1}"#).is_ok());
/// assert!(matches!(parse_strict(br#"{"a":1,"a":2}"#), Err(StrictJsonError::DuplicateKey(_))));
/// assert!(matches!(parse_strict(br#"{"a":1}x"#), Err(StrictJsonError::TrailingBytes { offset: 7, .. })));
/// ```
pub fn parse_strict(bytes: &[u8]) -> Result<Value, StrictJsonError> {
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<StrictValue>();
    let value = match stream.next() {
        None => return Err(StrictJsonError::Syntax("empty input".to_owned())),
        Some(Err(e)) if e.is_data() => return Err(StrictJsonError::DuplicateKey(e.to_string())),
        Some(Err(e)) => return Err(StrictJsonError::Syntax(e.to_string())),
        Some(Ok(StrictValue(v))) => v,
    };
    let end = stream.byte_offset();
    let rest = &bytes[end..];
    if let Some(pos) = rest
        .iter()
        .position(|b| !matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
    {
        return Err(StrictJsonError::TrailingBytes {
            offset: end + pos,
            byte: rest[pos],
        });
    }
    Ok(value)
}

/// Serialises `value` as RFC 8785 canonical JSON.
///
/// ```
/// use privsvc_attributes::json::canonical;
/// let v = serde_json::json!({"b": [1, 1e21, 0.5], "a": "\u{1}é"});
/// assert_eq!(canonical(&v), r#"{"a":"\u0001é","b":[1,1e+21,0.5]}"#);
/// ```
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

/// Largest integer magnitude that an IEEE 754 double holds exactly (2^53).
const EXACT_INT: u64 = 1 << 53;

fn write_number(out: &mut String, n: &Number) {
    if let Some(u) = n.as_u64() {
        if u <= EXACT_INT {
            out.push_str(&u.to_string());
            return;
        }
    } else if let Some(i) = n.as_i64() {
        if i.unsigned_abs() <= EXACT_INT {
            out.push_str(&i.to_string());
            return;
        }
    }
    // Everything else is an IEEE double in JCS; as_f64 never fails without arbitrary_precision.
    write_double(out, n.as_f64().unwrap_or(0.0));
}

/// ECMAScript Number::toString for a finite double (the JCS number form).
fn write_double(out: &mut String, x: f64) {
    if x == 0.0 {
        out.push('0');
        return;
    }
    if x < 0.0 {
        out.push('-');
    }
    // Rust's `{:e}` is the shortest round-trip form: d[.ddd]e<exp>.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = digits.len() as i64;
    let n = exp.parse::<i64>().unwrap_or(0) + 1;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n >= 1 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
}

/// Writes a JSON string literal the way ECMAScript's `JSON.stringify` does (RFC 8785 3.2.2.2).
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn num(x: f64) -> String {
        canonical(&json!(x))
    }

    #[test]
    fn numbers_follow_ecmascript() {
        // Examples from RFC 8785 appendix B and ECMAScript.
        assert_eq!(num(1e21), "1e+21");
        assert_eq!(num(1e20), "100000000000000000000");
        assert_eq!(num(0.000001), "0.000001");
        assert_eq!(num(1e-7), "1e-7");
        assert_eq!(num(-1.5), "-1.5");
        assert_eq!(num(-0.0), "0");
        assert_eq!(num(4.5), "4.5");
        assert_eq!(num(2e-3), "0.002");
        assert_eq!(num(1.2345678901234568e20), "123456789012345680000");
        assert_eq!(num(9007199254740994.0), "9007199254740994");
        assert_eq!(num(5e-324), "5e-324");
        assert_eq!(num(1.7976931348623157e308), "1.7976931348623157e+308");
        assert_eq!(canonical(&json!(u64::MAX)), "18446744073709552000");
        assert_eq!(canonical(&json!(-42)), "-42");
    }

    #[test]
    fn keys_sort_by_utf16_units() {
        // RFC 8785 3.2.3: U+1F600 (surrogates D83D DE00) sorts before U+FB33 in UTF-16,
        // though not in UTF-8 or by code point.
        let v = json!({"\u{fb33}": 1, "\u{1f600}": 2, "a": 3, "\r": 4});
        assert_eq!(
            canonical(&v),
            "{\"\\r\":4,\"a\":3,\"\u{1f600}\":2,\"\u{fb33}\":1}"
        );
    }

    #[test]
    fn strings_escape_like_json_stringify() {
        let v = json!("\u{7f}\u{1f}\"\\/\u{2028}");
        assert_eq!(canonical(&v), "\"\u{7f}\\u001f\\\"\\\\/\u{2028}\"");
    }

    #[test]
    fn strict_parser_rejects_duplicates_at_any_depth() {
        let e = parse_strict(br#"{"a":{"b":1,"b":1}}"#).unwrap_err();
        assert!(
            matches!(&e, StrictJsonError::DuplicateKey(m) if m.contains("\"b\"")),
            "{e}"
        );
        assert!(parse_strict(br#"[{"a":1},{"a":1}]"#).is_ok());
    }

    #[test]
    fn strict_parser_reports_trailing_and_syntax() {
        assert_eq!(
            parse_strict(b"{} \n\0").unwrap_err(),
            StrictJsonError::TrailingBytes { offset: 4, byte: 0 }
        );
        assert!(matches!(
            parse_strict(b"{} {}"),
            Err(StrictJsonError::TrailingBytes { offset: 3, .. })
        ));
        assert!(matches!(parse_strict(b""), Err(StrictJsonError::Syntax(_))));
        assert!(matches!(
            parse_strict(b"{\"a\":}"),
            Err(StrictJsonError::Syntax(_))
        ));
        assert_eq!(parse_strict(b" [1, 2.5] \n").unwrap(), json!([1, 2.5]));
    }
}
