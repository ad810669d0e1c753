//! Parser of the typed query language: precedence NOT > AND > OR, left-associative.

use std::fmt;

use super::error::QueryError;
use super::lexer::{tokenize, Tok, Token, TYPE_TAGS};
use super::literal::{
    bool_lit, i32_lit, parse_addr, parse_i32, parse_tagged, parse_word_hex, Literal,
};
use crate::value::{is_ordered, type_id, type_name};

/// Maximum query text size in bytes.
pub const MAX_QUERY_BYTES: usize = 8192;
/// Maximum number of predicates.
pub const MAX_PREDICATES: usize = 64;
/// Maximum nesting depth (each `NOT` and each parenthesis counts).
pub const MAX_DEPTH: usize = 32;

/// The attribute a predicate tests.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AttrRef {
    /// A user attribute (case-sensitive name).
    User(String),
    /// `$key`.
    Key,
    /// `$owner`.
    Owner,
    /// `$creator`.
    Creator,
    /// `$expiresAt`.
    ExpiresAt,
    /// `$createdAt`.
    CreatedAt,
    /// `$contentType`.
    ContentType,
}

impl AttrRef {
    fn system_type(&self) -> Option<u8> {
        match self {
            AttrRef::User(_) => None,
            AttrRef::Key => Some(type_id::KEY),
            AttrRef::Owner | AttrRef::Creator => Some(type_id::ADDR),
            AttrRef::ExpiresAt | AttrRef::CreatedAt => Some(type_id::U64),
            AttrRef::ContentType => Some(type_id::STR),
        }
    }
}

impl fmt::Display for AttrRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrRef::User(n) => f.write_str(n),
            AttrRef::Key => f.write_str("$key"),
            AttrRef::Owner => f.write_str("$owner"),
            AttrRef::Creator => f.write_str("$creator"),
            AttrRef::ExpiresAt => f.write_str("$expiresAt"),
            AttrRef::CreatedAt => f.write_str("$createdAt"),
            AttrRef::ContentType => f.write_str("$contentType"),
        }
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `=` (type and value).
    Eq,
    /// `<`.
    Lt,
    /// `<=`.
    Lte,
    /// `>`.
    Gt,
    /// `>=`.
    Gte,
    /// `STARTSWITH` (str byte prefix).
    StartsWith,
}

impl CmpOp {
    fn text(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Lt => "<",
            CmpOp::Lte => "<=",
            CmpOp::Gt => ">",
            CmpOp::Gte => ">=",
            CmpOp::StartsWith => "STARTSWITH",
        }
    }
}

/// One predicate.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Predicate {
    /// The attribute.
    pub attr: AttrRef,
    /// The operator.
    pub op: CmpOp,
    /// The typed value.
    pub value: Literal,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expr {
    /// `*`: every live entity.
    All,
    /// A predicate.
    Pred(Predicate),
    /// Conjunction.
    And(Box<Expr>, Box<Expr>),
    /// Disjunction.
    Or(Box<Expr>, Box<Expr>),
    /// Complement over all live entities.
    Not(Box<Expr>),
}

impl Expr {
    /// Number of predicates in the expression.
    pub fn predicate_count(&self) -> usize {
        match self {
            Expr::All => 0,
            Expr::Pred(_) => 1,
            Expr::And(a, b) | Expr::Or(a, b) => a.predicate_count() + b.predicate_count(),
            Expr::Not(a) => a.predicate_count(),
        }
    }
}

fn write_child(f: &mut fmt::Formatter<'_>, e: &Expr, paren: bool) -> fmt::Result {
    if paren {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

/// Canonical query text (typed literals, single spaces, parentheses only where needed).
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::All => f.write_str("*"),
            Expr::Pred(p) => write!(f, "{} {} {}", p.attr, p.op.text(), p.value.render()),
            Expr::And(a, b) => {
                write_child(f, a, matches!(**a, Expr::Or(..)))?;
                f.write_str(" AND ")?;
                write_child(f, b, matches!(**b, Expr::Or(..) | Expr::And(..)))
            }
            Expr::Or(a, b) => {
                write_child(f, a, matches!(**a, Expr::And(..)))?;
                f.write_str(" OR ")?;
                write_child(f, b, matches!(**b, Expr::Or(..) | Expr::And(..)))
            }
            Expr::Not(a) => {
                f.write_str("NOT ")?;
                write_child(f, a, matches!(**a, Expr::Or(..) | Expr::And(..)))
            }
        }
    }
}

