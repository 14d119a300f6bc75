//! The fast path: a checked expression over typed event fields, compiled to a small tree of typed operations that
//! reads the event's JSON in place, with no allocation per evaluation.
//!
//! Most rules are this shape: comparisons of declared scalar fields with literals, `in` a list of literals,
//! joined by `&&`, `||` and `!`. cel-core evaluates them through its general tree walker, converting each field
//! to a CEL value (a string field is a new `Arc<str>`); this plan compares the JSON values directly.
//!
//! Invariants:
//! - A plan is built only from a tree the checker accepted against the declared types, and only when every node
//!   is in the subset below; anything else (functions, macros, arithmetic, comparisons across types, a field of
//!   unknown type) has no plan and evaluates through cel-core.
//! - A plan answers only when the answer is a boolean that cel-core would give too. Whenever cel-core's answer
//!   would be an error, or might be (a field missing or of another JSON type than declared), the plan declines
//!   ([`Declined`]) and the caller evaluates through cel-core, which then says why. A declined evaluation costs
//!   the plan's work up to that point on top of cel-core's.
//! - `&&` and `||` short-circuit on their left side as cel-core does (`false && x` is `false` without reading
//!   `x`); an error on the left declines, so cel-core's handling of errors beside a deciding right side applies.
//!
//! `tests::the_plan_agrees_with_cel_core` checks the plan against cel-core over generated expressions and
//! events.

use std::cmp::Ordering;

use flowhost_cel::cel_core::{BinaryOp, Expr, UnaryOp};
use flowhost_core::model::FieldType;
use serde_json::{Map, Value as Json};

use crate::{field, DeclaredField};

/// The plan could not answer: evaluate through cel-core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Declined;

/// A boolean-valued node.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Literal(bool),
    /// A declared `bool` field.
    Field(Box<str>),
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Compare(Operand, Comparison, Operand),
    /// `operand in [literals]`, every literal of the operand's type.
    In(Operand, Box<[Literal]>),
}

/// A scalar: a literal or a declared field, with its type.
#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Literal(Literal),
    Field(Box<str>, FieldType),
}

#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Int(i64),
    Double(f64),
    String(Box<str>),
    Bool(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// The plan of one expression. A field is looked up when a node reads it (a clause that is not evaluated reads
/// nothing).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    root: Node,
}

/// A scalar read from the event, borrowed where it is a string.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scalar<'a> {
    Int(i64),
    Double(f64),
    String(&'a str),
    Bool(bool),
}

impl Plan {
    /// The plan of `expr`, when it is in the subset and reads only `types`' typed fields.
    pub(crate) fn build(expr: &Expr, types: &[DeclaredField]) -> Option<Plan> {
        Some(Plan { root: Node::build(expr, types)? })
    }

    /// The answer for `fields`, or [`Declined`].
    pub(crate) fn evaluate(&self, fields: &Map<String, Json>) -> Result<bool, Declined> {
        self.root.evaluate(fields)
    }
}

impl Node {
    fn build(expr: &Expr, types: &[DeclaredField]) -> Option<Node> {
        Some(match expr {
            Expr::Bool(value) => Node::Literal(*value),
            Expr::Ident(_) | Expr::RootIdent(_) => match operand(expr, types)? {
                Operand::Field(name, FieldType::Bool) => Node::Field(name),
                _ => return None,
            },
            Expr::Unary { op: UnaryOp::Not, expr } => Node::Not(Box::new(Node::build(&expr.node, types)?)),
            Expr::Binary { op, left, right } => {
                let (left, right) = (&left.node, &right.node);
                match op {
                    BinaryOp::And => {
                        Node::And(Box::new(Node::build(left, types)?), Box::new(Node::build(right, types)?))
                    }
                    BinaryOp::Or => Node::Or(Box::new(Node::build(left, types)?), Box::new(Node::build(right, types)?)),
                    BinaryOp::In => {
                        let needle = operand(left, types)?;
                        let Expr::List(elements) = right else { return None };
                        let literals = elements
                            .iter()
                            .map(|element| match (element.optional, literal(&element.expr.node)) {
                                (false, Some(literal)) if literal.kind() == needle.kind() => Some(literal),
                                _ => None,
                            })
                            .collect::<Option<Box<[Literal]>>>()?;
                        Node::In(needle, literals)
                    }
                    _ => {
                        let comparison = comparison(*op)?;
                        let (left, right) = (operand(left, types)?, operand(right, types)?);
                        // Same types only (CEL compares numbers across types too; those go to cel-core), and
                        // booleans only for equality.
                        let ordered = !matches!(comparison, Comparison::Eq | Comparison::Ne);
                        if left.kind() != right.kind() || ordered && left.kind() == FieldType::Bool {
                            return None;
                        }
                        Node::Compare(left, comparison, right)
                    }
                }
            }
            _ => return None,
        })
    }

