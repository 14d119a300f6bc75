//! The topics port on SQLite: an append-only `records` table per (topic, partition, offset), committed group
//! offsets in `group_offsets`. Topics are created on first use with the configured partition count; keys pick
//! the partition with a stable hash, so one key's records stay in order.
//!
//! Consumers of one group in this process split the partitions between them (member rank modulo member
//! count), re-reading the group's committed offsets whenever the assignment changes, as Kafka does on a
//! rebalance: a member that loses partitions first commits what it marked in them (on its next poll), and
//! paused partitions are skipped by the read. Another process sharing the file (the `flowhost events` commands) sees the same log; consumers
//! wake at once for writes of their own process and within `CROSS_PROCESS_POLL` for writes of another.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::ports::{
    check_topic_name, merge_marks, partition_for_key, ConsumerConfig, Header, OutRecord, PartitionLag, PortError,
    Position, Record, StartFrom, TopicConsumer, Topics,
};
use flowhost_core::Clock;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::Notify;

use crate::sqlite::Db;

const CROSS_PROCESS_POLL: Duration = Duration::from_millis(50);

struct Inner {
    db: Db,
    default_partitions: i32,
    clock: Arc<dyn Clock>,
    appended: Notify,
    /// Transactions appended to each topic by this process, so a consumer woken by [`Inner::appended`] reads
    /// again only when one of its topics grew.
    appends: Mutex<HashMap<String, u64>>,
    round_robin: AtomicU64,
    next_member: AtomicU64,
    /// Live members of each consumer group in this process, in join order.
    members: Mutex<HashMap<String, Vec<u64>>>,
}

pub(crate) struct SqliteTopics {
    inner: Arc<Inner>,
}

impl SqliteTopics {
    pub(crate) fn new(db: Db, default_partitions: i32, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner: Arc::new(Inner {
                db,
                default_partitions: default_partitions.max(1),
                clock,
                appended: Notify::new(),
                appends: Mutex::new(HashMap::new()),
                round_robin: AtomicU64::new(0),
                next_member: AtomicU64::new(1),
                members: Mutex::new(HashMap::new()),
            }),
        }
    }
}

/// How long and how much of each partition the embedded log keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Records older than this (by their timestamp) are deleted; `None` keeps them by age.
    pub max_age_ms: Option<i64>,
    /// Oldest records beyond this many bytes (key + value + headers) per partition are deleted.
    pub max_bytes: Option<i64>,
}

impl Default for Retention {
    /// 7 days and 1 GiB per partition.
    fn default() -> Self {
        Retention { max_age_ms: Some(7 * 24 * 60 * 60 * 1000), max_bytes: Some(1 << 30) }
    }
}

impl SqliteTopics {
    /// Deletes the records `retention` no longer keeps, measuring age by the injected clock; returns how many.
    ///
    /// Offsets are never renumbered, so committed offsets stay valid: a group whose offset fell behind
    /// retention reads from the oldest kept record (its fetch is `offset >= committed`). The newest record of
    /// each partition is always kept, because the next offset is derived from it.
    pub(crate) async fn apply_retention(&self, retention: Retention) -> Result<u64, PortError> {
        let now = self.inner.clock.now_ms();
        self.inner
            .db
            .call(move |c| {
                let transaction = c.transaction()?;
                let partitions: Vec<(String, i32)> = transaction
                    .prepare("SELECT DISTINCT topic, partition FROM records")?
                    .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                let mut deleted = 0u64;
                for (topic, partition) in partitions {
                    let newest: i64 = transaction.query_row(
                        "SELECT MAX(offset) FROM records WHERE topic = ?1 AND partition = ?2",
                        params![topic, partition],
                        |row| row.get(0),
                    )?;
                    // The first offset to keep by age, then by size; the later of the two wins.
                    let mut keep_from = i64::MIN;
                    if let Some(age) = retention.max_age_ms {
                        let by_age: Option<i64> = transaction.query_row(
                            "SELECT MIN(offset) FROM records WHERE topic = ?1 AND partition = ?2 AND timestamp_ms >= ?3",
                            params![topic, partition, now.saturating_sub(age)],
                            |row| row.get(0),
                        )?;
                        keep_from = keep_from.max(by_age.unwrap_or(newest));
                    }
                    if let Some(bytes) = retention.max_bytes {
                        // The newest offset whose running size (newest first) exceeds the budget is the last one
                        // to drop.
                        let over: Option<i64> = transaction
                            .query_row(
                                "SELECT offset FROM (SELECT offset, SUM(length(value) + COALESCE(length(key), 0)
                                     + COALESCE(length(headers), 0)) OVER (ORDER BY offset DESC) AS running
                                     FROM records WHERE topic = ?1 AND partition = ?2)
                                 WHERE running > ?3 ORDER BY offset DESC LIMIT 1",
                                params![topic, partition, bytes],
                                |row| row.get(0),
                            )
                            .optional()?;
                        if let Some(over) = over {
                            keep_from = keep_from.max(over + 1);
                        }
                    }
                    let keep_from = keep_from.min(newest);
                    deleted += transaction.execute(
                        "DELETE FROM records WHERE topic = ?1 AND partition = ?2 AND offset < ?3",
                        params![topic, partition, keep_from],
                    )? as u64;
                }
                transaction.commit()?;
                Ok(deleted)
            })
            .await
    }
}

