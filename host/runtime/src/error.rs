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
    /// The component imports a Flowhost capability the host did not grant.
    #[error("the component imports capability {capability:?}, which is not granted")]
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
    /// No instance slot was free (more concurrent invocations than `PoolConfig::max_instances`); retryable.
    #[error("no free instance slot: {0}")]
    Busy(String),
}

impl InvokeError {
    /// Whether retrying the same invocation later may succeed (the engine backs off and retries these).
    pub fn is_retryable(&self) -> bool {
        matches!(self, InvokeError::Retryable(_) | InvokeError::Busy(_))
    }
}
