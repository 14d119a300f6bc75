//! The topics port: durable, partitioned logs with consumer groups and committed offsets (Kafka semantics).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::PortError;

/// A record header. Keys repeat as in Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Vec<u8>,
}

/// A record to publish. Records with the same key land in the same partition, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutRecord {
    pub topic: String,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    pub headers: Vec<Header>,
}

impl OutRecord {
    pub fn new(topic: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Self { topic: topic.into(), key: None, value: value.into(), headers: Vec::new() }
    }
    pub fn with_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.key = Some(key.into());
        self
    }
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push(Header { key: key.into(), value: value.into() });
        self
    }
}

/// A consumed record with its position in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    pub headers: Vec<Header>,
    pub timestamp_ms: i64,
}

impl Record {
    pub fn header(&self, key: &str) -> Option<&[u8]> {
        self.headers.iter().find(|h| h.key == key).map(|h| h.value.as_slice())
    }
}

/// The next offset to read in one partition: what a commit stores.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub topic: String,
    pub partition: i32,
    pub next_offset: i64,
}

/// Where a group without a committed offset starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartFrom {
    #[default]
    Earliest,
    Latest,
}

/// What a consumer reads: its group, its topics and where a new group starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    pub group: String,
    pub topics: Vec<String>,
    pub start: StartFrom,
}

/// The consumer lag of one partition for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    pub partition: i32,
    /// The group's committed next offset; `None` when the group never committed in this partition.
    pub committed: Option<i64>,
    /// The end of the log: the offset the next published record gets.
    pub end: i64,
    /// Records between the committed offset (or the start of the log) and the end.
    pub lag: i64,
}

/// A durable log.
#[async_trait]
pub trait Topics: Send + Sync + 'static {
    fn backend(&self) -> &'static str;

    /// Appends the records and returns once every one is acknowledged (durable); on error, any subset may
    /// have been written, so callers retry the whole batch (at-least-once). The records are borrowed, so a
    /// retry hands the same batch again without copying it.
    async fn publish(&self, records: &[OutRecord]) -> Result<(), PortError>;

    /// Creates a topic with `partitions` if it does not exist (idempotent). `replication_factor` is the number of
    /// copies the cluster keeps (`None`: the broker's default); the embedded log keeps one copy and ignores it.
    async fn create_topic_replicated(
        &self,
        topic: &str,
        partitions: i32,
        replication_factor: Option<i16>,
    ) -> Result<(), PortError>;

    /// Creates a topic with the backend's default replication (idempotent).
    async fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), PortError> {
        self.create_topic_replicated(topic, partitions, None).await
    }

    /// Whether `topic` exists. Never creates it.
    async fn exists(&self, topic: &str) -> Result<bool, PortError>;

    /// Per partition of `topic`, how far `group` is behind the end of the log, by partition number.
    async fn lag(&self, group: &str, topic: &str) -> Result<Vec<PartitionLag>, PortError>;

    /// Joins `config.group` on `config.topics`; reading resumes after the group's committed offsets.
    async fn consumer(&self, config: ConsumerConfig) -> Result<Box<dyn TopicConsumer>, PortError>;

    /// Commits `positions` for `group` without joining it: moving a group's offsets in a migration. Refused
    /// (`PortError::Conflict`) while the group has members, whose commits would race it.
    async fn seed_group(&self, group: &str, positions: &[Position]) -> Result<(), PortError>;
}

/// One member of a consumer group. Polling advances an in-memory position; only `commit` makes progress
/// durable, so a consumer that stops before committing sees the same records again on its next start.
///
/// `mark` is the lazy alternative to `commit`: it remembers positions that are done, and the member commits them
/// itself when it loses those partitions (a rebalance) and on `close`, so the next owner resumes after them.
#[async_trait]
pub trait TopicConsumer: Send {
    /// Up to `max` records, waiting at most `timeout` for the first one; an empty batch on timeout. Records of
    /// paused partitions are not returned.
    async fn poll(&mut self, max: usize, timeout: Duration) -> Result<Vec<Record>, PortError>;

    /// Stores the group's next offsets for the given partitions.
    async fn commit(&mut self, positions: &[Position]) -> Result<(), PortError>;

    /// Stops returning records of one assigned partition while the others keep flowing (e.g. its downstream
    /// store is failing). A pause lasts until `resume` or until the partition is revoked.
    async fn pause(&mut self, topic: &str, partition: i32) -> Result<(), PortError>;

    /// Returns records of a paused partition again, from right after the last one `poll` returned.
    async fn resume(&mut self, topic: &str, partition: i32) -> Result<(), PortError>;

    /// Remembers positions as done (per partition the furthest wins) without committing them now; they are
    /// committed when their partition is revoked and on `close`.
    fn mark(&mut self, positions: &[Position]);

    /// Commits what was marked and leaves the group. Later calls fail. Dropping without `close` leaves the
    /// group too, but commits nothing (a drop cannot wait for the broker).
    async fn close(&mut self) -> Result<(), PortError>;

