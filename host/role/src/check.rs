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

/// A named check.
#[derive(Clone)]
pub struct Check {
    name: &'static str,
    run: CheckFn,
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
        Check { name, run: Arc::new(move || Box::pin(run())) }
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

/// Runs `checks` concurrently; returns the names of those that failed, logging why.
pub(crate) async fn failing(checks: &[Check], probe: &'static str) -> Vec<&'static str> {
    let results =
        futures::future::join_all(checks.iter().map(|check| async move { (check.name, check.run().await) })).await;
    let mut names = Vec::new();
    for (name, result) in results {
        if let Err(reason) = result {
            tracing::warn!(check = name, probe, reason, "check failing");
            if !names.contains(&name) {
                names.push(name);
            }
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
