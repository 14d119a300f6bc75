//! The MongoDB backend of the documents port: [`MongoDocuments`] stores each JSON document in a collection of
//! one database with `_id` set to the document's id and the body's fields beside it, and implements
//! [`DocumentStore`] with single-document operations only (no transactions, which real `mongod` refuses without a
//! replica set). Connection and timeout failures surface as [`PortError::Unavailable`] so callers retry.
//!
//! Expiring documents carry a BSON date in the hidden field `_expires_at`, covered by a TTL index
//! (`expireAfterSeconds: 0`, created once per collection on first use) so MongoDB removes them on its own, while
//! `sweep_expired` deletes by the caller's clock so an injected clock works in tests.
//!
//! Versions live in the hidden field `_version` (stripped from reads). `replace_if_version` is one `replaceOne`
//! filtered on `{_id, _version}`, which MongoDB applies atomically to the one document. Plain `replace` and
//! `upsert` cannot increment inside a replacement, so they read the version and write with that version as the
//! filter, retrying when another writer moved it (a compare-and-set loop on one document). Documents written
//! before versions existed have no `_version` and read as version 0.
//!
//! Queries become native filters (`$in`, `$gt`...; MongoDB's comparisons are already type-bracketed, so
//! numbers and strings do not compare with each other), `sort` with `_id` as the tie-breaker, `skip`/`limit`,
//! and `count_documents` for the total; `ensure_index` is `createIndexes` with a name derived from the spec.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::ports::{Direction, DocumentStore, Filter, IndexSpec, Page, PortError, Query, Versioned};
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
/// The hidden field holding a document's version; stripped from every read.
const VERSION: &str = "_version";
/// How often `replace`/`upsert` retry their compare-and-set before reporting the document as too contended.
const WRITE_ATTEMPTS: usize = 64;

/// JSON documents in the collections of one MongoDB database.
///
/// A document is stored as `{ "_id": id, ...body }`; reads strip `_id` and return the body as given. Bodies must
/// be JSON objects without a top-level `_id` field. Integers stay integers and floats stay floats on the way
/// back. Lists and queries are sorted by `_id`.
#[derive(Clone)]
pub struct MongoDocuments {
    client: Client,
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
    /// Removes the documents of `collection` matching `filter`; answers how many.
    async fn delete_many(&self, collection: &str, filter: Document) -> Result<u64, PortError> {
        let result = self
            .collection(collection)?
            .delete_many(filter)
            .await
            .map_err(|error| map_error(error, "deleting documents"))?;
        Ok(result.deleted_count)
    }

    /// Connects to `uri` and uses `database`, verifying the connection with a `ping` (fails within about
    /// five seconds when no server answers).
    pub async fn connect(uri: &str, database: &str) -> Result<MongoDocuments, PortError> {
        let store = MongoDocuments::open(uri, database).await?;
        store.ping().await?;
        debug!(database = store.database.name(), "connected to MongoDB");
        Ok(store)
    }

    /// Uses `database` at `uri` without waiting for a server: the driver connects in the background and keeps
    /// reconnecting, and calls fail with `Unavailable` (after the server selection timeout) while none answers.
    /// Only a malformed connection string or database name fails. A process starts this way while MongoDB is
    /// down and becomes ready when it answers.
    pub async fn open(uri: &str, database: &str) -> Result<MongoDocuments, PortError> {
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
        Ok(MongoDocuments { client, database, expiry_indexed: Arc::default() })
    }

