//! The typed attribute codec of the native Arkiv protocol.
//!
//! Three representations of an [`ArkivValue`]:
//! - the ABI cell `(typeId, value bytes)` carried in `execute()` calldata
//!   ([`ArkivValue::type_id`], [`ArkivValue::abi_bytes`], [`ArkivValue::from_abi`]), with the
//!   node's exact word checks;
//! - the JSON form of `arkiv_query` results ([`ArkivValue::to_json`], [`ArkivValue::from_json`]);
//! - the typed-literal form of the query language (see [`crate::query`]).
//!
//! Attribute names: the node's `Ident32` rule ([`validate_ident32`], [`check_ident32_word`]), the
//! name to `bytes32` conversion ([`name_to_bytes32`], [`bytes32_to_name`]) and the SDK's more
//! permissive rule ([`validate_sdk_name`]).

use alloy_primitives::{Address, B256, I256, U256};
use serde_json::Value;

use crate::entity::ArkivValue;

/// typeId 0: the tombstone (patch only, empty value): "unset this attribute".
pub const TYPE_TOMBSTONE: u8 = 0;
/// typeId of `bool`.
pub const TYPE_BOOL: u8 = 1;
/// typeId of `i32`.
pub const TYPE_I32: u8 = 2;
/// typeId of `u64`.
pub const TYPE_U64: u8 = 3;
/// typeId of `u256`.
pub const TYPE_U256: u8 = 4;
/// typeId of `dec` (signed, 18 fractional digits).
pub const TYPE_DEC: u8 = 5;
/// typeId of `bytes32`.
pub const TYPE_BYTES32: u8 = 6;
/// typeId of `bytes` (system cell `$payload` only).
pub const TYPE_BYTES: u8 = 7;
/// typeId of `str`.
pub const TYPE_STR: u8 = 8;
/// typeId of `addr`.
pub const TYPE_ADDR: u8 = 9;
/// typeId of `key`.
pub const TYPE_KEY: u8 = 10;

/// Longest `str` value in bytes (node and SDK).
pub const MAX_STR_BYTES: usize = 128;
/// Longest payload (`$payload`) in bytes (node and SDK).
pub const MAX_PAYLOAD_BYTES: usize = 131_072;
/// Longest attribute name in bytes.
pub const MAX_NAME_BYTES: usize = 32;
/// Number of fractional decimal digits of `dec`.
pub const DEC_DECIMALS: usize = 18;

/// The type tags in typeId order (index = typeId − 1).
const TYPE_NAMES: [&str; 10] = [
    "bool", "i32", "u64", "u256", "dec", "bytes32", "bytes", "str", "addr", "key",
];

/// Why a value cannot be decoded or encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// A word type (everything but `str` and `bytes`) was not 32 bytes long.
    #[error("a {type_name} value must be 32 bytes, got {len} (BadWordLength({len}))")]
    BadWordLength {
        /// The type tag.
        type_name: &'static str,
        /// The length received.
        len: usize,
    },
    /// A bool word other than 0 or 1.
    #[error("a bool word must hold exactly 0 or 1 (BadBool({0}))")]
    BadBool(u8),
    /// An i32 word whose upper 28 bytes do not repeat the sign bit.
    #[error("an i32 word must be sign-extended (BadSignExtension)")]
    BadSignExtension,
    /// An `addr` or `u64` word with non-zero padding.
    #[error("a {type_name} word must be zero-padded to {width} bytes (NonZeroValuePadding)")]
    NonZeroValuePadding {
        /// The type tag.
        type_name: &'static str,
        /// The meaningful width in bytes (20 for addr, 8 for u64).
        width: usize,
    },
    /// A `str` longer than 128 bytes.
    #[error("a str value may hold at most 128 bytes, got {0} (StringTooLong({0}))")]
    StringTooLong(usize),
    /// A `str` with a control character (the SDK's rule; the node does not check it).
    #[error("a str value must not contain the control character U+{0:04X}")]
    ControlCharacter(u32),
    /// A `str` that is not UTF-8.
    #[error("a str value must be UTF-8 (NotUtf8)")]
    NotUtf8,
    /// A payload longer than 131072 bytes.
    #[error("a payload may hold at most 131072 bytes, got {0} (PayloadTooLong({0}))")]
    PayloadTooLong(usize),
    /// A typeId outside 1..=10 (or a tombstone where a value is needed).
    #[error("unknown attribute typeId {0} (UnknownType({0}))")]
    UnknownType(u8),
    /// A tombstone (typeId 0) with a value.
    #[error("a tombstone must have an empty value, got {0} bytes (TombstoneNotEmpty({0}))")]
    TombstoneNotEmpty(usize),
    /// A type tag that is not one of the ten names.
    #[error("unknown attribute type {0:?} (UnknownAttributeType)")]
    UnknownTypeName(String),
    /// A JSON or literal value that does not fit its type.
    #[error("invalid {type_name} value: {reason}")]
    InvalidValue {
        /// The type tag.
        type_name: &'static str,
        /// What is wrong.
        #[source]
        reason: ValueReason,
    },
}

