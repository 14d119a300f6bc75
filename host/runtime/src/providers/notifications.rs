//! The `notifications` capability (`flowhost:notify/sender@0.1.0`): a sender plugin's requests, translated into
//! host types and passed to the [`Notifications`] the sender role installed
//! ([`crate::Runtime::provide_notifications`]). Without one, every call answers `not-ready`. The plugin sees only
//! what it sent and the outcomes; keys, secrets and subscriptions' keys stay on this side.
//!
//! A call is bounded by the sender's own timeouts (each push request has one), and the whole invocation by its
//! deadline (the runtime drops a call that outlives it).
//!
//! An invocation for a tenant (a flow step, an editor send) notifies that tenant's players only and reads that
//! tenant's templates only; one invocation asks for at most [`MAX_SENDS`] notifications.

use flowhost_core::notify as host;

use crate::bindings::notify::flowhost::notify::sender as wit;
use crate::host::{HostState, TenantScope, MAX_SENDS};

type Reply<T> = wasmtime::Result<Result<T, wit::SendFailure>>;

/// The answer of every call while no sender is installed. (Each call clones the installed sender out of the
/// store's state first, so its future holds nothing of the state, which is not `Sync`.)
fn not_ready() -> wit::SendFailure {
    wit::SendFailure::NotReady(
        "no sender runs in this process (run the sender role, with its VAPID keys and token secret)".into(),
    )
}

fn failure(failure: host::SendFailure) -> wit::SendFailure {
    match failure {
        host::SendFailure::Invalid(message) => wit::SendFailure::Invalid(message),
        host::SendFailure::Unavailable(message) => wit::SendFailure::Unavailable(message),
        host::SendFailure::NotReady(message) => wit::SendFailure::NotReady(message),
    }
}

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

impl HostState {
    /// Counts one send against [`MAX_SENDS`], and checks that `tenant_id` is the invocation's tenant: a
    /// plugin invoked for one tenant never notifies another's players.
    fn may_send(&mut self, tenant_id: &str) -> Result<(), wit::SendFailure> {
        match &self.tenant {
            TenantScope::Tenant(own) if **own != *tenant_id => {
                return Err(wit::SendFailure::Invalid(format!(
                    "this invocation is for tenant {own:?}; it cannot notify tenant {tenant_id:?}"
                )))
            }
            TenantScope::Mixed => {
                return Err(wit::SendFailure::Invalid("a batch of several tenants cannot notify anyone".into()))
            }
            _ => {}
        }
        self.sends += 1;
        if self.sends > MAX_SENDS {
            return Err(wit::SendFailure::Invalid(format!(
                "an invocation may ask for at most {MAX_SENDS} notifications"
            )));
        }
        Ok(())
    }

    /// Whether the invocation may read `tenant_id`'s templates (`None`: every tenant's).
    fn may_read(&self, tenant_id: Option<&str>) -> Result<(), wit::SendFailure> {
        match (&self.tenant, tenant_id) {
            (TenantScope::None, _) => Ok(()),
            (TenantScope::Tenant(own), Some(tenant)) if **own == *tenant => Ok(()),
            _ => Err(wit::SendFailure::Invalid("an invocation for a tenant reads that tenant's templates only".into())),
        }
    }
}

impl wit::Host for HostState {
    async fn send_webpush(&mut self, request: wit::WebPushRequest) -> Reply<wit::WebPushReport> {
        let Some(sender) = self.notifications.clone() else { return Ok(Err(not_ready())) };
        if let Err(refused) = self.may_send(&request.tenant_id) {
            return Ok(Err(refused));
        }
        let request = host::WebPushRequest {
            tenant_id: request.tenant_id,
            player_id: request.player_id,
            template_id: request.template_id,
            language_enabled_id: request.language_enabled_id,
            placeholders: request.placeholders,
            idempotency_key: request.idempotency_key,
            run_id: request.run_id,
        };
        Ok(sender.send_webpush(request).await.map(web_push_report).map_err(failure))
    }

    async fn complete(&mut self, notification_id: String, status: String, delivered: bool) -> Reply<()> {
        let Some(sender) = self.notifications.clone() else { return Ok(Err(not_ready())) };
        Ok(sender.complete(&notification_id, &status, delivered).await.map_err(failure))
    }

    async fn send_inapp(&mut self, request: wit::InAppRequest) -> Reply<wit::InAppReport> {
        let Some(sender) = self.notifications.clone() else { return Ok(Err(not_ready())) };
        if let Err(refused) = self.may_send(&request.tenant_id) {
            return Ok(Err(refused));
        }
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
        let report = sender.send_inapp(request).await.map_err(failure);
        Ok(report.map(|report| wit::InAppReport {
            notification_id: report.notification_id,
            outcome: match report.outcome {
                host::InAppOutcome::Delivered => wit::InAppOutcome::Delivered,
                host::InAppOutcome::Inactive => wit::InAppOutcome::Inactive,
            },
        }))
    }

    async fn templates(&mut self, kind: wit::Channel, tenant_id: Option<String>) -> Reply<String> {
        let Some(sender) = self.notifications.clone() else { return Ok(Err(not_ready())) };
        if let Err(refused) = self.may_read(tenant_id.as_deref()) {
            return Ok(Err(refused));
        }
        Ok(sender.templates(channel(kind), tenant_id.as_deref()).await.map_err(failure))
    }

    async fn template_fields(&mut self, kind: wit::Channel, template_id: i64) -> Reply<String> {
        let Some(sender) = self.notifications.clone() else { return Ok(Err(not_ready())) };
        Ok(sender.template_fields(channel(kind), template_id).await.map_err(failure))
    }

    async fn tenants(&mut self) -> Reply<String> {
        let Some(sender) = self.notifications.clone() else { return Ok(Err(not_ready())) };
        if let Err(refused) = self.may_read(None) {
            return Ok(Err(refused));
        }
        Ok(sender.tenants().await.map_err(failure))
    }
}
