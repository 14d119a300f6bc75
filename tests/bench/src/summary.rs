//! Several runs' figures summarized (median and spread per figure, each beside its anchor and target), the
//! table printed from them, and the comparison of two summaries with a noise-aware threshold.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::{median, Better, Metric};

/// A smaller relative change than this is never called a change, however quiet both runs were.
pub const MIN_CHANGE: f64 = 0.03;

/// One figure over every run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub bench: String,
    pub name: String,
    pub unit: String,
    pub better: Better,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_of: Option<String>,
    /// Each run's value, in run order.
    pub values: Vec<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Figure {
    /// The spread of the runs relative to their median: (max - min) / median.
    pub fn spread(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / self.median.abs()
        }
    }

    fn key(&self) -> (&str, &str) {
        (&self.bench, &self.name)
    }
}

/// A whole benchmark run: when, where, and every figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// UTC, RFC 3339.
    pub started: String,
    /// The commit measured (`git describe --always --dirty`), when known.
    #[serde(default)]
    pub commit: Option<String>,
    pub runs: usize,
    pub cores: usize,
    pub figures: Vec<Figure>,
}

impl Summary {
    /// Folds the metrics of every run (in run order) into one figure per (benchmark, name), in the order the
    /// figures were first recorded.
    pub fn new(started: String, commit: Option<String>, runs: usize, cores: usize, metrics: &[Metric]) -> Self {
        let mut order: Vec<(String, String)> = Vec::new();
        let mut grouped: BTreeMap<(String, String), Vec<&Metric>> = BTreeMap::new();
        for metric in metrics {
            let key = (metric.bench.clone(), metric.name.clone());
            let entry = grouped.entry(key.clone()).or_default();
            if entry.is_empty() {
                order.push(key);
            }
            entry.push(metric);
        }
        let figures = order
            .into_iter()
            .map(|key| {
                let runs = &grouped[&key];
                let first = runs[0];
                let values: Vec<f64> = runs.iter().map(|metric| metric.value).collect();
                Figure {
                    bench: first.bench.clone(),
                    name: first.name.clone(),
                    unit: first.unit.clone(),
                    better: first.better,
                    target: first.target,
                    anchor_of: first.anchor_of.clone(),
                    median: median(&values),
                    min: values.iter().copied().fold(f64::INFINITY, f64::min),
                    max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    values,
                }
            })
            .collect();
        Self { started, commit, runs, cores, figures }
    }

    /// The anchors measured beside `figure`.
    fn anchors<'a>(&'a self, figure: &'a Figure) -> impl Iterator<Item = &'a Figure> {
        self.figures.iter().filter(move |anchor| {
            anchor.bench == figure.bench && anchor.anchor_of.as_deref() == Some(figure.name.as_str())
        })
    }

    /// One Markdown table: every Flowhost figure with its median, spread, anchor, ratio and target.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let commit = self.commit.as_deref().unwrap_or("unknown commit");
        let _ = writeln!(out, "{} runs on {} cores, {}, {commit}", self.runs, self.cores, self.started);
        let _ = writeln!(out);
        let _ = writeln!(out, "| bench | figure | median | runs (min-max) | anchor, same runs | ratio | target | |");
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for figure in self.figures.iter().filter(|figure| figure.anchor_of.is_none()) {
            let anchors: Vec<&Figure> = self.anchors(figure).collect();
            let anchor = anchors
                .iter()
                .map(|anchor| format!("{} {}", anchor_label(anchor), number(anchor.median)))
                .collect::<Vec<_>>()
                .join("; ");
            let ratio = anchors
                .iter()
                .map(|anchor| format!("{}x", number(figure.median / anchor.median)))
                .collect::<Vec<_>>()
                .join("; ");
            let (target, verdict) = match figure.target {
                Some(target) => {
                    let met = figure.better.reaches(figure.median, target);
                    (format!("{} {}", figure.better.target_sign(), number(target)), if met { "met" } else { "missed" })
                }
                None => (String::new(), ""),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} {} | {}-{} | {anchor} | {ratio} | {target} | {verdict} |",
                figure.bench,
                figure.name,
                number(figure.median),
                figure.unit,
                number(figure.min),
                number(figure.max),
            );
        }
        out
    }
}

