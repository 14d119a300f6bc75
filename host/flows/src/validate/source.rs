//! The source node: its topic and event type, and the fields of that type's schema every path starts with.

use super::*;

impl<'a> Check<'a> {
    pub(super) fn source(&mut self, node: &Node, state: &mut PathState<'a>) {
        let config = &node.config;
        let event_type = config_str(config, "event_type");
        if event_type.is_none() {
            self.push(node, Code::SourceEventTypeMissing, Some("/config/event_type"), "missing event_type");
        }
        let topic = config_str(config, "topic");
        let service = config_str(config, "service");
        match (topic, service) {
            (Some(_), Some(_)) | (None, None) => self.push(
                node,
                Code::SourceOriginInvalid,
                Some("/config"),
                "names either a topic (`topic`) or an external service (`service`), exactly one of them",
            ),
            (None, Some(service)) => {
                if !self.deps.services.contains_key(service) {
                    self.push(
                        node,
                        Code::ServiceNotRegistered,
                        Some("/config/service"),
                        format!("service {service:?} has not registered a manifest"),
                    );
                }
                // Spec 001 names one inbound path for source events, the rule's source topic; a service has no
                // channel on which to start runs. Refused, so no flow is `valid` and never runs.
                self.push(
                    node,
                    Code::SourceServiceUnsupported,
                    Some("/config/service"),
                    format!(
                        "starts from service {service:?}, but runs start only from a topic's events: name the \
                         topic the service publishes to (`topic`) instead"
                    ),
                );
            }
            _ => {}
        }
        state.source_topic = topic.map(str::to_owned);
        let Some(event_type) = event_type else { return };
        state.origin = event_type.to_owned();
        match self.deps.schemas.get(event_type) {
            None => self.push(
                node,
                Code::SourceSchemaMissing,
                Some("/config/event_type"),
                format!("event type {event_type:?} has no schema (PUT /api/v1/schemas/{event_type})"),
            ),
            Some(schema) => {
                let mut fields: Fields =
                    schema.fields.iter().map(|f| (f.name.clone(), FieldKind::Typed(f.kind))).collect();
                for implicit in ["event_type", "tenant_id"] {
                    if !fields.iter().any(|(name, _)| name == implicit) {
                        fields.push((implicit.to_owned(), FieldKind::Typed(FieldType::String)));
                    }
                }
                state.fields = Some(fields);
            }
        }
    }
}
