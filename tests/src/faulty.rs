//! [`FaultyDocuments`]: the real documents port of a test host with failures injected on purpose, to check what
//! a multi-step write leaves behind when a later step fails. Every call goes to the wrapped store unless a
//! fault is armed for that operation and collection.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use flowhost_core::ports::{DocumentStore, IndexSpec, Page, PortError, Query, Versioned};
use serde_json::Value;

/// Wraps a documents port; [`FaultyDocuments::fail_writes`] makes the next writes to one collection fail with
/// `PortError::Unavailable`, as an outage would.
pub struct FaultyDocuments {
    inner: Arc<dyn DocumentStore>,
    collection: std::sync::Mutex<String>,
    remaining: AtomicU32,
    query_collection: std::sync::Mutex<String>,
    queries_failing: std::sync::atomic::AtomicBool,
    /// A collection whose whole-collection reads (`list`, `find`) fail: what a route must page through the
    /// store's queries instead.
    unscannable: std::sync::Mutex<String>,
}

impl FaultyDocuments {
    pub fn new(inner: Arc<dyn DocumentStore>) -> Arc<FaultyDocuments> {
        Arc::new(FaultyDocuments {
            inner,
            collection: std::sync::Mutex::new(String::new()),
            remaining: AtomicU32::new(0),
            query_collection: std::sync::Mutex::new(String::new()),
            queries_failing: std::sync::atomic::AtomicBool::new(false),
            unscannable: std::sync::Mutex::new(String::new()),
        })
    }

    /// While `failing`, every query of `collection` fails (a source that is down).
    pub fn fail_queries(&self, collection: &str, failing: bool) {
        *self.query_collection.lock().unwrap() = collection.to_owned();
        self.queries_failing.store(failing, Ordering::SeqCst);
    }

    /// From now on `list` and `find` of `collection` fail: a reader must page through `query`.
    pub fn refuse_scans(&self, collection: &str) {
        *self.unscannable.lock().unwrap() = collection.to_owned();
    }

    fn scan(&self, collection: &str) -> Result<(), PortError> {
        if *self.unscannable.lock().unwrap() == collection {
            return Err(PortError::Backend(format!("{collection} is read whole (list or find)")));
        }
        Ok(())
    }

    /// The next `count` writes (insert, replace, upsert) to `collection` fail.
    pub fn fail_writes(&self, collection: &str, count: u32) {
        *self.collection.lock().unwrap() = collection.to_owned();
        self.remaining.store(count, Ordering::SeqCst);
    }

    fn fault(&self, collection: &str) -> Result<(), PortError> {
        if *self.collection.lock().unwrap() != collection {
            return Ok(());
        }
        let armed = self.remaining.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if armed {
            Err(PortError::Unavailable(format!("injected failure writing to {collection}")))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl DocumentStore for FaultyDocuments {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn get(&self, collection: &str, id: &str) -> Result<Option<Value>, PortError> {
        self.inner.get(collection, id).await
    }
    async fn list(&self, collection: &str) -> Result<Vec<Value>, PortError> {
        self.scan(collection)?;
        self.inner.list(collection).await
    }
    async fn query(&self, collection: &str, query: &Query) -> Result<Page, PortError> {
        if self.queries_failing.load(Ordering::SeqCst) && *self.query_collection.lock().unwrap() == collection {
            return Err(PortError::Unavailable(format!("injected failure querying {collection}")));
        }
        self.inner.query(collection, query).await
    }
    async fn get_versioned(&self, collection: &str, id: &str) -> Result<Option<Versioned>, PortError> {
        self.inner.get_versioned(collection, id).await
    }
    async fn replace_if_version(
        &self,
        collection: &str,
        id: &str,
        expected: u64,
        doc: Value,
    ) -> Result<Option<u64>, PortError> {
        self.fault(collection)?;
        self.inner.replace_if_version(collection, id, expected, doc).await
    }
    async fn ensure_index(&self, collection: &str, index: &IndexSpec) -> Result<(), PortError> {
        self.inner.ensure_index(collection, index).await
    }
    async fn drop_index(&self, collection: &str, index: &IndexSpec) -> Result<(), PortError> {
        self.inner.drop_index(collection, index).await
    }
    async fn database(&self, name: &str) -> Result<Arc<dyn DocumentStore>, PortError> {
        self.inner.database(name).await
    }
    async fn find(&self, collection: &str, field: &str, value: &Value) -> Result<Vec<Value>, PortError> {
        self.scan(collection)?;
        self.inner.find(collection, field, value).await
    }
    async fn insert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError> {
        self.fault(collection)?;
        self.inner.insert(collection, id, doc).await
    }
    async fn replace(&self, collection: &str, id: &str, doc: Value) -> Result<bool, PortError> {
        self.fault(collection)?;
        self.inner.replace(collection, id, doc).await
    }
    async fn upsert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError> {
        self.fault(collection)?;
        self.inner.upsert(collection, id, doc).await
    }
    async fn upsert_expiring(
        &self,
        collection: &str,
        id: &str,
        doc: Value,
        expires_at_ms: i64,
    ) -> Result<(), PortError> {
        self.fault(collection)?;
        self.inner.upsert_expiring(collection, id, doc, expires_at_ms).await
    }
    async fn insert_expiring(
        &self,
        collection: &str,
        id: &str,
        doc: Value,
        expires_at_ms: i64,
    ) -> Result<(), PortError> {
        self.fault(collection)?;
        self.inner.insert_expiring(collection, id, doc, expires_at_ms).await
    }
    async fn sweep_expired(&self, collection: &str, now_ms: i64) -> Result<u64, PortError> {
        self.inner.sweep_expired(collection, now_ms).await
    }
    async fn delete(&self, collection: &str, id: &str) -> Result<bool, PortError> {
        self.inner.delete(collection, id).await
    }
    async fn delete_where(&self, collection: &str, field: &str, value: &Value) -> Result<u64, PortError> {
        self.inner.delete_where(collection, field, value).await
    }
    async fn delete_matching(&self, collection: &str, query: &Query) -> Result<u64, PortError> {
        self.inner.delete_matching(collection, query).await
    }
}
