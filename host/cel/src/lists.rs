//! The list and set functions of cel-go's `ext.Lists()` and `ext.Sets()` libraries that `cel-core` lacks,
//! declared for the type checker and implemented for the evaluator:
//!
//! - `sets.contains(list, sublist)`, `sets.equivalent(list, list)`, `sets.intersects(list, list)`;
//! - `lists.range(n)`: `[0, 1, ..., n-1]`;
//! - `list.distinct()`, `list.flatten()`, `list.flatten(depth)`, `list.reverse()`, `list.slice(start, end)`,
//!   `list.sort()`, `list.first()` and `list.last()` (optionals).
//!
//! Elements compare with CEL's equality, as the `in` operator does: `cel-core`'s `PartialEq` for `Value`, which
//! holds `1 == 1u == 1.0` inside lists and maps too.

use std::cmp::Ordering;
use std::sync::Arc;

use cel_core::types::{CelType, FunctionDecl, OverloadDecl};
use cel_core::{EvalError, OptionalValue, Value};

fn t() -> CelType {
    CelType::TypeParam(Arc::from("T"))
}

fn list_of(element: CelType) -> CelType {
    CelType::list(element)
}

fn generic(overload: OverloadDecl) -> OverloadDecl {
    overload.with_type_params(vec!["T".to_owned()])
}

fn error(message: impl Into<String>) -> Value {
    Value::error(EvalError::invalid_argument(message.into()))
}

fn list_arg(value: &Value) -> Result<&Arc<[Value]>, Value> {
    match value {
        Value::List(items) => Ok(items),
        other => Err(Value::error(EvalError::type_mismatch("list", &other.type_value().name))),
    }
}

fn int_arg(value: &Value) -> Result<i64, Value> {
    match value {
        Value::Int(i) => Ok(*i),
        other => Err(Value::error(EvalError::type_mismatch("int", &other.type_value().name))),
    }
}

fn two_lists(args: &[Value], apply: impl Fn(&[Value], &[Value]) -> bool) -> Value {
    match (args.first().map(list_arg), args.get(1).map(list_arg)) {
        (Some(Ok(a)), Some(Ok(b))) => Value::Bool(apply(a, b)),
        (Some(Err(e)), _) | (_, Some(Err(e))) => e,
        _ => error("two lists expected"),
    }
}

/// The order `sort()` uses: within one comparable type; anything else is an error.
fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Some(x.cmp(y)),
        (Value::Double(x), Value::Double(y)) => x.partial_cmp(y),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Bytes(x), Value::Bytes(y)) => Some(x.cmp(y)),
        (Value::Timestamp(x), Value::Timestamp(y)) => Some((x.seconds, x.nanos).cmp(&(y.seconds, y.nanos))),
        (Value::Duration(x), Value::Duration(y)) => Some((x.seconds, x.nanos).cmp(&(y.seconds, y.nanos))),
        _ => None,
    }
}

fn sort(items: &[Value]) -> Value {
    let mut sorted = items.to_vec();
    let mut failed = false;
    sorted.sort_by(|a, b| {
        order(a, b).unwrap_or_else(|| {
            failed = true;
            Ordering::Equal
        })
    });
    if failed {
        return error("sort: the list's elements are not all of one comparable type");
    }
    Value::from(sorted)
}

fn flatten(items: &[Value], depth: i64, out: &mut Vec<Value>) {
    for item in items {
        match item {
            Value::List(inner) if depth > 0 => flatten(inner, depth - 1, out),
            other => out.push(other.clone()),
        }
    }
}

/// Most elements `lists.range` makes: with two nested comprehensions over ranges, at most a million steps.
pub const MAX_RANGE: i64 = 1_000;

fn member(name: &str, id: &str, params: Vec<CelType>, result: CelType, body: fn(&[Value]) -> Value) -> FunctionDecl {
    FunctionDecl::new(name).with_overload(generic(OverloadDecl::method(id, params, result)).with_impl(body))
}

fn with_list(args: &[Value], body: impl Fn(&Arc<[Value]>) -> Value) -> Value {
    match args.first().map(list_arg) {
        Some(Ok(items)) => body(items),
        Some(Err(e)) => e,
        None => error("a list expected"),
    }
}

