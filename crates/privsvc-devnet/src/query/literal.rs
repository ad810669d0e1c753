//! Typed literals (`i32(..)`, `u64(..)`, `dec(..)`, `str('..')`, ...) and their ABI value bytes.

use alloy_primitives::{Address, I256, U256};

use super::error::QueryError;
use crate::value::{type_id, type_name};

/// A typed value in its canonical ABI value bytes (32-byte word, or raw UTF-8 for `str`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Literal {
    /// The Arkiv typeId (1..=10).
    pub type_id: u8,
    /// The ABI value bytes.
    pub bytes: Vec<u8>,
}

impl Literal {
    /// Render the literal in canonical query syntax (`i32(10)`, `str('it''s')`, `true`).
    pub fn render(&self) -> String {
        crate::value::render_literal(self.type_id, &self.bytes)
    }
}

fn lit_err(pos: usize, msg: impl Into<String>) -> QueryError {
    QueryError::literal(pos, msg)
}

/// Parse the body of `tag(body)` at `pos`.
pub fn parse_tagged(tag: &str, body: &str, pos: usize) -> Result<Literal, QueryError> {
    let body = body.trim();
    match tag {
        "i32" => parse_i32(body, pos, true).map(i32_lit),
        "u64" => {
            let v = parse_unsigned(body, pos, 64, "u64")?;
            Ok(Literal {
                type_id: type_id::U64,
                bytes: v.to_be_bytes::<32>().to_vec(),
            })
        }
        "u256" => {
            let v = parse_unsigned(body, pos, 256, "u256")?;
            Ok(Literal {
                type_id: type_id::U256,
                bytes: v.to_be_bytes::<32>().to_vec(),
            })
        }
        "dec" => parse_dec(body, pos),
        "str" => parse_str(body, pos),
        "addr" => parse_addr(body, pos).map(addr_lit),
        "key" => parse_word_hex(body, pos, "key").map(|b| Literal {
            type_id: type_id::KEY,
            bytes: b,
        }),
        "bytes32" => parse_word_hex(body, pos, "bytes32").map(|b| Literal {
            type_id: type_id::BYTES32,
            bytes: b,
        }),
        "bool" => Err(lit_err(pos, "bool has no wrapper: write true or false")),
        "bytes" => Err(QueryError::type_error(
            pos,
            "bytes values have no index and cannot be queried",
        )),
        other => Err(QueryError::syntax(pos, format!("unknown type tag {other}"))),
    }
}

/// An i32 literal.
pub fn i32_lit(v: i32) -> Literal {
    let w = I256::try_from(v).expect("i32 fits");
    Literal {
        type_id: type_id::I32,
        bytes: w.to_be_bytes::<32>().to_vec(),
    }
}

/// An addr literal.
pub fn addr_lit(a: Address) -> Literal {
    let mut w = [0u8; 32];
    w[12..].copy_from_slice(a.as_slice());
    Literal {
        type_id: type_id::ADDR,
        bytes: w.to_vec(),
    }
}

/// A bool literal.
pub fn bool_lit(v: bool) -> Literal {
    let mut w = [0u8; 32];
    w[31] = v as u8;
    Literal {
        type_id: type_id::BOOL,
        bytes: w.to_vec(),
    }
}

/// Parse a signed 32-bit integer (optional sign). `tagged` selects the message wording.
pub fn parse_i32(body: &str, pos: usize, tagged: bool) -> Result<i32, QueryError> {
    let digits = body.strip_prefix(['+', '-']).unwrap_or(body);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(lit_err(
            pos,
            format!("{body:?} is not an integer; an i32 is written like i32(-5)"),
        ));
    }
    body.parse::<i32>().map_err(|_| {
        let what = if tagged { "i32" } else { "a bare number (i32)" };
        lit_err(
            pos,
            format!("{body} is out of range for {what}; use u64(…) or u256(…) for larger values"),
        )
    })
}

