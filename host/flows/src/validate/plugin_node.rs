//! A plugin's node kind: declared by the active manifest of its plugin, its configuration checked against the
//! declaration's `config_schema` with the placeholder rules of actions.

use super::*;

impl<'a> Check<'a> {
    /// A plugin's node kind: declared by the plugin's active manifest, its configuration (the rest of `config`)
    /// satisfying the declaration's `config_schema` with the placeholder rules of actions; the fields it adds
    /// reach the nodes after it.
    pub(super) fn plugin_node(&mut self, node: &Node, state: &mut PathState<'a>) {
        let config = &node.config;
        let (Some(plugin), Some(kind)) = (config_str(config, "plugin"), config_str(config, "kind")) else {
            for key in ["plugin", "kind"].into_iter().filter(|key| config_str(config, key).is_none()) {
                self.push(
                    node,
                    Code::NodeKindRefMissing,
                    Some(&format!("/config/{key}")),
                    format!("missing config.{key}"),
                );
            }
            // What the node adds is unknown: the nodes after it are not type-checked rather than reported for it.
            state.fields = None;
            return;
        };
        let (service, declaration) = match self.deps.node_kind(plugin, kind) {
            Ok(found) => found,
            Err(problem) => {
                let pointer = if problem.plugin_known { "/config/kind" } else { "/config/plugin" };
                self.push(node, Code::NodeKindNotDeclared, Some(pointer), problem.message);
                state.fields = None;
                return;
            }
        };
        let mut settings = config.as_object().cloned().unwrap_or_default();
        settings.remove("plugin");
        settings.remove("kind");
        let settings = Value::Object(settings);
        let mut whole: HashSet<String> = HashSet::new();
        let schema = &declaration.config_schema;
        self.placeholders(node, &settings, "/config", state, Some((Some(schema), &mut whole)));
        if let Some(validator) = self.deps.validator(&service.hash, &format!("node-kind {plugin}/{kind}"), schema) {
            self.schema_issues(node, &validator, &settings, &whole, Code::NodeKindConfigInvalid);
        }
        if let Some(fields) = &mut state.fields {
            for (name, type_name) in &declaration.adds_fields {
                let kind =
                    serde_json::from_value(Value::String(type_name.clone())).map_or(FieldKind::Dyn, FieldKind::Typed);
                set_field(fields, name, kind);
            }
        }
    }
}
