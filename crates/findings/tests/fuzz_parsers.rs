//! Fuzzing of the findings readers: arbitrary text and mutations of the
//! real fixtures never panic, end within a time budget, and fail with an
//! error that names the input (and the place, where the format has one).
//!
//! Readers covered: `review_cycle`, `formats::detect_and_parse` (cargo JSON,
//! SARIF, rdjson, rdjsonl, ruff's and ESLint's JSON, the latter two with a
//! source reader that hands out a real file for every path).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fuzz_support;

use std::path::Path;
use std::time::Duration;

use fuzz_support::{
    PARSE_BUDGET, bounded, config, hostile_text, json_value, mutated_text, pathological_texts,
};
use orchestrator_findings::formats::{self, FormatError};
use orchestrator_findings::review_cycle::parse_review_cycle_export;
use proptest::prelude::*;

fn data(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const SOURCE: &str = "fuzz/input.json";

/// Checks the contract every findings reader shares: an error names the
/// input; a success has non-blank, unique ids.
fn check_findings_result(result: Result<formats::ParseOutcome, FormatError>) {
    match result {
        Ok(outcome) => {
            let mut ids = std::collections::HashSet::new();
            for f in &outcome.findings {
                assert!(!f.id.0.trim().is_empty(), "blank finding id");
                assert!(ids.insert(f.id.clone()), "duplicate finding id {}", f.id);
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(SOURCE), "error does not name the input: {msg}");
        }
    }
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn review_cycle_export_mutations_never_panic(
        text in mutated_text(&data("tests/data/batching/fix-export-1706184622000.json"), 6)
    ) {
        let result = bounded(PARSE_BUDGET, "parse_review_cycle_export", || {
            parse_review_cycle_export(&text, SOURCE)
        });
        match result {
            Ok(findings) => {
                let mut ids = std::collections::HashSet::new();
                for f in &findings {
                    prop_assert!(!f.id.0.trim().is_empty());
                    prop_assert!(ids.insert(f.id.clone()), "duplicate id {}", f.id);
                }
            }
            Err(e) => prop_assert!(e.to_string().contains(SOURCE), "{e}"),
        }
    }

    #[test]
    fn review_cycle_export_of_arbitrary_json_never_panics(value in json_value(4)) {
        let wrapped = serde_json::json!({ "findings": [value.clone()] }).to_string();
        for text in [value.to_string(), wrapped] {
            let result = bounded(PARSE_BUDGET, "parse_review_cycle_export", || {
                parse_review_cycle_export(&text, SOURCE)
            });
            if let Err(e) = result {
                prop_assert!(e.to_string().contains(SOURCE), "{e}");
            }
        }
    }

    #[test]
    fn findings_formats_of_arbitrary_text_never_panic(text in hostile_text(64)) {
        check_findings_result(bounded(PARSE_BUDGET, "detect_and_parse", || {
            formats::detect_and_parse(&text, SOURCE)
        }));
    }

    #[test]
    fn cargo_json_mutations_never_panic(
        text in mutated_text(&data("tests/data/formats/clippy.json"), 8)
    ) {
        check_findings_result(bounded(PARSE_BUDGET, "detect_and_parse", || {
            formats::detect_and_parse(&text, SOURCE)
        }));
    }

    #[test]
    fn sarif_mutations_never_panic(
        text in mutated_text(&data("tests/data/formats/sample.sarif"), 6)
    ) {
        check_findings_result(bounded(PARSE_BUDGET, "detect_and_parse", || {
            formats::detect_and_parse(&text, SOURCE)
        }));
    }

    #[test]
    fn rdjson_mutations_never_panic(
        text in mutated_text(&data("tests/data/formats/sample.rdjson"), 6)
    ) {
        check_findings_result(bounded(PARSE_BUDGET, "detect_and_parse", || {
            formats::detect_and_parse(&text, SOURCE)
        }));
    }

    #[test]
    fn rdjsonl_mutations_never_panic(
        text in mutated_text(&data("tests/data/formats/sample.rdjsonl"), 6)
    ) {
        check_findings_result(bounded(PARSE_BUDGET, "detect_and_parse", || {
            formats::detect_and_parse(&text, SOURCE)
        }));
    }

    #[test]
    fn ruff_and_eslint_json_mutations_never_panic(
        ruff in mutated_text(&data("tests/data/tools/ruff.json"), 6),
        eslint in mutated_text(&data("tests/data/tools/eslint.json"), 6),
    ) {
        // Every path reads as a file with a BOM, CRLF and an astral
        // character, so that mutated positions land anywhere in it.
        let source = |_: &str| Some(data("tests/data/tools/py/bom_crlf.py"));
        let options = formats::ParseOptions { sources: Some(&source) };
        for text in [ruff, eslint] {
            check_findings_result(bounded(PARSE_BUDGET, "detect_and_parse_with", || {
                formats::detect_and_parse_with(&text, SOURCE, &options)
            }));
        }
    }

    #[test]
    fn findings_formats_of_arbitrary_json_never_panic(value in json_value(4)) {
        let sarif = serde_json::json!({"version": "2.1.0", "runs": [value.clone()]}).to_string();
        let rdjson = serde_json::json!({"diagnostics": [value.clone()]}).to_string();
        let rdjsonl = format!("{}\n{}", serde_json::json!({"message": "m", "location": value.clone()}), value);
        let ruff = serde_json::json!([{"filename": "a.py", "location": value.clone(), "fix": value.clone()}]).to_string();
        let eslint = serde_json::json!([{"filePath": "a.js", "messages": [value.clone()], "source": "var a;"}]).to_string();
        for text in [value.to_string(), sarif, rdjson, rdjsonl, ruff, eslint] {
            check_findings_result(bounded(PARSE_BUDGET, "detect_and_parse", || {
                formats::detect_and_parse(&text, SOURCE)
            }));
        }
    }
}

/// Inputs built to make a naive scanner quadratic or recursive: they must
/// still be answered within the budget.
#[test]
fn pathological_inputs_end_in_bounded_time() {
    let budget = Duration::from_secs(5);
    for (name, text) in &pathological_texts() {
        check_findings_result(bounded(
            budget,
            &format!("detect_and_parse on {name}"),
            || formats::detect_and_parse(text, SOURCE),
        ));
        bounded(budget, &format!("review cycle on {name}"), || {
            parse_review_cycle_export(text, SOURCE)
        })
        .expect_err("not an export");
    }
}
