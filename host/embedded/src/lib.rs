//! The embedded defaults of every port, so `flowhost serve` needs no server: documents, topics and the work
//! queue in one SQLite file under the data directory (other logical document databases in `documents-<name>.db`
//! beside it) (durable across restarts, shared safely with the `flowhost events`
//! commands of another process), subjects and cache in process memory.

mod cache;
mod documents;
mod error;
mod group;
mod queue;
mod readers;
mod sqlite;
mod subjects;
mod topics;

use std::path::Path;
use std::sync::Arc;

use flowhost_core::ports::{DocumentStore, PortError, Ports, Topics, WorkQueue};
use flowhost_core::Clock;

pub use cache::LocalCache;
pub use subjects::LocalSubjects;
pub use topics::Retention;

use documents::{Databases, SqliteDocuments};
use queue::SqliteQueue;
use sqlite::Db;
use topics::SqliteTopics;

/// The SQLite file `flowhost.db` in the data directory, serving the documents, topics and work queue ports.
#[derive(Clone)]
pub struct EmbeddedStore {
    documents: Arc<SqliteDocuments>,
    topics: Arc<SqliteTopics>,
    queue: Arc<SqliteQueue>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore").finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// Opens (creating when needed) the store in `dir`. `partitions` is the partition count of topics the
    /// log creates on first use.
    pub fn open(dir: &Path, partitions: i32, clock: Arc<dyn Clock>) -> Result<EmbeddedStore, PortError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| PortError::Invalid(format!("cannot create data directory {}: {e}", dir.display())))?;
        let db = Db::open(&dir.join("flowhost.db"))?;
        Ok(EmbeddedStore {
            documents: Arc::new(SqliteDocuments::new(db.clone(), Databases::new(dir.to_path_buf()))),
            queue: Arc::new(SqliteQueue::new(db.clone(), clock.clone())),
            topics: Arc::new(SqliteTopics::new(db, partitions, clock)),
        })
    }

    /// Every port embedded: this store's documents, log and queue, in-process subjects and a cache timed by
    /// `clock` (the one the store was opened with). For tests and tools that need a whole `Ports` without a
    /// server.
    pub fn ports(&self, clock: Arc<dyn Clock>) -> Ports {
        Ports {
            documents: self.documents(),
            topics: self.topics(),
            subjects: Arc::new(LocalSubjects::new()),
            cache: Arc::new(LocalCache::new(clock.clone())),
            queue: self.queue(),
            clock,
            signing: flowhost_core::signing::ServiceSigning::default(),
        }
    }

    pub fn documents(&self) -> Arc<dyn DocumentStore> {
        self.documents.clone()
    }

    /// Deletes the log records `retention` no longer keeps (see [`Retention`]); returns how many. The caller
    /// runs it periodically.
    pub async fn apply_topic_retention(&self, retention: Retention) -> Result<u64, PortError> {
        self.topics.apply_retention(retention).await
    }

    pub fn topics(&self) -> Arc<dyn Topics> {
        self.topics.clone()
    }

    pub fn queue(&self) -> Arc<dyn WorkQueue> {
        self.queue.clone()
    }
}
