//! Exponential backoff for retrying transient failures (an unreachable broker or database).

use std::time::Duration;

/// Delays of `initial`, `initial * factor`, ... capped at `cap`.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    factor: f64,
    cap: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(initial: Duration, factor: f64, cap: Duration) -> Self {
        Self { initial, factor, cap, next: initial }
    }

    /// The default for reconnecting to a backend: 100 ms doubling to 5 s.
    pub fn for_backend() -> Self {
        Self::new(Duration::from_millis(100), 2.0, Duration::from_secs(5))
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.mul_f64(self.factor).min(self.cap);
        delay
    }

    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// Runs `attempt` until it succeeds, waiting `backoff`'s delays between failures (each logged as a warning
/// naming `what`); `false` when `shutdown` fired first. For start-up work a role needs done once its backend
/// answers, such as creating indexes.
pub async fn until_done<F, Fut, E>(
    what: &str,
    mut backoff: Backoff,
    shutdown: &tokio_util::sync::CancellationToken,
    mut attempt: F,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    loop {
        match attempt().await {
            Ok(()) => return true,
            Err(error) => {
                let delay = backoff.next_delay();
                tracing::warn!(%error, retry_in_ms = delay.as_millis() as u64, "{what} failed; retrying");
                if !crate::clock::sleep_or_shutdown(delay, shutdown).await {
                    return false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_and_resets() {
        let mut backoff = Backoff::new(Duration::from_secs(2), 3.0, Duration::from_secs(60));
        let delays: Vec<u64> = (0..5).map(|_| backoff.next_delay().as_secs()).collect();
        assert_eq!(delays, vec![2, 6, 18, 54, 60]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_secs(2));
    }
}
