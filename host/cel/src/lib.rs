//! Flowhost's one CEL environment. v1 rules and v2 conditions (`flowhost-expr`), draft validation, Studio's
//! completion list (`catalog`) and the bundled `condition` plugin (a wasm guest) all start from
//! [`environment`] and go through [`parse`] or [`compile`], so an expression that saves also runs, the same way
//! natively and in wasm.
//!
//! The environment:
//! - CEL's standard library and macros, the two-variable comprehensions (`all(i, v, ...)`, `exists`,
//!   `existsOne`, `transformList`, `transformMap`) and `cel.bind`;
//! - `cel-core`'s extension libraries: strings (`format`, `lowerAscii`, `upperAscii`, `replace`, `split`,
//!   `join`, `substring`, `trim`, `indexOf`, `lastIndexOf`, `charAt`, `quote`, `reverse`), math
//!   (`math.greatest`, `math.least`, `math.abs`, `math.sign`, rounding, `math.isNaN`/`isInf`/`isFinite`, bit
//!   operations), encoders (`base64.encode`, `base64.decode`) and optionals (`optional.of`, `?.`, `[?`,
//!   `orValue`, `or`, `hasValue`, `value`, `optMap`, `optFlatMap`);
//! - lists and sets (`lists.rs`): `sets.contains`, `sets.equivalent`, `sets.intersects`, `lists.range`,
//!   `distinct`, `flatten`, `reverse`, `slice`, `sort`, `first`, `last`;
//! - the network extension (`net.rs`): `ip()`, `cidr()`, `isIP`, `isCIDR`, `ip.isCanonical` and the methods of
//!   `net.IP` and `net.CIDR` (`family`, `isLoopback`, `containsIP`, `containsCIDR`, `masked`, ...);
//! - protobuf's well-known types by name (`wkt.rs`): `google.protobuf.Int64Value{value: 1}`,
//!   `google.protobuf.Timestamp`, `google.protobuf.Value{...}`, built straight into CEL values.
//!
//! Limits ([`check_source`], [`check_depth`]): the parser, checker and evaluator recurse over the expression, so
//! its size and nesting are bounded before they see it; a deeper expression is refused with a message instead
//! of overflowing a thread's stack.

mod lists;
pub mod net;
mod wkt;

use std::sync::{Arc, OnceLock};

pub use cel_core;
use cel_core::types::CelType;
use cel_core::{Ast, CheckErrorKind, CompileError, Env, Expr, Program, SpannedExpr, Value};
use serde::Serialize;
use serde_json::Value as Json;

pub use lists::MAX_RANGE;
pub use wkt::WellKnownTypes;

/// Longest expression source, in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 16 * 1024;
/// Deepest nesting of brackets, prefix operators and conditionals in the source (the parser's recursion).
pub const MAX_NESTING: usize = 32;
/// Deepest expression tree (the checker's and evaluator's recursion), after macros are expanded.
pub const MAX_DEPTH: usize = 64;
/// Deepest nesting of comprehensions, one inside another's body (`a.all(x, b.exists(y, ...))` is 2).
pub const MAX_COMPREHENSION_NESTING: usize = 2;

/// The environment every expression starts from; callers add their variables.
pub fn environment() -> Env {
    static BASE: OnceLock<Env> = OnceLock::new();
    BASE.get_or_init(|| {
        Env::with_standard_library()
            .with_all_extensions()
            .with_extension(lists::extension())
            .with_extension(net::extension())
            .with_proto_registry(Arc::new(WellKnownTypes))
    })
    .clone()
}

/// Why an expression could not be compiled.
#[derive(Debug)]
pub enum Problem {
    /// Nothing but white space.
    Empty,
    /// Over one of the limits above.
    Limit(String),
    /// The parser's or the type checker's errors.
    Compile(CompileError),
    /// The checked tree could not become a program.
    Program(String),
}

