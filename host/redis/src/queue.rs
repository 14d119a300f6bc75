//! The work queue port on Redis Streams: one stream per queue with one consumer group (`workers`). `XADD`
//! enqueues, `XREADGROUP ... >` leases new entries, `XAUTOCLAIM` with min-idle-time = the visibility timeout
//! takes over entries whose consumer did not ack in time (redelivery, the delivery count kept by Redis), and a
//! Lua script acknowledges atomically: `XACK`, then `XDEL` of exactly the entries it acknowledged (so the stream
//! holds only the backlog and never grows without bound) and `INCRBY` of the acknowledged counter. Keys share a
//! hash tag per queue, so the scripts stay valid on a Redis Cluster.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::ports::{check_queue_name, Namespace, PortError, QueueMessage, QueueStats, WorkQueue};
use redis::Value;

use crate::{map_error, Connection};

const GROUP: &str = "workers";
/// Every queue name ever written, for `queues()` (the admin API lists them).
const QUEUES_KEY: &str = "flowhost:queues";

/// Acknowledges ARGV[2..] in group ARGV[1]: only entries this XACK moved out of the pending list are deleted and
/// counted, so an unknown, repeated or never-delivered id changes nothing.
const ACK_SCRIPT: &str = r"
local n = 0
for i = 2, #ARGV do
  if redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then
    redis.call('XDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
if n > 0 then redis.call('INCRBY', KEYS[2], n) end
return n
";

/// Backlog (stream length: acked entries are deleted), delivered-unacked (the group's pending count; none when
/// the group does not exist yet) and the acknowledged counter, read in one atomic step.
const STATS_SCRIPT: &str = r"
local len = redis.call('XLEN', KEYS[1])
local acked = tonumber(redis.call('GET', KEYS[2]) or '0')
local leased = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  local p = redis.pcall('XPENDING', KEYS[1], ARGV[1])
  if type(p) == 'table' and p.err == nil then leased = p[1] end
end
return {len, leased, acked}
";

/// A work queue on Redis Streams over one reconnecting connection.
pub struct RedisQueue {
    connection: Connection,
    /// The deployment's key prefix, in front of every key below.
    namespace: Namespace,
    /// Queues whose consumer group this process has created (or found), to skip `XGROUP CREATE` after the first.
    groups: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for RedisQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisQueue").finish_non_exhaustive()
    }
}

/// The stream of `queue`; its keys share the hash tag `{queue}`, so one Lua script may touch them together on a
/// cluster.
fn stream_key(namespace: &Namespace, queue: &str) -> String {
    format!("{}flowhost:queue:{{{queue}}}:stream", namespace.prefix())
}

/// The acknowledged counter of `queue`.
fn acked_key(namespace: &Namespace, queue: &str) -> String {
    format!("{}flowhost:queue:{{{queue}}}:acked", namespace.prefix())
}

/// A stream id is `<ms>-<seq>`; anything else cannot be ours, and Redis would reject the whole ack for it.
fn is_stream_id(id: &str) -> bool {
    id.split_once('-').is_some_and(|(ms, seq)| ms.parse::<u64>().is_ok() && seq.parse::<u64>().is_ok())
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX).max(1)
}

fn bad_reply(command: &str) -> PortError {
    PortError::Backend(format!("Redis {command}: unexpected reply shape"))
}

/// `[[id, [field, value, ...]], ...]` as (id, payload of field `p`).
fn parse_entries(value: &Value, command: &str) -> Result<Vec<(String, Vec<u8>)>, PortError> {
    let Value::Array(entries) = value else { return Err(bad_reply(command)) };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(parts) = entry else { return Err(bad_reply(command)) };
        let (Some(id), Some(Value::Array(fields))) = (parts.first(), parts.get(1)) else {
            // A nil body is an entry deleted while pending (Redis < 7 reports them so); skip it.
            continue;
        };
        let id: String = redis::from_redis_value_ref(id).map_err(|_| bad_reply(command))?;
        let mut payload = Vec::new();
        for pair in fields.chunks(2) {
            if let [Value::BulkString(name), Value::BulkString(value)] = pair {
                if name == b"p" {
                    payload = value.clone();
                }
            }
        }
        out.push((id, payload));
    }
    Ok(out)
}