/// The anchor's own name, from `"figure [anchor]"`.
fn anchor_label(anchor: &Figure) -> &str {
    anchor.name.rsplit_once(" [").map_or(anchor.name.as_str(), |(_, label)| label.trim_end_matches(']'))
}

/// A figure with as many digits as it needs: 3 significant ones below 1,000, whole numbers above.
pub fn number(value: f64) -> String {
    let magnitude = value.abs();
    if !value.is_finite() {
        format!("{value}")
    } else if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else if magnitude >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// How a figure moved between a baseline and a new run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    /// The change is inside the runs' own spread (or under [`MIN_CHANGE`]).
    Noise,
}

/// One figure present in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub bench: String,
    pub name: String,
    pub unit: String,
    pub base: f64,
    pub new: f64,
    /// new / base - 1.
    pub relative: f64,
    /// The threshold this figure had to cross: the larger relative spread of the two runs, at least
    /// [`MIN_CHANGE`].
    pub threshold: f64,
    pub verdict: Verdict,
}

/// Sets `new` against `base`, figure by figure (anchors included: an anchor that moved as much as its figure
/// says the machine moved, not the code). Figures in only one of them are listed by name in the second value.
pub fn compare(base: &Summary, new: &Summary) -> (Vec<Change>, Vec<String>) {
    let mut changes = Vec::new();
    let mut unmatched = Vec::new();
    for figure in &new.figures {
        let Some(before) = base.figures.iter().find(|before| before.key() == figure.key()) else {
            unmatched.push(format!("{}: {} (new only)", figure.bench, figure.name));
            continue;
        };
        let relative = figure.median / before.median - 1.0;
        let threshold = before.spread().max(figure.spread()).max(MIN_CHANGE);
        let improved = figure.better.reaches(figure.median, before.median);
        let verdict = if relative.abs() <= threshold || !relative.is_finite() {
            Verdict::Noise
        } else if improved {
            Verdict::Better
        } else {
            Verdict::Worse
        };
        changes.push(Change {
            bench: figure.bench.clone(),
            name: figure.name.clone(),
            unit: figure.unit.clone(),
            base: before.median,
            new: figure.median,
            relative,
            threshold,
            verdict,
        });
    }
    for before in &base.figures {
        if !new.figures.iter().any(|figure| figure.key() == before.key()) {
            unmatched.push(format!("{}: {} (baseline only)", before.bench, before.name));
        }
    }
    (changes, unmatched)
}

