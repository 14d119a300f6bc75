//! [`InProcess`]: the service calls of in-process components. An action runs in the active version of the
//! component that declares it (the plan names it; a later activation applies from the next call), with the
//! invocation context of the step; a lookup asks the component of the service that declares the data source.
//! A component that is not loaded (yet) is a retryable failure: the node may be syncing a new version.

use std::sync::Arc;

use async_trait::async_trait;
use flowhost_components::ComponentStore;
use flowhost_runtime::{InvocationContext, InvokeError, Outcome};

use crate::execute::{CallError, ServiceCalls};

/// Calls into the component store's active plugins (see the module documentation).
pub struct InProcess {
    store: Option<Arc<ComponentStore>>,
}

impl InProcess {
    /// `store`: `None` on a node without the plugin runtime (every call is then retryable: another node may run
    /// the step).
    pub fn new(store: Option<Arc<ComponentStore>>) -> InProcess {
        InProcess { store }
    }

    fn plugin(&self, component: &str) -> Result<flowhost_runtime::Plugin, CallError> {
        let store = self.store.as_ref().ok_or_else(|| CallError::retryable("this node runs no plugins"))?;
        store.active(component).ok_or_else(|| CallError::retryable(format!("component {component:?} is not loaded")))
    }
}

fn call_error(error: InvokeError) -> CallError {
    CallError { outcome: error.outcome(), message: error.public_message() }
}

#[async_trait]
impl ServiceCalls for InProcess {
    async fn invoke(
        &self,
        service: &str,
        component: Option<&str>,
        action: &str,
        context: &InvocationContext,
        input: &str,
    ) -> Result<String, CallError> {
        let component = component.unwrap_or(service);
        let plugin = self.plugin(component)?;
        let limits = plugin.limits().clone();
        plugin.invoke_in(context, action, input, &limits).await.map_err(call_error)
    }

    async fn lookup(&self, service: &str, data_source: &str, params: &[(String, String)]) -> Result<String, CallError> {
        let store = self.store.as_ref().ok_or_else(|| CallError::retryable("this node runs no plugins"))?;
        let plugin = store
            .active_plugins()
            .into_values()
            .find(|p| {
                p.manifest().service.as_deref().unwrap_or(&p.manifest().id) == service
                    && p.manifest().data_sources.iter().any(|d| d.name == data_source)
            })
            .ok_or_else(|| CallError {
                outcome: Outcome::Retryable,
                message: format!("no loaded component of service {service:?} answers {data_source:?}"),
            })?;
        plugin.data_source(data_source, params).await.map_err(call_error)
    }
}
