//! The documents port: JSON documents in named collections, keyed by a string id.

use async_trait::async_trait;
use serde_json::Value;

use super::PortError;

/// A store of JSON documents. Every operation is atomic on one document; there are no multi-document
/// transactions (real MongoDB refuses them without a replica set). Lists are sorted by id.
///
/// The store keeps the document body as given; the id is passed separately and is not injected into the body.
///
/// **Expiry.** A document written with [`upsert_expiring`](DocumentStore::upsert_expiring) carries an expiry
/// instant; [`sweep_expired`](DocumentStore::sweep_expired) removes the collection's documents whose expiry has
/// passed. The store has no clock of its own, so reads keep returning an expired document until a sweep (the
/// caller's injected clock supplies "now"); MongoDB's TTL monitor may additionally remove it on its own
/// real-time schedule. `insert`, `replace` and `upsert` store a document without expiry (overwriting an
/// expiring one makes it permanent).
#[async_trait]
pub trait DocumentStore: Send + Sync + 'static {
    /// A short name for logs and `Debug`: `"embedded"`, `"mongodb"`.
    fn backend(&self) -> &'static str;

    async fn get(&self, collection: &str, id: &str) -> Result<Option<Value>, PortError>;

    /// Every document of the collection, sorted by id.
    async fn list(&self, collection: &str) -> Result<Vec<Value>, PortError>;

    /// Documents whose top-level `field` equals `value` (a string, number or boolean), sorted by id.
    async fn find(&self, collection: &str, field: &str, value: &Value) -> Result<Vec<Value>, PortError>;

    /// Stores a new document; `PortError::Conflict` if the id exists.
    async fn insert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError>;

    /// Replaces an existing document; returns false (and stores nothing) when the id does not exist.
    async fn replace(&self, collection: &str, id: &str, doc: Value) -> Result<bool, PortError>;

    /// Stores the document whether or not the id exists.
    async fn upsert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError>;

    /// Stores the document whether or not the id exists (like `upsert`), expiring at `expires_at_ms`
    /// (milliseconds since the Unix epoch): the next `sweep_expired` at or after that instant removes it.
    async fn upsert_expiring(
        &self,
        collection: &str,
        id: &str,
        doc: Value,
        expires_at_ms: i64,
    ) -> Result<(), PortError>;

    /// Removes the collection's documents whose expiry is at or before `now_ms`; returns how many.
    /// Documents without expiry are never removed.
    async fn sweep_expired(&self, collection: &str, now_ms: i64) -> Result<u64, PortError>;

    /// Removes one document; returns whether it existed.
    async fn delete(&self, collection: &str, id: &str) -> Result<bool, PortError>;

    /// Removes every document whose top-level `field` equals `value`; returns how many.
    async fn delete_where(&self, collection: &str, field: &str, value: &Value) -> Result<u64, PortError>;
}
