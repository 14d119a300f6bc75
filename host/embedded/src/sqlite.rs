//! The shared SQLite connection: WAL mode, a busy timeout so two processes can share the file, and the
//! schema. Calls run on tokio's blocking pool so async callers never block a runtime thread.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowhost_core::ports::PortError;
use rusqlite::Connection;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS documents (
    collection TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (collection, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY,
    partitions INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    key BLOB,
    value BLOB NOT NULL,
    headers BLOB,
    timestamp_ms INTEGER NOT NULL,
    PRIMARY KEY (topic, partition, offset)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_offsets (
    grp TEXT NOT NULL,
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    PRIMARY KEY (grp, topic, partition)
) WITHOUT ROWID;
";

#[derive(Clone)]
pub(crate) struct Db(Arc<Mutex<Connection>>);

pub(crate) fn backend_error(error: rusqlite::Error) -> PortError {
    match error {
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) =>
        {
            PortError::Unavailable(format!("embedded store busy: {error}"))
        }
        other => PortError::Backend(format!("embedded store: {other}")),
    }
}

impl Db {
    pub(crate) fn open(path: &Path) -> Result<Db, PortError> {
        let connection =
            Connection::open(path).map_err(|e| PortError::Backend(format!("cannot open {}: {e}", path.display())))?;
        connection.busy_timeout(Duration::from_secs(10)).map_err(backend_error)?;
        connection.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;").map_err(backend_error)?;
        connection.execute_batch(SCHEMA).map_err(backend_error)?;
        Ok(Db(Arc::new(Mutex::new(connection))))
    }

    /// Runs `f` with the connection on the blocking pool.
    pub(crate) async fn call<T, F>(&self, f: F) -> Result<T, PortError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    {
        let connection = self.0.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            f(&mut guard).map_err(backend_error)
        })
        .await
        .map_err(|e| PortError::Backend(format!("embedded store task failed: {e}")))?
    }
}
