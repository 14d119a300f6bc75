//! Prometheus metrics of plugin invocations. Labels: the plugin id (operators choose which plugins exist, so
//! the set stays small) and the result class; never a tenant, player or input value.

use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

use crate::InvokeError;

/// Counters and latencies of every invocation (`invoke` and data sources) of one runtime.
#[derive(Debug, Clone)]
pub struct RuntimeMetrics {
    invocations: IntCounterVec,
    seconds: HistogramVec,
}

impl RuntimeMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &Registry) -> Result<RuntimeMetrics, prometheus::Error> {
        let metrics = RuntimeMetrics {
            invocations: IntCounterVec::new(
                Opts::new(
                    "flowhost_plugin_invocations_total",
                    "Plugin invocations by plugin and result (ok, skip-forward, permanent, retryable)",
                ),
                &["plugin", "result"],
            )?,
            seconds: HistogramVec::new(
                HistogramOpts::new("flowhost_plugin_invocation_seconds", "Wall-clock time of a plugin invocation")
                    .buckets(vec![
                        0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.005, 0.025, 0.1, 1.0,
                    ]),
                &["plugin"],
            )?,
        };
        registry.register(Box::new(metrics.invocations.clone()))?;
        registry.register(Box::new(metrics.seconds.clone()))?;
        Ok(metrics)
    }

    pub(crate) fn observe(&self, plugin: &str, result: &Result<String, InvokeError>, elapsed: Duration) {
        let class = match result {
            Ok(_) => "ok",
            Err(error) => error.outcome().as_str(),
        };
        self.invocations.with_label_values(&[plugin, class]).inc();
        self.seconds.with_label_values(&[plugin]).observe(elapsed.as_secs_f64());
    }
}
