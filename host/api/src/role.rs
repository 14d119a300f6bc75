//! [`AdminRole`]: the flow runtime's administration API as a role, with the drift pass of released v2 flows and
//! the answers to flow broadcast requests as its tasks. It serves on the main listener
//! (`FLOWHOST_API_HOST` / `API_PORT`, default `127.0.0.1:8787`), is ready when the documents port answers, and
//! refuses to start on a non-loopback address without an admin token unless the operator allows it explicitly
//! (`FLOWHOST_ADMIN_ALLOW_UNAUTHENTICATED=true`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use flowhost_core::config::Config;
use flowhost_role::{Check, Listener, Role, RoleContext, RoleParts};

use crate::AppState;

/// The admin role (see the module documentation).
#[derive(Debug)]
pub struct AdminRole;

#[async_trait::async_trait]
impl Role for AdminRole {
    const NAME: &'static str = "admin";
    const USES_COMPONENTS: bool = true;

    async fn build(context: &RoleContext) -> anyhow::Result<RoleParts> {
        let config = &context.config;
        check_exposure(config)?;
        let mut state =
            AppState::new(context.ports.clone()).with_egress(flowhost_egress::EgressPolicy::of(&config.egress)?);
        // The engine's section: the reply window and the consumer group are the flow runtime's, which this API
        // answers for.
        let engine = config.section::<flowhost_runs::EngineConfig>();
        state.reply_dedup = engine.reply_dedup();
        if let Some(store) = context.service::<Arc<flowhost_components::ComponentStore>>() {
            let ports = context.ports.clone();
            state.endpoint = Some(flowhost_runs::ServiceEndpoint::new(
                store.clone(),
                ports,
                &engine.group_id,
                &config.public_base_url(),
            ));
            state = state.with_components(store);
        }
        let flows = state.flows.clone();
        let router =
            crate::app(state, config.api.max_body_bytes, config.api.admin_token.as_ref(), &config.api.allowed_hosts);
        let listener = Listener::new("admin", config.api_addr(), "FLOWHOST_API_HOST / API_PORT", router)
            .with_fallback(crate::fallback());
        let drift_interval = Duration::from_millis(config.api.drift_interval_ms);
        let (drift_shutdown, requests_shutdown) = (context.shutdown.clone(), context.shutdown.clone());
        let broadcasts = flows.clone();
        Ok(RoleParts::default()
            .listener(listener)
            .task(async move {
                flowhost_flows::drift::run(flows, drift_interval, drift_shutdown).await;
                Ok(())
            })
            .task(async move {
                flowhost_flows::broadcast::serve_requests(broadcasts, requests_shutdown).await;
                Ok(())
            })
            .readiness(Check::documents(context.ports.documents.clone())))
    }
}

/// An admin API reachable from other hosts must be protected: without `FLOWHOST_ADMIN_TOKEN`, a non-loopback
/// `FLOWHOST_API_HOST` is refused unless `FLOWHOST_ADMIN_ALLOW_UNAUTHENTICATED` is true.
fn check_exposure(config: &Config) -> anyhow::Result<()> {
    if config.api.admin_token.is_some() || config.api.allow_unauthenticated || is_loopback(&config.api.host) {
        return Ok(());
    }
    bail!(
        "configuration: FLOWHOST_API_HOST: {:?} exposes the admin API to other hosts without authentication; set \
         FLOWHOST_ADMIN_TOKEN, or FLOWHOST_ADMIN_ALLOW_UNAUTHENTICATED=true to accept an open admin API",
        config.api.host
    )
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_core::config::Secret;

    #[test]
    fn open_admin_api_only_on_loopback_unless_allowed() {
        let cases = [
            ("127.0.0.1", None, false, true),
            ("localhost", None, false, true),
            ("::1", None, false, true),
            ("[::1]", None, false, true),
            ("0.0.0.0", None, false, false),
            ("10.1.2.3", None, false, false),
            ("admin.internal", None, false, false),
            ("0.0.0.0", Some("t"), false, true),
            ("0.0.0.0", None, true, true),
        ];
        for (host, token, allow, accepted) in cases {
            let mut config = Config::default();
            config.api.host = host.to_owned();
            config.api.admin_token = token.map(Secret::new);
            config.api.allow_unauthenticated = allow;
            let result = check_exposure(&config);
            assert_eq!(result.is_ok(), accepted, "{host} token={token:?} allow={allow}: {result:?}");
            if let Err(error) = result {
                assert!(error.to_string().contains("FLOWHOST_ADMIN_TOKEN"), "{error}");
            }
        }
    }
}
