//! The group writer of one SQLite file (see `Db::write`): a thread that takes every write waiting, runs each in
//! a savepoint of one `BEGIN IMMEDIATE` transaction (a single statement, `Db::write_statement`, needs none) and
//! commits once, answering no caller before the commit.

use std::sync::{Arc, Mutex};

use flowhost_core::ports::PortError;
use rusqlite::Connection;

use crate::error::backend_error;

/// What the writer does around each group with the writer connection held (the file's log restarts).
pub(crate) trait WriteHooks: Send + Sync {
    fn before_write(&self, writer: &Connection);
    fn after_write(&self);
}

/// Writes one group commit takes at most: enough to share a commit among every caller of a busy host, few enough
/// that the writer lock is never held long.
const GROUP_LIMIT: usize = 256;
/// The statements that put each write of a group in its own savepoint; `const`, so preparing them from the
/// statement cache allocates nothing.
const SAVEPOINT: &str = "SAVEPOINT group_write";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO group_write";
const RELEASE_SAVEPOINT: &str = "RELEASE group_write";

/// How one write of a group went.
pub(crate) enum Ran {
    /// Its statements are in the group's transaction.
    Stored,
    /// It failed (or panicked) and its own statements are rolled back; the group's transaction goes on.
    Failed,
    /// A savepoint statement failed: the transaction is no longer known to hold exactly the stored writes.
    Broken(PortError),
}

/// One write waiting for the group writer (see [`Db::write`]).
pub(crate) trait GroupWrite: Send {
    /// Runs the write inside the group's transaction; with `in_savepoint`, in a savepoint rolled back when it
    /// fails.
    fn run(&mut self, connection: &Connection, in_savepoint: bool) -> Ran;
    /// Answers the caller once the group's commit is known.
    fn answer(self: Box<Self>, committed: Result<(), PortError>);
    /// Whether the write needs a savepoint of its own in a group: false for one statement, which SQLite itself
    /// undoes alone when it fails.
    fn needs_savepoint(&self) -> bool {
        true
    }
}

pub(crate) struct PendingWrite<T, F> {
    write: Option<F>,
    result: Option<Result<T, PortError>>,
    reply: tokio::sync::oneshot::Sender<Result<T, PortError>>,
}

impl<T, F> PendingWrite<T, F> {
    /// `write`, whose outcome goes to `reply` once its group's commit is known.
    pub(crate) fn new(write: F, reply: tokio::sync::oneshot::Sender<Result<T, PortError>>) -> Self {
        PendingWrite { write: Some(write), result: None, reply }
    }
}

impl<T, F> GroupWrite for PendingWrite<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T, rusqlite::Error> + Send + 'static,
{
    fn run(&mut self, connection: &Connection, in_savepoint: bool) -> Ran {
        let Some(write) = self.write.take() else { return Ran::Failed };
        let statement = |sql: &str| {
            connection.prepare_cached(sql).and_then(|mut statement| statement.execute([])).map_err(backend_error)
        };
        if in_savepoint {
            if let Err(error) = statement(SAVEPOINT) {
                return Ran::Broken(error);
            }
        }
        // A panicking write fails alone; the writer thread goes on serving the others.
        let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write(connection))) {
            Ok(result) => result.map_err(backend_error),
            Err(_) => Err(PortError::Backend("embedded store: the write panicked".into())),
        };
        let ran = if result.is_ok() { Ran::Stored } else { Ran::Failed };
        self.result = Some(result);
        if !in_savepoint || connection.is_autocommit() {
            // Without a savepoint the caller rolls back; with no transaction left there is no savepoint either.
            return ran;
        }
        if matches!(ran, Ran::Failed) {
            if let Err(error) = statement(ROLLBACK_TO_SAVEPOINT) {
                return Ran::Broken(error);
            }
        }
        match statement(RELEASE_SAVEPOINT) {
            Ok(_) => ran,
            Err(error) => Ran::Broken(error),
        }
    }

    fn answer(self: Box<Self>, committed: Result<(), PortError>) {
        answer(self.reply, self.result, committed);
    }
}

/// One SQL statement waiting for the group writer (see [`Db::write_statement`]), answered with the rows it
/// changed. It runs without a savepoint: a statement that fails is undone by SQLite alone (its own statement
/// journal, kept only when the statement could fail halfway), the group's transaction going on, so it costs
/// neither the two savepoint statements nor a copy of every page it changes.
///
/// [`Db::write_statement`]: crate::sqlite::Db::write_statement
pub(crate) struct PendingStatement {
    sql: &'static str,
    params: Vec<rusqlite::types::Value>,
    result: Option<Result<usize, PortError>>,
    reply: tokio::sync::oneshot::Sender<Result<usize, PortError>>,
}

impl PendingStatement {
    pub(crate) fn new(
        sql: &'static str,
        params: Vec<rusqlite::types::Value>,
        reply: tokio::sync::oneshot::Sender<Result<usize, PortError>>,
    ) -> Self {
        PendingStatement { sql, params, result: None, reply }
    }
}

