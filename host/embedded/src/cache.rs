//! The cache port inside one process: a map with expiry measured by the injected clock, bounded to a maximum
//! entry count. When a new key would exceed the bound, expired entries go first (a sweep at most once per
//! sixteenth of the bound's worth of evictions, so a full cache of live entries does not pay a full scan on
//! every insert), then the least recently used (`get` and every write count as a use).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::ports::{Cache, Counter, PortError};
use flowhost_core::Clock;

#[derive(Debug)]
struct Entry {
    value: Vec<u8>,
    expires_at_ms: Option<i64>,
}

/// The default bound on entries.
pub const DEFAULT_MAX_ENTRIES: usize = 100_000;

type Entries = hashlink::LruCache<String, Entry>;

struct State {
    entries: Entries,
    /// Evictions left before the next expired sweep is allowed.
    evictions_until_sweep: usize,
}

pub struct LocalCache {
    state: Mutex<State>,
    max_entries: usize,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for LocalCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCache").field("max_entries", &self.max_entries).finish_non_exhaustive()
    }
}

impl LocalCache {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self::with_max_entries(clock, DEFAULT_MAX_ENTRIES)
    }

    /// A cache holding at most `max_entries` (at least 1).
    pub fn with_max_entries(clock: Arc<dyn Clock>, max_entries: usize) -> Self {
        let max_entries = max_entries.max(1);
        Self {
            state: Mutex::new(State { entries: Entries::new_unbounded(), evictions_until_sweep: 0 }),
            max_entries,
            clock,
        }
    }

    /// How many entries the cache holds (expired ones included until they are dropped).
    pub fn len(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `f` on the live entries, after dropping `key` if it expired and, for a write (`make_room`), making
    /// room for it if it is new and the cache is full.
    fn with_entries<T>(&self, key: &str, make_room: bool, f: impl FnOnce(&mut Entries, i64) -> T) -> T {
        let now = self.clock.now_ms();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let expired = |e: &Entry| e.expires_at_ms.is_some_and(|at| at <= now);
        if state.entries.peek(key).is_some_and(expired) {
            state.entries.remove(key);
        }
        if make_room && !state.entries.contains_key(key) && state.entries.len() >= self.max_entries {
            if state.evictions_until_sweep == 0 {
                let gone: Vec<String> =
                    state.entries.iter().filter(|(_, e)| expired(e)).map(|(k, _)| k.clone()).collect();
                for key in gone {
                    state.entries.remove(&key);
                }
                state.evictions_until_sweep = (self.max_entries / 16).max(1);
            }
            while state.entries.len() >= self.max_entries {
                state.entries.remove_lru();
                state.evictions_until_sweep = state.evictions_until_sweep.saturating_sub(1);
            }
        }
        f(&mut state.entries, now)
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
        Ok(self.with_entries(key, false, |entries, _| entries.get(key).map(|e| e.value.clone())))
    }

    async fn set(&self, key: &str, value: Vec<u8>, ttl: Option<Duration>) -> Result<(), PortError> {
        self.with_entries(key, true, |entries, now| {
            entries.insert(key.to_owned(), Entry { value, expires_at_ms: expiry(now, ttl) });
        });
        Ok(())
    }

    async fn set_if_absent(&self, key: &str, value: Vec<u8>, ttl: Duration) -> Result<bool, PortError> {
        Ok(self.with_entries(key, true, |entries, now| {
            if entries.contains_key(key) {
                return false;
            }
            entries.insert(key.to_owned(), Entry { value, expires_at_ms: expiry(now, Some(ttl)) });
            true
        }))
    }

    async fn delete(&self, key: &str) -> Result<bool, PortError> {
        Ok(self.with_entries(key, false, |entries, _| entries.remove(key).is_some()))
    }

    async fn incr_window(&self, key: &str, ttl: Duration) -> Result<Counter, PortError> {
        self.with_entries(key, true, |entries, now| {
            if !entries.contains_key(key) {
                entries.insert(key.to_owned(), Entry { value: b"0".to_vec(), expires_at_ms: expiry(now, Some(ttl)) });
            }
            let Some(entry) = entries.get_mut(key) else {
                return Err(PortError::Backend("cache entry vanished under its lock".into()));
            };
            let current: i64 = std::str::from_utf8(&entry.value)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| PortError::Invalid(format!("cache key {key:?} does not hold a counter")))?;
            entry.value = (current + 1).to_string().into_bytes();
            let left_ms = entry.expires_at_ms.map_or(0, |at| (at - now).max(0));
            Ok(Counter { count: current + 1, resets_in: Duration::from_millis(left_ms as u64) })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_core::ManualClock;

    /// A full cache drops expired entries before live ones, then the least recently used; reads count as use.
    #[tokio::test]
    async fn the_cache_is_bounded_expired_first_then_least_recently_used() {
        let clock = Arc::new(ManualClock::new(1_000));
        let cache = LocalCache::with_max_entries(clock.clone(), 3);
        cache.set("short", b"s".to_vec(), Some(Duration::from_millis(10))).await.unwrap();
        cache.set("a", b"a".to_vec(), None).await.unwrap();
        cache.set("b", b"b".to_vec(), None).await.unwrap();
        clock.advance_ms(20);
        // "short" expired: it goes, the live "a" and "b" stay.
        cache.set("c", b"c".to_vec(), None).await.unwrap();
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("a").await.unwrap(), Some(b"a".to_vec()));
        // "a" was just read, so "b" is the least recently used.
        cache.set("d", b"d".to_vec(), None).await.unwrap();
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("b").await.unwrap(), None);
        // A read of a missing key evicts nothing.
        assert_eq!(cache.len(), 3);
        for key in ["a", "c", "d"] {
            assert!(cache.get(key).await.unwrap().is_some(), "{key} stays");
        }
        // Overwriting an existing key never evicts.
        cache.set("a", b"a2".to_vec(), None).await.unwrap();
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.incr("n", Duration::from_secs(60)).await.unwrap(), 1);
        assert_eq!(cache.len(), 3);
    }
}