impl Problem {
    /// One readable message per problem. `origin` names where the declared fields come from, for an unknown
    /// one ("unknown field 'x': not declared in the schema of event type '<origin>'").
    pub fn messages(self, origin: &str) -> Vec<String> {
        let error = match self {
            Problem::Empty | Problem::Limit(_) | Problem::Program(_) => return vec![self.to_string()],
            Problem::Compile(error) => error,
        };
        match error {
            CompileError::Parse(errors) => errors.iter().map(|e| format!("syntax error: {e}")).collect(),
            CompileError::Check(errors) => errors
                .iter()
                .map(|e| match &e.kind {
                    CheckErrorKind::UndeclaredReference { name, .. } => {
                        format!("unknown field '{name}': not declared in the schema of event type '{origin}'")
                    }
                    CheckErrorKind::NoMatchingOverload { arg_types, .. }
                        if arg_types.contains(&CelType::Int) && arg_types.contains(&CelType::Double) =>
                    {
                        format!("type mismatch: {} (write double literals with a decimal point, e.g. 100.0)", e.kind)
                    }
                    kind => format!("type mismatch: {kind}"),
                })
                .collect(),
            CompileError::NoAst => vec!["syntax error: nothing to evaluate".to_owned()],
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Empty => f.write_str("expression is empty"),
            Problem::Limit(message) | Problem::Program(message) => f.write_str(message),
            Problem::Compile(error) => error.fmt(f),
        }
    }
}

/// Parses and type-checks `source` in `env`, within the limits.
pub fn compile(env: &Env, source: &str) -> Result<Ast, Problem> {
    check_source(source)?;
    let ast = env.compile(source).map_err(Problem::Compile)?;
    check_depth(ast.expr())?;
    Ok(ast)
}

/// Parses `source` without checking its types (fields read as they come), within the limits.
pub fn parse(env: &Env, source: &str) -> Result<Ast, Problem> {
    check_source(source)?;
    let ast = env.parse_only(source).map_err(Problem::Compile)?;
    check_depth(ast.expr())?;
    Ok(ast)
}

/// An expression ready to evaluate many times: its program, built from the tree as parsed (fields read as they
/// come), and whether it nests comprehensions (then the lists it reads are bounded, see [`read_json`]).
pub struct Runnable {
    pub program: Program,
    pub nested_loops: bool,
}

impl Runnable {
    /// Parses `source` without checking its types and builds its program, within the limits. A caller that
    /// type-checks first ([`compile`]) still evaluates this tree: the checked one makes the interpreter consult
    /// the checker's reference map at every node, which plain variables never need (host/expr's benches/cel.rs).
    pub fn new(env: &Env, source: &str) -> Result<Runnable, Problem> {
        check_source(source)?;
        let ast = env.parse_only(source).map_err(Problem::Compile)?;
        let comprehensions = check_depth(ast.expr())?;
        let program = env.program(&ast).map_err(|error| Problem::Program(error.to_string()))?;
        Ok(Runnable { program, nested_loops: comprehensions >= 2 })
    }

    /// Evaluates to a boolean; anything else (an error, another type) is the reason it did not.
    pub fn evaluate(&self, activation: &dyn cel_core::Activation) -> Result<bool, String> {
        match self.program.eval(activation) {
            Value::Bool(b) => Ok(b),
            Value::Error(error) => Err(error.to_string()),
            other => Err(format!("result is not a bool: {other}")),
        }
    }
}

/// Refuses an empty source, one longer than [`MAX_EXPRESSION_BYTES`] or nested deeper than [`MAX_NESTING`]
/// (brackets, runs of prefix operators, conditionals), counted outside string literals.
pub fn check_source(source: &str) -> Result<(), Problem> {
    if source.trim().is_empty() {
        return Err(Problem::Empty);
    }
    if source.len() > MAX_EXPRESSION_BYTES {
        return Err(Problem::Limit(format!(
            "the expression is {} bytes long; at most {MAX_EXPRESSION_BYTES} are allowed",
            source.len()
        )));
    }
    if nesting(source) > MAX_NESTING {
        return Err(Problem::Limit(format!(
            "the expression nests brackets, prefix operators or conditionals more than {MAX_NESTING} deep"
        )));
    }
    Ok(())
}

