//! `presence_envelope`: a record on `gateway.player-casino-presence.v1` as the presence consumer takes it (the
//! host's document id, then the `presence` projector's validation and projection), and the same bytes as the
//! browser's body of `POST /api/gateway/events`: whatever the gateway accepts and publishes, the projector must
//! accept too, or the browser gets a 202 for an event that is then dead-lettered.

use flowhost_gateway::event::{self, PRESENCE_EVENT_TYPE};
use flowhost_gateway::origins::OriginEntry;
use flowhost_gateway::player::Player;
use flowhost_presence::project::document_id;
use presence::projection::{self, Outcome};
use serde_json::json;

/// The host's clock and the gateway's receive time, a second earlier.
const NOW: &str = "2026-11-24T10:00:00.000Z";
const RECEIVED_AT: &str = "2026-11-24T09:59:59.000Z";
const EXPIRY_SECONDS: u64 = 120;

pub fn presence_envelope(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    consume(text);
    if let Ok(browser_event) = event::parse(data) {
        if browser_event.event_type == PRESENCE_EVENT_TYPE {
            let origin = OriginEntry {
                origin: "https://play.example.com".into(),
                tenant_id: "12".into(),
                site_id: "34".into(),
                player_url: "https://players.internal".into(),
            };
            let player = Player { client_player_id: 501, global_player_id: 9001 };
            let record = event::record(browser_event, &origin, player, RECEIVED_AT.into(), "analytics");
            let envelope = record.envelope.to_string();
            let now = chrono::DateTime::parse_from_rfc3339(NOW).expect("NOW is RFC 3339").to_utc();
            if let Err(rejection) = projection::validate(&envelope, now) {
                panic!("the gateway publishes what the projector refuses ({rejection:?}): {envelope}");
            }
            consume(&envelope);
        }
    }
}

/// The consumer's path for one record: the document it addresses, the projection onto no document, and the
/// same record again at a later offset onto the result (a redelivery, which must change nothing).
fn consume(envelope: &str) {
    let id = document_id(envelope);
    let input = |offset: i64| {
        json!({"kind": "record", "topic": "gateway.player-casino-presence.v1", "partition": 0, "offset": offset,
               "value": envelope, "now": NOW, "expiry_seconds": EXPIRY_SECONDS})
        .to_string()
    };
    let Ok(first) = projection::run(None, &input(7)) else { return };
    let Some(document) = first.document else { return };
    // The host groups records by the id it reads; a record the projector applies must have one, the same.
    assert_eq!(id, Some(format!("{}:{}", document.tenant_id, document.player_id)), "{envelope}");
    let state = serde_json::to_string(&document).expect("a document prints");
    match projection::run(Some(&state), &input(8)) {
        Ok(again) => assert_eq!(again.outcome, Outcome::Duplicate, "a redelivery changed the document: {envelope}"),
        Err(rejection) => panic!("a redelivery is refused ({rejection:?}): {envelope}"),
    }
}
