//! The cache port contract: byte values by key, optional expiry, `set_if_absent` as a dedup/lock primitive,
//! `delete` reporting presence, and `incr` counters whose window starts at the first increment and is not
//! extended by later ones.
//!
//! Expiry needs time to pass, which the backends measure differently (Redis on its own clock, the embedded
//! cache on the injected one): checks that wait take an [`Advance`] hook, [`real_time`] sleeps and a manual
//! clock can be advanced instead.

use std::sync::Arc;
use std::time::Duration;

use flowhost_core::ports::Cache;
use futures::future::BoxFuture;
use futures::FutureExt;

use crate::unique;

/// Lets `Duration` pass for the cache under test.
pub type Advance = Arc<dyn Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync>;

/// An [`Advance`] that sleeps: for backends that measure expiry on a real clock.
pub fn real_time() -> Advance {
    Arc::new(|duration| tokio::time::sleep(duration).boxed())
}

/// `get` of a missing key is `None`; `set` stores bytes (any bytes) and overwrites; `delete` reports whether
/// the key was there.
pub async fn get_set_delete(cache: Arc<dyn Cache>) {
    let key = unique("cache");
    assert_eq!(cache.get(&key).await.expect("get missing"), None);

    cache.set(&key, b"one".to_vec(), None).await.expect("set");
    assert_eq!(cache.get(&key).await.expect("get"), Some(b"one".to_vec()));
    let binary = vec![0, 255, 10, 13, 128];
    cache.set(&key, binary.clone(), None).await.expect("overwrite");
    assert_eq!(cache.get(&key).await.expect("get overwritten"), Some(binary));
    cache.set(&key, Vec::new(), None).await.expect("set empty");
    assert_eq!(cache.get(&key).await.expect("get empty"), Some(Vec::new()), "empty is a value, not absence");

    assert!(cache.delete(&key).await.expect("delete"));
    assert!(!cache.delete(&key).await.expect("delete again"), "deleting a missing key reports false");
    assert_eq!(cache.get(&key).await.expect("get deleted"), None);
}

/// `set_if_absent` stores only when the key is missing and never overwrites; after a delete it stores again.
pub async fn set_if_absent(cache: Arc<dyn Cache>) {
    let key = unique("lock");
    let ttl = Duration::from_secs(60);
    assert!(cache.set_if_absent(&key, b"owner-a".to_vec(), ttl).await.expect("first"));
    assert!(!cache.set_if_absent(&key, b"owner-b".to_vec(), ttl).await.expect("second"));
    assert_eq!(cache.get(&key).await.expect("get"), Some(b"owner-a".to_vec()), "the first writer keeps it");

    let plain = unique("lock");
    cache.set(&plain, b"set".to_vec(), None).await.expect("set");
    assert!(!cache.set_if_absent(&plain, b"other".to_vec(), ttl).await.expect("over a set key"));

    assert!(cache.delete(&key).await.expect("delete"));
    assert!(cache.set_if_absent(&key, b"owner-b".to_vec(), ttl).await.expect("after delete"));
    assert_eq!(cache.get(&key).await.expect("get"), Some(b"owner-b".to_vec()));
}

/// A key set with a ttl is readable before it and gone after it (and then free for `set_if_absent`); a key set
/// without a ttl, or re-set without one, stays.
pub async fn ttl_expiry(cache: Arc<dyn Cache>, advance: Advance) {
    let ttl = Duration::from_millis(500);
    let expiring = unique("ttl");
    let lock = unique("ttl-lock");
    let lasting = unique("ttl-none");
    let reset = unique("ttl-reset");

    cache.set(&expiring, b"soon gone".to_vec(), Some(ttl)).await.expect("set with ttl");
    assert!(cache.set_if_absent(&lock, b"held".to_vec(), ttl).await.expect("lock"));
    cache.set(&lasting, b"stays".to_vec(), None).await.expect("set without ttl");
    cache.set(&reset, b"first".to_vec(), Some(ttl)).await.expect("set with ttl");
    cache.set(&reset, b"second".to_vec(), None).await.expect("set again without ttl");

    assert_eq!(cache.get(&expiring).await.expect("get before ttl"), Some(b"soon gone".to_vec()));
    assert!(!cache.set_if_absent(&lock, b"other".to_vec(), ttl).await.expect("lock held"));

    advance(Duration::from_millis(800)).await;

    assert_eq!(cache.get(&expiring).await.expect("get after ttl"), None, "expired after its ttl");
    assert!(cache.set_if_absent(&lock, b"next".to_vec(), ttl).await.expect("lock expired"), "an expired lock is free");
    assert_eq!(cache.get(&lasting).await.expect("get lasting"), Some(b"stays".to_vec()));
    assert_eq!(cache.get(&reset).await.expect("get reset"), Some(b"second".to_vec()), "set without ttl clears it");
}

/// `incr` counts from 1 per key, independently for each key.
pub async fn incr_counts(cache: Arc<dyn Cache>) {
    let key = unique("count");
    let other = unique("count");
    let ttl = Duration::from_secs(60);
    for expected in 1..=5 {
        assert_eq!(cache.incr(&key, ttl).await.expect("incr"), expected);
    }
    assert_eq!(cache.incr(&other, ttl).await.expect("incr other"), 1, "counters are per key");
    assert_eq!(cache.incr(&key, ttl).await.expect("incr again"), 6);
}

/// The first `incr` starts the window; later increments do not extend it; once it passes, counting restarts
/// at 1 (a fixed-window rate limit).
pub async fn incr_window(cache: Arc<dyn Cache>, advance: Advance) {
    let key = unique("window");
    let ttl = Duration::from_millis(1000);
    assert_eq!(cache.incr(&key, ttl).await.expect("first"), 1);
    advance(Duration::from_millis(600)).await;
    let counter = cache.incr_window(&key, ttl).await.expect("inside the window");
    assert_eq!(counter.count, 2);
    // What is left of the window (a rate limit's Retry-After): about 400 ms, never the whole ttl again.
    assert!(
        counter.resets_in > Duration::from_millis(100) && counter.resets_in <= Duration::from_millis(400),
        "{counter:?}"
    );
    advance(Duration::from_millis(600)).await;
    // 1200 ms after the first increment: past its window even though the second was only 600 ms ago.
    assert_eq!(cache.incr(&key, ttl).await.expect("after the window"), 1, "the window is not extended");
    assert_eq!(cache.incr(&key, ttl).await.expect("new window"), 2);
}
