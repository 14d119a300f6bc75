//! How a call out of the executor fails: a [`CallError`] carries the outcome class the executor acts on (retry,
//! skip forward, dead-letter) and what the callee said. Service actions and data sources
//! ([`crate::execute::ServiceCalls`]) and node kinds ([`crate::nodes`]) answer with it.

use flowhost_runtime::Outcome;

/// A failed call to a service: its outcome class and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub outcome: Outcome,
    pub message: String,
}

impl CallError {
    pub fn retryable(message: impl Into<String>) -> CallError {
        CallError { outcome: Outcome::Retryable, message: message.into() }
    }

    pub fn permanent(message: impl Into<String>) -> CallError {
        CallError { outcome: Outcome::Permanent, message: message.into() }
    }
}
