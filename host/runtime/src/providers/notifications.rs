//! The `notifications` capability (`flowhost:notify/sender`, versions 0.1.0 and 0.2.0): a sender plugin's
//! requests, translated into host types and passed to the [`Notifications`] the sender role installed
//! ([`crate::Runtime::provide_notifications`]). Without one, every call answers `not-ready`. The plugin sees only
//! what it sent and the outcomes; keys, secrets and subscriptions' keys stay on this side.
//!
//! The checks every version shares are on [`HostState`] in host types; each version's module only translates
//! its records ([`sender_host!`] writes the translation the versions have in common). A 0.1.0 component sees
//! the host's newer facts in its own terms: a disabled channel is `invalid`, a message kept in the inbox without
//! an open socket is `delivered` (what 0.1.0 promised: stored and published).
//!
//! A call is bounded by the sender's own timeouts (each push request has one), and the whole invocation by its
//! deadline (the runtime drops a call that outlives it).
//!
//! An invocation for a tenant (a flow step, an editor send) notifies that tenant's players only and reads that
//! tenant's templates only; one invocation asks for at most [`MAX_SENDS`] notifications; `player_id` 0 (reserved
//! for the dashboard's smoke tests) is accepted only in an editor's send.
//!
//! [`Notifications`]: flowhost_core::notify::Notifications

use std::sync::Arc;

use flowhost_core::notify::{self as host, Notifications};

use crate::host::{HostState, TenantScope, MAX_SENDS};

/// The answer of every call while no sender is installed.
fn not_ready() -> host::SendFailure {
    host::SendFailure::NotReady(
        "no sender runs in this process (run the sender role, with its VAPID keys and token secret)".into(),
    )
}

impl HostState {
    /// The installed sender. (Each call clones it out of the store's state first, so its future holds nothing of
    /// the state, which is not `Sync`.)
    fn sender(&self) -> Result<Arc<dyn Notifications>, host::SendFailure> {
        self.notifications.clone().ok_or_else(not_ready)
    }

    /// Counts one send against [`MAX_SENDS`], and checks the recipient: `tenant_id` must be the invocation's
    /// tenant (a plugin invoked for one tenant never notifies another's players), and `player_id` positive, or 0
    /// in an editor's smoke send.
    fn may_send(&mut self, tenant_id: &str, player_id: i64) -> Result<(), host::SendFailure> {
        match &self.tenant {
            TenantScope::Tenant(own) if **own != *tenant_id => {
                return Err(host::SendFailure::Invalid(format!(
                    "this invocation is for tenant {own:?}; it cannot notify tenant {tenant_id:?}"
                )))
            }
            TenantScope::Mixed => {
                return Err(host::SendFailure::Invalid("a batch of several tenants cannot notify anyone".into()))
            }
            _ => {}
        }
        if player_id < 0 || (player_id == 0 && !self.smoke_test) {
            return Err(host::SendFailure::Invalid(format!(
                "player_id must be positive (0 is reserved for the dashboard's smoke tests), not {player_id}"
            )));
        }
        self.sends += 1;
        if self.sends > MAX_SENDS {
            return Err(host::SendFailure::Invalid(format!(
                "an invocation may ask for at most {MAX_SENDS} notifications"
            )));
        }
        Ok(())
    }

    /// Whether the invocation may read `tenant_id`'s templates (`None`: every tenant's).
    fn may_read(&self, tenant_id: Option<&str>) -> Result<(), host::SendFailure> {
        match (&self.tenant, tenant_id) {
            (TenantScope::None, _) => Ok(()),
            (TenantScope::Tenant(own), Some(tenant)) if **own == *tenant => Ok(()),
            _ => {
                Err(host::SendFailure::Invalid("an invocation for a tenant reads that tenant's templates only".into()))
            }
        }
    }

