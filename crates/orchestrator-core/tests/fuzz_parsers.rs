//! Fuzzing of every parser in `orchestrator-core`: arbitrary text and
//! mutations of the real fixtures never panic, end within a time budget, and
//! fail with an error that names the input (and the place, where the format
//! has one).
//!
//! Parsers covered: `state::CsvTable::parse` (on pathological inputs; the
//! typed task rows are fuzzed in `orchestrator-planex`, the findings
//! readers in `orchestrator-findings`), `state::read_ndjson`,
//! `state::read_json`, `agent::extract_json`, `schema::validate`, and the
//! retry exit-criteria readers (`parse_report`, `validate_exit_criteria`,
//! `permission_question`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fuzz_support;

use std::path::PathBuf;
use std::time::Duration;

use fuzz_support::{
    PARSE_BUDGET, bounded, config, hostile_bytes, hostile_text, json_value, mutated,
    pathological_texts,
};
use orchestrator_core::agent::extract_json;
use orchestrator_core::retry::criteria::{
    parse_report, permission_question, validate_exit_criteria,
};
use orchestrator_core::schema;
use orchestrator_core::state::{self, CsvTable, StateError};
use proptest::prelude::*;

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn ndjson_of_arbitrary_bytes_never_panics(
        bytes in prop_oneof![
            hostile_bytes(600),
            mutated(NDJSON_SAMPLE.as_bytes().to_vec(), 6),
        ]
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("discoveries.ndjson");
        std::fs::write(&path, &bytes).unwrap();
        let read = bounded(PARSE_BUDGET, "read_ndjson", || {
            state::read_ndjson::<serde_json::Value>(&path)
        })
        .unwrap();
        let lines = bytes.split(|&b| b == b'\n').count() as u64;
        prop_assert!(read.entries.len() as u64 + read.skipped.len() as u64 <= lines);
        for s in &read.skipped {
            prop_assert!(s.line >= 1 && s.line <= lines, "line {} of {lines}", s.line);
        }
        if let Some(w) = read.warning() {
            prop_assert!(w.contains("discoveries.ndjson"), "{w}");
        }
    }

    #[test]
    fn json_state_files_of_arbitrary_bytes_fail_with_file_and_line(bytes in hostile_bytes(400)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fix-progress-1.json");
        std::fs::write(&path, &bytes).unwrap();
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Progress {
            version: u32,
            findings: Vec<String>,
        }
        match state::read_json::<Progress>(&path) {
            Ok(_) => {}
            Err(e @ StateError::Json { .. }) => {
                prop_assert_eq!(e.path(), path.as_path());
                let msg = e.to_string();
                prop_assert!(msg.contains("fix-progress-1.json") && msg.contains(" line "), "{msg}");
            }
            Err(other) => prop_assert!(false, "unexpected error kind: {other}"),
        }
    }

    #[test]
    fn extract_json_of_arbitrary_text_never_panics(text in hostile_text(80)) {
        let found = bounded(PARSE_BUDGET, "extract_json", || extract_json(&text));
        if serde_json::from_str::<serde_json::Value>(text.trim()).is_ok() {
            prop_assert!(found.is_some(), "whole-text JSON not found");
        }
    }

    #[test]
    fn extract_json_finds_an_object_among_prose(
        before in "[a-zA-Z .,:\n]{0,80}",
        value in json_value(3),
        after in "[a-zA-Z .,:\n]{0,80}",
    ) {
        let object = serde_json::json!({ "answer": value });
        let text = format!("{before}{object}{after}");
        let found = bounded(PARSE_BUDGET, "extract_json", || extract_json(&text));
        prop_assert!(found.is_some(), "no JSON found in {text:?}");
    }

    #[test]
    fn schema_validation_never_panics(schema in json_value(4), value in json_value(4)) {
        let result = bounded(PARSE_BUDGET, "schema::validate", || schema::validate(&schema, &value));
        if let Err(violations) = result {
            prop_assert!(!violations.is_empty());
            for v in violations {
                prop_assert!(v.path.starts_with('$'), "{v}");
            }
        }
    }

    #[test]
    fn exit_criteria_reports_never_panic(
        text in hostile_text(64),
        structured in proptest::option::of(json_value(3)),
        criteria in proptest::collection::vec("[a-zA-Z0-9 `:|-]{0,20}", 0..5),
    ) {
        let reported = bounded(PARSE_BUDGET, "parse_report", || {
            parse_report(&text, structured.as_ref())
        });
        let validation = validate_exit_criteria(&reported, &criteria);
        prop_assert_eq!(validation.failures().count() <= criteria.len(), true);
        let _ = bounded(PARSE_BUDGET, "permission_question", || permission_question(&text));
    }
}