/// How deep `source` nests, lexically: open brackets, plus the run of prefix operators (`!`, `-`) and the
/// conditionals (`?`) in it. String literals do not count.
fn nesting(source: &str) -> usize {
    let bytes = source.as_bytes();
    let (mut depth, mut deepest, mut prefix_run, mut conditionals) = (0usize, 0usize, 0usize, 0usize);
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            quote @ (b'"' | b'\'') => {
                let triple = bytes[at..].starts_with(&[quote; 3]);
                let raw = at > 0 && matches!(bytes[at - 1], b'r' | b'R');
                at += if triple { 3 } else { 1 };
                while at < bytes.len() {
                    if bytes[at] == b'\\' && !raw {
                        at += 2;
                        continue;
                    }
                    if triple && bytes[at..].starts_with(&[quote; 3]) {
                        at += 2;
                        break;
                    }
                    if !triple && bytes[at] == quote {
                        break;
                    }
                    at += 1;
                }
                prefix_run = 0;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                prefix_run = 0;
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                prefix_run = 0;
            }
            b'!' if bytes.get(at + 1) != Some(&b'=') => prefix_run += 1,
            b'-' => prefix_run += 1,
            // `.?` and `[?` select optionally; any other `?` opens a conditional.
            b'?' if !matches!(previous_token(bytes, at), Some(b'.' | b'[')) => conditionals += 1,
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => prefix_run = 0,
        }
        deepest = deepest.max(depth + prefix_run + conditionals);
        at += 1;
    }
    deepest
}

/// The last byte before `at` that is not white space.
fn previous_token(bytes: &[u8], at: usize) -> Option<u8> {
    bytes[..at].iter().rev().copied().find(|byte| !byte.is_ascii_whitespace())
}

/// Refuses an expression tree deeper than [`MAX_DEPTH`], or comprehensions (`all`, `exists`, `map`, `filter`,
/// ...) nested more than [`MAX_COMPREHENSION_NESTING`] deep: each level multiplies the work by the size of a list,
/// and the evaluator has no budget of its own. Walks with its own stack, so any tree the parser built can be
/// measured.
pub fn check_depth(root: &SpannedExpr) -> Result<usize, Problem> {
    let mut deepest_loop = 0;
    let mut stack = vec![(root, 1usize, 0usize)];
    while let Some((expr, depth, loops)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(Problem::Limit(format!(
                "the expression is nested more than {MAX_DEPTH} levels deep (a long chain of `+`, `&&` or `||` \
                 counts one level per operator: a list and `in` say the same flatter)"
            )));
        }
        if let Expr::Comprehension(c) = &expr.node {
            if loops + 1 > MAX_COMPREHENSION_NESTING {
                return Err(Problem::Limit(format!(
                    "comprehensions (all, exists, map, filter, ...) are nested more than {MAX_COMPREHENSION_NESTING} \
                     deep"
                )));
            }
            deepest_loop = deepest_loop.max(loops + 1);
            // The range and the initial value are evaluated once; the rest once per element.
            stack.extend([(&*c.iter_range, depth + 1, loops), (&*c.accu_init, depth + 1, loops)]);
            stack.extend([&c.loop_condition, &c.loop_step, &c.result].map(|part| (&**part, depth + 1, loops + 1)));
            continue;
        }
        children(expr, &mut |child| stack.push((child, depth + 1, loops)));
    }
    Ok(deepest_loop)
}

/// Longest list an expression that nests one comprehension in another's body (its work the product of two
/// lists' sizes) may read from an event: a million steps at most.
pub const MAX_LIST_UNDER_NESTED_LOOPS: usize = 1_000;

/// A field of an event as an expression reads it: [`from_json`], or, for an expression with
/// [`Runnable::nested_loops`], an error when the value holds a list longer than [`MAX_LIST_UNDER_NESTED_LOOPS`] (the
/// evaluator has no budget of its own; this keeps one event from holding a thread for minutes).
pub fn read_json(json: &Json, nested_loops: bool) -> Value {
    if nested_loops && longest_list(json) > MAX_LIST_UNDER_NESTED_LOOPS {
        return Value::error(cel_core::EvalError::invalid_argument(format!(
            "a list of more than {MAX_LIST_UNDER_NESTED_LOOPS} elements under nested comprehensions"
        )));
    }
    from_json(json)
}

fn longest_list(json: &Json) -> usize {
    match json {
        Json::Array(items) => items.iter().map(longest_list).fold(items.len(), usize::max),
        Json::Object(map) => map.values().map(longest_list).max().unwrap_or(0),
        _ => 0,
    }
}

