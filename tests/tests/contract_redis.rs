//! The cache and work queue contract suites against the real Redis server (`FLOWHOST_TEST_REDIS_URL`); expiry
//! is measured by Redis, so the TTL checks sleep (under two seconds in all) and the redelivery check polls.

use std::sync::Arc;

use flowhost_core::ports::{Cache, Namespace, PortError, WorkQueue};
use flowhost_redis::{RedisCache, RedisQueue};
use flowhost_tests::contract::{cache, namespaces, queue};
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

/// The cache and queue under a key prefix (`FLOWHOST_REDIS_KEY_PREFIX`, for deployments sharing a logical
/// database).
async fn redis_in(prefix: &str) -> (Arc<dyn Cache>, Arc<dyn WorkQueue>) {
    let namespace = Namespace::new(prefix, ':');
    let cache = RedisCache::connect_in(&servers::redis_url(), namespace.clone()).await.expect("connect to Redis");
    let queue = RedisQueue::connect_in(&servers::redis_url(), namespace).await.expect("connect to Redis");
    (Arc::new(cache), Arc::new(queue))
}

#[tokio::test]
async fn the_suites_hold_under_a_key_prefix() {
    let (cache, queue) = redis_in(&flowhost_tests::host::deployment_name()).await;
    cache::get_set_delete(cache.clone()).await;
    cache::incr_window(cache, cache::real_time()).await;
    queue::enqueue_lease_ack(queue.clone()).await;
    queue::ack_unknown_ids(queue).await;
}

/// Two deployments in one logical database under two key prefixes never read each other's keys or queues;
/// neither do one with a prefix and one without.
#[tokio::test]
async fn deployments_under_their_own_key_prefixes_never_meet() {
    let (ours, theirs) = (redis_in(&flowhost_tests::host::deployment_name()).await, redis_in("").await);
    namespaces::cache_keys_stay_in_their_deployment(ours.0.clone(), theirs.0.clone()).await;
    namespaces::cache_keys_stay_in_their_deployment(theirs.0.clone(), ours.0.clone()).await;
    namespaces::queues_stay_in_their_deployment(ours.1.clone(), theirs.1.clone()).await;
    namespaces::queues_stay_in_their_deployment(theirs.1, ours.1).await;
    let other = redis_in(&flowhost_tests::host::deployment_name()).await;
    namespaces::cache_keys_stay_in_their_deployment(ours.0, other.0).await;
}
