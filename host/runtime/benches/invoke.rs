//! Benchmark of the plugin runtime with the `noop` component (`cargo bench -p flowhost-runtime`): load costs,
//! the latency of one invocation (fresh store + instance from `InstancePre` in the pooling allocator, call,
//! output check, drop) and no-op invocations per second on 2 threads. Prints a table; asserts nothing.

mod support;

use std::time::{Duration, Instant};

use flowhost_runtime::{Runtime, RuntimeConfig};

const INPUT: &str = r#"{"player":"p-1","amount":12.5}"#;

fn main() {
    let mut config = RuntimeConfig::default();
    // Pool tuning to compare settings: FLOWHOST_BENCH_DECOMMIT_BATCH, FLOWHOST_BENCH_MEMORY_KEEP_RESIDENT,
    // FLOWHOST_BENCH_STACK_KEEP_RESIDENT (bytes), FLOWHOST_BENCH_PAGEMAP_SCAN (0 or 1).
    if let Some(batch) = env_number("FLOWHOST_BENCH_DECOMMIT_BATCH") {
        config.pool.decommit_batch_size = batch;
    }
    if let Some(bytes) = env_number("FLOWHOST_BENCH_MEMORY_KEEP_RESIDENT") {
        config.pool.memory_keep_resident_bytes = bytes;
    }
    if let Some(bytes) = env_number("FLOWHOST_BENCH_STACK_KEEP_RESIDENT") {
        config.pool.stack_keep_resident_bytes = bytes;
    }
    if let Some(scan) = env_number("FLOWHOST_BENCH_PAGEMAP_SCAN") {
        config.pool.pagemap_scan = scan != 0;
    }
    println!("pool: {:?}", config.pool);
    let runtime = Runtime::new(config).expect("runtime");
    let wasm = flowhost_runtime_fixtures::bytes("noop");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");

    let started = Instant::now();
    let noop = rt.block_on(runtime.load(&wasm, &[])).expect("load noop");
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let precompiled = runtime.precompile(&wasm).expect("precompile");
    let precompile_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    // SAFETY: the bytes come straight from `precompile` of this runtime.
    #[allow(unsafe_code)]
    let _reloaded = rt.block_on(unsafe { runtime.load_precompiled(&precompiled, &[]) }).expect("load precompiled");
    let load_precompiled_ms = started.elapsed().as_secs_f64() * 1e3;

    // Latency, one thread.
    let latency = support::latency(&rt, &noop, "noop", INPUT, 2_000, 50_000);

    // Throughput, 2 threads.
    let one_thread = support::throughput(&noop, "noop", INPUT, 1, Duration::from_secs(2));
    let two_threads = support::throughput(&noop, "noop", INPUT, 2, Duration::from_secs(3));

    println!("flowhost-runtime: noop component ({} bytes), {} samples", wasm.len(), latency.samples());
    println!();
    println!("| What | Figure |");
    println!("|---|---|");
    println!("| load (`Component::new` + link + `InstancePre` + manifest call) | {load_ms:.1} ms |");
    println!("| precompile | {precompile_ms:.1} ms |");
    println!("| load precompiled (`Component::deserialize` + link + manifest call) | {load_precompiled_ms:.2} ms |");
    println!("| instantiate + invoke + drop, p50 | {:.1} µs |", latency.percentile(0.50));
    println!("| instantiate + invoke + drop, p99 | {:.1} µs |", latency.percentile(0.99));
    println!("| instantiate + invoke + drop, max | {:.1} µs |", latency.percentile(1.0));
    println!("| no-op invocations per second, 1 thread | {one_thread:.0} /s |");
    println!("| no-op invocations per second, 2 threads | {two_threads:.0} /s |");
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok().map(|value| value.parse().unwrap_or_else(|_| panic!("{name}: not a number")))
}
