//! Benchmark of the plugin runtime with the `noop` component (`cargo bench -p flowhost-runtime --bench invoke`):
//! load costs, the latency of one invocation (`noop` declares `reuse_instances`, so a call runs in a kept
//! instance: arm the budgets, call, output check), the same for `greeter`, which does not (a fresh store and
//! instance from `InstancePre` in the pooling allocator per call, then its teardown), and no-op invocations per
//! second on 1 and 2 threads. The anchor is wasmtime alone: a bare store and the `noop` component instantiated
//! from its `InstancePre` in a pooling allocator, then dropped, with no call, no fuel, no deadline and no WASI
//! context (the floor under a fresh instance). Prints a table; asserts nothing.

mod support;

use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_runtime::{Capability, Runtime, RuntimeConfig};

const INPUT: &str = r#"{"player":"p-1","amount":12.5}"#;
const GREET: &str = r#"{"name":"p-1"}"#;

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
    let greeter = rt
        .block_on(runtime.load(&flowhost_runtime_fixtures::bytes("greeter"), &Capability::ALL))
        .expect("load greeter");
    let fresh = support::latency(&rt, &greeter, "greet", GREET, 2_000, 50_000);
    let bare = bare_wasmtime_instantiate(&wasm, 2_000, 50_000);

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
    for (what, latency) in [
        ("noop, kept instance: invoke", &latency),
        ("greeter, fresh instance + greet + drop", &fresh),
        ("wasmtime alone: bare store + instantiate noop + drop, no call", &bare),
    ] {
        for (label, p) in [("p50", 0.50), ("p99", 0.99), ("max", 1.0)] {
            println!("| {what}, {label} | {:.1} µs |", latency.percentile(p));
        }
    }
    println!("| no-op invocations per second, 1 thread | {one_thread:.0} /s |");
    println!("| no-op invocations per second, 2 threads | {two_threads:.0} /s |");

    let mut report = Report::new("invoke");
    let noop_p50 = "noop invocation p50 (kept instance)";
    report.lower(noop_p50, "µs", latency.percentile(0.50)).target(5.0);
    report.anchor(noop_p50, "wasmtime instantiate alone", bare.percentile(0.50));
    report.lower("noop invocation p99 (kept instance)", "µs", latency.percentile(0.99));
    let fresh_p50 = "fresh instance + invoke + drop p50 (greeter)";
    report.lower(fresh_p50, "µs", fresh.percentile(0.50));
    report.anchor(fresh_p50, "wasmtime instantiate alone", bare.percentile(0.50));
    report.lower("fresh instance + invoke + drop p99 (greeter)", "µs", fresh.percentile(0.99));
    report.higher("noop invocations/s, 1 thread", "/s", one_thread);
    report.higher("noop invocations/s, 2 threads", "/s", two_threads);
    report.lower("load precompiled", "ms", load_precompiled_ms);
}

/// The anchor: `noop` instantiated by wasmtime alone (the runtime's engine configuration, its imports defined as
/// traps, a unit store), then dropped; `samples` latencies after `warm_up` untimed ones.
fn bare_wasmtime_instantiate(wasm: &[u8], warm_up: usize, samples: usize) -> support::Latency {
    use wasmtime::component::{Component, Linker};
    use wasmtime::{Engine, Store};

    let engine = Engine::new(&flowhost_runtime::engine_config(&RuntimeConfig::default())).expect("engine");
    let component = Component::new(&engine, wasm).expect("compile noop");
    let mut linker: Linker<()> = Linker::new(&engine);
    linker.define_unknown_imports_as_traps(&component).expect("imports as traps");
    let pre = linker.instantiate_pre(&component).expect("instantiate_pre");
    support::time_each(warm_up, samples, || {
        let mut store = Store::new(&engine, ());
        store.set_fuel(u64::MAX).expect("fuel is on");
        store.set_epoch_deadline(u64::MAX);
        std::hint::black_box(pre.instantiate(&mut store).expect("instantiate"));
    })
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok().map(|value| value.parse().unwrap_or_else(|_| panic!("{name}: not a number")))
}
