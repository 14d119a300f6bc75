//! [`Services`]: the calls a run makes into services. An action runs in the active version of the in-process
//! component that declares it (the plan names it; a later activation applies from the next call), with the
//! invocation context of the step; a component that is not loaded (yet) is a retryable failure (the node may be
//! syncing a new version). A lookup asks the in-process component of its service, or an external service over
//! HTTP (`GET <endpoint><path>?<params>`: 2xx answers, 4xx is permanent, anything else retryable) or NATS (a
//! request with the parameters as a JSON object; no responder or no answer in time is retryable).

use std::sync::Arc;

use async_trait::async_trait;
use flowhost_components::ComponentStore;
use flowhost_core::signing::ServiceSigning;
use flowhost_egress::{Egress, EgressError, EgressPolicy};
use flowhost_runtime::{InvocationContext, InvokeError, Outcome};

use crate::call::CallError;
use crate::execute::ServiceCalls;
use crate::plan::LookupVia;
use flowhost_core::ports::Subjects;

/// How long an external data source may take to answer.
const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Calls into services (see the module documentation).
pub struct Services {
    store: Option<Arc<ComponentStore>>,
    subjects: Arc<dyn Subjects>,
    egress: Egress,
    /// Signs lookups and checks their answers (`flowhost_core::signing`).
    signing: ServiceSigning,
}

impl Services {
    /// `store`: `None` on a node without the plugin runtime (every in-process call is then retryable: another
    /// node may run the step). External lookups go out under `egress` (`FLOWHOST_EGRESS_*`), signed with
    /// `signing`, and their answers are checked with it.
    pub fn new(
        store: Option<Arc<ComponentStore>>,
        subjects: Arc<dyn Subjects>,
        egress: EgressPolicy,
        signing: ServiceSigning,
    ) -> Services {
        Services { store, subjects, egress: Egress::new(egress, LOOKUP_TIMEOUT), signing }
    }

    async fn lookup_http(&self, url: &str, params: &[(String, String)]) -> Result<String, CallError> {
        let failed = |error: EgressError| match error {
            // A refused address or a bad URL will not change by retrying; the rest may.
            EgressError::Refused(..) | EgressError::InvalidUrl(_) | EgressError::TooLarge(_) => {
                CallError::permanent(format!("GET {url}: {error}"))
            }
            EgressError::Transport(_) => CallError::retryable(format!("GET {url}: {error}")),
        };
        let mut request = self.egress.request(reqwest::Method::GET, url).map_err(failed)?.query(params);
        if self.signing.is_enabled() {
            // A GET has no body: its path and query are signed.
            let target = request.try_clone().and_then(|r| r.build().ok()).map(|built| {
                let url = built.url();
                format!("{}{}", url.path(), url.query().map(|q| format!("?{q}")).unwrap_or_default())
            });
            if let Some((name, signature)) = target.and_then(|target| self.signing.header(target.as_bytes())) {
                request = request.header(name, signature);
            }
        }
        let response = self.egress.send(request).await.map_err(failed)?;
        let status = response.status();
        let body = self.egress.read_body(response).await.map_err(failed)?;
        let text =
            String::from_utf8(body).map_err(|_| CallError::permanent(format!("GET {url}: the answer is not text")))?;
        match status.as_u16() {
            200..=299 => Ok(text),
            400..=499 => Err(CallError::permanent(format!("GET {url}: {status}"))),
            _ => Err(CallError::retryable(format!("GET {url}: {status}"))),
        }
    }

    async fn lookup_nats(&self, subject: &str, params: &[(String, String)]) -> Result<String, CallError> {
        let payload: serde_json::Map<String, serde_json::Value> =
            params.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
        let body = serde_json::to_vec(&payload).unwrap_or_default();
        let signed = self.signing.headers(&body);
        let answer = self
            .subjects
            .request_with_headers(subject, signed, body, LOOKUP_TIMEOUT)
            .await
            .map_err(|e| CallError::retryable(format!("request on {subject}: {e}")))?;
        self.signing
            .verify(answer.header(flowhost_core::signing::SIGNATURE_HEADER), &answer.payload)
            .map_err(|error| CallError::retryable(format!("the answer on {subject}: {error}")))?;
        String::from_utf8(answer.payload)
            .map_err(|_| CallError::permanent(format!("the answer on {subject} is not text")))
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
impl ServiceCalls for Services {
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

    async fn lookup(
        &self,
        service: &str,
        data_source: &str,
        params: &[(String, String)],
        via: &LookupVia,
    ) -> Result<String, CallError> {
        match via {
            LookupVia::Http { url } => return self.lookup_http(url, params).await,
            LookupVia::Nats { subject } => return self.lookup_nats(subject, params).await,
            LookupVia::InProcess => {}
        }
        let store = self.store.as_ref().ok_or_else(|| CallError::retryable("this node runs no plugins"))?;
        let plugin = store
            .active_of_service(service, |p| p.manifest().data_sources.iter().any(|d| d.name == data_source))
            .ok_or_else(|| CallError {
                outcome: Outcome::Retryable,
                message: format!("no loaded component of service {service:?} answers {data_source:?}"),
            })?;
        plugin.data_source(data_source, params).await.map_err(call_error)
    }
}
