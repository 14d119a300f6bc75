//! Projectors (the `projector` world of `flowhost:plugin@0.1.0` or `0.2.0`): pure functions from the stored
//! state of one key and a record to the new state, or a rejection. A projector is a [`Plugin`] like any other
//! (same import checks, manifest, limits, fresh instance per call; the component store holds them too);
//! [`Runtime::load_projector`] loads one granting the `log` capability at most: a projection must be
//! deterministic.

use crate::{Capability, Compiled, InvokeError, LoadError, Manifest, Plugin, Runtime};

/// A loaded projector: a [`Plugin`] checked to be one. Cheap to clone; a projection in flight keeps its version
/// alive.
#[derive(Clone, Debug)]
pub struct Projector(Plugin);

impl Runtime {
    /// Loads a projector component: it may import `log` only (when `grants` has it), and must export the
    /// `projector` world's `manifest` and `project`. (The component store loads projectors like any plugin;
    /// this is the stricter entry for a role that runs only projections.)
    pub async fn load_projector(&self, compiled: Compiled, grants: &[Capability]) -> Result<Projector, LoadError> {
        let grants: Vec<Capability> = grants.iter().copied().filter(|c| *c == Capability::Log).collect();
        let plugin = self.prepare(compiled.0, &grants).await?;
        if !plugin.is_projector() {
            return Err(LoadError::Link("the component does not export the projector world's `project`".into()));
        }
        Ok(Projector(plugin))
    }
}

impl Projector {
    /// The manifest read from the component.
    pub fn manifest(&self) -> &Manifest {
        self.0.manifest()
    }

    /// Projects the record `input` (JSON) onto `state` (JSON; `None` for a new key) in a fresh instance: the new
    /// state, or the projector's rejection (`Permanent`) or request to retry (`Retryable`).
    pub async fn project(&self, state: Option<&str>, input: &str) -> Result<String, InvokeError> {
        self.0.project(state, input).await
    }
}
