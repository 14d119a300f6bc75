//! Benchmark of the `condition` node kind (`cargo bench -p flowhost-runtime --bench condition`): one rule over one
//! event, evaluated natively by `flowhost_expr` (as the rule engine does: compiled once, then evaluated per event)
//! and by the `condition` component (a fresh instance per call that parses the expression, converts the JSON
//! input and evaluates). Also the native compile + evaluate per call, the cost the component pays inside, and the
//! `noop` component as the floor of an invocation, and the batch contract (`Plugin::evaluate`: one instance and one
//! `prepare` per batch) at several batch sizes. Prints a table; asserts nothing but the result.

mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_expr::Expression;
use flowhost_runtime::{BatchContext, Capability, NodeEvent, Runtime, RuntimeConfig};
use serde_json::{json, Map, Value};

const RULE: &str = "amount > 100.0 && count >= 2 && game == 'slots' && !vip";

fn main() {
    let event: Map<String, Value> =
        json!({"amount": 250.0, "count": 3, "game": "slots", "vip": false}).as_object().expect("an object").clone();

    // Native, as the engine runs a rule: compiled once, evaluated per event.
    let expression = Expression::compile(RULE, None).expect("compile");
    assert_eq!(expression.evaluate(&event), Ok(true));
    let evals = 2_000_000;
    let native_ns = per_iteration_ns(evals, || {
        black_box(expression.evaluate(black_box(&event)).expect("evaluate"));
    });
    // Native, paying what the component pays per call: compile, then evaluate.
    let compiles = 20_000;
    let native_compile_us = per_iteration_ns(compiles, || {
        let expression = Expression::compile(black_box(RULE), None).expect("compile");
        black_box(expression.evaluate(&event).expect("evaluate"));
    }) / 1e3;

    // The component.
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
    let wasm = flowhost_runtime_fixtures::bytes("condition");
    let started = Instant::now();
    let condition = rt.block_on(runtime.load(&wasm, &Capability::ALL)).expect("load condition");
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let input = json!({"config": {"expression": RULE}, "event": event}).to_string();
    assert_eq!(rt.block_on(condition.invoke("condition", &input)).as_deref(), Ok(r#"{"pass":true}"#));
    let latency = support::latency(&rt, &condition, "condition", &input, 500, 20_000);
    let one_thread = support::throughput(&condition, "condition", &input, 1, Duration::from_secs(2));
    let two_threads = support::throughput(&condition, "condition", &input, 2, Duration::from_secs(3));

    // The batch contract: one instance, one `prepare`, `evaluate` of every event.
    let config = json!({ "expression": RULE }).to_string();
    let batch_of = |size: usize| -> Vec<NodeEvent> {
        (0..size)
            .map(|i| NodeEvent {
                idempotency_key: format!("in/0/{i}/r"),
                event: Value::Object(event.clone()).to_string(),
                ..NodeEvent::default()
            })
            .collect()
    };
    let mut batch_us = Vec::new();
    for size in [1usize, 10, 100, 500, 2000] {
        let batch = batch_of(size);
        let results = rt.block_on(condition.evaluate("condition", &config, &batch_context(), batch.clone()));
        assert!(results.iter().all(|r| r.as_deref() == Ok(r#"{"pass":true}"#)), "{results:?}");
        let rounds = (20_000 / size).max(20) as u32;
        let per_batch_ns = per_iteration_ns(rounds, || {
            black_box(rt.block_on(condition.evaluate(
                "condition",
                &config,
                &batch_context(),
                black_box(batch.clone()),
            )));
        });
        batch_us.push((size, per_batch_ns / 1e3));
    }

    // The floor of the contract: the same batch of 500 with the cheapest expression.
    let trivial = json!({ "expression": "true" }).to_string();
    let batch = batch_of(500);
    let floor_batch_us = per_iteration_ns(40, || {
        black_box(rt.block_on(condition.evaluate("condition", &trivial, &batch_context(), black_box(batch.clone()))));
    }) / 1e3;

    let noop = rt.block_on(runtime.load(&flowhost_runtime_fixtures::bytes("noop"), &[])).expect("load noop");
    let floor = support::latency(&rt, &noop, "noop", &input, 500, 20_000);

    println!("flowhost-runtime: `{RULE}` over {}", Value::Object(event));
    println!("condition component: {} bytes, loaded in {load_ms:.0} ms", wasm.len());
    println!("latency over {} calls each", latency.samples());
    println!();
    println!("| What | Figure |");
    println!("|---|---|");
    println!("| native `flowhost_expr`, compiled once: evaluate | {native_ns:.0} ns/eval |");
    println!("| native `flowhost_expr`: compile + evaluate | {native_compile_us:.1} µs/call |");
    println!("| wasm `condition`: invoke, p50 | {:.1} µs/call |", latency.percentile(0.50));
    println!("| wasm `condition`: invoke, p99 | {:.1} µs/call |", latency.percentile(0.99));
    println!("| wasm `condition`: calls per second, 1 thread | {one_thread:.0} /s |");
    println!("| wasm `condition`: calls per second, 2 threads | {two_threads:.0} /s |");
    println!("| wasm `noop` with the same input (the floor of a call), p50 | {:.1} µs/call |", floor.percentile(0.50));
    println!(
        "| wasm `condition`: batch of 500 with `true` (the contract's floor per event) | {:.2} µs/event |",
        floor_batch_us / 500.0
    );
    let mut report = Report::new("condition");
    report.lower("native evaluation", "ns", native_ns);
    let batch_figure = "wasm condition, batch of 500, per event";
    let batch_of_500 = batch_us.iter().find(|(size, _)| *size == 500).map_or(f64::NAN, |(_, us)| us / 500.0);
    report.lower(batch_figure, "µs", batch_of_500);
    report.anchor(batch_figure, "native evaluation", native_ns / 1e3);
    report.lower("wasm condition, one event per call, p50", "µs", latency.percentile(0.50));
    report.lower("wasm condition, batch contract floor per event", "µs", floor_batch_us / 500.0);
    for (size, us) in batch_us {
        println!(
            "| wasm `condition`: batch of {size} (one instance, one prepare) | {us:.1} µs/batch, {:.2} µs/event, {:.0} events/s |",
            us / size as f64,
            size as f64 / us * 1e6
        );
    }
}

/// Mean nanoseconds of `f` over `iterations` runs, after a tenth as many untimed ones.
fn per_iteration_ns(iterations: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..iterations / 10 {
        f();
    }
    let started = Instant::now();
    for _ in 0..iterations {
        f();
    }
    started.elapsed().as_secs_f64() * 1e9 / f64::from(iterations)
}

/// The batch context of a rule `r` outside any flow.
fn batch_context() -> BatchContext {
    BatchContext { flow_id: None, node_id: Some("r".into()) }
}
