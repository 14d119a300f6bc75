//! The SQLite file: one writer connection and a pool of read-only reader connections, all in WAL mode with a
//! busy timeout so two processes can share the file, and the schema. WAL lets readers read the last committed
//! state while the writer writes, so reads go to the pool and never queue behind a write; writes (and reads that
//! must see their own uncommitted work) use the writer. Calls run on tokio's blocking pool so async callers
//! never block a runtime thread.
//!
//! Single-row writes go through the group writer instead ([`Db::write`]): one thread takes every write that is
//! waiting, runs each in a savepoint of one transaction and commits them together, so concurrent writers share
//! one begin, one write-ahead-log append and one commit instead of queueing on the writer lock for their own.

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowhost_core::ports::PortError;
use rusqlite::{Connection, OpenFlags};

use crate::error::backend_error;
use crate::group::{spawn_group_writer, GroupWrite, PendingStatement, PendingWrite, WriteHooks};
use crate::readers::{self, spawn_readers, Reads};

/// How many read-only connections (and reader threads) serve reads. A few cover small machines; each costs a
/// file handle, a page cache and a thread.
const READERS: usize = 4;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS documents (
    collection TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    expires_at_ms INTEGER,
    version INTEGER NOT NULL DEFAULT 1
);
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
    timestamp_ms INTEGER NOT NULL
);
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
    // Store-managed document versions (documents port `replace_if_version`): rows written before count as 1.
    let has_version: bool =
        connection.prepare("SELECT 1 FROM pragma_table_info('documents') WHERE name = 'version'")?.exists([])?;
    if !has_version {
        match connection.execute_batch("ALTER TABLE documents ADD COLUMN version INTEGER NOT NULL DEFAULT 1") {
            Ok(()) => {}
            Err(error) if error.to_string().contains("duplicate column") => {}
            Err(error) => return Err(error),
        }
    }
    rebuild_with_rowids(connection, &DOCUMENTS_ROWS)?;
    rebuild_with_rowids(connection, &LOG_RECORDS)?;
    connection.execute_batch(
        "CREATE UNIQUE INDEX IF NOT EXISTS documents_key ON documents (collection, id);
         CREATE INDEX IF NOT EXISTS documents_expiry ON documents (collection, expires_at_ms)
         WHERE expires_at_ms IS NOT NULL;
         CREATE UNIQUE INDEX IF NOT EXISTS records_position ON records (topic, partition, offset);",
    )
}

/// A table that older builds created `WITHOUT ROWID` and this one keeps as a rowid table (see
/// [`rebuild_with_rowids`]).
struct RowidTable {
    name: &'static str,
    /// The column definitions of the rowid table.
    columns: &'static str,
    /// The column names, in the order both tables share.
    names: &'static str,
}

/// Documents: bodies of a few KiB, keyed by `(collection, id)` through the `documents_key` index.
const DOCUMENTS_ROWS: RowidTable = RowidTable {
    name: "documents",
    columns: "collection TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, expires_at_ms INTEGER,
              version INTEGER NOT NULL DEFAULT 1",
    names: "collection, id, body, expires_at_ms, version",
};

/// Log records: values of a few hundred bytes each (a flow run's output and completion events), keyed by
/// `(topic, partition, offset)` through the `records_position` index. As a `WITHOUT ROWID` table every
/// interior page carried whole records: a transaction of 273 records of 500 bytes (a batch of flow runs'
/// outputs and completion events) took 3.2 ms at the median and 12 ms at the 90th percentile, against 2.6 and
/// 5 ms appended to a rowid table (SQLite with this file's settings, measured from a script). The log's single
/// writer waits on that, and every producer waits on the writer.
const LOG_RECORDS: RowidTable = RowidTable {
    name: "records",
    columns: "topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL, key BLOB,
              value BLOB NOT NULL, headers BLOB, timestamp_ms INTEGER NOT NULL",
    names: "topic, partition, offset, key, value, headers, timestamp_ms",
};

