//! CEL evaluation cost: a 4-clause rule over a typed event, evaluated against the parsed JSON event through the
//! lazy activation (what the engine does per event and rule), then the extension libraries' functions beside the
//! core ones. Prints a table of medians over repeated runs; compile is the median of 21 compiles.
//!
//!     cargo bench -p flowhost-expr --bench cel

use std::hint::black_box;
use std::time::Instant;

use flowhost_core::model::{EventSchema, FieldType};
use flowhost_expr::Expression;
use serde_json::json;

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    samples[samples.len() / 2]
}

fn main() {
    let schema = EventSchema::new(
        "deposit",
        &[
            ("amount", FieldType::Double),
            ("count", FieldType::Int),
            ("game", FieldType::String),
            ("vip", FieldType::Bool),
        ],
    );
    let event = json!({"event_type": "deposit", "tenant_id": "t1", "amount": 150.0, "count": 3,
                       "game": "slots", "vip": false, "currency": "EUR", "country": "MT"});
    let fields = event.as_object().unwrap().clone();

    let cases = [
        ("4-clause rule, matches", "amount > 100.0 && count >= 2 && game == 'slots' && !vip"),
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
    println!("| expression | ns/eval (median of 15 runs) | compile µs |");
    println!("|---|---|---|");
    for (label, source) in cases {
        let compiles: Vec<f64> = (0..21)
            .map(|_| {
                let started = Instant::now();
                black_box(Expression::compile(source, Some(&schema)).unwrap());
                started.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        let compile_us = median(compiles);
        let expression = Expression::compile(source, Some(&schema)).unwrap();
        let iterations = 200_000;
        let samples: Vec<f64> = (0..15)
            .map(|_| {
                let started = Instant::now();
                for _ in 0..iterations {
                    black_box(expression.evaluate(black_box(&fields)).unwrap());
                }
                started.elapsed().as_nanos() as f64 / iterations as f64
            })
            .collect();
        println!("| {label}: `{source}` | {:.0} | {compile_us:.1} |", median(samples));
    }
}
