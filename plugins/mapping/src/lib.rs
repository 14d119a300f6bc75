//! `mapping`: the flow node kind that reshapes an event: the rule engine's `select` output mapping and the v2
//! mapping node's `select` and `merge` modes.
//!
//! A batch node kind (`flowhost:plugin@0.2.0`): `prepare` checks the config
//! `{"mode": "select" | "merge", "fields": [{"source": "a", "target": "b"}, ...]}` once, `evaluate` answers
//! `{"event": {<mapped fields>}}` for each event: with `select` only the listed fields, with `merge` the event's
//! fields and the listed ones added over them, each copied from `source` to `target`; a source the event lacks is
//! left out (as host/runs' `MappingNode::apply`, which rules and flows run natively). Called as an action, the input
//! is `{"config": ..., "event": {<fields>}}`.
//!
//! The config is valid when the admin API would accept it as a rule's `output_mapping` (host/api's `check_rule`)
//! or a v2 mapping node (host/flows' validation): mode `select` or `merge`, at least one field, non-blank `source`
//! and `target`, no target twice. Anything else is a permanent error naming the problem: the same config fails on
//! every event.

use std::collections::BTreeSet;

use flowhost_sdk_guest::{export_plugin, Action, Context, Error, Manifest, Output, Plugin, Prepared};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

struct Mapping;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    mode: Mode,
    fields: Vec<FieldMapping>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Select,
    Merge,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldMapping {
    source: String,
    target: String,
}

#[derive(Serialize)]
struct Mapped {
    event: Map<String, Json>,
}

impl Plugin for Mapping {
    const NODE_KINDS: &'static [&'static str] = &["mapping"];

    fn manifest() -> Manifest {
        Manifest::new("mapping", "0.3.0")
            .node_kind("mapping")
            // A node kind is small and quick: a bug in it fails fast instead of holding a slot for the defaults.
            .timeout_ms(500)
            .memory_bytes(32 << 20)
            .description("Reshapes an event: selected fields, renamed, or added to it.")
            .action(
                Action::new("mapping")
                    .description(
                        "Copies the listed fields from source to target, alone (select) or over the event (merge); \
                         outputs {\"event\": {...}}.",
                    )
                    .config_schema(config_schema()),
            )
    }

    fn prepare(kind: &str, config: &str) -> Result<Box<dyn Prepared>, Error> {
        if kind != "mapping" {
            return Err(Error::permanent(format!("unknown node kind {kind:?}")));
        }
        let config: Config =
            serde_json::from_str(config).map_err(|error| Error::permanent(format!("invalid config: {error}")))?;
        check(&config).map_err(|problems| Error::permanent(format!("invalid config: {}", problems.join("; "))))?;
        Ok(Box::new(config))
    }
}

impl Prepared for Config {
    fn evaluate(&self, _context: &Context, event: &str) -> Result<Output, Error> {
        let fields: Map<String, Json> =
            serde_json::from_str(event).map_err(|error| Error::permanent(format!("invalid event: {error}")))?;
        Output::json(&Mapped { event: map_fields(self, &fields) })
    }
}

fn config_schema() -> Json {
    let name = |what: &str| serde_json::json!({ "type": "string", "pattern": "\\S", "description": what });
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "mode": {
                "enum": ["select", "merge"],
                "description": "`select`: only the listed fields are kept; `merge`: they are added to the event's."
            },
            "fields": {
                "type": "array",
                "minItems": 1,
                "description": "The fields to keep; each target at most once.",
                "items": {
                    "type": "object",
                    "properties": {
                        "source": name("The event's field to copy; left out when the event lacks it."),
                        "target": name("The name it gets in the output.")
                    },
                    "required": ["source", "target"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["mode", "fields"],
        "additionalProperties": false
    })
}

/// The admin API's checks of an output mapping, with its messages.
fn check(config: &Config) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    if config.fields.is_empty() {
        problems.push("fields must not be empty".to_owned());
    }
    let mut targets = BTreeSet::new();
    for (i, field) in config.fields.iter().enumerate() {
        if field.source.trim().is_empty() || field.target.trim().is_empty() {
            problems.push(format!("fields[{i}]: source and target must not be empty"));
        } else if !targets.insert(field.target.as_str()) {
            problems.push(format!("fields[{i}]: target {:?} is mapped more than once", field.target));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// As host/runs' `MappingNode::apply`.
fn map_fields(config: &Config, fields: &Map<String, Json>) -> Map<String, Json> {
    let mut out = match config.mode {
        Mode::Select => Map::new(),
        Mode::Merge => fields.clone(),
    };
    for field in &config.fields {
        if let Some(value) = fields.get(&field.source) {
            out.insert(field.target.clone(), value.clone());
        }
    }
    out
}

export_plugin!(Mapping);
