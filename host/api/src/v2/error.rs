//! The v2 error envelope `{ "error": { "code", "message", "details"? } }` and the mapping of flow failures to
//! status codes. Storage failures answer 503 (unavailable) or 500 without backend detail; the detail is logged.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowhost_core::ports::PortError;
use flowhost_flows::FlowError;
use serde_json::{json, Value};
use tracing::error;

#[derive(Debug)]
pub(crate) struct V2Error {
    status: StatusCode,
    code: &'static str,
    message: String,
    details: Option<Value>,
}

impl V2Error {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> V2Error {
        V2Error { status, code, message: message.into(), details: None }
    }

    pub(crate) fn with_details(mut self, details: Value) -> V2Error {
        self.details = Some(details);
        self
    }

    /// 400 `INVALID_BODY` naming the field (a path like `nodes[2].config`, empty for the whole body).
    pub(crate) fn invalid_field(field: &str, message: impl Into<String>) -> V2Error {
        let message = message.into();
        let text = if field.is_empty() { format!("invalid body: {message}") } else { format!("{field}: {message}") };
        V2Error::new(StatusCode::BAD_REQUEST, "INVALID_BODY", text).with_details(json!({ "field": field }))
    }
}

impl From<PortError> for V2Error {
    fn from(error: PortError) -> Self {
        match error {
            PortError::Invalid(message) => V2Error::new(StatusCode::BAD_REQUEST, "INVALID_REQUEST", message),
            PortError::Conflict(id) => V2Error::new(StatusCode::CONFLICT, "CONFLICT", format!("{id} already exists")),
            PortError::Unavailable(_) | PortError::Timeout(_) | PortError::NoResponders(_) => {
                error!(%error, "storage unavailable");
                V2Error::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "STORAGE_UNAVAILABLE",
                    "storage is unavailable; retry later",
                )
            }
            PortError::Backend(_) => {
                error!(%error, "storage error");
                V2Error::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", "internal error")
            }
            // Logged where the document failed to convert.
            PortError::Malformed(_) => V2Error::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", "internal error"),
        }
    }
}

impl From<FlowError> for V2Error {
    fn from(error: FlowError) -> Self {
        let message = error.to_string();
        match error {
            FlowError::NotFound(_) => V2Error::new(StatusCode::NOT_FOUND, "FLOW_NOT_FOUND", message),
            FlowError::VersionNotFound { .. } => V2Error::new(StatusCode::NOT_FOUND, "VERSION_NOT_FOUND", message),
            FlowError::NotV2(_) => V2Error::new(StatusCode::CONFLICT, "NOT_A_V2_FLOW", message),
            FlowError::Exists(_) => V2Error::new(StatusCode::CONFLICT, "FLOW_EXISTS", message),
            FlowError::NotReleased(_) => V2Error::new(StatusCode::CONFLICT, "FLOW_NOT_RELEASED", message),
            FlowError::Concurrent(_) => V2Error::new(StatusCode::CONFLICT, "CONCURRENT_UPDATE", message),
            FlowError::Locked(lock) => V2Error::new(StatusCode::CONFLICT, "FLOW_LOCKED", message)
                .with_details(json!({ "holder": lock.holder, "expires_at": lock.expires_at })),
            FlowError::ReleaseBlocked { report, unacknowledged } => {
                V2Error::new(StatusCode::UNPROCESSABLE_ENTITY, "RELEASE_BLOCKED", message).with_details(json!({
                    "valid": report.valid,
                    "errors": report.errors,
                    "warnings": report.warnings,
                    "issues": report.issues,
                    "unacknowledged_warnings": unacknowledged,
                }))
            }
            FlowError::Invalid { field, message } => V2Error::invalid_field(&field, message),
            FlowError::Storage(error) => error.into(),
        }
    }
}

impl V2Error {
    /// The `{ code, message, details? }` object of the envelope.
    pub(crate) fn body(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(details) = &self.details {
            error["details"] = details.clone();
        }
        error
    }
}

impl IntoResponse for V2Error {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.body() }))).into_response()
    }
}
