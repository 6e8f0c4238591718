//! The bad-input corpus (`tests/data/bad-input/` at the repository root)
//! through the core readers: JSON state files (`state::read_json`) and
//! NDJSON boards (`state::read_ndjson`). The findings files are read by
//! `orchestrator-findings`' test of the same name, the task CSVs by
//! `orchestrator-planex`'s.
//!
//! Every case either fails with a message that names the file and the place
//! (line, column, field, row or entry), or — for a bad entry inside a
//! readable file — rejects that entry on its own with its place and keeps the
//! rest. Nothing panics, and nothing is written: each case runs inside a
//! temporary git repository whose `git status` and file listing are compared
//! before and after.
//!
//! The corpus README lists every file with the test that reads it; the first
//! test here checks the two agree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability_support;

use std::path::Path;

use orchestrator_core::state::{read_json, read_ndjson};
use reliability_support::{Expect, Outcome, Reader, Repo, check_corpus, corpus_dir, readme_cases};

/// This test's name in the corpus README's `test` column.
const THIS_TEST: &str = "core";

#[test]
fn the_readme_lists_exactly_the_corpus_files() {
    let mut on_disk: Vec<String> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "README.md")
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = readme_cases().into_iter().map(|(f, _)| f).collect();
    listed.sort();
    assert_eq!(
        listed,
        on_disk,
        "README table vs. files in {}",
        corpus_dir().display()
    );
    for (file, test) in readme_cases() {
        assert!(
            test.split(',').map(str::trim).all(|t| {
                [
                    "core",
                    "findings",
                    "review-fix",
                    "planex",
                    "ci-autofix",
                    "adapters",
                ]
                .contains(&t)
            }),
            "{file}: unknown test {test:?}"
        );
    }
}

#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)]
struct FixProgress {
    version: u32,
    session: String,
    findings: Vec<serde_json::Value>,
}

fn read_state(path: &Path) -> Outcome {
    match read_json::<FixProgress>(path) {
        Ok(_) => Outcome::Read {
            kept: 1,
            rejected: Vec::new(),
        },
        Err(e) => Outcome::Error(e.to_string()),
    }
}

fn read_board(path: &Path) -> Outcome {
    match read_ndjson::<serde_json::Value>(path) {
        Ok(read) => Outcome::Read {
            kept: read.entries.len(),
            rejected: read.details(),
        },
        Err(e) => Outcome::Error(e.to_string()),
    }
}

fn cases() -> Vec<(&'static str, Reader, Expect)> {
    use Expect::{Error, Read};
    vec![
        (
            "state-truncated.json",
            read_state,
            Error(&["line 5 column 31", "EOF while parsing"]),
        ),
        (
            "state-wrong-types.json",
            read_state,
            Error(&["line 2 column 18", "invalid type"]),
        ),
        (
            "discoveries-corrupt.ndjson",
            read_board,
            Read {
                kept: 2,
                rejected: &[
                    &["line 2", "truncated"],
                    &["line 3", "empty line"],
                    &["line 4", "expected value"],
                ],
            },
        ),
    ]
}

#[test]
fn every_corpus_file_gives_a_located_error_or_located_rejections_and_writes_nothing() {
    check_corpus(THIS_TEST, &cases());
}

/// An NDJSON board has no field limit (the engine hands agents its path,
/// never its content): a 10 MB line is read.
#[test]
fn a_ten_megabyte_board_line_is_read() {
    let huge = "x".repeat(10 << 20);
    let repo = Repo::new();
    let board = repo.path().join("discoveries.ndjson");
    std::fs::write(
        &board,
        format!("{{\"data\": \"{huge}\"}}\n{{\"cut\": \"{huge}\n"),
    )
    .unwrap();
    let read = read_ndjson::<serde_json::Value>(&board).unwrap();
    assert_eq!((read.entries.len(), read.skipped.len()), (1, 1));
    assert_eq!(read.skipped[0].line, 2);
}