/// The partition count of `topic`, `None` when it does not exist.
fn partitions_of(c: &Connection, topic: &str) -> Result<Option<i32>, rusqlite::Error> {
    c.prepare_cached("SELECT partitions FROM topics WHERE name = ?1")?
        .query_row(params![topic], |r| r.get(0))
        .optional()
}

/// The partition count of `topic`, creating it with `default` partitions when it does not exist.
fn ensure_topic(c: &Connection, topic: &str, default: i32) -> Result<i32, rusqlite::Error> {
    if let Some(n) = partitions_of(c, topic)? {
        return Ok(n);
    }
    c.execute("INSERT INTO topics (name, partitions) VALUES (?1, ?2) ON CONFLICT DO NOTHING", params![topic, default])?;
    c.query_row("SELECT partitions FROM topics WHERE name = ?1", params![topic], |r| r.get(0))
}

fn end_offset(c: &Connection, topic: &str, partition: i32) -> Result<i64, rusqlite::Error> {
    c.query_row(
        "SELECT COALESCE(MAX(offset) + 1, 0) FROM records WHERE topic = ?1 AND partition = ?2",
        params![topic, partition],
        |r| r.get(0),
    )
}

fn encode_headers(headers: &[Header]) -> Vec<u8> {
    let mut out = Vec::new();
    for header in headers {
        out.extend_from_slice(&(header.key.len() as u32).to_be_bytes());
        out.extend_from_slice(header.key.as_bytes());
        out.extend_from_slice(&(header.value.len() as u32).to_be_bytes());
        out.extend_from_slice(&header.value);
    }
    out
}

fn decode_headers(mut bytes: &[u8]) -> Vec<Header> {
    fn take<'a>(bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
        let len = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        let value = bytes.get(4..4 + len)?;
        *bytes = &bytes[4 + len..];
        Some(value)
    }
    let mut headers = Vec::new();
    while !bytes.is_empty() {
        let (Some(key), Some(value)) = (take(&mut bytes), take(&mut bytes)) else { break };
        headers.push(Header { key: String::from_utf8_lossy(key).into_owned(), value: value.to_vec() });
    }
    headers
}

#[async_trait]
impl Topics for SqliteTopics {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    async fn publish(&self, records: &[OutRecord]) -> Result<(), PortError> {
        if records.is_empty() {
            return Ok(());
        }
        for record in records {
            check_topic_name(&record.topic)?;
        }
        // The write runs on the group writer's thread (one commit shared with the writes waiting beside it),
        // which needs owned rows: one copy per call, already in the stored form (headers encoded).
        let rows: Vec<(String, Option<Vec<u8>>, Vec<u8>, Vec<u8>)> = records
            .iter()
            .map(|r| (r.topic.clone(), r.key.clone(), r.value.clone(), encode_headers(&r.headers)))
            .collect();
        let default_partitions = self.inner.default_partitions;
        let now = self.inner.clock.now_ms();
        let first_slot = self.inner.round_robin.fetch_add(records.len() as u64, Ordering::Relaxed);
        self.inner
            .db
            .write(move |c| {
                let mut partitions: HashMap<String, i32> = HashMap::new();
                let mut next: HashMap<(String, i32), i64> = HashMap::new();
                {
                    let mut insert = c.prepare_cached(
                        "INSERT INTO records (topic, partition, offset, key, value, headers, timestamp_ms)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )?;
                    for (i, (topic, key, value, headers)) in rows.iter().enumerate() {
                        let count = match partitions.get(topic) {
                            Some(n) => *n,
                            None => {
                                let n = ensure_topic(c, topic, default_partitions)?;
                                partitions.insert(topic.clone(), n);
                                n
                            }
                        };
                        let partition = partition_for_key(key.as_deref(), count, first_slot + i as u64);
                        let slot = (topic.clone(), partition);
                        let offset = match next.get(&slot) {
                            Some(o) => *o,
                            None => end_offset(c, topic, partition)?,
                        };
                        next.insert(slot, offset + 1);
                        insert.execute(params![topic, partition, offset, key, value, headers, now])?;
                    }
                }
                Ok(())
            })
            .await?;
        {
            let mut appends = self.inner.appends.lock().unwrap_or_else(|p| p.into_inner());
            for topic in records.iter().map(|r| r.topic.as_str()).collect::<HashSet<_>>() {
                *appends.entry(topic.to_owned()).or_default() += 1;
            }
        }
        self.inner.appended.notify_waiters();
        Ok(())
    }

