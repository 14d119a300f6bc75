//! What a browser posts and what the gateway publishes (documented in docs/gateway.md).
//!
//! The browser body of `POST /api/gateway/events` is one JSON object:
//!
//! ```json
//! {"event_type": "player.casino-presence.v1", "event_id": "<UUID>", "occurred_at": "<RFC 3339>",
//!  "event_payload": {"presence_session_id": "<UUID>", "action": "heartbeat"}}
//! ```
//!
//! Every event is published in one envelope; tenant, site and user come from the origin map and the player
//! validation, never from the browser (the browser has no field for them, and unknown top-level fields are
//! refused):
//!
//! ```json
//! {"envelope_version": 1, "event_type": "...", "source": "casino-web",
//!  "metadata": {"event_id": "...", "received_at": "<gateway clock>", "occurred_at": "<browser clock>"},
//!  "body": {"schema_version": 1, "tenant_id": "12", "site_id": "34", "user": {"user_id": "<client_player_id>"}},
//!  "event_payload": {...}}
//! ```
//!
//! Presence events (`player.casino-presence.v1`) go to `gateway.player-casino-presence.v1` with exactly that
//! envelope and a payload of `presence_session_id`, `action` (`opened`, `heartbeat`, `closed`) and, with
//! `closed` only, `close_reason` (`last_tab`, `logout`). Other event types go to the analytics topic
//! (`GATEWAY_ANALYTICS_TOPIC`), whose envelope's `body.user` also carries `global_user_id`. Both are keyed
//! `<tenant_id>:<client_player_id>`.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::origins::OriginEntry;
use crate::player::Player;

/// The presence event type and its topic (owned by the gateway: the worker creates it).
pub const PRESENCE_EVENT_TYPE: &str = "player.casino-presence.v1";
pub const PRESENCE_TOPIC: &str = "gateway.player-casino-presence.v1";
/// The envelope's `source`: a constant naming the front-end application (forgeable, not authentication).
pub const SOURCE: &str = "casino-web";
/// The longest `event_type`.
pub const MAX_EVENT_TYPE_LEN: usize = 128;

/// The browser's event, as posted.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrowserEvent {
    pub event_type: String,
    pub event_id: String,
    pub occurred_at: String,
    pub event_payload: Map<String, Value>,
}

/// A presence event's payload.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PresencePayload {
    presence_session_id: String,
    action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    close_reason: Option<String>,
}

/// One accepted event on its way to the broker: what the edge posts to internal ingest and what the durable
/// queue holds. The envelope stays JSON text from the edge to the broker: internal ingest and the worker read
/// only its head ([`EnvelopeHead`]), never build its tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestRecord {
    pub topic: String,
    pub key: String,
    pub envelope: Box<RawValue>,
}

/// The envelope's fields that internal ingest checks and the worker copies into the broker record's headers.
#[derive(Debug, Default, Deserialize)]
pub struct EnvelopeHead {
    envelope_version: Option<Value>,
    event_type: Option<Value>,
    metadata: Option<Value>,
}

impl EnvelopeHead {
    /// The event id (for the broker record's headers).
    pub fn event_id(&self) -> Option<&str> {
        self.metadata.as_ref()?.get("event_id")?.as_str()
    }

    pub fn event_type(&self) -> Option<&str> {
        self.event_type.as_ref()?.as_str()
    }
}

impl IngestRecord {
    /// The envelope's head; an envelope that is not an object (or repeats one of the head's fields) has none.
    pub fn head(&self) -> Result<EnvelopeHead, String> {
        serde_json::from_str(self.envelope.get()).map_err(|error| format!("envelope must be a JSON object ({error})"))
    }

    /// Checks a record received by internal ingest: one of the gateway's topics, a key, an envelope of version
    /// 1 with an event id.
    pub fn check(&self, analytics_topic: &str) -> Result<(), String> {
        if self.topic != PRESENCE_TOPIC && self.topic != analytics_topic {
            return Err(format!("topic {:?} is not one of the gateway's", self.topic));
        }
        if self.key.is_empty() || self.key.len() > 256 {
            return Err("key must be 1 to 256 bytes".to_owned());
        }
        let head = self.head()?;
        if head.envelope_version.as_ref().and_then(Value::as_u64) != Some(1) {
            return Err("envelope.envelope_version must be 1".to_owned());
        }
        if head.event_id().is_none_or(|id| uuid::Uuid::parse_str(id).is_err()) {
            return Err("envelope.metadata.event_id must be a UUID".to_owned());
        }
        if head.event_type().is_none() {
            return Err("envelope.event_type must be a string".to_owned());
        }
        Ok(())
    }
}