impl RedisQueue {
    /// Connects to `url` (`redis://host:port/db`) and verifies the connection with `PING`.
    pub async fn connect(url: &str) -> Result<RedisQueue, PortError> {
        RedisQueue::connect_in(url, Namespace::NONE).await
    }

    /// [`RedisQueue::connect`] with every key under `namespace` (separator `:`).
    pub async fn connect_in(url: &str, namespace: Namespace) -> Result<RedisQueue, PortError> {
        Ok(RedisQueue { connection: Connection::connect(url).await?, namespace, groups: Mutex::new(HashSet::new()) })
    }

    /// [`RedisQueue::connect_in`] that starts without Redis when it does not answer: calls fail with
    /// `Unavailable` until a later attempt connects. Only a malformed URL fails.
    pub async fn open_in(url: &str, namespace: Namespace) -> Result<RedisQueue, PortError> {
        Ok(RedisQueue { connection: Connection::open(url).await?, namespace, groups: Mutex::new(HashSet::new()) })
    }

    fn stream_key(&self, queue: &str) -> String {
        stream_key(&self.namespace, queue)
    }

    fn acked_key(&self, queue: &str) -> String {
        acked_key(&self.namespace, queue)
    }

    fn queues_key(&self) -> String {
        self.namespace.wire(QUEUES_KEY).into_owned()
    }

    /// Creates the consumer group from the start of the stream (creating the stream) unless it exists.
    async fn ensure_group(&self, queue: &str) -> Result<(), PortError> {
        if self.groups.lock().unwrap_or_else(|p| p.into_inner()).contains(queue) {
            return Ok(());
        }
        let mut connection = self.connection.get().await?;
        let created: Result<(), _> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(self.stream_key(queue))
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut connection)
            .await;
        match created {
            Ok(()) => {}
            Err(error) if error.code() == Some("BUSYGROUP") => {}
            Err(error) => return Err(map_error(error, "XGROUP CREATE")),
        }
        self.groups.lock().unwrap_or_else(|p| p.into_inner()).insert(queue.to_owned());
        Ok(())
    }

    /// Takes over up to `max` entries idle for at least `visibility`, with their new delivery counts.
    async fn claim_expired(
        &self,
        queue: &str,
        consumer: &str,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, PortError> {
        let mut connection = self.connection.get().await?;
        let key = self.stream_key(queue);
        let reply: Value = redis::cmd("XAUTOCLAIM")
            .arg(&key)
            .arg(GROUP)
            .arg(consumer)
            .arg(millis(visibility))
            .arg("0-0")
            .arg("COUNT")
            .arg(max)
            .query_async(&mut connection)
            .await
            .map_err(|error| map_error(error, "XAUTOCLAIM"))?;
        let Value::Array(parts) = &reply else { return Err(bad_reply("XAUTOCLAIM")) };
        let claimed = parse_entries(parts.get(1).ok_or_else(|| bad_reply("XAUTOCLAIM"))?, "XAUTOCLAIM")?;
        let (Some((first, _)), Some((last, _))) = (claimed.first(), claimed.last()) else { return Ok(Vec::new()) };
        // XAUTOCLAIM does not return delivery counts; the pending list of this consumer over the claimed range
        // does (already increased by the claim).
        let pending: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
            .arg(&key)
            .arg(GROUP)
            .arg(first)
            .arg(last)
            .arg(claimed.len())
            .arg(consumer)
            .query_async(&mut connection)
            .await
            .map_err(|error| map_error(error, "XPENDING"))?;
        let counts: std::collections::HashMap<String, u64> =
            pending.into_iter().map(|(id, _, _, deliveries)| (id, deliveries)).collect();
        Ok(claimed
            .into_iter()
            .map(|(id, payload)| {
                // Another consumer may have claimed it again in between; it was delivered at least twice.
                let deliveries = counts.get(&id).copied().unwrap_or(2);
                QueueMessage { id, payload, deliveries: u32::try_from(deliveries).unwrap_or(u32::MAX) }
            })
            .collect())
    }
}

