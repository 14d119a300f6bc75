//! Projectors (the `projector` world): pure functions from the stored state of one key and a record to the new
//! state, or a rejection. Loaded like plugins (same import checks, manifest, limits, fresh instance per call)
//! but granted the `log` capability at most: a projection must be deterministic.

use std::sync::Arc;
use std::time::Instant;

use crate::bindings::projector::ProjectorPre;
use crate::host::HostState;
use crate::runtime::{classify, finish, new_store, Identity, Inner};
use crate::{Capability, Compiled, InvokeError, Limits, LoadError, Manifest, Runtime};

/// A loaded projector. Cheap to clone; a projection in flight keeps its version alive.
#[derive(Clone)]
pub struct Projector {
    inner: Arc<ProjectorInner>,
}

struct ProjectorInner {
    runtime: Arc<Inner>,
    pre: ProjectorPre<HostState>,
    manifest: Manifest,
    identity: Identity,
    limits: Limits,
}

impl std::fmt::Debug for Projector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Projector").field("id", &self.inner.manifest.id).finish_non_exhaustive()
    }
}

impl Runtime {
    /// Loads a projector component: it may import `log` only (when `grants` has it), and must export the
    /// `projector` world's `manifest` and `project`.
    pub async fn load_projector(&self, compiled: Compiled, grants: &[Capability]) -> Result<Projector, LoadError> {
        let grants: Vec<Capability> = grants.iter().copied().filter(|c| *c == Capability::Log).collect();
        let (pre, imported) = self.link(&compiled.0, &grants)?;
        let pre = ProjectorPre::new(pre).map_err(|error| LoadError::Link(format!("{error:#}")))?;
        let mut store = self.loading_store()?;
        let text = match pre.instantiate_async(&mut store).await {
            Ok(instance) => instance.call_manifest(&mut store).await,
            Err(error) => {
                let limits = &self.config().limits;
                return Err(LoadError::Manifest(classify(error, &store, limits)));
            }
        };
        let (manifest, identity, limits) = self.read_manifest(text, store, &imported)?;
        Ok(Projector {
            inner: Arc::new(ProjectorInner { runtime: self.inner().clone(), pre, manifest, identity, limits }),
        })
    }
}

impl Projector {
    /// The manifest read from the component.
    pub fn manifest(&self) -> &Manifest {
        &self.inner.manifest
    }

    /// Projects the record `input` (JSON) onto `state` (JSON; `None` for a new key) in a fresh instance: the new
    /// state, or the projector's rejection (`Permanent`) or request to retry (`Retryable`).
    pub async fn project(&self, state: Option<&str>, input: &str) -> Result<String, InvokeError> {
        let started = Instant::now();
        let limits = &self.inner.limits;
        let result = async {
            let mut store = new_store(&self.inner.runtime, self.inner.identity.clone(), limits)?;
            let instance = match self.inner.pre.instantiate_async(&mut store).await {
                Ok(instance) => instance,
                Err(error) => return Err(classify(error, &store, limits)),
            };
            let result = instance.call_project(&mut store, state, input).await;
            finish(result, store, limits)
        }
        .await;
        self.inner.runtime.observe(&self.inner.manifest.id, &result, started);
        result
    }
}