/// Moves the rows of `table` in a file written by an older build out of a `WITHOUT ROWID` table into a rowid
/// table keyed by a unique index, once; the table's other indexes are created again.
///
/// Why: a `WITHOUT ROWID` table is a B-tree whose interior pages carry whole rows, so with rows of hundreds of
/// bytes or a few KiB each interior page holds a handful of keys, the tree is deep, and every write descends
/// through pages read with a system call and dirties pages all over the file (a document with a random id) or
/// splits interior pages full of whole rows (a log record appended). In a rowid table a new row is appended at
/// the end and only its small key entry goes into the index (measured with `runs-throughput`: 8.1k -> 12.3k flow
/// runs/s when documents moved, each run one document). The copy runs in one immediate transaction, so a second
/// process opening the same file waits and then finds it done; it needs free disk space about the size of the
/// table.
fn rebuild_with_rowids(connection: &Connection, table: &RowidTable) -> Result<(), rusqlite::Error> {
    let RowidTable { name, columns, names } = table;
    let is_old = |c: &Connection| -> Result<bool, rusqlite::Error> {
        let sql: String =
            c.query_row("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1", [name], |r| r.get(0))?;
        Ok(sql.to_ascii_uppercase().contains("WITHOUT ROWID"))
    };
    if !is_old(connection)? {
        return Ok(());
    }
    connection.execute_batch("BEGIN IMMEDIATE")?;
    let rebuilt = (|| {
        if !is_old(connection)? {
            return Ok(0);
        }
        let indexes: Vec<String> = connection
            .prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?1 AND sql IS NOT NULL")?
            .query_map([name], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        connection.execute_batch(&format!(
            "CREATE TABLE {name}_rowid ({columns});
             INSERT INTO {name}_rowid ({names}) SELECT {names} FROM {name};
             DROP TABLE {name};
             ALTER TABLE {name}_rowid RENAME TO {name};"
        ))?;
        for index in &indexes {
            connection.execute_batch(index)?;
        }
        connection.query_row(&format!("SELECT COUNT(*) FROM {name}"), [], |row| row.get::<_, i64>(0))
    })();
    match rebuilt {
        Ok(rows) => {
            connection.execute_batch("COMMIT")?;
            if rows > 0 {
                tracing::info!(table = name, rows, "moved an embedded table into the rowid layout (once per file)");
            }
            Ok(())
        }
        Err(error) => {
            let _ = connection.execute_batch("ROLLBACK");
            Err(error)
        }
    }
}

/// Pages one [`vacuum_some`] gives back to the file system at most (16 MiB of 4 KiB pages), so one call never holds
/// the writer long; the next delete or sweep gives back more.
const VACUUM_PAGES: u32 = 4096;

/// Gives free pages back to the file system (`PRAGMA incremental_vacuum`): deletes (a retention sweep) leave
/// free pages, which shrink the file at the next checkpoint. A file created before incremental vacuum was turned
/// on (`auto_vacuum` other than 2) keeps its size; SQLite's `VACUUM`, run once with the process stopped,
/// converts it.
pub(crate) fn vacuum_some(connection: &Connection) -> Result<(), rusqlite::Error> {
    let free: u32 = connection.query_row("PRAGMA freelist_count", [], |row| row.get(0))?;
    if free > 0 {
        let mut statement = connection.prepare(&format!("PRAGMA incremental_vacuum({VACUUM_PAGES})"))?;
        let mut rows = statement.query([])?;
        while rows.next()?.is_some() {}
    }
    Ok(())
}

/// The writer connection and the reader pool of one file.
#[derive(Clone)]
pub(crate) struct Db {
    writer: Arc<Mutex<Connection>>,
    /// What the checkpointer and the writer share to start the write-ahead log again (see [`spawn_checkpointer`]).
    restart: Arc<LogRestart>,
    readers: Arc<[Mutex<Connection>]>,
    next_reader: Arc<AtomicUsize>,
    /// The reader threads' queue (see [`Db::read`]); the threads end when the last `Db` is dropped.
    reads: Reads,
    /// The group writer's queue (see [`Db::write`]); the thread ends when the last `Db` is dropped.
    group: std::sync::mpsc::Sender<Box<dyn GroupWrite>>,
}

/// A 16 MiB page cache per connection: with SQLite's default of 2 MiB every B-tree step of a growing store
/// reads its page with a system call (a third of the cost of writing a batch of flow runs, measured).
fn tune(connection: &Connection) -> Result<(), PortError> {
    connection.execute_batch("PRAGMA cache_size = -16384;").map_err(backend_error)
}

/// When the background checkpointer works: how often it copies the write-ahead log into the database file, and
/// how long the log may grow before it is started again from its beginning.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checkpointing {
    pub(crate) interval: Duration,
    pub(crate) restart_frames: i64,
}

impl Checkpointing {
    /// Every 250 ms; the log restarted once it holds 16,384 frames (about 64 MiB of 4 KiB pages).
    pub(crate) const DEFAULT: Checkpointing =
        Checkpointing { interval: Duration::from_millis(250), restart_frames: 16_384 };
}

/// How long a connection waits for a lock another one holds before it answers "busy".
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Passive checkpoints the checkpointer runs back to back to find a moment without writes, at most.
const CATCH_UP_ROUNDS: usize = 4;
/// How far past [`Checkpointing::restart_frames`] the log may grow before a restart waits for readers of older
/// snapshots however long they read.
const OVERGROWN_FACTOR: i64 = 4;
/// How long a restart waits for readers of older snapshots before it gives up for this time.
const RESTART_READER_WAIT: Duration = Duration::from_millis(5);

/// What the checkpointer and the writer share to start the write-ahead log again without stalling writes.
#[derive(Default)]
struct LogRestart {
    /// Writes the writer has finished.
    writes: AtomicU64,
    /// `writes + 1` when a passive checkpoint copied every frame of the first `writes` writes and none came while
    /// it ran: the log is all copied until the writer's next write. 0: no such moment marked.
    copied_through: AtomicU64,
    /// The checkpointer found no such moment: 1, the writer restarts the log before its next write anyway
    /// (copying what was written since the last passive checkpoint); 2, the same, waiting for readers of older
    /// snapshots as long as any lock waits (the log outgrew [`OVERGROWN_FACTOR`] times its threshold).
    due: AtomicU8,
}

