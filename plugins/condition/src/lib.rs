//! `condition`: the flow node kind that lets an event through or not, by a CEL expression over its fields.
//!
//! A batch node kind (`flowhost:plugin@0.2.0`): `prepare` compiles `{"expression": "<CEL>"}` once, `evaluate`
//! answers `{"pass": true|false}` for each event (its fields). Called as an action, the input is
//! `{"config": {"expression": ...}, "event": {<fields>}}`.
//!
//! The semantics are the host's rule engine's, `host/expr` without a schema (`Expression::compile(source, None)`
//! then `evaluate`): the event's top-level fields are the CEL variables, converted from JSON as they are read
//! (an integral number is an `int`, any other number a `double`); the expression is parsed, not type-checked; a
//! result that is not a bool, and an evaluation error such as a field missing from the event, fail the call. Every
//! failure is permanent: retrying the same expression on the same event gives the same answer. The messages are
//! host/expr's.
//!
//! The CEL environment (functions, macros, extension libraries, limits), the parse step, the messages and the
//! JSON conversion are `flowhost-cel`'s, the crate host/expr builds on too; only the schema typing stays in the
//! host (`flowhost-expr` depends on `flowhost-core`, which does not build for wasm32-wasip2).
//! `host/runtime/tests/node_kinds.rs` checks that the component and `flowhost_expr::Expression` agree over a table
//! of expressions and events.
//!
//! The expression is compiled once per batch (the host prepares a node once per instance, and an instance serves a
//! whole batch of events).

use std::collections::BTreeMap;

use flowhost_cel::cel_core::{Activation, Value};
use flowhost_cel::Runnable;
use flowhost_sdk_guest::{export_plugin, Action, Context, Error, Manifest, Output, Plugin, Prepared};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value as Json};

struct Condition;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    expression: String,
}

impl Plugin for Condition {
    const NODE_KINDS: &'static [&'static str] = &["condition"];

    fn manifest() -> Manifest {
        Manifest::new("condition", "0.2.0")
            .node_kind("condition")
            // A node kind is small and quick: a bug in it fails fast instead of holding a slot for the defaults.
            .timeout_ms(500)
            .memory_bytes(32 << 20)
            .description("Lets an event through when a CEL expression holds.")
            .action(
                Action::new("condition")
                    .description("Evaluates a CEL expression over the event's fields; outputs {\"pass\": bool}.")
                    .config_schema(config_schema()),
            )
    }

    fn prepare(kind: &str, config: &str) -> Result<Box<dyn Prepared>, Error> {
        if kind != "condition" {
            return Err(Error::permanent(format!("unknown node kind {kind:?}")));
        }
        let config: Config =
            serde_json::from_str(config).map_err(|error| Error::permanent(format!("invalid config: {error}")))?;
        let runnable = Runnable::new(&flowhost_cel::environment(), &config.expression)
            .map_err(|problem| Error::permanent(format!("invalid expression: {}", problem.messages("").join("; "))))?;
        Ok(Box::new(Compiled(runnable)))
    }
}

/// A compiled expression (host/expr's `Expression::compile(source, None)`: parsed only).
struct Compiled(Runnable);

impl Prepared for Compiled {
    fn evaluate(&self, _context: &Context, event: &str) -> Result<Output, Error> {
        let invalid = |error: serde_json::Error| Error::permanent(format!("invalid event: {error}"));
        // The event's fields are read without converting them: only those the expression reads are decoded (a
        // key with escapes cannot be borrowed; such an event is decoded whole).
        let Compiled(runnable) = self;
        let pass = match serde_json::from_str::<RawFields<'_>>(event) {
            Ok(fields) => runnable.evaluate(&RawActivation(&fields, runnable.nested_loops)),
            Err(_) => {
                let fields = serde_json::from_str(event).map_err(invalid)?;
                runnable.evaluate(&EventActivation(&fields, runnable.nested_loops))
            }
        }
        // host/expr's `EvalError` message.
        .map_err(|error| Error::permanent(format!("expression evaluation failed: {error}")))?;
        Ok(Output::raw(if pass { PASS } else { FAIL }))
    }
}

fn config_schema() -> Json {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "pattern": "\\S",
                "description": "CEL over the event's top-level fields; must evaluate to a bool, e.g. \
                                `amount > 100.0 && game == 'slots'`. A field the event lacks fails the call."
            }
        },
        "required": ["expression"],
        "additionalProperties": false
    })
}

/// The two answers, written once (serializing `{"pass": bool}` per event is measurable in a batch).
const PASS: &str = r#"{"pass":true}"#;
const FAIL: &str = r#"{"pass":false}"#;

/// An event's top-level fields, borrowed and not decoded (a repeated key keeps its last value, as in a `Map`).
type RawFields<'a> = BTreeMap<&'a str, &'a RawValue>;

/// Resolves variables from the event's raw fields, decoding only the ones the expression reads.
struct RawActivation<'a>(&'a RawFields<'a>, bool);

impl Activation for RawActivation<'_> {
    fn resolve(&self, name: &str) -> Option<Value> {
        let raw = self.0.get(name)?;
        // A value inside a document that parsed is valid JSON.
        serde_json::from_str::<Json>(raw.get()).ok().map(|json| flowhost_cel::read_json(&json, self.1))
    }
}

/// Resolves variables lazily from the event's JSON fields, converting only the ones the expression reads.
struct EventActivation<'a>(&'a Map<String, Json>, bool);

impl Activation for EventActivation<'_> {
    fn resolve(&self, name: &str) -> Option<Value> {
        self.0.get(name).map(|json| flowhost_cel::read_json(json, self.1))
    }
}

export_plugin!(Condition);
