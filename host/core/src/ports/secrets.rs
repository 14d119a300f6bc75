//! The secrets port: read one secret by name from a secret store (Azure Key Vault in `flowhost-keyvault`).
//! The configuration uses it once at start to fill every literal setting left unset whose `*_SECRET_NAME` is
//! set (see `Config::resolve_secrets`); nothing reads secrets per request.

use async_trait::async_trait;

use super::PortError;
use crate::secret::Secret;

/// Why a secret could not be read. A missing secret is a configuration mistake the operator fixes by name;
/// everything else is the store's (transient when [`PortError::Unavailable`]). No variant ever carries a
/// secret value or a credential: the names and the HTTP status are enough to act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The store answered that no secret has this name (or it is disabled).
    #[error("secret {0:?} does not exist in the secret store")]
    NotFound(String),
    /// The store could not be reached, refused the credentials or failed.
    #[error(transparent)]
    Port(#[from] PortError),
}

/// A store of named secrets.
#[async_trait]
pub trait SecretStore: Send + Sync + 'static {
    /// The store's kind, for logs (`azure-key-vault`).
    fn backend(&self) -> &'static str;

    /// The current value of the secret `name`.
    async fn get(&self, name: &str) -> Result<Secret, SecretError>;
}