/// The group writer restarts the log around its groups as `Db::with_writer` does around a write.
impl WriteHooks for LogRestart {
    /// Before a write, with the writer held: starts the log again when the checkpointer asked for it.
    fn before_write(&self, writer: &Connection) {
        let marked = self.copied_through.load(Ordering::Acquire);
        let wait = if marked != 0 && marked == self.writes.load(Ordering::Acquire) + 1 {
            RESTART_READER_WAIT
        } else {
            match self.due.load(Ordering::Acquire) {
                0 => return,
                1 => RESTART_READER_WAIT,
                _ => BUSY_TIMEOUT,
            }
        };
        self.copied_through.store(0, Ordering::Release);
        self.due.store(0, Ordering::Release);
        if let Err(error) = restart_log(writer, wait) {
            tracing::warn!(%error, "embedded store could not restart its write-ahead log; asked again later");
        }
    }

    /// After a write, with the writer held.
    fn after_write(&self) {
        self.writes.fetch_add(1, Ordering::AcqRel);
    }
}

/// A `RESTART` checkpoint on `connection` that waits at most `wait` for readers of older snapshots. A restart
/// that readers kept from happening is no error: the checkpointer asks again.
fn restart_log(connection: &Connection, wait: Duration) -> Result<(), rusqlite::Error> {
    connection.busy_timeout(wait)?;
    let restarted = connection.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()));
    connection.busy_timeout(BUSY_TIMEOUT)?;
    restarted
}

/// Checkpoints the WAL from a connection of its own every [`Checkpointing::interval`] until the writer is gone,
/// and keeps the log from growing without bound.
///
/// The writer runs with `wal_autocheckpoint = 0`: an automatic checkpoint runs inside the commit that crosses
/// its threshold, and its `fsync`s made every few commits several times slower (measured on a batch of flow
/// runs: 25 ms instead of 5). A passive checkpoint never blocks the writer or readers, but alone it never lets
/// the log start again: SQLite reuses the log from its beginning only when a write begins after a checkpoint that
/// copied every frame, and under a steady stream of writes that moment never comes. The log file then grew
/// without bound (hundreds of MiB in a one-minute benchmark), every frame appended allocated and zeroed a new file
/// block (a twentieth of a flow run's cost, measured), and every page read searched a longer log index.
///
/// So once the log holds [`Checkpointing::restart_frames`] frames, the checkpointer has it started again
/// ([`LogRestart`]):
/// 1. It runs passive checkpoints back to back until one runs with no write finishing meanwhile: that one copied
///    every frame, which stays true until the next write. It marks that, and the writer, before its next write
///    and only if it wrote nothing since, runs a `RESTART` checkpoint: nothing is left to copy or `fsync`, so it
///    takes microseconds, and the next write starts the log at its beginning again, overwriting blocks the file
///    already has.
/// 2. When writes keep landing during those checkpoints (a busy writer), it asks the writer to run the `RESTART`
///    before its next write anyway: that copies only what was written since the last of them, and writes wait
///    for its `fsync`s, a few milliseconds. (A `RESTART` with a whole interval's frames left to copy had stalled
///    writes for 20 to 90 ms every second at 10k flow runs/s, tripling the p99 latency of flow runs.)
///
/// Either restart waits at most [`RESTART_READER_WAIT`] for readers of older snapshots and else waits for the
/// next round; once the log holds [`OVERGROWN_FACTOR`] times the threshold (readers that never let go), the
/// writer's restart waits for them as long as any lock waits. The log stays at about
/// [`Checkpointing::restart_frames`] frames for good. (Asked of a separate connection, a `RESTART` waits for the
/// write lock by polling, and a busy writer takes it again first every time.)
fn spawn_checkpointer(
    path: &Path,
    writer: std::sync::Weak<Mutex<Connection>>,
    restart: Arc<LogRestart>,
    checkpointing: Checkpointing,
) -> Result<(), PortError> {
    let connection =
        Connection::open(path).map_err(|e| PortError::Backend(format!("cannot open {}: {e}", path.display())))?;
    connection.busy_timeout(BUSY_TIMEOUT).map_err(backend_error)?;
    // Frames in the log after a passive checkpoint; -1 when the file is not in WAL mode.
    let checkpoint = |connection: &Connection| -> Result<i64, rusqlite::Error> {
        connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| row.get(1))
    };
    let round = move || -> Result<(), rusqlite::Error> {
        let frames = checkpoint(&connection)?;
        if frames < checkpointing.restart_frames {
            return Ok(());
        }
        let overgrown = frames >= checkpointing.restart_frames.saturating_mul(OVERGROWN_FACTOR);
        for _ in 0..if overgrown { 0 } else { CATCH_UP_ROUNDS } {
            let writes = restart.writes.load(Ordering::Acquire);
            checkpoint(&connection)?;
            if restart.writes.load(Ordering::Acquire) == writes {
                restart.copied_through.store(writes + 1, Ordering::Release);
                return Ok(());
            }
        }
        restart.due.store(if overgrown { 2 } else { 1 }, Ordering::Release);
        Ok(())
    };
    std::thread::Builder::new()
        .name("flowhost-sqlite-checkpoint".into())
        .spawn(move || loop {
            std::thread::sleep(checkpointing.interval);
            if writer.upgrade().is_none() {
                return;
            }
            if let Err(error) = round() {
                tracing::warn!(%error, "embedded store checkpoint failed; retrying");
            }
        })
        .map_err(|e| PortError::Backend(format!("cannot start the checkpoint thread: {e}")))?;
    Ok(())
}