/// What is wrong with a JSON or literal value of an attribute type
/// ([`CodecError::InvalidValue`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueReason {
    /// Not a JSON boolean.
    #[error("it is not a boolean")]
    NotBool,
    /// Not a JSON string.
    #[error("expected a string")]
    NotString,
    /// A JSON number that is not an integer, or neither a number nor a string.
    #[error("it is not an integer")]
    NotInteger,
    /// A string that does not parse as an integer; the source is the parser's error.
    #[error("it is not an integer: {0}")]
    IntegerSyntax(#[source] std::num::ParseIntError),
    /// Not a non-negative integer (a JSON number, or decimal or `0x` hex text).
    #[error("it is not a non-negative integer (a JSON number, or decimal or 0x hex text)")]
    NotUnsigned,
    /// An integer outside the type's range.
    #[error("it is out of the type's range")]
    OutOfRange,
    /// Not a decimal number (digits, at most one point, an optional leading `-`).
    #[error("it is not a decimal number")]
    NotDecimal,
    /// A decimal number with a point but no digit after it.
    #[error("it has no digits after the point")]
    NoFractionDigits,
    /// A decimal number with more fractional digits than `dec` holds.
    #[error("it has more than {DEC_DECIMALS} fractional digits")]
    TooManyFractionDigits,
    /// A decimal number outside the int256 range of `dec`.
    #[error("it is out of the int256 range")]
    OutOfDecRange,
    /// Not a `0x`-prefixed hex string of whole bytes.
    #[error("it is not 0x-prefixed hex")]
    NotHex,
    /// Hex of another length than the type's.
    #[error("expected {expected} bytes, got {got}")]
    WrongLength {
        /// The type's length.
        expected: usize,
        /// The length given.
        got: usize,
    },
}

fn invalid(type_name: &'static str, reason: ValueReason) -> CodecError {
    CodecError::InvalidValue { type_name, reason }
}

/// The type tag (`"u64"`, …) of a typeId, `None` for 0 (tombstone) and ids above 10.
pub fn type_name(type_id: u8) -> Option<&'static str> {
    match type_id {
        1..=10 => Some(TYPE_NAMES[usize::from(type_id) - 1]),
        _ => None,
    }
}

/// The typeId of a type tag (`"u64"` → 3), `None` for anything else (case-sensitive).
pub fn type_id_of(name: &str) -> Option<u8> {
    TYPE_NAMES
        .iter()
        .position(|n| *n == name)
        .and_then(|i| u8::try_from(i + 1).ok())
}

fn word(type_name: &'static str, bytes: &[u8]) -> Result<[u8; 32], CodecError> {
    <[u8; 32]>::try_from(bytes).map_err(|_| CodecError::BadWordLength {
        type_name,
        len: bytes.len(),
    })
}

fn check_str(s: &str) -> Result<(), CodecError> {
    if s.len() > MAX_STR_BYTES {
        return Err(CodecError::StringTooLong(s.len()));
    }
    Ok(())
}

impl ArkivValue {
    /// The native typeId (1 to 10).
    pub fn type_id(&self) -> u8 {
        match self {
            ArkivValue::Bool(_) => TYPE_BOOL,
            ArkivValue::I32(_) => TYPE_I32,
            ArkivValue::U64(_) => TYPE_U64,
            ArkivValue::U256(_) => TYPE_U256,
            ArkivValue::Dec(_) => TYPE_DEC,
            ArkivValue::Bytes32(_) => TYPE_BYTES32,
            ArkivValue::Bytes(_) => TYPE_BYTES,
            ArkivValue::Str(_) => TYPE_STR,
            ArkivValue::Addr(_) => TYPE_ADDR,
            ArkivValue::Key(_) => TYPE_KEY,
        }
    }

