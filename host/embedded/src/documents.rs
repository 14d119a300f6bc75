//! The documents port on SQLite: one row per document, the body as JSON text, field lookups through
//! `json_extract`, and an optional expiry instant (`expires_at_ms`, NULL for permanent documents) that
//! `sweep_expired` deletes by. Reads do not filter on expiry: the store has no clock, the caller's sweep decides.

use async_trait::async_trait;
use flowhost_core::model::is_identifier;
use flowhost_core::ports::{DocumentStore, PortError};
use rusqlite::{params, types::Value as SqlValue, OptionalExtension};
use serde_json::Value;

use crate::sqlite::Db;

pub(crate) struct SqliteDocuments {
    db: Db,
}

impl SqliteDocuments {
    pub(crate) fn new(db: Db) -> Self {
        Self { db }
    }
}

fn parse(body: String) -> Result<Value, rusqlite::Error> {
    serde_json::from_str(&body).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// The JSON path and the SQL value `json_extract` yields for a field equality lookup.
fn field_filter(field: &str, value: &Value) -> Result<(String, SqlValue), PortError> {
    if !is_identifier(field) {
        return Err(PortError::Invalid(format!("field name {field:?} is not an identifier")));
    }
    let sql_value = match value {
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or(f64::NAN)),
        },
        other => return Err(PortError::Invalid(format!("cannot look documents up by {other}"))),
    };
    Ok((format!("$.{field}"), sql_value))
}

impl SqliteDocuments {
    /// Inserts or overwrites a document with the given expiry (`None`: permanent).
    async fn write(&self, collection: &str, id: &str, doc: Value, expires_at_ms: Option<i64>) -> Result<(), PortError> {
        let (collection, id, body) = (collection.to_owned(), id.to_owned(), doc.to_string());
        self.db
            .call(move |c| {
                c.execute(
                    "INSERT INTO documents (collection, id, body, expires_at_ms) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (collection, id) DO UPDATE SET body = excluded.body,
                         expires_at_ms = excluded.expires_at_ms",
                    params![collection, id, body, expires_at_ms],
                )
            })
            .await?;
        Ok(())
    }
}

#[async_trait]
impl DocumentStore for SqliteDocuments {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    async fn get(&self, collection: &str, id: &str) -> Result<Option<Value>, PortError> {
        let (collection, id) = (collection.to_owned(), id.to_owned());
        self.db
            .call(move |c| {
                let body: Option<String> = c
                    .query_row(
                        "SELECT body FROM documents WHERE collection = ?1 AND id = ?2",
                        params![collection, id],
                        |row| row.get(0),
                    )
                    .optional()?;
                body.map(parse).transpose()
            })
            .await
    }

    async fn list(&self, collection: &str) -> Result<Vec<Value>, PortError> {
        let collection = collection.to_owned();
        self.db
            .call(move |c| {
                let mut statement = c.prepare_cached("SELECT body FROM documents WHERE collection = ?1 ORDER BY id")?;
                let rows = statement.query_map(params![collection], |row| row.get::<_, String>(0))?;
                rows.map(|body| parse(body?)).collect()
            })
            .await
    }

    async fn find(&self, collection: &str, field: &str, value: &Value) -> Result<Vec<Value>, PortError> {
        let (path, sql_value) = field_filter(field, value)?;
        let collection = collection.to_owned();
        self.db
            .call(move |c| {
                let mut statement = c.prepare_cached(
                    "SELECT body FROM documents WHERE collection = ?1 AND json_extract(body, ?2) = ?3 ORDER BY id",
                )?;
                let rows = statement.query_map(params![collection, path, sql_value], |row| row.get::<_, String>(0))?;
                rows.map(|body| parse(body?)).collect()
            })
            .await
    }

    async fn insert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError> {
        let (collection, id, body) = (collection.to_owned(), id.to_owned(), doc.to_string());
        let conflict_id = id.clone();
        let inserted = self
            .db
            .call(move |c| {
                c.execute(
                    "INSERT INTO documents (collection, id, body) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                    params![collection, id, body],
                )
            })
            .await?;
        if inserted == 0 {
            return Err(PortError::Conflict(conflict_id));
        }
        Ok(())
    }

    async fn replace(&self, collection: &str, id: &str, doc: Value) -> Result<bool, PortError> {
        let (collection, id, body) = (collection.to_owned(), id.to_owned(), doc.to_string());
        let changed = self
            .db
            .call(move |c| {
                c.execute(
                    "UPDATE documents SET body = ?3, expires_at_ms = NULL WHERE collection = ?1 AND id = ?2",
                    params![collection, id, body],
                )
            })
            .await?;
        Ok(changed > 0)
    }

    async fn upsert(&self, collection: &str, id: &str, doc: Value) -> Result<(), PortError> {
        self.write(collection, id, doc, None).await
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

    async fn sweep_expired(&self, collection: &str, now_ms: i64) -> Result<u64, PortError> {
        let collection = collection.to_owned();
        let deleted = self
            .db
            .call(move |c| {
                c.execute(
                    "DELETE FROM documents WHERE collection = ?1 AND expires_at_ms IS NOT NULL AND expires_at_ms <= ?2",
                    params![collection, now_ms],
                )
            })
            .await?;
        Ok(deleted as u64)
    }

    async fn delete(&self, collection: &str, id: &str) -> Result<bool, PortError> {
        let (collection, id) = (collection.to_owned(), id.to_owned());
        let deleted = self
            .db
            .call(move |c| {
                c.execute("DELETE FROM documents WHERE collection = ?1 AND id = ?2", params![collection, id])
            })
            .await?;
        Ok(deleted > 0)
    }

    async fn delete_where(&self, collection: &str, field: &str, value: &Value) -> Result<u64, PortError> {
        let (path, sql_value) = field_filter(field, value)?;
        let collection = collection.to_owned();
        let deleted = self
            .db
            .call(move |c| {
                c.execute(
                    "DELETE FROM documents WHERE collection = ?1 AND json_extract(body, ?2) = ?3",
                    params![collection, path, sql_value],
                )
            })
            .await?;
        Ok(deleted as u64)
    }
}