/// Whether `text` is a UUID in its hyphenated form (`8-4-4-4-12` hex digits), the only form the presence
/// projector takes: `Uuid::parse_str` alone also reads the simple, braced and URN forms, which the gateway would
/// then publish (202) for the projector to dead-letter as `invalid_event_id` / `invalid_session_id`.
fn is_uuid(text: &str) -> bool {
    text.len() == 36 && uuid::Uuid::try_parse(text).is_ok()
}

/// Parses and checks the browser's body; an error is a message for the 400 answer.
pub fn parse(body: &[u8]) -> Result<BrowserEvent, String> {
    let event: BrowserEvent = serde_json::from_slice(body).map_err(|error| format!("not an event: {error}"))?;
    let type_ok = !event.event_type.is_empty()
        && event.event_type.len() <= MAX_EVENT_TYPE_LEN
        && event.event_type.starts_with(|c: char| c.is_ascii_lowercase())
        && event.event_type.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if !type_ok {
        return Err(format!("event_type must be 1 to {MAX_EVENT_TYPE_LEN} of a-z 0-9 . _ - starting with a letter"));
    }
    if !is_uuid(&event.event_id) {
        return Err("event_id must be a UUID (hyphenated, 8-4-4-4-12 hex digits)".to_owned());
    }
    if chrono::DateTime::parse_from_rfc3339(&event.occurred_at).is_err() {
        return Err("occurred_at must be an RFC 3339 date-time".to_owned());
    }
    if event.event_type == PRESENCE_EVENT_TYPE {
        presence_payload(&event.event_payload)?;
    }
    Ok(event)
}

fn presence_payload(payload: &Map<String, Value>) -> Result<PresencePayload, String> {
    let presence: PresencePayload = serde_json::from_value(Value::Object(payload.clone()))
        .map_err(|error| format!("event_payload of a presence event: {error}"))?;
    if !is_uuid(&presence.presence_session_id) {
        return Err("event_payload.presence_session_id must be a UUID (hyphenated, 8-4-4-4-12 hex digits)".to_owned());
    }
    if !["opened", "heartbeat", "closed"].contains(&presence.action.as_str()) {
        return Err("event_payload.action must be opened, heartbeat or closed".to_owned());
    }
    match presence.close_reason.as_deref() {
        None => {}
        Some(_) if presence.action != "closed" => {
            return Err("event_payload.close_reason is allowed only with action closed".to_owned())
        }
        Some("last_tab" | "logout") => {}
        Some(_) => return Err("event_payload.close_reason must be last_tab or logout".to_owned()),
    }
    Ok(presence)
}

/// The record to publish for an accepted event: topic, key and envelope, with tenant, site and user from
/// `origin` and `player` and the gateway's `received_at`.
pub fn record(
    event: BrowserEvent,
    origin: &OriginEntry,
    player: Player,
    received_at: String,
    analytics_topic: &str,
) -> IngestRecord {
    let presence = event.event_type == PRESENCE_EVENT_TYPE;
    let user_id = player.client_player_id.to_string();
    let global_user_id = (!presence).then(|| player.global_player_id.to_string());
    let envelope = Envelope {
        envelope_version: 1,
        event_type: &event.event_type,
        source: SOURCE,
        metadata: Metadata { event_id: &event.event_id, received_at: &received_at, occurred_at: &event.occurred_at },
        body: Body {
            schema_version: 1,
            tenant_id: &origin.tenant_id,
            site_id: &origin.site_id,
            user: User { user_id: &user_id, global_user_id: global_user_id.as_deref() },
        },
        event_payload: &event.event_payload,
    };
    IngestRecord {
        topic: if presence { PRESENCE_TOPIC.to_owned() } else { analytics_topic.to_owned() },
        key: format!("{}:{}", origin.tenant_id, user_id),
        envelope: serde_json::value::to_raw_value(&envelope)
            .expect("an envelope of strings and a JSON object serializes"),
    }
}

