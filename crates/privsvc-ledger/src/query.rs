//! A builder for the typed query language of `arkiv_query` (native protocol).
//!
//! Renders exactly what the SDK 0.8 builder renders: `name = str('x') AND n >= u64(3)`,
//! `$owner = addr(0x…)` (EIP-55 checksummed), `$key = key(0x…)`, `desc STARTSWITH str('ab')`,
//! `NOT …`, with parentheses only where precedence (NOT, then AND, then OR) requires them.
//! Literals are always typed except booleans; a `'` inside a string is written `''` (there are
//! no backslash escapes). Operators the node rejects (`!=`, `EXISTS`, `TYPEOF`) are not offered.
//!
//! ```
//! use privsvc_ledger::Expr;
//! use privsvc_ledger::ArkivValue;
//!
//! let q = Expr::and(vec![
//!     Expr::eq("project", ArkivValue::Str("privsvc-7f3k".into()))?,
//!     Expr::or(vec![
//!         Expr::ge("epoch", ArkivValue::U64(3))?,
//!         Expr::negate(Expr::eq("flagged", ArkivValue::Bool(true))?),
//!     ])?,
//! ])?;
//! assert_eq!(
//!     q.to_string(),
//!     "project = str('privsvc-7f3k') AND (epoch >= u64(3) OR NOT flagged = true)"
//! );
//! # Ok::<(), privsvc_ledger::QueryBuildError>(())
//! ```

use std::fmt;

use alloy_primitives::{Address, B256};

use crate::codec::{format_dec, validate_sdk_name, CodecError};
use crate::entity::ArkivValue;

/// The query that matches every live entity (raw RPC only).
pub const ALL: &str = "*";

/// Why an expression cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryBuildError {
    /// The attribute name is not a valid query identifier.
    #[error("invalid attribute name: {0}")]
    InvalidName(String),
    /// A system attribute that cannot be filtered on, or an unknown `$` name.
    #[error("{0}")]
    NotFilterable(String),
    /// The operator is not defined for the value's type (ranges need i32, u64, u256 or dec;
    /// STARTSWITH needs str).
    #[error("the operator {op} is not defined for a {type_name}")]
    UnsupportedOperator {
        /// The operator.
        op: &'static str,
        /// The value's type tag.
        type_name: &'static str,
    },
    /// A system attribute compared with a value of the wrong type.
    #[error("{name} is a {expected}, but the value is a {got}; write {expected}(...) around it")]
    TypeMismatch {
        /// The system attribute.
        name: &'static str,
        /// Its type.
        expected: &'static str,
        /// The value's type.
        got: &'static str,
    },
    /// A str value that cannot appear in a query (too long, or with a control character); the
    /// source is the codec's error.
    #[error("invalid value: {0}")]
    InvalidValue(#[source] CodecError),
    /// A bytes value: bytes cannot appear in a query.
    #[error("invalid value: bytes values cannot be queried")]
    BytesValue,
    /// AND/OR of nothing.
    #[error("AND/OR needs at least one expression")]
    Empty,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A query expression. Build it with the checked constructors ([`Expr::eq`], [`Expr::and`], …);
/// render it with `to_string()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// `attr op literal`.
    Cmp {
        /// Attribute name (user or system).
        attr: String,
        /// Operator.
        op: CmpOp,
        /// Typed value.
        value: ArkivValue,
    },
    /// `attr STARTSWITH str('prefix')`.
    StartsWith {
        /// Attribute name.
        attr: String,
        /// The byte prefix.
        prefix: String,
    },
    /// `NOT e`: the complement over all live entities.
    Not(Box<Expr>),
    /// Conjunction.
    And(Vec<Expr>),
    /// Disjunction.
    Or(Vec<Expr>),
}

