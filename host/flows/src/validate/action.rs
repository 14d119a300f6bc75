//! Action nodes: the service's declared action, its configuration against the action's `config_schema`, and
//! the `result` it adds.

use super::*;

impl<'a> Check<'a> {
    pub(super) fn action(&mut self, node: &'a Node, state: &PathState<'a>) {
        let config = &node.config;
        let action_ref = config_str(config, "action_ref");
        let hint = |deps: &Dependencies, action_ref: &str| {
            let declared_by: Vec<String> = deps
                .services
                .values()
                .filter(|s| s.action(action_ref).is_some())
                .map(|s| format!("{:?}", s.name))
                .collect();
            match declared_by.as_slice() {
                [] => "no registered service declares it".to_owned(),
                names => format!(
                    "declared by {}: place a service segment of that service before the action",
                    names.join(", ")
                ),
            }
        };
        let named = action_ref.map_or_else(|| "the action".to_owned(), |a| format!("action {a:?}"));
        let Some((segment_id, service_name)) = state.segment else {
            let hint = action_ref.map(|a| format!(" ({})", hint(self.deps, a))).unwrap_or_default();
            self.push(
                node,
                Code::ActionWithoutSegment,
                None,
                format!("{named} has no service segment before it{hint}"),
            );
            return;
        };
        if state.segment_used {
            self.push(
                node,
                Code::ActionNeedsSegment,
                None,
                format!(
                    "follows another action of segment {segment_id:?}: chaining actions needs a further service segment \
                     before {named}"
                ),
            );
            return;
        }
        // The segment has its action, even when the action itself is incomplete.
        self.segments_with_action.insert(segment_id);
        let Some(action_ref) = action_ref else {
            self.push(node, Code::ActionRefMissing, Some("/config/action_ref"), "missing config.action_ref");
            return;
        };
        let hint = hint(self.deps, action_ref);
        let Some(service) = service_name.and_then(|name| self.deps.services.get(name)) else {
            return; // The segment reports its missing or unknown service.
        };
        let Some(action) = service.action(action_ref) else {
            self.push(
                node,
                Code::ActionNotDeclared,
                Some("/config/action_ref"),
                format!(
                    "action {action_ref:?} is not declared by the active manifest of service {:?} (parent segment \
                     {segment_id:?}); {hint}",
                    service.name
                ),
            );
            return;
        };
        let mut settings = config.as_object().cloned().unwrap_or_default();
        settings.remove("action_ref");
        let settings = Value::Object(settings);
        let mut whole: HashSet<String> = HashSet::new();
        self.placeholders(node, &settings, "/config", state, Some((action.config_schema.as_ref(), &mut whole)));
        let Some(schema) = &action.config_schema else { return };
        let Some(validator) = self.deps.validator(&service.hash, action_ref, schema) else { return };
        self.schema_issues(node, &validator, &settings, &whole, Code::ActionConfigInvalid);
    }
}
