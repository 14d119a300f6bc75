//! The documents port: JSON documents in named collections, keyed by a string id, with the query value
//! ([`Query`]: filters on dotted field paths, sort, limit/offset, a total count), store-managed versions for
//! compare-and-replace, secondary indexes ([`IndexSpec`]) and logical databases.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::PortError;
use crate::model::is_identifier;

/// Ascending or descending, for a sort key or an index field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Asc,
    Desc,
}

/// One comparison on a field. Values are scalars: `Eq` and `In` take strings, numbers and booleans; the
/// ranges take numbers or strings. Comparisons never cross JSON types: `"5"` neither equals nor exceeds `5`,
/// and a field holding an array or object matches nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    Eq(Value),
    /// Equal to any of the values (an empty list matches nothing).
    In(Vec<Value>),
    Gt(Value),
    Gte(Value),
    Lt(Value),
    Lte(Value),
}

/// A query on one collection: every filter must hold (AND); documents are ordered by the sort keys, then by
/// id in the direction of the last sort key as the tie-breaker (no sort keys: by id ascending), so an index on
/// the filtered and sorted fields read forwards or backwards gives the whole order (see
/// [`Query::tie_break`]); `offset` documents are skipped and at most `limit` returned. Field paths are
/// dot-separated identifiers (`"player.country"`) reaching into nested objects.
///
/// Sort keys should name fields holding one JSON type (numbers or strings); a document missing a sort field
/// sorts first ascending and last descending on both backends.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    pub filters: Vec<(String, Filter)>,
    pub sort: Vec<(String, Direction)>,
    pub limit: Option<u64>,
    pub offset: u64,
    /// Set by [`Query::without_total`]: the caller knows the total, so the store does not count.
    pub skip_total: bool,
}

impl Query {
    pub fn new() -> Query {
        Query::default()
    }

    pub fn filter(mut self, path: &str, filter: Filter) -> Query {
        self.filters.push((path.to_owned(), filter));
        self
    }

    pub fn eq(self, path: &str, value: Value) -> Query {
        self.filter(path, Filter::Eq(value))
    }

    pub fn sort(mut self, path: &str, direction: Direction) -> Query {
        self.sort.push((path.to_owned(), direction));
        self
    }

    pub fn limit(mut self, limit: u64) -> Query {
        self.limit = Some(limit);
        self
    }

    pub fn offset(mut self, offset: u64) -> Query {
        self.offset = offset;
        self
    }

    /// Asks for the page only: [`Page::total`] is then the number of items returned. Counting every match
    /// costs a pass over them (an index range at best), which a caller keeping its own counts need not pay.
    pub fn without_total(mut self) -> Query {
        self.skip_total = true;
        self
    }

    /// The direction ids are ordered in after the sort keys: the last sort key's (ascending without one).
    pub fn tie_break(&self) -> Direction {
        self.sort.last().map_or(Direction::Asc, |(_, direction)| *direction)
    }

    /// Checks every path and value, so both backends refuse the same queries with `PortError::Invalid`.
    pub fn validate(&self) -> Result<(), PortError> {
        for (path, filter) in &self.filters {
            check_path(path)?;
            match filter {
                Filter::Eq(value) => check_scalar(value)?,
                Filter::In(values) => values.iter().try_for_each(check_scalar)?,
                Filter::Gt(value) | Filter::Gte(value) | Filter::Lt(value) | Filter::Lte(value) => {
                    if !(value.is_number() || value.is_string()) {
                        return Err(PortError::Invalid(format!("a range on {path:?} compares a number or string")));
                    }
                }
            }
        }
        self.sort.iter().try_for_each(|(path, _)| check_path(path))
    }
}

/// A dotted path of identifiers: `status`, `player.country`.
pub fn check_path(path: &str) -> Result<(), PortError> {
    if path.split('.').all(is_identifier) {
        Ok(())
    } else {
        Err(PortError::Invalid(format!("field path {path:?} is not dot-separated identifiers")))
    }
}

fn check_scalar(value: &Value) -> Result<(), PortError> {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(()),
        other => Err(PortError::Invalid(format!("cannot compare documents with {other}"))),
    }
}

/// One page of a query: the matching bodies in order, and how many documents matched before limit/offset (the
/// number of items when the query was [`Query::without_total`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub items: Vec<Value>,
    pub total: u64,
}

/// A document body with its store-managed version (see [`DocumentStore::replace_if_version`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned {
    pub version: u64,
    pub body: Value,
}

/// One write of [`DocumentStore::write_many_if_version`]: with `expected` `None` the document is created and
/// must not exist yet; with `Some(version)` it is replaced only while its stored version is still that one.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionedWrite {
    pub id: String,
    pub expected: Option<u64>,
    pub doc: Value,
}

