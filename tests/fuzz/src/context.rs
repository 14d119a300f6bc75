//! What the targets that need the host's I/O share in one process: an async runtime, embedded ports in a
//! scratch directory (SQLite documents, in-process subjects and cache), the plugin runtime with a component
//! store over those ports (the `noop` plugin installed and active), the endpoint of the in-process services, and
//! the dependencies v2 flows validate against (a schema, an event source and a registered service). Built once,
//! on first use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use flowhost_catalog::{Catalog, ServiceManifest};
use flowhost_components::{ComponentStore, StoreConfig};
use flowhost_core::collections::{EVENT_SOURCES, SCHEMAS};
use flowhost_core::model::{EventSchema, EventSource, FieldType};
use flowhost_core::ports::Ports;
use flowhost_core::{Clock, ManualClock};
use flowhost_embedded::EmbeddedStore;
use flowhost_flows::Dependencies;
use flowhost_runs::ServiceEndpoint;
use flowhost_runtime::{Runtime, RuntimeConfig};
use serde_json::json;
use tempfile::TempDir;

/// The clock of every target: 2026-11-24T10:00:00Z.
pub(crate) const NOW_MS: i64 = 1_795_514_400_000;

pub(crate) struct Context {
    pub tokio: tokio::runtime::Runtime,
    pub ports: Ports,
    pub store: Arc<ComponentStore>,
    pub endpoint: ServiceEndpoint,
    pub deps: Dependencies,
}

/// The scratch directory of the embedded store, kept until [`remove_scratch`].
static SCRATCH: Mutex<Option<TempDir>> = Mutex::new(None);

/// The shared context, built on first use.
pub(crate) fn context() -> &'static Context {
    static CONTEXT: OnceLock<Context> = OnceLock::new();
    CONTEXT.get_or_init(build)
}

/// Removes the embedded store's scratch directory (a driver calls it once it is done; the context must not be
/// used after).
pub fn remove_scratch() {
    drop(SCRATCH.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take());
}

fn build() -> Context {
    let scratch = tempfile::Builder::new().prefix("flowhost-fuzz").tempdir().expect("a scratch directory");
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(NOW_MS));
    let embedded = EmbeddedStore::open(scratch.path(), 1, clock.clone()).expect("the embedded store opens");
    *SCRATCH.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(scratch);
    let ports = embedded.ports(clock);
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let runtime = Runtime::new(RuntimeConfig::default()).expect("the plugin runtime starts");
    let store = Arc::new(ComponentStore::new(ports.clone(), runtime, StoreConfig::default()));
    // The `noop` plugin (`plugins/noop`, built for wasm32-wasip2 by the fixtures' build script).
    let noop = flowhost_runtime_fixtures::bytes("noop");
    tokio.block_on(store.install_bundled(&[("noop", &noop)])).expect("the noop plugin installs");
    let endpoint = ServiceEndpoint::new(store.clone(), ports.clone(), "fuzz", "https://flowhost.example");
    let deps = tokio.block_on(flow_dependencies(&ports));
    Context { tokio, ports, store, endpoint, deps }
}

/// What `tests/tests/flows_v2.rs` registers: the event schema `deposit` with its source topic `deposits`, and
/// the services `notifications` (actions, data sources, every transport) and `crm` (Kafka only), stored the way
/// the admin API stores them, then loaded as validation loads them.
async fn flow_dependencies(ports: &Ports) -> Dependencies {
    let schema = EventSchema::new(
        "deposit",
        &[
            ("amount", FieldType::Double),
            ("player_id", FieldType::String),
            ("level", FieldType::Int),
            ("country", FieldType::String),
        ],
    );
    let source =
        EventSource { source_topic: "deposits".into(), default_output_topic: "deposits-out".into(), description: None };
    let documents = &ports.documents;
    documents.upsert(SCHEMAS, "deposit", json!(schema)).await.expect("the schema is stored");
    documents.upsert(EVENT_SOURCES, "deposits", json!(source)).await.expect("the event source is stored");
    let services = [
        json!({
            "service": "notifications",
            "components": [{"id": "sender", "version": "1.0.0"}],
            "actions": [
                {"name": "send_inapp", "config_schema": {"type": "object", "properties": {"message": {"type": "string"}}}},
                {"name": "send_webpush", "config_schema": {"type": "object", "properties": {
                    "template_id": {"type": "integer"}, "title": {"type": "string"},
                    "urgency": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"}},
                    "required": ["template_id"]}}
            ],
            "service_sources": ["nats", "kafka", "http"],
            "supports_nodes": ["condition", "lookup", "mapping"],
            "data_sources": [
                {"name": "templates", "path": "/data/templates", "params": ["tenant_id"]},
                {"name": "tenants", "path": "/data/tenants", "params": []}
            ],
            "transports": {"http": {"endpoint": "https://notifications.example"}}
        }),
        json!({
            "service": "crm",
            "components": [{"id": "crm-tags", "version": "1.0.0"}],
            "actions": [{"name": "tag_player", "config_schema": {"type": "object",
                "properties": {"tag": {"type": "string"}}, "required": ["tag"]}}],
            "service_sources": ["kafka"],
            "supports_nodes": ["condition"]
        }),
    ];
    for service in services {
        let service: ServiceManifest = serde_json::from_value(service).expect("the service manifest parses");
        Catalog::new(ports).register(service).await.expect("the service registers");
    }
    let mut deps = Dependencies::load(ports).await.expect("the dependencies load");
    deps.topics = HashMap::from([("crm-retarget".to_owned(), true)]);
    deps
}