    /// The type tag used in JSON results and query literals (`"u64"`, `"str"`, …).
    pub fn type_name(&self) -> &'static str {
        TYPE_NAMES[usize::from(self.type_id()) - 1]
    }

    /// A `str` value checked with the SDK's rules (at most 128 bytes, no C0 control character,
    /// no DEL). Use it for values that come from users.
    pub fn str(s: impl Into<String>) -> Result<ArkivValue, CodecError> {
        let s = s.into();
        check_str(&s)?;
        if let Some(c) = s.chars().find(|c| c.is_control() && (*c as u32) < 0x80) {
            return Err(CodecError::ControlCharacter(c as u32));
        }
        Ok(ArkivValue::Str(s))
    }

    /// The `value` bytes of the ABI cell. Word types are 32 bytes; `str` is raw UTF-8 and
    /// `bytes` raw bytes. Encodes exactly what it is given (length limits are checked by
    /// [`ArkivValue::validate`]).
    pub fn abi_bytes(&self) -> Vec<u8> {
        match self {
            ArkivValue::Bool(b) => U256::from(u8::from(*b)).to_be_bytes::<32>().to_vec(),
            ArkivValue::I32(v) => I256::try_from(*v)
                .map(|i| i.into_raw().to_be_bytes::<32>().to_vec())
                .unwrap_or_default(),
            ArkivValue::U64(v) => U256::from(*v).to_be_bytes::<32>().to_vec(),
            ArkivValue::U256(v) => v.to_be_bytes::<32>().to_vec(),
            ArkivValue::Dec(v) => v.into_raw().to_be_bytes::<32>().to_vec(),
            ArkivValue::Bytes32(b) | ArkivValue::Key(b) => b.to_vec(),
            ArkivValue::Bytes(b) => b.clone(),
            ArkivValue::Str(s) => s.as_bytes().to_vec(),
            ArkivValue::Addr(a) => a.into_word().to_vec(),
        }
    }

    /// Check the node's length limits: `str` at most 128 bytes, `bytes` at most 131072.
    pub fn validate(&self) -> Result<(), CodecError> {
        match self {
            ArkivValue::Str(s) => check_str(s),
            ArkivValue::Bytes(b) if b.len() > MAX_PAYLOAD_BYTES => {
                Err(CodecError::PayloadTooLong(b.len()))
            }
            _ => Ok(()),
        }
    }

    /// Decode an ABI cell with the node's exact checks (word length, bool 0/1, i32 sign
    /// extension, zero padding of u64 and addr, UTF-8 and length of str, payload length).
    /// A tombstone (typeId 0) is not a value: use [`decode_cell`] for patch cells.
    pub fn from_abi(type_id: u8, bytes: &[u8]) -> Result<ArkivValue, CodecError> {
        let name = type_name(type_id).ok_or(CodecError::UnknownType(type_id))?;
        Ok(match type_id {
            TYPE_BOOL => {
                let w = word(name, bytes)?;
                if w[..31].iter().any(|b| *b != 0) {
                    return Err(CodecError::NonZeroValuePadding {
                        type_name: name,
                        width: 1,
                    });
                }
                if w[31] > 1 {
                    return Err(CodecError::BadBool(w[31]));
                }
                ArkivValue::Bool(w[31] == 1)
            }
            TYPE_I32 => {
                let w = word(name, bytes)?;
                let low = i32::from_be_bytes([w[28], w[29], w[30], w[31]]);
                let fill = if low < 0 { 0xff } else { 0x00 };
                if w[..28].iter().any(|b| *b != fill) {
                    return Err(CodecError::BadSignExtension);
                }
                ArkivValue::I32(low)
            }
            TYPE_U64 => {
                let w = word(name, bytes)?;
                if w[..24].iter().any(|b| *b != 0) {
                    return Err(CodecError::NonZeroValuePadding {
                        type_name: name,
                        width: 8,
                    });
                }
                let mut b = [0u8; 8];
                b.copy_from_slice(&w[24..]);
                ArkivValue::U64(u64::from_be_bytes(b))
            }
            TYPE_U256 => ArkivValue::U256(U256::from_be_bytes(word(name, bytes)?)),
            TYPE_DEC => ArkivValue::Dec(I256::from_raw(U256::from_be_bytes(word(name, bytes)?))),
            TYPE_BYTES32 => ArkivValue::Bytes32(B256::from(word(name, bytes)?)),
            TYPE_KEY => ArkivValue::Key(B256::from(word(name, bytes)?)),
            TYPE_BYTES => {
                if bytes.len() > MAX_PAYLOAD_BYTES {
                    return Err(CodecError::PayloadTooLong(bytes.len()));
                }
                ArkivValue::Bytes(bytes.to_vec())
            }
            TYPE_STR => {
                if bytes.len() > MAX_STR_BYTES {
                    return Err(CodecError::StringTooLong(bytes.len()));
                }
                let s = std::str::from_utf8(bytes).map_err(|_| CodecError::NotUtf8)?;
                ArkivValue::Str(s.to_owned())
            }
            TYPE_ADDR => {
                let w = word(name, bytes)?;
                if w[..12].iter().any(|b| *b != 0) {
                    return Err(CodecError::NonZeroValuePadding {
                        type_name: name,
                        width: 20,
                    });
                }
                ArkivValue::Addr(Address::from_slice(&w[12..]))
            }
            _ => return Err(CodecError::UnknownType(type_id)),
        })
    }

    /// The JSON form used in `arkiv_query` results: bool → JSON bool, i32 → JSON number,
    /// u64/u256 → `0x` quantity, dec → decimal string, bytes32/key → `0x` + 64 hex,
    /// addr → `0x` + 40 lowercase hex, str → string, bytes → `0x` hex.
    pub fn to_json(&self) -> Value {
        match self {
            ArkivValue::Bool(b) => Value::Bool(*b),
            ArkivValue::I32(v) => Value::from(*v),
            ArkivValue::U64(v) => Value::String(format!("{v:#x}")),
            ArkivValue::U256(v) => Value::String(format!("{v:#x}")),
            ArkivValue::Dec(v) => Value::String(format_dec(*v)),
            ArkivValue::Bytes32(b) | ArkivValue::Key(b) => Value::String(format!("{b}")),
            ArkivValue::Bytes(b) => Value::String(format!("0x{}", hex::encode(b))),
            ArkivValue::Str(s) => Value::String(s.clone()),
            ArkivValue::Addr(a) => Value::String(format!("0x{}", hex::encode(a))),
        }
    }

    /// Parse the JSON form of a value of type `type_name` (as found in query results). Also
    /// accepts what the SDK tolerates: u64/u256 as decimal strings or JSON numbers, i32 as a
    /// decimal string, hex in any case.
    pub fn from_json(type_name: &str, value: &Value) -> Result<ArkivValue, CodecError> {
        let id =
            type_id_of(type_name).ok_or_else(|| CodecError::UnknownTypeName(type_name.into()))?;
        let tn = TYPE_NAMES[usize::from(id) - 1];
        Ok(match id {
            TYPE_BOOL => {
                ArkivValue::Bool(value.as_bool().ok_or(invalid(tn, ValueReason::NotBool))?)
            }
            TYPE_I32 => {
                let n: i64 = match value {
                    Value::Number(n) => n.as_i64().ok_or(invalid(tn, ValueReason::NotInteger))?,
                    Value::String(s) => s
                        .trim()
                        .parse()
                        .map_err(|e| invalid(tn, ValueReason::IntegerSyntax(e)))?,
                    _ => return Err(invalid(tn, ValueReason::NotInteger)),
                };
                ArkivValue::I32(i32::try_from(n).map_err(|_| invalid(tn, ValueReason::OutOfRange))?)
            }
            TYPE_U64 => {
                let u = json_uint(tn, value)?;
                ArkivValue::U64(u64::try_from(u).map_err(|_| invalid(tn, ValueReason::OutOfRange))?)
            }
            TYPE_U256 => ArkivValue::U256(json_uint(tn, value)?),
            TYPE_DEC => {
                let s = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => return Err(invalid(tn, ValueReason::NotDecimal)),
                };
                ArkivValue::Dec(parse_dec(&s)?)
            }
            TYPE_BYTES32 | TYPE_KEY => {
                let b = json_hex(tn, value)?;
                let w = <[u8; 32]>::try_from(b.as_slice()).map_err(|_| {
                    invalid(
                        tn,
                        ValueReason::WrongLength {
                            expected: 32,
                            got: b.len(),
                        },
                    )
                })?;
                if id == TYPE_KEY {
                    ArkivValue::Key(B256::from(w))
                } else {
                    ArkivValue::Bytes32(B256::from(w))
                }
            }
            TYPE_BYTES => ArkivValue::Bytes(json_hex(tn, value)?),
            TYPE_STR => ArkivValue::Str(
                value
                    .as_str()
                    .ok_or(invalid(tn, ValueReason::NotString))?
                    .to_owned(),
            ),
            TYPE_ADDR => {
                let b = json_hex(tn, value)?;
                if b.len() != 20 {
                    return Err(invalid(
                        tn,
                        ValueReason::WrongLength {
                            expected: 20,
                            got: b.len(),
                        },
                    ));
                }
                ArkivValue::Addr(Address::from_slice(&b))
            }
            _ => return Err(CodecError::UnknownType(id)),
        })
    }
}