    fn evaluate(&self, fields: &Map<String, Json>) -> Result<bool, Declined> {
        match self {
            Node::Literal(value) => Ok(*value),
            Node::Field(name) => match read(field(fields, name), FieldType::Bool)? {
                Scalar::Bool(value) => Ok(value),
                _ => Err(Declined),
            },
            Node::Not(inner) => Ok(!inner.evaluate(fields)?),
            Node::And(left, right) => Ok(left.evaluate(fields)? && right.evaluate(fields)?),
            Node::Or(left, right) => Ok(left.evaluate(fields)? || right.evaluate(fields)?),
            Node::Compare(left, comparison, right) => {
                let (left, right) = (left.read(fields)?, right.read(fields)?);
                let ordering = match (left, right) {
                    (Scalar::Int(a), Scalar::Int(b)) => Some(a.cmp(&b)),
                    (Scalar::Double(a), Scalar::Double(b)) => a.partial_cmp(&b),
                    (Scalar::String(a), Scalar::String(b)) => Some(a.cmp(b)),
                    (Scalar::Bool(a), Scalar::Bool(b)) => Some(a.cmp(&b)),
                    _ => return Err(Declined),
                };
                Ok(comparison.holds(ordering))
            }
            Node::In(needle, literals) => {
                let needle = needle.read(fields)?;
                Ok(literals.iter().any(|literal| literal.scalar() == needle))
            }
        }
    }
}

impl Operand {
    fn kind(&self) -> FieldType {
        match self {
            Operand::Literal(literal) => literal.kind(),
            Operand::Field(_, kind) => *kind,
        }
    }

    fn read<'a>(&'a self, fields: &'a Map<String, Json>) -> Result<Scalar<'a>, Declined> {
        match self {
            Operand::Literal(literal) => Ok(literal.scalar()),
            Operand::Field(name, kind) => read(field(fields, name), *kind),
        }
    }
}

impl Literal {
    fn kind(&self) -> FieldType {
        match self {
            Literal::Int(_) => FieldType::Int,
            Literal::Double(_) => FieldType::Double,
            Literal::String(_) => FieldType::String,
            Literal::Bool(_) => FieldType::Bool,
        }
    }

    fn scalar(&self) -> Scalar<'_> {
        match self {
            Literal::Int(value) => Scalar::Int(*value),
            Literal::Double(value) => Scalar::Double(*value),
            Literal::String(value) => Scalar::String(value),
            Literal::Bool(value) => Scalar::Bool(*value),
        }
    }
}

impl Comparison {
    /// Whether the comparison holds for `ordering` (`None`: unordered, a NaN; only `!=` holds).
    fn holds(self, ordering: Option<Ordering>) -> bool {
        match (self, ordering) {
            (Comparison::Ne, None) => true,
            (_, None) => false,
            (Comparison::Eq, Some(ordering)) => ordering.is_eq(),
            (Comparison::Ne, Some(ordering)) => ordering.is_ne(),
            (Comparison::Lt, Some(ordering)) => ordering.is_lt(),
            (Comparison::Le, Some(ordering)) => ordering.is_le(),
            (Comparison::Gt, Some(ordering)) => ordering.is_gt(),
            (Comparison::Ge, Some(ordering)) => ordering.is_ge(),
        }
    }
}

fn comparison(op: BinaryOp) -> Option<Comparison> {
    Some(match op {
        BinaryOp::Eq => Comparison::Eq,
        BinaryOp::Ne => Comparison::Ne,
        BinaryOp::Lt => Comparison::Lt,
        BinaryOp::Le => Comparison::Le,
        BinaryOp::Gt => Comparison::Gt,
        BinaryOp::Ge => Comparison::Ge,
        _ => return None,
    })
}

/// A literal, or a declared typed field.
fn operand(expr: &Expr, types: &[DeclaredField]) -> Option<Operand> {
    match expr {
        Expr::Ident(name) | Expr::RootIdent(name) => {
            let (_, kind) = types.iter().find(|(field, _)| **field == **name)?;
            Some(Operand::Field(Box::from(name.as_str()), (*kind)?))
        }
        other => literal(other).map(Operand::Literal),
    }
}

fn literal(expr: &Expr) -> Option<Literal> {
    Some(match expr {
        Expr::Int(value) => Literal::Int(*value),
        Expr::Float(value) => Literal::Double(*value),
        Expr::String(value) => Literal::String(Box::from(value.as_str())),
        Expr::Bool(value) => Literal::Bool(*value),
        Expr::Unary { op: UnaryOp::Neg, expr } => match &expr.node {
            Expr::Int(value) => Literal::Int(value.checked_neg()?),
            Expr::Float(value) => Literal::Double(-value),
            _ => return None,
        },
        _ => return None,
    })
}