/// The published envelope, in the order of its fields in the module's documentation.
#[derive(Serialize)]
struct Envelope<'a> {
    envelope_version: u8,
    event_type: &'a str,
    source: &'a str,
    metadata: Metadata<'a>,
    body: Body<'a>,
    event_payload: &'a Map<String, Value>,
}

#[derive(Serialize)]
struct Metadata<'a> {
    event_id: &'a str,
    received_at: &'a str,
    occurred_at: &'a str,
}

#[derive(Serialize)]
struct Body<'a> {
    schema_version: u8,
    tenant_id: &'a str,
    site_id: &'a str,
    user: User<'a>,
}

#[derive(Serialize)]
struct User<'a> {
    user_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    global_user_id: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn origin() -> OriginEntry {
        OriginEntry {
            origin: "https://play.example.com".into(),
            tenant_id: "12".into(),
            site_id: "34".into(),
            player_url: "https://players.internal".into(),
        }
    }

    const PLAYER: Player = Player { client_player_id: 501, global_player_id: 9001 };

    fn presence(payload: Value) -> Value {
        json!({"event_type": PRESENCE_EVENT_TYPE, "event_id": "6f1c1e8a-8f7e-4a53-9d55-2f1a3b4c5d6e",
            "occurred_at": "2026-11-24T10:00:00.120Z", "event_payload": payload})
    }

    #[test]
    fn a_presence_event_becomes_the_presence_envelope() {
        let body = presence(
            json!({"action": "closed", "close_reason": "logout", "presence_session_id": "0b6f3a52-3c2f-4d0e-9d1a-7f3e2b1c0a99"}),
        );
        let event = parse(body.to_string().as_bytes()).unwrap();
        let record = record(event, &origin(), PLAYER, "2026-11-24T10:00:00.500Z".into(), "gateway.analytics-events.v1");
        assert_eq!(record.topic, PRESENCE_TOPIC);
        assert_eq!(record.key, "12:501");
        // The text published, byte for byte: the fields in the documented order, compact (the payload's keys are
        // given sorted: whether a JSON object keeps its keys' order depends on serde_json's features).
        assert_eq!(
            record.envelope.get(),
            concat!(
                r#"{"envelope_version":1,"event_type":"player.casino-presence.v1","source":"casino-web","#,
                r#""metadata":{"event_id":"6f1c1e8a-8f7e-4a53-9d55-2f1a3b4c5d6e","received_at":"2026-11-24T10:00:00.500Z","#,
                r#""occurred_at":"2026-11-24T10:00:00.120Z"},"#,
                r#""body":{"schema_version":1,"tenant_id":"12","site_id":"34","user":{"user_id":"501"}},"#,
                r#""event_payload":{"action":"closed","close_reason":"logout","presence_session_id":"0b6f3a52-3c2f-4d0e-9d1a-7f3e2b1c0a99"}}"#
            )
        );
        assert_eq!(record.check("gateway.analytics-events.v1"), Ok(()));
    }

    #[test]
    fn other_events_go_to_the_analytics_topic() {
        let body = json!({"event_type": "casino.game-opened.v1", "event_id": "6f1c1e8a-8f7e-4a53-9d55-2f1a3b4c5d6e",
            "occurred_at": "2026-11-24T10:00:00+01:00", "event_payload": {"game": "roulette", "tenant_id": "99"}});
        let record = record(parse(body.to_string().as_bytes()).unwrap(), &origin(), PLAYER, "t".into(), "analytics.v1");
        assert_eq!(record.topic, "analytics.v1");
        let envelope: Value = serde_json::from_str(record.envelope.get()).unwrap();
        assert_eq!(envelope["body"]["tenant_id"], "12", "the browser's tenant never wins");
        assert_eq!(envelope["body"]["user"], json!({"user_id": "501", "global_user_id": "9001"}));
        assert_eq!(envelope["event_payload"]["game"], "roulette");
        let head = record.head().unwrap();
        assert_eq!(head.event_id(), Some("6f1c1e8a-8f7e-4a53-9d55-2f1a3b4c5d6e"));
        assert_eq!(head.event_type(), Some("casino.game-opened.v1"));
    }

    #[test]
    fn internal_ingest_refuses_records_whose_envelope_head_is_wrong() {
        let id = "6f1c1e8a-8f7e-4a53-9d55-2f1a3b4c5d6e";
        let good = json!({"envelope_version": 1, "event_type": "a", "metadata": {"event_id": id}, "body": {}});
        let with = |topic: &str, key: &str, envelope: &Value| IngestRecord {
            topic: topic.to_owned(),
            key: key.to_owned(),
            envelope: serde_json::value::to_raw_value(envelope).unwrap(),
        };
        assert_eq!(with(PRESENCE_TOPIC, "1:2", &good).check("analytics"), Ok(()));
        assert_eq!(with("analytics", "1:2", &good).check("analytics"), Ok(()));
        let wrong = |field: &str, value: Value| {
            let mut envelope = good.clone();
            envelope[field] = value;
            with(PRESENCE_TOPIC, "1:2", &envelope).check("analytics").unwrap_err()
        };
        assert!(wrong("envelope_version", json!(2)).contains("envelope_version"));
        assert!(wrong("envelope_version", json!(1.0)).contains("envelope_version"));
        assert!(wrong("envelope_version", json!("1")).contains("envelope_version"));
        assert!(wrong("event_type", json!(7)).contains("event_type"));
        assert!(wrong("metadata", json!({"event_id": "x"})).contains("event_id"));
        assert!(wrong("metadata", json!("x")).contains("event_id"));
        let error = |record: IngestRecord| record.check("analytics").unwrap_err();
        assert!(error(with("other", "1:2", &good)).contains("topic"));
        assert!(error(with(PRESENCE_TOPIC, "", &good)).contains("key"));
        assert!(error(with(PRESENCE_TOPIC, "1:2", &json!([1]))).contains("object"));
        let repeated = format!(
            r#"{{"envelope_version":1,"envelope_version":1,"event_type":"a","metadata":{{"event_id":"{id}"}}}}"#
        );
        let record =
            IngestRecord { envelope: RawValue::from_string(repeated).unwrap(), ..with(PRESENCE_TOPIC, "1:2", &good) };
        assert!(error(record).contains("object"), "a repeated head field is refused, not read last-wins");
    }

    #[test]
    fn bad_bodies_are_refused_with_the_reason() {
        let session = "0b6f3a52-3c2f-4d0e-9d1a-7f3e2b1c0a99";
        let cases = [
            (json!([]), "not an event"),
            (
                json!({"event_type": "a.b", "event_id": "x", "occurred_at": "2026-11-24T10:00:00Z", "event_payload": {}}),
                "event_id",
            ),
            (
                json!({"event_type": "A", "event_id": session, "occurred_at": "2026-11-24T10:00:00Z", "event_payload": {}}),
                "event_type",
            ),
            (
                json!({"event_type": "a", "event_id": session, "occurred_at": "yesterday", "event_payload": {}}),
                "occurred_at",
            ),
            (
                json!({"event_type": "a", "event_id": session, "occurred_at": "2026-11-24T10:00:00Z", "event_payload": {}, "tenant_id": "1"}),
                "unknown field",
            ),
            (presence(json!({"presence_session_id": "nope", "action": "opened"})), "presence_session_id"),
            // Forms the projector refuses (tests/fuzz/regressions/presence_envelope/): refused here, not published.
            (
                json!({"event_type": "a", "event_id": session.replace('-', ""), "occurred_at": "2026-11-24T10:00:00Z", "event_payload": {}}),
                "event_id",
            ),
            (
                presence(json!({"presence_session_id": format!("{{{session}}}"), "action": "opened"})),
                "presence_session_id",
            ),
            (
                presence(json!({"presence_session_id": format!("urn:uuid:{session}"), "action": "opened"})),
                "presence_session_id",
            ),
            (presence(json!({"presence_session_id": session, "action": "left"})), "action"),
            (
                presence(json!({"presence_session_id": session, "action": "opened", "close_reason": "logout"})),
                "only with action closed",
            ),
            (
                presence(json!({"presence_session_id": session, "action": "closed", "close_reason": "crash"})),
                "last_tab or logout",
            ),
            (presence(json!({"presence_session_id": session, "action": "opened", "user_id": "7"})), "unknown field"),
        ];
        for (body, expected) in cases {
            let error = parse(body.to_string().as_bytes()).unwrap_err();
            assert!(error.contains(expected), "{body}: {error}");
        }
    }
}