/// The name and the type of a filterable system attribute, `Err` for the others.
fn system_type(name: &str) -> Result<(&'static str, &'static str), QueryBuildError> {
    match name {
        "$key" => Ok(("$key", "key")),
        "$owner" => Ok(("$owner", "addr")),
        "$creator" => Ok(("$creator", "addr")),
        "$expiresAt" => Ok(("$expiresAt", "u64")),
        "$createdAt" => Ok(("$createdAt", "u64")),
        "$contentType" => Ok(("$contentType", "str")),
        "$updatedAt" | "$creationFlags" | "$payload" => Err(QueryBuildError::NotFilterable(
            format!("{name} carries no index, so it cannot be filtered on"),
        )),
        _ => Err(QueryBuildError::NotFilterable(format!(
            "{name} is not a system attribute ($key, $owner, $creator, $expiresAt, $createdAt, \
             $contentType)"
        ))),
    }
}

fn check_value(value: &ArkivValue) -> Result<(), QueryBuildError> {
    match value {
        ArkivValue::Bytes(_) => Err(QueryBuildError::BytesValue),
        ArkivValue::Str(s) => ArkivValue::str(s.clone())
            .map(|_| ())
            .map_err(QueryBuildError::InvalidValue),
        _ => Ok(()),
    }
}

fn check_attr(name: &str, value: &ArkivValue) -> Result<(), QueryBuildError> {
    if name.starts_with('$') {
        let (name, expected) = system_type(name)?;
        if value.type_name() != expected {
            return Err(QueryBuildError::TypeMismatch {
                name,
                expected,
                got: value.type_name(),
            });
        }
        Ok(())
    } else {
        validate_sdk_name(name).map_err(QueryBuildError::InvalidName)
    }
}

impl Expr {
    /// `name op value`, checked: valid name, a system attribute gets its own type, ranges only
    /// on i32, u64, u256 and dec.
    pub fn cmp(name: &str, op: CmpOp, value: ArkivValue) -> Result<Expr, QueryBuildError> {
        check_value(&value)?;
        check_attr(name, &value)?;
        let ranged = matches!(
            value,
            ArkivValue::I32(_) | ArkivValue::U64(_) | ArkivValue::U256(_) | ArkivValue::Dec(_)
        );
        if op != CmpOp::Eq && !ranged {
            return Err(QueryBuildError::UnsupportedOperator {
                op: op.symbol(),
                type_name: value.type_name(),
            });
        }
        Ok(Expr::Cmp {
            attr: name.into(),
            op,
            value,
        })
    }

    /// `name = value` (type and value must both match).
    pub fn eq(name: &str, value: ArkivValue) -> Result<Expr, QueryBuildError> {
        Expr::cmp(name, CmpOp::Eq, value)
    }
    /// `name < value`.
    pub fn lt(name: &str, value: ArkivValue) -> Result<Expr, QueryBuildError> {
        Expr::cmp(name, CmpOp::Lt, value)
    }
    /// `name <= value`.
    pub fn le(name: &str, value: ArkivValue) -> Result<Expr, QueryBuildError> {
        Expr::cmp(name, CmpOp::Le, value)
    }
    /// `name > value`.
    pub fn gt(name: &str, value: ArkivValue) -> Result<Expr, QueryBuildError> {
        Expr::cmp(name, CmpOp::Gt, value)
    }
    /// `name >= value`.
    pub fn ge(name: &str, value: ArkivValue) -> Result<Expr, QueryBuildError> {
        Expr::cmp(name, CmpOp::Ge, value)
    }

    /// `name STARTSWITH str('prefix')`; `prefix` must be a str.
    pub fn starts_with(name: &str, prefix: ArkivValue) -> Result<Expr, QueryBuildError> {
        let ArkivValue::Str(p) = &prefix else {
            return Err(QueryBuildError::UnsupportedOperator {
                op: "STARTSWITH",
                type_name: prefix.type_name(),
            });
        };
        check_value(&prefix)?;
        check_attr(name, &prefix)?;
        Ok(Expr::StartsWith {
            attr: name.into(),
            prefix: p.clone(),
        })
    }

    /// `NOT e` (also written `!e`).
    pub fn negate(e: Expr) -> Expr {
        Expr::Not(Box::new(e))
    }

    /// Conjunction of one or more expressions.
    pub fn and(list: Vec<Expr>) -> Result<Expr, QueryBuildError> {
        if list.is_empty() {
            return Err(QueryBuildError::Empty);
        }
        Ok(Expr::And(list))
    }

