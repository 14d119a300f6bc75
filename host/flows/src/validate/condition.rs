//! Condition nodes: their CEL expression against the fields that reach them, and the field checks other nodes
//! share (a rate limit's key).

use super::*;

impl<'a> Check<'a> {
    pub(super) fn condition(&mut self, node: &Node, state: &PathState<'a>) {
        let expression = config_str(&node.config, "expression");
        if is_else(&node.config) {
            if expression.is_some() {
                self.push(
                    node,
                    Code::ElseWithExpression,
                    Some("/config/expression"),
                    "an else branch takes no expression (it matches when its siblings do not)",
                );
            }
            return;
        }
        let Some(expression) = expression else {
            self.push(node, Code::ConditionExpressionMissing, Some("/config/expression"), "missing expression");
            return;
        };
        let errors = match &state.fields {
            Some(fields) => flowhost_expr::validate_fields(expression, fields, &state.origin),
            None => flowhost_expr::validate(expression, None),
        };
        for error in errors {
            self.push(node, Code::CelInvalid, Some("/config/expression"), error);
        }
    }

    pub(super) fn field_exists(&mut self, node: &Node, state: &PathState<'a>, name: &str, pointer: &str) {
        if let Some(fields) = &state.fields {
            if field(fields, name).is_none() {
                self.push(node, Code::FieldUnknown, Some(pointer), format!("field {name:?} does not reach this node"));
            }
        }
    }
}
