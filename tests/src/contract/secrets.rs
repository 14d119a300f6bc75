//! The secrets port's contract: a seeded secret reads back by name, a missing one is `NotFound` (not an
//! outage), a name that is not a valid name is refused before any request, and the value never shows in
//! `Debug`. The caller seeds `name` = `value` in the store first (there is no write in the port).

use flowhost_core::ports::{SecretError, SecretStore};
use flowhost_core::PortError;

use crate::unique;

pub async fn reads_a_secret_by_name(store: &dyn SecretStore, name: &str, value: &str) {
    let secret = store.get(name).await.expect("read the seeded secret");
    assert_eq!(secret.expose(), value);
    assert!(!format!("{secret:?}").contains(value), "a secret's Debug shows its value");
}

pub async fn a_missing_secret_is_not_found(store: &dyn SecretStore) {
    let name = unique("missing");
    match store.get(&name).await {
        Err(SecretError::NotFound(missing)) => assert_eq!(missing, name),
        other => panic!("expected NotFound for {name}, got {other:?}"),
    }
}

pub async fn an_invalid_name_is_refused(store: &dyn SecretStore) {
    for name in ["", "a/b", "../secrets/x", "name?api-version=1"] {
        match store.get(name).await {
            Err(SecretError::Port(PortError::Invalid(_))) => {}
            other => panic!("expected Invalid for {name:?}, got {other:?}"),
        }
    }
}