    /// One file holds one copy: the replication factor has nothing to choose here.
    async fn create_topic_replicated(
        &self,
        topic: &str,
        partitions: i32,
        _replication_factor: Option<i16>,
    ) -> Result<(), PortError> {
        check_topic_name(topic)?;
        let (topic, partitions) = (topic.to_owned(), partitions.max(1));
        self.inner.db.call(move |c| ensure_topic(c, &topic, partitions).map(|_| ())).await
    }

    async fn exists(&self, topic: &str) -> Result<bool, PortError> {
        let topic = topic.to_owned();
        self.inner
            .db
            .call(move |c| c.prepare_cached("SELECT 1 FROM topics WHERE name = ?1")?.exists(params![topic]))
            .await
    }

    /// An unknown topic has no partitions, so no lag. The log is never truncated, so a group that never
    /// committed is behind by the whole partition.
    async fn lag(&self, group: &str, topic: &str) -> Result<Vec<PartitionLag>, PortError> {
        let (group, topic) = (group.to_owned(), topic.to_owned());
        self.inner
            .db
            .call(move |c| {
                let partitions = partitions_of(c, &topic)?;
                let mut lags = Vec::new();
                for partition in 0..partitions.unwrap_or(0) {
                    let end = end_offset(c, &topic, partition)?;
                    let committed = committed_offset(c, &group, &topic, partition)?;
                    let lag = (end - committed.unwrap_or(0)).max(0);
                    lags.push(PartitionLag { partition, committed, end, lag });
                }
                Ok(lags)
            })
            .await
    }

    async fn seed_group(&self, group: &str, positions: &[Position]) -> Result<(), PortError> {
        let has_members = {
            let members = self.inner.members.lock().unwrap_or_else(|p| p.into_inner());
            members.get(group).is_some_and(|members| !members.is_empty())
        };
        if has_members {
            return Err(PortError::Conflict(format!("group {group:?} has members; its offsets are theirs to commit")));
        }
        let (group, positions) = (group.to_owned(), positions.to_vec());
        self.inner.db.write(move |c| store_offsets(c, &group, &positions)).await
    }

