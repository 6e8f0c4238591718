//! `perf-report`: measures the engine's hot paths and prints the figures.
//!
//! Each workload module (`clustering`, `dag`, …) contributes named figures;
//! ratios are always taken against a baseline measured in the same run (a
//! naive reference, the seed's wave barriers, a lower bound), never against a
//! number from another machine. Progress goes to stderr; the last line on
//! stdout is one single-line JSON object with every figure.
//!
//! Run it in release: `cargo run --release -p orchestrator-benches --bin perf-report`;
//! with arguments, only the named collectors run (`clustering`, `scheduling`,
//! `verification`, `planex`, `review-fix`, or its halves
//! `review-fix-synthetic` and `review-fix-registry`, which can run at the
//! same time in two processes, and `ray`). `review-fix` runs only when
//! named: it takes minutes and fetches crates from the registry; so does
//! `ray`, which starts a Ray head (`ORCH_RAY_VENV`).

use std::time::Instant;

use orchestrator_benches::{clustering, dag, planex, ray, review_fix, verify};

type Collector = fn() -> Vec<(String, f64)>;

/// Collectors that run only when named.
const ON_REQUEST: [&str; 4] = [
    "review-fix",
    "review-fix-synthetic",
    "review-fix-registry",
    "ray",
];

fn main() {
    let collectors: [(&str, Collector); 8] = [
        ("clustering", clustering::perf_figures),
        ("scheduling", dag::perf_figures),
        ("verification", verify::perf_figures),
        ("planex", planex::perf_figures),
        ("review-fix", review_fix::perf_figures),
        ("review-fix-synthetic", review_fix::synthetic_figures),
        ("review-fix-registry", review_fix::registry_figures),
        ("ray", ray::perf_figures),
    ];
    let only: Vec<String> = std::env::args().skip(1).collect();
    if let Some(unknown) = only
        .iter()
        .find(|a| !collectors.iter().any(|(name, _)| name == a))
    {
        eprintln!(
            "perf-report: no collector `{unknown}`; the collectors: clustering, scheduling, verification, planex, review-fix, review-fix-synthetic, review-fix-registry, ray"
        );
        std::process::exit(2);
    }
    let started = Instant::now();
    let mut figures = serde_json::Map::new();
    for (name, collect) in collectors {
        // Named, or (nothing named) one of the default collectors.
        let named = only.iter().any(|a| a == name);
        if !named && (!only.is_empty() || ON_REQUEST.contains(&name)) {
            continue;
        }
        let t = Instant::now();
        eprintln!("perf-report: measuring {name}…");
        for (key, value) in collect() {
            eprintln!("  {key} = {value:.4}");
            figures.insert(key, round(value).into());
        }
        eprintln!("  ({name} took {:.1} s)", t.elapsed().as_secs_f64());
    }
    figures.insert(
        "perf_report_total_s".into(),
        round(started.elapsed().as_secs_f64()).into(),
    );
    println!("{}", serde_json::Value::Object(figures));
}

/// Six significant digits are plenty for a report and keep the line short.
fn round(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = 6 - x.abs().log10().ceil() as i32;
    let factor = 10f64.powi(digits);
    (x * factor).round() / factor
}
