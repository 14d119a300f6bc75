//! Service segments: the service's registration and transports, and the actions that may follow it.

use super::*;

impl<'a> Check<'a> {
    pub(super) fn service_in(&mut self, node: &Node) {
        let config = &node.config;
        let Some(service) = self.service(node, Code::ServiceNotRegistered) else { return };
        let offered = service.transports();
        let transport = config_str(config, "transport");
        let effective = match transport {
            Some(t) if offered.iter().any(|o| o == t) => Some(t.to_owned()),
            Some(t) => {
                self.push(
                    node,
                    Code::TransportNotOffered,
                    Some("/config/transport"),
                    format!(
                        "service {:?} does not offer transport {t:?} (it offers: {})",
                        service.name,
                        offered.join(", ")
                    ),
                );
                None
            }
            None if offered.is_empty() => {
                self.push(
                    node,
                    Code::TransportNotOffered,
                    Some("/config/service"),
                    format!("service {:?} lists no service_sources, so nothing can reach it", service.name),
                );
                None
            }
            None => offered.first().cloned(),
        };
        // An external service over HTTP is reached at its manifest's endpoint; one running here is served by
        // Flowhost itself, under its own address.
        if effective.as_deref() == Some("http")
            && !service.in_process()
            && !service.components.iter().any(|c| c.endpoint().is_some())
        {
            self.push(
                node,
                Code::HttpEndpointMissing,
                Some("/config/transport"),
                format!(
                    "service {:?} offers transport \"http\" but its manifest has no transports.http.endpoint, so \
                     nothing can be sent to it",
                    service.name
                ),
            );
        }
        if let Some(topic) = config_str(config, "kafka_topic") {
            if effective.as_deref().is_some_and(|t| t != "kafka") {
                self.push(
                    node,
                    Code::RetargetNotKafka,
                    Some("/config/kafka_topic"),
                    "a Kafka topic retarget needs transport \"kafka\"",
                );
            } else if self.deps.topics.get(topic) != Some(&true) {
                self.push(
                    node,
                    Code::KafkaTopicMissing,
                    Some("/config/kafka_topic"),
                    format!(
                        "retarget topic {topic:?} does not exist (create it first; a missing retarget fails closed)"
                    ),
                );
            }
        }
    }
}
