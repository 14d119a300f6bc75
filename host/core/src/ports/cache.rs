//! The cache port: short-lived keys with a time to live, for validation caches, rate limits and dedup.

use std::time::Duration;

use async_trait::async_trait;

use super::PortError;

/// A key-value cache. Values are bytes; expiry is measured by the backend (Redis) or the injected clock
/// (embedded). Correctness never depends on a value still being there.
#[async_trait]
pub trait Cache: Send + Sync + 'static {
    fn backend(&self) -> &'static str;

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, PortError>;

    async fn set(&self, key: &str, value: Vec<u8>, ttl: Option<Duration>) -> Result<(), PortError>;

    /// Stores the value only when the key is absent; returns whether it stored (dedup, locks).
    async fn set_if_absent(&self, key: &str, value: Vec<u8>, ttl: Duration) -> Result<bool, PortError>;

    async fn delete(&self, key: &str) -> Result<bool, PortError>;

    /// Adds one to a counter and returns the new value; the first increment starts its `ttl` window.
    async fn incr(&self, key: &str, ttl: Duration) -> Result<i64, PortError> {
        Ok(self.incr_window(key, ttl).await?.count)
    }

    /// [`Cache::incr`], also telling how long the counter's window has left (a rate limit's `Retry-After`).
    async fn incr_window(&self, key: &str, ttl: Duration) -> Result<Counter, PortError>;
}

/// A counter after an increment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    pub count: i64,
    /// Until the window that the first increment started ends and the counter starts again from zero.
    pub resets_in: Duration,
}
