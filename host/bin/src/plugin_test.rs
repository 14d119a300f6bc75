//! `flowhost plugin test`: one action of a component, run the way a flow runs it (the host's runtime, limits and
//! capabilities; `documents` backed by a store of its own), reported with its output, outcome class, the guest's
//! log lines and the duration, so a plugin author iterates without a server.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use flowhost_core::config::PluginsConfig;
use flowhost_core::SystemClock;
use flowhost_runtime::{InvocationContext, Runtime};
use serde::{Deserialize, Serialize};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;

/// The invocation context a test call runs with (`--context`), as a flow would pass it; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestContext {
    pub tenant_id: Option<String>,
    pub flow_id: Option<String>,
    pub run_id: Option<String>,
    pub node_id: Option<String>,
    /// Default: a fresh one-off key.
    #[serde(default)]
    pub idempotency_key: String,
    /// Default: 1, the first attempt.
    #[serde(default)]
    pub attempt: u32,
}

impl TestContext {
    /// Parses `--context`: a JSON object of the fields above.
    pub fn parse(text: &str) -> anyhow::Result<TestContext> {
        serde_json::from_str(text)
            .context("--context: a JSON object of tenant_id, flow_id, run_id, node_id, idempotency_key and attempt")
    }

    fn into_invocation(self) -> InvocationContext {
        InvocationContext {
            tenant_id: self.tenant_id,
            flow_id: self.flow_id,
            run_id: self.run_id,
            node_id: self.node_id,
            idempotency_key: self.idempotency_key,
            attempt: self.attempt,
            smoke_test: false,
        }
    }
}

/// One line the guest logged (its `log` calls, its stdout and stderr) or the host logged about it.
#[derive(Debug, Clone, Serialize)]
pub struct LogLine {
    pub level: String,
    pub message: String,
}

/// What one test call did.
#[derive(Debug, Serialize)]
pub struct TestReport {
    /// `ok`, or the failure's outcome class: `skip-forward`, `permanent`, `retryable`.
    pub outcome: &'static str,
    /// The action's output (JSON), when it succeeded.
    pub output: Option<serde_json::Value>,
    /// The failure as the host classifies it (`timed out after 1000 ms`, `permanent failure: ...`).
    pub error: Option<String>,
    pub logs: Vec<LogLine>,
    /// Instantiation and the call, as the engine would wait for it.
    pub duration_ms: f64,
}

impl TestReport {
    /// The report as people read it: outcome, duration, log lines, then the output or the error.
    pub fn render(&self) -> String {
        let mut text = format!("outcome   {}\nduration  {:.2} ms\n", self.outcome, self.duration_ms);
        text.push_str(&format!("logs      {}\n", self.logs.len()));
        for line in &self.logs {
            text.push_str(&format!("  {:<5} {}\n", line.level, line.message));
        }
        if let Some(error) = &self.error {
            text.push_str(&format!("error     {error}\n"));
        }
        if let Some(output) = &self.output {
            let pretty = serde_json::to_string_pretty(output).unwrap_or_else(|_| output.to_string());
            text.push_str(&format!("output\n{pretty}\n"));
        }
        text
    }
}

/// Collects the log events that name a plugin (everything the runtime logs for a guest carries `plugin`).
#[derive(Clone, Default)]
pub struct GuestLogs(Arc<Mutex<Vec<LogLine>>>);

impl GuestLogs {
    fn take(&self) -> Vec<LogLine> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for GuestLogs {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        #[derive(Default)]
        struct Fields {
            plugin: bool,
            message: String,
            rest: String,
        }
        impl Visit for Fields {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                match field.name() {
                    "plugin" => self.plugin = true,
                    "message" => self.message = format!("{value:?}"),
                    name => self.rest.push_str(&format!(" {name}={value:?}")),
                }
            }
            fn record_str(&mut self, field: &Field, value: &str) {
                match field.name() {
                    "message" => self.message = value.to_owned(),
                    _ => self.record_debug(field, &value),
                }
            }
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.plugin {
            let line = LogLine {
                level: event.metadata().level().as_str().to_ascii_lowercase(),
                message: fields.message + &fields.rest,
            };
            self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
        }
    }
}

/// One test call: `action` of the component at `path` on `input`, for `context`; or, without an action, the
/// projection of the record `input` onto `state` by a projector.
#[derive(Debug)]
pub struct TestCall<'a> {
    pub path: &'a Path,
    pub action: Option<&'a str>,
    pub input: &'a str,
    /// A projector's stored state (absent: a new key).
    pub state: Option<&'a str>,
    pub context: TestContext,
    /// Instead of the configured (and manifest's) wall-clock limit.
    pub timeout: Option<Duration>,
    /// Where the `documents` capability keeps its documents (default: a temporary store, gone afterwards).
    pub data_dir: Option<&'a Path>,
}

/// Runs `call` with the runtime, limits and capabilities of `plugins` (every capability offered, as locally no
/// operator grants any; the manifest must still declare each) and the `documents` capability on an embedded
/// store. `logs` must be a layer of this process's subscriber.
pub async fn run(plugins: &PluginsConfig, call: TestCall<'_>, logs: &GuestLogs) -> anyhow::Result<TestReport> {
    let TestCall { path, action, input, state, context, timeout, data_dir } = call;
    if action.is_some() && state.is_some() {
        bail!("--state is a projector's: a call of an action takes --input alone");
    }
    let temporary;
    let data_dir = match data_dir {
        Some(dir) => dir,
        None => {
            temporary = tempfile::tempdir().context("creating a temporary documents store")?;
            temporary.path()
        }
    };
    let clock = Arc::new(SystemClock);
    let store = flowhost_embedded::EmbeddedStore::open(data_dir, 1, clock.clone())
        .with_context(|| format!("opening the documents store in {}", data_dir.display()))?;
    let runtime = Runtime::with_host(crate::runtime_config(plugins), clock, Some(store.documents()), None)?;
    let plugin = crate::load_local(&runtime, plugins, path).await?;
    let mut limits = plugin.limits().clone();
    if let Some(timeout) = timeout {
        limits.timeout = timeout;
    }
    logs.take();
    let started = Instant::now();
    let result = match action {
        Some(_) if plugin.is_projector() => {
            bail!(
                "{} is a projector: leave --action out, and give the record with --input and the state with --state",
                path.display()
            )
        }
        Some(action) => plugin.invoke_in(&context.into_invocation(), action, input.trim(), &limits).await,
        None if plugin.is_projector() => plugin.project(state.map(str::trim), input.trim()).await,
        None => bail!("{} is not a projector: name the action to run with --action", path.display()),
    };
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    let logs = logs.take();
    Ok(match result {
        Ok(output) => TestReport {
            outcome: "ok",
            // The runtime checked that the output is JSON.
            output: Some(serde_json::from_str(&output).unwrap_or(serde_json::Value::String(output))),
            error: None,
            logs,
            duration_ms,
        },
        Err(error) => TestReport {
            outcome: error.outcome().as_str(),
            output: None,
            error: Some(error.to_string()),
            logs,
            duration_ms,
        },
    })
}
