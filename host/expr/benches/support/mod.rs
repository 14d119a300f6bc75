//! What the `cel` benches share: the deposit event and its schema, the 4-clause rule the targets are set for,
//! and the same rule through the `cel` crate (cel-rust), the anchor.

use std::hint::black_box;

use flowhost_core::model::{EventSchema, FieldType};
use serde_json::{json, Map, Value};

/// The rule the targets are set for.
pub const RULE: &str = "amount > 100.0 && count >= 2 && game == 'slots' && !vip";
/// The fields [`RULE`] reads.
pub const RULE_FIELDS: [&str; 4] = ["amount", "count", "game", "vip"];
/// The anchor's name in the reports.
pub const ANCHOR: &str = "cel 0.15";

pub fn schema() -> EventSchema {
    EventSchema::new(
        "deposit",
        &[
            ("amount", FieldType::Double),
            ("count", FieldType::Int),
            ("game", FieldType::String),
            ("vip", FieldType::Bool),
        ],
    )
}

/// The parsed event, as the engine holds it.
pub fn event() -> Map<String, Value> {
    let event = json!({"event_type": "deposit", "tenant_id": "t1", "amount": 150.0, "count": 3,
                       "game": "slots", "vip": false, "currency": "EUR", "country": "MT"});
    event.as_object().expect("an object").clone()
}

/// The `cel` crate's value of a JSON scalar (the bench's events hold only scalars).
fn cel_value(value: &Value) -> cel::Value {
    match value {
        Value::Bool(flag) => cel::Value::Bool(*flag),
        Value::Number(number) => {
            number.as_i64().map_or_else(|| cel::Value::Float(number.as_f64().expect("a number")), cel::Value::Int)
        }
        Value::String(text) => cel::Value::String(text.clone().into()),
        other => panic!("not a scalar: {other}"),
    }
}

/// [`RULE`] through the `cel` crate, as an engine built on it would run it per event: one root context, per event
/// a child scope holding the fields the rule reads, then the program.
pub fn cel_crate_rule(fields: &Map<String, Value>) -> impl FnMut() + '_ {
    let program = cel::Program::compile(RULE).expect("the cel crate compiles the rule");
    let root = cel::Context::default();
    move || {
        let mut scope = root.new_inner_scope();
        for name in RULE_FIELDS {
            scope.add_variable_from_value(name, cel_value(&fields[name]));
        }
        assert_eq!(black_box(program.execute(&scope)), Ok(cel::Value::Bool(true)));
    }
}
