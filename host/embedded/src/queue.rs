//! The work queue port on SQLite, in the same file as documents and topics: one row per unacknowledged message
//! in `queue_messages` (deleted on ack, so the table holds only the backlog), the acknowledged count per queue
//! in `queue_counters`. A lease stamps `leased_until_ms` from the injected clock, so expiry is testable by
//! moving a manual clock; every lease and ack is one immediate transaction, so two processes sharing the file
//! never lease the same message twice.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::ports::{check_queue_name, PortError, QueueMessage, QueueStats, WorkQueue};
use flowhost_core::Clock;
use rusqlite::{params, OptionalExtension};

use crate::sqlite::Db;

pub(crate) struct SqliteQueue {
    db: Db,
    clock: Arc<dyn Clock>,
}

impl SqliteQueue {
    pub(crate) fn new(db: Db, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock }
    }
}

#[async_trait]
impl WorkQueue for SqliteQueue {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    async fn enqueue_batch(&self, queue: &str, payloads: Vec<Vec<u8>>) -> Result<Vec<String>, PortError> {
        check_queue_name(queue)?;
        let queue = queue.to_owned();
        self.db
            .write(move |c| {
                c.prepare_cached("INSERT INTO queue_counters (queue) VALUES (?1) ON CONFLICT DO NOTHING")?
                    .execute(params![queue])?;
                let mut insert = c.prepare_cached(
                    "INSERT INTO queue_messages (queue, payload, deliveries) VALUES (?1, ?2, 0) RETURNING id",
                )?;
                let mut ids = Vec::with_capacity(payloads.len());
                for payload in payloads {
                    let id: i64 = insert.query_row(params![queue, payload], |r| r.get(0))?;
                    ids.push(id.to_string());
                }
                Ok(ids)
            })
            .await
    }

    async fn lease(
        &self,
        queue: &str,
        consumer: &str,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, PortError> {
        check_queue_name(queue)?;
        if max == 0 {
            return Ok(Vec::new());
        }
        let (queue, consumer) = (queue.to_owned(), consumer.to_owned());
        let now = self.clock.now_ms();
        let until = now.saturating_add(i64::try_from(visibility.as_millis()).unwrap_or(i64::MAX));
        self.db
            .write(move |c| {
                // One write (an immediate transaction): the select and the stamping update are one step for every
                // process sharing the file.
                let mut leased = Vec::new();
                {
                    let mut select = c.prepare_cached(
                        "SELECT id, payload, deliveries FROM queue_messages
                         WHERE queue = ?1 AND (leased_until_ms IS NULL OR leased_until_ms <= ?2)
                         ORDER BY id LIMIT ?3",
                    )?;
                    let rows = select.query_map(params![queue, now, max as i64], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?, r.get::<_, i64>(2)?))
                    })?;
                    for row in rows {
                        leased.push(row?);
                    }
                    let mut stamp = c.prepare_cached(
                        "UPDATE queue_messages SET deliveries = deliveries + 1, leased_until_ms = ?2, consumer = ?3
                         WHERE id = ?1",
                    )?;
                    for (id, _, _) in &leased {
                        stamp.execute(params![id, until, consumer])?;
                    }
                }
                Ok(leased
                    .into_iter()
                    .map(|(id, payload, deliveries)| QueueMessage {
                        id: id.to_string(),
                        payload,
                        deliveries: u32::try_from(deliveries + 1).unwrap_or(u32::MAX),
                    })
                    .collect())
            })
            .await
    }

    async fn ack(&self, queue: &str, ids: &[String]) -> Result<(), PortError> {
        check_queue_name(queue)?;
        // An id that is not ours (not a number) is unknown, and unknown ids are ignored.
        let ids: Vec<i64> = ids.iter().filter_map(|id| id.parse().ok()).collect();
        if ids.is_empty() {
            return Ok(());
        }
        let queue = queue.to_owned();
        self.db
            .write(move |c| {
                // Only a delivered message can be acknowledged: an id nobody leased is not consumed by a stray ack.
                let mut delete =
                    c.prepare_cached("DELETE FROM queue_messages WHERE id = ?1 AND queue = ?2 AND deliveries > 0")?;
                let mut acknowledged = 0_i64;
                for id in ids {
                    acknowledged += delete.execute(params![id, queue])? as i64;
                }
                if acknowledged > 0 {
                    c.prepare_cached("UPDATE queue_counters SET acknowledged = acknowledged + ?2 WHERE queue = ?1")?
                        .execute(params![queue, acknowledged])?;
                }
                Ok(())
            })
            .await
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats, PortError> {
        check_queue_name(queue)?;
        let queue = queue.to_owned();
        self.db
            .call(move |c| {
                let (pending, leased): (i64, i64) = c.query_row(
                    "SELECT COUNT(*), COUNT(leased_until_ms) FROM queue_messages WHERE queue = ?1",
                    params![queue],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                let acknowledged: Option<i64> = c
                    .query_row("SELECT acknowledged FROM queue_counters WHERE queue = ?1", params![queue], |r| r.get(0))
                    .optional()?;
                Ok(QueueStats {
                    pending: pending as u64,
                    leased: leased as u64,
                    acknowledged: acknowledged.unwrap_or(0) as u64,
                })
            })
            .await
    }

    async fn queues(&self) -> Result<Vec<String>, PortError> {
        self.db
            .call(|c| {
                let mut select = c.prepare_cached("SELECT queue FROM queue_counters ORDER BY queue")?;
                let names = select.query_map([], |r| r.get(0))?.collect::<Result<Vec<String>, _>>()?;
                Ok(names)
            })
            .await
    }
}
