//! [`Connection`]: the one reconnecting Redis connection of a cache or queue, established at start when Redis
//! answers and otherwise on first use. A process started while Redis is down keeps running: every call fails
//! with [`PortError::Unavailable`] at once (no call waits on a connection attempt that failed moments ago), a
//! new attempt is made when a call comes after the capped backoff delay, and once one succeeds the
//! [`ConnectionManager`] reconnects by itself from then on.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flowhost_core::backoff::Backoff;
use flowhost_core::ports::PortError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;
use tracing::{debug, info, warn};

use crate::map_error;

const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_RETRIES: usize = 2;

/// The first delay between connection attempts while Redis is down, doubling up to [`RETRY_CAP`].
const RETRY_INITIAL: Duration = Duration::from_millis(250);
const RETRY_CAP: Duration = Duration::from_secs(10);

/// A shared, lazily established connection (clones share it).
#[derive(Clone)]
pub(crate) struct Connection {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    manager: OnceCell<ConnectionManager>,
    /// When the next attempt may be made, and why the last one failed.
    retry: Mutex<Retry>,
    /// One attempt at a time: callers arriving meanwhile wait for its outcome instead of starting their own.
    attempt: tokio::sync::Mutex<()>,
}

struct Retry {
    backoff: Backoff,
    not_before: Option<Instant>,
    last_error: Option<PortError>,
}

impl Connection {
    /// Connects to `url` (`redis://host:port/db`) and verifies the connection with `PING`; fails when Redis does
    /// not answer.
    pub(crate) async fn connect(url: &str) -> Result<Connection, PortError> {
        let connection = Connection::lazy(url)?;
        connection.get().await?;
        Ok(connection)
    }

    /// Like [`Connection::connect`], but when Redis does not answer the connection is made later, on first use
    /// after the retry delay: only a malformed URL fails.
    pub(crate) async fn open(url: &str) -> Result<Connection, PortError> {
        let connection = Connection::lazy(url)?;
        if let Err(error) = connection.get().await {
            if !error.is_transient() {
                return Err(error);
            }
            warn!(%error, "Redis does not answer yet; starting without it and retrying with backoff");
        }
        Ok(connection)
    }

    fn lazy(url: &str) -> Result<Connection, PortError> {
        let client =
            redis::Client::open(url).map_err(|error| PortError::Invalid(format!("invalid Redis URL: {error}")))?;
        Ok(Connection {
            inner: Arc::new(Inner {
                client,
                manager: OnceCell::new(),
                retry: Mutex::new(Retry {
                    backoff: Backoff::new(RETRY_INITIAL, 2.0, RETRY_CAP),
                    not_before: None,
                    last_error: None,
                }),
                attempt: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The connection, established now if it is not yet and the retry delay has passed.
    pub(crate) async fn get(&self) -> Result<ConnectionManager, PortError> {
        if let Some(manager) = self.inner.manager.get() {
            return Ok(manager.clone());
        }
        self.refused_for_now()?;
        let _attempt = self.inner.attempt.lock().await;
        if let Some(manager) = self.inner.manager.get() {
            return Ok(manager.clone());
        }
        self.refused_for_now()?;
        match connect_manager(self.inner.client.clone()).await {
            Ok(manager) => {
                self.recovered();
                Ok(self.inner.manager.get_or_init(|| async { manager }).await.clone())
            }
            Err(error) => {
                let mut retry = self.retry();
                let delay = retry.backoff.next_delay();
                retry.not_before = Some(Instant::now() + delay);
                retry.last_error = Some(error.clone());
                Err(error)
            }
        }
    }

    /// Forgets the failed attempts once one succeeded.
    fn recovered(&self) {
        let mut retry = self.retry();
        if retry.last_error.take().is_some() {
            info!("connected to Redis after it was unavailable");
        }
        retry.backoff.reset();
        retry.not_before = None;
    }

    /// The last attempt's error while the retry delay runs.
    fn refused_for_now(&self) -> Result<(), PortError> {
        let retry = self.retry();
        match (&retry.not_before, &retry.last_error) {
            (Some(not_before), Some(error)) if Instant::now() < *not_before => Err(error.clone()),
            _ => Ok(()),
        }
    }

    fn retry(&self) -> std::sync::MutexGuard<'_, Retry> {
        self.inner.retry.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A reconnecting connection through `client`, verified with `PING`.
async fn connect_manager(client: redis::Client) -> Result<ConnectionManager, PortError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(CONNECT_RETRIES);
    let mut connection = ConnectionManager::new_with_config(client, config).await.map_err(|error| {
        debug!(%error, "connecting to Redis failed");
        map_error(error, "connecting to Redis")
    })?;
    let pong: String =
        redis::cmd("PING").query_async(&mut connection).await.map_err(|error| map_error(error, "pinging Redis"))?;
    if pong != "PONG" {
        return Err(PortError::Backend(format!("Redis answered PING with {pong:?}")));
    }
    debug!("connected to Redis");
    Ok(connection)
}