    async fn consumer(&self, config: ConsumerConfig) -> Result<Box<dyn TopicConsumer>, PortError> {
        for topic in &config.topics {
            check_topic_name(topic)?;
        }
        let member = self.inner.next_member.fetch_add(1, Ordering::Relaxed);
        self.inner
            .members
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(config.group.clone())
            .or_default()
            .push(member);
        Ok(Box::new(SqliteConsumer {
            inner: self.inner.clone(),
            config,
            member,
            positions: HashMap::new(),
            paused: HashSet::new(),
            marks: BTreeMap::new(),
            closed: false,
        }))
    }
}

struct SqliteConsumer {
    inner: Arc<Inner>,
    config: ConsumerConfig,
    member: u64,
    /// In-memory read positions of the partitions currently assigned to this member.
    positions: HashMap<(String, i32), i64>,
    /// Assigned partitions `poll` skips.
    paused: HashSet<(String, i32)>,
    /// Positions marked done and not committed yet: committed on revoke and on `close`.
    marks: BTreeMap<(String, i32), i64>,
    closed: bool,
}

fn committed_offset(c: &Connection, group: &str, topic: &str, partition: i32) -> Result<Option<i64>, rusqlite::Error> {
    c.query_row(
        "SELECT next_offset FROM group_offsets WHERE grp = ?1 AND topic = ?2 AND partition = ?3",
        params![group, topic, partition],
        |r| r.get(0),
    )
    .optional()
}

/// Stores `group`'s committed positions; run on the group writer (`Db::write`), whose transaction makes them
/// atomic together.
fn store_offsets(c: &Connection, group: &str, positions: &[Position]) -> Result<(), rusqlite::Error> {
    let mut upsert = c.prepare_cached(
        "INSERT INTO group_offsets (grp, topic, partition, next_offset) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (grp, topic, partition) DO UPDATE SET next_offset = excluded.next_offset",
    )?;
    for p in positions {
        upsert.execute(params![group, p.topic, p.partition, p.next_offset])?;
    }
    Ok(())
}

fn marks_to_positions(marks: &BTreeMap<(String, i32), i64>) -> Vec<Position> {
    marks
        .iter()
        .map(|((topic, partition), next_offset)| Position {
            topic: topic.clone(),
            partition: *partition,
            next_offset: *next_offset,
        })
        .collect()
}

impl Drop for SqliteConsumer {
    fn drop(&mut self) {
        self.leave();
    }
}

impl SqliteConsumer {
    /// Leaves the group (idempotent): the other members take over this member's partitions on their next poll.
    fn leave(&mut self) {
        let mut members = self.inner.members.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = members.get_mut(&self.config.group) {
            list.retain(|m| *m != self.member);
            if list.is_empty() {
                members.remove(&self.config.group);
            }
        }
    }

    /// Transactions appended to this member's topics by this process so far (see [`Inner::appends`]).
    fn appends(&self) -> u64 {
        let appends = self.inner.appends.lock().unwrap_or_else(|p| p.into_inner());
        self.config.topics.iter().filter_map(|topic| appends.get(topic)).sum()
    }

    fn check_open(&self) -> Result<(), PortError> {
        if self.closed {
            return Err(PortError::Invalid(format!("the consumer of group {:?} is closed", self.config.group)));
        }
        Ok(())
    }

    /// (rank, member count) of this consumer in its group.
    fn rank(&self) -> (usize, usize) {
        let members = self.inner.members.lock().unwrap_or_else(|p| p.into_inner());
        let list = members.get(&self.config.group).map(Vec::as_slice).unwrap_or(&[]);
        let rank = list.iter().position(|m| *m == self.member).unwrap_or(0);
        (rank, list.len().max(1))
    }

