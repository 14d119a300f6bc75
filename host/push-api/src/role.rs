//! [`PushRole`]: the web-push notification service's API as a role. Its routes share the main listener
//! (`FLOWHOST_API_HOST` / `API_PORT`) unless `FLOWHOST_PUSH_API_LISTEN` gives them an address of their own; the
//! retention sweep (after the interaction-event TTL is enforced at boot) and the in-app delivery (this node's
//! websockets) run beside them. A caller policy that failed to load is a liveness failure
//! ([`POLICY_CHECK`]): every `/health` of the process answers 503 until the operator fixes it, as the spec says.

use std::sync::Arc;

use flowhost_core::config::SectionEntry;
use flowhost_role::{Check, Listener, Role, RoleContext, RoleParts};

use crate::config::PushConfig;
use crate::{fallback, router, run_retention, PushState, POLICY_CHECK};

/// The push-api role (see the module documentation).
#[derive(Debug)]
pub struct PushRole;

#[async_trait::async_trait]
impl Role for PushRole {
    const NAME: &'static str = "push-api";
    const SECTION: Option<SectionEntry> = Some(SectionEntry::of::<PushConfig>());

    async fn build(context: &RoleContext) -> anyhow::Result<RoleParts> {
        let config = &context.config;
        // Editor sends go to a sender over the subjects port (`send.rs`): this role runs no plugin itself.
        let state = Arc::new(PushState::from_config(config, context.ports.clone())?);
        let addr = config.section::<PushConfig>().listen.clone().unwrap_or_else(|| config.api_addr());
        let listener =
            Listener::new("push", addr, "FLOWHOST_PUSH_API_LISTEN", router(state.clone())).with_fallback(fallback());
        let policy = state.clone();
        let (ports, sweep_interval, shutdown) =
            (state.ports.clone(), state.settings.sweep_interval, context.shutdown.clone());
        // The activity list's indexes once the store answers, then the retention sweep (a task that ends stops
        // the process, so both are one).
        let housekeeping = async move {
            let backoff = flowhost_core::backoff::Backoff::for_backend();
            let documents = ports.documents.clone();
            let indexed =
                flowhost_core::backoff::until_done("creating the activity indexes", backoff, &shutdown, || {
                    flowhost_notifications::records::ensure_activity_indexes(documents.as_ref())
                })
                .await;
            if indexed {
                // The spec's 30-day interaction-event TTL, enforced at boot whatever the retention setting was
                // when the events were stored; the sweep keeps it afterwards (events are written capped by it).
                let now = ports.clock.now_ms();
                let events = ports.documents.clone();
                let backoff = flowhost_core::backoff::Backoff::for_backend();
                let enforced = flowhost_core::backoff::until_done(
                    "enforcing the interaction-event TTL",
                    backoff,
                    &shutdown,
                    || {
                        let events = events.clone();
                        async move {
                            let removed =
                                flowhost_notifications::events::enforce_event_ttl(events.as_ref(), now).await?;
                            tracing::info!(removed, "interaction events past the 30-day TTL removed at boot");
                            Ok::<_, flowhost_core::ports::PortError>(())
                        }
                    },
                )
                .await;
                if enforced {
                    run_retention(ports, sweep_interval, shutdown).await;
                }
            }
            Ok(())
        };
        let parts = RoleParts::default()
            .listener(listener)
            .task(housekeeping)
            .task(state.inapp.clone().run(context.shutdown.clone()))
            .liveness(Check::sync(POLICY_CHECK, move || policy.policy.as_ref().map(|_| ()).map_err(|e| e.to_string())))
            .readiness(Check::documents(context.ports.documents.clone()));
        Ok(crate::sender_role::warn_unrestricted_targets(config, parts))
    }
}
