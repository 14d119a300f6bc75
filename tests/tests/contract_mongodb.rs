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
async fn numbers_round_trip() {
    documents::numbers_round_trip(store().await).await;
}

/// Not part of the shared suite: a server that does not answer is a transient failure, reported quickly.
#[tokio::test]
async fn unreachable_server_is_unavailable() {
    let started = std::time::Instant::now();
    let result = MongoDocuments::connect("mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=500", "x").await;
    assert!(matches!(result, Err(PortError::Unavailable(_))), "got {result:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