    async fn send_webpush(&mut self, request: host::WebPushRequest) -> Result<host::WebPushReport, host::SendFailure> {
        let sender = self.sender()?;
        self.may_send(&request.tenant_id, request.player_id)?;
        sender.send_webpush(request).await
    }

    async fn complete(
        &mut self,
        notification_id: &str,
        status: &str,
        delivered: bool,
    ) -> Result<(), host::SendFailure> {
        self.sender()?.complete(notification_id, status, delivered).await
    }

    async fn send_inapp(&mut self, request: host::InAppRequest) -> Result<host::InAppReport, host::SendFailure> {
        let sender = self.sender()?;
        self.may_send(&request.tenant_id, request.player_id)?;
        sender.send_inapp(request).await
    }

    async fn templates(
        &mut self,
        channel: host::TemplateChannel,
        tenant_id: Option<String>,
    ) -> Result<String, host::SendFailure> {
        let sender = self.sender()?;
        self.may_read(tenant_id.as_deref())?;
        sender.templates(channel, tenant_id.as_deref()).await
    }

    async fn template_fields(
        &mut self,
        channel: host::TemplateChannel,
        template_id: i64,
    ) -> Result<String, host::SendFailure> {
        self.sender()?.template_fields(channel, template_id).await
    }

    async fn tenants(&mut self) -> Result<String, host::SendFailure> {
        let sender = self.sender()?;
        self.may_read(None)?;
        sender.tenants().await
    }
}

/// The translation both versions share, written in a version's module where `wit` names that version's
/// `sender` interface and `failure`, `in_app_outcome` and `passthrough` translate what differs.
macro_rules! sender_host {
    () => {
        type Reply<T> = wasmtime::Result<Result<T, wit::SendFailure>>;

        fn channel(channel: wit::Channel) -> host::TemplateChannel {
            match channel {
                wit::Channel::WebPush => host::TemplateChannel::WebPush,
                wit::Channel::InApp => host::TemplateChannel::InApp,
            }
        }

        fn outcome(outcome: host::DeliveryOutcome) -> wit::DeliveryOutcome {
            match outcome {
                host::DeliveryOutcome::Delivered => wit::DeliveryOutcome::Delivered,
                host::DeliveryOutcome::Expired => wit::DeliveryOutcome::Expired,
                host::DeliveryOutcome::Retry => wit::DeliveryOutcome::Retry,
                host::DeliveryOutcome::Rejected => wit::DeliveryOutcome::Rejected,
                host::DeliveryOutcome::Skipped => wit::DeliveryOutcome::Skipped,
            }
        }

        fn web_push_report(report: host::WebPushReport) -> wit::WebPushReport {
            wit::WebPushReport {
                notification_id: report.notification_id,
                deliveries: report
                    .deliveries
                    .into_iter()
                    .map(|delivery| wit::Delivery {
                        delivery_id: delivery.delivery_id,
                        endpoint: delivery.endpoint,
                        outcome: outcome(delivery.outcome),
                        status_code: delivery.status_code,
                        retry_after_ms: delivery.retry_after_ms,
                        reason: delivery.reason,
                    })
                    .collect(),
            }
        }

        impl wit::Host for HostState {
            async fn send_webpush(&mut self, mut request: wit::WebPushRequest) -> Reply<wit::WebPushReport> {
                let data = passthrough(&mut request);
                let request = host::WebPushRequest {
                    tenant_id: request.tenant_id,
                    player_id: request.player_id,
                    template_id: request.template_id,
                    language_enabled_id: request.language_enabled_id,
                    placeholders: request.placeholders,
                    idempotency_key: request.idempotency_key,
                    run_id: request.run_id,
                    data,
                };
                Ok(HostState::send_webpush(self, request).await.map(web_push_report).map_err(failure))
            }

            async fn complete(&mut self, notification_id: String, status: String, delivered: bool) -> Reply<()> {
                Ok(HostState::complete(self, &notification_id, &status, delivered).await.map_err(failure))
            }

            async fn send_inapp(&mut self, request: wit::InAppRequest) -> Reply<wit::InAppReport> {
                let request = host::InAppRequest {
                    tenant_id: request.tenant_id,
                    player_id: request.player_id,
                    template_id: request.template_id,
                    language_id: request.language_id,
                    placeholders: request.placeholders,
                    vertical: request.vertical,
                    category: request.category,
                    subcategory: request.subcategory,
                    idempotency_key: request.idempotency_key,
                    run_id: request.run_id,
                };
                let report = HostState::send_inapp(self, request).await;
                Ok(report
                    .map(|report| wit::InAppReport {
                        notification_id: report.notification_id,
                        outcome: in_app_outcome(report.outcome),
                    })
                    .map_err(failure))
            }

            async fn templates(&mut self, kind: wit::Channel, tenant_id: Option<String>) -> Reply<String> {
                Ok(HostState::templates(self, channel(kind), tenant_id).await.map_err(failure))
            }

            async fn template_fields(&mut self, kind: wit::Channel, template_id: i64) -> Reply<String> {
                Ok(HostState::template_fields(self, channel(kind), template_id).await.map_err(failure))
            }

            async fn tenants(&mut self) -> Reply<String> {
                Ok(HostState::tenants(self).await.map_err(failure))
            }
        }
    };
}

