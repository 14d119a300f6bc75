//! The cache contract suite against the real Redis server (`FLOWHOST_TEST_REDIS_URL`); expiry is measured by
//! Redis, so the TTL checks sleep (under two seconds in all).

use std::sync::Arc;

use flowhost_core::ports::{Cache, PortError};
use flowhost_redis::RedisCache;
use flowhost_tests::contract::cache;
use flowhost_tests::servers;

async fn redis() -> Arc<dyn Cache> {
    let cache = RedisCache::connect(&servers::redis_url()).await.expect("connect to Redis");
    assert_eq!(cache.backend(), "redis");
    Arc::new(cache)
}

#[tokio::test]
async fn get_set_delete() {
    cache::get_set_delete(redis().await).await;
}

#[tokio::test]
async fn set_if_absent() {
    cache::set_if_absent(redis().await).await;
}

#[tokio::test]
async fn ttl_expiry() {
    cache::ttl_expiry(redis().await, cache::real_time()).await;
}

#[tokio::test]
async fn incr_counts() {
    cache::incr_counts(redis().await).await;
}

#[tokio::test]
async fn incr_window() {
    cache::incr_window(redis().await, cache::real_time()).await;
}

/// Not part of the shared suite: a server that does not answer is a transient failure.
#[tokio::test]
async fn unreachable_server_is_unavailable() {
    let result = RedisCache::connect("redis://127.0.0.1:9/").await;
    assert!(matches!(result, Err(PortError::Unavailable(_))), "got {result:?}");
}