    /// A `ping` of the server (what readiness checks ask).
    pub async fn ping(&self) -> Result<(), PortError> {
        self.database.run_command(doc! { "ping": 1 }).await.map(|_| ()).map_err(|error| {
            warn!(%error, database = self.database.name(), "MongoDB ping failed");
            map_error(error, "pinging MongoDB")
        })
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

    /// `doc` in stored form with its expiry, once the collection's TTL index is ensured.
    async fn expiring(
        &self,
        collection: &str,
        id: &str,
        doc: Value,
        expires_at_ms: i64,
    ) -> Result<Document, PortError> {
        let mut document = to_stored(id, doc)?;
        document.insert(EXPIRES_AT, mongodb::bson::DateTime::from_millis(expires_at_ms));
        self.ensure_expiry_index(&self.collection(collection)?).await;
        Ok(document)
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

    /// The documents of `collection` among `ids`, by id, with only the `projection`'s fields when given (one
    /// `$in` query).
    async fn find_by_ids(
        &self,
        collection: &str,
        ids: &[String],
        projection: Option<Document>,
    ) -> Result<Vec<(String, Document)>, PortError> {
        let mut found = Vec::new();
        if ids.is_empty() {
            return Ok(found);
        }
        let mut cursor = self
            .collection(collection)?
            .find(doc! { "_id": { "$in": ids } })
            .with_options(mongodb::options::FindOptions::builder().projection(projection).build())
            .await
            .map_err(|error| map_error(error, "reading documents"))?;
        while let Some(document) = cursor.try_next().await.map_err(|error| map_error(error, "reading documents"))? {
            let id = document.get_str("_id").map(str::to_owned).unwrap_or_default();
            found.push((id, document));
        }
        Ok(found)
    }

    fn collection(&self, name: &str) -> Result<Collection<Document>, PortError> {
        if name.is_empty() || name.contains('$') || name.contains('\0') {
            return Err(PortError::Invalid(format!("invalid collection name {name:?}")));
        }
        Ok(self.database.collection::<Document>(name))
    }

    /// The stored version of a document (0 for one written before versions existed), or `None` if absent.
    async fn current_version(&self, collection: &Collection<Document>, id: &str) -> Result<Option<u64>, PortError> {
        let found = collection
            .find_one(doc! { "_id": id })
            .projection(doc! { VERSION: 1 })
            .await
            .map_err(|error| map_error(error, "reading a document version"))?;
        Ok(found.map(|document| version_of(&document)))
    }

    /// Stores `document` (already in stored form) as version 1 of a new document; `Conflict` when the id (or a
    /// unique field) exists.
    async fn insert_new(&self, collection: &str, id: &str, mut document: Document) -> Result<(), PortError> {
        document.insert(VERSION, 1_i64);
        match self.collection(collection)?.insert_one(document).await {
            Ok(_) => Ok(()),
            Err(error) if is_duplicate_key(&error) => {
                Err(PortError::Conflict(format!("document {id:?} or a unique field exists in {collection:?}")))
            }
            Err(error) => Err(map_error(error, "inserting a document")),
        }
    }

    /// Stores `document` (already in stored form) with the next version, creating it only when `create`.
    /// Returns whether something was written (false: absent and not `create`).
    async fn write_next_version(
        &self,
        collection: &str,
        id: &str,
        mut document: Document,
        create: bool,
    ) -> Result<bool, PortError> {
        let collection = self.collection(collection)?;
        for _ in 0..WRITE_ATTEMPTS {
            match self.current_version(&collection, id).await? {
                None if !create => return Ok(false),
                None => {
                    document.insert(VERSION, 1_i64);
                    match collection.insert_one(document.clone()).await {
                        Ok(_) => return Ok(true),
                        // Either another writer created the id (loop: now it is a replacement) or a unique
                        // index refused the body (the next round finds no document again and says so).
                        Err(error) if is_duplicate_key(&error) => {
                            if self.current_version(&collection, id).await?.is_none() {
                                return Err(unique_conflict(id));
                            }
                        }
                        Err(error) => return Err(map_error(error, "writing a document")),
                    }
                }
                Some(version) => {
                    document.insert(VERSION, (version + 1) as i64);
                    let result = collection
                        .replace_one(version_filter(id, version), document.clone())
                        .await
                        .map_err(|error| write_error(error, id, "writing a document"))?;
                    if result.matched_count > 0 {
                        return Ok(true);
                    }
                }
            }
        }
        Err(PortError::Unavailable(format!("document {id:?} changed on every one of {WRITE_ATTEMPTS} attempts")))
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

    async fn existing(&self, collection: &str, ids: &[String]) -> Result<std::collections::HashSet<String>, PortError> {
        bounded("existing", async {
            let found = self.find_by_ids(collection, ids, Some(doc! { "_id": 1 })).await?;
            Ok(found.into_iter().map(|(id, _)| id).collect())
        })
        .await
    }

    async fn get_many_versioned(
        &self,
        collection: &str,
        ids: &[String],
    ) -> Result<std::collections::HashMap<String, Versioned>, PortError> {
        bounded("get_many", async {
            let found = self.find_by_ids(collection, ids, None).await?;
            Ok(found
                .into_iter()
                .map(|(id, document)| (id, Versioned { version: version_of(&document), body: to_json(document) }))
                .collect())
        })
        .await
    }

    async fn get_versioned(&self, collection: &str, id: &str) -> Result<Option<Versioned>, PortError> {
        bounded("get_versioned", async {
            let found = self
                .collection(collection)?
                .find_one(doc! { "_id": id })
                .await
                .map_err(|error| map_error(error, "reading a document"))?;
            Ok(found.map(|document| Versioned { version: version_of(&document), body: to_json(document) }))
        })
        .await
    }

    async fn replace_if_version(
        &self,
        collection: &str,
        id: &str,
        expected: u64,
        doc: Value,
    ) -> Result<Option<u64>, PortError> {
        bounded("replace_if_version", async {
            let mut document = to_stored(id, doc)?;
            document.insert(VERSION, (expected + 1) as i64);
            let result = self
                .collection(collection)?
                .replace_one(version_filter(id, expected), document)
                .await
                .map_err(|error| write_error(error, id, "replacing a document"))?;
            Ok((result.matched_count > 0).then_some(expected + 1))
        })
        .await
    }

    async fn query(&self, collection: &str, query: &Query) -> Result<Page, PortError> {
        bounded("query", async {
            query.validate()?;
            let filter = query_filter(query)?;
            let collection = self.collection(collection)?;
            let total = if query.skip_total {
                None
            } else {
                let counted = collection
                    .count_documents(filter.clone())
                    .await
                    .map_err(|error| map_error(error, "counting documents"))?;
                Some(counted)
            };
            let mut sort = Document::new();
            for (path, direction) in &query.sort {
                sort.insert(path.as_str(), if *direction == Direction::Asc { 1 } else { -1 });
            }
            sort.insert("_id", if query.tie_break() == Direction::Asc { 1 } else { -1 });
            let mut find = collection.find(filter).sort(sort);
            if query.offset > 0 {
                find = find.skip(query.offset);
            }
            if let Some(limit) = query.limit {
                if limit == 0 {
                    return Ok(Page { items: Vec::new(), total: total.unwrap_or(0) });
                }
                find = find.limit(i64::try_from(limit).unwrap_or(i64::MAX));
            }
            let cursor = find.await.map_err(|error| map_error(error, "querying documents"))?;
            let documents: Vec<Document> =
                cursor.try_collect().await.map_err(|error| map_error(error, "querying documents"))?;
            let total = total.unwrap_or(documents.len() as u64);
            Ok(Page { items: documents.into_iter().map(to_json).collect(), total })
        })
        .await
    }

    async fn ensure_index(&self, collection: &str, index: &IndexSpec) -> Result<(), PortError> {
        bounded("ensure_index", async {
            index.validate()?;
            let mut keys = Document::new();
            for (path, direction) in &index.fields {
                keys.insert(path.as_str(), if *direction == Direction::Asc { 1 } else { -1 });
            }
            // A sparse index holds the documents that have every field: a partial index (MongoDB's `sparse`
            // option, on a compound index, keeps a document that has any one of them).
            let present = index.sparse.then(|| {
                index.fields.iter().map(|(path, _)| (path.clone(), Bson::Document(doc! {"$exists": true}))).collect()
            });
            let options =
                IndexOptions::builder().name(index.name()).unique(index.unique).partial_filter_expression(present);
            let model = IndexModel::builder().keys(keys).options(options.build()).build();
            match self.collection(collection)?.create_index(model).await {
                Ok(_) => Ok(()),
                Err(error) if is_duplicate_key(&error) => Err(PortError::Conflict(format!(
                    "collection {collection:?} already holds duplicates for the unique index {}",
                    index.name()
                ))),
                Err(error) => Err(map_error(error, "creating an index")),
            }
        })
        .await
    }

    async fn drop_index(&self, collection: &str, index: &IndexSpec) -> Result<(), PortError> {
        bounded("drop_index", async {
            index.validate()?;
            match self.collection(collection)?.drop_index(index.name()).await {
                Ok(()) => Ok(()),
                // The collection (26, NamespaceNotFound) or the index (27, IndexNotFound) does not exist.
                Err(error) if matches!(error.kind.as_ref(), ErrorKind::Command(c) if matches!(c.code, 26 | 27)) => {
                    Ok(())
                }
                Err(error) => Err(map_error(error, "dropping an index")),
            }
        })
        .await
    }

    async fn database(&self, name: &str) -> Result<Arc<dyn DocumentStore>, PortError> {
        if !flowhost_core::model::is_identifier(name) {
            return Err(PortError::Invalid(format!("database name {name:?} is not an identifier")));
        }
        Ok(Arc::new(MongoDocuments {
            client: self.client.clone(),
            database: self.client.database(name),
            expiry_indexed: Arc::default(),
        }))
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
        bounded("insert", async { self.insert_new(collection, id, to_stored(id, doc)?).await }).await
    }

    async fn replace(&self, collection: &str, id: &str, doc: Value) -> Result<bool, PortError> {
        bounded("replace", async { self.write_next_version(collection, id, to_stored(id, doc)?, false).await }).await
    }

    async fn upsert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError> {
        bounded("upsert", async {
            self.write_next_version(collection, id, to_stored(id, doc)?, true).await?;
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
            let document = self.expiring(collection, id, doc, expires_at_ms).await?;
            self.write_next_version(collection, id, document, true).await?;
            Ok(())
        })
        .await
    }

    async fn insert_expiring(
        &self,
        collection: &str,
        id: &str,
        doc: Value,
        expires_at_ms: i64,
    ) -> Result<(), PortError> {
        bounded("insert_expiring", async {
            let document = self.expiring(collection, id, doc, expires_at_ms).await?;
            self.insert_new(collection, id, document).await
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
        bounded("delete_where", async { self.delete_many(collection, equality_filter(field, value)?).await }).await
    }

    async fn delete_matching(&self, collection: &str, query: &Query) -> Result<u64, PortError> {
        bounded("delete_matching", async {
            query.validate()?;
            self.delete_many(collection, query_filter(query)?).await
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

/// The filter of a query: one operator document per path (`{ path: value }` for a lone equality, which the
/// compatible test server handles best), repeated operators on a path in `$and`, and a `$nor` excluding arrays
/// at every filtered path (a plain condition would also match an array containing the value).
fn query_filter(query: &Query) -> Result<Document, PortError> {
    let mut per_path: Vec<(String, Document)> = Vec::new();
    let mut extra: Vec<Document> = Vec::new();
    for (path, filter) in &query.filters {
        let (operator, value) = match filter {
            Filter::Eq(value) => ("$eq", json_to_bson(value)?),
            Filter::In(values) => ("$in", Bson::Array(values.iter().map(json_to_bson).collect::<Result<Vec<_>, _>>()?)),
            Filter::Gt(value) => ("$gt", json_to_bson(value)?),
            Filter::Gte(value) => ("$gte", json_to_bson(value)?),
            Filter::Lt(value) => ("$lt", json_to_bson(value)?),
            Filter::Lte(value) => ("$lte", json_to_bson(value)?),
        };
        match per_path.iter_mut().find(|(p, _)| p == path) {
            Some((_, operators)) if !operators.contains_key(operator) => {
                operators.insert(operator, value);
            }
            Some(_) => extra.push(doc! { path.as_str(): { operator: value } }),
            None => per_path.push((path.clone(), doc! { operator: value })),
        }
    }
    let mut filter = Document::new();
    let mut arrays = Vec::new();
    for (path, operators) in per_path {
        arrays.push(doc! { path.as_str(): { "$type": "array" } });
        if operators.len() == 1 && operators.contains_key("$eq") {
            filter.insert(path, operators.get("$eq").cloned().unwrap_or(Bson::Null));
        } else {
            filter.insert(path, operators);
        }
    }
    if !extra.is_empty() {
        filter.insert("$and", extra);
    }
    if !arrays.is_empty() {
        filter.insert("$nor", arrays);
    }
    Ok(filter)
}

/// Matches the document at exactly `version` (0: a document written before versions existed).
fn version_filter(id: &str, version: u64) -> Document {
    if version == 0 {
        doc! { "_id": id, VERSION: { "$exists": false } }
    } else {
        doc! { "_id": id, VERSION: version as i64 }
    }
}

fn version_of(document: &Document) -> u64 {
    match document.get(VERSION) {
        Some(Bson::Int64(v)) => *v as u64,
        Some(Bson::Int32(v)) => *v as u64,
        Some(Bson::Double(v)) => *v as u64,
        _ => 0,
    }
}

fn unique_conflict(id: &str) -> PortError {
    PortError::Conflict(format!("a unique index refused document {id:?}"))
}

/// A write's error: a duplicate key (only a secondary unique index can cause one on a replacement) is a
/// conflict.
fn write_error(error: mongodb::error::Error, id: &str, context: &str) -> PortError {
    if is_duplicate_key(&error) {
        unique_conflict(id)
    } else {
        map_error(error, context)
    }
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
    if fields.contains_key(VERSION) {
        return Err(PortError::Invalid(format!(
            "document {id:?} has a top-level `{VERSION}` field, which the store reserves for versions"
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
    document.remove(VERSION);
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