/// One decoded ABI cell: a value, or a tombstone (`None`).
///
/// Checks the tombstone spelling (typeId 0 with an empty value) and every value rule of
/// [`ArkivValue::from_abi`].
pub fn decode_cell(type_id: u8, bytes: &[u8]) -> Result<Option<ArkivValue>, CodecError> {
    if type_id == TYPE_TOMBSTONE {
        if bytes.is_empty() {
            return Ok(None);
        }
        return Err(CodecError::TombstoneNotEmpty(bytes.len()));
    }
    ArkivValue::from_abi(type_id, bytes).map(Some)
}

fn json_uint(tn: &'static str, value: &Value) -> Result<U256, CodecError> {
    match value {
        Value::Number(n) => n
            .as_u64()
            .map(U256::from)
            .ok_or(invalid(tn, ValueReason::NotUnsigned)),
        Value::String(s) => parse_uint(s).ok_or(invalid(tn, ValueReason::NotUnsigned)),
        _ => Err(invalid(tn, ValueReason::NotUnsigned)),
    }
}

/// Parse a non-negative integer written in decimal or as `0x` hex.
pub fn parse_uint(s: &str) -> Option<U256> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        U256::from_str_radix(h, 16).ok()
    } else {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        U256::from_str_radix(s, 10).ok()
    }
}