/// A field's value as `kind`, read as `crate::typed_value` reads it for cel-core; [`Declined`] when it is missing
/// or of another JSON type.
fn read(value: Option<&Json>, kind: FieldType) -> Result<Scalar<'_>, Declined> {
    match (kind, value.ok_or(Declined)?) {
        (FieldType::Int, Json::Number(number)) => number.as_i64().map(Scalar::Int).ok_or(Declined),
        (FieldType::Double, Json::Number(number)) => number.as_f64().map(Scalar::Double).ok_or(Declined),
        (FieldType::String, Json::String(text)) => Ok(Scalar::String(text)),
        (FieldType::Bool, Json::Bool(value)) => Ok(Scalar::Bool(*value)),
        _ => Err(Declined),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Expression;

    /// A small deterministic generator (xorshift64*): the cases are the same on every run.
    struct Cases(u64);

    impl Cases {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
        }

        fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
            options[self.below(options.len())]
        }

        /// A boolean expression over the schema's fields, `depth` levels of `&&`, `||`, `!` at most; mostly in
        /// the plan's subset, sometimes outside it (functions, numbers compared across types, a ternary).
        fn expression(&mut self, depth: u32) -> String {
            if depth > 0 && self.below(2) == 0 {
                let (left, right) = (self.expression(depth - 1), self.expression(depth - 1));
                return match self.below(3) {
                    0 => format!("({left} && {right})"),
                    1 => format!("({left} || {right})"),
                    _ => format!("!({left})"),
                };
            }
            let op = self.pick(&["==", "!=", "<", "<=", ">", ">="]);
            match self.below(11) {
                0 => self.pick(&["vip", "true", "false", "!vip"]).to_owned(),
                1 => format!("amount {op} {}", self.pick(&["100.0", "-1.5", "0.0", "150.5", "amount"])),
                2 => format!("{} {op} count", self.pick(&["2", "-1", "0", "9007199254740993", "count"])),
                3 => format!("game {op} {}", self.pick(&["'slots'", "''", "'Slots'", "'é'", "game"])),
                4 => format!("vip {} {}", self.pick(&["==", "!="]), self.pick(&["true", "false", "vip"])),
                5 => format!("game in [{}]", self.pick(&["'slots', 'poker'", "", "'é'"])),
                6 => format!("count in [{}]", self.pick(&["1, 2, 3", "-1", ""])),
                7 => format!("amount in [{}]", self.pick(&["150.5, 100.0", "0.0"])),
                8 => format!("count {op} 2.0"),
                9 => format!("game.startsWith('{}')", self.pick(&["s", "p"])),
                _ => format!("(vip ? count > 1 : amount {op} 0.0)"),
            }
        }

        fn event(&mut self) -> Map<String, Json> {
            let mut event = Map::new();
            let fields: [(&str, [Json; 5]); 4] = [
                ("amount", [json!(-1.5), json!(0.0), json!(100), json!(150.5), json!("150.5")]),
                ("count", [json!(-1), json!(0), json!(2), json!(9007199254740993_u64), json!(2.5)]),
                ("game", [json!(""), json!("slots"), json!("poker"), json!("é"), json!(1)]),
                ("vip", [json!(true), json!(false), json!(true), json!(false), json!("yes")]),
            ];
            for (name, values) in fields {
                // One in six missing; the last value of each is of another JSON type than declared.
                if self.below(6) > 0 {
                    event.insert(name.to_owned(), values[self.below(values.len())].clone());
                }
            }
            event
        }
    }

    fn schema() -> flowhost_core::model::EventSchema {
        flowhost_core::model::EventSchema::new(
            "deposit",
            &[
                ("amount", FieldType::Double),
                ("count", FieldType::Int),
                ("game", FieldType::String),
                ("vip", FieldType::Bool),
            ],
        )
    }

    #[test]
    fn the_plan_agrees_with_cel_core() {
        let schema = schema();
        let mut cases = Cases(0x9E37_79B9_7F4A_7C15);
        let (mut planned, mut answered, mut declined) = (0, 0, 0);
        for _ in 0..3_000 {
            let source = cases.expression(3);
            let Ok(expression) = Expression::compile(&source, Some(&schema)) else { continue };
            let Some(plan) = &expression.plan else { continue };
            planned += 1;
            for _ in 0..20 {
                let event = cases.event();
                let through_cel_core = expression.evaluate_through_cel_core(&event);
                match plan.evaluate(&event) {
                    Ok(answer) => {
                        answered += 1;
                        assert_eq!(Ok(answer), through_cel_core, "{source} over {event:?}");
                    }
                    Err(Declined) => declined += 1,
                }
                assert_eq!(expression.evaluate(&event), through_cel_core, "{source} over {event:?}");
            }
        }
        assert!(planned > 1_000 && answered > 10_000 && declined > 1_000, "{planned} {answered} {declined}");
    }

    #[test]
    fn what_has_a_plan() {
        let schema = schema();
        let planned = |source: &str| Expression::compile(source, Some(&schema)).unwrap().plan.is_some();
        for source in [
            "amount > 100.0 && count >= 2 && game == 'slots' && !vip",
            "game in ['slots', 'poker'] || count == -3",
            "vip == false",
        ] {
            assert!(planned(source), "{source}");
        }
        for source in ["count == 2.0", "game.startsWith('s')", "vip ? true : false", "amount + 1.0 > 2.0"] {
            assert!(!planned(source), "{source}");
        }
        assert!(Expression::compile("count > 1", None).unwrap().plan.is_none(), "no schema, no plan");
    }
}
