//! Tokenizer of the typed Arkiv query language.

use super::error::QueryError;

/// The type tags that may prefix a parenthesised literal body.
pub const TYPE_TAGS: [&str; 10] = [
    "bool", "i32", "u64", "u256", "dec", "bytes32", "bytes", "str", "addr", "key",
];

/// One token kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A user attribute name.
    Name(String),
    /// A system attribute name (without the `$`).
    SysName(String),
    /// `tag(body)`; the body is captured raw.
    Tagged {
        /// The type tag, lower-cased.
        tag: String,
        /// The raw body between the parentheses.
        body: String,
    },
    /// A single-quoted string (quotes removed, `''` unescaped).
    Str(String),
    /// A bare integer (decimal, optional leading `-`).
    Int(String),
    /// `TRUE`.
    True,
    /// `FALSE`.
    False,
    /// `AND`.
    And,
    /// `OR`.
    Or,
    /// `NOT`.
    Not,
    /// `STARTSWITH`.
    StartsWith,
    /// `EXISTS` (reserved).
    Exists,
    /// `TYPEOF` (reserved).
    TypeOf,
    /// `=`.
    Eq,
    /// `!=` (lexes, rejected by the parser).
    Neq,
    /// `<`.
    Lt,
    /// `<=`.
    Lte,
    /// `>`.
    Gt,
    /// `>=`.
    Gte,
    /// `(`.
    LParen,
    /// `)`.
    RParen,
    /// `*`.
    Star,
}

/// A token with its byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Byte offset of its first character.
    pub pos: usize,
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'-'
}

/// Split a query text into tokens. All lexer errors are syntax errors (-32001).
pub fn tokenize(src: &str) -> Result<Vec<Token>, QueryError> {
    let b = src.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        let simple = |t: Tok, n: usize, i: &mut usize, out: &mut Vec<Token>| {
            out.push(Token { tok: t, pos: *i });
            *i += n;
        };
        match c {
            b'=' => simple(Tok::Eq, 1, &mut i, &mut out),
            b'(' => simple(Tok::LParen, 1, &mut i, &mut out),
            b')' => simple(Tok::RParen, 1, &mut i, &mut out),
            b'*' => simple(Tok::Star, 1, &mut i, &mut out),
            b'<' if b.get(i + 1) == Some(&b'=') => simple(Tok::Lte, 2, &mut i, &mut out),
            b'<' => simple(Tok::Lt, 1, &mut i, &mut out),
            b'>' if b.get(i + 1) == Some(&b'=') => simple(Tok::Gte, 2, &mut i, &mut out),
            b'>' => simple(Tok::Gt, 1, &mut i, &mut out),
            b'!' if b.get(i + 1) == Some(&b'=') => simple(Tok::Neq, 2, &mut i, &mut out),
            b'!' => {
                return Err(QueryError::syntax(
                    i,
                    "unexpected '!' — negation is written NOT",
                ));
            }
            b'&' | b'|' | b'~' => {
                return Err(QueryError::syntax(
                    i,
                    "symbol operators (&&, ||, ~) are not supported; write AND, OR, NOT or STARTSWITH",
                ));
            }
            b'\'' => {
                let (s, next) = lex_quoted(src, i)?;
                out.push(Token {
                    tok: Tok::Str(s),
                    pos: start,
                });
                i = next;
            }
            b'$' => {
                i += 1;
                if i >= b.len() || !is_name_start(b[i]) {
                    return Err(QueryError::syntax(
                        start,
                        "expected a system attribute name after '$'",
                    ));
                }
                let n0 = i;
                while i < b.len()
                    && is_name_char(b[i])
                    && !(b[i] == b'-' && b.get(i + 1) == Some(&b'-'))
                {
                    i += 1;
                }
                out.push(Token {
                    tok: Tok::SysName(src[n0..i].to_string()),
                    pos: start,
                });
            }
            b'0' if matches!(b.get(i + 1), Some(b'x') | Some(b'X')) => {
                return Err(QueryError::syntax(
                    i,
                    "a bare 0x… value must carry its type tag: write addr(0x…), key(0x…), bytes32(0x…) or u256(0x…)",
                ));
            }
            b'-' | b'0'..=b'9' => {
                i += 1;
                if c == b'-' && !b.get(i).is_some_and(|d| d.is_ascii_digit()) {
                    return Err(QueryError::syntax(start, "expected a digit after '-'"));
                }
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                if i < b.len() && (is_name_start(b[i])) {
                    return Err(QueryError::syntax(
                        start,
                        "a name may not start with a digit",
                    ));
                }
                out.push(Token {
                    tok: Tok::Int(src[start..i].to_string()),
                    pos: start,
                });
            }
            c if is_name_start(c) => {
                while i < b.len()
                    && is_name_char(b[i])
                    && !(b[i] == b'-' && b.get(i + 1) == Some(&b'-'))
                {
                    i += 1;
                }
                let word = &src[start..i];
                let lower = word.to_ascii_lowercase();
                // A type tag followed (after optional whitespace) by '(' starts a typed literal.
                let mut j = i;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if TYPE_TAGS.contains(&lower.as_str()) && b.get(j) == Some(&b'(') {
                    let (body, next) = lex_tag_body(src, j)?;
                    out.push(Token {
                        tok: Tok::Tagged { tag: lower, body },
                        pos: start,
                    });
                    i = next;
                    continue;
                }
                let tok = match lower.as_str() {
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    "true" => Tok::True,
                    "false" => Tok::False,
                    "startswith" => Tok::StartsWith,
                    "exists" => Tok::Exists,
                    "typeof" => Tok::TypeOf,
                    _ => Tok::Name(word.to_string()),
                };
                out.push(Token { tok, pos: start });
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(QueryError::syntax(
                    i,
                    format!("unexpected character {ch:?}"),
                ));
            }
        }
    }
    Ok(out)
}

/// Lex a single-quoted string starting at `start` (which holds the quote).
fn lex_quoted(src: &str, start: usize) -> Result<(String, usize), QueryError> {
    let b = src.as_bytes();
    let mut i = start + 1;
    let mut s = Vec::new();
    loop {
        match b.get(i) {
            None => {
                return Err(QueryError::syntax(
                    start,
                    "unterminated string: missing closing quote",
                ))
            }
            Some(b'\'') if b.get(i + 1) == Some(&b'\'') => {
                s.push(b'\'');
                i += 2;
            }
            Some(b'\'') => return Ok((String::from_utf8_lossy(&s).into_owned(), i + 1)),
            Some(&c) => {
                s.push(c);
                i += 1;
            }
        }
    }
}

/// Lex the raw body of `tag(...)`; `open` is the index of '('. Quotes protect ')'.
fn lex_tag_body(src: &str, open: usize) -> Result<(String, usize), QueryError> {
    let b = src.as_bytes();
    let mut i = open + 1;
    let mut in_quote = false;
    while i < b.len() {
        let c = b[i];
        if in_quote {
            if c == b'\'' {
                if b.get(i + 1) == Some(&b'\'') {
                    i += 2;
                    continue;
                }
                in_quote = false;
            }
        } else if c == b'\'' {
            in_quote = true;
        } else if c == b')' {
            return Ok((src[open + 1..i].to_string(), i + 1));
        }
        i += 1;
    }
    if in_quote {
        Err(QueryError::syntax(
            open,
            "unterminated string inside a typed literal",
        ))
    } else {
        Err(QueryError::syntax(
            open,
            "typed literal is missing its closing ')'",
        ))
    }
}