    /// Disjunction of one or more expressions.
    pub fn or(list: Vec<Expr>) -> Result<Expr, QueryBuildError> {
        if list.is_empty() {
            return Err(QueryBuildError::Empty);
        }
        Ok(Expr::Or(list))
    }

    /// `$owner = addr(<checksummed>)`.
    pub fn owner_is(owner: Address) -> Expr {
        Expr::Cmp {
            attr: "$owner".into(),
            op: CmpOp::Eq,
            value: ArkivValue::Addr(owner),
        }
    }

    /// `$creator = addr(<checksummed>)`.
    pub fn creator_is(creator: Address) -> Expr {
        Expr::Cmp {
            attr: "$creator".into(),
            op: CmpOp::Eq,
            value: ArkivValue::Addr(creator),
        }
    }

    /// `$key = key(0x…)`.
    pub fn key_is(key: B256) -> Expr {
        Expr::Cmp {
            attr: "$key".into(),
            op: CmpOp::Eq,
            value: ArkivValue::Key(key),
        }
    }

    /// `$createdAt op u64(block)`; ranges allowed.
    pub fn created_at(op: CmpOp, block: u64) -> Expr {
        Expr::Cmp {
            attr: "$createdAt".into(),
            op,
            value: ArkivValue::U64(block),
        }
    }

    /// `$expiresAt op u64(block)`; ranges allowed.
    pub fn expires_at(op: CmpOp, block: u64) -> Expr {
        Expr::Cmp {
            attr: "$expiresAt".into(),
            op,
            value: ArkivValue::U64(block),
        }
    }

    fn precedence(&self) -> u8 {
        match self {
            Expr::Or(l) if l.len() > 1 => 1,
            Expr::And(l) if l.len() > 1 => 2,
            Expr::Or(l) | Expr::And(l) => l[0].precedence(),
            Expr::Not(_) => 3,
            Expr::Cmp { .. } | Expr::StartsWith { .. } => 4,
        }
    }

    fn write_child(&self, f: &mut fmt::Formatter<'_>, min: u8) -> fmt::Result {
        if self.precedence() < min {
            write!(f, "({self})")
        } else {
            write!(f, "{self}")
        }
    }
}

/// A string literal: `str('…')` with `'` doubled.
pub fn str_literal(s: &str) -> String {
    format!("str('{}')", s.replace('\'', "''"))
}

/// The typed literal of a value as the query language writes it (`i32(10)`, `u64(7)`,
/// `u256(1000000)`, `dec(3.5)`, `str('…')`, `addr(<checksummed>)`, `key(0x…)`, `bytes32(0x…)`,
/// bare `true`/`false`). `bytes` has no literal; it renders as `bytes(0x…)`, which the node
/// refuses.
pub fn literal(value: &ArkivValue) -> String {
    match value {
        ArkivValue::Bool(b) => b.to_string(),
        ArkivValue::I32(v) => format!("i32({v})"),
        ArkivValue::U64(v) => format!("u64({v})"),
        ArkivValue::U256(v) => format!("u256({v})"),
        ArkivValue::Dec(v) => format!("dec({})", format_dec(*v)),
        ArkivValue::Str(s) => str_literal(s),
        ArkivValue::Addr(a) => format!("addr({})", a.to_checksum(None)),
        ArkivValue::Key(k) => format!("key({k})"),
        ArkivValue::Bytes32(k) => format!("bytes32({k})"),
        ArkivValue::Bytes(b) => format!("bytes(0x{})", hex::encode(b)),
    }
}

