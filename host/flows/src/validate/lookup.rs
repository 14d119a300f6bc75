//! Lookup nodes: the service's data source, its parameters' placeholders, and the `target` field they add.

use super::*;

impl<'a> Check<'a> {
    pub(super) fn lookup(&mut self, node: &Node, state: &mut PathState<'a>) {
        let config = &node.config;
        let target = config.get("target").and_then(Value::as_str).unwrap_or_default();
        if !flowhost_core::placeholders::is_placeholder_name(target) {
            self.push(
                node,
                Code::LookupInvalid,
                Some("/config/target"),
                "target must name the field that receives the answer",
            );
        } else if let Some(fields) = &mut state.fields {
            set_field(fields, target, FieldKind::Dyn);
        }
        let params = config.get("params").cloned().unwrap_or(Value::Object(Map::new()));
        if !params.is_object() {
            self.push(node, Code::LookupInvalid, Some("/config/params"), "params must be an object");
        }
        self.placeholders(node, &params, "/config/params", state, None);
        let Some(service) = self.service(node, Code::LookupInvalid) else { return };
        if !service.supports("lookup") {
            self.push(
                node,
                Code::NodeKindNotSupported,
                Some("/config/service"),
                format!("service {:?} does not list \"lookup\" in supports_nodes", service.name),
            );
        }
        let Some(name) = config_str(config, "data_source") else {
            self.push(node, Code::LookupInvalid, Some("/config/data_source"), "names no data_source");
            return;
        };
        let Some(source) = service.data_source(name) else {
            self.push(
                node,
                Code::DataSourceUnknown,
                Some("/config/data_source"),
                format!("service {:?} declares no data source {name:?}", service.name),
            );
            return;
        };
        for key in params.as_object().into_iter().flat_map(|p| p.keys()) {
            if !source.params.iter().any(|p| p == key) {
                self.push(
                    node,
                    Code::LookupInvalid,
                    Some(&format!("/config/params/{}", escape_pointer(key))),
                    format!("data source {name:?} takes no parameter {key:?} (it takes: {})", source.params.join(", ")),
                );
            }
        }
    }
}
