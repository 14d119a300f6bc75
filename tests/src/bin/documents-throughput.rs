//! Embedded document reads per second, alone and beside a concurrent writer: the figure the reader pool exists
//! for (before it, every read queued behind the one connection mutex while a write held it). Seeds a
//! collection, then for each scenario runs `READERS` reader tasks doing `get` of random ids (and a `find` on a
//! field every tenth read) for a fixed window, optionally with one writer task upserting in a loop, and prints
//! a table of reads/s and writes/s. Uses a fresh data directory each run.
//!
//!     cargo run --release -p flowhost-tests --bin documents-throughput [-- SECONDS]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_core::ports::DocumentStore;
use flowhost_core::SystemClock;
use flowhost_embedded::EmbeddedStore;
use serde_json::json;

const DOCUMENTS: u64 = 5_000;
const READERS: usize = 4;
const COLLECTION: &str = "bench";

struct Figures {
    reads: u64,
    writes: u64,
    elapsed: Duration,
}

async fn run(store: Arc<dyn DocumentStore>, window: Duration, with_writer: bool) -> Figures {
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let writes = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for reader in 0..READERS {
        let (store, stop, reads) = (store.clone(), stop.clone(), reads.clone());
        tasks.push(tokio::spawn(async move {
            // A cheap deterministic spread of ids per reader (no RNG dependency).
            let mut n = reader as u64 * 7919;
            while !stop.load(Ordering::Relaxed) {
                n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) % DOCUMENTS;
                if n.is_multiple_of(10) {
                    store.find(COLLECTION, "bucket", &json!(n % 50)).await.expect("find");
                } else {
                    store.get(COLLECTION, &format!("d{n}")).await.expect("get").expect("seeded document");
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    if with_writer {
        let (store, stop, writes) = (store.clone(), stop.clone(), writes.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let id = format!("d{}", n % DOCUMENTS);
                store
                    .upsert(COLLECTION, &id, json!({ "bucket": n % 50, "n": n, "pad": "x".repeat(200) }))
                    .await
                    .expect("upsert");
                writes.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(window).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("bench task");
    }
    Figures { reads: reads.load(Ordering::Relaxed), writes: writes.load(Ordering::Relaxed), elapsed: started.elapsed() }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let mut report = Report::new("documents-throughput");
    let seconds: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let window = Duration::from_secs(seconds);
    let dir = tempfile::tempdir().expect("temp dir");
    let store = EmbeddedStore::open(dir.path(), 1, Arc::new(SystemClock)).expect("open store");
    let documents = store.documents();
    for n in 0..DOCUMENTS {
        documents
            .upsert(COLLECTION, &format!("d{n}"), json!({ "bucket": n % 50, "n": n, "pad": "x".repeat(200) }))
            .await
            .expect("seed");
    }
    println!("embedded documents, {DOCUMENTS} documents, {READERS} readers, {seconds} s per scenario");
    println!("| scenario | reads/s | writes/s |");
    println!("|---|---:|---:|");
    for (name, with_writer) in [("readers alone", false), ("readers beside one writer", true)] {
        let figures = run(documents.clone(), window, with_writer).await;
        let secs = figures.elapsed.as_secs_f64();
        let (reads_per_s, writes_per_s) = (figures.reads as f64 / secs, figures.writes as f64 / secs);
        println!("| {name} | {reads_per_s:.0} | {writes_per_s:.0} |");
        report.higher(&format!("{name}: reads"), "/s", reads_per_s);
        if with_writer {
            report.higher(&format!("{name}: writes"), "/s", writes_per_s);
        }
    }
}
