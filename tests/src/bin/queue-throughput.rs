//! Work queue throughput: for each backend (embedded SQLite always; Redis Streams and JetStream when the test
//! servers' `FLOWHOST_TEST_REDIS_URL` / `FLOWHOST_TEST_NATS_URL` are set) and batch size, enqueues N messages
//! in batches, then drains them with lease + ack of the same batch size, and prints a Markdown table:
//! enqueue/s, lease+ack/s, the whole enqueue+lease+ack cycle per second and the median lease call latency.
//!
//! `cargo run -p flowhost-tests --bin queue-throughput [scale]` (scale multiplies the message counts).

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_core::ports::WorkQueue;
use flowhost_core::SystemClock;

const VISIBILITY: Duration = Duration::from_secs(60);

/// Prints one row and records its figures as `backend` (`embedded`, `redis`, `jetstream`) and the batch size.
async fn measure(
    report: &mut Report,
    backend: &str,
    label: &str,
    queue: &dyn WorkQueue,
    batch: usize,
    messages: usize,
) {
    let name = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let payload = vec![b'x'; 256];

    let start = Instant::now();
    let mut left = messages;
    while left > 0 {
        let n = left.min(batch);
        queue.enqueue_batch(&name, vec![payload.clone(); n]).await.expect("enqueue");
        left -= n;
    }
    let enqueue = start.elapsed();

    let drain = Instant::now();
    let mut acked = 0;
    let mut lease_latencies = Vec::new();
    while acked < messages {
        let call = Instant::now();
        let leased = queue.lease(&name, "bench", batch, VISIBILITY).await.expect("lease");
        lease_latencies.push(call.elapsed());
        assert!(!leased.is_empty(), "{label}: the queue ran dry at {acked} of {messages}");
        let ids: Vec<String> = leased.into_iter().map(|m| m.id).collect();
        queue.ack(&name, &ids).await.expect("ack");
        acked += ids.len();
    }
    let drain = drain.elapsed();
    let stats = queue.stats(&name).await.expect("stats");
    assert_eq!((stats.pending, stats.acknowledged), (0, messages as u64), "{label}: counts after the drain");

    lease_latencies.sort();
    let p50 = lease_latencies[lease_latencies.len() / 2];
    let per_second = |d: Duration| messages as f64 / d.as_secs_f64();
    println!(
        "| {label} | {batch} | {messages} | {:.0} | {:.0} | {:.0} | {:.2} |",
        per_second(enqueue),
        per_second(drain),
        per_second(enqueue + drain),
        p50.as_secs_f64() * 1000.0,
    );
    let name = format!("{backend}, batch {batch}");
    report.higher(&format!("{name}: enqueue"), "/s", per_second(enqueue));
    report.higher(&format!("{name}: lease+ack"), "/s", per_second(drain));
    report.higher(&format!("{name}: enqueue+lease+ack"), "/s", per_second(enqueue + drain));
    report.lower(&format!("{name}: lease p50"), "ms", p50.as_secs_f64() * 1000.0);
}

async fn run(report: &mut Report, backend: &str, label: &str, queue: Arc<dyn WorkQueue>, scale: usize) {
    for (batch, messages) in [(1, 1_000), (10, 5_000), (100, 20_000)] {
        measure(report, backend, label, queue.as_ref(), batch, messages * scale).await;
    }
}

#[tokio::main]
async fn main() {
    let mut report = Report::new("queue-throughput");
    let scale: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    println!("| backend | batch | messages | enqueue/s | lease+ack/s | enqueue+lease+ack/s | lease p50 ms |");
    println!("|---|---|---|---|---|---|---|");

    let dir = tempfile::tempdir().expect("temporary directory");
    let store = flowhost_embedded::EmbeddedStore::open(dir.path(), 4, Arc::new(SystemClock)).expect("embedded store");
    run(&mut report, "embedded", "embedded (SQLite)", store.queue(), scale).await;

    match std::env::var("FLOWHOST_TEST_REDIS_URL") {
        Ok(url) => {
            let queue = flowhost_redis::RedisQueue::connect(&url).await.expect("connect to Redis");
            run(&mut report, "redis", "Redis Streams", Arc::new(queue), scale).await;
        }
        Err(_) => println!("(set FLOWHOST_TEST_REDIS_URL to include Redis)"),
    }
    match std::env::var("FLOWHOST_TEST_NATS_URL") {
        Ok(url) => {
            let queue = flowhost_nats::NatsQueue::connect(&url).await.expect("connect to NATS");
            run(&mut report, "jetstream", "JetStream", Arc::new(queue), scale).await;
        }
        Err(_) => println!("(set FLOWHOST_TEST_NATS_URL to include JetStream)"),
    }
}
