//! [`EngineRole`]: the executor as a role. No listener of its own; background tasks run the [`Runner`] (v1 rules
//! and released v2 flows from one consumer) and the retention sweep until shutdown, and three readiness checks
//! (`engine_rules`: a rule set is loaded; `engine_sources`: consuming the source topics does not fail;
//! `flow_runs`: released flows loaded, no Kafka retarget topic missing) join `/ready` on every listener of the
//! process. The conditions and mappings of rules and flows run through the component store's `condition` and
//! `mapping` components with `engine.node_kinds = wasm`, natively otherwise; flow actions and plugin node kinds
//! always run in their components.

use std::sync::Arc;

use flowhost_core::config::SectionEntry;
use flowhost_role::{Check, Role, RoleContext, RoleParts};
use tracing::info;

use crate::config::{EngineConfig, NodeKindsMode};
use crate::rules::EngineMetrics;
use crate::{ComponentNodes, RunMetrics, Runner, RunnerConfig, Services};

/// The engine role (see the module documentation).
#[derive(Debug)]
pub struct EngineRole;

#[async_trait::async_trait]
impl Role for EngineRole {
    const NAME: &'static str = "engine";
    const SECTION: Option<SectionEntry> = Some(SectionEntry::of::<EngineConfig>());
    const USES_COMPONENTS: bool = true;

    async fn build(context: &RoleContext) -> anyhow::Result<RoleParts> {
        let config = &context.config;
        let engine = config.section::<EngineConfig>().into_owned();
        let components = context.service::<Arc<flowhost_components::ComponentStore>>();
        let egress = flowhost_egress::EgressPolicy::of(&config.egress)?;
        let services = Arc::new(Services::new(
            components.clone(),
            context.ports.subjects.clone(),
            egress.clone(),
            context.ports.signing.clone(),
        ));
        let runner_config = RunnerConfig {
            engine: engine.clone(),
            topic_partitions: config.topics.partitions,
            poll_interval: std::time::Duration::from_millis(engine.flows_poll_interval_ms),
            reply_url_base: config.public_base_url(),
            reply_dedup: engine.reply_dedup(),
            admin_token: config.api.admin_token.clone(),
            egress,
        };
        let metrics = Arc::new(RunMetrics::register(&context.registry)?);
        let rule_metrics = Arc::new(EngineMetrics::register(&context.registry)?);
        let mut runner = Runner::new(context.ports.clone(), runner_config, services, metrics, rule_metrics);
        // Plugin node kinds always run in their components; conditions and mappings by `engine.node_kinds`.
        if let Some(store) = components {
            let nodes = match engine.node_kinds {
                NodeKindsMode::Wasm => {
                    info!("rules and flows run conditions and mappings through the condition and mapping components");
                    ComponentNodes::new(store)
                }
                NodeKindsMode::Native => ComponentNodes::with_native_bundled(store),
            };
            runner = runner.with_nodes(Arc::new(nodes));
        }
        let status = runner.status();
        let (rules, sources) = (status.clone(), status.clone());
        let shutdown = context.shutdown.clone();
        Ok(RoleParts::default()
            .task(async move {
                runner.run(shutdown).await;
                Ok(())
            })
            .task({
                let (ports, storage) = (context.ports.clone(), engine.runs.clone());
                let shutdown = context.shutdown.clone();
                async move {
                    crate::retention::run_sweep(ports, storage, shutdown).await;
                    Ok(())
                }
            })
            .readiness(Check::sync("flow_runs", move || status.check()))
            .readiness(Check::sync("engine_rules", move || rules.check_rules()))
            .readiness(Check::sync("engine_sources", move || sources.check_sources())))
    }
}