/// Calls `visit` on each direct child of `expr`.
pub fn children<'a>(expr: &'a SpannedExpr, visit: &mut dyn FnMut(&'a SpannedExpr)) {
    match &expr.node {
        Expr::Unary { expr, .. } | Expr::Member { expr, .. } | Expr::MemberTestOnly { expr, .. } => visit(expr),
        Expr::Binary { left, right, .. } => {
            visit(left);
            visit(right);
        }
        Expr::Ternary { cond, then_expr, else_expr } => {
            visit(cond);
            visit(then_expr);
            visit(else_expr);
        }
        Expr::Index { expr, index, .. } => {
            visit(expr);
            visit(index);
        }
        Expr::Call { expr, args } => {
            visit(expr);
            args.iter().for_each(&mut *visit);
        }
        Expr::List(elements) => elements.iter().for_each(|element| visit(&element.expr)),
        Expr::Map(entries) => entries.iter().for_each(|entry| {
            visit(&entry.key);
            visit(&entry.value);
        }),
        Expr::Struct { fields, .. } => fields.iter().for_each(|field| visit(&field.value)),
        Expr::Comprehension(c) => {
            for part in [&c.iter_range, &c.accu_init, &c.loop_condition, &c.loop_step, &c.result] {
                visit(part);
            }
        }
        Expr::Bind { init, body, .. } => {
            visit(init);
            visit(body);
        }
        _ => {}
    }
}

/// A JSON value as CEL reads it: an integral number is an `int`, any other number a `double`; objects are maps
/// with string keys.
pub fn from_json(json: &Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::String(Arc::from(s.as_str())),
        Json::Array(items) => Value::from(items.iter().map(from_json).collect::<Vec<_>>()),
        Json::Object(map) => Value::map(map.iter().map(|(k, v)| (k.as_str(), from_json(v)))),
    }
}

/// One entry of the environment's catalog, for an editor's completion list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogEntry {
    /// As written in an expression: `size`, `lowerAscii`, `math.greatest`.
    pub name: String,
    /// `function` (called as `name(...)`), `method` (`x.name(...)`) or `macro`.
    pub kind: &'static str,
    /// Each overload, as `(string) -> int` or `string.(string) -> bool` for a method.
    pub signatures: Vec<String>,
}

/// The macros, which the parser expands (they have no declarations to list).
const MACROS: &[(&str, &str)] = &[
    ("has", "has(e.f) -> bool"),
    ("all", "list.all(x, p) / list.all(i, x, p) / map.all(k, v, p) -> bool"),
    ("exists", "list.exists(x, p) / list.exists(i, x, p) -> bool"),
    ("existsOne", "list.existsOne(x, p) / list.existsOne(i, x, p) -> bool"),
    ("exists_one", "list.exists_one(x, p) -> bool"),
    ("map", "list.map(x, e) / list.map(x, p, e) -> list"),
    ("filter", "list.filter(x, p) -> list"),
    ("transformList", "list.transformList(i, x, e) / map.transformList(k, v, e) -> list"),
    ("transformMap", "list.transformMap(i, x, e) / map.transformMap(k, v, e) -> map"),
    ("cel.bind", "cel.bind(name, init, body)"),
    ("optMap", "optional.optMap(x, e) -> optional"),
    ("optFlatMap", "optional.optFlatMap(x, e) -> optional"),
];

