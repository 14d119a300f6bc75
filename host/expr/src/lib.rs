//! Rule expressions: CEL compiled and type-checked against an event type's schema, then evaluated against
//! parsed events. The CEL environment itself (functions, macros, extensions, limits) is `flowhost-cel`'s, the
//! one the bundled `condition` plugin also uses; this crate adds the schema's typing. Only these two crates
//! touch the CEL implementation (`cel-core`, see shared/DEPENDENCIES.md).
//!
//! Checks beyond the CEL checker:
//! - the result must be `bool` ("non-boolean result type");
//! - `==` / `!=` between two different concrete scalar types (`game == 1` with `game: string`) is a type
//!   mismatch, although CEL's checker widens equality to `dyn` and would let it through to always be false.
//!
//! Without a schema an expression is only parsed; its fields are then read dynamically from the event.
//! [`Expression::compile_fields`] checks against a list of [`FieldKind`]s instead, where a field may be
//! [`FieldKind::Dyn`] (a value whose shape is known only at run time, such as a v2 flow's lookup answer): the
//! checker lets any use of it through and the evaluation reads it dynamically.

mod plan;

use std::sync::Arc;

use flowhost_cel::cel_core::{Activation, Ast, BinaryOp, CelType, Expr, Value};
use flowhost_cel::Runnable;
use flowhost_core::model::{EventSchema, FieldType};
use serde_json::{Map, Value as Json};

/// A compiled rule expression, ready to evaluate many times.
pub struct Expression {
    runnable: Runnable,
    /// The fast path, when the expression is in its subset ([`plan`]); `runnable` answers when it declines.
    plan: Option<plan::Plan>,
    /// Declared field types; `None` when compiled without a schema (fields read dynamically). A short list
    /// scanned linearly: cheaper than hashing the name for the handful of fields a schema declares.
    types: Option<Arc<[DeclaredField]>>,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expression").field("typed", &self.types.is_some()).finish()
    }
}

/// A declared field's name and type (`None`: dynamic).
type DeclaredField = (Box<str>, Option<FieldType>);

/// The type of a field an expression may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// One of the event schema types.
    Typed(FieldType),
    /// Known only at run time: any use type-checks, the value is read as it comes.
    Dyn,
}

/// Why an evaluation produced no boolean (a field missing from the event, a division by zero, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expression evaluation failed: {0}")]
pub struct EvalError(pub String);

fn cel_type(kind: FieldType) -> CelType {
    match kind {
        FieldType::Int => CelType::Int,
        FieldType::Double => CelType::Double,
        FieldType::String => CelType::String,
        FieldType::Bool => CelType::Bool,
    }
}

impl Expression {
    /// Parses and type-checks `source` against `schema` (or only parses it when there is none).
    /// Errors are human-readable messages, one per problem.
    pub fn compile(source: &str, schema: Option<&EventSchema>) -> Result<Expression, Vec<String>> {
        match schema {
            Some(schema) => {
                let fields: Vec<(String, FieldKind)> =
                    schema.fields.iter().map(|f| (f.name.clone(), FieldKind::Typed(f.kind))).collect();
                Expression::compile_fields(source, &fields, &schema.event_type)
            }
            None => Expression::compile_declared(source, None, ""),
        }
    }

    /// Parses and type-checks `source` against `fields`; `origin` names where the fields come from in messages
    /// ("unknown field 'x': not declared in the schema of event type '<origin>'").
    pub fn compile_fields(
        source: &str,
        fields: &[(String, FieldKind)],
        origin: &str,
    ) -> Result<Expression, Vec<String>> {
        Expression::compile_declared(source, Some(fields), origin)
    }

    fn compile_declared(
        source: &str,
        fields: Option<&[(String, FieldKind)]>,
        origin: &str,
    ) -> Result<Expression, Vec<String>> {
        let mut env = flowhost_cel::environment();
        let types = fields.map(|fields| {
            for (name, kind) in fields {
                env.add_variable(name.clone(), cel_kind(*kind));
            }
            fields
                .iter()
                .map(|(name, kind)| {
                    let typed = match kind {
                        FieldKind::Typed(t) => Some(*t),
                        FieldKind::Dyn => None,
                    };
                    (Box::from(name.as_str()), typed)
                })
                .collect::<Arc<[_]>>()
        });
        let mut plan = None;
        if let Some(types) = &types {
            let ast = flowhost_cel::compile(&env, source).map_err(|problem| problem.messages(origin))?;
            let mut errors = Vec::new();
            check_strict_equality(&ast, &mut errors);
            match ast.result_type() {
                Some(CelType::Bool) | Some(CelType::Dyn) | None => {}
                Some(other) => errors.push(format!("expression must return bool, but its result type is {other}")),
            }
            if !errors.is_empty() {
                return Err(errors);
            }
            plan = plan::Plan::build(&ast.expr().node, types);
        }
        let runnable = Runnable::new(&env, source).map_err(|problem| problem.messages(origin))?;
        Ok(Expression { runnable, plan, types })
    }

