//! The cache port inside one process: a map with expiry measured by the injected clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::ports::{Cache, PortError};
use flowhost_core::Clock;

#[derive(Debug)]
struct Entry {
    value: Vec<u8>,
    expires_at_ms: Option<i64>,
}

#[derive(Debug)]
pub struct LocalCache {
    entries: Mutex<HashMap<String, Entry>>,
    clock: Arc<dyn Clock>,
}

impl LocalCache {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self { entries: Mutex::new(HashMap::new()), clock }
    }

    /// Runs `f` on the live entries, after dropping expired ones (and sweeping when the map grows large).
    fn with_entries<T>(&self, key: &str, f: impl FnOnce(&mut HashMap<String, Entry>, i64) -> T) -> T {
        let now = self.clock.now_ms();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.get(key).is_some_and(|e| e.expires_at_ms.is_some_and(|at| at <= now)) {
            entries.remove(key);
        }
        if entries.len() > 100_000 {
            entries.retain(|_, e| e.expires_at_ms.is_none_or(|at| at > now));
        }
        f(&mut entries, now)
    }
}

fn expiry(now: i64, ttl: Option<Duration>) -> Option<i64> {
    ttl.map(|ttl| now + ttl.as_millis() as i64)
}

#[async_trait]
impl Cache for LocalCache {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, PortError> {
        Ok(self.with_entries(key, |entries, _| entries.get(key).map(|e| e.value.clone())))
    }

    async fn set(&self, key: &str, value: Vec<u8>, ttl: Option<Duration>) -> Result<(), PortError> {
        self.with_entries(key, |entries, now| {
            entries.insert(key.to_owned(), Entry { value, expires_at_ms: expiry(now, ttl) });
        });
        Ok(())
    }

    async fn set_if_absent(&self, key: &str, value: Vec<u8>, ttl: Duration) -> Result<bool, PortError> {
        Ok(self.with_entries(key, |entries, now| {
            if entries.contains_key(key) {
                return false;
            }
            entries.insert(key.to_owned(), Entry { value, expires_at_ms: expiry(now, Some(ttl)) });
            true
        }))
    }

    async fn delete(&self, key: &str) -> Result<bool, PortError> {
        Ok(self.with_entries(key, |entries, _| entries.remove(key).is_some()))
    }

    async fn incr(&self, key: &str, ttl: Duration) -> Result<i64, PortError> {
        self.with_entries(key, |entries, now| {
            let entry = entries
                .entry(key.to_owned())
                .or_insert_with(|| Entry { value: b"0".to_vec(), expires_at_ms: expiry(now, Some(ttl)) });
            let current: i64 = std::str::from_utf8(&entry.value)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| PortError::Invalid(format!("cache key {key:?} does not hold a counter")))?;
            entry.value = (current + 1).to_string().into_bytes();
            Ok(current + 1)
        })
    }
}
