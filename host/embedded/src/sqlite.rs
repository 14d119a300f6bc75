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
    expires_at_ms INTEGER,
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
CREATE TABLE IF NOT EXISTS queue_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    payload BLOB NOT NULL,
    deliveries INTEGER NOT NULL,
    leased_until_ms INTEGER,
    consumer TEXT
);
CREATE INDEX IF NOT EXISTS queue_messages_queue ON queue_messages (queue, id);
CREATE TABLE IF NOT EXISTS queue_counters (
    queue TEXT PRIMARY KEY,
    acknowledged INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
";

/// Brings a file written by an older build up to the current schema. Each step checks before it changes, so it
/// is idempotent and safe when two processes open the same file.
fn migrate(connection: &Connection) -> Result<(), rusqlite::Error> {
    // Expiring documents (documents port `upsert_expiring` / `sweep_expired`): NULL means "never expires".
    let has_expiry: bool =
        connection.prepare("SELECT 1 FROM pragma_table_info('documents') WHERE name = 'expires_at_ms'")?.exists([])?;
    if !has_expiry {
        match connection.execute_batch("ALTER TABLE documents ADD COLUMN expires_at_ms INTEGER") {
            Ok(()) => {}
            // Another process added it between our check and our ALTER.
            Err(error) if error.to_string().contains("duplicate column") => {}
            Err(error) => return Err(error),
        }
    }
    connection.execute_batch(
        "CREATE INDEX IF NOT EXISTS documents_expiry ON documents (collection, expires_at_ms)
         WHERE expires_at_ms IS NOT NULL",
    )
}

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
        migrate(&connection).map_err(backend_error)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A file created before documents could expire gains the column on open, keeps its rows, and opening it
    /// again changes nothing.
    #[test]
    fn old_files_gain_the_expiry_column() {
        let dir = std::env::temp_dir().join(format!(
            "flowhost-migrate-{}-{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.db");
        {
            let old = Connection::open(&path).unwrap();
            old.execute_batch(
                "CREATE TABLE documents (collection TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL,
                 PRIMARY KEY (collection, id)) WITHOUT ROWID;
                 INSERT INTO documents VALUES ('rules', 'r1', '{\"a\":1}');",
            )
            .unwrap();
        }
        for _ in 0..2 {
            let db = Db::open(&path).unwrap();
            let connection = db.0.lock().unwrap();
            let (body, expiry): (String, Option<i64>) = connection
                .query_row("SELECT body, expires_at_ms FROM documents WHERE id = 'r1'", [], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .unwrap();
            assert_eq!((body.as_str(), expiry), ("{\"a\":1}", None));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
