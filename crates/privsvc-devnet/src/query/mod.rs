//! The typed Arkiv query language (SDK 0.8.1 / native node): lexer, literals, parser, cursors.

pub mod cursor;
pub mod error;
pub mod lexer;
pub mod literal;
pub mod parser;

pub use error::{QueryError, QueryErrorKind};
pub use literal::Literal;
pub use parser::{parse, AttrRef, CmpOp, Expr, Predicate};
