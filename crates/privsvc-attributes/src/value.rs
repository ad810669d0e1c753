//! Typed attribute values and their wire, canonical and Arkiv forms.

use alloy_primitives::U256;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::str::FromStr;

use crate::AttributeError;

/// Longest `str` value in UTF-8 bytes (the Arkiv node's limit).
pub const MAX_STR_BYTES: usize = 128;

/// The four attribute types privsvc accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttrType {
    /// UTF-8 text, at most [`MAX_STR_BYTES`] bytes, no control characters.
    Str,
    /// Signed 32-bit integer, a JSON number on the wire.
    I32,
    /// Unsigned 64-bit integer, a decimal string on the wire.
    U64,
    /// Unsigned 256-bit integer, a decimal string on the wire.
    U256,
}

impl AttrType {
    /// The type's wire name: `str`, `i32`, `u64` or `u256`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttrType::Str => "str",
            AttrType::I32 => "i32",
            AttrType::U64 => "u64",
            AttrType::U256 => "u256",
        }
    }

    /// The Arkiv typeId of the same-named native type (str 8, i32 2, u64 3, u256 4).
    pub fn arkiv_type_id(self) -> u8 {
        match self {
            AttrType::Str => 8,
            AttrType::I32 => 2,
            AttrType::U64 => 3,
            AttrType::U256 => 4,
        }
    }
}

impl fmt::Display for AttrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AttrType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "str" => Ok(AttrType::Str),
            "i32" => Ok(AttrType::I32),
            "u64" => Ok(AttrType::U64),
            "u256" => Ok(AttrType::U256),
            other => Err(format!(
                "unknown type {other:?} (expected str, i32, u64 or u256)"
            )),
        }
    }
}

/// One typed attribute value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttrValue {
    /// Text value.
    Str(String),
    /// Signed 32-bit value.
    I32(i32),
    /// Unsigned 64-bit value.
    U64(u64),
    /// Unsigned 256-bit value.
    U256(U256),
}

impl AttrValue {
    /// The value's type.
    pub fn attr_type(&self) -> AttrType {
        match self {
            AttrValue::Str(_) => AttrType::Str,
            AttrValue::I32(_) => AttrType::I32,
            AttrValue::U64(_) => AttrType::U64,
            AttrValue::U256(_) => AttrType::U256,
        }
    }

    /// The Arkiv typeId (str 8, i32 2, u64 3, u256 4).
    pub fn arkiv_type_id(&self) -> u8 {
        self.attr_type().arkiv_type_id()
    }

    /// The Arkiv `value` bytes: raw UTF-8 for `str`; for numbers a 32-byte big-endian word
    /// (i32 sign-extended two's complement, u64 and u256 right-aligned).
    pub fn arkiv_value_bytes(&self) -> Vec<u8> {
        match self {
            AttrValue::Str(s) => s.as_bytes().to_vec(),
            AttrValue::I32(v) => {
                let fill = if *v < 0 { 0xff } else { 0x00 };
                let mut word = vec![fill; 32];
                word[28..].copy_from_slice(&v.to_be_bytes());
                word
            }
            AttrValue::U64(v) => {
                let mut word = vec![0u8; 32];
                word[24..].copy_from_slice(&v.to_be_bytes());
                word
            }
            AttrValue::U256(v) => v.to_be_bytes::<32>().to_vec(),
        }
    }

    /// The inverse of [`AttrValue::arkiv_type_id`] and [`AttrValue::arkiv_value_bytes`]:
    /// decodes an Arkiv cell of typeId 8, 2, 3 or 4. Strict: words must be exactly 32 bytes
    /// with canonical padding (as the node enforces), text must be valid `str`.
    pub fn from_arkiv(type_id: u8, value: &[u8]) -> Result<AttrValue, String> {
        let word = || -> Result<&[u8], String> {
            if value.len() == 32 {
                Ok(value)
            } else {
                Err(format!(
                    "a numeric Arkiv value must be 32 bytes, got {}",
                    value.len()
                ))
            }
        };
        let parsed = match type_id {
            8 => AttrValue::Str(
                String::from_utf8(value.to_vec())
                    .map_err(|_| "the Arkiv str value is not UTF-8".to_owned())?,
            ),
            2 => {
                let w = word()?;
                let v = i32::from_be_bytes([w[28], w[29], w[30], w[31]]);
                let fill = if v < 0 { 0xff } else { 0x00 };
                if w[..28].iter().any(|b| *b != fill) {
                    return Err("the Arkiv i32 word is not a sign-extended 32-bit value".into());
                }
                AttrValue::I32(v)
            }
            3 => {
                let w = word()?;
                if w[..24].iter().any(|b| *b != 0) {
                    return Err("the Arkiv u64 word has non-zero upper bytes".into());
                }
                let mut b = [0u8; 8];
                b.copy_from_slice(&w[24..]);
                AttrValue::U64(u64::from_be_bytes(b))
            }
            4 => AttrValue::U256(U256::from_be_slice(word()?)),
            other => {
                return Err(format!(
                    "Arkiv typeId {other} is not one of the privsvc types (str 8, i32 2, u64 3, u256 4)"
                ))
            }
        };
        match parsed.problem() {
            Some(p) => Err(p),
            None => Ok(parsed),
        }
    }

    /// The JSON form of the value alone: a string for `str`, `u64` and `u256` (decimal), a
    /// number for `i32`.
    pub fn wire_value(&self) -> Value {
        match self {
            AttrValue::Str(s) => Value::String(s.clone()),
            AttrValue::I32(v) => Value::from(*v),
            AttrValue::U64(v) => Value::String(v.to_string()),
            AttrValue::U256(v) => Value::String(v.to_string()),
        }
    }

