//! Arkiv attribute values as the node stores them: a typeId and the ABI value bytes.

use alloy_primitives::{Address, I256, U256};
use serde_json::Value as Json;

/// The ten typeIds (plus the tombstone 0).
pub mod type_id {
    /// Tombstone (patch only): unset the attribute.
    pub const TOMBSTONE: u8 = 0;
    /// bool.
    pub const BOOL: u8 = 1;
    /// i32.
    pub const I32: u8 = 2;
    /// u64.
    pub const U64: u8 = 3;
    /// u256.
    pub const U256: u8 = 4;
    /// dec (int256 × 10^18).
    pub const DEC: u8 = 5;
    /// bytes32.
    pub const BYTES32: u8 = 6;
    /// bytes (system only: `$payload`).
    pub const BYTES: u8 = 7;
    /// str.
    pub const STR: u8 = 8;
    /// addr.
    pub const ADDR: u8 = 9;
    /// key.
    pub const KEY: u8 = 10;
}

/// The tag of a typeId (`"u256"`, `"str"`, ...).
pub fn type_name(t: u8) -> &'static str {
    match t {
        0 => "tombstone",
        1 => "bool",
        2 => "i32",
        3 => "u64",
        4 => "u256",
        5 => "dec",
        6 => "bytes32",
        7 => "bytes",
        8 => "str",
        9 => "addr",
        10 => "key",
        _ => "unknown",
    }
}

/// True when values of this type can be compared with `<`, `<=`, `>`, `>=`.
pub fn is_ordered(t: u8) -> bool {
    matches!(
        t,
        type_id::I32 | type_id::U64 | type_id::U256 | type_id::DEC
    )
}

/// True when `bytes` is a canonical value of type `t` (the node's `InvalidValueType` check).
pub fn is_valid_value(t: u8, bytes: &[u8]) -> bool {
    let word = |b: &[u8]| b.len() == 32;
    match t {
        type_id::BOOL => word(bytes) && bytes[..31].iter().all(|&b| b == 0) && bytes[31] <= 1,
        type_id::I32 => {
            word(bytes) && {
                let fill = if bytes[28] & 0x80 != 0 { 0xff } else { 0 };
                bytes[..28].iter().all(|&b| b == fill)
            }
        }
        type_id::U64 => word(bytes) && bytes[..24].iter().all(|&b| b == 0),
        type_id::U256 | type_id::DEC | type_id::BYTES32 | type_id::KEY => word(bytes),
        type_id::ADDR => word(bytes) && bytes[..12].iter().all(|&b| b == 0),
        type_id::STR => bytes.len() <= 128 && std::str::from_utf8(bytes).is_ok(),
        type_id::BYTES => true,
        _ => false,
    }
}

/// A byte string whose lexicographic order equals the numeric order of an ordered type.
pub fn order_key(t: u8, bytes: &[u8]) -> [u8; 32] {
    let mut w = [0u8; 32];
    if bytes.len() == 32 {
        w.copy_from_slice(bytes);
    }
    if matches!(t, type_id::I32 | type_id::DEC) {
        w[0] ^= 0x80;
    }
    w
}

fn word_u256(bytes: &[u8]) -> U256 {
    U256::from_be_slice(bytes)
}

/// Format an int256 scaled by 10^18 as a decimal string (`"3.5"`, `"-1"`).
pub fn format_dec(bytes: &[u8]) -> String {
    let v = I256::from_raw(word_u256(bytes));
    let neg = v.is_negative();
    let mag = v.unsigned_abs();
    let scale = U256::from(10u64).pow(U256::from(18u64));
    let int = mag / scale;
    let frac = mag % scale;
    let mut s = if neg {
        format!("-{int}")
    } else {
        int.to_string()
    };
    if !frac.is_zero() {
        let f = format!("{:0>18}", frac.to_string());
        s.push('.');
        s.push_str(f.trim_end_matches('0'));
    }
    s
}

fn address_of(bytes: &[u8]) -> Address {
    Address::from_slice(&bytes[12..32])
}

/// The JSON form of a value in query results.
pub fn to_json(t: u8, bytes: &[u8]) -> Json {
    match t {
        type_id::BOOL => Json::Bool(bytes.get(31) == Some(&1)),
        type_id::I32 => {
            let v = I256::from_raw(word_u256(bytes));
            Json::from(v.as_i64())
        }
        type_id::U64 | type_id::U256 => Json::String(format!("{:#x}", word_u256(bytes))),
        type_id::DEC => Json::String(format_dec(bytes)),
        type_id::BYTES32 | type_id::KEY | type_id::BYTES => {
            Json::String(format!("0x{}", hex::encode(bytes)))
        }
        type_id::STR => Json::String(String::from_utf8_lossy(bytes).into_owned()),
        type_id::ADDR => Json::String(address_of(bytes).to_checksum(None)),
        _ => Json::Null,
    }
}

/// Render a value as a typed query literal.
pub fn render_literal(t: u8, bytes: &[u8]) -> String {
    match t {
        type_id::BOOL => (bytes.get(31) == Some(&1)).to_string(),
        type_id::I32 => format!("i32({})", I256::from_raw(word_u256(bytes)).as_i64()),
        type_id::U64 => format!("u64({})", word_u256(bytes)),
        type_id::U256 => format!("u256({})", word_u256(bytes)),
        type_id::DEC => format!("dec({})", format_dec(bytes)),
        type_id::BYTES32 => format!("bytes32(0x{})", hex::encode(bytes)),
        type_id::KEY => format!("key(0x{})", hex::encode(bytes)),
        type_id::STR => format!(
            "str('{}')",
            String::from_utf8_lossy(bytes).replace('\'', "''")
        ),
        type_id::ADDR => format!("addr({:#x})", address_of(bytes)),
        _ => format!("bytes(0x{})", hex::encode(bytes)),
    }
}
