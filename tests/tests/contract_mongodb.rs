//! The documents contract suite against the real MongoDB-protocol server (`FLOWHOST_TEST_MONGODB_URI`), each
//! check in a database of its own.

use std::sync::Arc;

use flowhost_core::ports::{DocumentStore, PortError};
use flowhost_mongo::MongoDocuments;
use flowhost_tests::contract::documents;
use flowhost_tests::{servers, unique};

async fn store() -> Arc<dyn DocumentStore> {
    let store = MongoDocuments::connect(&servers::mongodb_uri(), &unique("flowhost-contract"))
        .await
        .expect("connect to MongoDB");
    assert_eq!(store.backend(), "mongodb");
    Arc::new(store)
}

#[tokio::test]
async fn insert_get_and_conflict() {
    documents::insert_get_and_conflict(store().await).await;
}

#[tokio::test]
async fn list_sorted_by_id() {
    documents::list_sorted_by_id(store().await).await;
}

#[tokio::test]
async fn replace_and_upsert() {
    documents::replace_and_upsert(store().await).await;
}

#[tokio::test]
async fn find_by_field() {
    documents::find_by_field(store().await).await;
}

#[tokio::test]
async fn delete_and_delete_where() {
    documents::delete_and_delete_where(store().await).await;
}

#[tokio::test]
async fn delete_matching() {
    documents::delete_matching(store().await).await;
}

#[tokio::test]
async fn numbers_round_trip() {
    documents::numbers_round_trip(store().await).await;
}

#[tokio::test]
async fn query_filters() {
    documents::query_filters(store().await).await;
}

#[tokio::test]
async fn query_sort_and_page() {
    documents::query_sort_and_page(store().await).await;
}

#[tokio::test]
async fn versioned_replace() {
    documents::versioned_replace(store().await).await;
}

#[tokio::test]
async fn versioned_batches() {
    documents::versioned_batches(store().await).await;
}

#[tokio::test]
async fn unique_and_compound_indexes() {
    documents::unique_and_compound_indexes(store().await).await;
}

#[tokio::test]
async fn sparse_and_dropped_indexes() {
    // The test server ignores index names (see the function's documentation).
    documents::sparse_and_dropped_indexes(store().await, false).await;
}

#[tokio::test]
async fn typed_collections() {
    documents::typed_collections(store().await).await;
}

#[tokio::test]
async fn databases_are_separate() {
    documents::databases_are_separate(store().await).await;
}

#[tokio::test]
async fn expiring_documents() {
    documents::expiring_documents(store().await).await;
}

/// Not part of the shared suite: the first expiring write creates the TTL index (`expireAfterSeconds: 0`) on
/// the hidden expiry field, so MongoDB also removes expired documents on its own.
#[tokio::test]
async fn expiring_documents_get_a_ttl_index() {
    let store = MongoDocuments::connect(&servers::mongodb_uri(), &unique("flowhost-contract")).await.expect("connect");
    let collection = unique("ttl").replace('-', "_");
    assert_eq!(store.expiry_index_seconds(&collection).await.expect("no index yet"), None);
    store.upsert(&collection, "plain", serde_json::json!({ "a": 1 })).await.expect("upsert");
    assert_eq!(store.expiry_index_seconds(&collection).await.expect("plain writes add none"), None);
    store
        .upsert_expiring(&collection, "e", serde_json::json!({ "a": 1 }), 4_102_444_800_000)
        .await
        .expect("upsert_expiring");
    assert_eq!(store.expiry_index_seconds(&collection).await.expect("index"), Some(0));
}

/// Not part of the shared suite: a server that does not answer is a transient failure, reported quickly.
#[tokio::test]
async fn unreachable_server_is_unavailable() {
    let started = std::time::Instant::now();
    let result = MongoDocuments::connect("mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=500", "x").await;
    assert!(matches!(result, Err(PortError::Unavailable(_))), "got {result:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
