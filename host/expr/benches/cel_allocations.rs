//! Heap allocations per evaluation of the 4-clause rule, flowhost-expr against the `cel` crate, counted by a
//! counting global allocator (`allocation-counter`); a bench of its own so that the allocator's bookkeeping
//! never slows the timings of `cel`.
//!
//!     cargo bench -p flowhost-expr --bench cel_allocations

mod support;

use std::hint::black_box;

use flowhost_bench::Report;
use flowhost_expr::Expression;

const EVALUATIONS: u64 = 10_000;

fn per_evaluation(mut evaluate: impl FnMut()) -> f64 {
    evaluate(); // first-use allocations (lazy statics) are not per evaluation
    let counted = allocation_counter::measure(|| {
        for _ in 0..EVALUATIONS {
            evaluate();
        }
    });
    counted.count_total as f64 / EVALUATIONS as f64
}

fn main() {
    let fields = support::event();
    let expression = Expression::compile(support::RULE, Some(&support::schema())).unwrap();
    let ours = per_evaluation(|| {
        black_box(expression.evaluate(black_box(&fields)).unwrap());
    });
    let theirs = per_evaluation(support::cel_crate_rule(&fields));
    let mut report = Report::new("cel");
    let figure = "4-clause rule, heap allocations per evaluation";
    report.lower(figure, "allocations", ours).target(0.0);
    report.anchor(figure, support::ANCHOR, theirs);
    println!("| `{}` | allocations/eval |", support::RULE);
    println!("|---|---|");
    println!("| flowhost-expr | {ours:.2} |");
    println!("| {} (cel-rust) | {theirs:.2} |", support::ANCHOR);
}
