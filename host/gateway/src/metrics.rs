//! The gateway's counters (spec 002 part A, events item 3), one struct per part so a process running some of
//! the parts registers each name once. Labels are bounded outcome words: never a tenant, token, IP or event id.

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use crate::player::PlayerMetrics;

fn counter_vec(registry: &Registry, name: &str, help: &str, label: &str) -> anyhow::Result<IntCounterVec> {
    let counter = IntCounterVec::new(Opts::new(name, help), &[label])?;
    registry.register(Box::new(counter.clone()))?;
    Ok(counter)
}

fn counter(registry: &Registry, name: &str, help: &str) -> anyhow::Result<IntCounter> {
    let counter = IntCounter::new(name, help)?;
    registry.register(Box::new(counter.clone()))?;
    Ok(counter)
}

/// The edge's metrics.
#[derive(Clone)]
pub struct EdgeMetrics {
    /// `gateway_edge_requests_total{outcome}`: accepted, preflight, forbidden_peer, client_ip_invalid,
    /// origin_forbidden, unauthorized, player_invalid, rate_limited, shed, invalid_event, too_large,
    /// unavailable.
    pub requests: IntCounterVec,
    pub player: PlayerMetrics,
    /// `gateway_edge_inflight`: requests on the public route in progress.
    pub inflight: IntGauge,
    /// `gateway_edge_request_duration_seconds`: accepted requests, from arrival to 202.
    pub accepted_latency: Histogram,
}

impl EdgeMetrics {
    pub fn register(registry: &Registry, rollout_checksum: Option<&str>) -> anyhow::Result<EdgeMetrics> {
        let requests = counter_vec(
            registry,
            "gateway_edge_requests_total",
            "Requests to the public events route by outcome",
            "outcome",
        )?;
        let validation = counter_vec(
            registry,
            "gateway_edge_player_validation_total",
            "Player validations by the backend by outcome (valid, invalid, limited, error, timeout)",
            "outcome",
        )?;
        let cache = counter_vec(
            registry,
            "gateway_edge_player_cache_total",
            "Player validation cache lookups by outcome (hit, negative_hit, miss, error)",
            "outcome",
        )?;
        let inflight = IntGauge::new("gateway_edge_inflight", "Requests on the public route in progress")?;
        registry.register(Box::new(inflight.clone()))?;
        let accepted_latency = Histogram::with_opts(
            HistogramOpts::new("gateway_edge_request_duration_seconds", "Time from arrival to 202 of accepted events")
                .buckets(vec![0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]),
        )?;
        registry.register(Box::new(accepted_latency.clone()))?;
        if let Some(checksum) = rollout_checksum {
            let info = IntGaugeVec::new(
                Opts::new("gateway_edge_rollout_info", "The rollout checksum of the cache URL and HMAC key in use"),
                &["checksum"],
            )?;
            registry.register(Box::new(info.clone()))?;
            info.with_label_values(&[checksum]).set(1);
        }
        Ok(EdgeMetrics { requests, player: PlayerMetrics { validation, cache }, inflight, accepted_latency })
    }
}

/// Internal ingest's metrics.
#[derive(Clone)]
pub struct IngestMetrics {
    /// `gateway_ingest_events_total{outcome}`: accepted, rejected (not a gateway record), unavailable.
    pub events: IntCounterVec,
    /// `gateway_queue_publish_total{outcome}`: ok, error (one per event written to the durable queue).
    pub queue_publish: IntCounterVec,
}

impl IngestMetrics {
    pub fn register(registry: &Registry) -> anyhow::Result<IngestMetrics> {
        Ok(IngestMetrics {
            events: counter_vec(
                registry,
                "gateway_ingest_events_total",
                "Events received by internal ingest",
                "outcome",
            )?,
            queue_publish: counter_vec(
                registry,
                "gateway_queue_publish_total",
                "Events written to the durable queue by outcome",
                "outcome",
            )?,
        })
    }
}

/// The worker's metrics.
#[derive(Clone)]
pub struct WorkerMetrics {
    /// `gateway_broker_produce_total{outcome}`: ok, error (per record).
    pub produce: IntCounterVec,
    /// `gateway_broker_retries_total`: batches produced again after a transient broker failure.
    pub retries: IntCounter,
    /// `gateway_queue_redeliveries_total`: messages leased again after a lease expired unacknowledged.
    pub redeliveries: IntCounter,
    /// `gateway_dead_letters_total{reason}`: undecodable, rejected_by_broker.
    pub dead_letters: IntCounterVec,
}

impl WorkerMetrics {
    pub fn register(registry: &Registry) -> anyhow::Result<WorkerMetrics> {
        Ok(WorkerMetrics {
            produce: counter_vec(
                registry,
                "gateway_broker_produce_total",
                "Records produced to the broker",
                "outcome",
            )?,
            retries: counter(
                registry,
                "gateway_broker_retries_total",
                "Broker batches retried after a transient failure",
            )?,
            redeliveries: counter(
                registry,
                "gateway_queue_redeliveries_total",
                "Queue messages delivered again after their lease expired",
            )?,
            dead_letters: counter_vec(
                registry,
                "gateway_dead_letters_total",
                "Queue messages moved to the dead-letter queue by reason",
                "reason",
            )?,
        })
    }
}