fn json_hex(tn: &'static str, value: &Value) -> Result<Vec<u8>, CodecError> {
    let s = value.as_str().ok_or(invalid(tn, ValueReason::NotHex))?;
    parse_hex(s).ok_or(invalid(tn, ValueReason::NotHex))
}

/// Parse `0x`-prefixed hex (any case, even length) into bytes.
pub fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    hex::decode(h).ok()
}

fn ten_pow_18() -> U256 {
    U256::from(1_000_000_000_000_000_000u64)
}

/// Parse a decimal number with at most 18 fractional digits (`"3.5"`, `"-0.25"`, `"1000"`)
/// into its `dec` representation (value × 10^18 as int256).
pub fn parse_dec(s: &str) -> Result<I256, CodecError> {
    let tn = "dec";
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (int_part, frac_part) = match body.split_once('.') {
        Some((i, f)) => (i, f),
        None => (body, ""),
    };
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int_part.is_empty() || !digits(int_part) || !digits(frac_part) {
        return Err(invalid(tn, ValueReason::NotDecimal));
    }
    if body.contains('.') && frac_part.is_empty() {
        return Err(invalid(tn, ValueReason::NoFractionDigits));
    }
    if frac_part.len() > DEC_DECIMALS {
        return Err(invalid(tn, ValueReason::TooManyFractionDigits));
    }
    let too_big = || invalid(tn, ValueReason::OutOfDecRange);
    let int = U256::from_str_radix(int_part, 10).map_err(|_| too_big())?;
    let mut frac_digits = frac_part.to_owned();
    while frac_digits.len() < DEC_DECIMALS {
        frac_digits.push('0');
    }
    let frac = U256::from_str_radix(&frac_digits, 10).map_err(|_| too_big())?;
    let abs = int
        .checked_mul(ten_pow_18())
        .and_then(|v| v.checked_add(frac))
        .ok_or_else(too_big)?;
    let sign = if neg {
        alloy_primitives::Sign::Negative
    } else {
        alloy_primitives::Sign::Positive
    };
    I256::checked_from_sign_and_abs(sign, abs).ok_or_else(too_big)
}