/// The declarations (with implementations) of the functions above.
pub fn extension() -> Vec<FunctionDecl> {
    let sets = |name: &str, apply: fn(&[Value], &[Value]) -> bool| {
        FunctionDecl::new(name).with_overload(
            generic(OverloadDecl::function(
                format!("{}_list_list", name.replace('.', "_")),
                vec![list_of(t()), list_of(t())],
                CelType::Bool,
            ))
            .with_impl(move |args| two_lists(args, apply)),
        )
    };
    vec![
        sets("sets.contains", |a, b| b.iter().all(|v| a.contains(v))),
        sets("sets.equivalent", |a, b| a.iter().all(|v| b.contains(v)) && b.iter().all(|v| a.contains(v))),
        sets("sets.intersects", |a, b| a.iter().any(|v| b.contains(v))),
        FunctionDecl::new("lists.range").with_overload(
            OverloadDecl::function("lists_range_int", vec![CelType::Int], list_of(CelType::Int)).with_impl(|args| {
                match args.first().map(int_arg) {
                    Some(Ok(n)) if (0..=MAX_RANGE).contains(&n) => {
                        Value::from((0..n).map(Value::Int).collect::<Vec<_>>())
                    }
                    Some(Ok(n)) => error(format!("lists.range({n}): the count must be between 0 and {MAX_RANGE}")),
                    Some(Err(e)) => e,
                    None => error("lists.range takes a count"),
                }
            }),
        ),
        member("distinct", "list_distinct", vec![list_of(t())], list_of(t()), |args| {
            with_list(args, |items| {
                let mut kept: Vec<Value> = Vec::new();
                for item in items.iter() {
                    if !kept.contains(item) {
                        kept.push(item.clone());
                    }
                }
                Value::from(kept)
            })
        }),
        member("reverse", "list_reverse", vec![list_of(t())], list_of(t()), |args| {
            with_list(args, |items| Value::from(items.iter().rev().cloned().collect::<Vec<_>>()))
        }),
        member("sort", "list_sort", vec![list_of(t())], list_of(t()), |args| with_list(args, |items| sort(items))),
        member("first", "list_first", vec![list_of(t())], CelType::optional(t()), |args| {
            with_list(args, |items| {
                Value::Optional(items.first().cloned().map_or(OptionalValue::None, OptionalValue::some))
            })
        }),
        member("last", "list_last", vec![list_of(t())], CelType::optional(t()), |args| {
            with_list(args, |items| {
                Value::Optional(items.last().cloned().map_or(OptionalValue::None, OptionalValue::some))
            })
        }),
        FunctionDecl::new("flatten")
            .with_overload(
                OverloadDecl::method("list_flatten", vec![list_of(CelType::Dyn)], list_of(CelType::Dyn))
                    .with_impl(|args| with_list(args, |items| flattened(items, 1))),
            )
            .with_overload(
                OverloadDecl::method(
                    "list_flatten_int",
                    vec![list_of(CelType::Dyn), CelType::Int],
                    list_of(CelType::Dyn),
                )
                .with_impl(|args| match args.get(1).map(int_arg) {
                    Some(Ok(depth)) if depth >= 0 => with_list(args, |items| flattened(items, depth)),
                    Some(Ok(depth)) => error(format!("flatten({depth}): the depth must not be negative")),
                    Some(Err(e)) => e,
                    None => error("flatten takes a depth"),
                }),
            ),
        member("slice", "list_slice_int_int", vec![list_of(t()), CelType::Int, CelType::Int], list_of(t()), |args| {
            let (start, end) = match (args.get(1).map(int_arg), args.get(2).map(int_arg)) {
                (Some(Ok(start)), Some(Ok(end))) => (start, end),
                (Some(Err(e)), _) | (_, Some(Err(e))) => return e,
                _ => return error("slice takes a start and an end"),
            };
            with_list(args, |items| {
                let len = items.len() as i64;
                if start < 0 || end < start || end > len {
                    return error(format!("slice({start}, {end}) is outside a list of {len} elements"));
                }
                Value::from(items[start as usize..end as usize].to_vec())
            })
        }),
    ]
}

fn flattened(items: &[Value], depth: i64) -> Value {
    let mut out = Vec::new();
    flatten(items, depth, &mut out);
    Value::from(out)
}
