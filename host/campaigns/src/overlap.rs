//! Where an incremental read starts: its cursor less the overlap, until the window before the cursor has closed.
//!
//! The sync's incremental reads ask a source for what changed at or after a cursor (the newest position read)
//! less [`OVERLAP_MS`], so that a write stamped before the cursor but committed after the read is not missed. Read
//! that way on every pass, a burst of writes stays in the window until a newer write moves the cursor: after
//! 10,000 flows written within a second, every pass read, decoded and compared all 10,000 again, for as long as
//! no flow changed.
//!
//! The overlap already assumes that a write commits within [`OVERLAP_MS`] of its stamp. So once a pass has read
//! with the overlap, having begun at least that long after the cursor was first seen, nothing stamped at or before
//! the cursor can still appear: the window has closed, and later passes read from the cursor itself, until it
//! moves. Time here is the sync's own monotonic clock (a write's stamp comes from another process's clock and is
//! only compared with other stamps). Kept in memory: a new process reads the overlap again, which is idempotent.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How far before its cursor a source is read while the window is open, in milliseconds.
pub const OVERLAP_MS: i64 = 5_000;
const OVERLAP: Duration = Duration::from_millis(OVERLAP_MS as u64);

/// The window before each source's cursor, by the source's cursor name.
#[derive(Debug, Default)]
pub struct Overlaps(Mutex<HashMap<String, Window>>);

#[derive(Debug, Clone, Copy)]
struct Window {
    cursor: i64,
    /// When a pass first read with this cursor.
    first_seen: Instant,
    closed: bool,
}

impl Overlaps {
    fn windows(&self) -> std::sync::MutexGuard<'_, HashMap<String, Window>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Where a pass that began at `started` reads the source named `name` from, given its `cursor`
    /// (milliseconds): the cursor once its window has closed, else the cursor less the overlap.
    pub fn since(&self, name: &str, cursor: i64, started: Instant) -> i64 {
        let mut windows = self.windows();
        match windows.get(name) {
            Some(window) if window.cursor == cursor && window.closed => cursor,
            Some(window) if window.cursor == cursor => cursor - OVERLAP_MS,
            _ => {
                windows.insert(name.to_owned(), Window { cursor, first_seen: started, closed: false });
                cursor - OVERLAP_MS
            }
        }
    }

    /// After a pass that began at `started` read the source named `name` from `cursor` (as [`Overlaps::since`]
    /// gave it) and completed everything it read: the window closes when the pass began at least the overlap
    /// after the cursor was first seen. A failed pass must not call it: the next one reads the window again.
    pub fn completed(&self, name: &str, cursor: i64, started: Instant) {
        if let Some(window) = self.windows().get_mut(name) {
            if window.cursor == cursor && started >= window.first_seen + OVERLAP {
                window.closed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_closes_after_a_pass_that_began_one_overlap_after_the_cursor_was_first_seen() {
        let overlaps = Overlaps::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(overlaps.since("runs", 100_000, at(0)), 95_000);
        overlaps.completed("runs", 100_000, at(0));
        // A pass that began within the overlap: a write stamped before the cursor may still commit.
        assert_eq!(overlaps.since("runs", 100_000, at(4_999)), 95_000);
        overlaps.completed("runs", 100_000, at(4_999));
        assert_eq!(overlaps.since("runs", 100_000, at(5_000)), 95_000);
        overlaps.completed("runs", 100_000, at(5_000));
        // That pass read the window after every write stamped before the cursor had committed.
        assert_eq!(overlaps.since("runs", 100_000, at(5_250)), 100_000);
        assert_eq!(overlaps.since("runs", 100_000, at(60_000)), 100_000);
        // Another source keeps its own window.
        assert_eq!(overlaps.since("deliveries", 100_000, at(60_000)), 95_000);
    }

    #[test]
    fn a_moved_cursor_opens_its_window_again() {
        let overlaps = Overlaps::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        overlaps.since("runs", 100_000, at(0));
        overlaps.completed("runs", 100_000, at(6_000));
        assert_eq!(overlaps.since("runs", 100_000, at(6_100)), 100_000);
        assert_eq!(overlaps.since("runs", 100_200, at(6_200)), 95_200, "a newer write moved the cursor");
        // A pass that read with the old cursor does not close the new one's window.
        overlaps.completed("runs", 100_000, at(20_000));
        assert_eq!(overlaps.since("runs", 100_200, at(20_100)), 95_200);
    }

    #[test]
    fn a_pass_that_did_not_complete_leaves_the_window_open() {
        let overlaps = Overlaps::default();
        let t0 = Instant::now();
        overlaps.since("runs", 100_000, t0);
        // The pass that began at 6 s failed: `completed` is not called, and the next pass reads the window.
        assert_eq!(overlaps.since("runs", 100_000, t0 + Duration::from_secs(6)), 95_000);
        assert_eq!(overlaps.since("runs", 100_000, t0 + Duration::from_secs(7)), 95_000);
    }
}
