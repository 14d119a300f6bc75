//! The benchmarks' one report format.
//!
//! Every benchmark (the `cargo bench` targets of the host crates and the `*-throughput` binaries of
//! `flowhost-tests`) prints its own human table and also records each figure in a [`Report`]: its name, unit,
//! which direction is better, the target set for it and, for an anchor (the same work done by another
//! implementation in the same run: the `cel` crate, wasmtime alone, a plain axum handler), the figure it anchors.
//! When `FLOWHOST_BENCH_JSON` names a file, the report appends its figures there as JSON lines when it is
//! dropped; the runner (`bench`, see `main.rs`) sets it for every benchmark it starts, gathers the lines of
//! several runs and summarizes them ([`summary`]).

pub mod summary;

use std::io::Write;

use serde::{Deserialize, Serialize};

/// The environment variable naming the file a [`Report`] appends its figures to.
pub const JSON_ENV: &str = "FLOWHOST_BENCH_JSON";

/// Which way a figure improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Latencies, costs: smaller is better.
    Lower,
    /// Rates: larger is better.
    Higher,
}

impl Better {
    /// Whether `value` is at `bound` or on its better side.
    pub fn reaches(self, value: f64, bound: f64) -> bool {
        match self {
            Better::Lower => value <= bound,
            Better::Higher => value >= bound,
        }
    }

    /// How a target reads: `≤ 5` for a latency, `≥ 50000` for a rate.
    pub fn target_sign(self) -> &'static str {
        match self {
            Better::Lower => "≤",
            Better::Higher => "≥",
        }
    }
}

/// One figure of one run of one benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// The benchmark that measured it (`cel`, `gateway-throughput`).
    pub bench: String,
    /// What was measured, unique within the benchmark.
    pub name: String,
    pub unit: String,
    pub value: f64,
    pub better: Better,
    /// The figure asked for, when one is set (the issue or the spec that set it says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// For an anchor: the name of the Flowhost figure it was measured beside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_of: Option<String>,
}

/// The figures of one benchmark run; written to [`JSON_ENV`]'s file when dropped (also when the benchmark
/// panics after recording some).
pub struct Report {
    bench: String,
    metrics: Vec<Metric>,
}

impl Report {
    pub fn new(bench: &str) -> Self {
        Self { bench: bench.to_owned(), metrics: Vec::new() }
    }

    /// Records a figure where smaller is better (a latency, a cost per operation).
    pub fn lower(&mut self, name: &str, unit: &str, value: f64) -> &mut Metric {
        self.push(name, unit, value, Better::Lower)
    }

    /// Records a figure where larger is better (a rate).
    pub fn higher(&mut self, name: &str, unit: &str, value: f64) -> &mut Metric {
        self.push(name, unit, value, Better::Higher)
    }

    /// Records `anchor`'s figure for the work of the Flowhost figure `of` (recorded before, same unit and
    /// direction): the same work done by another implementation in the same run.
    pub fn anchor(&mut self, of: &str, anchor: &str, value: f64) -> &mut Metric {
        let figure = self
            .metrics
            .iter()
            .find(|metric| metric.name == of && metric.anchor_of.is_none())
            .unwrap_or_else(|| panic!("anchor {anchor:?}: no figure {of:?} recorded before it"));
        let (unit, better) = (figure.unit.clone(), figure.better);
        let metric = self.push(&format!("{of} [{anchor}]"), &unit, value, better);
        metric.anchor_of = Some(of.to_owned());
        metric
    }

    /// Sets the target of the figure `name`, recorded before (by a helper that records several figures).
    pub fn set_target(&mut self, name: &str, target: f64) {
        self.metrics
            .iter_mut()
            .find(|metric| metric.name == name && metric.anchor_of.is_none())
            .unwrap_or_else(|| panic!("target of {name:?}: no such figure recorded"))
            .target(target);
    }

    fn push(&mut self, name: &str, unit: &str, value: f64, better: Better) -> &mut Metric {
        self.metrics.push(Metric {
            bench: self.bench.clone(),
            name: name.to_owned(),
            unit: unit.to_owned(),
            value,
            better,
            target: None,
            anchor_of: None,
        });
        self.metrics.last_mut().expect("just pushed")
    }

    fn write(&self, path: &str) -> std::io::Result<()> {
        let mut lines = Vec::new();
        for metric in &self.metrics {
            serde_json::to_writer(&mut lines, metric)?;
            lines.push(b'\n');
        }
        std::fs::OpenOptions::new().create(true).append(true).open(path)?.write_all(&lines)
    }
}

impl Metric {
    /// Sets the figure asked for.
    pub fn target(&mut self, target: f64) -> &mut Self {
        self.target = Some(target);
        self
    }

    /// Whether `value` reaches `target`, when one is set.
    pub fn meets(&self, value: f64) -> Option<bool> {
        self.target.map(|target| self.better.reaches(value, target))
    }
}

impl Drop for Report {
    fn drop(&mut self) {
        let Ok(path) = std::env::var(JSON_ENV) else { return };
        if let Err(error) = self.write(&path) {
            eprintln!("{}: could not write the figures to {path}: {error}", self.bench);
        }
    }
}

/// The median of `samples` (the upper one of an even count); NaN for none.
pub fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_appends_its_figures_as_json_lines_with_anchor_and_target() {
        let dir = std::env::temp_dir().join(format!("flowhost-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("figures.jsonl");
        let mut report = Report::new("cel");
        report.lower("4-clause rule", "ns", 230.0).target(120.0);
        report.anchor("4-clause rule", "cel 0.15", 2859.0);
        report.write(path.to_str().unwrap()).unwrap();
        report.write(path.to_str().unwrap()).unwrap();
        std::mem::forget(report);
        let text = std::fs::read_to_string(&path).unwrap();
        let metrics: Vec<Metric> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!(metrics.len(), 4, "appended, not replaced");
        assert_eq!(metrics[0].target, Some(120.0));
        assert_eq!(metrics[0].meets(119.0), Some(true));
        assert_eq!(metrics[0].meets(121.0), Some(false));
        assert_eq!(metrics[1].name, "4-clause rule [cel 0.15]");
        assert_eq!(metrics[1].anchor_of.as_deref(), Some("4-clause rule"));
        assert_eq!((metrics[1].unit.as_str(), metrics[1].better), ("ns", Better::Lower));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_target_is_set_on_a_figure_a_helper_recorded() {
        let mut report = Report::new("gateway");
        report.higher("capacity", "/s", 14_000.0);
        report.set_target("capacity", 50_000.0);
        assert_eq!(report.metrics[0].target, Some(50_000.0));
        assert_eq!(report.metrics[0].meets(14_000.0), Some(false));
        std::mem::forget(report);
    }

    #[test]
    #[should_panic(expected = "no figure")]
    fn an_anchor_needs_its_figure_first() {
        Report::new("cel").anchor("missing", "cel 0.15", 1.0);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 3.0);
        assert!(median(&[]).is_nan());
    }
}