    /// One read: refreshes the assignment, then fetches up to `max` records from the assigned partitions.
    ///
    /// On a reader connection when that needs no write (every topic exists and no partition with marked
    /// positions was revoked), so a poll never queues behind the writer: a producer's transaction, a commit or a
    /// restart of the write-ahead log. Else on the writer, which creates the topics and commits the marks first.
    async fn fetch(&mut self, max: usize) -> Result<Vec<Record>, PortError> {
        let (rank, members) = self.rank();
        let request = FetchRequest {
            topics: self.config.topics.clone(),
            group: self.config.group.clone(),
            start: self.config.start,
            default_partitions: self.inner.default_partitions,
            rank,
            members,
            positions: self.positions.clone(),
            marks: self.marks.clone(),
            paused: self.paused.clone(),
            max: max.max(1),
        };
        let fetched = match self.inner.db.read(move |c| fetch_rows(c, &request, false).map(|f| (f, request))).await? {
            (Some(fetched), _) => fetched,
            (None, request) => {
                let fetched = self.inner.db.write(move |c| fetch_rows(c, &request, true)).await?;
                fetched.expect("the writer fetches")
            }
        };
        self.positions = fetched.positions;
        self.marks.retain(|slot, _| fetched.assigned.contains(slot));
        self.paused.retain(|slot| fetched.assigned.contains(slot));
        Ok(fetched.records)
    }
}

/// What one [`SqliteConsumer::fetch`] reads with.
struct FetchRequest {
    topics: Vec<String>,
    group: String,
    start: StartFrom,
    default_partitions: i32,
    /// This member's rank among `members` in its group.
    rank: usize,
    members: usize,
    positions: HashMap<(String, i32), i64>,
    marks: BTreeMap<(String, i32), i64>,
    paused: HashSet<(String, i32)>,
    max: usize,
}

/// What one fetch read: the member's new positions, its records and the partitions assigned to it.
struct Fetched {
    positions: HashMap<(String, i32), i64>,
    records: Vec<Record>,
    assigned: Vec<(String, i32)>,
}

/// Assigns the member its partitions (every `members`-th one from its rank), commits the marks of partitions
/// it lost, and reads up to `max` records from its positions. `None` when that needs a write and `writable` is
/// false: a topic to create or revoked marks to commit.
fn fetch_rows(c: &Connection, request: &FetchRequest, writable: bool) -> Result<Option<Fetched>, rusqlite::Error> {
    let FetchRequest { topics, group, start, default_partitions, rank, members, positions, marks, paused, max } =
        request;
    let mut assigned = Vec::new();
    for topic in topics {
        let partitions = if writable {
            ensure_topic(c, topic, *default_partitions)?
        } else {
            let Some(partitions) = partitions_of(c, topic)? else { return Ok(None) };
            partitions
        };
        for partition in 0..partitions {
            assigned.push((topic.clone(), partition));
        }
    }
    let assigned: Vec<(String, i32)> =
        assigned.into_iter().enumerate().filter(|(i, _)| i % members == *rank).map(|(_, p)| p).collect();
    let mut positions: HashMap<(String, i32), i64> =
        positions.iter().filter(|(slot, _)| assigned.contains(slot)).map(|(slot, at)| (slot.clone(), *at)).collect();
    // Partitions this member lost: commit what it marked there before anyone reads on.
    let revoked: BTreeMap<(String, i32), i64> =
        marks.iter().filter(|(slot, _)| !assigned.contains(slot)).map(|(slot, at)| (slot.clone(), *at)).collect();
    if !revoked.is_empty() {
        if !writable {
            return Ok(None);
        }
        store_offsets(c, group, &marks_to_positions(&revoked))?;
    }
    for (topic, partition) in &assigned {
        if positions.contains_key(&(topic.clone(), *partition)) {
            continue;
        }
        let committed = committed_offset(c, group, topic, *partition)?;
        let position = match (committed, start) {
            (Some(offset), _) => offset,
            (None, StartFrom::Earliest) => 0,
            (None, StartFrom::Latest) => end_offset(c, topic, *partition)?,
        };
        positions.insert((topic.clone(), *partition), position);
    }
    let mut records = Vec::new();
    let mut select = c.prepare_cached(
        "SELECT offset, key, value, headers, timestamp_ms FROM records
         WHERE topic = ?1 AND partition = ?2 AND offset >= ?3 ORDER BY offset LIMIT ?4",
    )?;
    for (topic, partition) in &assigned {
        if records.len() >= *max {
            break;
        }
        if paused.contains(&(topic.clone(), *partition)) {
            continue;
        }
        let position = positions[&(topic.clone(), *partition)];
        let rows = select.query_map(params![topic, partition, position, (max - records.len()) as i64], |row| {
            Ok(Record {
                topic: topic.clone(),
                partition: *partition,
                offset: row.get(0)?,
                key: row.get(1)?,
                value: row.get(2)?,
                headers: decode_headers(&row.get::<_, Option<Vec<u8>>>(3)?.unwrap_or_default()),
                timestamp_ms: row.get(4)?,
            })
        })?;
        for record in rows {
            let record = record?;
            positions.insert((topic.clone(), *partition), record.offset + 1);
            records.push(record);
        }
    }
    Ok(Some(Fetched { positions, records, assigned }))
}

#[async_trait]
impl TopicConsumer for SqliteConsumer {
    async fn poll(&mut self, max: usize, timeout: Duration) -> Result<Vec<Record>, PortError> {
        self.check_open()?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let inner = self.inner.clone();
            let appended = inner.appended.notified();
            tokio::pin!(appended);
            appended.as_mut().enable();
            let seen = self.appends();
            let records = self.fetch(max.max(1)).await?;
            let now = tokio::time::Instant::now();
            if !records.is_empty() || now >= deadline {
                return Ok(records);
            }
            // Read again after an append to one of this member's topics in this process, or after a while
            // (another process may append to the file). An append to another topic only wakes the wait.
            let until = now + (deadline - now).min(CROSS_PROCESS_POLL);
            while tokio::time::timeout_at(until, appended.as_mut()).await.is_ok() {
                appended.set(inner.appended.notified());
                appended.as_mut().enable();
                if self.appends() != seen {
                    break;
                }
            }
        }
    }

