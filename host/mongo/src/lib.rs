//! The MongoDB backend of the documents port: [`MongoDocuments`] stores each JSON document in a collection of
//! one database with `_id` set to the document's id and the body's fields beside it, and implements
//! [`DocumentStore`] with single-document operations only (no transactions, which real `mongod` refuses without a
//! replica set). Connection and timeout failures surface as [`PortError::Unavailable`] so callers retry.
//!
//! Expiring documents carry a BSON date in the hidden field `_expires_at`, covered by a TTL index
//! (`expireAfterSeconds: 0`, created once per collection on first use) so MongoDB removes them on its own, while
//! `sweep_expired` deletes by the caller's clock so an injected clock works in tests.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::ports::{DocumentStore, PortError};
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::options::{ClientOptions, IndexOptions};
use mongodb::{Client, Collection, Database, IndexModel};
use serde_json::Value;
use tracing::{debug, warn};

/// The server error code of a unique-index violation (a duplicate `_id` on insert).
const DUPLICATE_KEY: i32 = 11000;

/// How long the driver looks for a usable server before an operation fails as unavailable.
const SERVER_SELECTION_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest one operation may take. The driver has no per-operation socket timeout, so a server that
/// accepts connections but stops answering would otherwise hang the caller (an API request, a reload).
const OPERATION_TIMEOUT: Duration = Duration::from_secs(10);

/// The hidden field holding a document's expiry; stripped from every read.
const EXPIRES_AT: &str = "_expires_at";
/// Name of the TTL index on [`EXPIRES_AT`].
const EXPIRY_INDEX: &str = "flowhost_expiry";

/// JSON documents in the collections of one MongoDB database.
///
/// A document is stored as `{ "_id": id, ...body }`; reads strip `_id` and return the body as given. Bodies must
/// be JSON objects without a top-level `_id` field. Integers stay integers and floats stay floats on the way
/// back. Lists and queries are sorted by `_id`.
#[derive(Clone)]
pub struct MongoDocuments {
    database: Database,
    /// Collections whose TTL index this process already ensured.
    expiry_indexed: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for MongoDocuments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MongoDocuments").field("database", &self.database.name()).finish()
    }
}

impl MongoDocuments {
    /// Connects to `uri` and uses `database`, verifying the connection with a `ping` (fails within about
    /// five seconds when no server answers).
    pub async fn connect(uri: &str, database: &str) -> Result<MongoDocuments, PortError> {
        if database.is_empty() {
            return Err(PortError::Invalid("the MongoDB database name is empty".into()));
        }
        let mut options = ClientOptions::parse(uri)
            .await
            .map_err(|error| map_error(error, "parsing the MongoDB connection string"))?;
        if options.server_selection_timeout.is_none() {
            options.server_selection_timeout = Some(SERVER_SELECTION_TIMEOUT);
        }
        if options.connect_timeout.is_none() {
            options.connect_timeout = Some(CONNECT_TIMEOUT);
        }
        if options.app_name.is_none() {
            options.app_name = Some("flowhost".into());
        }
        let client = Client::with_options(options).map_err(|error| map_error(error, "creating the MongoDB client"))?;
        let database = client.database(database);
        database.run_command(doc! { "ping": 1 }).await.map_err(|error| {
            warn!(%error, database = database.name(), "MongoDB ping failed");
            map_error(error, "pinging MongoDB")
        })?;
        debug!(database = database.name(), "connected to MongoDB");
        Ok(MongoDocuments { database, expiry_indexed: Arc::default() })
    }

    /// The `expireAfterSeconds` of the collection's TTL index on the expiry field, if there is one (for
    /// operators and tests: the index `upsert_expiring` creates says 0).
    pub async fn expiry_index_seconds(&self, collection: &str) -> Result<Option<i64>, PortError> {
        let cursor = match self.collection(collection)?.list_indexes().await {
            Ok(cursor) => cursor,
            // A collection that does not exist has no indexes.
            Err(error) if matches!(error.kind.as_ref(), ErrorKind::Command(c) if c.code == 26) => return Ok(None),
            Err(error) => return Err(map_error(error, "listing indexes")),
        };
        let indexes: Vec<IndexModel> =
            cursor.try_collect().await.map_err(|error| map_error(error, "listing indexes"))?;
        Ok(indexes.into_iter().find(|index| index.keys.contains_key(EXPIRES_AT)).and_then(|index| {
            index.options.and_then(|options| options.expire_after).map(|after| after.as_secs() as i64)
        }))
    }