impl Db {
    pub(crate) fn open(path: &Path) -> Result<Db, PortError> {
        Db::open_checkpointing(path, Checkpointing::DEFAULT)
    }

    /// [`Db::open`] with the background checkpointer working as `checkpointing` says (tests shorten it).
    pub(crate) fn open_checkpointing(path: &Path, checkpointing: Checkpointing) -> Result<Db, PortError> {
        let connection =
            Connection::open(path).map_err(|e| PortError::Backend(format!("cannot open {}: {e}", path.display())))?;
        connection.busy_timeout(BUSY_TIMEOUT).map_err(backend_error)?;
        // Incremental vacuum takes effect only on a file with no tables yet (a new one): set before the schema.
        connection.execute_batch("PRAGMA auto_vacuum = INCREMENTAL;").map_err(backend_error)?;
        connection.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;").map_err(backend_error)?;
        tune(&connection)?;
        connection.execute_batch(SCHEMA).map_err(backend_error)?;
        migrate(&connection).map_err(backend_error)?;
        // Readers open after the schema exists; read-only and `query_only` so a bug cannot write through them.
        let readers = (0..READERS)
            .map(|_| {
                let reader = Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
                )
                .map_err(|e| PortError::Backend(format!("cannot open {} for reading: {e}", path.display())))?;
                reader.busy_timeout(BUSY_TIMEOUT).map_err(backend_error)?;
                reader.execute_batch("PRAGMA query_only = ON;").map_err(backend_error)?;
                tune(&reader)?;
                Ok(Mutex::new(reader))
            })
            .collect::<Result<Vec<_>, PortError>>()?;
        connection.execute_batch("PRAGMA wal_autocheckpoint = 0;").map_err(backend_error)?;
        let writer = Arc::new(Mutex::new(connection));
        let restart = Arc::new(LogRestart::default());
        spawn_checkpointer(path, Arc::downgrade(&writer), restart.clone(), checkpointing)?;
        let group = spawn_group_writer(Arc::downgrade(&writer), restart.clone())?;
        let readers: Arc<[Mutex<Connection>]> = readers.into();
        let reads = spawn_readers(Arc::downgrade(&readers), readers.len())?;
        Ok(Db { writer, restart, readers, next_reader: Arc::new(AtomicUsize::new(0)), reads, group })
    }

    /// Runs the write `f` in the next group commit and answers once that commit is durable: a write that fails
    /// is rolled back alone (its savepoint), and a commit that fails fails every write of its group. `f` runs
    /// inside the group's transaction, so it must not begin one of its own (it gets no `&mut Connection`);
    /// its statements are atomic together.
    ///
    /// Why: a commit costs far more than a single-row write (begin, the write-ahead-log append, the end of the
    /// transaction: 60% of the writer's time in a profile of in-app sends, one commit each), and concurrent
    /// callers each waited for the writer lock and a blocking-pool thread of their own.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, PortError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.commit_in_group(Box::new(PendingWrite::new(f, reply)), answer).await
    }

    /// Runs the one statement `sql` with `params` in the next group commit, as [`Db::write`] does, and answers
    /// how many rows it changed. Cheaper than a closure running the same statement: it needs no savepoint of its
    /// own in the group, for SQLite undoes a failed statement alone (see [`PendingStatement`]).
    pub(crate) async fn write_statement(
        &self,
        sql: &'static str,
        params: Vec<rusqlite::types::Value>,
    ) -> Result<usize, PortError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.commit_in_group(Box::new(PendingStatement::new(sql, params, reply)), answer).await
    }

    /// Queues `pending` for the group writer and waits for its `answer`.
    async fn commit_in_group<T>(
        &self,
        pending: Box<dyn GroupWrite>,
        answer: tokio::sync::oneshot::Receiver<Result<T, PortError>>,
    ) -> Result<T, PortError> {
        let stopped = || PortError::Backend("the embedded store's writer stopped".into());
        self.group.send(pending).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Runs `f` with the writer connection on the blocking pool.
    pub(crate) async fn call<T, F>(&self, f: F) -> Result<T, PortError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    {
        let db = self.clone();
        tokio::task::spawn_blocking(move || db.with_writer(f).map_err(backend_error))
            .await
            .map_err(|e| PortError::Backend(format!("embedded store task failed: {e}")))?
    }

    /// Runs `f` with the writer connection on this thread, starting the write-ahead log again before it when
    /// that is free ([`LogRestart`]).
    fn with_writer<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, rusqlite::Error>,
    ) -> Result<T, rusqlite::Error> {
        let mut guard = self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.restart.before_write(&guard);
        let result = f(&mut guard);
        self.restart.after_write();
        result
    }

    /// Runs a read on a reader connection, on the reader threads ([`crate::readers`]): reads wait in one queue, in
    /// the order they came, and a connection that finishes a read takes the next. It sees every write committed
    /// before it starts, and never waits for the writer.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, PortError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.reads
            .send(readers::read(f, reply))
            .map_err(|_| PortError::Backend("the embedded store's reader threads stopped".into()))?;
        // A read drops its reply unanswered only when it panicked.
        answer.await.map_err(|_| PortError::Backend("embedded store: the read panicked".into()))?
    }

    /// Runs a point read (one row by its key: tens of microseconds from the page cache) on this thread when a
    /// reader connection is idle, else as [`Db::read`] does. Why: the hand-off to a reader thread and back (two
    /// wake-ups and a thread switch) cost more than such a read; the in-app send makes two of them per message.
    /// Only for reads bounded by an index lookup: a scan would hold this async worker for its whole length.
    pub(crate) async fn read_point<T, F>(&self, f: F) -> Result<T, PortError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        if let Some(mut guard) = readers::idle(&self.readers, start) {
            return f(&mut guard).map_err(backend_error);
        }
        self.read(f).await
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
            let connection = db.writer.lock().unwrap();
            let (body, expiry): (String, Option<i64>) = connection
                .query_row("SELECT body, expires_at_ms FROM documents WHERE id = 'r1'", [], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .unwrap();
            assert_eq!((body.as_str(), expiry), ("{\"a\":1}", None));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file an older build wrote with `sql`, and where it lies (the directory lives as long as the guard).
    fn old_file(sql: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        Connection::open(&path).unwrap().execute_batch(sql).unwrap();
        (dir, path)
    }

    /// Asserts that `table` is a rowid table.
    fn assert_rowid_table(connection: &Connection, table: &str) {
        let sql: String = connection
            .query_row("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |r| r.get(0))
            .unwrap();
        assert!(!sql.to_ascii_uppercase().contains("WITHOUT ROWID"), "{sql}");
    }

    /// A file whose log records sit in the old `WITHOUT ROWID` table is moved to the rowid layout on open, once:
    /// its records are kept in offset order and a position stays unique.
    #[test]
    fn old_log_files_move_to_the_rowid_layout() {
        let (_dir, path) = old_file(
            "CREATE TABLE records (topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
             key BLOB, value BLOB NOT NULL, headers BLOB, timestamp_ms INTEGER NOT NULL,
             PRIMARY KEY (topic, partition, offset)) WITHOUT ROWID;
             INSERT INTO records VALUES ('t', 0, 1, NULL, X'62', NULL, 20);
             INSERT INTO records VALUES ('t', 0, 0, X'6b', X'61', NULL, 10);",
        );
        for _ in 0..2 {
            let db = Db::open(&path).unwrap();
            let connection = db.writer.lock().unwrap();
            assert_rowid_table(&connection, "records");
            type Row = (i64, Option<Vec<u8>>, Vec<u8>, i64);
            let rows: Vec<Row> = connection
                .prepare("SELECT offset, key, value, timestamp_ms FROM records WHERE topic = 't' ORDER BY offset")
                .unwrap()
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(rows, vec![(0, Some(b"k".to_vec()), b"a".to_vec(), 10), (1, None, b"b".to_vec(), 20)]);
            let duplicate =
                connection.execute("INSERT INTO records VALUES ('t', 0, 1, NULL, X'63', NULL, 30)", []).unwrap_err();
            assert!(duplicate.to_string().contains("UNIQUE"), "{duplicate}");
        }
    }

    /// A file whose documents sit in the old `WITHOUT ROWID` table is moved to the rowid layout on open, once:
    /// its rows, versions and expression indexes are kept, the key stays unique, and an upsert updates in place.
    #[test]
    fn old_files_move_to_the_rowid_layout() {
        let (_dir, path) = old_file(
            "CREATE TABLE documents (collection TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL,
             expires_at_ms INTEGER, version INTEGER NOT NULL DEFAULT 1, PRIMARY KEY (collection, id)) WITHOUT ROWID;
             CREATE INDEX \"doc_by_a\" ON documents (json_extract(body, '$.a')) WHERE collection = 'rules';
             INSERT INTO documents VALUES ('rules', 'r1', '{\"a\":1}', NULL, 3);
             INSERT INTO documents VALUES ('rules', 'r2', '{\"a\":2}', 99, 1);",
        );
        for _ in 0..2 {
            let db = Db::open(&path).unwrap();
            let connection = db.writer.lock().unwrap();
            assert_rowid_table(&connection, "documents");
            let rows: Vec<(String, String, Option<i64>, i64)> = connection
                .prepare("SELECT id, body, expires_at_ms, version FROM documents ORDER BY id")
                .unwrap()
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(
                rows,
                vec![("r1".into(), "{\"a\":1}".into(), None, 3), ("r2".into(), "{\"a\":2}".into(), Some(99), 1)]
            );
            let indexes: Vec<String> = connection
                .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'documents' ORDER BY name")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(indexes, vec!["doc_by_a", "documents_expiry", "documents_key"]);
            let plan: String = connection
                .query_row(
                    "EXPLAIN QUERY PLAN SELECT id FROM documents WHERE collection = 'rules' AND json_extract(body, '$.a') = 2",
                    [],
                    |r| r.get(3),
                )
                .unwrap();
            assert!(plan.contains("doc_by_a"), "{plan}");
            let duplicate =
                connection.execute("INSERT INTO documents (collection, id, body) VALUES ('rules', 'r1', '{}')", []);
            assert!(duplicate.is_err(), "the key stays unique");
        }
        let db = Db::open(&path).unwrap();
        let connection = db.writer.lock().unwrap();
        connection
            .execute(
                "INSERT INTO documents (collection, id, body) VALUES ('rules', 'r1', '{\"a\":5}')
                 ON CONFLICT (collection, id) DO UPDATE SET body = excluded.body, version = version + 1",
                [],
            )
            .unwrap();
        let (count, version): (i64, i64) = connection
            .query_row("SELECT COUNT(*), MAX(version) FROM documents WHERE id = 'r1'", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((count, version), (1, 4));
    }

    /// Under a steady stream of commits (and a reader), the write-ahead log stays near its restart size instead
    /// of growing with everything ever written: the checkpointer restarts it.
    ///
    /// The file's size is the log's peak, and on a loaded disk one checkpoint's `fsync`s can take most of a
    /// second while the writer goes on (a CI run saw 37 MB of 56), so the log sits on tmpfs where the machine has
    /// one: what is measured is the restarts, not the disk. Measured there, idle and beside six busy loops and a
    /// syncing `dd`: the log's peak was 6-27% of the data with the restarts (8-31 of them, the count in the log
    /// header), over 100% without (0-4, SQLite's own when a passive checkpoint happens to catch up).
    #[test]
    fn the_write_ahead_log_stays_bounded_under_steady_writes() {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
        let path = dir.path().join("busy.db");
        let checkpointing = Checkpointing { interval: Duration::from_millis(20), restart_frames: 256 };
        let db = Db::open_checkpointing(&path, checkpointing).unwrap();
        let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(4000));
        let reading = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let reader = {
            let (db, reading) = (db.clone(), reading.clone());
            std::thread::spawn(move || {
                while reading.load(Ordering::Relaxed) {
                    let connection = db.readers[0].lock().unwrap();
                    let _: i64 = connection.query_row("SELECT COUNT(*) FROM documents", [], |r| r.get(0)).unwrap();
                }
            })
        };
        let started = std::time::Instant::now();
        let mut written = 0_u64;
        // At least 1.5 s and 40 MB: a slow writer on a loaded machine still writes several times the peak.
        while started.elapsed() < Duration::from_millis(1500) || written < 10_000 {
            db.with_writer(|connection| {
                let transaction = connection.transaction()?;
                for _ in 0..20 {
                    written += 1;
                    transaction.execute(
                        "INSERT INTO documents (collection, id, body) VALUES ('bulk', ?1, ?2)",
                        rusqlite::params![written.to_string(), body],
                    )?;
                    // A window of the last 2,000 documents: the database stays at about 16 MB (tmpfs is memory)
                    // however long the writer runs, its freed pages written again.
                    transaction.execute(
                        "DELETE FROM documents WHERE collection = 'bulk' AND id = ?1",
                        [written.saturating_sub(2000).to_string()],
                    )?;
                }
                transaction.commit()
            })
            .unwrap();
        }
        reading.store(false, Ordering::Relaxed);
        reader.join().unwrap();
        let mut log = std::fs::File::open(dir.path().join("busy.db-wal")).unwrap();
        let mut header = [0_u8; 16];
        std::io::Read::read_exact(&mut log, &mut header).unwrap();
        let restarts = u32::from_be_bytes(header[12..16].try_into().unwrap());
        let (data, size) = (written * 4000, log.metadata().unwrap().len());
        assert!(size < data / 2, "the log holds {size} bytes after {data} bytes were written ({restarts} restarts)");
    }

    /// Holds the writer connection until the returned sender is dropped or sent to, so the writes sent
    /// meanwhile queue up and commit as one group (the first write sent makes a group of its own).
    async fn hold_writer(db: &Db) -> (std::thread::JoinHandle<()>, std::sync::mpsc::Sender<()>) {
        let (held, release) = (tokio::sync::oneshot::channel(), std::sync::mpsc::channel::<()>());
        let holder = {
            let db = db.clone();
            std::thread::spawn(move || {
                let _writer = db.writer.lock().unwrap();
                held.0.send(()).unwrap();
                let _ = release.1.recv();
            })
        };
        held.1.await.unwrap();
        (holder, release.0)
    }

    /// Starts a write on the group writer.
    fn spawn_write<T: Send + 'static>(
        db: &Db,
        write: impl FnOnce(&Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    ) -> tokio::task::JoinHandle<Result<T, PortError>> {
        let db = db.clone();
        tokio::spawn(async move { db.write(write).await })
    }

    /// Starts one statement on the group writer.
    fn spawn_statement(
        db: &Db,
        sql: &'static str,
        params: Vec<rusqlite::types::Value>,
    ) -> tokio::task::JoinHandle<Result<usize, PortError>> {
        let db = db.clone();
        tokio::spawn(async move { db.write_statement(sql, params).await })
    }

    fn insert(id: &str) -> impl FnOnce(&Connection) -> Result<usize, rusqlite::Error> + Send + 'static {
        let id = id.to_owned();
        move |c| c.prepare_cached("INSERT INTO documents (collection, id, body) VALUES ('g', ?1, '{}')")?.execute([id])
    }

    async fn stored_ids(db: &Db) -> Vec<String> {
        db.read(|c| {
            c.prepare("SELECT id FROM documents WHERE collection = 'g' ORDER BY id")?
                .query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .unwrap()
    }

    /// Lets the writes spawned so far reach the writer's queue.
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    /// A point read sees every write committed before it; when every reader connection is busy it waits for one
    /// (on the blocking pool) instead of failing or blocking the calling task.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn point_reads_see_committed_writes_and_wait_when_every_reader_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("point.db")).unwrap();
        let count = |db: &Db| {
            let db = db.clone();
            tokio::spawn(async move {
                db.read_point(|c| c.query_row("SELECT count(*) FROM documents", [], |row| row.get::<_, i64>(0))).await
            })
        };
        db.write(insert("a")).await.unwrap();
        assert_eq!(count(&db).await.unwrap().unwrap(), 1);

        let (held, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let holder = {
            let db = db.clone();
            std::thread::spawn(move || {
                let _busy: Vec<_> = db.readers.iter().map(|reader| reader.lock().unwrap()).collect();
                held.0.send(()).unwrap();
                let _ = release.1.recv();
            })
        };
        held.1.recv().unwrap();
        db.write(insert("b")).await.unwrap();
        let waiting = count(&db);
        settle().await;
        assert!(!waiting.is_finished(), "a point read with every reader busy waits for one");
        release.0.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(waiting.await.unwrap().unwrap(), 2);
    }

    /// Reads run on the reader threads, never more of them than connections, however many reads wait; a read
    /// that panics fails alone and its thread serves the next.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_wait_for_the_reader_threads_and_a_panicking_read_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("readers.db")).unwrap();
        let reads = (0..32).map(|_| {
            let db = db.clone();
            tokio::spawn(async move {
                db.read(|_| {
                    std::thread::sleep(Duration::from_millis(5));
                    Ok(std::thread::current().name().map(str::to_owned))
                })
                .await
            })
        });
        let threads: std::collections::BTreeSet<Option<String>> =
            futures::future::join_all(reads).await.into_iter().map(|read| read.unwrap().unwrap()).collect();
        assert!(threads.len() <= READERS, "{threads:?}");
        assert!(threads.iter().all(|name| name.as_deref().is_some_and(|n| n.starts_with("flowhost-sqlite-reader-"))));

        for _ in 0..READERS + 1 {
            let panicked = db.read(|_| -> Result<(), rusqlite::Error> { panic!("a read that panics") }).await;
            assert!(matches!(panicked, Err(PortError::Backend(_))), "{panicked:?}");
        }
        db.write(insert("a")).await.unwrap();
        assert_eq!(stored_ids(&db).await, ["a"], "every reader thread still serves reads");
    }

    /// Writes queued while the writer is busy commit together, as one group: a write that fails (a duplicate
    /// key) or panics fails alone, with its own statements rolled back, and the others commit. So does a single
    /// statement, which runs without a savepoint: SQLite undoes a failed statement's own rows, also those of one
    /// that failed halfway (at the second of its two rows).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_writes_commit_as_one_group_and_fail_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("group.db")).unwrap();
        let groups_before = db.restart.writes.load(Ordering::Acquire);
        // `documents_key` makes a second `a` a duplicate.
        let (holder, release) = hold_writer(&db).await;
        let first = spawn_write(&db, insert("a"));
        settle().await;
        let duplicate = spawn_write(&db, insert("a"));
        let half_done = spawn_write(&db, |c| {
            c.execute("INSERT INTO documents (collection, id, body) VALUES ('g', 'b', '{}')", [])?;
            c.execute("INSERT INTO documents (collection, id, body) VALUES ('g', 'a', '{}')", [])
        });
        let panicking = spawn_write(&db, |_| -> Result<(), rusqlite::Error> { panic!("a bug") });
        let statement = "INSERT INTO documents (collection, id, body) VALUES ('g', ?1, '{}')";
        let duplicate_statement = spawn_statement(&db, statement, vec!["a".to_owned().into()]);
        let half_done_statement = spawn_statement(
            &db,
            "INSERT INTO documents (collection, id, body) VALUES ('g', ?1, '{}'), ('g', 'a', '{}')",
            vec!["e".to_owned().into()],
        );
        let stored_statement = spawn_statement(&db, statement, vec!["d".to_owned().into()]);
        let last = spawn_write(&db, insert("c"));
        settle().await;
        release.send(()).unwrap();
        holder.join().unwrap();

        assert_eq!(first.await.unwrap(), Ok(1));
        assert!(matches!(duplicate.await.unwrap(), Err(PortError::Conflict(_))));
        assert!(matches!(half_done.await.unwrap(), Err(PortError::Conflict(_))));
        assert!(matches!(panicking.await.unwrap(), Err(PortError::Backend(message)) if message.contains("panicked")));
        assert!(matches!(duplicate_statement.await.unwrap(), Err(PortError::Conflict(_))));
        assert!(matches!(half_done_statement.await.unwrap(), Err(PortError::Conflict(_))));
        assert_eq!(stored_statement.await.unwrap(), Ok(1));
        assert_eq!(last.await.unwrap(), Ok(1));
        assert_eq!(db.restart.writes.load(Ordering::Acquire) - groups_before, 2, "two commits for eight writes");
        assert_eq!(
            stored_ids(&db).await,
            ["a", "c", "d"],
            "the failed writes left nothing, not even the half-done ones' first rows"
        );
    }

    /// When the group's transaction ends under a write (SQLite rolls a transaction back by itself on a full disk,
    /// an I/O error or no memory; here the write ends it), the group stops: the writes before it were rolled
    /// back with it and the writes after it do not run, outside any transaction, each on its own. Every caller
    /// is told its write failed, and none is stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_whose_transaction_ends_fails_every_write_and_stores_none() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("ended.db")).unwrap();
        let (holder, release) = hold_writer(&db).await;
        let first = spawn_write(&db, insert("a"));
        settle().await;
        let before = spawn_write(&db, insert("b"));
        let ending = spawn_write(&db, |c| c.execute_batch("ROLLBACK"));
        let after = spawn_write(&db, insert("c"));
        settle().await;
        release.send(()).unwrap();
        holder.join().unwrap();

        assert_eq!(first.await.unwrap(), Ok(1), "the first write had a group of its own");
        for (name, write) in [("before", before), ("after", after)] {
            let answer = write.await.unwrap();
            assert!(
                matches!(&answer, Err(PortError::Backend(message)) if message.contains("rolled back")),
                "{name}: {answer:?}"
            );
        }
        assert!(ending.await.unwrap().is_err());
        assert_eq!(stored_ids(&db).await, ["a"]);
        // The writer goes on serving.
        assert_eq!(spawn_write(&db, insert("d")).await.unwrap(), Ok(1));
        assert_eq!(stored_ids(&db).await, ["a", "d"]);
    }

    /// A full store (here a file capped at a few pages, `SQLITE_FULL`): whatever SQLite rolls back, a statement
    /// or the whole transaction, every write of the group (single statements and closures) is answered `Ok`
    /// exactly when it is stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_store_answers_ok_exactly_for_the_stored_writes() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("full.db")).unwrap();
        {
            let writer = db.writer.lock().unwrap();
            let pages: i64 = writer.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
            writer.execute_batch(&format!("PRAGMA max_page_count = {}", pages + 4)).unwrap();
        }
        let big = "x".repeat(64 * 1024);
        let (holder, release) = hold_writer(&db).await;
        let first = spawn_write(&db, insert("first"));
        settle().await;
        let writes: Vec<_> = (0..6)
            .map(|n| {
                let id = format!("w{n}");
                // Every other write is too large for the pages left.
                let body = if n % 2 == 1 { big.clone() } else { "{}".to_owned() };
                const INSERT: &str = "INSERT INTO documents (collection, id, body) VALUES ('g', ?1, ?2)";
                // The first three are single statements (no savepoint), the others closures (one each).
                let write = if n < 3 {
                    spawn_statement(&db, INSERT, vec![id.into(), body.into()])
                } else {
                    spawn_write(&db, move |c| c.prepare_cached(INSERT)?.execute([&id, &body]))
                };
                (format!("w{n}"), write)
            })
            .collect();
        settle().await;
        release.send(()).unwrap();
        holder.join().unwrap();

        assert_eq!(first.await.unwrap(), Ok(1));
        let mut answered_ok = vec!["first".to_owned()];
        let mut failed = 0;
        for (id, write) in writes {
            match write.await.unwrap() {
                Ok(_) => answered_ok.push(id),
                Err(_) => failed += 1,
            }
        }
        assert!(failed >= 3, "the large writes fail: {answered_ok:?}");
        answered_ok.sort();
        assert_eq!(stored_ids(&db).await, answered_ok);
    }
}
