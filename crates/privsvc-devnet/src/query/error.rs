//! Query errors and their JSON-RPC codes.

/// JSON-RPC code of a syntax error.
pub const CODE_SYNTAX: i64 = -32001;
/// JSON-RPC code of a type error or unsupported construct.
pub const CODE_TYPE: i64 = -32002;
/// JSON-RPC code of an invalid literal.
pub const CODE_LITERAL: i64 = -32003;
/// JSON-RPC code of an exceeded limit (text size, predicates, depth).
pub const CODE_LIMIT: i64 = -32004;
/// JSON-RPC code of a malformed or mismatched cursor.
pub const CODE_CURSOR: i64 = -32005;
/// JSON-RPC code of an unavailable block.
pub const CODE_BLOCK: i64 = -32006;
/// JSON-RPC code of invalid parameters.
pub const CODE_PARAMS: i64 = -32602;

/// The kind of a query error (maps one-to-one to a JSON-RPC code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryErrorKind {
    /// -32001.
    Syntax,
    /// -32002.
    Type,
    /// -32003.
    Literal,
    /// -32004.
    Limit,
}

impl QueryErrorKind {
    /// The JSON-RPC error code.
    pub fn code(self) -> i64 {
        match self {
            Self::Syntax => CODE_SYNTAX,
            Self::Type => CODE_TYPE,
            Self::Literal => CODE_LITERAL,
            Self::Limit => CODE_LIMIT,
        }
    }
}

/// An error in a query text, with the byte position it refers to when known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct QueryError {
    /// What went wrong.
    pub kind: QueryErrorKind,
    /// Human-readable explanation.
    pub message: String,
    /// Byte offset in the query text.
    pub position: Option<usize>,
}

impl QueryError {
    /// A syntax error at `pos`.
    pub fn syntax(pos: usize, message: impl Into<String>) -> Self {
        Self {
            kind: QueryErrorKind::Syntax,
            message: message.into(),
            position: Some(pos),
        }
    }
    /// A type error at `pos`.
    pub fn type_error(pos: usize, message: impl Into<String>) -> Self {
        Self {
            kind: QueryErrorKind::Type,
            message: message.into(),
            position: Some(pos),
        }
    }
    /// A literal error at `pos`.
    pub fn literal(pos: usize, message: impl Into<String>) -> Self {
        Self {
            kind: QueryErrorKind::Literal,
            message: message.into(),
            position: Some(pos),
        }
    }
    /// A limit error.
    pub fn limit(position: Option<usize>, message: impl Into<String>) -> Self {
        Self {
            kind: QueryErrorKind::Limit,
            message: message.into(),
            position,
        }
    }
    /// The JSON-RPC code.
    pub fn code(&self) -> i64 {
        self.kind.code()
    }
}