/// Every function, method and macro of [`environment`], sorted by name, with its signatures.
pub fn catalog() -> Vec<CatalogEntry> {
    let env = environment();
    let mut entries: Vec<CatalogEntry> = Vec::new();
    for decl in env.functions().values() {
        // Operators (`_+_`, `@in`, `_[_]`) are syntax, not names to complete.
        if !decl.name.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
            continue;
        }
        for (kind, member) in [("function", false), ("method", true)] {
            let signatures: Vec<String> = decl
                .overloads
                .iter()
                .filter(|overload| overload.is_member == member)
                .map(|overload| {
                    let params: Vec<String> = overload.params.iter().map(CelType::display_name).collect();
                    let result = overload.result.display_name();
                    if member {
                        format!("{}.({}) -> {result}", params[0], params[1..].join(", "))
                    } else {
                        format!("({}) -> {result}", params.join(", "))
                    }
                })
                .collect();
            if !signatures.is_empty() {
                entries.push(CatalogEntry { name: decl.name.clone(), kind, signatures });
            }
        }
    }
    for (name, signature) in MACROS {
        entries.push(CatalogEntry {
            name: (*name).to_owned(),
            kind: "macro",
            signatures: vec![(*signature).to_owned()],
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name).then(a.kind.cmp(b.kind)));
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(source: &str) -> Value {
        let env = environment();
        let ast = compile(&env, source).unwrap_or_else(|problem| panic!("{source}: {problem}"));
        env.program(&ast).unwrap().eval(&cel_core::MapActivation::new())
    }

    #[test]
    fn the_extension_libraries_are_on() {
        let cases: &[(&str, Value)] = &[
            ("'%s is %d'.format(['x', 3])", Value::from("x is 3")),
            ("'AbC'.lowerAscii() + 'x'.upperAscii()", Value::from("abcX")),
            ("'a,b'.split(',').join('-')", Value::from("a-b")),
            ("math.greatest(1, 5, 3) + math.least([4, 2])", Value::Int(7)),
            ("math.bitAnd(6, 3)", Value::Int(2)),
            ("math.round(2.5)", Value::Double(3.0)),
            ("sets.contains([1, 2, 3], [3, 1])", Value::Bool(true)),
            ("sets.contains([[1], [2, 3]], [[2.0, 3u]])", Value::Bool(true)),
            ("sets.equivalent([{1: [1]}], [{1u: [1.0]}])", Value::Bool(true)),
            ("sets.intersects([[1, 2]], [[2, 1]])", Value::Bool(false)),
            ("[[1], [1.0], {1: 2}, {1u: 2.0}].distinct().size()", Value::Int(2)),
            ("lists.range(3).map(i, i * 2) == [0, 2, 4]", Value::Bool(true)),
            ("[3, 1, 2].sort()", Value::from(vec![Value::Int(1), Value::Int(2), Value::Int(3)])),
            ("optional.of(2).orValue(5) + optional.none().orValue(5)", Value::Int(7)),
            ("{'a': 1}[?'b'].orValue(0)", Value::Int(0)),
            ("base64.encode(b'hi')", Value::from("aGk=")),
            ("[10, 20].all(i, v, v == (i + 1) * 10)", Value::Bool(true)),
            ("google.protobuf.Int64Value{value: 5} == 5", Value::Bool(true)),
        ];
        for (source, expected) in cases {
            assert_eq!(&eval(source), expected, "{source}");
        }
    }

    /// The examples of docs/admin-api.md (section "CEL: the expression language") hold for its example event.
    #[test]
    fn the_documented_examples_hold() {
        let event = serde_json::json!({"game": "Slots-1", "count": 3, "amount": 150.5, "tags": ["new", "vip"],
                                       "profile": {"level": 4}});
        let mut activation = cel_core::MapActivation::new();
        for (name, value) in event.as_object().unwrap() {
            activation.insert(name.clone(), from_json(value));
        }
        let page = include_str!("../../../docs/admin-api.md");
        let section = &page[page.find("## CEL: the expression language").unwrap()..];
        let table = &section[..section.find("**Limits**").unwrap()];
        let examples: Vec<&str> = table
            .lines()
            .filter(|line| line.starts_with("| ") && !line.starts_with("| Library"))
            .filter_map(|line| line.trim_end_matches(" |").rsplit("| `").next())
            .map(|example| example.trim_end_matches('`'))
            .collect();
        assert_eq!(examples.len(), 9, "{examples:?}");
        let env = environment();
        for source in examples {
            let ast = parse(&env, source).unwrap_or_else(|problem| panic!("{source}: {problem}"));
            assert_eq!(env.program(&ast).unwrap().eval(&activation), Value::Bool(true), "{source}");
        }
    }

    #[test]
    fn misuse_is_a_type_error() {
        let env = environment();
        for source in ["'a'.lowerAscii(1)", "math.greatest('a', 1)", "lists.range('3')", "sets.contains(1, [1])"] {
            assert!(matches!(compile(&env, source), Err(Problem::Compile(_))), "{source} type-checks");
        }
    }

    #[test]
    fn limits_refuse_what_would_overflow_a_stack() {
        let env = environment();
        let too_long = format!("'{}' == ''", "a".repeat(MAX_EXPRESSION_BYTES));
        let parens = format!("{}1{}", "(".repeat(MAX_NESTING + 1), ")".repeat(MAX_NESTING + 1));
        let negations = format!("{}1 == 1", "-".repeat(MAX_NESTING + 1));
        let ternary = format!("{}true", "true ? true : ".repeat(MAX_NESTING + 1));
        let chain = vec!["1"; MAX_DEPTH + 2].join(" + ");
        let loops = "[1].all(a, [2].all(b, [3].all(c, a < b && b < c)))".to_owned();
        for source in [too_long, parens, negations, ternary, chain, loops] {
            assert!(matches!(parse(&env, &source), Err(Problem::Limit(_))), "{}", &source[..40.min(source.len())]);
        }
        // Optional selections are not conditionals.
        let optionals = (0..40).map(|i| format!("{{'a': {i}}}.?a.orValue(0) >= 0")).collect::<Vec<_>>().join(" && ");
        assert!(check_source(&optionals).is_ok());
        // Brackets inside strings do not count; a reasonable rule passes.
        let quoted = format!("'{}' != ''", "(".repeat(200));
        assert!(compile(&env, &quoted).is_ok());
        let fair = vec!["1"; MAX_DEPTH / 2].join(" + ") + " > 0";
        assert!(compile(&env, &fair).is_ok());
        // Chained comprehensions run one after another: only nesting counts.
        let chained = "[1, 2].map(x, x * 2).filter(x, x > 2).map(x, x + 1).all(x, [x].exists(y, y > 0))";
        assert!(compile(&env, chained).is_ok(), "{:?}", compile(&env, chained).err());
    }

    #[test]
    fn within_the_limits_nothing_overflows_a_small_stack() {
        // Tokio's worker threads have 2 MiB; the deepest expressions allowed compile and evaluate there.
        let shapes = [
            format!("{}1{} == 1", "(".repeat(MAX_NESTING - 1), ")".repeat(MAX_NESTING - 1)),
            format!("{}1{} == [[1]]", "[".repeat(MAX_NESTING - 2), "]".repeat(MAX_NESTING - 2)),
            vec!["1"; MAX_DEPTH - 2].join(" + ") + " > 0",
            vec!["true"; MAX_DEPTH - 2].join(" && "),
        ];
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                for source in &shapes {
                    let env = environment();
                    let outcome = compile(&env, source)
                        .map(|ast| env.program(&ast).unwrap().eval(&cel_core::MapActivation::new()));
                    assert!(outcome.is_ok(), "{source}: {:?}", outcome.err());
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn the_catalog_lists_functions_methods_and_macros() {
        let catalog = catalog();
        let find = |name: &str, kind: &str| catalog.iter().find(|e| e.name == name && e.kind == kind);
        assert!(find("size", "function").is_some());
        assert!(find("lowerAscii", "method").unwrap().signatures[0].starts_with("string.("));
        assert!(find("math.greatest", "function").is_some() || find("math.greatest", "macro").is_some());
        assert!(find("sets.contains", "function").is_some());
        assert!(find("all", "macro").is_some());
        assert!(!catalog.iter().any(|e| e.name.starts_with('_') || e.name.starts_with('@')));
    }

    #[test]
    fn lists_under_nested_loops_are_bounded() {
        let env = environment();
        let nested = Runnable::new(&env, "tags.all(a, tags.exists(b, a == b))").unwrap();
        let single = Runnable::new(&env, "tags.all(a, a > 0) && tags.map(a, a).all(b, b > 0)").unwrap();
        assert!(nested.nested_loops && !single.nested_loops);
        let long = serde_json::json!({"inner": (0..=MAX_LIST_UNDER_NESTED_LOOPS).collect::<Vec<_>>()});
        assert!(read_json(&long, true).is_error());
        assert!(!read_json(&long, false).is_error(), "a single loop is linear: no bound");
        let fine = serde_json::json!((0..MAX_LIST_UNDER_NESTED_LOOPS).collect::<Vec<_>>());
        assert!(!read_json(&fine, true).is_error());
    }

    #[test]
    fn json_reads_as_cel() {
        let value = from_json(&serde_json::json!({"n": 3, "d": 2.5, "l": ["a"], "o": {"b": true}, "z": null}));
        let Value::Map(map) = value else { panic!("a map") };
        assert_eq!(map.len(), 5);
    }
}