/// A secondary index on a collection: the fields (dotted paths) in order, and whether the combination must be
/// unique. A document missing an indexed field is not constrained by a unique index on the embedded store
/// (SQLite NULLs are distinct), while MongoDB indexes it as `null` (one such document allowed): give unique
/// fields to every document.
///
/// A **sparse** index holds only the documents that have every indexed field (on the embedded store, a field
/// holding `null` counts as missing), so writing any other document costs no update of it: for a field most
/// documents lack, such as the due time of the few runs that wait. Queries answer the same either way; the
/// store picks a sparse index only for a query that filters each indexed field with an equality or a range,
/// which no document without the field can satisfy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    pub fields: Vec<(String, Direction)>,
    pub unique: bool,
    pub sparse: bool,
}

impl IndexSpec {
    /// A plain index on `fields`, each ascending.
    pub fn ascending(fields: &[&str]) -> IndexSpec {
        IndexSpec {
            fields: fields.iter().map(|field| ((*field).to_owned(), Direction::Asc)).collect(),
            unique: false,
            sparse: false,
        }
    }

    /// This index, unique.
    pub fn unique(mut self) -> IndexSpec {
        self.unique = true;
        self
    }

    /// This index, sparse (see the type's documentation).
    pub fn sparse(mut self) -> IndexSpec {
        self.sparse = true;
        self
    }

    pub fn validate(&self) -> Result<(), PortError> {
        if self.fields.is_empty() {
            return Err(PortError::Invalid("an index needs at least one field".into()));
        }
        self.fields.iter().try_for_each(|(path, _)| check_path(path))
    }

    /// A stable name derived from the fields, uniqueness and sparseness, so ensuring the same index twice is a
    /// no-op and a sparse index never takes the name of a full one on the same fields.
    pub fn name(&self) -> String {
        let mut name = String::from(match (self.unique, self.sparse) {
            (false, false) => "ix",
            (true, false) => "ux",
            (false, true) => "sx",
            (true, true) => "usx",
        });
        for (path, direction) in &self.fields {
            name.push('_');
            name.push_str(&path.replace('.', "__"));
            name.push_str(if *direction == Direction::Asc { "_1" } else { "_d" });
        }
        name
    }
}

