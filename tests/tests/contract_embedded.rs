//! The contract suites against the embedded defaults (`flowhost-embedded`): the SQLite-backed documents and
//! topics in a temporary directory, and the in-process subjects and cache. The cache runs on a manual clock, so
//! its expiry checks advance the clock instead of sleeping.

use std::path::PathBuf;
use std::sync::Arc;

use flowhost_core::ports::{Cache, DocumentStore, Subjects, Topics, WorkQueue};
use flowhost_core::{Clock, ManualClock, SystemClock};
use flowhost_embedded::{EmbeddedStore, LocalCache, LocalSubjects};
use flowhost_tests::contract::{cache, documents, queue, source, subjects, topics};
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
async fn documents_delete_matching() {
    let embedded = Embedded::open();
    documents::delete_matching(embedded.documents()).await;
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
async fn documents_versioned_batches() {
    let embedded = Embedded::open();
    documents::versioned_batches(embedded.documents()).await;
}

#[tokio::test]
async fn documents_unique_and_compound_indexes() {
    let embedded = Embedded::open();
    documents::unique_and_compound_indexes(embedded.documents()).await;
}

#[tokio::test]
async fn documents_sparse_and_dropped_indexes() {
    let embedded = Embedded::open();
    documents::sparse_and_dropped_indexes(embedded.documents(), true).await;
}

#[tokio::test]
async fn documents_typed_collections() {
    let embedded = Embedded::open();
    documents::typed_collections(embedded.documents()).await;
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
async fn source_commits_only_the_durable_prefix_in_order() {
    let embedded = Embedded::open();
    source::commits_only_the_durable_prefix_in_order(embedded.topics()).await;
}

#[tokio::test]
async fn source_per_partition_holds_back_only_the_busy_partition() {
    let embedded = Embedded::open();
    source::per_partition_holds_back_only_the_busy_partition(embedded.topics()).await;
}

#[tokio::test]
async fn source_per_partition_reads_a_partition_again_as_its_batch_ends() {
    let embedded = Embedded::open();
    source::per_partition_reads_a_partition_again_as_its_batch_ends(embedded.topics()).await;
}

#[tokio::test]
async fn source_commits_when_idle_and_follows_the_topic_set() {
    let embedded = Embedded::open();
    source::commits_when_idle_and_follows_the_topic_set(embedded.topics()).await;
}

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
async fn topics_seeded_group_resumes_there_and_a_joined_one_refuses() {
    let embedded = Embedded::open();
    topics::seeded_group_resumes_there_and_a_joined_one_refuses(embedded.topics()).await;
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

#[tokio::test]
async fn topics_exists_create_and_publish_by_slice() {
    let embedded = Embedded::open();
    topics::exists_create_and_publish_by_slice(embedded.topics()).await;
}

#[tokio::test]
async fn topics_lag_before_and_after_commit() {
    let embedded = Embedded::open();
    topics::lag_before_and_after_commit(embedded.topics()).await;
}

#[tokio::test]
async fn topics_paused_partition_while_another_flows() {
    let embedded = Embedded::open();
    topics::paused_partition_while_another_flows(embedded.topics()).await;
}

#[tokio::test]
async fn topics_marked_positions_committed_on_close() {
    let embedded = Embedded::open();
    topics::marked_positions_committed_on_close(embedded.topics()).await;
}

#[tokio::test]
async fn topics_closed_while_joining_leaves_the_group_usable() {
    let embedded = Embedded::open();
    topics::closed_while_joining_leaves_the_group_usable(embedded.topics()).await;
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

#[tokio::test]
async fn subjects_request_reply_round_trip() {
    subjects::request_reply_round_trip(local_subjects()).await;
}

#[tokio::test]
async fn subjects_request_timeout_and_no_responders() {
    subjects::request_timeout_and_no_responders(local_subjects()).await;
}

#[tokio::test]
async fn subjects_queue_group_delivers_each_message_once() {
    subjects::queue_group_delivers_each_message_once(local_subjects()).await;
}

#[tokio::test]
async fn subjects_headers_travel_with_messages_requests_and_answers() {
    subjects::headers_travel_with_messages_requests_and_answers(local_subjects()).await;
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

// Work queue: on a manual clock, so visibility expires by moving the clock.

/// A store on a manual clock in a fresh directory, the hook that moves the clock, and the directory.
fn manual_queue_store(dir: &std::path::Path, clock: Arc<ManualClock>) -> EmbeddedStore {
    EmbeddedStore::open(dir, 4, clock).expect("open the embedded store")
}

fn manual_queue() -> (Arc<dyn WorkQueue>, queue::Advance, Embedded) {
    let embedded = Embedded::open();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let store = manual_queue_store(&embedded.dir, clock.clone());
    let advance: queue::Advance = Arc::new(move |duration: std::time::Duration| {
        clock.advance_ms(duration.as_millis() as i64);
        Box::pin(async {})
    });
    (store.queue(), advance, embedded)
}

#[tokio::test]
async fn queue_enqueue_lease_ack() {
    let (work, _, _dir) = manual_queue();
    queue::enqueue_lease_ack(work).await;
}

#[tokio::test]
async fn queue_lease_max_and_batches() {
    let (work, _, _dir) = manual_queue();
    queue::lease_max_and_batches(work).await;
}

#[tokio::test]
async fn queue_lease_exclusivity() {
    let (work, _, _dir) = manual_queue();
    queue::lease_exclusivity(work).await;
}

#[tokio::test]
async fn queue_redelivery_after_consumer_dies() {
    let (work, advance, _dir) = manual_queue();
    queue::redelivery_after_consumer_dies(work, std::time::Duration::from_secs(30), advance).await;
}

#[tokio::test]
async fn queue_ack_unknown_ids() {
    let (work, _, _dir) = manual_queue();
    queue::ack_unknown_ids(work).await;
}

/// Embedded only: the queue is the SQLite file, so messages, leases and counts survive closing and reopening
/// it, and a lease taken before the restart still expires by the clock after it.
#[tokio::test]
async fn queue_survives_reopen() {
    let embedded = Embedded::open();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let name = unique("q");
    let visibility = std::time::Duration::from_secs(30);
    let (leased_id, acked_id, waiting_id) = {
        let work = manual_queue_store(&embedded.dir, clock.clone()).queue();
        let ids = work.enqueue_batch(&name, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]).await.unwrap();
        let leased = work.lease(&name, "w", 2, visibility).await.unwrap();
        assert_eq!(leased.len(), 2);
        work.ack(&name, std::slice::from_ref(&ids[1])).await.unwrap();
        (ids[0].clone(), ids[1].clone(), ids[2].clone())
    };
    let work = manual_queue_store(&embedded.dir, clock.clone()).queue();
    let stats = work.stats(&name).await.unwrap();
    assert_eq!((stats.pending, stats.leased, stats.acknowledged), (2, 1, 1));
    assert!(work.queues().await.unwrap().contains(&name));
    let next = work.lease(&name, "w", 10, visibility).await.unwrap();
    assert_eq!(next.iter().map(|m| (m.id.clone(), m.deliveries)).collect::<Vec<_>>(), vec![(waiting_id, 1)]);
    clock.advance_ms(31_000);
    let again = work.lease(&name, "w", 10, visibility).await.unwrap();
    let got: Vec<_> = again.iter().map(|m| (m.id.clone(), m.payload.clone(), m.deliveries)).collect();
    assert!(got.contains(&(leased_id, b"a".to_vec(), 2)), "{got:?}");
    assert!(!got.iter().any(|(id, _, _)| *id == acked_id), "an acked message never returns: {got:?}");
}

/// Not part of the shared suite: without Redis the composition keeps the work queue in the embedded store.
#[tokio::test]
async fn connect_keeps_the_queue_embedded_without_redis() {
    let embedded = Embedded::open();
    let config = flowhost_core::config::Config { data_dir: embedded.dir.clone(), ..Default::default() };
    let ports = flowhost::connect(&config).await.expect("connect");
    assert_eq!(ports.queue.backend(), "embedded");
}