/// Render a `dec` value as the shortest decimal string (`"3.5"`, `"-1.5"`, `"0"`, `"3"`).
pub fn format_dec(v: I256) -> String {
    let (sign, abs) = v.into_sign_and_abs();
    let int = abs / ten_pow_18();
    let frac = abs % ten_pow_18();
    let mut out = String::new();
    if sign.is_negative() && !abs.is_zero() {
        out.push('-');
    }
    out.push_str(&int.to_string());
    if !frac.is_zero() {
        let f = format!("{:0>18}", frac.to_string());
        out.push('.');
        out.push_str(f.trim_end_matches('0'));
    }
    out
}

/// Why an attribute name is refused by the node's `Ident32` rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name is empty (`Ident32Empty()`).
    #[error("attribute name is empty (Ident32Empty)")]
    Empty,
    /// A byte outside the allowed set (`Ident32InvalidByte(index, byte)`).
    #[error(
        "attribute name has the invalid byte 0x{byte:02x} at position {index}: the node accepts \
         a-z first, then a-z 0-9 . - _ (Ident32InvalidByte)"
    )]
    InvalidByte {
        /// Byte position in the name.
        index: usize,
        /// The offending byte.
        byte: u8,
    },
    /// Longer than 32 bytes.
    #[error("attribute name is {0} bytes long; at most 32 are allowed")]
    TooLong(usize),
}

fn ident_byte_ok(index: usize, b: u8) -> bool {
    if index == 0 {
        b.is_ascii_lowercase()
    } else {
        b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'_')
    }
}

/// Check a user attribute name with the node's `Ident32` rule: 1 to 32 bytes, first `a-z`,
/// then `a-z 0-9 . - _`.
pub fn validate_ident32(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(NameError::TooLong(name.len()));
    }
    match name
        .bytes()
        .enumerate()
        .find(|(i, b)| !ident_byte_ok(*i, *b))
    {
        Some((index, byte)) => Err(NameError::InvalidByte { index, byte }),
        None => Ok(()),
    }
}

/// Check a name as the node sees it in calldata (a null-padded `bytes32`): a non-NUL first
/// byte (`Ident32Empty`), the `Ident32` byte rule up to the first NUL, and only NULs after it (a
/// non-zero byte after the padding began is reported at its position).
pub fn check_ident32_word(word: &B256) -> Result<(), NameError> {
    if word[0] == 0 {
        return Err(NameError::Empty);
    }
    let mut seen_zero = false;
    for (index, b) in word.iter().enumerate() {
        if *b == 0 {
            seen_zero = true;
        } else if seen_zero || !ident_byte_ok(index, *b) {
            return Err(NameError::InvalidByte { index, byte: *b });
        }
    }
    Ok(())
}

/// A name as its left-aligned, null-padded `bytes32` (viem `toHex(name, {size: 32})`). Does not
/// apply the `Ident32` rule (system names such as `$payload` convert too).
pub fn name_to_bytes32(name: &str) -> Result<B256, NameError> {
    if name.len() > MAX_NAME_BYTES {
        return Err(NameError::TooLong(name.len()));
    }
    let mut w = [0u8; 32];
    w[..name.len()].copy_from_slice(name.as_bytes());
    Ok(B256::from(w))
}

/// The name held in a null-padded `bytes32` (bytes up to the first NUL); `None` when those bytes
/// are not UTF-8.
pub fn bytes32_to_name(word: &B256) -> Option<String> {
    let len = word.iter().position(|b| *b == 0).unwrap_or(32);
    std::str::from_utf8(&word[..len]).ok().map(str::to_owned)
}

/// Words the query language reserves; the SDK refuses them as attribute names (any case).
pub const RESERVED_WORDS: [&str; 18] = [
    "and",
    "or",
    "not",
    "true",
    "false",
    "startswith",
    "exists",
    "typeof",
    "bool",
    "i32",
    "u64",
    "u256",
    "dec",
    "bytes32",
    "bytes",
    "str",
    "addr",
    "key",
];