fn parse_unsigned(body: &str, pos: usize, bits: usize, tag: &str) -> Result<U256, QueryError> {
    let v = if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(lit_err(pos, format!("{tag}({body}) is not a hex number")));
        }
        let sig = hex.trim_start_matches('0');
        if sig.len() > 64 {
            return Err(lit_err(
                pos,
                format!("{tag}({body}) does not fit in 256 bits"),
            ));
        }
        U256::from_str_radix(if sig.is_empty() { "0" } else { sig }, 16)
            .map_err(|_| lit_err(pos, format!("{tag}({body}) is not a hex number")))?
    } else {
        if body.is_empty() || !body.bytes().all(|c| c.is_ascii_digit()) {
            return Err(lit_err(
                pos,
                format!("{tag}({body}) is not an unsigned decimal or 0x hex number"),
            ));
        }
        U256::from_str_radix(body, 10)
            .map_err(|_| lit_err(pos, format!("{tag}({body}) does not fit in 256 bits")))?
    };
    if bits < 256 && v.bit_len() > bits {
        return Err(lit_err(
            pos,
            format!("{tag}({body}) does not fit in {bits} bits"),
        ));
    }
    Ok(v)
}

fn parse_dec(body: &str, pos: usize) -> Result<Literal, QueryError> {
    let (neg, rest) = match body.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, body),
    };
    let (int, frac) = match rest.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (rest, None),
    };
    let ok_digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    if !ok_digits(int) || frac.is_some_and(|f| !ok_digits(f)) {
        return Err(lit_err(
            pos,
            format!("dec({body}) is not a decimal number like dec(3.5)"),
        ));
    }
    let frac = frac.unwrap_or("");
    if frac.len() > 18 {
        return Err(lit_err(
            pos,
            format!("dec({body}) has more than 18 fractional digits; it is never rounded"),
        ));
    }
    let scaled = format!("{int}{frac}{}", "0".repeat(18 - frac.len()));
    let mag = U256::from_str_radix(&scaled, 10)
        .map_err(|_| lit_err(pos, format!("dec({body}) is out of range")))?;
    let mut v =
        I256::try_from(mag).map_err(|_| lit_err(pos, format!("dec({body}) is out of range")))?;
    if neg {
        v = -v;
    }
    Ok(Literal {
        type_id: type_id::DEC,
        bytes: v.to_be_bytes::<32>().to_vec(),
    })
}

fn parse_str(body: &str, pos: usize) -> Result<Literal, QueryError> {
    let inner = body
        .strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .filter(|_| body.len() >= 2)
        .ok_or_else(|| {
            lit_err(
                pos,
                format!(
                    "a string is written in single quotes: str('{}')",
                    body.trim_matches('"')
                ),
            )
        })?;
    // Inside, every quote must be doubled.
    let mut out = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            if chars.peek() == Some(&'\'') {
                chars.next();
            } else {
                return Err(lit_err(pos, "a quote inside a string must be doubled: ''"));
            }
        }
        out.push(c);
    }
    if out.len() > 128 {
        return Err(lit_err(
            pos,
            format!("string of {} bytes exceeds the 128-byte limit", out.len()),
        ));
    }
    Ok(Literal {
        type_id: type_id::STR,
        bytes: out.into_bytes(),
    })
}

/// Parse `0x` + 40 hex digits; mixed case must pass EIP-55.
pub fn parse_addr(body: &str, pos: usize) -> Result<Address, QueryError> {
    let hex = body.strip_prefix("0x").ok_or_else(|| {
        lit_err(
            pos,
            format!("addr({body}) must be 0x followed by 40 hex digits"),
        )
    })?;
    if hex.len() != 40 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(lit_err(
            pos,
            format!("addr({body}) must be 0x followed by 40 hex digits"),
        ));
    }
    let a: Address = body
        .parse()
        .map_err(|_| lit_err(pos, format!("addr({body}) is not an address")))?;
    let lower = hex.bytes().all(|c| !c.is_ascii_uppercase());
    let upper = hex.bytes().all(|c| !c.is_ascii_lowercase());
    if !lower && !upper && a.to_checksum(None) != body {
        return Err(lit_err(
            pos,
            format!("addr({body}) has an invalid EIP-55 checksum"),
        ));
    }
    Ok(a)
}

/// Parse `0x` + 64 hex digits.
pub fn parse_word_hex(body: &str, pos: usize, tag: &str) -> Result<Vec<u8>, QueryError> {
    let hex = body.strip_prefix("0x").unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(lit_err(
            pos,
            format!("{tag}({body}) must be 0x followed by 64 hex digits"),
        ));
    }
    hex::decode(hex).map_err(|_| lit_err(pos, format!("{tag}({body}) is not hex")))
}

/// The human name of a literal's type.
pub fn literal_type_name(l: &Literal) -> &'static str {
    type_name(l.type_id)
}
