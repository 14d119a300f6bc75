//! `presence`: the presence projector (spec 002 part B), a bundled plugin of the `projector` world. The host
//! consumes `gateway.player-casino-presence.v1`, loads a player's document, and asks this plugin what the
//! record makes of it: the new document, a no-op (a duplicate, a stale close, a stale time) or a rejection with
//! a bounded error code for the dead-letter topic. The sweep asks it to take due sites offline. All I/O
//! (documents, offsets, dead letters, the clock) stays in the host, so the projection is a pure function that
//! replicas and replays agree on.
//!
//! Input (JSON): `{"kind": "record", "topic", "partition", "offset", "value": "<the record's bytes as text>",
//! "now": "<RFC 3339>", "expiry_seconds": 120}` or `{"kind": "expire", "now": "<RFC 3339>"}`; the state is the
//! stored document without `_id`. Output: `{"outcome": "applied" | "duplicate" | "stale_time" | "stale_close" |
//! "unchanged", "document"?}`. A rejection of the record by the validator is a `permanent` error whose message is
//! `<error_code>: <detail>`; any other failure (`bad_request`, `bad_state`, `bad_output`) is `retryable`: it is
//! not the record's fault, and the host blocks and retries the partition rather than dead-letter a valid event.

pub mod projection;

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        path: "../../wit/flowhost-plugin-0.2.0",
        world: "projector",
    });

    use flowhost::plugin::types::Outcome;

    struct Presence;

    impl Guest for Presence {
        fn manifest() -> String {
            serde_json::json!({
                "id": "presence",
                "version": env!("CARGO_PKG_VERSION"),
                "description": "Projects player presence events onto one document per player, with a state per site.",
                "capabilities": ["log"],
                // The projection is a pure function of its arguments and keeps nothing between calls.
                "reuse_instances": true,
            })
            .to_string()
        }

        fn project(state: Option<String>, input: String) -> Result<String, PluginError> {
            match super::projection::run(state.as_deref(), &input) {
                Ok(output) => serde_json::to_string(&output)
                    .map_err(|e| PluginError { outcome: Outcome::Retryable, message: format!("bad_output: {e}") }),
                Err(rejection) => Err(PluginError {
                    outcome: if rejection.is_invalid_record() { Outcome::Permanent } else { Outcome::Retryable },
                    message: format!("{}: {}", rejection.code, rejection.detail),
                }),
            }
        }
    }

    export!(Presence);
}