/// A few real discovery lines, as agents append them.
const NDJSON_SAMPLE: &str = concat!(
    r#"{"ts":"2026-02-28T10:00:00+08:00","worker":"E1","type":"code_pattern","data":{"name":"repository","file":"src/repo.ts","description":"Data access through repositories"}}"#,
    "\n",
    r#"{"ts":"2026-02-28T10:00:05+08:00","worker":"E2","type":"integration_point","data":{"file":"src/auth/index.ts","description":"Auth entry","exports":["login","logout"]}}"#,
    "\n",
    r#"{"ts":"2026-02-28T10:01:00+08:00","worker":"T1","type":"convention","data":{"naming":"camelCase","imports":"absolute","formatting":"prettier"}}"#,
    "\n",
);

/// Inputs built to make a naive scanner quadratic or recursive: they must
/// still be answered within the budget.
#[test]
fn pathological_inputs_end_in_bounded_time() {
    let cases = pathological_texts();
    let budget = Duration::from_secs(5);
    for (name, text) in &cases {
        bounded(budget, &format!("extract_json on {name}"), || {
            extract_json(text)
        });
        bounded(budget, &format!("parse_report on {name}"), || {
            parse_report(text, None)
        });
        let path = PathBuf::from("fuzz/tasks.csv");
        let _ = bounded(budget, &format!("CsvTable::parse on {name}"), || {
            CsvTable::parse(&path, text.as_bytes())
        });
    }
}

/// An agent that prints megabytes of unbalanced braces: the object search is
/// linear (it was quadratic: 50 000 `{` took 11 s in a debug build, so a
/// 16 MiB answer would have stalled the engine for days).
#[test]
fn extract_json_is_linear_in_megabytes_of_braces() {
    let budget = Duration::from_secs(5);
    for text in [
        "{".repeat(2 << 20),
        "{\"a\": {".repeat(1 << 18),
        format!("{}{{\"ok\": true}}", "{ \"x\" ".repeat(1 << 18)),
    ] {
        bounded(budget, "extract_json on 2 MiB", || extract_json(&text));
        bounded(budget, "parse_report on 2 MiB", || {
            parse_report(&text, None)
        });
    }
    let found = extract_json(&format!("{}{{\"ok\": true}}", "{ ".repeat(1 << 18)));
    assert_eq!(found, Some(serde_json::json!({"ok": true})));
}

/// The search `extract_json` made before it became linear: from every `{`,
/// scan to its matching `}` and try to parse. Quadratic, kept here as the
/// reference the fast search must agree with.
fn naive_first_object(text: &str) -> Option<serde_json::Value> {
    let trimmed = text.trim();
    let bytes = trimmed.as_bytes();
    let mut search_from = 0;
    while let Some(offset) = trimmed[search_from..].find('{') {
        let start = search_from + offset;
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for (i, &b) in bytes.iter().enumerate().skip(start) {
            if in_string {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        if let Ok(v) = serde_json::from_str(&trimmed[start..=i]) {
                            return Some(v);
                        }
                        break;
                    }
                }
                _ => {}
            }
        }
        search_from = start + 1;
    }
    None
}

proptest! {
    #![proptest_config(config(256))]

    /// The linear object search finds what the quadratic one found.
    #[test]
    fn extract_json_agrees_with_the_naive_search(
        pieces in proptest::collection::vec(
            proptest::sample::select(vec![
                "{", "}", "\"", "\\", ":", ",", "1", "a", " ", "\"k\"", "{\"a\":1}", "\n", "[", "]",
            ]),
            0..40,
        )
    ) {
        let text = pieces.concat();
        // Only the brace search is compared: skip texts the earlier steps
        // (whole text, fenced block) answer.
        prop_assume!(serde_json::from_str::<serde_json::Value>(text.trim()).is_err());
        prop_assert_eq!(extract_json(&text), naive_first_object(&text), "{:?}", text);
    }
}