/// The comparison as a Markdown table.
pub fn comparison_table(changes: &[Change], unmatched: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| bench | figure | baseline | new | change | threshold (spread) | |");
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for change in changes {
        let verdict = match change.verdict {
            Verdict::Better => "better",
            Verdict::Worse => "WORSE",
            Verdict::Noise => "within noise",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} {} | {} {} | {:+.1}% | ±{:.1}% | {verdict} |",
            change.bench,
            change.name,
            number(change.base),
            change.unit,
            number(change.new),
            change.unit,
            change.relative * 100.0,
            change.threshold * 100.0,
        );
    }
    for name in unmatched {
        let _ = writeln!(out, "| {name} | | | | | | not compared |");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(bench: &str, name: &str, value: f64, better: Better) -> Metric {
        Metric {
            bench: bench.into(),
            name: name.into(),
            unit: "ns".into(),
            value,
            better,
            target: None,
            anchor_of: None,
        }
    }

    fn summary(values: &[(&str, &[f64], Better)]) -> Summary {
        let mut metrics = Vec::new();
        for run in 0..values[0].1.len() {
            for (name, samples, better) in values {
                metrics.push(metric("b", name, samples[run], *better));
            }
        }
        Summary::new("2026-11-29T17:00:00Z".into(), None, values[0].1.len(), 2, &metrics)
    }

    #[test]
    fn runs_fold_into_median_and_spread_in_first_recorded_order() {
        let summary = summary(&[("z", &[10.0, 12.0, 11.0], Better::Lower), ("a", &[5.0, 5.0, 5.0], Better::Higher)]);
        let names: Vec<&str> = summary.figures.iter().map(|figure| figure.name.as_str()).collect();
        assert_eq!(names, ["z", "a"]);
        let z = &summary.figures[0];
        assert_eq!((z.median, z.min, z.max), (11.0, 10.0, 12.0));
        assert_eq!(z.values, [10.0, 12.0, 11.0]);
        assert!((z.spread() - 2.0 / 11.0).abs() < 1e-12);
    }

    #[test]
    fn a_change_counts_only_beyond_both_runs_spread() {
        let base = summary(&[
            ("quiet", &[100.0, 101.0, 100.0], Better::Lower),
            ("noisy", &[100.0, 130.0, 110.0], Better::Lower),
            ("rate", &[1000.0, 1000.0, 1000.0], Better::Higher),
            ("tiny", &[100.0, 100.0, 100.0], Better::Lower),
        ]);
        let new = summary(&[
            ("quiet", &[120.0, 121.0, 120.0], Better::Lower),
            ("noisy", &[125.0, 130.0, 128.0], Better::Lower),
            ("rate", &[1500.0, 1500.0, 1500.0], Better::Higher),
            ("tiny", &[102.0, 102.0, 102.0], Better::Lower),
        ]);
        let (changes, unmatched) = compare(&base, &new);
        assert!(unmatched.is_empty());
        let verdicts: Vec<Verdict> = changes.iter().map(|change| change.verdict).collect();
        assert_eq!(verdicts, [Verdict::Worse, Verdict::Noise, Verdict::Better, Verdict::Noise]);
        // noisy: the baseline's spread is 30/110 = 27%, the change 128/110 - 1 = 16%.
        assert!((changes[1].threshold - 30.0 / 110.0).abs() < 1e-12);
        assert_eq!(changes[3].threshold, MIN_CHANGE);
    }

    #[test]
    fn figures_in_one_run_only_are_listed_not_compared() {
        let base = summary(&[("old", &[1.0], Better::Lower), ("both", &[1.0], Better::Lower)]);
        let new = summary(&[("both", &[1.0], Better::Lower), ("fresh", &[1.0], Better::Lower)]);
        let (changes, unmatched) = compare(&base, &new);
        assert_eq!(changes.len(), 1);
        assert_eq!(unmatched, ["b: fresh (new only)", "b: old (baseline only)"]);
        assert!(comparison_table(&changes, &unmatched).contains("| b: old (baseline only) | | | | | | not compared |"));
    }

    #[test]
    fn the_table_sets_each_figure_beside_its_anchor_and_target() {
        let mut metrics = Vec::new();
        for (ours, theirs) in [(230.0, 2800.0), (250.0, 2900.0), (240.0, 2850.0)] {
            let mut report = crate::Report::new("cel");
            report.lower("4-clause rule", "ns", ours).target(120.0);
            report.anchor("4-clause rule", "cel 0.15", theirs);
            metrics.append(&mut report.metrics);
        }
        let summary = Summary::new("now".into(), Some("abc123".into()), 3, 2, &metrics);
        let table = summary.table();
        assert!(
            table.contains("| cel | 4-clause rule | 240 ns | 230-250 | cel 0.15 2850 | 0.084x | ≤ 120 | missed |"),
            "{table}"
        );
        assert!(!table.contains("| cel | 4-clause rule [cel 0.15]"), "an anchor is not a row of its own");
    }
}
