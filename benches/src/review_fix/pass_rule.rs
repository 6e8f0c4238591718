//! The low failure-rate rule's model figures: expected test runs per pass,
//! verified stage by stage (the rule before) and under the pass rule
//! (`orchestrator_core::verify::verify_pass_whole`), at failure rates
//! across `[0, 1]`, for stage layouts like the registry crates' passes.
//!
//! Figures: `rf_pass_rule_excess_max` — the largest expected-runs excess of
//! the rule over stage by stage over every layout and rate (at most 0 by the
//! model's subadditivity); `rf_pass_rule_{layout}_p{rate}_{today,rule}`.

use orchestrator_core::verify::{expected_pass_runs, expected_pass_runs_by_rule, whole_pass_rate};

/// Fixes per stage of the layouts shown.
const LAYOUTS: [(&str, &[usize]); 3] = [
    ("one_35", &[35]),
    ("two_50_30", &[50, 30]),
    ("four_16", &[16, 16, 16, 16]),
];

/// Rates shown in the table.
const SHOWN: [f64; 9] = [0.0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.38, 1.0];

/// Prints the table and returns the figures (module docs).
pub fn figures() -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut excess_max = f64::MIN;
    eprintln!("  pass rule: expected test runs per pass (stage by stage → pass rule)");
    for (name, stages) in LAYOUTS {
        let n: usize = stages.iter().sum();
        // Every rate on a fine grid for the excess, a few in the table.
        for i in 0..=200 {
            let rate = f64::from(i) / 200.0;
            let today = expected_pass_runs(stages, rate, false);
            let rule = expected_pass_runs_by_rule(stages, rate);
            excess_max = excess_max.max(rule - today);
        }
        let cells: Vec<String> = SHOWN
            .iter()
            .map(|&rate| {
                let today = expected_pass_runs(stages, rate, false);
                let rule = expected_pass_runs_by_rule(stages, rate);
                let key = format!(
                    "rf_pass_rule_{name}_p{}",
                    rate.to_string().replace('.', "_")
                );
                out.push((format!("{key}_today"), today));
                out.push((format!("{key}_rule"), rule));
                format!("p={rate}: {today:.2}→{rule:.2}")
            })
            .collect();
        eprintln!(
            "    {name} ({n} fixes, whole pass up to p={}): {}",
            whole_pass_rate(n),
            cells.join(", ")
        );
    }
    eprintln!("    largest excess of the rule over stage by stage: {excess_max:.3} runs");
    out.push(("rf_pass_rule_excess_max".to_owned(), excess_max));
    out
}
