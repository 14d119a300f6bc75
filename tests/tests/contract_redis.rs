//! The cache and work queue contract suites against the real Redis server (`FLOWHOST_TEST_REDIS_URL`); expiry
//! is measured by Redis, so the TTL checks sleep (under two seconds in all) and the redelivery check polls.

use std::sync::Arc;

use flowhost_core::ports::{Cache, PortError, WorkQueue};
use flowhost_redis::{RedisCache, RedisQueue};
use flowhost_tests::contract::{cache, queue};
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

async fn redis_queue() -> Arc<dyn WorkQueue> {
    let queue = RedisQueue::connect(&servers::redis_url()).await.expect("connect to Redis");
    assert_eq!(queue.backend(), "redis");
    Arc::new(queue)
}

#[tokio::test]
async fn queue_enqueue_lease_ack() {
    queue::enqueue_lease_ack(redis_queue().await).await;
}

#[tokio::test]
async fn queue_lease_max_and_batches() {
    queue::lease_max_and_batches(redis_queue().await).await;
}

#[tokio::test]
async fn queue_lease_exclusivity() {
    queue::lease_exclusivity(redis_queue().await).await;
}

/// Visibility is Redis's idle time (`XAUTOCLAIM` min-idle-time), so the check polls for up to its bound.
#[tokio::test]
async fn queue_redelivery_after_consumer_dies() {
    queue::redelivery_after_consumer_dies(redis_queue().await, std::time::Duration::from_secs(1), queue::server_time())
        .await;
}

#[tokio::test]
async fn queue_ack_unknown_ids() {
    queue::ack_unknown_ids(redis_queue().await).await;
}

/// Not part of the shared suite: the composition puts the work queue on Redis when Redis is configured.
#[tokio::test]
async fn connect_puts_the_queue_on_redis() {
    let dir = tempfile::tempdir().expect("temporary data directory");
    let mut config = flowhost_core::config::Config { data_dir: dir.path().to_path_buf(), ..Default::default() };
    config.redis.url = Some(servers::redis_url());
    let ports = flowhost::connect(&config).await.expect("connect");
    assert_eq!(ports.queue.backend(), "redis");
}
