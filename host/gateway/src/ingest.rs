//! The ingest process's HTTP surfaces: internal ingest (`POST /internal/v1/events` on
//! `GATEWAY_INGEST_PRIVATE_PORT`: plain HTTP, no application token, bound to a private address) and the queue
//! administration API (`GET /admin/v1/queues` on `GATEWAY_ADMIN_HTTP_PORT`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowhost_core::ports::WorkQueue;
use flowhost_role::openapi::{with_default_error, CodedError, UtoipaMethodRouterExt};
use flowhost_role::{routes, ApiRouter};
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::event::IngestRecord;
use crate::forward::MAX_FORWARD_BATCH;
use crate::metrics::IngestMetrics;
use crate::pipeline::{IngestBatcher, DEAD_LETTER_QUEUE, QUEUE};

pub const INGEST_ROUTE: &str = "/internal/v1/events";
pub const QUEUES_ROUTE: &str = "/admin/v1/queues";

pub struct Ingest {
    pub batcher: IngestBatcher,
    pub analytics_topic: String,
    pub metrics: IngestMetrics,
}

/// The body: one record, or `{"records": [...]}` with 1 to [`MAX_FORWARD_BATCH`] of them (what the edge posts).
/// Read in two steps, because an untagged enum would buffer the whole body before choosing: first whether
/// `records` is there (its text borrowed, nothing else read), then that text or the whole body.
#[derive(Deserialize)]
struct BatchProbe<'a> {
    #[serde(borrow)]
    records: Option<&'a RawValue>,
}

fn records(body: &[u8]) -> Option<Vec<IngestRecord>> {
    match serde_json::from_slice::<BatchProbe>(body).ok()?.records {
        Some(records) => serde_json::from_str(records.get()).ok(),
        None => serde_json::from_slice(body).ok().map(|record| vec![record]),
    }
}

impl Ingest {
    /// The route, with a body limit of `max_body_bytes` (room for a full batch of the largest events).
    pub fn router(self: Arc<Self>, max_body_bytes: usize) -> ApiRouter {
        let limit = DefaultBodyLimit::max(max_body_bytes.saturating_mul(2).saturating_add(64 * 1024));
        with_default_error::<CodedError, _>(
            ApiRouter::new().routes(routes!(ingest).layer(limit)),
            "The ingest error envelope",
        )
        .with_state(self)
    }

    fn reject(&self, message: &str, count: u64) -> Response {
        self.metrics.events.with_label_values(&["rejected"]).inc_by(count);
        error(StatusCode::BAD_REQUEST, "INVALID_RECORD", message)
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(json!({ "error": { "code": code, "message": message } }))).into_response()
}

/// Writes the records (all or none: one is refused, the request is) and answers 202 once the durable queue
/// acknowledged them.
#[utoipa::path(post, path = INGEST_ROUTE, tag = "gateway ingest", request_body(content = Value, description = "One gateway record, or `{\"records\": [...]}`"),
    responses((status = 202, description = "`{\"status\": \"queued\", \"count\": n}` once the durable queue acknowledged", body = Value)))]
async fn ingest(State(ingest): State<Arc<Ingest>>, body: Bytes) -> Response {
    let Some(records) = records(&body) else {
        return ingest.reject("not a gateway record or batch of records", 1);
    };
    if records.is_empty() || records.len() > MAX_FORWARD_BATCH {
        return ingest.reject(&format!("a batch holds 1 to {MAX_FORWARD_BATCH} records"), 1);
    }
    let count = records.len() as u64;
    let mut payloads = Vec::with_capacity(records.len());
    for (index, record) in records.iter().enumerate() {
        if let Err(message) = record.check(&ingest.analytics_topic) {
            return ingest.reject(&format!("records[{index}]: {message}"), count);
        }
        // What the queue holds is the checked record, serialized compactly.
        payloads.push(serde_json::to_vec(record).expect("a record serializes"));
    }
    match ingest.batcher.enqueue(payloads).await {
        Ok(()) => {
            ingest.metrics.events.with_label_values(&["accepted"]).inc_by(count);
            (StatusCode::ACCEPTED, Json(json!({ "status": "queued", "count": count }))).into_response()
        }
        Err(_) => {
            ingest.metrics.events.with_label_values(&["unavailable"]).inc_by(count);
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "QUEUE_UNAVAILABLE",
                "the durable queue did not acknowledge the events",
            )
        }
    }
}

/// `GET /admin/v1/queues`: pending and acknowledgement state of the gateway's queues.
pub fn admin_router(queue: Arc<dyn WorkQueue>) -> ApiRouter {
    with_default_error::<CodedError, _>(ApiRouter::new().routes(routes!(queues)), "The queue API's error envelope")
        .with_state(queue)
}

#[utoipa::path(get, path = QUEUES_ROUTE, tag = "gateway ingest", responses((status = 200, description = "`{\"backend\", \"queues\": [{\"name\", \"pending\", \"leased\", \"acknowledged\"}]}`", body = Value)))]
async fn queues(State(queue): State<Arc<dyn WorkQueue>>) -> Response {
    let mut rows = Vec::new();
    for name in [QUEUE, DEAD_LETTER_QUEUE] {
        match queue.stats(name).await {
            Ok(stats) => rows.push(json!({
                "name": name,
                "pending": stats.pending,
                "leased": stats.leased,
                "acknowledged": stats.acknowledged,
            })),
            Err(failure) => {
                tracing::warn!(error = %failure, queue = name, "reading queue state failed");
                return error(StatusCode::SERVICE_UNAVAILABLE, "QUEUE_UNAVAILABLE", "the durable queue is unavailable");
            }
        }
    }
    Json(json!({ "backend": queue.backend(), "queues": rows })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"{"topic": "t", "key": "1:2", "envelope": {"envelope_version": 1, "b": [1, 2]}}"#;

    #[test]
    fn a_body_is_one_record_or_a_batch_and_keeps_each_envelope_as_written() {
        let one = records(ONE.as_bytes()).expect("one record");
        assert_eq!(one.len(), 1);
        assert_eq!((one[0].topic.as_str(), one[0].key.as_str()), ("t", "1:2"));
        assert_eq!(one[0].envelope.get(), r#"{"envelope_version": 1, "b": [1, 2]}"#);
        let batch = records(format!(r#"{{"records": [{ONE}, {ONE}]}}"#).as_bytes()).expect("a batch");
        assert_eq!(batch.len(), 2);
        assert_eq!(batch[1].envelope.get(), one[0].envelope.get());
        // What the queue holds carries the envelope's text unchanged.
        let queued = serde_json::to_string(&batch[0]).unwrap();
        assert!(queued.ends_with(r#""envelope":{"envelope_version": 1, "b": [1, 2]}}"#), "{queued}");
    }

    #[test]
    fn other_bodies_are_not_records() {
        for body in [
            "",
            "[]",
            "{}",
            r#"{"records": {}}"#,
            r#"{"records": [{"topic": "t"}]}"#,
            r#"{"records": [], "records": []}"#,
            r#"{"topic": "t", "key": "k", "envelope": {}, "extra": 1}"#,
            r#"{"topic": "t", "key": "k"}"#,
        ] {
            assert!(records(body.as_bytes()).is_none(), "{body}");
        }
        assert_eq!(records(br#"{"records": []}"#).map(|r| r.len()), Some(0), "the handler refuses an empty batch");
    }
}