impl GroupWrite for PendingStatement {
    fn run(&mut self, connection: &Connection, _in_savepoint: bool) -> Ran {
        let params = std::mem::take(&mut self.params);
        let result = connection
            .prepare_cached(self.sql)
            .and_then(|mut statement| statement.execute(rusqlite::params_from_iter(params)))
            .map_err(backend_error);
        let ran = if result.is_ok() { Ran::Stored } else { Ran::Failed };
        self.result = Some(result);
        ran
    }

    fn answer(self: Box<Self>, committed: Result<(), PortError>) {
        answer(self.reply, self.result, committed);
    }

    fn needs_savepoint(&self) -> bool {
        false
    }
}

/// Sends a write's caller its outcome: the write's own result once its group committed, else the commit's error.
fn answer<T>(
    reply: tokio::sync::oneshot::Sender<Result<T, PortError>>,
    result: Option<Result<T, PortError>>,
    committed: Result<(), PortError>,
) {
    let answer = match (result, committed) {
        (Some(Err(error)), _) | (_, Err(error)) => Err(error),
        (Some(Ok(value)), Ok(())) => Ok(value),
        (None, Ok(())) => Err(PortError::Backend("embedded store: the write did not run".into())),
    };
    // The caller may have stopped waiting (a dropped request); its write stays committed.
    let _ = reply.send(answer);
}

/// Starts the thread that commits waiting writes in groups: it takes the first write, every write queued behind
/// it (up to [`GROUP_LIMIT`]), runs them in one `BEGIN IMMEDIATE` transaction and commits. It ends when every
/// sender (every [`Db`]) is gone.
///
/// It holds the writer connection weakly, so dropping the last `Db` closes the file at once, as before the group
/// writer: a connection closed later, after the directory was removed and a store opened again at the same
/// path, would delete the new store's write-ahead log (SQLite removes the `-wal` file by name on close).
pub(crate) fn spawn_group_writer(
    writer: std::sync::Weak<Mutex<Connection>>,
    restart: Arc<dyn WriteHooks>,
) -> Result<std::sync::mpsc::Sender<Box<dyn GroupWrite>>, PortError> {
    let (sender, queue) = std::sync::mpsc::channel::<Box<dyn GroupWrite>>();
    std::thread::Builder::new()
        .name("flowhost-sqlite-writer".into())
        .spawn(move || {
            while let Ok(first) = queue.recv() {
                let mut group = vec![first];
                group.extend(queue.try_iter().take(GROUP_LIMIT - 1));
                let committed = match writer.upgrade() {
                    Some(writer) => {
                        let connection = writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                        restart.before_write(&connection);
                        let committed = commit_group(&connection, &mut group);
                        restart.after_write();
                        committed
                    }
                    None => Err(PortError::Backend("the embedded store is closed".into())),
                };
                for write in group {
                    write.answer(committed.clone());
                }
            }
        })
        .map_err(|e| PortError::Backend(format!("cannot start the embedded store's writer thread: {e}")))?;
    Ok(sender)
}

/// Runs `group` in one transaction and commits it; a failed begin or commit is every write's answer.
///
/// A write alone in its group (the common case under light load) runs without a savepoint, its failure rolling
/// back the transaction: inside a savepoint SQLite keeps a statement journal of the pages the write changes. So
/// does a single statement in a larger group ([`PendingStatement`]): SQLite undoes a failed statement alone.
///
/// SQLite may roll back the whole transaction by itself when a statement fails (a full disk, an I/O error, no
/// memory), and a savepoint statement may fail. The group stops there: every write is answered with the error and
/// none of the rest runs, for they would run outside any transaction, each committed on its own, while their
/// callers were told they failed.
fn commit_group(connection: &Connection, group: &mut [Box<dyn GroupWrite>]) -> Result<(), PortError> {
    connection.prepare_cached("BEGIN IMMEDIATE").and_then(|mut begin| begin.execute([])).map_err(backend_error)?;
    if let [alone] = group {
        if !matches!(alone.run(connection, false), Ran::Stored) {
            rollback(connection);
            return Ok(());
        }
    } else {
        for write in group.iter_mut() {
            let in_savepoint = write.needs_savepoint();
            let broken = match write.run(connection, in_savepoint) {
                Ran::Broken(error) => Some(error),
                Ran::Stored | Ran::Failed if connection.is_autocommit() => Some(PortError::Backend(
                    "embedded store: the group's transaction was rolled back by the store".into(),
                )),
                Ran::Stored | Ran::Failed => None,
            };
            if let Some(error) = broken {
                rollback(connection);
                return Err(error);
            }
        }
    }
    let committed = connection.prepare_cached("COMMIT").and_then(|mut commit| commit.execute([]));
    if let Err(error) = committed {
        rollback(connection);
        return Err(backend_error(error));
    }
    Ok(())
}

/// Ends the writer's transaction, if SQLite has not ended it already.
fn rollback(connection: &Connection) {
    if !connection.is_autocommit() {
        if let Err(error) = connection.execute_batch("ROLLBACK") {
            tracing::warn!(%error, "embedded store: rollback failed");
        }
    }
}
