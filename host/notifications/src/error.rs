//! The domain's errors, without HTTP: [`FieldError`] (one problem with one field of an input) and
//! [`WebPushError`] (why a domain operation refused or failed). The push-api role maps them to its envelope and
//! status codes (`host/push-api/src/error.rs`).

use flowhost_core::ports::PortError;

/// One problem with one field of an input: `field` is a dotted path (`keys.p256dh`, `actions[0].label`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Why a web-push domain operation refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum WebPushError {
    /// The input does not validate; every problem, by field.
    #[error("invalid input: {}", .0.iter().map(FieldError::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<FieldError>),
    /// The record does not exist (or is outside the tenant scope asked for); names what, e.g. `template`.
    #[error("no such {0}")]
    NotFound(&'static str),
    /// A write lost a race it could not win by retrying; the caller may retry.
    #[error("{0}")]
    Conflict(String),
    /// The documents port failed.
    #[error(transparent)]
    Storage(#[from] PortError),
    /// A stored record does not parse, or a record does not serialize: a fault of ours, never the caller's.
    #[error("{0}")]
    Internal(String),
}
