//! [`EngineRole`]: the rule engine and the runner of released v2 flows as a role. No listener of its own; two
//! background tasks run the rule engine and the flow runner (`flowhost-runs`) until shutdown, and three
//! readiness checks (`engine_rules`: a rule set is loaded; `engine_sources`: consuming the source topics does
//! not fail; `flow_runs`: released flows loaded, no Kafka retarget topic missing, their sources consumed) join
//! `/ready` on every listener of the process. With `engine.node_kinds = wasm` the conditions and mappings of
//! rules and of flows run through the component store's `condition` and `mapping` components; flow actions
//! and plugin node kinds always run in their components.

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
        let components = context.service::<Arc<flowhost_components::ComponentStore>>();
        let wasm_nodes = config.engine.node_kinds == NodeKindsMode::Wasm;
        if let (true, Some(store)) = (wasm_nodes, &components) {
            info!("rules and flows run conditions and mappings through the condition and mapping components");
            engine = engine.with_nodes(Arc::new(WasmNodes::new(store.clone())));
        }
        // Plugin node kinds always run in their components; conditions and mappings by `engine.node_kinds`.
        let flow_nodes = components.clone().map(|store| match wasm_nodes {
            true => flowhost_runs::ComponentNodes::new(store),
            false => flowhost_runs::ComponentNodes::with_native_bundled(store),
        });
        let status = engine.status();
        let sources = status.clone();
        let shutdown = context.shutdown.clone();
        let run_metrics = Arc::new(flowhost_runs::RunMetrics::register(&context.registry)?);
        let egress = flowhost_egress::EgressPolicy::of(&config.egress)?;
        let services = Arc::new(flowhost_runs::Services::new(
            components,
            context.ports.subjects.clone(),
            egress.clone(),
            context.ports.signing.clone(),
        ));
        let runner_config = flowhost_runs::RunnerConfig {
            engine: config.engine.clone(),
            topic_partitions: config.topics.partitions,
            poll_interval: std::time::Duration::from_millis(config.engine.flows_poll_interval_ms),
            reply_url_base: config.public_base_url(),
            reply_dedup: config.reply_dedup(),
            admin_token: config.api.admin_token.clone(),
            egress,
        };
        let mut runner = flowhost_runs::Runner::new(context.ports.clone(), runner_config, services, run_metrics);
        if let Some(nodes) = flow_nodes {
            runner = runner.with_nodes(Arc::new(nodes));
        }
        let runs = runner.status();
        let runner_shutdown = context.shutdown.clone();
        Ok(RoleParts::default()
            .task(async move {
                engine.run(shutdown).await;
                Ok(())
            })
            .task(async move {
                runner.run(runner_shutdown).await;
                Ok(())
            })
            .task({
                let (ports, storage) = (context.ports.clone(), config.engine.runs.clone());
                let shutdown = context.shutdown.clone();
                async move {
                    flowhost_runs::retention::run_sweep(ports, storage, shutdown).await;
                    Ok(())
                }
            })
            .readiness(Check::sync("flow_runs", move || runs.check()))
            .readiness(Check::sync("engine_rules", move || status.check_rules()))
            .readiness(Check::sync("engine_sources", move || sources.check_sources())))
    }
}