/// `flowhost:notify@0.1.0`.
mod v0_1 {
    use flowhost_core::notify as host;

    use crate::bindings::notify_v1::flowhost::notify::sender as wit;
    use crate::host::HostState;

    /// 0.1.0 has no `channel-disabled`: a disabled channel is `invalid` (retrying cannot help).
    fn failure(failure: host::SendFailure) -> wit::SendFailure {
        match failure {
            host::SendFailure::Invalid(message) | host::SendFailure::ChannelDisabled(message) => {
                wit::SendFailure::Invalid(message)
            }
            host::SendFailure::Unavailable(message) => wit::SendFailure::Unavailable(message),
            host::SendFailure::NotReady(message) => wit::SendFailure::NotReady(message),
        }
    }

    /// 0.1.0's `delivered` meant stored and published, which `stored` is too.
    fn in_app_outcome(outcome: host::InAppOutcome) -> wit::InAppOutcome {
        match outcome {
            host::InAppOutcome::Delivered | host::InAppOutcome::Stored => wit::InAppOutcome::Delivered,
            host::InAppOutcome::Inactive => wit::InAppOutcome::Inactive,
        }
    }

    /// 0.1.0 passes no `data` through.
    fn passthrough(_: &mut wit::WebPushRequest) -> Option<String> {
        None
    }

    sender_host!();
}

/// `flowhost:notify@0.2.0`.
mod v0_2 {
    use flowhost_core::notify as host;

    use crate::bindings::notify_v2::flowhost::notify::sender as wit;
    use crate::host::HostState;

    fn failure(failure: host::SendFailure) -> wit::SendFailure {
        match failure {
            host::SendFailure::Invalid(message) => wit::SendFailure::Invalid(message),
            host::SendFailure::Unavailable(message) => wit::SendFailure::Unavailable(message),
            host::SendFailure::NotReady(message) => wit::SendFailure::NotReady(message),
            host::SendFailure::ChannelDisabled(message) => wit::SendFailure::ChannelDisabled(message),
        }
    }

    fn in_app_outcome(outcome: host::InAppOutcome) -> wit::InAppOutcome {
        match outcome {
            host::InAppOutcome::Delivered => wit::InAppOutcome::Delivered,
            host::InAppOutcome::Stored => wit::InAppOutcome::Stored,
            host::InAppOutcome::Inactive => wit::InAppOutcome::Inactive,
        }
    }

    fn passthrough(request: &mut wit::WebPushRequest) -> Option<String> {
        request.data.take()
    }

    sender_host!();
}
