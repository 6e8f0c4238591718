//! Fuzzing of ci-autofix's readers: `classify` on arbitrary text and on
//! mutations of the labelled corpus logs, and `Handoff::parse` on arbitrary
//! text, arbitrary JSON and mutations of a real handoff. No panic, bounded
//! time, evidence that points at real lines, errors that name the place.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fuzz_support;

use std::path::Path;
use std::time::Duration;

use fuzz_support::{PARSE_BUDGET, bounded, cases, hostile_text, json_value, mutated_text};
use orchestrator_ci_autofix::handoff::{Handoff, HandoffError};
use orchestrator_ci_autofix::{classify, classify_many};
use proptest::prelude::*;

const HANDOFF: &str = r#"{"prNumber": 785, "branch": "feat/x",
 "failedChecks": [{"name": "Lint", "runId": "12345678",
                   "logUrl": "https://github.com/o/r/actions/runs/12345678/job/9", "conclusionDetail": ""},
                  {"name": "build / test", "logUrl": "https://github.com/o/r/actions/runs/555/job/1"}],
 "auxiliaryFailCount": 1, "totalRequired": 6}"#;

fn corpus_logs() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned())
        .collect()
}

fn config(default_cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default_cases),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn check_report(log: &str) -> Result<(), TestCaseError> {
    let report = bounded(PARSE_BUDGET, "classify", || classify(log));
    let lines = log.lines().count().max(1);
    for e in &report.evidence {
        prop_assert!(
            e.line >= 1 && e.line <= lines,
            "evidence line {} of {lines}",
            e.line
        );
    }
    // The outputs render whatever was found.
    prop_assert!(report.to_text().contains("classification="));
    let _ = report.to_json();
    Ok(())
}

fn check_handoff(text: &str) -> Result<(), TestCaseError> {
    match bounded(PARSE_BUDGET, "Handoff::parse", || Handoff::parse(text)) {
        Ok(handoff) => {
            // What parsed serializes and parses back to the same handoff.
            prop_assert_eq!(Handoff::parse(&handoff.to_json()), Ok(handoff));
        }
        Err(HandoffError::Json { line, column, .. }) => {
            prop_assert!(line >= 1 || text.trim().is_empty(), "line {line}");
            let _ = column;
        }
        Err(e @ HandoffError::Field { .. }) => {
            prop_assert!(e.to_string().starts_with("handoff field `"), "{e}");
        }
        Err(other) => prop_assert!(false, "unexpected error kind: {other:?}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn classify_corpus_mutations_never_panic(
        log in proptest::sample::select(corpus_logs()).prop_flat_map(|log| mutated_text(&log, 8))
    ) {
        check_report(&log)?;
    }

    #[test]
    fn classify_arbitrary_text_never_panics(log in hostile_text(96)) {
        check_report(&log)?;
    }

    #[test]
    fn classify_many_of_several_logs_never_panics(
        logs in proptest::collection::vec(hostile_text(24), 0..4)
    ) {
        let report = bounded(PARSE_BUDGET, "classify_many", || classify_many(logs.iter().map(String::as_str)));
        prop_assert!(report.to_text().contains("classification="));
    }

    #[test]
    fn handoff_mutations_never_panic(text in mutated_text(HANDOFF, 6)) {
        check_handoff(&text)?;
    }

    #[test]
    fn handoff_arbitrary_json_never_panics(value in json_value(4)) {
        let wrapped = serde_json::json!({
            "prNumber": 7, "branch": "b", "failedChecks": [value.clone()]
        })
        .to_string();
        check_handoff(&value.to_string())?;
        check_handoff(&wrapped)?;
    }

    #[test]
    fn handoff_arbitrary_text_never_panics(text in hostile_text(48)) {
        check_handoff(&text)?;
    }
}

/// Logs that stress the line cleaner and the rules: one 1 MiB line, 128k
/// short lines, ANSI escapes everywhere, NULs and CRs, an escape that never
/// ends. Classification is linear: one pass of the rule set per line, then
/// the matching rule's captures (in a debug build: 0.18 s for a 1 MiB line,
/// 0.24 s for 128k short lines; 0.71 s and 1.28 s when each rule read the
/// line on its own).
#[test]
fn huge_and_odd_logs_are_classified_in_bounded_time() {
    let budget = Duration::from_secs(15);
    let cases = [
        ("a 1 MiB line", "x".repeat(1 << 20)),
        ("128k short lines", "error: e\n".repeat(1 << 17)),
        (
            "ANSI escapes",
            "\x1b[31merror\x1b[0m: \x1b[1m".repeat(1 << 14),
        ),
        ("NULs and CRs", "\0\r".repeat(1 << 19)),
        (
            "an unterminated escape",
            format!("\x1b[{}", "9".repeat(1 << 20)),
        ),
    ];
    for (name, log) in &cases {
        let report = bounded(budget, &format!("classify on {name}"), || classify(log));
        assert!(report.evidence.len() <= 200, "{name}: unbounded evidence");
    }
}
