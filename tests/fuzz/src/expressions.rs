//! `cel_source`: an expression as a rule or a condition is saved and then run. The source is compiled the three
//! ways the product compiles (against an event schema as v1 rules are, without one as an untyped v2 condition,
//! and against typed and dynamic fields as a v2 condition after a lookup), each within `flowhost-cel`'s limits,
//! and whatever compiles is evaluated against an event. All of it on a thread with a 2 MiB stack, a tokio
//! worker's: the limits promise that any expression fits there (docs/admin-api.md, "CEL: the expression language").

use flowhost_core::model::{EventSchema, FieldType};
use flowhost_expr::{Expression, FieldKind};
use serde_json::{json, Map, Value};

/// A tokio worker thread's stack.
const WORKER_STACK_BYTES: usize = 2 << 20;

pub fn cel_source(data: &[u8]) {
    let Ok(source) = std::str::from_utf8(data) else { return };
    let source = source.to_owned();
    let worker = std::thread::Builder::new().stack_size(WORKER_STACK_BYTES).spawn(move || compile_and_run(&source));
    if let Err(panic) = worker.expect("a thread starts").join() {
        std::panic::resume_unwind(panic);
    }
}

fn compile_and_run(source: &str) {
    let schema = EventSchema::new(
        "deposit",
        &[
            ("amount", FieldType::Double),
            ("count", FieldType::Int),
            ("game", FieldType::String),
            ("vip", FieldType::Bool),
        ],
    );
    let fields = [
        ("amount".to_owned(), FieldKind::Typed(FieldType::Double)),
        ("game".to_owned(), FieldKind::Typed(FieldType::String)),
        ("profile".to_owned(), FieldKind::Dyn),
        ("tags".to_owned(), FieldKind::Dyn),
    ];
    let typed = Expression::compile(source, Some(&schema));
    let untyped = Expression::compile(source, None);
    let mixed = Expression::compile_fields(source, &fields, "deposit after node lookup");
    // Type checking only refuses more: what checks against a schema also compiles untyped.
    assert!(typed.is_err() || untyped.is_ok(), "{source:?} checks against the schema but not untyped: {untyped:?}");
    let event = event();
    for expression in [typed, untyped, mixed].into_iter().flatten() {
        // An error (a missing field, a division by zero) is an outcome; only a panic or a hang is a bug.
        let _ = expression.evaluate(&event);
    }
}

/// An event with every declared field and a little nesting.
fn event() -> Map<String, Value> {
    let event = json!({"amount": 150.5, "count": 3, "game": "Slots-1", "vip": true, "tags": ["new", "vip"],
                       "profile": {"level": 4, "country": "DE", "ip": "10.1.2.3"}});
    event.as_object().cloned().unwrap_or_default()
}
