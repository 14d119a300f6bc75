//! The ports: one trait per kind of external system. Each has an embedded default (`flowhost-embedded`) and a
//! distributed backend (`flowhost-mongo`, `flowhost-kafka`, `flowhost-nats`, `flowhost-redis`); both pass the
//! same contract suite in `tests/`.

mod cache;
mod documents;
mod subjects;
mod topics;

use std::sync::Arc;

pub use cache::Cache;
pub use documents::{check_path, Direction, DocumentStore, Filter, IndexSpec, Page, Query, Versioned};
pub use subjects::{subject_matches, SubjectMessage, SubjectStream, Subjects, Wakeups};
pub use topics::{
    check_topic_name, next_positions, partition_for_key, ConsumerConfig, Header, OutRecord, Position, Record,
    StartFrom, TopicConsumer, Topics,
};

use crate::clock::Clock;

/// How a port call failed. `Unavailable` is transient (retry with backoff); the others are not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// A document or resource with this identity already exists.
    #[error("already exists: {0}")]
    Conflict(String),
    /// The backend could not be reached or timed out; the same call may succeed later.
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    /// The request itself is wrong (a bad name, an unsupported value).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// Anything else the backend reported.
    #[error("backend error: {0}")]
    Backend(String),
}

impl PortError {
    pub fn is_transient(&self) -> bool {
        matches!(self, PortError::Unavailable(_))
    }
}

/// Every port the roles use, plus the clock: the one value handed to the engine and the API.
#[derive(Clone)]
pub struct Ports {
    pub documents: Arc<dyn DocumentStore>,
    pub topics: Arc<dyn Topics>,
    pub subjects: Arc<dyn Subjects>,
    pub cache: Arc<dyn Cache>,
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ports")
            .field("documents", &self.documents.backend())
            .field("topics", &self.topics.backend())
            .field("subjects", &self.subjects.backend())
            .field("cache", &self.cache.backend())
            .finish()
    }
}
