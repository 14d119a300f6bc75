//! The ports: one trait per kind of external system. Each has an embedded default (`flowhost-embedded`) and a
//! distributed backend (`flowhost-mongo`, `flowhost-kafka`, `flowhost-nats`, `flowhost-redis`); both pass the
//! same contract suite in `tests/`.

mod cache;
mod documents;
mod namespace;
mod queue;
mod secrets;
mod subjects;
mod topics;

use std::sync::Arc;

pub use cache::{Cache, Counter};
pub use documents::{check_path, Direction, DocumentStore, Filter, IndexSpec, Page, Query, Versioned, VersionedWrite};
pub use namespace::Namespace;
pub use queue::{check_queue_name, QueueMessage, QueueStats, WorkQueue};
pub use secrets::{SecretError, SecretStore};
pub use subjects::{subject_matches, subscribe_until_done, Headers, SubjectMessage, SubjectStream, Subjects, Wakeups};
pub use topics::{
    check_topic_name, merge_marks, merge_positions, next_positions, partition_for_key, ConsumerConfig, Header,
    KnownTopics, OutRecord, PartitionLag, Position, Record, StartFrom, TopicConsumer, Topics,
};

use crate::clock::Clock;

/// How a port call failed. `Unavailable`, `Timeout` and `NoResponders` are transient (retry with backoff); the
/// others are not.
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
    /// A request (subjects `request`) got no reply within its timeout; a responder may still answer later.
    #[error("timed out: {0}")]
    Timeout(String),
    /// A request (subjects `request`) found no subscriber to answer it.
    #[error("no responders: {0}")]
    NoResponders(String),
    /// A value did not encode as a document, or a stored document did not decode into its type
    /// ([`crate::stored`], which logs it where it happens).
    #[error("malformed document: {0}")]
    Malformed(String),
}

impl PortError {
    pub fn is_transient(&self) -> bool {
        matches!(self, PortError::Unavailable(_) | PortError::Timeout(_) | PortError::NoResponders(_))
    }
}

/// Every port the roles use, plus the clock: the one value handed to the engine and the API.
#[derive(Clone)]
pub struct Ports {
    pub documents: Arc<dyn DocumentStore>,
    pub topics: Arc<dyn Topics>,
    pub subjects: Arc<dyn Subjects>,
    pub cache: Arc<dyn Cache>,
    pub queue: Arc<dyn WorkQueue>,
    pub clock: Arc<dyn Clock>,
    /// The signing key of the service transports, carried beside the ports every transport user gets
    /// (`crate::signing`).
    pub signing: crate::signing::ServiceSigning,
}

impl std::fmt::Debug for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ports")
            .field("documents", &self.documents.backend())
            .field("topics", &self.topics.backend())
            .field("subjects", &self.subjects.backend())
            .field("cache", &self.cache.backend())
            .field("queue", &self.queue.backend())
            .finish()
    }
}
