//! Marks in a tenant's live-event list, so a deep page starts near its rows instead of skipping every row before
//! it: a page at offset 10,000 otherwise walks 10,000 index entries, at every request.
//!
//! A list is ordered newest first: `occurred_ms` descending, then the event id. Where a page shows a row older
//! than the row before it, that row's `occurred_ms` (`X`) and its offset (`F`) say exactly that `F` events are
//! newer than `X`. A later page at offset `o >= F` is then the events with `occurred_ms <= X` from offset `o - F`:
//! the same rows, found by the index's range on `occurred_ms` after the rows between the mark and the page, plus
//! the page.
//!
//! A mark is kept unless another sits less than [`spacing`] rows before it: one page's worth ([`MIN_SPACING`])
//! near the list's top, a share of the depth further down ([`DEPTH_SHARE`]), so a page at offset `o` walks fewer
//! than a page plus `max(20, o / 256)` rows past its mark once the page before it was read, and a list paged two
//! million rows deep from the top holds under two thousand marks. Only marks *before* a candidate count: a page
//! read after a deeper one (a user who opened the last page and pages back) still gets its own mark, so paging
//! back leaves up to one mark per page read, within [`MAX_MARKS`].
//!
//! **Invariant: a mark is used only with the list it was read from.** Marks are kept per tenant and `kind` with the
//! store version of the tenant's kept totals (`live_event_totals`), read *before* the page the marks come from.
//! The live-events slice rewrites those totals after every pass that writes one of the tenant's events (also one
//! that moves an event in time), so any change to the list changes the version, and the marks of an older version
//! are dropped unused. A page read while a pass was writing is newer than its version, never older: the totals
//! rewritten after it retire its marks too.
//!
//! Bounded: at most [`MAX_MARKS`] per list and [`MAX_LISTS`] lists; a full cache drops its least recently used
//! list.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Rows between a kept mark and the one before it at least, near the top of a list: the default page size.
pub const MIN_SPACING: u64 = 20;
/// Deeper down, a mark is kept at least `1 / DEPTH_SHARE` of its depth after the one before it.
pub const DEPTH_SHARE: u64 = 256;
/// Marks kept per list at most (a list paged two million rows deep from the top needs under 2,000).
pub const MAX_MARKS: usize = 10_000;
/// Lists (tenant and kind) with marks at once.
pub const MAX_LISTS: usize = 1_000;

/// The fewest rows between a mark at `offset` and the mark before it (see the module documentation).
pub fn spacing(offset: u64) -> u64 {
    (offset / DEPTH_SHARE).max(MIN_SPACING)
}

/// Where a page of a list starts: at `occurred_ms <= at_or_before`, skipping `offset` rows of those (no mark:
/// every row, from the list's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub at_or_before: Option<i64>,
    pub offset: u64,
}

/// One list's marks: offset `F` → `X` (`F` events of the list are newer than `X`).
struct Marks {
    version: u64,
    marks: BTreeMap<u64, i64>,
    last_used: u64,
}

/// The marks of the recently read lists; see the module documentation.
#[derive(Default)]
pub struct LiveMarks {
    lists: Mutex<HashMap<(String, Option<String>), Marks>>,
    uses: AtomicU64,
}

impl LiveMarks {
    /// Where the page at `offset` of the list (`tenant_id`, `kind`) starts, for the list at totals `version`.
    pub fn start(&self, tenant_id: &str, kind: Option<&str>, version: u64, offset: u64) -> Start {
        let whole = Start { at_or_before: None, offset };
        let lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
        let Some(list) = lists.get(&(tenant_id.to_owned(), kind.map(str::to_owned))) else { return whole };
        if list.version != version {
            return whole;
        }
        match list.marks.range(..=offset).next_back() {
            Some((&newer, &at)) => Start { at_or_before: Some(at), offset: offset - newer },
            None => whole,
        }
    }