    /// The wire entry `{"type": ..., "value": ...}`.
    pub fn to_wire(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "type".into(),
            Value::String(self.attr_type().as_str().into()),
        );
        m.insert("value".into(), self.wire_value());
        Value::Object(m)
    }

    /// Checks the value rules that the type alone does not enforce (`str` length and content).
    pub(crate) fn problem(&self) -> Option<String> {
        let AttrValue::Str(s) = self else {
            return None;
        };
        if s.len() > MAX_STR_BYTES {
            return Some(format!(
                "str values are at most {MAX_STR_BYTES} bytes of UTF-8, this one has {}",
                s.len()
            ));
        }
        if let Some((pos, c)) = s.char_indices().find(|(_, c)| c.is_control()) {
            return Some(format!(
                "str values must not contain control characters, found U+{:04X} at byte {pos}",
                c as u32
            ));
        }
        None
    }

    /// Parses one wire entry `{"type", "value"}` for attribute `name`.
    pub(crate) fn from_wire(name: &str, entry: &Value) -> Result<AttrValue, AttributeError> {
        let err = |reason: String| AttributeError::invalid(name, reason);
        let Value::Object(obj) = entry else {
            return Err(err(format!(
                "expected an object {{\"type\", \"value\"}}, got {}",
                json_kind(entry)
            )));
        };
        if let Some(unknown) = obj.keys().find(|k| *k != "type" && *k != "value") {
            return Err(err(format!(
                "unknown member {unknown:?} (only \"type\" and \"value\" are allowed)"
            )));
        }
        let ty = match obj.get("type") {
            None => return Err(err("missing \"type\"".into())),
            Some(Value::String(t)) => t.parse::<AttrType>().map_err(err)?,
            Some(other) => {
                return Err(err(format!(
                    "\"type\" must be a string, got {}",
                    json_kind(other)
                )))
            }
        };
        let Some(raw) = obj.get("value") else {
            return Err(err("missing \"value\"".into()));
        };
        let value = match ty {
            AttrType::Str => match raw {
                Value::String(s) => AttrValue::Str(s.clone()),
                other => {
                    return Err(err(format!(
                        "str values must be JSON strings, got {}",
                        json_kind(other)
                    )))
                }
            },
            AttrType::I32 => AttrValue::I32(parse_i32(raw).map_err(err)?),
            AttrType::U64 => {
                let digits = decimal_string(raw, ty).map_err(err)?;
                let v = digits.parse::<u64>().map_err(|_| {
                    err(format!(
                        "u64 value {digits} is out of range (at most {})",
                        u64::MAX
                    ))
                })?;
                AttrValue::U64(v)
            }
            AttrType::U256 => {
                let digits = decimal_string(raw, ty).map_err(err)?;
                let v = if digits.len() > 78 {
                    None
                } else {
                    U256::from_str_radix(digits, 10).ok()
                };
                AttrValue::U256(v.ok_or_else(|| {
                    err(format!(
                        "u256 value {digits} is out of range (at most 2^256-1)"
                    ))
                })?)
            }
        };
        if let Some(p) = value.problem() {
            return Err(err(p));
        }
        Ok(value)
    }
}

fn parse_i32(raw: &Value) -> Result<i32, String> {
    let Value::Number(n) = raw else {
        return Err(format!(
            "i32 values must be JSON numbers, got {}",
            json_kind(raw)
        ));
    };
    if let Some(i) = n.as_i64() {
        return i32::try_from(i).map_err(|_| {
            format!(
                "i32 value {i} is out of range ({}..={})",
                i32::MIN,
                i32::MAX
            )
        });
    }
    if n.is_u64() {
        return Err(format!(
            "i32 value {n} is out of range ({}..={})",
            i32::MIN,
            i32::MAX
        ));
    }
    Err(format!(
        "i32 values must be integers without fraction, exponent or minus zero, got {n}"
    ))
}

fn decimal_string(raw: &Value, ty: AttrType) -> Result<&str, String> {
    let Value::String(s) = raw else {
        return Err(format!(
            "{ty} values must be decimal strings (JSON numbers lose precision), got {}",
            json_kind(raw)
        ));
    };
    if s.is_empty() {
        return Err(format!("{ty} value is an empty string"));
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{ty} value {s:?} must contain only the digits 0-9 (no sign, spaces or hex)"
        ));
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(format!("{ty} value {s:?} has leading zeros"));
    }
    Ok(s)
}

/// A short name of a JSON value's kind, for error messages.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Str(s) => f.write_str(s),
            AttrValue::I32(v) => write!(f, "{v}"),
            AttrValue::U64(v) => write!(f, "{v}"),
            AttrValue::U256(v) => write!(f, "{v}"),
        }
    }
}

impl From<&str> for AttrValue {
    fn from(s: &str) -> Self {
        AttrValue::Str(s.to_owned())
    }
}

impl From<String> for AttrValue {
    fn from(s: String) -> Self {
        AttrValue::Str(s)
    }
}

impl From<i32> for AttrValue {
    fn from(v: i32) -> Self {
        AttrValue::I32(v)
    }
}

impl From<u64> for AttrValue {
    fn from(v: u64) -> Self {
        AttrValue::U64(v)
    }
}

impl From<U256> for AttrValue {
    fn from(v: U256) -> Self {
        AttrValue::U256(v)
    }
}