#[async_trait]
impl WorkQueue for RedisQueue {
    fn backend(&self) -> &'static str {
        "redis"
    }

    async fn enqueue_batch(&self, queue: &str, payloads: Vec<Vec<u8>>) -> Result<Vec<String>, PortError> {
        check_queue_name(queue)?;
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        let mut connection = self.connection.get().await?;
        let key = self.stream_key(queue);
        let mut pipe = redis::pipe();
        pipe.cmd("SADD").arg(self.queues_key()).arg(queue).ignore();
        for payload in &payloads {
            pipe.cmd("XADD").arg(&key).arg("*").arg("p").arg(payload.as_slice());
        }
        pipe.query_async(&mut connection).await.map_err(|error| map_error(error, "XADD"))
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
        self.ensure_group(queue).await?;
        let mut leased = self.claim_expired(queue, consumer, max, visibility).await?;
        if leased.len() < max {
            let mut connection = self.connection.get().await?;
            let reply: Value = redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg(GROUP)
                .arg(consumer)
                .arg("COUNT")
                .arg(max - leased.len())
                .arg("STREAMS")
                .arg(self.stream_key(queue))
                .arg(">")
                .query_async(&mut connection)
                .await
                .map_err(|error| {
                    if error.code() == Some("NOGROUP") {
                        // The stream was deleted behind our back; recreate the group on the next call.
                        self.groups.lock().unwrap_or_else(|p| p.into_inner()).remove(queue);
                    }
                    map_error(error, "XREADGROUP")
                })?;
            // `[[stream, entries]]`, or nil when nothing is new.
            if let Value::Array(streams) = &reply {
                for stream in streams {
                    let Value::Array(parts) = stream else { return Err(bad_reply("XREADGROUP")) };
                    let entries = parts.get(1).ok_or_else(|| bad_reply("XREADGROUP"))?;
                    leased.extend(
                        parse_entries(entries, "XREADGROUP")?.into_iter().map(|(id, payload)| QueueMessage {
                            id,
                            payload,
                            deliveries: 1,
                        }),
                    );
                }
            }
        }
        Ok(leased)
    }

    async fn ack(&self, queue: &str, ids: &[String]) -> Result<(), PortError> {
        check_queue_name(queue)?;
        let ids: Vec<&String> = ids.iter().filter(|id| is_stream_id(id)).collect();
        if ids.is_empty() {
            return Ok(());
        }
        let mut connection = self.connection.get().await?;
        let _acknowledged: i64 = redis::cmd("EVAL")
            .arg(ACK_SCRIPT)
            .arg(2)
            .arg(self.stream_key(queue))
            .arg(self.acked_key(queue))
            .arg(GROUP)
            .arg(ids)
            .query_async(&mut connection)
            .await
            .map_err(|error| map_error(error, "ack script"))?;
        Ok(())
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats, PortError> {
        check_queue_name(queue)?;
        let mut connection = self.connection.get().await?;
        let (pending, leased, acknowledged): (u64, u64, u64) = redis::cmd("EVAL")
            .arg(STATS_SCRIPT)
            .arg(2)
            .arg(self.stream_key(queue))
            .arg(self.acked_key(queue))
            .arg(GROUP)
            .query_async(&mut connection)
            .await
            .map_err(|error| map_error(error, "stats script"))?;
        Ok(QueueStats { pending, leased, acknowledged })
    }

    async fn queues(&self) -> Result<Vec<String>, PortError> {
        let mut connection = self.connection.get().await?;
        let mut names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.queues_key())
            .query_async(&mut connection)
            .await
            .map_err(|error| map_error(error, "SMEMBERS"))?;
        names.sort();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_stream_ids_reach_redis() {
        assert!(is_stream_id("1700000000000-0"));
        for bad in ["", "12", "a-1", "1-", "-1", "1-2-3"] {
            assert!(!is_stream_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn keys_share_a_hash_tag() {
        assert_eq!(stream_key(&Namespace::NONE, "q"), "flowhost:queue:{q}:stream");
        assert_eq!(acked_key(&Namespace::NONE, "q"), "flowhost:queue:{q}:acked");
        let blue = Namespace::new("blue", ':');
        assert_eq!(stream_key(&blue, "q"), "blue:flowhost:queue:{q}:stream");
        assert_eq!(acked_key(&blue, "q"), "blue:flowhost:queue:{q}:acked");
    }
}