    /// Creates the TTL index on the expiry field once per collection and process. A failure is logged and
    /// retried on the next write: `sweep_expired` removes expired documents without the index.
    async fn ensure_expiry_index(&self, collection: &Collection<Document>) {
        let name = collection.name().to_owned();
        if self.expiry_indexed.lock().unwrap_or_else(|p| p.into_inner()).contains(&name) {
            return;
        }
        let index = IndexModel::builder()
            .keys(doc! { EXPIRES_AT: 1 })
            .options(IndexOptions::builder().name(EXPIRY_INDEX.to_owned()).expire_after(Duration::ZERO).build())
            .build();
        match collection.create_index(index).await {
            Ok(_) => {
                self.expiry_indexed.lock().unwrap_or_else(|p| p.into_inner()).insert(name);
            }
            Err(error) => warn!(%error, collection = name, "could not create the TTL index; sweeps still expire"),
        }
    }

    fn collection(&self, name: &str) -> Result<Collection<Document>, PortError> {
        if name.is_empty() || name.contains('$') || name.contains('\0') {
            return Err(PortError::Invalid(format!("invalid collection name {name:?}")));
        }
        Ok(self.database.collection::<Document>(name))
    }

    async fn find_sorted(&self, collection: &str, filter: Document, context: &str) -> Result<Vec<Value>, PortError> {
        let cursor = self
            .collection(collection)?
            .find(filter)
            .sort(doc! { "_id": 1 })
            .await
            .map_err(|error| map_error(error, context))?;
        let documents: Vec<Document> = cursor.try_collect().await.map_err(|error| map_error(error, context))?;
        Ok(documents.into_iter().map(to_json).collect())
    }
}

