//! The documents port on SQLite: one row per document, the body as JSON text, a store-managed `version`
//! (1 on creation, +1 on every write) and an optional expiry instant (`expires_at_ms`, NULL for permanent
//! documents) that `sweep_expired` deletes by. Reads do not filter on expiry: the store has no clock, the
//! caller's sweep decides.
//!
//! Queries compile to SQL over `json_extract`. SQLite compares values by storage class (every number sorts
//! below every text), so each comparison is guarded by `json_type` to keep JSON types apart: `"5"` never
//! equals or exceeds `5`, and arrays and objects match nothing. Field paths are checked identifiers, so they
//! (and the collection name, quoted) are written into the SQL as literals: that lets the planner match the
//! expression indexes `ensure_index` creates, which are partial indexes on one collection
//! (`WHERE collection = '<name>'`) so a unique index constrains only its own collection.
//!
//! Reads go to the reader pool (see `sqlite.rs`) and do not wait for writers; logical databases are separate
//! SQLite files beside the main one, so their writes do not contend for the same write lock either.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use flowhost_core::model::is_identifier;
use flowhost_core::ports::{
    Direction, DocumentStore, Filter, IndexSpec, Page, PortError, Query, Versioned, VersionedWrite,
};
use rusqlite::{params, params_from_iter, types::Value as SqlValue, OptionalExtension};
use serde_json::Value;

use crate::sqlite::Db;

/// The logical databases of one data directory, opened once each and shared by every handle.
pub(crate) struct Databases {
    dir: PathBuf,
    opened: Mutex<HashMap<String, Arc<SqliteDocuments>>>,
}

impl Databases {
    pub(crate) fn new(dir: PathBuf) -> Arc<Databases> {
        Arc::new(Databases { dir, opened: Mutex::new(HashMap::new()) })
    }

    /// The database `name`, in the file `documents-<name>.db` of the data directory.
    fn open(self: &Arc<Self>, name: &str) -> Result<Arc<SqliteDocuments>, PortError> {
        if !is_identifier(name) {
            return Err(PortError::Invalid(format!("database name {name:?} is not an identifier")));
        }
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(store) = opened.get(name) {
            return Ok(store.clone());
        }
        let db = Db::open(&self.dir.join(format!("documents-{name}.db")))?;
        let store = Arc::new(SqliteDocuments::new(db, self.clone()));
        opened.insert(name.to_owned(), store.clone());
        Ok(store)
    }
}

pub(crate) struct SqliteDocuments {
    db: Db,
    databases: Arc<Databases>,
}

impl SqliteDocuments {
    pub(crate) fn new(db: Db, databases: Arc<Databases>) -> Self {
        Self { db, databases }
    }

