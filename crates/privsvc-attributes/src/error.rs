//! The attribute error type.

use crate::json::StrictJsonError;
use crate::MAX_ATTRIBUTES;

/// Why a set of attributes was refused. Messages name the attribute and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttributeError {
    /// One attribute's name or value is invalid.
    #[error("attribute {name:?}: {reason}")]
    Invalid {
        /// The attribute name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// More attributes than a record can hold.
    #[error(
        "{count} attributes given, at most {MAX_ATTRIBUTES} per record (project and tag \
         included): an Arkiv create holds 32 cells and two are $payload and $contentType"
    )]
    TooMany {
        /// How many attributes there would be.
        count: usize,
    },
    /// The wire form is not a JSON object.
    #[error("attributes must be a JSON object mapping each name to {{\"type\", \"value\"}}, got {found}")]
    NotAnObject {
        /// The JSON kind found instead.
        found: &'static str,
    },
    /// The wire text is not strict JSON.
    #[error("attributes: {0}")]
    Json(StrictJsonError),
}

impl AttributeError {
    pub(crate) fn invalid(name: &str, reason: impl Into<String>) -> Self {
        AttributeError::Invalid {
            name: name.to_owned(),
            reason: reason.into(),
        }
    }
}