    /// Keeps the marks a page shows: `occurred` are the `occurred_ms` of its rows, in the list's order, the first
    /// at offset `offset` of the list at totals `version`.
    pub fn learn(&self, tenant_id: &str, kind: Option<&str>, version: u64, offset: u64, occurred: &[i64]) {
        let found: Vec<(u64, i64)> = occurred
            .windows(2)
            .enumerate()
            .filter(|(_, pair)| pair[1] < pair[0])
            .map(|(at, pair)| (offset + at as u64 + 1, pair[1]))
            .collect();
        if found.is_empty() {
            return;
        }
        let used = self.uses.fetch_add(1, Ordering::Relaxed);
        let mut lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
        let key = (tenant_id.to_owned(), kind.map(str::to_owned));
        if !lists.contains_key(&key) && lists.len() >= MAX_LISTS {
            let oldest = lists.iter().min_by_key(|(_, list)| list.last_used).map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                lists.remove(&oldest);
            }
        }
        let list = lists.entry(key).or_insert_with(|| Marks { version, marks: BTreeMap::new(), last_used: used });
        if list.version != version {
            // Another version's marks say nothing of this one. (While requests of the two versions overlap they
            // may replace each other's marks; each request uses only its own version's.)
            *list = Marks { version, marks: BTreeMap::new(), last_used: used };
        }
        list.last_used = used;
        for (newer, at) in found {
            let near = list.marks.range(newer.saturating_sub(spacing(newer) - 1)..=newer).next().is_some();
            if !near && list.marks.len() < MAX_MARKS {
                list.marks.insert(newer, at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHOLE: fn(u64) -> Start = |offset| Start { at_or_before: None, offset };

    #[test]
    fn a_page_marks_where_time_steps_down_and_a_deeper_page_starts_there() {
        let marks = LiveMarks::default();
        // Rows 1000..1004: 90, 90, 80, 80, 70: two steps down, at offsets 1002 (80) and 1004 (70).
        marks.learn("t", None, 7, 1000, &[90, 90, 80, 80, 70]);
        assert_eq!(marks.start("t", None, 7, 999), WHOLE(999), "no mark at or before it");
        assert_eq!(marks.start("t", None, 7, 1002), Start { at_or_before: Some(80), offset: 0 });
        assert_eq!(marks.start("t", None, 7, 1500), Start { at_or_before: Some(80), offset: 498 });
        // 1004 is within `spacing` after 1002, so it was not kept.
        assert_eq!(marks.start("t", None, 7, 1004), Start { at_or_before: Some(80), offset: 2 });
    }

    #[test]
    fn marks_serve_only_their_list_and_version() {
        let marks = LiveMarks::default();
        marks.learn("t", Some("interaction"), 3, 400, &[50, 40]);
        assert_eq!(marks.start("t", Some("interaction"), 3, 420), Start { at_or_before: Some(40), offset: 19 });
        assert_eq!(marks.start("t", None, 3, 420), WHOLE(420), "another kind");
        assert_eq!(marks.start("u", Some("interaction"), 3, 420), WHOLE(420), "another tenant");
        assert_eq!(marks.start("t", Some("interaction"), 4, 420), WHOLE(420), "the totals changed");
        // A page of another version replaces the marks.
        marks.learn("t", Some("interaction"), 4, 1000, &[30, 20]);
        assert_eq!(marks.start("t", Some("interaction"), 3, 420), WHOLE(420));
        assert_eq!(marks.start("t", Some("interaction"), 4, 2500), Start { at_or_before: Some(20), offset: 1499 });
    }

    #[test]
    fn marks_are_spaced_and_lists_bounded() {
        let marks = LiveMarks::default();
        let occurred: Vec<i64> = (0..1000).map(|row| 1_000_000 - row).collect();
        marks.learn("t", None, 1, 0, &occurred);
        let kept = marks.lists.lock().unwrap()[&("t".to_owned(), None)].marks.len() as u64;
        assert_eq!(kept, 1000 / MIN_SPACING, "one mark per {MIN_SPACING} rows near the top");
        for tenant in 0..MAX_LISTS + 5 {
            marks.learn(&format!("tenant-{tenant}"), None, 1, 0, &[2, 1]);
        }
        assert_eq!(marks.lists.lock().unwrap().len(), MAX_LISTS);
        assert_eq!(marks.start("tenant-0", None, 1, 5), WHOLE(5), "the least recently used list went first");
    }

    #[test]
    fn deeper_marks_are_spaced_by_a_share_of_their_depth() {
        let marks = LiveMarks::default();
        let occurred: Vec<i64> = (0..20_000).map(|row| 10_000_000 - row).collect();
        marks.learn("t", None, 1, 1_000_000, &occurred);
        let kept: Vec<u64> = marks.lists.lock().unwrap()[&("t".to_owned(), None)].marks.keys().copied().collect();
        assert_eq!(kept.first(), Some(&1_000_001));
        for pair in kept.windows(2) {
            let gap = pair[1] - pair[0];
            assert!((spacing(pair[1])..=spacing(pair[1]) + 1).contains(&gap), "{pair:?}");
        }
        assert_eq!(kept.len(), 6, "about 20,000 / 3,900 rows: {kept:?}");
    }

    #[test]
    fn a_page_read_after_a_deeper_one_keeps_its_own_mark() {
        let marks = LiveMarks::default();
        let page = |offset: u64| -> Vec<i64> { (offset..offset + 20).map(|row| 1_000_000 - row as i64).collect() };
        // A user opens the last page first, then pages back.
        marks.learn("t", None, 1, 10_000, &page(10_000));
        marks.learn("t", None, 1, 9_980, &page(9_980));
        assert_eq!(marks.start("t", None, 1, 10_000), Start { at_or_before: Some(1_000_000 - 9_981), offset: 19 });
        marks.learn("t", None, 1, 9_960, &page(9_960));
        assert_eq!(marks.start("t", None, 1, 9_980), Start { at_or_before: Some(1_000_000 - 9_961), offset: 19 });
    }
}
