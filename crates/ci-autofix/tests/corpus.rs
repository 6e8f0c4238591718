//! Classification agreement with a labelled corpus of real tool outputs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::BTreeMap;
use std::path::Path;

use orchestrator_ci_autofix::classify::classify;
use orchestrator_core::cadence::{Classification, SubClass};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Label {
    expected: String,
    class: String,
    tool: String,
    command: String,
    source: String,
}

fn implied_action(c: Classification) -> &'static str {
    match c {
        Classification::Mechanical(SubClass::Trivial) => "trivial",
        Classification::Mechanical(SubClass::NonTrivial) => "non-trivial",
        // Never patched: escalated (infrastructure after its one re-run).
        Classification::Semantic
        | Classification::Unknown
        | Classification::Infrastructure
        | Classification::Flaky => "escalate",
    }
}

#[test]
fn corpus_agreement_is_at_least_95_percent() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let labels: BTreeMap<String, Label> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("labels.json")).unwrap()).unwrap();
    let mut agree = 0;
    let mut exact = 0;
    let mut misses = Vec::new();
    for (name, label) in &labels {
        assert!(!label.tool.is_empty() && !label.command.is_empty() && !label.source.is_empty());
        let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap();
        let report = classify(&log);
        let action = implied_action(report.classification);
        if action == label.expected {
            agree += 1;
        } else {
            misses.push(format!(
                "{name}: expected {} ({}), got {} — evidence {:?}",
                label.expected, label.class, report.classification, report.evidence
            ));
        }
        if report.classification.as_str() == label.class {
            exact += 1;
        }
    }
    let n = labels.len();
    let pct = 100.0 * agree as f64 / n as f64;
    println!(
        "corpus: {agree}/{n} logs agree on the implied action ({pct:.1}%), {exact}/{n} on the exact class"
    );
    for m in &misses {
        println!("  miss: {m}");
    }
    assert!(n >= 40, "corpus has only {n} logs");
    assert!(
        pct >= 95.0,
        "agreement {pct:.1}% < 95%:\n{}",
        misses.join("\n")
    );
}