    /// `columns` of the documents of `collection` among `ids`, each row read by `row`: one query per chunk of
    /// ids, well under SQLite's limit of bound parameters, on a reader connection.
    async fn select_by_ids<T, R>(
        &self,
        columns: &'static str,
        collection: &str,
        ids: &[String],
        row: R,
    ) -> Result<Vec<T>, PortError>
    where
        T: Send + 'static,
        R: Fn(&rusqlite::Row<'_>) -> Result<T, rusqlite::Error> + Send + 'static,
    {
        let collection = collection.to_owned();
        let ids = ids.to_vec();
        self.db
            .read(move |c| {
                let mut found = Vec::new();
                for chunk in ids.chunks(500) {
                    let marks = vec!["?"; chunk.len()].join(", ");
                    let sql = format!("SELECT {columns} FROM documents WHERE collection = ? AND id IN ({marks})");
                    let mut statement = c.prepare_cached(&sql)?;
                    let parameters = std::iter::once(&collection).chain(chunk.iter());
                    for value in statement.query_map(params_from_iter(parameters), &row)? {
                        found.push(value?);
                    }
                }
                Ok(found)
            })
            .await
    }

    /// Upserts `(id, JSON text)` rows in one write: all or none, in one commit.
    async fn write_rows(&self, collection: &str, rows: Vec<(String, String)>) -> Result<(), PortError> {
        if rows.is_empty() {
            return Ok(());
        }
        let collection = collection.to_owned();
        self.db
            .write(move |c| {
                let mut statement = c.prepare_cached(
                    "INSERT INTO documents (collection, id, body, expires_at_ms, version) VALUES (?1, ?2, ?3, NULL, 1)
                     ON CONFLICT (collection, id) DO UPDATE SET body = excluded.body,
                         expires_at_ms = NULL, version = version + 1",
                )?;
                for (id, body) in &rows {
                    statement.execute(params![collection, id, body])?;
                }
                Ok(())
            })
            .await
    }
}

fn parse(body: String) -> Result<Value, rusqlite::Error> {
    serde_json::from_str(&body).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// The collection as a quoted SQL literal (for partial-index matching; see the module docs).
fn collection_literal(collection: &str) -> Result<String, PortError> {
    if collection.is_empty() || collection.contains('\0') {
        return Err(PortError::Invalid(format!("invalid collection name {collection:?}")));
    }
    Ok(format!("'{}'", collection.replace('\'', "''")))
}

/// The statement reading `query`'s page of the collection (`literal`) whose conditions are `clause`.
fn page_sql(literal: &str, clause: &str, query: &Query) -> String {
    let limit = query.limit.map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
    let offset = i64::try_from(query.offset).unwrap_or(i64::MAX);
    format!(
        "SELECT body FROM documents WHERE collection = {literal}{clause} ORDER BY {} LIMIT {limit} OFFSET {offset}",
        order_by(query)
    )
}

/// The SQL name (quoted) of `index` on `collection`: the collection's bytes in hex and the index's own name, so
/// two collections' indexes never share one; `_id` at the end of a non-unique index's, whose keys end with the
/// documents' id (see [`DocumentStore::ensure_index`]).
fn index_name(collection: &str, index: &IndexSpec) -> String {
    let name = legacy_index_name(collection, index);
    if index.unique {
        name
    } else {
        format!("{}_id\"", name.trim_end_matches('"'))
    }
}

/// The name older builds gave `index`: without the `_id` of a non-unique index's key on the id.
fn legacy_index_name(collection: &str, index: &IndexSpec) -> String {
    let hex: String = collection.bytes().map(|b| format!("{b:02x}")).collect();
    format!("\"doc_{hex}_{}\"", index.name())
}

/// `json_extract(body, '$.a.b')` for a checked path; the exact text the expression indexes use.
fn extract(path: &str) -> String {
    format!("json_extract(body, '$.{path}')")
}

fn number(value: &serde_json::Number) -> SqlValue {
    match value.as_i64() {
        Some(i) => SqlValue::Integer(i),
        None => SqlValue::Real(value.as_f64().unwrap_or(f64::NAN)),
    }
}

/// Whether an equality with this text needs the `json_type` guard. `json_extract` answers a JSON string as its
/// text, a number as a number, `true`/`false` as 1/0 and an array or object as its JSON text, which starts with
/// `[` or `{`. SQLite never finds a number equal to a text, so only a text starting with `[` or `{` could match a
/// value of another JSON type; every other text compares exactly without the guard, which lets an expression
/// index answer the comparison alone (no read of the body per candidate row).
fn text_needs_guard(text: &str) -> bool {
    text.starts_with('[') || text.starts_with('{')
}

/// One type-guarded comparison of the field at `path` with a scalar, appending its parameter. The comparison
/// comes first so the (index-usable) value test filters before the type test runs.
fn compare(path: &str, operator: &str, value: &Value, parameters: &mut Vec<SqlValue>) -> String {
    let kind = format!("json_type(body, '$.{path}')");
    match value {
        Value::Bool(b) if operator == "=" => format!("{kind} = '{b}'"),
        Value::String(s) if operator == "=" && !text_needs_guard(s) => {
            parameters.push(SqlValue::Text(s.clone()));
            format!("{} = ?", extract(path))
        }
        Value::String(s) => {
            parameters.push(SqlValue::Text(s.clone()));
            format!("({} {operator} ? AND {kind} = 'text')", extract(path))
        }
        Value::Number(n) => {
            parameters.push(number(n));
            format!("({} {operator} ? AND {kind} IN ('integer', 'real'))", extract(path))
        }
        // `Query::validate` refused everything else.
        _ => "0".to_owned(),
    }
}

/// Membership in a list of scalars: one `IN (...)` per kind of value (texts that need no guard, texts that do,
/// numbers, booleans), so a list of any length is a handful of terms (SQLite refuses expressions nested more
/// than 1000 deep, which a chain of alternatives would be).
fn member(path: &str, values: &[Value], parameters: &mut Vec<SqlValue>) -> String {
    let (mut plain, mut guarded, mut numbers, mut booleans) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for value in values {
        match value {
            Value::String(s) if text_needs_guard(s) => guarded.push(SqlValue::Text(s.clone())),
            Value::String(s) => plain.push(SqlValue::Text(s.clone())),
            Value::Number(n) => numbers.push(number(n)),
            Value::Bool(b) => booleans.push(format!("'{b}'")),
            // `Query::validate` refused everything else.
            _ => {}
        }
    }
    let kind = format!("json_type(body, '$.{path}')");
    let mut alternatives = Vec::new();
    let mut list = |values: Vec<SqlValue>, guard: &str, parameters: &mut Vec<SqlValue>| {
        if values.is_empty() {
            return;
        }
        let marks = vec!["?"; values.len()].join(", ");
        parameters.extend(values);
        alternatives.push(format!("({} IN ({marks}){guard})", extract(path)));
    };
    list(plain, "", parameters);
    list(guarded, &format!(" AND {kind} = 'text'"), parameters);
    list(numbers, &format!(" AND {kind} IN ('integer', 'real')"), parameters);
    if !booleans.is_empty() {
        alternatives.push(format!("{kind} IN ({})", booleans.join(", ")));
    }
    if alternatives.is_empty() {
        return "0".to_owned();
    }
    format!("({})", alternatives.join(" OR "))
}

/// The WHERE clause (without the collection term) and its parameters.
fn conditions(query: &Query) -> (String, Vec<SqlValue>) {
    let mut parameters = Vec::new();
    let mut terms = Vec::new();
    for (path, filter) in &query.filters {
        let term = match filter {
            Filter::Eq(value) => compare(path, "=", value, &mut parameters),
            Filter::In(values) => member(path, values, &mut parameters),
            Filter::Gt(value) => compare(path, ">", value, &mut parameters),
            Filter::Gte(value) => compare(path, ">=", value, &mut parameters),
            Filter::Lt(value) => compare(path, "<", value, &mut parameters),
            Filter::Lte(value) => compare(path, "<=", value, &mut parameters),
        };
        terms.push(term);
    }
    let clause = terms.iter().map(|term| format!(" AND {term}")).collect::<String>();
    (clause, parameters)
}

fn order_by(query: &Query) -> String {
    let mut keys: Vec<String> = query
        .sort
        .iter()
        .map(|(path, direction)| {
            format!("{} {}", extract(path), if *direction == Direction::Asc { "ASC" } else { "DESC" })
        })
        .collect();
    keys.push(format!("id {}", if query.tie_break() == Direction::Asc { "ASC" } else { "DESC" }));
    keys.join(", ")
}

/// The top-level field equality of `find`/`delete_where` as a query, with their validation.
fn field_query(field: &str, value: &Value) -> Result<Query, PortError> {
    if !is_identifier(field) {
        return Err(PortError::Invalid(format!("field name {field:?} is not an identifier")));
    }
    let query = Query::new().eq(field, value.clone());
    query.validate()?;
    Ok(query)
}

/// The parameters of a document row: `?1` collection, `?2` id, `?3` body, `?4` expiry.
fn row(collection: &str, id: &str, doc: &Value, expires_at_ms: Option<i64>) -> Vec<SqlValue> {
    vec![collection.to_owned().into(), id.to_owned().into(), doc.to_string().into(), expires_at_ms.into()]
}

impl SqliteDocuments {
    /// Inserts or overwrites a document with the given expiry (`None`: permanent), counting the version up.
    async fn write(&self, collection: &str, id: &str, doc: Value, expires_at_ms: Option<i64>) -> Result<(), PortError> {
        self.db
            .write_statement(
                "INSERT INTO documents (collection, id, body, expires_at_ms, version) VALUES (?1, ?2, ?3, ?4, 1)
                 ON CONFLICT (collection, id) DO UPDATE SET body = excluded.body,
                     expires_at_ms = excluded.expires_at_ms, version = version + 1",
                row(collection, id, &doc, expires_at_ms),
            )
            .await?;
        Ok(())
    }

    /// Stores a new document, or `Conflict` when the id exists. The existing id is answered without a failing
    /// statement: redeliveries hit it, and a failed statement costs SQLite the undo of its changes.
    async fn insert_new(
        &self,
        collection: &str,
        id: &str,
        doc: Value,
        expires_at_ms: Option<i64>,
    ) -> Result<(), PortError> {
        let inserted = self
            .db
            .write_statement(
                "INSERT INTO documents (collection, id, body, expires_at_ms, version) VALUES (?1, ?2, ?3, ?4, 1)
                 ON CONFLICT (collection, id) DO NOTHING",
                row(collection, id, &doc, expires_at_ms),
            )
            .await?;
        if inserted == 0 {
            return Err(PortError::Conflict(format!("document {id:?} exists in {collection:?}")));
        }
        Ok(())
    }

    /// Runs the query; `count` says whether to compute the total (`list`/`find` do not need it, nor does a query
    /// `without_total`; counting costs a second pass over the matches).
    async fn run_query(&self, collection: &str, query: &Query, count: bool) -> Result<Page, PortError> {
        query.validate()?;
        let literal = collection_literal(collection)?;
        let (clause, parameters) = conditions(query);
        let count_sql = (count && !query.skip_total)
            .then(|| format!("SELECT COUNT(*) FROM documents WHERE collection = {literal}{clause}"));
        let page_sql = page_sql(&literal, &clause, query);
        self.db
            .read(move |c| {
                // One read transaction: the count and the page see the same snapshot.
                let transaction = c.transaction()?;
                let total = match &count_sql {
                    Some(count_sql) => Some(
                        transaction
                            .prepare_cached(count_sql)?
                            .query_row(params_from_iter(&parameters), |row| row.get::<_, i64>(0))?,
                    ),
                    None => None,
                };
                let items = {
                    let mut statement = transaction.prepare_cached(&page_sql)?;
                    let rows = statement.query_map(params_from_iter(&parameters), |row| row.get::<_, String>(0))?;
                    rows.map(|body| parse(body?)).collect::<Result<Vec<_>, _>>()?
                };
                transaction.finish()?;
                let total = total.map_or(items.len() as u64, |total| total as u64);
                Ok(Page { items, total })
            })
            .await
    }
}

#[async_trait]
impl DocumentStore for SqliteDocuments {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    async fn get(&self, collection: &str, id: &str) -> Result<Option<Value>, PortError> {
        Ok(self.get_versioned(collection, id).await?.map(|versioned| versioned.body))
    }

    async fn existing(&self, collection: &str, ids: &[String]) -> Result<HashSet<String>, PortError> {
        // Answered from the `(collection, id)` index alone.
        let rows = self.select_by_ids("id", collection, ids, |row| row.get::<_, String>(0)).await?;
        Ok(rows.into_iter().collect())
    }

    async fn get_many_versioned(
        &self,
        collection: &str,
        ids: &[String],
    ) -> Result<HashMap<String, Versioned>, PortError> {
        let rows = self
            .select_by_ids("id, body, version", collection, ids, |row| {
                let body = parse(row.get::<_, String>(1)?)?;
                Ok((row.get::<_, String>(0)?, Versioned { version: row.get::<_, i64>(2)? as u64, body }))
            })
            .await?;
        Ok(rows.into_iter().collect())
    }

    async fn get_versioned(&self, collection: &str, id: &str) -> Result<Option<Versioned>, PortError> {
        let (collection, id) = (collection.to_owned(), id.to_owned());
        self.db
            .read_point(move |c| {
                let row: Option<(String, i64)> = c
                    .prepare_cached("SELECT body, version FROM documents WHERE collection = ?1 AND id = ?2")?
                    .query_row(params![collection, id], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()?;
                row.map(|(body, version)| Ok(Versioned { version: version as u64, body: parse(body)? })).transpose()
            })
            .await
    }

    async fn list(&self, collection: &str) -> Result<Vec<Value>, PortError> {
        Ok(self.run_query(collection, &Query::new(), false).await?.items)
    }

    async fn query(&self, collection: &str, query: &Query) -> Result<Page, PortError> {
        self.run_query(collection, query, true).await
    }

    async fn find(&self, collection: &str, field: &str, value: &Value) -> Result<Vec<Value>, PortError> {
        Ok(self.run_query(collection, &field_query(field, value)?, false).await?.items)
    }

    async fn insert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError> {
        self.insert_new(collection, id, doc, None).await
    }

    async fn replace(&self, collection: &str, id: &str, doc: Value) -> Result<bool, PortError> {
        let changed = self
            .db
            .write_statement(
                "UPDATE documents SET body = ?3, expires_at_ms = NULL, version = version + 1
                 WHERE collection = ?1 AND id = ?2",
                vec![collection.to_owned().into(), id.to_owned().into(), doc.to_string().into()],
            )
            .await?;
        Ok(changed > 0)
    }

    async fn replace_if_version(
        &self,
        collection: &str,
        id: &str,
        expected: u64,
        doc: Value,
    ) -> Result<Option<u64>, PortError> {
        let (collection, id, body) = (collection.to_owned(), id.to_owned(), doc.to_string());
        let expected = i64::try_from(expected).unwrap_or(i64::MAX);
        self.db
            .write(move |c| {
                // One statement: the version check and the write cannot be split by another writer.
                let version: Option<i64> = c
                    .prepare_cached(
                        "UPDATE documents SET body = ?3, expires_at_ms = NULL, version = version + 1
                         WHERE collection = ?1 AND id = ?2 AND version = ?4 RETURNING version",
                    )?
                    .query_row(params![collection, id, body, expected], |row| row.get(0))
                    .optional()?;
                Ok(version.map(|version| version as u64))
            })
            .await
    }

    async fn write_many_if_version(
        &self,
        collection: &str,
        writes: Vec<VersionedWrite>,
    ) -> Result<Vec<Option<u64>>, PortError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let collection = collection.to_owned();
        let rows: Vec<(String, Option<i64>, String)> = writes
            .into_iter()
            .map(|write| {
                (write.id, write.expected.map(|v| i64::try_from(v).unwrap_or(i64::MAX)), write.doc.to_string())
            })
            .collect();
        self.db
            .write(move |c| {
                // One write: one commit for the whole batch; each write still compares on its own.
                let mut written = Vec::with_capacity(rows.len());
                {
                    let mut insert = c.prepare_cached(
                        "INSERT INTO documents (collection, id, body, version) VALUES (?1, ?2, ?3, 1)
                         ON CONFLICT DO NOTHING RETURNING version",
                    )?;
                    let mut replace = c.prepare_cached(
                        "UPDATE documents SET body = ?3, expires_at_ms = NULL, version = version + 1
                         WHERE collection = ?1 AND id = ?2 AND version = ?4 RETURNING version",
                    )?;
                    for (id, expected, body) in &rows {
                        let version: Option<i64> = match expected {
                            None => insert.query_row(params![collection, id, body], |row| row.get(0)).optional()?,
                            Some(expected) => replace
                                .query_row(params![collection, id, body, expected], |row| row.get(0))
                                .optional()?,
                        };
                        written.push(version.map(|version| version as u64));
                    }
                }
                Ok(written)
            })
            .await
    }

    /// A partial index on the collection's rows (`WHERE collection = '<name>'`); a sparse one also leaves out the
    /// rows missing a field (`AND json_extract(...) IS NOT NULL`), which SQLite's planner still picks for a query
    /// comparing each of them, since a comparison is never true of NULL.
    ///
    /// A non-unique index ends with the documents' `id`, the tie-break every page is ordered by last (see
    /// `order_by`): the index then gives the whole order, and a page at a deep offset skips index entries only.
    /// Without it SQLite sorted each run of equal keys by id, reading every skipped row's id from the table: page
    /// 500 of 300,000 took 23 ms instead of 0.5 ms. The index an older build made under the name without `_id` is
    /// dropped here.
    async fn ensure_index(&self, collection: &str, index: &IndexSpec) -> Result<(), PortError> {
        index.validate()?;
        let literal = collection_literal(collection)?;
        let mut keys: Vec<String> = index
            .fields
            .iter()
            .map(|(path, direction)| {
                format!("{}{}", extract(path), if *direction == Direction::Desc { " DESC" } else { "" })
            })
            .collect();
        let legacy = if index.unique {
            String::new()
        } else {
            keys.push("id".to_owned());
            format!("DROP INDEX IF EXISTS {};\n", legacy_index_name(collection, index))
        };
        let present: String = if index.sparse {
            index.fields.iter().map(|(path, _)| format!(" AND {} IS NOT NULL", extract(path))).collect()
        } else {
            String::new()
        };
        let sql = format!(
            "{legacy}CREATE {}INDEX IF NOT EXISTS {} ON documents ({}) WHERE collection = {literal}{present}",
            if index.unique { "UNIQUE " } else { "" },
            index_name(collection, index),
            keys.join(", ")
        );
        self.db.call(move |c| c.execute_batch(&sql)).await
    }

    async fn drop_index(&self, collection: &str, index: &IndexSpec) -> Result<(), PortError> {
        index.validate()?;
        collection_literal(collection)?;
        let sql = format!(
            "DROP INDEX IF EXISTS {}; DROP INDEX IF EXISTS {}",
            index_name(collection, index),
            legacy_index_name(collection, index)
        );
        self.db.call(move |c| c.execute_batch(&sql)).await
    }

    async fn database(&self, name: &str) -> Result<Arc<dyn DocumentStore>, PortError> {
        let store: Arc<dyn DocumentStore> = self.databases.open(name)?;
        Ok(store)
    }

    async fn upsert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError> {
        self.write(collection, id, doc, None).await
    }

    async fn upsert_many(&self, collection: &str, docs: Vec<(String, Value)>) -> Result<(), PortError> {
        self.write_rows(collection, docs.into_iter().map(|(id, doc)| (id, doc.to_string())).collect()).await
    }

    async fn upsert_many_json(&self, collection: &str, docs: Vec<(String, String)>) -> Result<(), PortError> {
        // A cheap guard that the text is an object; the writer serialized it from a typed value.
        if let Some((id, _)) = docs.iter().find(|(_, body)| !(body.starts_with('{') && body.ends_with('}'))) {
            return Err(PortError::Invalid(format!("the body of {id:?} is not a JSON object")));
        }
        self.write_rows(collection, docs).await
    }

    async fn upsert_expiring(
        &self,
        collection: &str,
        id: &str,
        doc: Value,
        expires_at_ms: i64,
    ) -> Result<(), PortError> {
        self.write(collection, id, doc, Some(expires_at_ms)).await
    }

    async fn insert_expiring(
        &self,
        collection: &str,
        id: &str,
        doc: Value,
        expires_at_ms: i64,
    ) -> Result<(), PortError> {
        self.insert_new(collection, id, doc, Some(expires_at_ms)).await
    }

    async fn sweep_expired(&self, collection: &str, now_ms: i64) -> Result<u64, PortError> {
        let collection = collection.to_owned();
        let deleted = self
            .db
            .call(move |c| {
                let deleted = c.execute(
                    "DELETE FROM documents WHERE collection = ?1 AND expires_at_ms IS NOT NULL AND expires_at_ms <= ?2",
                    params![collection, now_ms],
                )?;
                crate::sqlite::vacuum_some(c)?;
                Ok(deleted)
            })
            .await?;
        Ok(deleted as u64)
    }

    async fn delete(&self, collection: &str, id: &str) -> Result<bool, PortError> {
        let deleted = self
            .db
            .write_statement(
                "DELETE FROM documents WHERE collection = ?1 AND id = ?2",
                vec![collection.to_owned().into(), id.to_owned().into()],
            )
            .await?;
        Ok(deleted > 0)
    }

    async fn delete_where(&self, collection: &str, field: &str, value: &Value) -> Result<u64, PortError> {
        self.delete_matching(collection, &field_query(field, value)?).await
    }

    async fn delete_matching(&self, collection: &str, query: &Query) -> Result<u64, PortError> {
        query.validate()?;
        let literal = collection_literal(collection)?;
        let (clause, parameters) = conditions(query);
        let sql = format!("DELETE FROM documents WHERE collection = {literal}{clause}");
        let deleted = self
            .db
            .call(move |c| {
                let deleted = c.execute(&sql, params_from_iter(&parameters))?;
                crate::sqlite::vacuum_some(c)?;
                Ok(deleted)
            })
            .await?;
        Ok(deleted as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Comparisons carry a `json_type` guard so numbers and strings never compare with each other; an equality
    /// with a text that no other JSON type's value can equal goes without one.
    #[test]
    fn conditions_guard_json_types() {
        let query = Query::new()
            .eq("a.b", json!("x"))
            .eq("c", json!("[1]"))
            .filter("s", Filter::Gte(json!("x")))
            .filter("n", Filter::Gt(json!(3)))
            .filter("k", Filter::In(vec![json!(1), json!("1"), json!("{}"), json!(false)]))
            .eq("flag", json!(true));
        let (clause, parameters) = conditions(&query);
        assert!(clause.contains(" AND json_extract(body, '$.a.b') = ? AND "), "{clause}");
        assert!(clause.contains("json_extract(body, '$.c') = ? AND json_type(body, '$.c') = 'text'"));
        assert!(clause.contains("json_extract(body, '$.s') >= ? AND json_type(body, '$.s') = 'text'"));
        assert!(clause.contains("json_extract(body, '$.n') > ? AND json_type(body, '$.n') IN ('integer', 'real')"));
        assert!(clause.contains("(json_extract(body, '$.k') IN (?))"));
        assert!(clause.contains("(json_extract(body, '$.k') IN (?) AND json_type(body, '$.k') = 'text')"));
        assert!(clause.contains("(json_extract(body, '$.k') IN (?) AND json_type(body, '$.k') IN ('integer', 'real'))"));
        assert!(clause.contains("json_type(body, '$.k') IN ('false')"));
        assert!(clause.contains("json_type(body, '$.flag') = 'true'"));
        assert_eq!(parameters.len(), 7);
        assert_eq!(collection_literal("it's").unwrap(), "'it''s'");
        assert!(field_query("a.b", &json!(1)).is_err(), "find keeps comparing top-level fields only");
    }

    /// A non-unique index ends with the id, so a page sorted by its fields (and by id to break ties) is read in
    /// index order, with no sort: a deep offset then skips index entries only. The same index from an older
    /// build (without the id, under the name without `_id`) is replaced.
    #[tokio::test]
    async fn pages_sorted_by_an_indexed_field_need_no_sort() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("pages.db")).unwrap();
        let store = SqliteDocuments::new(db.clone(), Databases::new(dir.path().to_owned()));
        let index = IndexSpec::ascending(&["tenant_id", "occurred_ms"]);
        let legacy = legacy_index_name("live", &index);
        let create_legacy = format!(
            "CREATE INDEX {legacy} ON documents (json_extract(body, '$.tenant_id'), json_extract(body, '$.occurred_ms')) \
             WHERE collection = 'live'"
        );
        db.call(move |c| c.execute_batch(&create_legacy)).await.unwrap();
        store.ensure_index("live", &index).await.unwrap();
        let names: Vec<String> = db
            .call(|c| {
                let mut statement =
                    c.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name GLOB 'doc_*'")?;
                let names = statement.query_map([], |row| row.get(0))?;
                names.collect()
            })
            .await
            .unwrap();
        assert_eq!(names, [index_name("live", &index).trim_matches('"')], "the legacy index is gone");
        // Four events at each of 25 times: ties broken by id.
        let docs = (0..100).map(|n| (format!("e{n:03}"), json!({"tenant_id": "7", "occurred_ms": n / 4}))).collect();
        store.upsert_many("live", docs).await.unwrap();
        let query = Query::new().eq("tenant_id", json!("7")).sort("occurred_ms", Direction::Desc).limit(3).offset(90);
        let (clause, parameters) = conditions(&query);
        let sql = format!("EXPLAIN QUERY PLAN {}", page_sql("'live'", &clause, &query));
        let plan: String = db
            .call(move |c| {
                let mut statement = c.prepare(&sql)?;
                let details = statement.query_map(params_from_iter(&parameters), |row| row.get::<_, String>(3))?;
                details.collect::<Result<Vec<_>, _>>().map(|lines| lines.join("; "))
            })
            .await
            .unwrap();
        assert!(plan.contains("ix_tenant_id_1_occurred_ms_1_id") && !plan.contains("TEMP B-TREE"), "{plan}");
        let page = store.query("live", &query).await.unwrap();
        let times: Vec<u64> = page.items.iter().map(|doc| doc["occurred_ms"].as_u64().unwrap()).collect();
        assert_eq!(times, [2, 2, 1], "newest first from offset 90: e009, e008 at 2, then e007 at 1");
        store.drop_index("live", &index).await.unwrap();
    }

    /// A sparse index leaves out rows missing a field, and the planner still picks it for a query comparing
    /// each of its fields (the scheduler's due runs), not for one that needs the rows it leaves out.
    #[tokio::test]
    async fn the_planner_picks_a_sparse_index_for_comparisons() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("plan.db")).unwrap();
        let store = SqliteDocuments::new(db.clone(), Databases::new(dir.path().to_owned()));
        let index = IndexSpec::ascending(&["status", "due_ms"]).sparse();
        store.ensure_index("runs", &index).await.unwrap();
        for (id, doc) in [("a", json!({"status": "waiting", "due_ms": 5})), ("b", json!({"status": "completed"}))] {
            store.insert("runs", id, doc).await.unwrap();
        }
        let definition: String = db
            .call(|c| {
                let sql = "SELECT sql FROM sqlite_master WHERE name = 'doc_72756e73_sx_status_1_due_ms_1_id'";
                c.query_row(sql, [], |r| r.get(0))
            })
            .await
            .unwrap();
        assert!(
            definition.ends_with(
                "WHERE collection = 'runs' AND json_extract(body, '$.status') IS NOT NULL \
                 AND json_extract(body, '$.due_ms') IS NOT NULL"
            ),
            "{definition}"
        );
        let plan = |query: Query| {
            let (clause, parameters) = conditions(&query);
            let sql = format!("EXPLAIN QUERY PLAN {}", page_sql("'runs'", &clause, &query));
            db.call(move |c| {
                let mut statement = c.prepare(&sql)?;
                let details = statement.query_map(params_from_iter(&parameters), |row| row.get::<_, String>(3))?;
                details.collect::<Result<Vec<_>, _>>().map(|lines| lines.join("; "))
            })
        };
        let due = Query::new()
            .eq("status", json!("waiting"))
            .filter("due_ms", Filter::Lte(json!(9)))
            .sort("due_ms", Direction::Asc);
        let chosen = plan(due).await.unwrap();
        assert!(chosen.contains("sx_status_1_due_ms_1"), "{chosen}");
        let chosen = plan(Query::new().eq("status", json!("completed"))).await.unwrap();
        assert!(!chosen.contains("sx_status_1_due_ms_1"), "{chosen}");
    }
}
