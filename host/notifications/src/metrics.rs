//! The sender's metrics, on the process's `/metrics`. Labels are bounded outcomes only: never a tenant, player,
//! endpoint or push-service host.
//!
//! - `webpush_deliveries_total{outcome}`: one per subscription attempted, by outcome (`delivered`, `expired`,
//!   `retry`, `rejected`, `skipped`);
//! - `webpush_expired_endpoints_total`: subscriptions deactivated because their push service answered 404/410;
//! - `webpush_encryption_seconds`: encrypting one payload (RFC 8291, `aes128gcm`);
//! - `webpush_post_seconds`: one POST to a push service, until its answer (or the failure to get one);
//! - `inapp_messages_total{outcome}`: in-app sends by outcome (`delivered`: an open socket took it, `stored`:
//!   kept in the inbox only, `inactive`: the channel is deactivated).
//!
//! Metrics exist unregistered until [`PushMetrics::register`], so a sender built without a registry (tests,
//! benchmarks) counts into nothing anyone reads.

use prometheus::core::Collector;
use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry};

use flowhost_core::notify::{DeliveryOutcome, InAppOutcome};

/// The sender's metrics; cheap to clone (each is a handle).
#[derive(Clone)]
pub struct PushMetrics {
    deliveries: IntCounterVec,
    expired_endpoints: IntCounter,
    encryption: Histogram,
    post: Histogram,
    inapp: IntCounterVec,
}

impl std::fmt::Debug for PushMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushMetrics").finish_non_exhaustive()
    }
}

impl Default for PushMetrics {
    fn default() -> Self {
        PushMetrics::new()
    }
}

impl PushMetrics {
    /// The metrics, not registered anywhere yet.
    pub fn new() -> PushMetrics {
        let histogram = |name: &str, help: &str, buckets: Vec<f64>| {
            Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets)).expect("a valid histogram")
        };
        PushMetrics {
            deliveries: IntCounterVec::new(
                Opts::new("webpush_deliveries_total", "Web-push deliveries by outcome, one per subscription attempted"),
                &["outcome"],
            )
            .expect("a valid counter"),
            expired_endpoints: IntCounter::new(
                "webpush_expired_endpoints_total",
                "Subscriptions deactivated because their push service answered 404 or 410",
            )
            .expect("a valid counter"),
            encryption: histogram(
                "webpush_encryption_seconds",
                "Time to encrypt one web-push payload (aes128gcm)",
                vec![0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01],
            ),
            post: histogram(
                "webpush_post_seconds",
                "Time of one POST to a push service, until its answer",
                vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0],
            ),
            inapp: IntCounterVec::new(Opts::new("inapp_messages_total", "In-app sends by outcome"), &["outcome"])
                .expect("a valid counter"),
        }
    }

    /// Registers every metric in `registry`; fails when one of the names is registered already.
    pub fn register(self, registry: &Registry) -> prometheus::Result<PushMetrics> {
        let collectors: [Box<dyn Collector>; 5] = [
            Box::new(self.deliveries.clone()),
            Box::new(self.expired_endpoints.clone()),
            Box::new(self.encryption.clone()),
            Box::new(self.post.clone()),
            Box::new(self.inapp.clone()),
        ];
        for collector in collectors {
            registry.register(collector)?;
        }
        Ok(self)
    }

    pub(crate) fn delivery(&self, outcome: DeliveryOutcome) {
        self.deliveries.with_label_values(&[outcome.as_str()]).inc();
    }

    pub(crate) fn expired_endpoint(&self) {
        self.expired_endpoints.inc();
    }

    pub(crate) fn encryption(&self) -> prometheus::HistogramTimer {
        self.encryption.start_timer()
    }

    pub(crate) fn post(&self) -> prometheus::HistogramTimer {
        self.post.start_timer()
    }

    pub(crate) fn inapp(&self, outcome: InAppOutcome) {
        let label = match outcome {
            InAppOutcome::Delivered => "delivered",
            InAppOutcome::Stored => "stored",
            InAppOutcome::Inactive => "inactive",
        };
        self.inapp.with_label_values(&[label]).inc();
    }
}
