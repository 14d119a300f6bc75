//! Test support shared by every suite in `tests/`: where the real servers are (`servers`), the port contract
//! suites (`contract`) that the embedded defaults and the distributed backends must both pass, and the
//! `TestHost` harness that runs Flowhost on port 0 for end-to-end tests.

mod both;
pub mod browser;
pub mod cli;
pub mod contract;
pub mod every_role;
pub mod faulty;
pub mod gateway;
pub mod host;
pub mod inapp;
pub mod keyvault;
pub mod load;
pub mod process;
pub mod push;
pub mod push_service;
pub mod sender;
pub mod servers;

pub use host::{Backends, TestHost};

/// A name no other test uses: for topics, groups, databases, subjects and keys.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// Waits until `done` answers `Some` (at most `seconds`), polling every 200 ms; panics naming `what` when it
/// never does.
pub async fn eventually<T, F, Fut>(what: &str, seconds: u64, mut done: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        if let Some(value) = done().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < until, "never: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
