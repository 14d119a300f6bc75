//! The `documents` capability: JSON documents scoped to the plugin's id and to the invocation's tenant, in the
//! host's document store (collection [`PLUGIN_DOCUMENTS`]). Keys of one plugin can never reach another's, and
//! an invocation for one tenant never reaches another tenant's documents (nor the tenant-less ones of one-off
//! calls); a batch spanning several tenants reaches none. One invocation writes at most [`MAX_DOCUMENT_WRITES`]
//! documents; every call gives up at the invocation's deadline.

use flowhost_core::collections::PLUGIN_DOCUMENTS;
use flowhost_core::ports::DocumentStore;
use serde_json::{json, Value};
use std::sync::Arc;

use crate::bindings::v1::action::flowhost::plugin::documents as documents_v1;
use crate::bindings::v2::action::flowhost::plugin::documents as documents_v2;
use crate::host::{HostState, TenantScope, MAX_DOCUMENT_WRITES};

/// Longest document key a plugin may use, in bytes.
pub(crate) const MAX_DOCUMENT_KEY_BYTES: usize = 256;
/// Largest document a plugin may store, in bytes of JSON.
pub(crate) const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

impl HostState {
    /// What a document call needs, taken out of the store's state: the futures below then hold nothing of the
    /// state (which is not `Sync`: WASI's context) across an await.
    fn document_scope(&self) -> DocumentScope {
        DocumentScope {
            documents: self.documents.clone(),
            scope: self.scope.clone(),
            tenant: self.tenant.clone(),
            deadline: self.deadline,
        }
    }

    /// Counts one write against [`MAX_DOCUMENT_WRITES`].
    fn may_write(&mut self) -> Result<(), String> {
        self.documents_written += 1;
        if self.documents_written > MAX_DOCUMENT_WRITES {
            return Err(format!("an invocation may write at most {MAX_DOCUMENT_WRITES} documents"));
        }
        Ok(())
    }
}

/// The plugin's documents for one invocation.
struct DocumentScope {
    documents: Option<Arc<dyn DocumentStore>>,
    scope: Arc<str>,
    tenant: TenantScope,
    deadline: std::time::Instant,
}

impl DocumentScope {
    fn document_store(&self) -> Result<&Arc<dyn DocumentStore>, String> {
        self.documents.as_ref().ok_or_else(|| "this host has no document store for plugins".to_owned())
    }

    /// The id of `key`'s document in [`PLUGIN_DOCUMENTS`]: `<plugin>/<key>` without a tenant,
    /// `<plugin>\u{1e}<length of tenant>:<tenant>/<key>` for one (keys hold no control character and the
    /// tenant's length ends where it does, so no two scopes spell the same id): keys of one plugin never reach
    /// another's, nor one tenant's another's.
    fn document_id(&self, key: &str) -> Result<String, String> {
        if key.is_empty() || key.len() > MAX_DOCUMENT_KEY_BYTES || key.chars().any(char::is_control) {
            return Err(format!(
                "a document key must be 1 to {MAX_DOCUMENT_KEY_BYTES} bytes without control characters"
            ));
        }
        match &self.tenant {
            TenantScope::None => Ok(format!("{}/{key}", self.scope)),
            TenantScope::Tenant(tenant) => Ok(format!("{}\u{1e}{}:{tenant}/{key}", self.scope, tenant.len())),
            TenantScope::Mixed => Err("a batch of several tenants has no documents".to_owned()),
        }
    }

    /// The tenant to record beside a document (`None` without one).
    fn tenant(&self) -> Option<&str> {
        match &self.tenant {
            TenantScope::Tenant(tenant) => Some(tenant),
            _ => None,
        }
    }

    /// Runs a document operation, giving up at the invocation's deadline.
    async fn bounded<T>(
        &self,
        operation: impl std::future::Future<Output = Result<T, flowhost_core::PortError>>,
    ) -> Result<T, String> {
        match tokio::time::timeout_at(self.deadline.into(), operation).await {
            Ok(result) => result.map_err(|error| format!("document store: {error}")),
            Err(_) => Err("document store: the invocation's deadline passed".to_owned()),
        }
    }

    async fn get_document(&self, key: &str) -> Result<Option<String>, String> {
        let id = self.document_id(key)?;
        let store = self.document_store()?;
        let stored = self.bounded(store.get(PLUGIN_DOCUMENTS, &id)).await?;
        Ok(stored.and_then(|mut doc| doc.get_mut("value").map(Value::take)).map(|value| value.to_string()))
    }

    async fn put_document(&self, key: String, value: &str) -> Result<(), String> {
        let id = self.document_id(&key)?;
        if value.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("a document may hold at most {MAX_DOCUMENT_BYTES} bytes ({} given)", value.len()));
        }
        let value: Value = serde_json::from_str(value).map_err(|error| format!("not a JSON document: {error}"))?;
        let store = self.document_store()?;
        let doc = json!({ "plugin": &*self.scope, "tenant": self.tenant(), "key": key, "value": value });
        self.bounded(store.upsert(PLUGIN_DOCUMENTS, &id, doc)).await
    }

    async fn delete_document(&self, key: &str) -> Result<bool, String> {
        let id = self.document_id(key)?;
        let store = self.document_store()?;
        self.bounded(store.delete(PLUGIN_DOCUMENTS, &id)).await
    }
}

/// Implements the `documents` host trait of one package version.
macro_rules! documents_host {
    ($documents:ident) => {
        impl $documents::Host for HostState {
            async fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<String>, String>> {
                Ok(self.document_scope().get_document(&key).await)
            }

            async fn put(&mut self, key: String, value: String) -> wasmtime::Result<Result<(), String>> {
                if let Err(refused) = self.may_write() {
                    return Ok(Err(refused));
                }
                Ok(self.document_scope().put_document(key, &value).await)
            }

            async fn delete(&mut self, key: String) -> wasmtime::Result<Result<bool, String>> {
                if let Err(refused) = self.may_write() {
                    return Ok(Err(refused));
                }
                Ok(self.document_scope().delete_document(&key).await)
            }
        }
    };
}

documents_host!(documents_v1);
documents_host!(documents_v2);