struct Parser {
    toks: Vec<Token>,
    i: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.i)
    }
    fn pos(&self) -> usize {
        self.peek().map_or(self.end, |t| t.pos)
    }
    fn bump(&mut self) -> Option<Token> {
        let t = self.toks.get(self.i).cloned();
        self.i += 1;
        t
    }

    fn or(&mut self, depth: usize) -> Result<Expr, QueryError> {
        let mut left = self.and(depth)?;
        while matches!(self.peek(), Some(Token { tok: Tok::Or, .. })) {
            self.bump();
            let right = self.and(depth)?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self, depth: usize) -> Result<Expr, QueryError> {
        let mut left = self.unary(depth)?;
        while matches!(self.peek(), Some(Token { tok: Tok::And, .. })) {
            self.bump();
            let right = self.unary(depth)?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self, depth: usize) -> Result<Expr, QueryError> {
        if let Some(Token { tok: Tok::Not, pos }) = self.peek().cloned() {
            if depth + 1 > MAX_DEPTH {
                return Err(QueryError::limit(
                    Some(pos),
                    format!("query nested deeper than {MAX_DEPTH} levels"),
                ));
            }
            self.bump();
            return Ok(Expr::Not(Box::new(self.unary(depth + 1)?)));
        }
        self.primary(depth)
    }

    fn primary(&mut self, depth: usize) -> Result<Expr, QueryError> {
        if let Some(Token {
            tok: Tok::LParen,
            pos,
        }) = self.peek().cloned()
        {
            if depth + 1 > MAX_DEPTH {
                return Err(QueryError::limit(
                    Some(pos),
                    format!("query nested deeper than {MAX_DEPTH} levels"),
                ));
            }
            self.bump();
            let e = self.or(depth + 1)?;
            match self.bump() {
                Some(Token {
                    tok: Tok::RParen, ..
                }) => Ok(e),
                _ => Err(QueryError::syntax(
                    self.toks
                        .get(self.i - 1)
                        .map_or(self.end, |t| t.pos)
                        .min(self.end),
                    "expected ')'",
                )),
            }
        } else {
            self.predicate().map(Expr::Pred)
        }
    }

    fn attr(&mut self) -> Result<AttrRef, QueryError> {
        let pos = self.pos();
        let Some(t) = self.bump() else {
            return Err(QueryError::syntax(
                pos,
                "expected an attribute name, found the end of the query",
            ));
        };
        match t.tok {
            Tok::Name(n) => {
                let lower = n.to_ascii_lowercase();
                if TYPE_TAGS.contains(&lower.as_str()) {
                    return Err(QueryError::syntax(
                        pos,
                        format!("{n} is a type name, not an attribute name"),
                    ));
                }
                if n.len() > 32 {
                    return Err(QueryError::syntax(
                        pos,
                        format!("attribute name {n} is longer than 32 bytes"),
                    ));
                }
                Ok(AttrRef::User(n))
            }
            Tok::SysName(n) => match n.as_str() {
                "key" => Ok(AttrRef::Key),
                "owner" => Ok(AttrRef::Owner),
                "creator" => Ok(AttrRef::Creator),
                "expiresAt" => Ok(AttrRef::ExpiresAt),
                "createdAt" => Ok(AttrRef::CreatedAt),
                "contentType" => Ok(AttrRef::ContentType),
                "updatedAt" | "creationFlags" => Err(QueryError::type_error(
                    pos,
                    format!("${n} is available in projections only (select), not in filters"),
                )),
                "payload" => Err(QueryError::type_error(
                    pos,
                    "$payload has no index and cannot be filtered",
                )),
                "expiration" => Err(QueryError::type_error(
                    pos,
                    "unknown system attribute $expiration; use $expiresAt = u64(…)",
                )),
                "createdAtBlock" => Err(QueryError::type_error(
                    pos,
                    "unknown system attribute $createdAtBlock; use $createdAt = u64(…)",
                )),
                "lastModifiedAtBlock" => Err(QueryError::type_error(
                    pos,
                    "unknown system attribute $lastModifiedAtBlock; $updatedAt is projection-only",
                )),
                "all" => Err(QueryError::type_error(
                    pos,
                    "$all is gone; use * to match every entity",
                )),
                _ => Err(QueryError::type_error(
                    pos,
                    format!("unknown system attribute ${n}"),
                )),
            },
            Tok::Exists => Err(QueryError::type_error(
                pos,
                "presence tests (EXISTS) are not supported",
            )),
            Tok::TypeOf => Err(QueryError::type_error(pos, "TYPEOF is not supported")),
            Tok::Star => Err(QueryError::syntax(
                pos,
                "* cannot be combined with other predicates",
            )),
            other => Err(QueryError::syntax(
                pos,
                format!("expected an attribute name, found {other:?}"),
            )),
        }
    }

    fn predicate(&mut self) -> Result<Predicate, QueryError> {
        let attr = self.attr()?;
        let op_pos = self.pos();
        let op = match self.bump().map(|t| t.tok) {
            Some(Tok::Eq) => CmpOp::Eq,
            Some(Tok::Lt) => CmpOp::Lt,
            Some(Tok::Lte) => CmpOp::Lte,
            Some(Tok::Gt) => CmpOp::Gt,
            Some(Tok::Gte) => CmpOp::Gte,
            Some(Tok::StartsWith) => CmpOp::StartsWith,
            Some(Tok::Neq) => {
                return Err(QueryError::type_error(
                    op_pos,
                    "!= is not supported; write NOT (a = v)",
                ));
            }
            Some(other) => {
                return Err(QueryError::syntax(
                    op_pos,
                    format!("expected an operator after {attr}, found {other:?}"),
                ));
            }
            None => {
                return Err(QueryError::syntax(
                    op_pos,
                    format!("expected an operator after {attr}"),
                ))
            }
        };
        let vpos = self.pos();
        let sys = attr.system_type();
        let value = match self.bump().map(|t| t.tok) {
            Some(Tok::Tagged { tag, body }) => parse_tagged(&tag, &body, vpos)?,
            Some(Tok::True) => bool_lit(true),
            Some(Tok::False) => bool_lit(false),
            Some(Tok::Int(s)) => {
                if let Some(t) = sys {
                    return Err(QueryError::type_error(
                        vpos,
                        format!("{attr} needs a typed literal: write {}({s})", type_name(t)),
                    ));
                }
                i32_lit(parse_i32(&s, vpos, false)?)
            }
            Some(Tok::Str(s)) => match attr {
                AttrRef::Owner | AttrRef::Creator => {
                    super::literal::addr_lit(parse_addr(&s, vpos)?)
                }
                AttrRef::Key => Literal {
                    type_id: type_id::KEY,
                    bytes: parse_word_hex(&s, vpos, "key")?,
                },
                AttrRef::ContentType => {
                    parse_tagged("str", &format!("'{}'", s.replace('\'', "''")), vpos)?
                }
                _ => {
                    return Err(QueryError::type_error(
                        vpos,
                        format!("a quoted string needs its type: write str('{s}')"),
                    ));
                }
            },
            Some(other) => {
                return Err(QueryError::syntax(
                    vpos,
                    format!("expected a value, found {other:?}"),
                ))
            }
            None => {
                return Err(QueryError::syntax(
                    vpos,
                    "expected a value, found the end of the query",
                ))
            }
        };
        if let Some(t) = sys {
            if value.type_id != t {
                return Err(QueryError::type_error(
                    vpos,
                    format!(
                        "{attr} is {}, not {}",
                        type_name(t),
                        type_name(value.type_id)
                    ),
                ));
            }
        }
        match op {
            CmpOp::Eq => {}
            CmpOp::StartsWith => {
                if value.type_id != type_id::STR {
                    return Err(QueryError::type_error(
                        vpos,
                        format!(
                            "STARTSWITH needs a str value, not {}",
                            type_name(value.type_id)
                        ),
                    ));
                }
            }
            _ => {
                if !is_ordered(value.type_id) {
                    return Err(QueryError::type_error(
                        op_pos,
                        format!(
                            "there is no ordering on {} values",
                            type_name(value.type_id)
                        ),
                    ));
                }
            }
        }
        Ok(Predicate { attr, op, value })
    }
}

/// Parse and check a query text.
pub fn parse(src: &str) -> Result<Expr, QueryError> {
    if src.len() > MAX_QUERY_BYTES {
        return Err(QueryError::limit(
            None,
            format!(
                "query is {} bytes; the limit is {MAX_QUERY_BYTES}",
                src.len()
            ),
        ));
    }
    let toks = tokenize(src)?;
    let mut p = Parser {
        toks,
        i: 0,
        end: src.len(),
    };
    let Some(first) = p.peek().cloned() else {
        return Err(QueryError::syntax(
            0,
            "empty query; use * to match every entity",
        ));
    };
    if first.tok == Tok::Star {
        p.bump();
        if let Some(t) = p.peek() {
            return Err(QueryError::syntax(
                t.pos,
                "* cannot be combined with other predicates",
            ));
        }
        return Ok(Expr::All);
    }
    let e = p.or(0)?;
    if let Some(t) = p.peek() {
        return Err(QueryError::syntax(t.pos, format!("unexpected {:?}", t.tok)));
    }
    let n = e.predicate_count();
    if n > MAX_PREDICATES {
        return Err(QueryError::limit(
            None,
            format!("query has {n} predicates; the limit is {MAX_PREDICATES}"),
        ));
    }
    Ok(e)
}
