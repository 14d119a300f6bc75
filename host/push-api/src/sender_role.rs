//! [`SenderRole`]: the web-push notification service's sender as a role. It builds the host side of the
//! `notifications` capability ([`flowhost_notifications::sender::Sender`]: the VAPID signer, the interaction-token
//! secret, the push client with its allowlist and extra roots) and installs it into the process's plugin
//! runtime, so the bundled `notifications` plugin (and any operator-loaded version of it) can deliver. It has no
//! routes; its readiness check ([`SENDER_CHECK`]) fails on every listener until the plugin can send: the keys
//! and the token secret are configured and, with the bundled plugins on, the `notifications` plugin is active.
//!
//! It also serves the `notifications` service's inbound envelopes over NATS and Kafka and its data-source
//! subjects (`flowhost_runs::ServiceEndpoint`), for flows whose segment picks those transports.
//!
//! Missing keys do not stop the process (the other roles keep working); a malformed push-service allowlist or
//! an unreadable `SSL_CERT_FILE` does, naming the setting.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use flowhost_components::ComponentStore;
use flowhost_core::config::{Config, SectionEntry};
use flowhost_core::notify::{
    InAppReport, InAppRequest, Notifications, SendFailure, TemplateChannel, WebPushReport, WebPushRequest,
};
use flowhost_notifications::metrics::PushMetrics;
use flowhost_notifications::push::{PushClient, PushServiceHosts, VapidSigner};
use flowhost_notifications::sender::{Sender, SenderSettings};
use flowhost_role::{Check, Role, RoleContext, RoleParts};
use tracing::{info, warn};

use crate::config::PushConfig;
use crate::PushState;
use flowhost_runs::EngineConfig;

/// The readiness check of the sender role.
pub const SENDER_CHECK: &str = "notifications_sender";
/// The bundled plugin the sender serves.
pub const NOTIFICATIONS_PLUGIN: &str = "notifications";
/// The service that plugin registers.
pub const NOTIFICATIONS_SERVICE: &str = "notifications";

/// The sender role (see the module documentation).
#[derive(Debug)]
pub struct SenderRole;

/// The sender for this configuration, or why it cannot send (missing keys or secret). Settings that are set but
/// wrong are a [`ConfigError`].
async fn build_sender(config: &Config, state: &PushState) -> anyhow::Result<Result<Sender, String>> {
    let push = config.section::<PushConfig>();
    let hosts = match &push.push_service_hosts {
        Some(list) => PushServiceHosts::parse(list)
            .map_err(|message| crate::config_error("FLOWHOST_WEBPUSH_PUSH_SERVICE_HOSTS", message))?,
        None => PushServiceHosts::default(),
    };
    let Some(keys) = &state.settings.vapid else {
        return Ok(Err(
            "no VAPID keypair (FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY, FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY)".into()
        ));
    };
    let Some((token_secret, _)) = &state.settings.token_secrets else {
        return Ok(Err("no interaction-token secret (FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET)".into()));
    };
    let signer = VapidSigner::new(keys, &push.vapid_subject, state.ports.clock.clone())
        .map_err(|message| crate::config_error("FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY", message))?;
    let roots = push.ssl_cert_file.as_deref().map(std::path::Path::new);
    let client = PushClient::new(Arc::new(signer), hosts, roots)
        .map_err(|message| crate::config_error("SSL_CERT_FILE", message))?;
    let settings = SenderSettings {
        channels: push.channels_enabled.clone(),
        dry_run: push.dry_run,
        retention: state.settings.retention,
        targets: state.settings.targets.clone(),
        token_secret: token_secret.clone(),
        ttl_seconds: push.push_ttl_seconds,
        max_concurrent_pushes: push.max_concurrent_pushes,
        tenants: push.tenants.clone(),
        tenant_languages: push.tenant_default_languages.clone(),
    };
    Ok(Ok(Sender::without_indexes(state.ports.clone(), settings, client)))
}

#[async_trait::async_trait]
impl Role for SenderRole {
    const NAME: &'static str = "sender";
    const SECTION: Option<SectionEntry> = Some(SectionEntry::of::<PushConfig>());
    const USES_COMPONENTS: bool = true;