#[async_trait]
impl DocumentStore for MongoDocuments {
    fn backend(&self) -> &'static str {
        "mongodb"
    }

    async fn get(&self, collection: &str, id: &str) -> Result<Option<Value>, PortError> {
        bounded("get", async {
            let found = self
                .collection(collection)?
                .find_one(doc! { "_id": id })
                .await
                .map_err(|error| map_error(error, "reading a document"))?;
            Ok(found.map(to_json))
        })
        .await
    }

    async fn list(&self, collection: &str) -> Result<Vec<Value>, PortError> {
        bounded("list", async { self.find_sorted(collection, Document::new(), "listing documents").await }).await
    }

    async fn find(&self, collection: &str, field: &str, value: &Value) -> Result<Vec<Value>, PortError> {
        bounded("find", async {
            let filter = equality_filter(field, value)?;
            self.find_sorted(collection, filter, "finding documents").await
        })
        .await
    }

    async fn insert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError> {
        bounded("insert", async {
            let document = to_stored(id, doc)?;
            match self.collection(collection)?.insert_one(document).await {
                Ok(_) => Ok(()),
                Err(error) if is_duplicate_key(&error) => {
                    Err(PortError::Conflict(format!("document {id:?} already exists in {collection:?}")))
                }
                Err(error) => Err(map_error(error, "inserting a document")),
            }
        })
        .await
    }

    async fn replace(&self, collection: &str, id: &str, doc: Value) -> Result<bool, PortError> {
        bounded("replace", async {
            let document = to_stored(id, doc)?;
            let result = self
                .collection(collection)?
                .replace_one(doc! { "_id": id }, document)
                .await
                .map_err(|error| map_error(error, "replacing a document"))?;
            Ok(result.matched_count > 0)
        })
        .await
    }

    async fn upsert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError> {
        bounded("upsert", async {
            let document = to_stored(id, doc)?;
            self.collection(collection)?
                .replace_one(doc! { "_id": id }, document)
                .upsert(true)
                .await
                .map_err(|error| map_error(error, "upserting a document"))?;
            Ok(())
        })
        .await
    }

    async fn upsert_expiring(
        &self,
        collection: &str,
        id: &str,
        doc: Value,
        expires_at_ms: i64,
    ) -> Result<(), PortError> {
        bounded("upsert_expiring", async {
            let mut document = to_stored(id, doc)?;
            document.insert(EXPIRES_AT, mongodb::bson::DateTime::from_millis(expires_at_ms));
            let collection = self.collection(collection)?;
            self.ensure_expiry_index(&collection).await;
            collection
                .replace_one(doc! { "_id": id }, document)
                .upsert(true)
                .await
                .map_err(|error| map_error(error, "upserting an expiring document"))?;
            Ok(())
        })
        .await
    }

    async fn sweep_expired(&self, collection: &str, now_ms: i64) -> Result<u64, PortError> {
        bounded("sweep_expired", async {
            let now = mongodb::bson::DateTime::from_millis(now_ms);
            let result = self
                .collection(collection)?
                .delete_many(doc! { EXPIRES_AT: { "$lte": now } })
                .await
                .map_err(|error| map_error(error, "sweeping expired documents"))?;
            Ok(result.deleted_count)
        })
        .await
    }

    async fn delete(&self, collection: &str, id: &str) -> Result<bool, PortError> {
        bounded("delete", async {
            let result = self
                .collection(collection)?
                .delete_one(doc! { "_id": id })
                .await
                .map_err(|error| map_error(error, "deleting a document"))?;
            Ok(result.deleted_count > 0)
        })
        .await
    }

    async fn delete_where(&self, collection: &str, field: &str, value: &Value) -> Result<u64, PortError> {
        bounded("delete_where", async {
            let filter = equality_filter(field, value)?;
            let result = self
                .collection(collection)?
                .delete_many(filter)
                .await
                .map_err(|error| map_error(error, "deleting documents"))?;
            Ok(result.deleted_count)
        })
        .await
    }
}

/// `{ field: value }` for a top-level field and a scalar value.
fn equality_filter(field: &str, value: &Value) -> Result<Document, PortError> {
    if field.is_empty() || field.starts_with('$') || field.contains('.') || field.contains('\0') {
        return Err(PortError::Invalid(format!("{field:?} is not a top-level field name")));
    }
    if field == "_id" {
        return Err(PortError::Invalid("`_id` is not a body field; use the id operations".into()));
    }
    let value = match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => json_to_bson(value)?,
        other => return Err(PortError::Invalid(format!("find compares a string, number or boolean, not {other}"))),
    };
    // A plain `{ field: value }` also matches arrays that contain the value; the port compares the field itself,
    // so arrays are excluded with `$nor` (the MongoDB-compatible test server lacks `$not`, which would read
    // better; `$nor` works on both and keeps the equality itself usable by an index).
    let mut filter = Document::new();
    filter.insert(field, value);
    let mut is_array = Document::new();
    is_array.insert(field, doc! { "$type": "array" });
    filter.insert("$nor", vec![is_array]);
    Ok(filter)
}

fn json_to_bson(value: &Value) -> Result<Bson, PortError> {
    mongodb::bson::to_bson(value)
        .map_err(|error| PortError::Invalid(format!("value cannot be stored in MongoDB: {error}")))
}

/// The stored form: `_id` first, then the body's fields.
fn to_stored(id: &str, body: Value) -> Result<Document, PortError> {
    let Value::Object(fields) = body else {
        return Err(PortError::Invalid(format!("document {id:?} is not a JSON object")));
    };
    if fields.contains_key("_id") {
        return Err(PortError::Invalid(format!(
            "document {id:?} has a top-level `_id` field, which MongoDB reserves for the id"
        )));
    }
    if fields.contains_key(EXPIRES_AT) {
        return Err(PortError::Invalid(format!(
            "document {id:?} has a top-level `{EXPIRES_AT}` field, which the store reserves for expiry"
        )));
    }
    let mut document = Document::new();
    document.insert("_id", id);
    for (key, value) in &fields {
        document.insert(key.as_str(), json_to_bson(value)?);
    }
    Ok(document)
}

