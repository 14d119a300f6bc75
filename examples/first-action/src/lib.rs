//! `first-action`: a Flowhost plugin written from scratch with the guest SDK, the subject of the "your first
//! action" walk-through (`README.md`). Its one action, `welcome_bonus`, turns a player's first deposit into a
//! bonus offer and a message, logs the decision through the host's `log` capability, and reports a failure in the
//! outcome class the engine acts on (permanent for bad input, skip-forward for a currency the offer does not run
//! in).
//!
//! The decision lives in [`bonus`] as plain functions; this file only declares the manifest, routes the call and
//! talks to the host.

pub mod bonus;

use flowhost_sdk_guest::{export_plugin, log, Action, Call, Error, Manifest, Output, Plugin};

/// The plugin: its manifest and its one action.
pub struct FirstAction;

impl Plugin for FirstAction {
    fn manifest() -> Manifest {
        // The version is Cargo.toml's: bump it there for a new release. A registered (id, version) is immutable.
        Manifest::new("first-action", env!("CARGO_PKG_VERSION"))
            .description("Example plugin: a welcome bonus for a player's first deposit.")
            // Every capability the component calls must be declared, or the host refuses to load it.
            .capability("log")
            .action(
                Action::new("welcome_bonus")
                    .description("Matches a first deposit with a capped bonus and writes the player a message.")
                    .config_schema(config_schema()),
            )
    }

    fn invoke(call: Call) -> Result<Output, Error> {
        match call.action() {
            // `handle` decodes the input (a mismatch is a permanent error naming the field), runs the closure and
            // encodes its result as the output.
            "welcome_bonus" => call.handle(|request: bonus::Request| {
                let bonus = bonus::welcome_bonus(request)?;
                log::info(&bonus.log_line());
                Ok(bonus)
            }),
            _ => Err(call.unknown_action()),
        }
    }
}

/// The JSON Schema of the action's configuration, which is its input ([`bonus::Request`]): what a flow author
/// sets on the node in Studio. The event's fields come in through whole-value placeholders (`"deposit":
/// "{{amount}}"` keeps the amount a number); the limits are set once per node.
pub fn config_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["player_id", "deposit", "currency"],
        "properties": {
            "player_id": {"type": "string", "description": "Who deposited; in a flow, {{player_id}}."},
            "deposit": {"type": "number", "description": "The amount deposited; in a flow, {{amount}}."},
            "currency": {"type": "string", "description": "ISO 4217 code of the deposit; in a flow, {{currency}}."},
            "limits": limits_schema()
        }
    })
}

/// The JSON Schema of the offer's limits ([`bonus::Limits`]), every one with its default.
pub fn limits_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "description": "The offer: every limit has a default.",
        "properties": {
            "match_percent": {
                "type": "number", "minimum": 0, "maximum": 500, "default": 100,
                "description": "Bonus as a percentage of the deposit."
            },
            "max_bonus": {
                "type": "number", "minimum": 0, "default": 100,
                "description": "The largest bonus, in the deposit's currency."
            },
            "min_deposit": {
                "type": "number", "minimum": 0, "default": 10,
                "description": "Deposits below this get no bonus."
            },
            "currencies": {
                "type": "array", "items": {"type": "string", "pattern": "^[A-Za-z]{3}$"},
                "default": ["EUR", "USD", "GBP"],
                "description": "ISO 4217 codes the offer runs in; other deposits skip the node."
            }
        }
    })
}

export_plugin!(FirstAction);

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_sdk_guest::Outcome;

    #[test]
    fn manifest_declares_the_action_its_schema_and_the_log_capability() {
        let manifest: serde_json::Value = serde_json::from_str(&FirstAction::manifest().to_json()).unwrap();
        let (id, version) = (manifest["id"].as_str(), manifest["version"].as_str());
        assert_eq!((id, version), (Some("first-action"), Some(env!("CARGO_PKG_VERSION"))));
        assert_eq!(manifest["capabilities"], serde_json::json!(["log"]));
        assert_eq!(manifest["actions"][0]["name"], "welcome_bonus");
        assert_eq!(manifest["actions"][0]["config_schema"], config_schema());
        assert_eq!(manifest["actions"][0]["config_schema"]["properties"]["limits"], limits_schema());
    }

    #[test]
    fn the_schema_defaults_are_the_code_defaults() {
        let defaults = bonus::Limits::default();
        let schema = limits_schema();
        let default = |field: &str| schema["properties"][field]["default"].clone();
        assert_eq!(default("match_percent"), defaults.match_percent);
        assert_eq!(default("max_bonus"), defaults.max_bonus);
        assert_eq!(default("min_deposit"), defaults.min_deposit);
        assert_eq!(default("currencies"), serde_json::json!(defaults.currencies));
    }

    // Natively the host's `log` is a stub that panics, so only paths that fail before logging run through
    // `invoke` here; the component's success path is tested against the real host in tests/tests/first_action.rs.
    #[test]
    fn invoke_classifies_failures() {
        let invoke = |action: &str, input: &str| FirstAction::invoke(Call::new(action, input)).unwrap_err();

        let error = invoke("welcome_bonus", r#"{"player_id": "p-1001", "currency": "EUR"}"#);
        assert_eq!(error.outcome, Outcome::Permanent);
        assert!(error.message.starts_with("invalid input for welcome_bonus: missing field `deposit`"), "{error}");

        let error = invoke("welcome_bonus", r#"{"player_id": "p-1001", "deposit": 120.0, "currency": "JPY"}"#);
        assert_eq!(error.outcome, Outcome::SkipForward);

        assert_eq!(invoke("welcome", "{}"), Error::permanent("unknown action \"welcome\""));
    }
}