/// Check a name with the SDK 0.8 rule used for query building: `^[A-Za-z][A-Za-z0-9._-]*$`, at
/// most 32 bytes, no `--`, no leading `$`, not a reserved word. (The node is stricter for
/// stored names: see [`validate_ident32`].) The error is a message meant for people.
pub fn validate_sdk_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("attribute name is empty".into());
    }
    if name.starts_with('$') {
        return Err(format!(
            "attribute name {name:?} starts with \"$\", which is reserved for system attributes"
        ));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "attribute name {name:?} is {} bytes long; at most 32 are allowed",
            name.len()
        ));
    }
    for (pos, c) in name.chars().enumerate() {
        let ok = if pos == 0 {
            c.is_ascii_alphabetic()
        } else {
            c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')
        };
        if !ok {
            return Err(if pos == 0 {
                format!("attribute name {name:?} starts with \"{c}\"; it must start with a letter")
            } else {
                format!(
                    "attribute name {name:?} has the invalid character \"{c}\" at position {pos}"
                )
            });
        }
    }
    if name.contains("--") {
        return Err(format!(
            "attribute name {name:?} contains \"--\", which opens a comment in the query language"
        ));
    }
    let lower = name.to_ascii_lowercase();
    if RESERVED_WORDS.contains(&lower.as_str()) {
        return Err(format!(
            "attribute name {name:?} is reserved by the query language"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn h(s: &str) -> Vec<u8> {
        parse_hex(s).unwrap()
    }

    #[test]
    fn type_ids_round_trip() {
        for id in 1..=10u8 {
            assert_eq!(type_id_of(type_name(id).unwrap()), Some(id));
        }
        assert_eq!(type_name(0), None);
        assert_eq!(type_name(11), None);
        assert_eq!(type_id_of("int"), None);
    }

    #[test]
    fn word_checks() {
        let mut w = [0u8; 32];
        w[31] = 2;
        assert_eq!(ArkivValue::from_abi(1, &w), Err(CodecError::BadBool(2)));
        assert!(matches!(
            ArkivValue::from_abi(4, &[1, 2, 3]),
            Err(CodecError::BadWordLength { len: 3, .. })
        ));
        let neg_bad = h("0xffffffffffffffffffffffffffffffffffffffffffffffffffffffff00000001");
        assert_eq!(
            ArkivValue::from_abi(2, &neg_bad),
            Err(CodecError::BadSignExtension)
        );
        let ab = [0xabu8; 32];
        assert!(matches!(
            ArkivValue::from_abi(9, &ab),
            Err(CodecError::NonZeroValuePadding { width: 20, .. })
        ));
        assert!(matches!(
            ArkivValue::from_abi(3, &ab),
            Err(CodecError::NonZeroValuePadding { width: 8, .. })
        ));
        assert_eq!(
            ArkivValue::from_abi(8, &[0xff, 0xfe]),
            Err(CodecError::NotUtf8)
        );
        assert_eq!(
            ArkivValue::from_abi(8, &[b'x'; 129]),
            Err(CodecError::StringTooLong(129))
        );
        assert_eq!(decode_cell(0, &[]), Ok(None));
        assert_eq!(decode_cell(0, &[1]), Err(CodecError::TombstoneNotEmpty(1)));
        assert_eq!(
            ArkivValue::from_abi(99, &[]),
            Err(CodecError::UnknownType(99))
        );
    }

    #[test]
    fn values_round_trip_through_abi_and_json() {
        let values = vec![
            ArkivValue::Bool(true),
            ArkivValue::Bool(false),
            ArkivValue::I32(-42),
            ArkivValue::I32(i32::MIN),
            ArkivValue::I32(i32::MAX),
            ArkivValue::U64(0),
            ArkivValue::U64(u64::MAX),
            ArkivValue::U256(U256::MAX),
            ArkivValue::Dec(I256::MINUS_ONE),
            ArkivValue::Dec(parse_dec("-3.25").unwrap()),
            ArkivValue::Bytes32(B256::repeat_byte(0x5a)),
            ArkivValue::Str("é".repeat(64)),
            ArkivValue::Bytes(vec![0xee; 4096]),
            ArkivValue::Addr(Address::repeat_byte(0x11)),
            ArkivValue::Key(B256::repeat_byte(0x77)),
        ];
        for v in values {
            let bytes = v.abi_bytes();
            assert_eq!(ArkivValue::from_abi(v.type_id(), &bytes).unwrap(), v);
            let j = v.to_json();
            assert_eq!(ArkivValue::from_json(v.type_name(), &j).unwrap(), v, "{j}");
        }
    }

    #[test]
    fn json_forms() {
        assert_eq!(
            ArkivValue::U256(U256::from(1_000_000)).to_json(),
            json!("0xf4240")
        );
        assert_eq!(ArkivValue::U64(0).to_json(), json!("0x0"));
        assert_eq!(
            ArkivValue::Dec(parse_dec("3").unwrap()).to_json(),
            json!("3")
        );
        assert_eq!(
            ArkivValue::Dec(parse_dec("-1.50").unwrap()).to_json(),
            json!("-1.5")
        );
        assert_eq!(ArkivValue::I32(-42).to_json(), json!(-42));
        let reason = |type_name: &str, v: Value| match ArkivValue::from_json(type_name, &v) {
            Err(CodecError::InvalidValue { reason, .. }) => reason,
            other => panic!("{type_name} {v}: {other:?}"),
        };
        assert_eq!(reason("bool", json!("yes")), ValueReason::NotBool);
        assert_eq!(reason("i32", json!(1.5)), ValueReason::NotInteger);
        assert_eq!(
            reason("i32", json!(3_000_000_000u64)),
            ValueReason::OutOfRange
        );
        assert!(matches!(
            reason("i32", json!("x")),
            ValueReason::IntegerSyntax(_)
        ));
        assert_eq!(reason("str", json!(42)), ValueReason::NotString);
        assert_eq!(reason("u64", json!(-1)), ValueReason::NotUnsigned);
        assert_eq!(
            reason("addr", json!("0x0102")),
            ValueReason::WrongLength {
                expected: 20,
                got: 2
            }
        );
        assert_eq!(reason("key", json!("0xzz")), ValueReason::NotHex);
        assert!(ArkivValue::from_json("int", &json!("x")).is_err());
        assert_eq!(
            ArkivValue::from_json("u256", &json!("42")).unwrap(),
            ArkivValue::U256(U256::from(42))
        );
    }

    #[test]
    fn dec_parse_limits() {
        let reason = |s: &str| match parse_dec(s) {
            Err(CodecError::InvalidValue {
                type_name: "dec",
                reason,
            }) => reason,
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(
            reason("0.1234567890123456789"),
            ValueReason::TooManyFractionDigits
        );
        assert_eq!(reason("1."), ValueReason::NoFractionDigits);
        assert_eq!(reason(".5"), ValueReason::NotDecimal);
        assert_eq!(reason("1e5"), ValueReason::NotDecimal);
        assert_eq!(reason(&"9".repeat(80)), ValueReason::OutOfDecRange);
        assert_eq!(
            format_dec(parse_dec("-0.000000000000000001").unwrap()),
            "-0.000000000000000001"
        );
        assert_eq!(
            format_dec(parse_dec("1000000000000000000000").unwrap()),
            "1000000000000000000000"
        );
    }

    #[test]
    fn names() {
        assert!(validate_ident32("my-attr_name.v2").is_ok());
        assert_eq!(validate_ident32(""), Err(NameError::Empty));
        assert_eq!(
            validate_ident32("testInvalidKey"),
            Err(NameError::InvalidByte {
                index: 4,
                byte: b'I'
            })
        );
        assert_eq!(
            validate_ident32(&"a".repeat(33)),
            Err(NameError::TooLong(33))
        );
        let mut w = [0u8; 32];
        w[..5].copy_from_slice(b"ab\0c\0");
        assert_eq!(
            check_ident32_word(&B256::from(w)),
            Err(NameError::InvalidByte {
                index: 3,
                byte: b'c'
            })
        );
        assert_eq!(check_ident32_word(&B256::ZERO), Err(NameError::Empty));
        assert!(check_ident32_word(&name_to_bytes32("ab").unwrap()).is_ok());
        assert_eq!(
            bytes32_to_name(&name_to_bytes32("$payload").unwrap()).unwrap(),
            "$payload"
        );
        assert!(validate_sdk_name("a--b")
            .unwrap_err()
            .contains("opens a comment"));
        assert!(validate_sdk_name("Bytes32")
            .unwrap_err()
            .contains("reserved by the query language"));
        assert!(validate_sdk_name("android").is_ok());
    }

    #[test]
    fn sdk_str_rejects_control_characters() {
        assert!(ArkivValue::str("a\u{7f}b").is_err());
        assert!(ArkivValue::str("a\tb").is_err());
        assert!(ArkivValue::str("O'Brien").is_ok());
    }
}
