//! [`EngineRole`]: the rule engine as a role. No listener of its own; a background task runs the engine until
//! shutdown, and two readiness checks (`engine_rules`: a rule set is loaded; `engine_sources`: consuming the
//! source topics does not fail) join `/ready` on every listener of the process. With `engine.node_kinds = wasm`
//! conditions and mappings run through the component store's `condition` and `mapping` components.

use std::sync::Arc;

use flowhost_core::config::NodeKindsMode;
use flowhost_role::{Check, Role, RoleContext, RoleParts};
use tracing::info;

use crate::{Engine, EngineMetrics, WasmNodes};

/// The engine role (see the module documentation).
#[derive(Debug)]
pub struct EngineRole;

#[async_trait::async_trait]
impl Role for EngineRole {
    const NAME: &'static str = "engine";
    const CONFIG_SECTION: &'static str = "engine";
    const USES_COMPONENTS: bool = true;

    async fn build(context: &RoleContext) -> anyhow::Result<RoleParts> {
        let config = &context.config;
        let metrics = Arc::new(EngineMetrics::register(&context.registry)?);
        let mut engine = Engine::new(context.ports.clone(), config.engine.clone(), config.topics.partitions, metrics);
        if let (NodeKindsMode::Wasm, Some(store)) =
            (config.engine.node_kinds, context.service::<Arc<flowhost_components::ComponentStore>>())
        {
            info!("the engine runs conditions and mappings through the condition and mapping components");
            engine = engine.with_nodes(Arc::new(WasmNodes::new(store)));
        }
        let status = engine.status();
        let sources = status.clone();
        let shutdown = context.shutdown.clone();
        Ok(RoleParts::default()
            .task(async move {
                engine.run(shutdown).await;
                Ok(())
            })
            .readiness(Check::sync("engine_rules", move || status.check_rules()))
            .readiness(Check::sync("engine_sources", move || sources.check_sources())))
    }
}