    /// Evaluates against an event's fields. A non-boolean result is an error.
    pub fn evaluate(&self, fields: &Map<String, Json>) -> Result<bool, EvalError> {
        if let Some(Ok(answer)) = self.plan.as_ref().map(|plan| plan.evaluate(fields)) {
            return Ok(answer);
        }
        self.evaluate_through_cel_core(fields)
    }

    /// The evaluation by cel-core's interpreter, the fast path aside.
    fn evaluate_through_cel_core(&self, fields: &Map<String, Json>) -> Result<bool, EvalError> {
        let nested_loops = self.runnable.nested_loops;
        let activation = EventActivation { fields, types: self.types.as_deref(), nested_loops };
        self.runnable.evaluate(&activation).map_err(EvalError)
    }
}

/// Problems with `source` against `schema`; empty when it compiles.
pub fn validate(source: &str, schema: Option<&EventSchema>) -> Vec<String> {
    match Expression::compile(source, schema) {
        Ok(_) => Vec::new(),
        Err(errors) => errors,
    }
}

/// Problems with `source` against `fields` (see [`Expression::compile_fields`]); empty when it compiles.
pub fn validate_fields(source: &str, fields: &[(String, FieldKind)], origin: &str) -> Vec<String> {
    match Expression::compile_fields(source, fields, origin) {
        Ok(_) => Vec::new(),
        Err(errors) => errors,
    }
}

fn cel_kind(kind: FieldKind) -> CelType {
    match kind {
        FieldKind::Typed(t) => cel_type(t),
        FieldKind::Dyn => CelType::Dyn,
    }
}

fn is_scalar(t: &CelType) -> bool {
    matches!(t, CelType::Bool | CelType::Int | CelType::UInt | CelType::Double | CelType::String | CelType::Bytes)
}

fn is_numeric(t: &CelType) -> bool {
    matches!(t, CelType::Int | CelType::UInt | CelType::Double)
}

/// Rejects `==`/`!=` between two different scalar types (numbers compare with each other, as CEL allows).
fn check_strict_equality(ast: &Ast, errors: &mut Vec<String>) {
    let Some(info) = ast.type_info() else { return };
    let mut stack = vec![ast.expr()];
    while let Some(expr) = stack.pop() {
        if let Expr::Binary { op: op @ (BinaryOp::Eq | BinaryOp::Ne), left, right } = &expr.node {
            if let (Some(l), Some(r)) = (info.get_type(left.id), info.get_type(right.id)) {
                if is_scalar(l) && is_scalar(r) && l != r && !(is_numeric(l) && is_numeric(r)) {
                    let symbol = if matches!(op, BinaryOp::Eq) { "==" } else { "!=" };
                    errors.push(format!("type mismatch: cannot compare {l} {symbol} {r}"));
                }
            }
        }
        flowhost_cel::children(expr, &mut |child| stack.push(child));
    }
}

/// Resolves variables lazily from the event's JSON fields, converting only the ones the expression reads.
struct EventActivation<'a> {
    fields: &'a Map<String, Json>,
    types: Option<&'a [DeclaredField]>,
    nested_loops: bool,
}

impl Activation for EventActivation<'_> {
    fn resolve(&self, name: &str) -> Option<Value> {
        match self.types {
            Some(types) => {
                let kind = types.iter().find(|(field, _)| &**field == name)?.1;
                let json = field(self.fields, name)?;
                match kind {
                    Some(kind) => typed_value(json, kind),
                    None => Some(flowhost_cel::read_json(json, self.nested_loops)),
                }
            }
            None => Some(flowhost_cel::read_json(field(self.fields, name)?, self.nested_loops)),
        }
    }
}

/// Events with at most this many fields are searched in order instead of through the map's hash.
///
/// Measured with the `cel` bench's rule (2 cores, 2026-11-30): over its 8-field event, 57-61 ns per evaluation
/// searched against 73-77 ns hashed; over 16 fields whose other keys have the lengths of the four read and come
/// before them, 83-86 ns against 73-77. Twelve keeps the search ahead for the events rules usually see.
const SEARCHED_FIELDS: usize = 12;

/// The value of the field `name` in an event's `fields`.
///
/// The product's events hash every key with SipHash (serde_json's `preserve_order`, which `bson` turns on, makes
/// the map an `IndexMap`). Comparing a few keys, by length first, costs less than hashing one.
fn field<'a>(fields: &'a Map<String, Json>, name: &str) -> Option<&'a Json> {
    if fields.len() <= SEARCHED_FIELDS {
        fields.iter().find_map(|(key, value)| (key == name).then_some(value))
    } else {
        fields.get(name)
    }
}

