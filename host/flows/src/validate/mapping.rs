//! Mapping nodes: `select` and `merge` fields, their sources among the fields that reach them, and the fields
//! they hand on.

use super::*;

impl<'a> Check<'a> {
    pub(super) fn mapping(&mut self, node: &Node, state: &mut PathState<'a>) {
        let config = &node.config;
        let mode = config.get("mode").map_or(Some("select"), Value::as_str);
        if !matches!(mode, Some("select" | "merge")) {
            self.push(node, Code::MappingInvalid, Some("/config/mode"), "mode must be \"select\" or \"merge\"");
        }
        let Some(entries) = config.get("fields").and_then(Value::as_array).filter(|f| !f.is_empty()) else {
            self.push(
                node,
                Code::MappingInvalid,
                Some("/config/fields"),
                "fields must list at least one {source, target}",
            );
            return;
        };
        let mut mapped: Fields = Vec::new();
        let mut targets = HashSet::new();
        for (i, entry) in entries.iter().enumerate() {
            let source = entry.get("source").and_then(Value::as_str).unwrap_or_default();
            let target = entry.get("target").and_then(Value::as_str).unwrap_or_default();
            if source.is_empty() {
                self.push(
                    node,
                    Code::MappingInvalid,
                    Some(&format!("/config/fields/{i}/source")),
                    format!("fields[{i}] has no source"),
                );
            } else {
                self.field_exists(node, state, source, &format!("/config/fields/{i}/source"));
            }
            if !flowhost_core::placeholders::is_placeholder_name(target) {
                self.push(
                    node,
                    Code::MappingInvalid,
                    Some(&format!("/config/fields/{i}/target")),
                    format!("fields[{i}].target {target:?} is not a field name (letters, digits, '_')"),
                );
            } else if !targets.insert(target) {
                self.push(
                    node,
                    Code::MappingInvalid,
                    Some(&format!("/config/fields/{i}/target")),
                    format!("target {target:?} is mapped twice"),
                );
            }
            let kind = state.fields.as_ref().and_then(|f| field(f, source)).unwrap_or(FieldKind::Dyn);
            mapped.push((target.to_owned(), kind));
        }
        if let Some(fields) = &mut state.fields {
            // An unknown mode (reported above) keeps the fields, so later nodes are not reported for it too.
            if mode == Some("select") {
                *fields = mapped;
            } else {
                for (name, kind) in mapped {
                    set_field(fields, &name, kind);
                }
            }
        }
    }
}
