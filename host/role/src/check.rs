//! Health and readiness checks: a name (what `/health` and `/ready` report when it fails) and an async
//! function. A check that does not answer within [`Check::TIMEOUT`] counts as failing, so a hung backend makes
//! `/ready` answer 503 instead of hanging the probe.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// What a check answers: `Err` carries a short reason for the log (never sent to the client: it may hold a
/// backend's message).
pub type CheckResult = Result<(), String>;

/// The function behind a check.
pub type CheckFn = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = CheckResult> + Send>> + Send + Sync>;

/// A named check. Clones share the last outcome, so a check probed on every listener logs once per change.
#[derive(Clone)]
pub struct Check {
    name: &'static str,
    run: CheckFn,
    /// Why the check failed last time (`None`: it passed, or never ran).
    last_failure: Arc<std::sync::Mutex<Option<String>>>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check").field("name", &self.name).finish()
    }
}

impl Check {
    /// How long a check may take before it counts as failing.
    pub const TIMEOUT: Duration = Duration::from_secs(2);

    /// A check running the async function `run`.
    pub fn new<F, Fut>(name: &'static str, run: F) -> Check
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = CheckResult> + Send + 'static,
    {
        Check { name, run: Arc::new(move || Box::pin(run())), last_failure: Arc::default() }
    }

    /// A check answered at once from in-memory state.
    pub fn sync(name: &'static str, run: impl Fn() -> CheckResult + Send + Sync + 'static) -> Check {
        let run = Arc::new(run);
        Check::new(name, move || {
            let result = run();
            async move { result }
        })
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Runs the check with the timeout.
    pub async fn run(&self) -> CheckResult {
        match tokio::time::timeout(Self::TIMEOUT, (self.run)()).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {:?}", Self::TIMEOUT)),
        }
    }
}

/// What a probe's result means against the check's last one: only a change is worth a warning or a notice
/// (an orchestrator probes every few seconds; a failing backend would otherwise fill the log).
#[derive(Debug, PartialEq, Eq)]
enum Change {
    /// Failing now, and passing before (or failing for another reason).
    StartsFailing,
    /// Failing again for the same reason.
    StillFailing,
    /// Passing now after failing.
    Recovers,
    /// Passing, as before.
    StillPassing,
}

fn change(last_failure: Option<&str>, result: &CheckResult) -> Change {
    match (last_failure, result) {
        (Some(before), Err(now)) if before == now => Change::StillFailing,
        (_, Err(_)) => Change::StartsFailing,
        (Some(_), Ok(())) => Change::Recovers,
        (None, Ok(())) => Change::StillPassing,
    }
}

impl Check {
    /// Records `result` as the last outcome and logs it when it changed.
    fn observe(&self, probe: &'static str, result: &CheckResult) {
        let mut last = self.last_failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let name = self.name;
        match (change(last.as_deref(), result), result) {
            (Change::StartsFailing, Err(reason)) => tracing::warn!(check = name, probe, reason, "check failing"),
            (Change::StillFailing, Err(reason)) => tracing::debug!(check = name, probe, reason, "check still failing"),
            (Change::Recovers, _) => tracing::info!(check = name, probe, "check passing again"),
            _ => {}
        }
        *last = result.as_ref().err().cloned();
    }
}

/// Runs `checks` concurrently; returns the names of those that failed, logging why when that changed.
pub(crate) async fn failing(checks: &[Check], probe: &'static str) -> Vec<&'static str> {
    let results = futures::future::join_all(checks.iter().map(|check| async move { (check, check.run().await) })).await;
    let mut names = Vec::new();
    for (check, result) in results {
        check.observe(probe, &result);
        if result.is_err() && !names.contains(&check.name) {
            names.push(check.name);
        }
    }
    names
}

impl Check {
    /// `documents`: the documents port answers a read (of a document that need not exist).
    pub fn documents(documents: std::sync::Arc<dyn flowhost_core::ports::DocumentStore>) -> Check {
        Check::new("documents", move || {
            let documents = documents.clone();
            async move { documents.get("flowhost_probe", "probe").await.map(|_| ()).map_err(|e| e.to_string()) }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_change_of_outcome_is_worth_a_warning() {
        let failed: CheckResult = Err("down".into());
        assert_eq!(change(None, &failed), Change::StartsFailing);
        assert_eq!(change(Some("down"), &failed), Change::StillFailing);
        assert_eq!(change(Some("timeout"), &failed), Change::StartsFailing, "another reason is news");
        assert_eq!(change(Some("down"), &Ok(())), Change::Recovers);
        assert_eq!(change(None, &Ok(())), Change::StillPassing);
    }

    #[tokio::test]
    async fn clones_share_the_last_outcome() {
        let check = Check::sync("flaky", || Err("down".into()));
        let clone = check.clone();
        assert_eq!(failing(std::slice::from_ref(&check), "ready").await, ["flaky"]);
        assert_eq!(clone.last_failure.lock().unwrap().as_deref(), Some("down"));
    }
}
