//! A secret value (a key, a password, a URL with credentials): it never shows in `Debug` output or logs, and
//! (de)serializes as the plain string. The settings that hold one are in [`crate::config`]; the secret store
//! that resolves them is [`crate::ports::SecretStore`].

use serde::{Deserialize, Serialize};

/// A secret value (token, key, HMAC secret). `Debug` never shows it, so a logged configuration leaks nothing;
/// it (de)serializes as the plain string.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself: pass it to the code that uses it, never to a log.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}
