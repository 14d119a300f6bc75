//! The event envelope on source topics. An event is one JSON object per record value:
//!
//! ```json
//! { "event_type": "deposit", "tenant_id": "casino-1", "amount": 250.0, "currency": "EUR" }
//! ```
//!
//! `event_type` (a non-empty string) is required; `tenant_id` (a string, or a number taken as its decimal
//! text) is optional. Every other top-level field is an event field: the rule expression sees the fields its
//! event type's schema declares, by name.

use serde_json::{Map, Value};

/// A parsed source event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub event_type: String,
    pub tenant_id: Option<String>,
    pub fields: Map<String, Value>,
}

/// Why a record is not an event. The engine counts these and moves the record to the invalid-events topic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("value is not valid JSON: {0}")]
    NotJson(String),
    #[error("value is not a JSON object")]
    NotObject,
    #[error("event_type is missing or not a non-empty string")]
    MissingEventType,
}

impl EnvelopeError {
    /// A short stable label for metrics and headers.
    pub fn reason(&self) -> &'static str {
        match self {
            EnvelopeError::NotJson(_) => "not_json",
            EnvelopeError::NotObject => "not_object",
            EnvelopeError::MissingEventType => "missing_event_type",
        }
    }
}

impl Event {
    pub fn parse(value: &[u8]) -> Result<Event, EnvelopeError> {
        let parsed: Value = serde_json::from_slice(value).map_err(|error| EnvelopeError::NotJson(error.to_string()))?;
        let Value::Object(fields) = parsed else {
            return Err(EnvelopeError::NotObject);
        };
        let event_type = match fields.get("event_type") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => return Err(EnvelopeError::MissingEventType),
        };
        let tenant_id = match fields.get("tenant_id") {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        Ok(Event { event_type, tenant_id, fields })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_envelope() {
        let event = Event::parse(br#"{"event_type":"deposit","tenant_id":7,"amount":1.5}"#).unwrap();
        assert_eq!(event.event_type, "deposit");
        assert_eq!(event.tenant_id.as_deref(), Some("7"));
        assert_eq!(event.fields["amount"], 1.5);
    }

    #[test]
    fn rejects_what_is_not_an_event() {
        assert_eq!(Event::parse(b"[1]").unwrap_err(), EnvelopeError::NotObject);
        assert_eq!(Event::parse(b"{\"a\":1}").unwrap_err(), EnvelopeError::MissingEventType);
        assert_eq!(Event::parse(b"{\"event_type\":\" \"}").unwrap_err(), EnvelopeError::MissingEventType);
        assert!(matches!(Event::parse(b"{oops").unwrap_err(), EnvelopeError::NotJson(_)));
    }
}