    async fn build(context: &RoleContext) -> anyhow::Result<RoleParts> {
        let config = &context.config;
        let store: Arc<ComponentStore> =
            context.service().context("the sender role needs the plugin runtime's component store")?;
        let state = PushState::from_config(config, context.ports.clone())?;
        let not_ready = match build_sender(config, &state).await? {
            Ok(sender) => {
                let sender = sender.with_metrics(PushMetrics::new().register(&context.registry)?);
                store.runtime().provide_notifications(Arc::new(sender));
                info!(
                    dry_run = config.section::<PushConfig>().dry_run,
                    "sender ready: the notifications capability is served"
                );
                None
            }
            Err(reason) => {
                warn!(reason, "the sender cannot send: /ready answers 503 until it is configured");
                // Flow steps that reach this sender fail naming the spec's code, not "no sender here".
                store.runtime().provide_notifications(Arc::new(Unconfigured { reason: reason.clone() }));
                Some(reason)
            }
        };
        // Editor sends from the API process (here or elsewhere), served by one replica of the queue group. The
        // role reports ready only once subscribed, so a send never finds no responder while this sender starts;
        // with NATS down at start the subscription is retried and the process serves meanwhile.
        let subscribed = Arc::new(AtomicBool::new(false));
        let editor_sends = crate::send::SendServer {
            store: store.clone(),
            ports: context.ports.clone(),
            not_ready: not_ready.clone(),
        }
        .serve_subscribed(
            format!("{}.sender", config.section::<EngineConfig>().group_id),
            subscribed.clone(),
            context.shutdown.clone(),
        );
        let bundled = config.plugins.bundled;
        let check_store = store.clone();
        let readiness = Check::sync(SENDER_CHECK, move || {
            if let Some(reason) = &not_ready {
                return Err(reason.clone());
            }
            if !subscribed.load(Ordering::Relaxed) {
                return Err("not subscribed to editor sends yet (the subjects backend does not answer)".to_owned());
            }
            if bundled && check_store.active(NOTIFICATIONS_PLUGIN).is_none() {
                return Err(format!("the {NOTIFICATIONS_PLUGIN} plugin is not active"));
            }
            Ok(())
        });
        // The service side of the notifications service's other transports (NATS, Kafka) and its data-source
        // subjects; in process, flows call the plugin directly.
        let endpoint = flowhost_runs::ServiceEndpoint::new(
            store.clone(),
            context.ports.clone(),
            &config.section::<EngineConfig>().group_id,
            &config.public_base_url(),
        );
        let serving = endpoint.run(NOTIFICATIONS_SERVICE.to_owned(), context.shutdown.clone());
        let shutdown = context.shutdown.clone();
        let withdraw = async move {
            shutdown.cancelled().await;
            store.runtime().withdraw_notifications();
            Ok(())
        };
        // The sender's indexes once the store answers (a start with the store down still serves).
        let (documents, indexing) = (context.ports.documents.clone(), context.shutdown.clone());
        let indexes = async move {
            let backoff = flowhost_core::backoff::Backoff::for_backend();
            flowhost_core::backoff::until_done("creating the sender's indexes", backoff, &indexing, || {
                Sender::ensure_indexes(documents.as_ref())
            })
            .await;
            // A task that ends stops the process: this one has nothing more to do until it stops.
            indexing.cancelled().await;
            Ok(())
        };
        let parts = RoleParts::default()
            .task(Box::pin(withdraw))
            .task(Box::pin(indexes))
            .task(Box::pin(async move {
                serving.await;
                Ok(())
            }))
            .task(Box::pin(async move {
                editor_sends.await;
                Ok(())
            }))
            .readiness(readiness);
        Ok(warn_unrestricted_targets(config, parts))
    }
}

/// The `notifications` capability of a sender without its VAPID pair or interaction-token secret: every call
/// fails as not ready, naming the spec's `PUSH_ENV_NOT_READY` and the missing setting, so a flow step's error and
/// its dead letter say what the operator must configure.
struct Unconfigured {
    reason: String,
}

impl Unconfigured {
    fn failure<T>(&self) -> Result<T, SendFailure> {
        Err(SendFailure::NotReady(format!("PUSH_ENV_NOT_READY: {}", self.reason)))
    }
}

#[async_trait::async_trait]
impl Notifications for Unconfigured {
    async fn send_webpush(&self, _: WebPushRequest) -> Result<WebPushReport, SendFailure> {
        self.failure()
    }

    async fn complete(&self, _: &str, _: &str, _: bool) -> Result<(), SendFailure> {
        self.failure()
    }

    async fn send_inapp(&self, _: InAppRequest) -> Result<InAppReport, SendFailure> {
        self.failure()
    }

    async fn templates(&self, _: TemplateChannel, _: Option<&str>) -> Result<String, SendFailure> {
        self.failure()
    }

    async fn template_fields(&self, _: TemplateChannel, _: i64) -> Result<String, SendFailure> {
        self.failure()
    }

    async fn tenants(&self) -> Result<String, SendFailure> {
        self.failure()
    }
}

/// With `FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS` empty, a rendered `target_url` may name any https host: the
/// spec allows it, but an operator should know (a warning at start and on `/ready`).
pub(crate) fn warn_unrestricted_targets(config: &flowhost_core::config::Config, parts: RoleParts) -> RoleParts {
    if config.section::<PushConfig>().allowed_target_hosts.is_empty() {
        parts.warning("FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS")
    } else {
        parts
    }
}