/// The body back as JSON: `_id` and the expiry removed, numbers kept as integers or floats as stored.
fn to_json(mut document: Document) -> Value {
    document.remove("_id");
    document.remove(EXPIRES_AT);
    Bson::Document(document).into_relaxed_extjson()
}

fn is_duplicate_key(error: &mongodb::error::Error) -> bool {
    match error.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(write)) => write.code == DUPLICATE_KEY,
        ErrorKind::Command(command) => command.code == DUPLICATE_KEY,
        _ => false,
    }
}

/// Runs one port operation within `OPERATION_TIMEOUT`; an overrun is `Unavailable`, so callers retry or
/// answer 503 instead of waiting forever.
async fn bounded<T>(
    operation: &str,
    work: impl std::future::Future<Output = Result<T, PortError>>,
) -> Result<T, PortError> {
    match tokio::time::timeout(OPERATION_TIMEOUT, work).await {
        Ok(result) => result,
        Err(_) => {
            warn!(operation, timeout_ms = OPERATION_TIMEOUT.as_millis() as u64, "MongoDB did not answer in time");
            Err(PortError::Unavailable(format!("MongoDB did not answer {operation} within {OPERATION_TIMEOUT:?}")))
        }
    }
}

/// Maps a driver error: network, server selection and pool failures are transient (`Unavailable`).
fn map_error(error: mongodb::error::Error, context: &str) -> PortError {
    let transient = matches!(
        error.kind.as_ref(),
        ErrorKind::Io(_)
            | ErrorKind::ServerSelection { .. }
            | ErrorKind::ConnectionPoolCleared { .. }
            | ErrorKind::DnsResolve { .. }
    ) || error.contains_label(mongodb::error::RETRYABLE_WRITE_ERROR)
        || error.contains_label(mongodb::error::RETRYABLE_ERROR);
    match error.kind.as_ref() {
        _ if transient => PortError::Unavailable(format!("{context}: {error}")),
        ErrorKind::InvalidArgument { .. } | ErrorKind::BsonSerialization(_) => {
            // The driver's text describes its internals; callers may show an Invalid message to clients.
            tracing::warn!(%error, context, "MongoDB refused the request");
            PortError::Invalid(format!("{context}: MongoDB refused the value"))
        }
        _ => PortError::Backend(format!("{context}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_form_round_trips_numbers_and_strips_the_id() {
        let body = json!({ "n": 7, "big": 9_007_199_254_740_993_i64, "f": 2.0, "s": "x", "b": true,
                           "nested": { "list": [1, 1.5, null] } });
        let stored = to_stored("a", body.clone()).expect("stored");
        assert_eq!(stored.get_str("_id").ok(), Some("a"));
        assert_eq!(stored.get("n"), Some(&Bson::Int64(7)));
        assert_eq!(stored.get("f"), Some(&Bson::Double(2.0)));
        let back = to_json(stored);
        assert_eq!(back, body);
        assert!(back["f"].is_f64());
        assert!(back["n"].is_i64());
    }

    #[test]
    fn bodies_and_filters_are_validated() {
        assert!(matches!(to_stored("a", json!([1])), Err(PortError::Invalid(_))));
        assert!(matches!(to_stored("a", json!({ "_id": 1 })), Err(PortError::Invalid(_))));
        assert!(matches!(to_stored("a", json!({ "_expires_at": 1 })), Err(PortError::Invalid(_))));
        assert!(matches!(equality_filter("a.b", &json!(1)), Err(PortError::Invalid(_))));
        assert!(matches!(equality_filter("a", &json!({ "x": 1 })), Err(PortError::Invalid(_))));
        assert_eq!(
            equality_filter("a", &json!("x")).expect("filter"),
            doc! { "a": "x", "$nor": [{ "a": { "$type": "array" } }] }
        );
    }
}