impl std::ops::Not for Expr {
    type Output = Expr;
    fn not(self) -> Expr {
        Expr::negate(self)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Cmp { attr, op, value } => {
                write!(f, "{attr} {} {}", op.symbol(), literal(value))
            }
            Expr::StartsWith { attr, prefix } => {
                write!(f, "{attr} STARTSWITH {}", str_literal(prefix))
            }
            Expr::Not(e) => {
                write!(f, "NOT ")?;
                e.write_child(f, 3)
            }
            Expr::And(list) | Expr::Or(list) if list.len() == 1 => write!(f, "{}", list[0]),
            Expr::And(list) | Expr::Or(list) => {
                let (sep, min) = if matches!(self, Expr::And(_)) {
                    (" AND ", 2)
                } else {
                    (" OR ", 1)
                };
                for (i, e) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(sep)?;
                    }
                    e.write_child(f, min)?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{address, U256};

    fn eqi(n: &str, v: i32) -> Expr {
        Expr::eq(n, ArkivValue::I32(v)).unwrap()
    }

    #[test]
    fn values_that_cannot_be_queried_are_typed() {
        assert_eq!(
            Expr::eq("a", ArkivValue::Bytes(vec![1])).unwrap_err(),
            QueryBuildError::BytesValue
        );
        let control = Expr::eq("a", ArkivValue::Str("a\u{7}".into())).unwrap_err();
        assert_eq!(
            control,
            QueryBuildError::InvalidValue(CodecError::ControlCharacter(7))
        );
        assert!(
            control.to_string().starts_with("invalid value: "),
            "{control}"
        );
    }

    #[test]
    fn parentheses_only_where_needed() {
        let a = || eqi("a", 1);
        let b = || eqi("b", 2);
        let c = || eqi("c", 3);
        let e = Expr::and(vec![a(), Expr::or(vec![b(), c()]).unwrap()]).unwrap();
        assert_eq!(e.to_string(), "a = i32(1) AND (b = i32(2) OR c = i32(3))");
        let e = Expr::or(vec![a(), Expr::and(vec![b(), c()]).unwrap()]).unwrap();
        assert_eq!(e.to_string(), "a = i32(1) OR b = i32(2) AND c = i32(3)");
        let e = Expr::negate(Expr::and(vec![a(), b()]).unwrap());
        assert_eq!(e.to_string(), "NOT (a = i32(1) AND b = i32(2))");
        assert_eq!(
            Expr::negate(Expr::negate(a())).to_string(),
            "NOT NOT a = i32(1)"
        );
        let single = Expr::and(vec![Expr::or(vec![a(), b()]).unwrap()]).unwrap();
        assert_eq!(
            Expr::negate(single).to_string(),
            "NOT (a = i32(1) OR b = i32(2))"
        );
    }

    #[test]
    fn literals_and_escaping() {
        let o = address!("d8da6bf26964af9d7eed9e03e53415d37aa96045");
        assert_eq!(
            Expr::owner_is(o).to_string(),
            "$owner = addr(0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045)"
        );
        let e = Expr::eq("x", ArkivValue::Str("a' OR '1'='1".into())).unwrap();
        assert_eq!(e.to_string(), "x = str('a'' OR ''1''=''1')");
        assert_eq!(
            Expr::eq("b", ArkivValue::U256(U256::from(10)))
                .unwrap()
                .to_string(),
            "b = u256(10)"
        );
        assert_eq!(
            Expr::created_at(CmpOp::Ge, 5).to_string(),
            "$createdAt >= u64(5)"
        );
    }

    #[test]
    fn refusals() {
        assert!(Expr::gt("a", ArkivValue::Str("a".into())).is_err());
        assert_eq!(
            Expr::eq("$owner", ArkivValue::Str("0x".into())),
            Err(QueryBuildError::TypeMismatch {
                name: "$owner",
                expected: "addr",
                got: "str",
            })
        );
        assert_eq!(
            Expr::eq("$createdAt", ArkivValue::I32(1)),
            Err(QueryBuildError::TypeMismatch {
                name: "$createdAt",
                expected: "u64",
                got: "i32",
            })
        );
        assert!(Expr::eq("$updatedAt", ArkivValue::U64(1)).is_err());
        assert!(Expr::eq("not", ArkivValue::I32(1)).is_err());
        assert!(Expr::eq("a--b", ArkivValue::I32(1)).is_err());
        assert!(Expr::eq("x", ArkivValue::Str("a\nb".into())).is_err());
        assert!(Expr::starts_with("level", ArkivValue::I32(1)).is_err());
        assert!(Expr::and(vec![]).is_err());
    }
}
