//! Typed documents over the documents port: a [`Document`] says which collection a Rust type lives in, its id
//! and the indexes its queries need; a [`Collection`] reads and writes values of that type, so no domain crate
//! converts between its types and `serde_json::Value` by hand.
//!
//! Conversion failures are one error, [`PortError::Malformed`], logged once where they happen (with the
//! collection and serde's reason): a value that does not encode is never stored as `null`, and a stored document
//! that no longer decodes into its type is an error of that read, not a panic.

use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::ports::{DocumentStore, IndexSpec, PortError, Query};

/// A type stored as one document per value.
pub trait Document: Serialize + DeserializeOwned + Send + Sync {
    /// The collection the values live in.
    const COLLECTION: &'static str;

    /// The value's document id.
    fn id(&self) -> String;

    /// The indexes the collection's queries need; [`Collection::ensure_indexes`] creates them.
    fn indexes() -> Vec<IndexSpec> {
        Vec::new()
    }
}

/// `value` as a document body of `collection`; [`PortError::Malformed`] (logged) when it does not serialize.
pub fn encode<T: Serialize + ?Sized>(collection: &str, value: &T) -> Result<Value, PortError> {
    serde_json::to_value(value).map_err(|error| malformed(collection, "a value does not encode", &error))
}

/// A stored body of `collection` as a `T`; [`PortError::Malformed`] (logged) when it does not fit the type.
pub fn decode<T: DeserializeOwned>(collection: &str, body: Value) -> Result<T, PortError> {
    serde_json::from_value(body).map_err(|error| malformed(collection, "a stored document does not decode", &error))
}

/// Stored bodies of `collection` as `T`s, in order; the first that does not decode is the error.
pub fn decode_all<T: DeserializeOwned>(collection: &str, bodies: Vec<Value>) -> Result<Vec<T>, PortError> {
    bodies.into_iter().map(|body| decode(collection, body)).collect()
}

/// Stored bodies of `collection` as `T`s, in order, leaving out (and logging) those that do not decode: for a
/// listing where one bad row must not hide the others.
pub fn decode_valid<T: DeserializeOwned>(collection: &str, bodies: Vec<Value>) -> Vec<T> {
    bodies
        .into_iter()
        .filter_map(|body| {
            serde_json::from_value(body)
                .inspect_err(|error| tracing::warn!(collection, %error, "a stored document does not decode; skipped"))
                .ok()
        })
        .collect()
}

/// The error of a failed conversion, logged here once.
fn malformed(collection: &str, what: &str, error: &serde_json::Error) -> PortError {
    tracing::error!(collection, %error, "{what}");
    PortError::Malformed(format!("{what} in {collection}: {error}"))
}

/// One page of a typed query: the decoded items in order, and the total the store counted (see
/// [`crate::ports::Page`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TypedPage<T> {
    pub items: Vec<T>,
    pub total: u64,
}

/// The values of one collection, typed.
pub struct Collection<T> {
    store: Arc<dyn DocumentStore>,
    name: String,
    kind: PhantomData<fn() -> T>,
}

impl<T> Clone for Collection<T> {
    fn clone(&self) -> Self {
        Collection { store: self.store.clone(), name: self.name.clone(), kind: PhantomData }
    }
}

impl<T> std::fmt::Debug for Collection<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection").field("name", &self.name).field("backend", &self.store.backend()).finish()
    }
}

impl<T: Document> Collection<T> {
    /// `T`'s collection ([`Document::COLLECTION`]) in `store`.
    pub fn new(store: Arc<dyn DocumentStore>) -> Self {
        Collection::named(store, T::COLLECTION)
    }

    /// `T`'s values in the collection `name` of `store` (tests, or one type kept in several collections).
    pub fn named(store: Arc<dyn DocumentStore>, name: &str) -> Self {
        Collection { store, name: name.to_owned(), kind: PhantomData }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The untyped store under this collection, for what the typed calls do not cover.
    pub fn store(&self) -> &dyn DocumentStore {
        self.store.as_ref()
    }

    /// Creates [`Document::indexes`] (idempotent).
    pub async fn ensure_indexes(&self) -> Result<(), PortError> {
        for index in T::indexes() {
            self.store.ensure_index(&self.name, &index).await?;
        }
        Ok(())
    }

    /// Creates [`Document::indexes`] on `T`'s collection of `store` (for code that holds a store, not a
    /// [`Collection`]).
    pub async fn ensure_indexes_in(store: &dyn DocumentStore) -> Result<(), PortError> {
        for index in T::indexes() {
            store.ensure_index(T::COLLECTION, &index).await?;
        }
        Ok(())
    }

    pub async fn get(&self, id: &str) -> Result<Option<T>, PortError> {
        self.store.get(&self.name, id).await?.map(|body| self.decode(body)).transpose()
    }

    /// The value and its store-managed version (for [`Collection::replace_if_version`]).
    pub async fn get_versioned(&self, id: &str) -> Result<Option<(T, u64)>, PortError> {
        let stored = self.store.get_versioned(&self.name, id).await?;
        stored.map(|stored| Ok((self.decode(stored.body)?, stored.version))).transpose()
    }

    /// Every value, sorted by id.
    pub async fn list(&self) -> Result<Vec<T>, PortError> {
        decode_all(&self.name, self.store.list(&self.name).await?)
    }

    /// The values whose top-level `field` equals `value`, sorted by id.
    pub async fn find(&self, field: &str, value: &Value) -> Result<Vec<T>, PortError> {
        decode_all(&self.name, self.store.find(&self.name, field, value).await?)
    }

    pub async fn query(&self, query: &Query) -> Result<TypedPage<T>, PortError> {
        let page = self.store.query(&self.name, query).await?;
        Ok(TypedPage { items: decode_all(&self.name, page.items)?, total: page.total })
    }

    /// Stores a new value; [`PortError::Conflict`] when its id exists.
    pub async fn insert(&self, value: &T) -> Result<(), PortError> {
        self.store.insert(&self.name, &value.id(), self.encode(value)?).await
    }

    /// Stores the value whether or not its id exists.
    pub async fn upsert(&self, value: &T) -> Result<(), PortError> {
        self.store.upsert(&self.name, &value.id(), self.encode(value)?).await
    }

    /// Upserts several values (one transaction on the embedded store).
    pub async fn upsert_many(&self, values: &[T]) -> Result<(), PortError> {
        let docs = values.iter().map(|value| Ok((value.id(), self.encode(value)?))).collect::<Result<_, _>>()?;
        self.store.upsert_many(&self.name, docs).await
    }

    /// Replaces the stored value while its version is still `expected`: the new version, or `None` (nothing
    /// stored) when it is missing or another write got there first.
    pub async fn replace_if_version(&self, value: &T, expected: u64) -> Result<Option<u64>, PortError> {
        self.store.replace_if_version(&self.name, &value.id(), expected, self.encode(value)?).await
    }

    /// Deletes the value with this id; false when there was none.
    pub async fn delete(&self, id: &str) -> Result<bool, PortError> {
        self.store.delete(&self.name, id).await
    }

    fn encode(&self, value: &T) -> Result<Value, PortError> {
        encode(&self.name, value)
    }

    fn decode(&self, body: Value) -> Result<T, PortError> {
        decode(&self.name, body)
    }
}
