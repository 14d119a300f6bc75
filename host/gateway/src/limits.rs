//! Request and validation limits per token, tenant and global scope (spec 002 part A, rule 5): fixed one-minute
//! windows counted in the gateway's cache, so every replica sharing the cache counts together. A window starts
//! at its first request; exceeding a scope's limit answers 429 with `Retry-After` = what is left of that
//! window. A limit of 0 switches its scope off.

use std::sync::Arc;
use std::time::Duration;

use crate::config::ScopeLimits;
use flowhost_core::ports::Cache;

use crate::keys::PREFIX;

/// The window every limit counts in.
pub const WINDOW: Duration = Duration::from_secs(60);

/// What is limited: requests to the public route, or calls to the player-validation backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    Requests,
    Validations,
}

impl Limited {
    fn key_part(self) -> &'static str {
        match self {
            Limited::Requests => "req",
            Limited::Validations => "val",
        }
    }
}

/// Why a request may not go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitError {
    /// A scope is over its limit: 429 with `Retry-After` (whole seconds, at least 1).
    Exceeded { scope: &'static str, retry_after_secs: u64 },
    /// The cache did not answer in time: a dependency failure (503).
    Unavailable(String),
}

#[derive(Clone)]
pub struct Limiter {
    cache: Arc<dyn Cache>,
    what: Limited,
    limits: ScopeLimits,
    timeout: Duration,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter").field("what", &self.what).field("limits", &self.limits).finish()
    }
}

impl Limiter {
    pub fn new(cache: Arc<dyn Cache>, what: Limited, limits: ScopeLimits, timeout: Duration) -> Limiter {
        Limiter { cache, what, limits, timeout }
    }

    /// Counts one request of `token_id` (the token's keyed identity) for `tenant_id` in every limited scope,
    /// narrowest first; the first scope over its limit refuses, and the request counts in no wider scope (one
    /// token over its limit does not spend its tenant's budget).
    pub async fn admit(&self, token_id: &str, tenant_id: &str) -> Result<(), LimitError> {
        let what = self.what.key_part();
        let scopes = [
            ("token", self.limits.token, format!("{PREFIX}rl:{what}:token:{token_id}")),
            ("tenant", self.limits.tenant, format!("{PREFIX}rl:{what}:tenant:{tenant_id}")),
            ("global", self.limits.global, format!("{PREFIX}rl:{what}:global")),
        ];
        for (scope, limit, key) in scopes {
            if limit == 0 {
                continue;
            }
            let counter = tokio::time::timeout(self.timeout, self.cache.incr_window(&key, WINDOW))
                .await
                .map_err(|_| LimitError::Unavailable("the cache did not answer in time".to_owned()))?
                .map_err(|error| LimitError::Unavailable(error.to_string()))?;
            if counter.count as u64 > limit {
                let retry_after_secs = counter.resets_in.as_millis().div_ceil(1000).max(1) as u64;
                return Err(LimitError::Exceeded { scope, retry_after_secs });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_core::ManualClock;
    use flowhost_embedded::LocalCache;

    #[tokio::test]
    async fn each_scope_counts_its_own_window() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let cache = Arc::new(LocalCache::new(clock.clone()));
        let limits = ScopeLimits { token: 2, tenant: 3, global: 0 };
        let limiter = Limiter::new(cache, Limited::Requests, limits, Duration::from_millis(200));
        assert_eq!(limiter.admit("a", "12").await, Ok(()));
        clock.advance_ms(20_000);
        assert_eq!(limiter.admit("a", "12").await, Ok(()));
        assert_eq!(
            limiter.admit("a", "12").await,
            Err(LimitError::Exceeded { scope: "token", retry_after_secs: 40 }),
            "the third of one token within a minute; the window started at the first"
        );
        assert_eq!(limiter.admit("b", "12").await, Ok(()), "a refused request counts in no wider scope");
        assert_eq!(
            limiter.admit("b", "12").await,
            Err(LimitError::Exceeded { scope: "tenant", retry_after_secs: 40 }),
            "a tenant's requests count across its tokens"
        );
        assert_eq!(limiter.admit("c", "13").await, Ok(()), "another tenant");
        clock.advance_ms(41_000);
        assert_eq!(limiter.admit("a", "12").await, Ok(()), "a new window");
    }
}
