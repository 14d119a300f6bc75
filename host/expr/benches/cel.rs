//! CEL evaluation cost: a 4-clause rule over a typed event, evaluated against the parsed JSON event through the
//! lazy activation (what the engine does per event and rule), beside the `cel` crate (cel-rust) doing the same
//! work in the same run; then the extension libraries' functions beside the core ones. Prints a table of medians
//! over repeated runs; compile is the median of 21 compiles. The allocations per evaluation are counted by
//! `cel_allocations` (a counting allocator would slow every allocation measured here).
//!
//!     cargo bench -p flowhost-expr --bench cel --bench cel_allocations

use std::hint::black_box;
use std::time::Instant;

mod support;

use flowhost_bench::Report;
use flowhost_expr::Expression;

const ITERATIONS: u32 = 200_000;
const RUNS: usize = 15;

/// Nanoseconds per call of `evaluate`, the median of [`RUNS`] runs of [`ITERATIONS`] calls.
fn ns_per_call(mut evaluate: impl FnMut()) -> f64 {
    let samples: Vec<f64> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..ITERATIONS {
                evaluate();
            }
            started.elapsed().as_nanos() as f64 / f64::from(ITERATIONS)
        })
        .collect();
    flowhost_bench::median(&samples)
}

fn main() {
    let mut report = Report::new("cel");
    let schema = support::schema();
    let fields = support::event();

    let expression = Expression::compile(support::RULE, Some(&schema)).unwrap();
    let ns = ns_per_call(|| {
        black_box(expression.evaluate(black_box(&fields)).unwrap());
    });
    let theirs = ns_per_call(support::cel_crate_rule(&fields));
    let figure = "4-clause rule, matches";
    report.lower(figure, "ns", ns).target(120.0);
    report.anchor(figure, support::ANCHOR, theirs);
    println!("| `{}` | ns/eval (median of {RUNS} runs) |", support::RULE);
    println!("|---|---|");
    println!("| flowhost-expr | {ns:.0} |");
    println!("| {} (cel-rust), same run | {theirs:.0} |", support::ANCHOR);
    println!("| ratio | {:.3}x |", ns / theirs);
    println!();

    let cases = [
        ("4-clause rule, first clause false", "amount > 1000.0 && count >= 2 && game == 'slots' && !vip"),
        ("1 clause", "amount > 100.0"),
        ("string function", "game.startsWith('slo') && amount > 1.0"),
        ("strings ext: lowerAscii", "game.lowerAscii() == 'slots'"),
        ("strings ext: format", "'%s/%d'.format([game, count]) == 'slots/3'"),
        ("strings ext: split", "game.split('o').size() == 2"),
        ("math ext: greatest", "math.greatest(count, 2) == 3"),
        ("math ext: round", "math.round(amount) > 100.0"),
        ("sets ext: contains", "sets.contains(['slots', 'poker', 'bingo'], [game])"),
        ("core: in list", "game in ['slots', 'poker', 'bingo']"),
        ("lists ext: range + all", "lists.range(count).all(i, i < 5)"),
        ("optionals: orValue", "optional.of(count).orValue(0) > 2"),
        ("two-variable all", "[count, 4].all(i, v, v > i)"),
    ];
    println!("| expression | ns/eval (median of {RUNS} runs) | compile µs |");
    println!("|---|---|---|");
    for (label, source) in cases {
        let compiles: Vec<f64> = (0..21)
            .map(|_| {
                let started = Instant::now();
                black_box(Expression::compile(source, Some(&schema)).unwrap());
                started.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        let compile_us = flowhost_bench::median(&compiles);
        let expression = Expression::compile(source, Some(&schema)).unwrap();
        let ns = ns_per_call(|| {
            black_box(expression.evaluate(black_box(&fields)).unwrap());
        });
        report.lower(label, "ns", ns);
        println!("| {label}: `{source}` | {ns:.0} | {compile_us:.1} |");
    }
}