fn typed_value(json: &Json, kind: FieldType) -> Option<Value> {
    match (kind, json) {
        (FieldType::Int, Json::Number(n)) => n.as_i64().map(Value::Int),
        (FieldType::Double, Json::Number(n)) => n.as_f64().map(Value::Double),
        (FieldType::String, Json::String(s)) => Some(Value::String(Arc::from(s.as_str()))),
        (FieldType::Bool, Json::Bool(b)) => Some(Value::Bool(*b)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> EventSchema {
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

    fn fields(value: Json) -> Map<String, Json> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_field_is_found_as_the_map_finds_it_searched_or_hashed() {
        for size in 0..=SEARCHED_FIELDS + 4 {
            // Keys of one length, so the search compares bytes too.
            let fields: Map<String, Json> = (0..size).map(|i| (format!("f{i:02}"), json!(i))).collect();
            for i in 0..size + 2 {
                let name = format!("f{i:02}");
                assert_eq!(field(&fields, &name), fields.get(&name), "{name} among {size}");
            }
            assert_eq!(field(&fields, "f0"), None, "a prefix is another key");
        }
    }

    #[test]
    fn evaluates_a_typed_rule() {
        let expr =
            Expression::compile("amount > 100.0 && count >= 2 && game.startsWith('slot') && !vip", Some(&schema()))
                .unwrap();
        let event = fields(json!({"amount": 150.0, "count": 3, "game": "slots-1", "vip": false}));
        assert_eq!(expr.evaluate(&event), Ok(true));
        let event = fields(json!({"amount": 50, "count": 3, "game": "slots-1", "vip": false}));
        assert_eq!(expr.evaluate(&event), Ok(false), "an integer JSON number reads as a double field");
    }

    #[test]
    fn missing_or_mistyped_fields_fail_the_evaluation() {
        let expr = Expression::compile("count > 1", Some(&schema())).unwrap();
        assert!(expr.evaluate(&fields(json!({}))).is_err());
        assert!(expr.evaluate(&fields(json!({"count": "3"}))).is_err());
    }

    #[test]
    fn validation_messages() {
        let cases: &[(&str, &str)] = &[
            ("amount >", "syntax error"),
            ("balance > 1.0", "unknown field 'balance': not declared in the schema of event type 'deposit'"),
            ("amount > 100", "write double literals with a decimal point"),
            ("game == 1", "type mismatch: cannot compare string == int"),
            ("vip != 'yes'", "type mismatch: cannot compare bool != string"),
            ("count + 1", "expression must return bool, but its result type is int"),
            ("game", "expression must return bool, but its result type is string"),
            ("", "expression is empty"),
        ];
        for (source, expected) in cases {
            let errors = validate(source, Some(&schema()));
            assert!(errors.iter().any(|e| e.contains(expected)), "{source:?}: {errors:?} lacks {expected:?}");
        }
        for ok in ["count == 2.0", "amount > 1.0 || vip", "game in ['a', 'b']", "size(game) > 2"] {
            assert_eq!(validate(ok, Some(&schema())), Vec::<String>::new(), "{ok}");
        }
    }

    #[test]
    fn dynamic_fields_check_and_read_as_they_come() {
        let fields =
            vec![("amount".to_owned(), FieldKind::Typed(FieldType::Double)), ("profile".to_owned(), FieldKind::Dyn)];
        let expr = Expression::compile_fields("amount > 1.0 && profile.level >= 3", &fields, "deposit").unwrap();
        assert_eq!(expr.evaluate(&self::fields(json!({"amount": 2.0, "profile": {"level": 4}}))), Ok(true));
        assert_eq!(expr.evaluate(&self::fields(json!({"amount": 2.0, "profile": {"level": 1}}))), Ok(false));
        let errors = validate_fields("balance > 1.0", &fields, "deposit after node map");
        assert_eq!(
            errors,
            vec!["unknown field 'balance': not declared in the schema of event type 'deposit after node map'"]
        );
        assert!(validate_fields("amount > 1", &fields, "x")[0].contains("decimal point"));
    }

    #[test]
    fn the_extension_libraries_check_against_the_schema() {
        let expr = Expression::compile(
            "game.lowerAscii().startsWith('slot') && math.greatest(count, 2) >= 3 && sets.contains(['a', 'b'], [game])",
            Some(&schema()),
        )
        .unwrap();
        assert_eq!(expr.evaluate(&fields(json!({"game": "b", "count": 3}))), Ok(false));
        assert_eq!(expr.evaluate(&fields(json!({"game": "SLOTs", "count": 3}))), Ok(false));
        let expr =
            Expression::compile("game.lowerAscii() in ['slots', 'poker'] && count > 1", Some(&schema())).unwrap();
        assert_eq!(expr.evaluate(&fields(json!({"game": "Poker", "count": 2}))), Ok(true));
        for misuse in ["game.lowerAscii(1) == 'a'", "math.greatest(game, 1) > 0", "count.upperAscii() == 'A'"] {
            let errors = validate(misuse, Some(&schema()));
            assert!(errors.iter().any(|e| e.starts_with("type mismatch")), "{misuse}: {errors:?}");
        }
        let deep = format!("{}vip{}", "(".repeat(40), ")".repeat(40));
        assert!(validate(&deep, Some(&schema()))[0].contains("nests"), "the limits apply");
    }

    #[test]
    fn without_a_schema_fields_are_dynamic() {
        let expr = Expression::compile("level >= 3 && country == 'DE'", None).unwrap();
        assert_eq!(expr.evaluate(&fields(json!({"level": 4, "country": "DE"}))), Ok(true));
        assert!(validate("level >=", None)[0].starts_with("syntax error"));
    }
}