    /// Whether the group has assigned this member its partitions (its join completed; an assignment may be
    /// empty when the group has more members than partitions). A readiness probe reads it: a member still
    /// joining consumes nothing. Backends whose members hold their assignment from the start answer `true`.
    fn assigned(&self) -> bool {
        true
    }
}

/// Merges `positions` into `marks`, keeping the furthest next offset per partition: what `mark` stores.
pub fn merge_marks(marks: &mut BTreeMap<(String, i32), i64>, positions: &[Position]) {
    for p in positions {
        let entry = marks.entry((p.topic.clone(), p.partition)).or_insert(p.next_offset);
        *entry = (*entry).max(p.next_offset);
    }
}

/// The positions to commit after processing `records`: per partition, the highest offset plus one.
pub fn next_positions(records: &[Record]) -> Vec<Position> {
    let mut next: BTreeMap<(&str, i32), i64> = BTreeMap::new();
    for record in records {
        let entry = next.entry((record.topic.as_str(), record.partition)).or_insert(record.offset + 1);
        *entry = (*entry).max(record.offset + 1);
    }
    next.into_iter()
        .map(|((topic, partition), next_offset)| Position { topic: topic.to_owned(), partition, next_offset })
        .collect()
}

/// The furthest of `positions` per partition (what to commit after several batches).
pub fn merge_positions(positions: Vec<Position>) -> Vec<Position> {
    let mut furthest: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for p in positions {
        let entry = furthest.entry((p.topic, p.partition)).or_insert(p.next_offset);
        *entry = (*entry).max(p.next_offset);
    }
    furthest.into_iter().map(|((topic, partition), next_offset)| Position { topic, partition, next_offset }).collect()
}

/// Topics a consumer or publisher has made sure exist. A missing topic is created (idempotently) before
/// subscribing to it or publishing to it: Kafka consumers ignore topics that do not exist yet, and brokers may
/// refuse to auto-create.
pub struct KnownTopics {
    partitions: i32,
    created: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl KnownTopics {
    /// `partitions`: of the topics it creates.
    pub fn new(partitions: i32) -> KnownTopics {
        KnownTopics { partitions, created: std::sync::Mutex::new(std::collections::HashSet::new()) }
    }

    /// Creates those of `names` not known to exist yet.
    pub async fn ensure<'a>(
        &self,
        topics: &dyn Topics,
        names: impl IntoIterator<Item = &'a String>,
    ) -> Result<(), PortError> {
        for topic in names {
            if self.created.lock().unwrap_or_else(|p| p.into_inner()).contains(topic) {
                continue;
            }
            topics.create_topic(topic, self.partitions).await?;
            self.created.lock().unwrap_or_else(|p| p.into_inner()).insert(topic.clone());
        }
        Ok(())
    }
}

/// The partition of a key among `partitions`: a stable FNV-1a hash, so the embedded log spreads keys the same
/// way on every run. (Kafka uses its own partitioner on the broker's side of the port.)
pub fn partition_for_key(key: Option<&[u8]>, partitions: i32, round_robin: u64) -> i32 {
    let partitions = partitions.max(1) as u64;
    let slot = match key {
        Some(key) => {
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for byte in key {
                hash ^= u64::from(*byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
            hash % partitions
        }
        None => round_robin % partitions,
    };
    slot as i32
}

/// Checks a topic name against the rules Kafka enforces, so both backends accept the same names.
pub fn check_topic_name(topic: &str) -> Result<(), PortError> {
    let valid = !topic.is_empty()
        && topic.len() <= 249
        && topic.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(())
    } else {
        Err(PortError::Invalid(format!("topic name {topic:?}: use 1 to 249 ASCII letters, digits, '.', '_' or '-'")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(topic: &str, partition: i32, offset: i64) -> Record {
        Record { topic: topic.into(), partition, offset, key: None, value: vec![], headers: vec![], timestamp_ms: 0 }
    }

    #[test]
    fn next_positions_takes_the_highest_offset_per_partition() {
        let records = [record("a", 0, 4), record("a", 0, 2), record("a", 1, 7), record("b", 0, 0)];
        let positions = next_positions(&records);
        assert_eq!(
            positions,
            vec![
                Position { topic: "a".into(), partition: 0, next_offset: 5 },
                Position { topic: "a".into(), partition: 1, next_offset: 8 },
                Position { topic: "b".into(), partition: 0, next_offset: 1 },
            ]
        );
    }

    #[test]
    fn topic_names_are_checked() {
        assert!(check_topic_name("player.deposits-v1_x").is_ok());
        assert!(check_topic_name("").is_err());
        assert!(check_topic_name("a b").is_err());
        assert!(check_topic_name(&"x".repeat(250)).is_err());
    }

    #[test]
    fn same_key_same_partition() {
        let p = partition_for_key(Some(b"player-1"), 8, 0);
        for rr in 0..10 {
            assert_eq!(partition_for_key(Some(b"player-1"), 8, rr), p);
        }
        assert_eq!(partition_for_key(None, 4, 6), 2);
    }
}
