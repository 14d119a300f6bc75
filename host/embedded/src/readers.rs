//! The reader threads of one SQLite file (see `Db::read`): one thread per reader connection, all taking reads
//! from one queue in the order they came.
//!
//! Why threads of their own instead of the blocking pool: a read handed to the blocking pool took a thread at
//! once and, with no reader connection idle, blocked on the next connection in turn, which could be the busiest
//! while another was free. Under load that meant dozens of threads waiting on four connections, and a tail set by
//! whichever connection a read happened to pick. Here a connection that finishes a read takes the next one
//! waiting, with no hand-off in between, and no more threads run reads than there are connections.
//!
//! Invariants:
//! - The threads hold the connections weakly between reads, so dropping the last `Db` closes the file at once
//!   (as the group writer does, for the same reason); a read still queued then fails as the store being closed.
//! - A read that panics fails alone; its thread goes on serving the others.
//! - The threads end when every sender (every `Db`) is gone.

use std::sync::{Mutex, MutexGuard, Weak};

use flowhost_core::ports::PortError;
use rusqlite::Connection;

use crate::error::backend_error;

/// One read waiting for a reader thread: runs with a connection, or with none when the store is closed.
pub(crate) type Read = Box<dyn FnOnce(Option<&mut Connection>) + Send>;

/// The queue of reads waiting for a reader thread.
pub(crate) type Reads = crossbeam_channel::Sender<Read>;

/// A read of `f` for the queue, answering on `reply`. A read that panics drops `reply` unanswered.
pub(crate) fn read<T, F>(f: F, reply: tokio::sync::oneshot::Sender<Result<T, PortError>>) -> Read
where
    T: Send + 'static,
    F: FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
{
    Box::new(move |connection| {
        let result = match connection {
            Some(connection) => f(connection).map_err(backend_error),
            None => Err(PortError::Backend("the embedded store is closed".into())),
        };
        // The caller may have stopped waiting (a dropped request).
        let _ = reply.send(result);
    })
}

/// The first reader connection not in use, looking from `start` on.
pub(crate) fn idle(readers: &[Mutex<Connection>], start: usize) -> Option<MutexGuard<'_, Connection>> {
    let count = readers.len();
    (0..count).find_map(|i| readers[(start + i) % count].try_lock().ok())
}

/// Starts one reader thread per connection of `readers`. Thread `i` runs each read on the first idle connection
/// from `i` on, else waits for connection `i` (a point read run on its caller's thread may hold it for a moment;
/// see `Db::read_point`).
pub(crate) fn spawn_readers(readers: Weak<[Mutex<Connection>]>, count: usize) -> Result<Reads, PortError> {
    let (sender, queue) = crossbeam_channel::unbounded::<Read>();
    for i in 0..count {
        let (readers, queue) = (readers.clone(), queue.clone());
        std::thread::Builder::new()
            .name(format!("flowhost-sqlite-reader-{i}"))
            .spawn(move || {
                for read in queue {
                    let Some(readers) = readers.upgrade() else {
                        read(None);
                        continue;
                    };
                    let mut connection = idle(&readers, i)
                        .unwrap_or_else(|| readers[i].lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
                    // A panicking read fails alone (its caller sees its reply dropped).
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(Some(&mut connection))));
                }
            })
            .map_err(|e| PortError::Backend(format!("cannot start the embedded store's readers: {e}")))?;
    }
    Ok(sender)
}
