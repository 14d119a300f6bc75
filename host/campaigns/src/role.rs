//! The `campaigns` role: the read models' sync task and the API's listener (`FLOWHOST_CAMPAIGNS_LISTEN`,
//! default `127.0.0.1:8086`), whose `/health` answers `ok` without touching anything and whose `/ready`
//! answers `ready` once the read-model store answers and the campaigns, live-events and overview slices synced
//! once since the start (`not ready` before).

use std::sync::Arc;
use std::time::Duration;

use flowhost_core::config::{Config, ConfigError, SectionEntry};
use flowhost_core::ports::DocumentStore;
use flowhost_flows::Flows;
use flowhost_role::{Check, HealthStyle, Listener, RoleContext, RoleParts};
use tokio_util::sync::CancellationToken;

use crate::api::{self, Api};
use crate::config::CampaignsConfig;
use crate::explorer;
use crate::external::ExternalSource;
use crate::live::Settled;
use crate::metrics::{self, SyncGauges};
use crate::read_model::{ReadModels, ROWS};
use crate::source::JsonSource;
use crate::support::SupportSource;
use crate::sync::{Sync, SyncStatus};

pub struct CampaignsRole;

#[async_trait::async_trait]
impl flowhost_role::Role for CampaignsRole {
    const NAME: &'static str = "campaigns";
    const SECTION: Option<SectionEntry> = Some(SectionEntry::of::<CampaignsConfig>());

    fn check(config: &Config, _: &[&str]) -> Result<(), ConfigError> {
        config.section::<CampaignsConfig>().check_role()
    }

    async fn build(context: &RoleContext) -> anyhow::Result<RoleParts> {
        let config = &*context.config.section::<CampaignsConfig>();
        let read_models = ReadModels { documents: context.ports.documents.database(&config.database).await? };
        let gauges = SyncGauges::register(&context.registry)?;
        let status = Arc::new(SyncStatus::default());
        let sync = Sync {
            read_models: read_models.clone(),
            source: context.ports.documents.clone(),
            clock: context.ports.clock.clone(),
            interval: Duration::from_millis(config.sync_interval_ms),
            fresh_for: Duration::from_secs(config.fresh_for_seconds),
            batch: config.sync_batch,
            status: status.clone(),
            support: match &config.support_url {
                Some(url) => Some(SupportSource(JsonSource::new(url.clone(), config.support_token.clone())?)),
                None => None,
            },
            external: match &config.external_url {
                Some(url) => Some(ExternalSource(JsonSource::new(url.clone(), config.external_token.clone())?)),
                None => None,
            },
            settled_live_events: Settled::default(),
            overlaps: Default::default(),
        };
        let api = Api {
            read_models: read_models.clone(),
            clock: context.ports.clock.clone(),
            support_configured: config.support_url.is_some(),
            lists: Arc::default(),
            live_marks: Arc::default(),
        };
        let (api_routes, api_document) = api::router(api).split_for_parts();
        let api_routes = match &config.bearer_token {
            Some(token) if !config.direct_without_bearer => explorer::require_bearer(api_routes, token),
            _ => api_routes,
        };
        let proxied = api_routes.clone().merge(api::fallback());
        let routes = flowhost_role::openapi::documented(api_routes, api_document)
            .merge(explorer::router(proxied, config.bearer_token.as_ref()))
            .merge(metrics::router(context.registry.clone(), gauges, read_models.clone(), context.ports.clock.clone()));
        let listener = Listener::new("campaigns", config.listen.clone(), "FLOWHOST_CAMPAIGNS_LISTEN", routes)
            .with_health(HealthStyle::Text)
            .with_fallback(api::fallback())
            .with_wrap(api::with_request_id)
            .with_readiness(vec![sync_check(status), store_check(read_models.documents.clone())]);
        let flows = Flows::new(context.ports.clone());
        let shutdown = context.shutdown.clone();
        Ok(RoleParts::default().listener(listener).task(run(sync, read_models, flows, shutdown)))
    }
}

/// Creates the indexes (retrying while the stores are unavailable), then syncs until shutdown.
async fn run(sync: Sync, read_models: ReadModels, flows: Flows, shutdown: CancellationToken) -> anyhow::Result<()> {
    let backoff = flowhost_core::backoff::Backoff::for_backend();
    let created =
        flowhost_core::backoff::until_done("creating the campaign read-model indexes", backoff, &shutdown, || async {
            read_models.ensure_indexes().await?;
            crate::live::ensure_indexes(&read_models, flows.ports().documents.as_ref()).await?;
            crate::support::ensure_indexes(&read_models).await?;
            flows.ensure_indexes().await.map_err(|error| flowhost_core::PortError::Backend(error.to_string()))
        })
        .await;
    if !created {
        return Ok(());
    }
    sync.run(shutdown).await
}

fn sync_check(status: Arc<SyncStatus>) -> Check {
    Check::sync("campaigns_sync", move || status.check())
}

/// The read-model store answers (a read of a document that does not exist).
fn store_check(documents: Arc<dyn DocumentStore>) -> Check {
    Check::new("campaigns_store", move || {
        let documents = documents.clone();
        async move {
            match tokio::time::timeout(Duration::from_secs(2), documents.get(ROWS, "ready-probe")).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(error)) => Err(format!("read-model store: {error}")),
                Err(_) => Err("read-model store: no answer in time".to_owned()),
            }
        }
    })
}
