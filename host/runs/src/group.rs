//! The executor's consumer group, `engine.group_id`, and the one-time adoption of the offsets of the group the
//! flows were consumed in before rules and flows shared one consumer (`<engine.group_id>.flows`).
//!
//! Without it, a flow's source topic that no rule reads would be read from the start of the log by a group that
//! never committed there, and a topic both read would resume where the rules were, past records the flows had
//! not consumed yet. So before its first join, per partition of the flows' source topics, the group is set to
//! the earlier of the two committed offsets (a partition only the rules' group committed in keeps its offset):
//! nothing a flow had not consumed is skipped; what the rules had consumed already may be consumed again (their
//! outputs are at-least-once, and a redelivered record finds its run and starts nothing). A document in
//! `executor_migrations` records that it is done, so it happens once per deployment; until then a node whose
//! group already has members (a node of the earlier build still running) waits, not ready, instead of joining.

use std::collections::BTreeSet;

use flowhost_core::backoff::Backoff;
use flowhost_core::clock::sleep_or_shutdown;
use flowhost_core::collections::EXECUTOR_MIGRATIONS;
use flowhost_core::ports::{PortError, Ports, Position};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The id of the migration's document in `executor_migrations`.
pub const ADOPTED_FLOW_GROUP: &str = "adopted-flow-group";

/// The group flows were consumed in before the one consumer.
pub fn former_flow_group(group: &str) -> String {
    format!("{group}.flows")
}

/// Adopts the flows' former offsets into `group` for `topics` (the flows' source topics) unless done before;
/// retried with backoff until done; false when shut down first. `on_error` reports each failure (readiness).
pub async fn adopt_flow_offsets(
    ports: &Ports,
    group: &str,
    topics: &BTreeSet<String>,
    on_error: &(dyn Fn(Option<String>) + Send + Sync),
    shutdown: &CancellationToken,
) -> bool {
    let mut backoff = Backoff::for_backend();
    loop {
        match adopt_once(ports, group, topics).await {
            Ok(()) => {
                on_error(None);
                return true;
            }
            Err(error) => {
                warn!(%error, group, "cannot adopt the flows' consumer offsets yet; nothing is consumed meanwhile");
                on_error(Some(format!("adopting the flows' consumer offsets: {error}")));
                if !sleep_or_shutdown(backoff.next_delay(), shutdown).await {
                    return false;
                }
            }
        }
    }
}

async fn adopt_once(ports: &Ports, group: &str, topics: &BTreeSet<String>) -> Result<(), PortError> {
    if ports.documents.get(EXECUTOR_MIGRATIONS, ADOPTED_FLOW_GROUP).await?.is_some() {
        return Ok(());
    }
    let former = former_flow_group(group);
    let mut moved = Vec::new();
    for topic in topics {
        let flows = ports.topics.lag(&former, topic).await?;
        let ours = ports.topics.lag(group, topic).await?;
        for partition in flows {
            let Some(flows_at) = partition.committed else { continue };
            let ours_at = ours.iter().find(|p| p.partition == partition.partition).and_then(|p| p.committed);
            let target = ours_at.map_or(flows_at, |ours_at| ours_at.min(flows_at));
            if Some(target) != ours_at {
                moved.push(Position { topic: topic.clone(), partition: partition.partition, next_offset: target });
            }
        }
    }
    if !moved.is_empty() {
        ports.topics.seed_group(group, &moved).await?;
    }
    let positions: Vec<_> = moved.iter().map(|p| json!([p.topic, p.partition, p.next_offset])).collect();
    let record = json!({"from": former, "to": group, "positions": positions, "at_ms": ports.clock.now_ms()});
    ports.documents.upsert(EXECUTOR_MIGRATIONS, ADOPTED_FLOW_GROUP, record).await?;
    info!(from = %former, to = group, partitions = moved.len(), "adopted the flows' consumer offsets");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_core::ports::{ConsumerConfig, OutRecord, StartFrom};
    use flowhost_core::{Clock, SystemClock};
    use std::sync::Arc;

    async fn commit(ports: &Ports, group: &str, topic: &str, next_offset: i64) {
        let config = ConsumerConfig { group: group.into(), topics: vec![topic.into()], start: StartFrom::Earliest };
        let mut consumer = ports.topics.consumer(config).await.unwrap();
        let position = Position { topic: topic.into(), partition: 0, next_offset };
        consumer.commit(&[position]).await.unwrap();
        consumer.close().await.unwrap();
    }

    #[tokio::test]
    async fn the_earlier_offset_wins_once_and_a_rules_only_topic_keeps_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ports = flowhost_embedded::EmbeddedStore::open(dir.path(), 1, clock.clone()).unwrap().ports(clock);
        let records: Vec<OutRecord> = ["both", "flows-only", "rules-only"]
            .iter()
            .flat_map(|topic| (0..10).map(move |i| OutRecord::new(*topic, format!("{{\"n\":{i}}}"))))
            .collect();
        ports.topics.publish(&records).await.unwrap();
        commit(&ports, "g", "both", 8).await;
        commit(&ports, "g.flows", "both", 5).await;
        commit(&ports, "g.flows", "flows-only", 7).await;
        commit(&ports, "g", "rules-only", 9).await;

        let topics: BTreeSet<String> = ["both".to_owned(), "flows-only".to_owned()].into();
        let ok = adopt_flow_offsets(&ports, "g", &topics, &|_| {}, &CancellationToken::new()).await;
        assert!(ok);
        let at = |topic: &'static str| {
            let ports = ports.clone();
            async move { ports.topics.lag("g", topic).await.unwrap()[0].committed }
        };
        assert_eq!(at("both").await, Some(5), "the flows had not consumed 5..8 yet");
        assert_eq!(at("flows-only").await, Some(7));
        assert_eq!(at("rules-only").await, Some(9));

        // Done once: a later start leaves the group where its own commits put it.
        commit(&ports, "g", "both", 10).await;
        assert!(adopt_flow_offsets(&ports, "g", &topics, &|_| {}, &CancellationToken::new()).await);
        assert_eq!(at("both").await, Some(10));
    }

    #[tokio::test]
    async fn a_group_with_members_is_not_moved() {
        let dir = tempfile::tempdir().unwrap();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ports = flowhost_embedded::EmbeddedStore::open(dir.path(), 1, clock.clone()).unwrap().ports(clock);
        ports.topics.publish(&[OutRecord::new("t", "{}")]).await.unwrap();
        let config = ConsumerConfig { group: "g".into(), topics: vec!["t".into()], start: StartFrom::Earliest };
        let _member = ports.topics.consumer(config).await.unwrap();
        let position = Position { topic: "t".into(), partition: 0, next_offset: 1 };
        let refused = ports.topics.seed_group("g", &[position]).await;
        assert!(matches!(refused, Err(PortError::Conflict(_))), "{refused:?}");
    }
}