    async fn commit(&mut self, positions: &[Position]) -> Result<(), PortError> {
        if positions.is_empty() {
            return Ok(());
        }
        self.check_open()?;
        let group = self.config.group.clone();
        let owned = positions.to_vec();
        self.inner.db.write(move |c| store_offsets(c, &group, &owned)).await?;
        // A mark at or before what was just committed must not move the commit back on close.
        for p in positions {
            let slot = (p.topic.clone(), p.partition);
            if self.marks.get(&slot).is_some_and(|marked| *marked <= p.next_offset) {
                self.marks.remove(&slot);
            }
        }
        Ok(())
    }

    async fn pause(&mut self, topic: &str, partition: i32) -> Result<(), PortError> {
        self.check_open()?;
        self.paused.insert((topic.to_owned(), partition));
        Ok(())
    }

    /// The read position of the partition stayed where the last returned record left it, so reading simply
    /// goes on from there.
    async fn resume(&mut self, topic: &str, partition: i32) -> Result<(), PortError> {
        self.check_open()?;
        self.paused.remove(&(topic.to_owned(), partition));
        Ok(())
    }

    fn mark(&mut self, positions: &[Position]) {
        merge_marks(&mut self.marks, positions);
    }

    async fn close(&mut self) -> Result<(), PortError> {
        self.check_open()?;
        let marked = marks_to_positions(&self.marks);
        if !marked.is_empty() {
            let group = self.config.group.clone();
            self.inner.db.write(move |c| store_offsets(c, &group, &marked)).await?;
            self.marks.clear();
        }
        self.closed = true;
        self.leave();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_core::ports::{next_positions, ConsumerConfig, OutRecord, StartFrom, Topics};
    use flowhost_core::ManualClock;

    fn record(topic: &str, value: &[u8]) -> OutRecord {
        OutRecord { topic: topic.into(), key: None, value: value.to_vec(), headers: vec![] }
    }

    /// Age and size retention delete the oldest records by the injected clock, keep the newest record, and a
    /// group whose committed offset fell behind resumes at the oldest kept record with offsets unchanged.
    #[tokio::test]
    async fn retention_by_age_and_size_keeps_offsets_valid() {
        let dir = tempfile::tempdir().expect("temp dir");
        let clock = Arc::new(ManualClock::new(1_000));
        let db = Db::open(&dir.path().join("t.db")).expect("open");
        let topics = SqliteTopics::new(db, 1, clock.clone());
        topics.publish(&[record("t", b"0123456789"), record("t", b"0123456789")]).await.unwrap();
        let mut group = topics
            .consumer(ConsumerConfig { group: "g".into(), topics: vec!["t".into()], start: StartFrom::Earliest })
            .await
            .unwrap();
        let first = group.poll(1, Duration::from_secs(5)).await.unwrap();
        assert_eq!(first[0].offset, 0);
        group.commit(&next_positions(&first)).await.unwrap();
        drop(group);
        clock.advance_ms(10_000);
        topics.publish(&[record("t", b"0123456789"), record("t", b"0123456789")]).await.unwrap();

        let age = Retention { max_age_ms: Some(5_000), max_bytes: None };
        assert_eq!(topics.apply_retention(age).await.unwrap(), 2, "the two old records go");
        let size = Retention { max_age_ms: None, max_bytes: Some(15) };
        assert_eq!(topics.apply_retention(size).await.unwrap(), 1, "only the newest 10 bytes fit in 15");
        let everything = Retention { max_age_ms: Some(0), max_bytes: Some(0) };
        clock.advance_ms(1);
        assert_eq!(topics.apply_retention(everything).await.unwrap(), 0, "the newest record always stays");

        let mut group = topics
            .consumer(ConsumerConfig { group: "g".into(), topics: vec!["t".into()], start: StartFrom::Earliest })
            .await
            .unwrap();
        let resumed = group.poll(10, Duration::from_secs(5)).await.unwrap();
        assert_eq!(resumed.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![3]);
        topics.publish(&[record("t", b"x")]).await.unwrap();
        assert_eq!(
            group.poll(10, Duration::from_secs(5)).await.unwrap()[0].offset,
            4,
            "offsets continue after retention"
        );
    }

    #[test]
    fn headers_round_trip() {
        let headers = vec![
            Header { key: "a".into(), value: b"1".to_vec() },
            Header { key: "a".into(), value: vec![] },
            Header { key: "ünï".into(), value: vec![0, 255] },
        ];
        assert_eq!(decode_headers(&encode_headers(&headers)), headers);
        assert_eq!(decode_headers(&[0, 0]), vec![]);
    }
}
