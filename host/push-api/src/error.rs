//! The error type of the push API and its envelope `{ "error": { "code", "message", "details"? } }`, used on
//! the push-platform and the editor routes alike. Codes are the spec's (`VALIDATION_ERROR`, `UNAUTHORIZED`,
//! `FORBIDDEN`, `PUSH_ENV_NOT_READY`, `INTERNAL_ERROR`) plus a few of ours for situations the spec does not
//! name (docs/push.md, "Push API"). A 5xx never carries internal detail: the cause is logged, the client gets a
//! generic message. The domain's errors (`flowhost_notifications::WebPushError`, without status codes) are mapped here.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowhost_core::ports::PortError;
use flowhost_notifications::WebPushError;
use serde_json::{json, Value};
use tracing::error;

pub use flowhost_notifications::FieldError;

/// The push API's error envelope, `{ "error": { code, message, details? } }`. A 503 the client should retry also
/// carries `Retry-After` (seconds).
#[derive(utoipa::ToSchema)]
#[schema(as = PushError)]
#[allow(dead_code)] // documentation only: `PushError`'s `IntoResponse` writes the same shape
pub(crate) struct ErrorBody {
    error: ErrorDetail,
}

/// The `error` object of the push API's error envelope.
#[derive(utoipa::ToSchema)]
#[schema(as = PushErrorDetail)]
#[allow(dead_code)] // documentation only
pub(crate) struct ErrorDetail {
    /// A stable code: the spec's `VALIDATION_ERROR`, `UNAUTHORIZED`, `FORBIDDEN`, `PUSH_ENV_NOT_READY`,
    /// `INTERNAL_ERROR`, and ours (`NOT_FOUND`, `CONFLICT`, `METHOD_NOT_ALLOWED`, `PAYLOAD_TOO_LARGE`,
    /// `CALLER_POLICY_INVALID`, `EDITOR_TOKEN_NOT_CONFIGURED`, `CHANNEL_DISABLED`, `TOO_MANY_CONNECTIONS`,
    /// `SENDER_NOT_RUNNING`, `SEND_RETRYABLE`, `SEND_FAILED`).
    code: String,
    /// What went wrong, for a person.
    message: String,
    /// More to say, where there is: `[{ field, message }]` on a `VALIDATION_ERROR`, `{ reasons }` on
    /// `PUSH_ENV_NOT_READY`, ...
    details: Option<Value>,
}

/// A failed push API request, rendered as the spec's envelope.
#[derive(Debug)]
pub struct PushError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// Boxed: a JSON value is large, and this error travels in every handler's `Result`.
    details: Option<Box<Value>>,
    /// `Retry-After` in seconds, on a 503 the client should retry.
    retry_after: Option<u32>,
}

impl PushError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), details: None, retry_after: None }
    }

    /// Adds `Retry-After: seconds` to the answer.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(u32::try_from(seconds).unwrap_or(u32::MAX));
        self
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// 400 `VALIDATION_ERROR`; `details` lists every problem as `{ field, message }`.
    pub fn validation(errors: Vec<FieldError>) -> Self {
        let message = errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; ");
        let details: Vec<Value> = errors.iter().map(|e| json!({ "field": e.field, "message": e.message })).collect();
        Self::new(StatusCode::BAD_REQUEST, "VALIDATION_ERROR", format!("invalid request: {message}"))
            .with_details(Value::Array(details))
    }

    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::validation(vec![FieldError::new(field, message)])
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "FORBIDDEN", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NOT_FOUND", message)
    }

    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR", "internal error; retry with backoff")
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn code(&self) -> &'static str {
        self.code
    }

    pub fn details(&self) -> Option<&Value> {
        self.details.as_deref()
    }
}

/// A storage failure, whatever its kind, is the spec's "unexpected error": 500 `INTERNAL_ERROR`, safe to retry
/// with backoff (the error table keeps 503 for `PUSH_ENV_NOT_READY`, which an operator must fix). The cause is
/// logged, never answered.
impl From<PortError> for PushError {
    fn from(e: PortError) -> Self {
        if e.is_transient() {
            error!(error = %e, "storage unavailable");
        } else {
            error!(error = %e, "storage error");
        }
        PushError::internal()
    }
}

/// The domain's errors as the push API answers them: 400 `VALIDATION_ERROR`, 404 `NOT_FOUND`, 409 `CONFLICT`,
/// storage as [`PortError`] is, and 500 `INTERNAL_ERROR` (the cause logged, never answered).
impl From<WebPushError> for PushError {
    fn from(e: WebPushError) -> Self {
        match e {
            WebPushError::Invalid(errors) => PushError::validation(errors),
            WebPushError::NotFound(_) => PushError::not_found(e.to_string()),
            WebPushError::Conflict(message) => PushError::new(StatusCode::CONFLICT, "CONFLICT", message),
            WebPushError::Storage(e) => e.into(),
            WebPushError::Internal(_) => {
                error!(error = %e, "web-push domain error");
                PushError::internal()
            }
        }
    }
}

impl IntoResponse for PushError {
    fn into_response(self) -> Response {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(details) = self.details {
            error["details"] = *details;
        }
        let mut response = (self.status, Json(json!({ "error": error }))).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(seconds));
        }
        response
    }
}