/// A store of JSON documents. Every operation is atomic on one document; there are no multi-document
/// transactions (real MongoDB refuses them without a replica set). Lists are sorted by id.
///
/// **Versions.** The store numbers every document's writes: `insert` (and an `upsert` creating the document)
/// stores version 1, and every later `replace`, `upsert` or successful `replace_if_version` adds one. The
/// version lives beside the body, never inside it. [`get_versioned`](DocumentStore::get_versioned) reads body
/// and version together; [`replace_if_version`](DocumentStore::replace_if_version) writes only while the stored
/// version is still the expected one, atomically, so of two writers holding the same version exactly one wins.
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

    /// The documents matching `query`, ordered and paged as it says, with the count of all matches.
    async fn query(&self, collection: &str, query: &Query) -> Result<Page, PortError>;

    /// The body and its version; `None` when the id does not exist.
    async fn get_versioned(&self, collection: &str, id: &str) -> Result<Option<Versioned>, PortError>;

    /// The documents of those of `ids` that exist, by id (one round trip where the backend allows).
    async fn get_many(&self, collection: &str, ids: &[String]) -> Result<HashMap<String, Value>, PortError> {
        let found = self.get_many_versioned(collection, ids).await?;
        Ok(found.into_iter().map(|(id, versioned)| (id, versioned.body)).collect())
    }

    /// Which of `ids` exist, without reading their bodies (one round trip where the backend allows): the
    /// redelivery check of a hot path that only needs to know.
    async fn existing(&self, collection: &str, ids: &[String]) -> Result<HashSet<String>, PortError> {
        Ok(self.get_many_versioned(collection, ids).await?.into_keys().collect())
    }

    /// The bodies and versions of those of `ids` that exist, by id (one round trip where the backend allows).
    async fn get_many_versioned(
        &self,
        collection: &str,
        ids: &[String],
    ) -> Result<HashMap<String, Versioned>, PortError> {
        let mut found = HashMap::new();
        for id in ids {
            if let Some(versioned) = self.get_versioned(collection, id).await? {
                found.insert(id.clone(), versioned);
            }
        }
        Ok(found)
    }

    /// Several compare-and-writes (each as [`insert`](DocumentStore::insert) when `expected` is `None`, else as
    /// [`replace_if_version`](DocumentStore::replace_if_version)); per write, in order, its new version or
    /// `None` when it was not written (the document exists already, is missing, or another write got there
    /// first; a unique-index violation counts the same). The embedded store writes them in one transaction;
    /// elsewhere they are independent writes, sent together. `Err` means the store failed: some may be written.
    async fn write_many_if_version(
        &self,
        collection: &str,
        writes: Vec<VersionedWrite>,
    ) -> Result<Vec<Option<u64>>, PortError> {
        let written = writes.into_iter().map(|write| async move {
            match write.expected {
                Some(expected) => self.replace_if_version(collection, &write.id, expected, write.doc).await,
                None => match self.insert(collection, &write.id, write.doc).await {
                    Ok(()) => Ok(Some(1)),
                    Err(PortError::Conflict(_)) => Ok(None),
                    Err(error) => Err(error),
                },
            }
        });
        futures::future::join_all(written).await.into_iter().collect()
    }

    /// Replaces the document only if its stored version is `expected`; returns the new version, or `None` (and
    /// stores nothing) when the document is missing or another write got there first. A unique-index violation
    /// is `PortError::Conflict`.
    async fn replace_if_version(
        &self,
        collection: &str,
        id: &str,
        expected: u64,
        doc: Value,
    ) -> Result<Option<u64>, PortError>;

    /// Creates the index if it does not exist (idempotent). A unique index makes `insert`, `replace` and
    /// `upsert` of a duplicate combination fail with `PortError::Conflict`; creating it over existing duplicates
    /// fails the same way.
    async fn ensure_index(&self, collection: &str, index: &IndexSpec) -> Result<(), PortError>;

    /// Removes the index if it exists (idempotent): one a newer build no longer queries by, so that writes stop
    /// maintaining it in stores an older build created.
    async fn drop_index(&self, collection: &str, index: &IndexSpec) -> Result<(), PortError>;

    /// The store of another logical database (a name of letters, digits and underscores): its collections are
    /// separate from this store's, so the same collection and id in two databases are two documents.
    async fn database(&self, name: &str) -> Result<Arc<dyn DocumentStore>, PortError>;

    /// Documents whose top-level `field` equals `value` (a string, number or boolean), sorted by id.
    async fn find(&self, collection: &str, field: &str, value: &Value) -> Result<Vec<Value>, PortError>;

    /// Stores a new document; `PortError::Conflict` if the id exists.
    async fn insert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError>;

    /// Replaces an existing document; returns false (and stores nothing) when the id does not exist.
    async fn replace(&self, collection: &str, id: &str, doc: Value) -> Result<bool, PortError>;

    /// Stores the document whether or not the id exists.
    async fn upsert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError>;

    /// Upserts several documents (each as [`DocumentStore::upsert`]); the embedded store writes them in one
    /// transaction. Not atomic across documents on every backend: on failure some may be written.
    async fn upsert_many(&self, collection: &str, docs: Vec<(String, Value)>) -> Result<(), PortError> {
        for (id, doc) in docs {
            self.upsert(collection, &id, doc).await?;
        }
        Ok(())
    }

    /// [`upsert_many`](DocumentStore::upsert_many) with each body already serialized as a JSON object, for a
    /// hot-path writer that has typed values: one serialization instead of two (to a `Value`, then to text),
    /// where the backend stores text. A body that is not a JSON object is refused (`Invalid`) before anything is
    /// written.
    async fn upsert_many_json(&self, collection: &str, docs: Vec<(String, String)>) -> Result<(), PortError> {
        let mut parsed = Vec::with_capacity(docs.len());
        for (id, body) in docs {
            match serde_json::from_str::<Value>(&body) {
                Ok(doc @ Value::Object(_)) => parsed.push((id, doc)),
                _ => return Err(PortError::Invalid(format!("the body of {id:?} is not a JSON object"))),
            }
        }
        self.upsert_many(collection, parsed).await
    }

    /// Stores the document whether or not the id exists (like `upsert`), expiring at `expires_at_ms`
    /// (milliseconds since the Unix epoch): the next `sweep_expired` at or after that instant removes it.
    async fn upsert_expiring(
        &self,
        collection: &str,
        id: &str,
        doc: Value,
        expires_at_ms: i64,
    ) -> Result<(), PortError>;

    /// Stores a new document (like `insert`: `PortError::Conflict` if the id exists, and nothing is written),
    /// expiring at `expires_at_ms` as [`upsert_expiring`](DocumentStore::upsert_expiring) does: a write-once
    /// record that a redelivery must find unchanged, stored in one round trip without reading it first.
    async fn insert_expiring(
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

    /// Removes every document matching the filters of `query` (its order and paging are ignored); returns how
    /// many. A retention sweep's tool: index the filtered paths.
    async fn delete_matching(&self, collection: &str, query: &Query) -> Result<u64, PortError>;
}
