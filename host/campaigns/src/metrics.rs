//! The `sync_state` gauges (spec 002 part C): per tenant and slice, `measure` is one of
//! `last_success_age_seconds`, `fresh_until_age_seconds` (negative while fresh), `lag_seconds` and
//! `consecutive_failures`. Ages change with time, so the campaigns listener's `/metrics` recomputes them from
//! the stored states on every scrape.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use flowhost_core::Clock;
use flowhost_role::{routes, ApiRouter};
use prometheus::{GaugeVec, Opts, Registry};
use tracing::warn;

use crate::read_model::{ReadModels, SyncState};

#[derive(Clone)]
pub struct SyncGauges {
    gauge: GaugeVec,
}

impl SyncGauges {
    pub fn register(registry: &Registry) -> prometheus::Result<SyncGauges> {
        let gauge = GaugeVec::new(
            Opts::new("sync_state", "Campaign read-model synchronization per tenant and slice"),
            &["tenant_id", "slice", "measure"],
        )?;
        registry.register(Box::new(gauge.clone()))?;
        Ok(SyncGauges { gauge })
    }

    /// Sets the gauges from `states` as of `now_ms` (a state without a success has no age gauges).
    pub fn refresh(&self, states: &[SyncState], now_ms: i64) {
        self.gauge.reset();
        for state in states {
            let labels = |measure: &'static str| [state.tenant_id.as_str(), state.slice.as_str(), measure];
            let age = |ms: i64| (now_ms - ms) as f64 / 1000.0;
            if let Some(ms) = state.last_success_ms {
                self.gauge.with_label_values(&labels("last_success_age_seconds")).set(age(ms));
            }
            if let Some(ms) = state.fresh_until_ms {
                self.gauge.with_label_values(&labels("fresh_until_age_seconds")).set(age(ms));
            }
            self.gauge.with_label_values(&labels("lag_seconds")).set(state.lag_seconds);
            self.gauge.with_label_values(&labels("consecutive_failures")).set(state.consecutive_failures as f64);
        }
    }
}

#[derive(Clone)]
struct Scrape {
    registry: Registry,
    gauges: SyncGauges,
    read_models: ReadModels,
    clock: Arc<dyn Clock>,
}

/// `GET /metrics` of the campaigns listener: the process's registry with the gauges recomputed first.
pub fn router(registry: Registry, gauges: SyncGauges, read_models: ReadModels, clock: Arc<dyn Clock>) -> ApiRouter {
    ApiRouter::new().routes(routes!(metrics)).with_state(Scrape { registry, gauges, read_models, clock })
}

/// Prometheus metrics, with the `sync_state` gauges recomputed first.
#[utoipa::path(get, path = "/metrics", tag = "probes", responses(
    (status = 200, description = "Prometheus text format 0.0.4", body = String, content_type = "text/plain"),
))]
async fn metrics(State(scrape): State<Scrape>) -> Response {
    match scrape.read_models.sync_states().await {
        Ok(states) => scrape.gauges.refresh(&states, scrape.clock.now_ms()),
        // The gauges keep their last values; the scrape still answers.
        Err(error) => warn!(%error, "reading the sync states for the gauges failed"),
    }
    flowhost_role::metrics_response(&scrape.registry)
}
