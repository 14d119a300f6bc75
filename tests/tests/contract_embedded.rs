//! The contract suites against the embedded defaults (`flowhost-embedded`): the SQLite-backed documents and
//! topics in a temporary directory, and the in-process subjects and cache. The cache runs on a manual clock, so
//! its expiry checks advance the clock instead of sleeping.

use std::path::PathBuf;
use std::sync::Arc;

use flowhost_core::ports::{Cache, DocumentStore, Subjects, Topics};
use flowhost_core::{Clock, ManualClock, SystemClock};
use flowhost_embedded::{EmbeddedStore, LocalCache, LocalSubjects};
use flowhost_tests::contract::{cache, documents, subjects, topics};
use flowhost_tests::unique;

/// An embedded store in a fresh directory, removed when the check ends.
struct Embedded {
    store: EmbeddedStore,
    dir: PathBuf,
}

impl Embedded {
    fn open() -> Embedded {
        let dir = std::env::temp_dir().join(unique("flowhost-embedded-contract"));
        std::fs::create_dir_all(&dir).expect("create the store directory");
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let store = EmbeddedStore::open(&dir, 4, clock).expect("open the embedded store");
        Embedded { store, dir }
    }

    fn documents(&self) -> Arc<dyn DocumentStore> {
        self.store.documents()
    }

    fn topics(&self) -> Arc<dyn Topics> {
        self.store.topics()
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn local_subjects() -> Arc<dyn Subjects> {
    Arc::new(LocalSubjects::new())
}

/// A cache on a manual clock, and the hook that moves that clock.
fn manual_cache() -> (Arc<dyn Cache>, cache::Advance) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let cache: Arc<dyn Cache> = Arc::new(LocalCache::new(clock.clone()));
    let advance: cache::Advance = Arc::new(move |duration: std::time::Duration| {
        clock.advance_ms(duration.as_millis() as i64);
        Box::pin(async {})
    });
    (cache, advance)
}

// Documents.

#[tokio::test]
async fn documents_insert_get_and_conflict() {
    let embedded = Embedded::open();
    documents::insert_get_and_conflict(embedded.documents()).await;
}

#[tokio::test]
async fn documents_list_sorted_by_id() {
    let embedded = Embedded::open();
    documents::list_sorted_by_id(embedded.documents()).await;
}

#[tokio::test]
async fn documents_replace_and_upsert() {
    let embedded = Embedded::open();
    documents::replace_and_upsert(embedded.documents()).await;
}

#[tokio::test]
async fn documents_find_by_field() {
    let embedded = Embedded::open();
    documents::find_by_field(embedded.documents()).await;
}

#[tokio::test]
async fn documents_delete_and_delete_where() {
    let embedded = Embedded::open();
    documents::delete_and_delete_where(embedded.documents()).await;
}

#[tokio::test]
async fn documents_numbers_round_trip() {
    let embedded = Embedded::open();
    documents::numbers_round_trip(embedded.documents()).await;
}

#[tokio::test]
async fn documents_query_filters() {
    let embedded = Embedded::open();
    documents::query_filters(embedded.documents()).await;
}

#[tokio::test]
async fn documents_query_sort_and_page() {
    let embedded = Embedded::open();
    documents::query_sort_and_page(embedded.documents()).await;
}

#[tokio::test]
async fn documents_versioned_replace() {
    let embedded = Embedded::open();
    documents::versioned_replace(embedded.documents()).await;
}

#[tokio::test]
async fn documents_unique_and_compound_indexes() {
    let embedded = Embedded::open();
    documents::unique_and_compound_indexes(embedded.documents()).await;
}

#[tokio::test]
async fn documents_databases_are_separate() {
    let embedded = Embedded::open();
    documents::databases_are_separate(embedded.documents()).await;
}

#[tokio::test]
async fn documents_expiring_documents() {
    let embedded = Embedded::open();
    documents::expiring_documents(embedded.documents()).await;
}

/// Not part of the shared suite: expiry survives a reopen of the file (it is stored, not held in memory).
#[tokio::test]
async fn documents_expiry_survives_reopen() {
    let embedded = Embedded::open();
    let collection = "expiry_reopen";
    embedded.documents().upsert_expiring(collection, "a", serde_json::json!({ "a": 1 }), 1_000).await.unwrap();
    let reopened = EmbeddedStore::open(&embedded.dir, 4, Arc::new(SystemClock)).expect("reopen");
    assert_eq!(reopened.documents().sweep_expired(collection, 1_000).await.unwrap(), 1);
}

// Topics.

#[tokio::test]
async fn topics_publish_and_consume_round_trip() {
    let embedded = Embedded::open();
    topics::publish_and_consume_round_trip(embedded.topics()).await;
}

#[tokio::test]
async fn topics_same_key_same_partition_in_order() {
    let embedded = Embedded::open();
    topics::same_key_same_partition_in_order(embedded.topics()).await;
}

#[tokio::test]
async fn topics_commit_then_resume() {
    let embedded = Embedded::open();
    topics::commit_then_resume(embedded.topics()).await;
}

#[tokio::test]
async fn topics_uncommitted_records_are_redelivered() {
    let embedded = Embedded::open();
    topics::uncommitted_records_are_redelivered(embedded.topics()).await;
}

#[tokio::test]
async fn topics_groups_are_independent() {
    let embedded = Embedded::open();
    topics::groups_are_independent(embedded.topics()).await;
}

#[tokio::test]
async fn topics_latest_skips_older_records() {
    let embedded = Embedded::open();
    topics::latest_skips_older_records(embedded.topics()).await;
}

#[tokio::test]
async fn topics_poll_respects_max_and_timeout() {
    let embedded = Embedded::open();
    topics::poll_respects_max_and_timeout(embedded.topics()).await;
}

// Subjects.

#[tokio::test]
async fn subjects_exact_subject() {
    subjects::exact_subject(local_subjects()).await;
}

#[tokio::test]
async fn subjects_star_wildcard() {
    subjects::star_wildcard(local_subjects()).await;
}

#[tokio::test]
async fn subjects_tail_wildcard() {
    subjects::tail_wildcard(local_subjects()).await;
}

#[tokio::test]
async fn subjects_every_subscriber_receives() {
    subjects::every_subscriber_receives(local_subjects()).await;
}

// Cache.

#[tokio::test]
async fn cache_get_set_delete() {
    cache::get_set_delete(manual_cache().0).await;
}

#[tokio::test]
async fn cache_set_if_absent() {
    cache::set_if_absent(manual_cache().0).await;
}

#[tokio::test]
async fn cache_ttl_expiry() {
    let (cache, advance) = manual_cache();
    cache::ttl_expiry(cache, advance).await;
}

#[tokio::test]
async fn cache_incr_counts() {
    cache::incr_counts(manual_cache().0).await;
}

#[tokio::test]
async fn cache_incr_window() {
    let (cache, advance) = manual_cache();
    cache::incr_window(cache, advance).await;
}
