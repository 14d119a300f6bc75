//! Errors of the runtime, kept in two kinds: a [`LoadError`] refuses a component, an [`InvokeError`] fails one
//! invocation (with a class the engine maps to an outcome) and leaves the plugin usable.

/// The runtime could not be created (engine configuration).
#[derive(Debug, thiserror::Error)]
#[error("plugin runtime: {0}")]
pub struct RuntimeError(pub String);

/// A component that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not a valid component (or were compiled for another engine / wasmtime version).
    #[error("invalid component: {0}")]
    InvalidComponent(String),
    /// The component's SDK version marker names a WIT package this host does not serve: the SDK is too new or
    /// too old for it.
    #[error(
        "the component was built with flowhost-sdk-guest {sdk} for {wit}, which this host does not serve (it \
         serves {served}): build it with an SDK for one of those, or run a host that serves {wit}"
    )]
    UnsupportedSdk {
        /// The SDK's version, from the marker.
        sdk: String,
        /// The WIT package the component was built for.
        wit: String,
        /// The packages this host serves.
        served: String,
    },
    /// The component imports a Flowhost capability the host did not grant.
    #[error(
        "the component imports capability {capability:?}, which is not granted (a plugin gets log and clock; an \
         operator grants more with FLOWHOST_PLUGINS_GRANTS)"
    )]
    NotGranted {
        /// The capability's name (`log`, `clock`).
        capability: String,
    },
    /// The component imports something the host does not offer at all.
    #[error("the component imports {0:?}, which the host does not provide")]
    UnsatisfiableImport(String),
    /// Linking or preparing the instance failed (e.g. the exports do not match the `action-plugin` world).
    #[error("cannot link the component: {0}")]
    Link(String),
    /// Reading the manifest failed (the `manifest` export trapped, exceeded a limit, ...).
    #[error("reading the manifest failed: {0}")]
    Manifest(#[source] InvokeError),
    /// The manifest is not the expected JSON document.
    #[error("invalid manifest: {0}")]
    InvalidManifest(String),
    /// The component uses a capability its manifest does not declare.
    #[error("the component imports capability {capability:?} but its manifest does not declare it")]
    Undeclared {
        /// The capability's name.
        capability: String,
    },
}

/// How one invocation failed. The first three come from the guest itself (a WIT `plugin-error`); the rest are
/// the host's classification of what the guest did.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvokeError {
    /// The guest asks to skip this node and continue the run.
    #[error("skip forward: {0}")]
    SkipForward(String),
    /// The guest reports a failure retrying cannot fix.
    #[error("permanent failure: {0}")]
    Permanent(String),
    /// The guest reports a transient failure.
    #[error("retryable failure: {0}")]
    Retryable(String),
    /// The wall-clock deadline passed (epoch interruption).
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// The fuel limit was used up.
    #[error("out of fuel")]
    OutOfFuel,
    /// The guest tried to grow its memory beyond the cap.
    #[error("memory limit of {0} bytes exceeded")]
    MemoryLimit(usize),
    /// The guest trapped (panic, `unreachable`, a call to an ungranted WASI function, ...).
    #[error("trap: {0}")]
    Trap(String),
    /// The output is not valid JSON.
    #[error("invalid output: {0}")]
    InvalidOutput(String),
    /// The output is bigger than the limit.
    #[error("output of {size} bytes exceeds the limit of {limit} bytes")]
    OutputTooLarge {
        /// Bytes returned.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The manifest does not declare this action (checked before running the guest).
    #[error("unknown action {0:?}")]
    UnknownAction(String),
    /// The manifest does not declare this data source, or the component answers none.
    #[error("unknown data source {0:?}")]
    UnknownDataSource(String),
    /// No instance slot was free (more concurrent invocations than `PoolConfig::max_instances`); retryable.
    #[error("no free instance slot: {0}")]
    Busy(String),
}

/// How the flow engine treats a failed invocation: the spec's outcome classes of a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Skip the node and continue the run.
    SkipForward,
    /// Fail for good (dead-letter queue).
    Permanent,
    /// Retry with backoff.
    Retryable,
}

impl Outcome {
    /// `skip-forward`, `permanent` or `retryable` (as in the WIT).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::SkipForward => "skip-forward",
            Outcome::Permanent => "permanent",
            Outcome::Retryable => "retryable",
        }
    }
}

impl InvokeError {
    /// Whether retrying the same invocation later may succeed (the engine backs off and retries these).
    pub fn is_retryable(&self) -> bool {
        self.outcome() == Outcome::Retryable
    }

    /// The outcome class: the guest's own for a reported failure; a deadline or a full pool may pass
    /// (retryable); anything else the guest did (fuel, memory, trap, bad output) would happen again (permanent).
    pub fn outcome(&self) -> Outcome {
        match self {
            InvokeError::SkipForward(_) => Outcome::SkipForward,
            InvokeError::Retryable(_) | InvokeError::Timeout(_) | InvokeError::Busy(_) => Outcome::Retryable,
            _ => Outcome::Permanent,
        }
    }

    /// A short machine-readable name of the failure (`plugin_error`, `timeout`, `out_of_fuel`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            InvokeError::SkipForward(_) | InvokeError::Permanent(_) | InvokeError::Retryable(_) => "plugin_error",
            InvokeError::Timeout(_) => "timeout",
            InvokeError::OutOfFuel => "out_of_fuel",
            InvokeError::MemoryLimit(_) => "memory_limit",
            InvokeError::Trap(_) => "trap",
            InvokeError::InvalidOutput(_) => "invalid_output",
            InvokeError::OutputTooLarge { .. } => "output_too_large",
            InvokeError::UnknownAction(_) => "unknown_action",
            InvokeError::UnknownDataSource(_) => "unknown_data_source",
            InvokeError::Busy(_) => "busy",
        }
    }
}

impl LoadError {
    /// The refusal as a client may see it: what is wrong, without wasmtime's error chain (compiler, linker and
    /// trap texts go to the log; they describe host internals, not the upload).
    pub fn public_message(&self) -> String {
        match self {
            LoadError::InvalidComponent(_) => {
                "invalid component: the bytes are not a WebAssembly component this host can compile".to_owned()
            }
            LoadError::Link(_) => {
                "cannot link the component: its exports do not match a flowhost:plugin world".to_owned()
            }
            LoadError::Manifest(error) => format!("reading the manifest failed: {}", error.public_message()),
            other => other.to_string(),
        }
    }
}

impl InvokeError {
    /// The failure as a client may see it: the guest's own message for a failure it reported, the host's
    /// classification otherwise, never wasmtime's trap text or backtrace (logged instead).
    pub fn public_message(&self) -> String {
        match self {
            InvokeError::Trap(_) => "trap: the guest trapped (details in the server log)".to_owned(),
            InvokeError::Busy(_) => "no free instance slot; retry later".to_owned(),
            other => other.to_string(),
        }
    }
}
