//! The Redis backend of the cache port: [`RedisCache`] keeps values and counters in one Redis database through a
//! reconnecting connection (established later when Redis is down at start, see `connection`), with expiry
//! measured by Redis itself (`PX` on `SET`, a `SET NX PX` + `INCR` transaction for counter windows). Connection failures and timeouts surface as
//! [`PortError::Unavailable`] so callers retry. [`RedisQueue`] is the work queue port on Redis Streams. Both put
//! every key under the deployment's [`Namespace`] (`FLOWHOST_REDIS_KEY_PREFIX`) when it has one.

use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::ports::{Cache, Counter, Namespace, PortError};
use redis::{RedisError, Value};

mod connection;
mod queue;
use connection::Connection;
pub use queue::RedisQueue;

/// A cache in Redis. Every call is one round trip on a shared, automatically reconnecting connection.
#[derive(Clone)]
pub struct RedisCache {
    connection: Connection,
    /// The deployment's key prefix, in front of every key.
    namespace: Namespace,
}

impl std::fmt::Debug for RedisCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCache").finish_non_exhaustive()
    }
}

impl RedisCache {
    /// Connects to `url` (`redis://host:port/db`) and verifies the connection with `PING`.
    pub async fn connect(url: &str) -> Result<RedisCache, PortError> {
        RedisCache::connect_in(url, Namespace::NONE).await
    }

    /// [`RedisCache::connect`] with every key under `namespace` (separator `:`).
    pub async fn connect_in(url: &str, namespace: Namespace) -> Result<RedisCache, PortError> {
        Ok(RedisCache { connection: Connection::connect(url).await?, namespace })
    }

    /// [`RedisCache::connect_in`] that starts without Redis when it does not answer: calls fail with
    /// `Unavailable` until a later attempt connects (see `connection`). Only a malformed URL fails.
    pub async fn open_in(url: &str, namespace: Namespace) -> Result<RedisCache, PortError> {
        Ok(RedisCache { connection: Connection::open(url).await?, namespace })
    }
}

/// Redis refuses a zero expiry; the shortest window it accepts is one millisecond.
fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[async_trait]
impl Cache for RedisCache {
    fn backend(&self) -> &'static str {
        "redis"
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, PortError> {
        let key = self.namespace.wire(key);
        let mut connection = self.connection.get().await?;
        redis::cmd("GET").arg(&*key).query_async(&mut connection).await.map_err(|error| map_error(error, "GET"))
    }

    async fn set(&self, key: &str, value: Vec<u8>, ttl: Option<Duration>) -> Result<(), PortError> {
        let key = self.namespace.wire(key);
        let mut connection = self.connection.get().await?;
        let mut command = redis::cmd("SET");
        command.arg(&*key).arg(value);
        if let Some(ttl) = ttl {
            command.arg("PX").arg(millis(ttl));
        }
        command.query_async::<()>(&mut connection).await.map_err(|error| map_error(error, "SET"))
    }

    async fn set_if_absent(&self, key: &str, value: Vec<u8>, ttl: Duration) -> Result<bool, PortError> {
        let key = self.namespace.wire(key);
        let mut connection = self.connection.get().await?;
        // `SET NX` answers OK when it stored and nil when the key exists.
        let reply: Value = redis::cmd("SET")
            .arg(&*key)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(millis(ttl))
            .query_async(&mut connection)
            .await
            .map_err(|error| map_error(error, "SET NX"))?;
        Ok(!matches!(reply, Value::Nil))
    }

    async fn delete(&self, key: &str) -> Result<bool, PortError> {
        let key = self.namespace.wire(key);
        let mut connection = self.connection.get().await?;
        let removed: i64 =
            redis::cmd("DEL").arg(&*key).query_async(&mut connection).await.map_err(|error| map_error(error, "DEL"))?;
        Ok(removed > 0)
    }

    async fn incr_window(&self, key: &str, ttl: Duration) -> Result<Counter, PortError> {
        let key = self.namespace.wire(key);
        let mut connection = self.connection.get().await?;
        // One MULTI/EXEC: `SET key 0 NX PX ttl` creates the counter with its window only when it is absent, and
        // `INCR` keeps that expiry, so the first increment starts the window and later ones never extend it;
        // `PTTL` reads what is left of it.
        let (count, left_ms): (i64, i64) = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(&*key)
            .arg(0)
            .arg("NX")
            .arg("PX")
            .arg(millis(ttl))
            .ignore()
            .cmd("INCR")
            .arg(&*key)
            .cmd("PTTL")
            .arg(&*key)
            .query_async(&mut connection)
            .await
            .map_err(|error| map_error(error, "INCR"))?;
        Ok(Counter { count, resets_in: Duration::from_millis(left_ms.max(0) as u64) })
    }
}

/// Connection, I/O and timeout failures are transient (`Unavailable`); server replies are `Backend` errors.
pub(crate) fn map_error(error: RedisError, command: &str) -> PortError {
    if error.is_io_error() || error.is_timeout() || error.is_connection_dropped() || error.is_connection_refusal() {
        PortError::Unavailable(format!("Redis {command}: {error}"))
    } else {
        PortError::Backend(format!("Redis {command}: {error}"))
    }
}
