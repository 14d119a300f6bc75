//! The ingest process's HTTP surfaces: internal ingest (`POST /internal/v1/events` on
//! `GATEWAY_INGEST_PRIVATE_PORT`: plain HTTP, no application token, bound to a private address) and the queue
//! administration API (`GET /admin/v1/queues` on `GATEWAY_ADMIN_HTTP_PORT`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use flowhost_core::ports::WorkQueue;
use serde_json::json;

use crate::event::IngestRecord;
use crate::metrics::IngestMetrics;
use crate::pipeline::{IngestBatcher, DEAD_LETTER_QUEUE, QUEUE};

pub const INGEST_ROUTE: &str = "/internal/v1/events";
pub const QUEUES_ROUTE: &str = "/admin/v1/queues";

pub struct Ingest {
    pub batcher: IngestBatcher,
    pub analytics_topic: String,
    pub metrics: IngestMetrics,
}

impl Ingest {
    /// The route, with a body limit room enough for an envelope around the largest event the edge accepts.
    pub fn router(self: Arc<Self>, max_event_bytes: usize) -> Router {
        Router::new()
            .route(INGEST_ROUTE, post(ingest))
            .layer(DefaultBodyLimit::max(max_event_bytes.saturating_mul(2).saturating_add(4096)))
            .with_state(self)
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(json!({ "error": { "code": code, "message": message } }))).into_response()
}

async fn ingest(State(ingest): State<Arc<Ingest>>, body: Bytes) -> Response {
    let record: IngestRecord = match serde_json::from_slice(&body) {
        Ok(record) => record,
        Err(parse) => {
            ingest.metrics.events.with_label_values(&["rejected"]).inc();
            return error(StatusCode::BAD_REQUEST, "INVALID_RECORD", &format!("not a gateway record: {parse}"));
        }
    };
    if let Err(message) = record.check(&ingest.analytics_topic) {
        ingest.metrics.events.with_label_values(&["rejected"]).inc();
        return error(StatusCode::BAD_REQUEST, "INVALID_RECORD", &message);
    }
    // What the queue holds is the checked record, re-serialized compactly.
    let payload = serde_json::to_vec(&record).expect("a record serializes");
    match ingest.batcher.enqueue(payload).await {
        Ok(()) => {
            ingest.metrics.events.with_label_values(&["accepted"]).inc();
            (StatusCode::ACCEPTED, Json(json!({ "status": "queued" }))).into_response()
        }
        Err(_) => {
            ingest.metrics.events.with_label_values(&["unavailable"]).inc();
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "QUEUE_UNAVAILABLE",
                "the durable queue did not acknowledge the event",
            )
        }
    }
}

/// `GET /admin/v1/queues`: pending and acknowledgement state of the gateway's queues.
pub fn admin_router(queue: Arc<dyn WorkQueue>) -> Router {
    Router::new().route(QUEUES_ROUTE, get(queues)).with_state(queue)
}

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
