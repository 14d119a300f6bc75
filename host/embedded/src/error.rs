//! How a SQLite error reaches the ports: one mapping for every statement the embedded store runs.

use flowhost_core::ports::PortError;

/// A SQLite error as the ports' error: busy or locked is `Unavailable`, a unique index's refusal `Conflict`.
pub(crate) fn backend_error(error: rusqlite::Error) -> PortError {
    match error {
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) =>
        {
            PortError::Unavailable(format!("embedded store busy: {error}"))
        }
        // A unique index (documents port `ensure_index`) refused the write.
        rusqlite::Error::SqliteFailure(e, _)
            if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            PortError::Conflict(format!("a unique index refused the write: {error}"))
        }
        other => PortError::Backend(format!("embedded store: {other}")),
    }
}
