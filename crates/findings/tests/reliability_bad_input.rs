//! The findings files of the bad-input corpus (`tests/data/bad-input/` at
//! the repository root) through `formats::detect_and_parse`.
//!
//! Every case either fails with a message that names the file and the place
//! (line, column, field or entry), or rejects a bad entry on its own with its
//! place and keeps the rest. Nothing panics, and nothing is written: each
//! case runs inside a temporary git repository whose `git status` and file
//! listing are compared before and after.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability_support;

use std::path::Path;
use std::time::{Duration, Instant};

use orchestrator_findings::formats;
use reliability_support::{Expect, Outcome, Reader, check_corpus};

/// This test's name in the corpus README's `test` column.
const THIS_TEST: &str = "findings";

fn read_findings(path: &Path) -> Outcome {
    let bytes = std::fs::read(path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    match formats::detect_and_parse(&text, &path.display().to_string()) {
        Ok(out) => Outcome::Read {
            kept: out.findings.len(),
            rejected: out.rejected.iter().map(ToString::to_string).collect(),
        },
        Err(e) => Outcome::Error(e.to_string()),
    }
}

fn cases() -> Vec<(&'static str, Reader, Expect)> {
    use Expect::{Error, Read};
    vec![
        (
            "findings-empty.json",
            read_findings,
            Error(&["the input is empty"]),
        ),
        (
            "findings-whitespace.json",
            read_findings,
            Error(&["the input is empty"]),
        ),
        (
            "findings-truncated.json",
            read_findings,
            Error(&["line 12, column 20", "EOF while parsing"]),
        ),
        (
            "findings-invalid.json",
            read_findings,
            Error(&["line 2, column 29", "key must be a string"]),
        ),
        (
            "findings-wrong-layout.json",
            read_findings,
            Error(&["`findings` is an object, expected an array"]),
        ),
        (
            "findings-binary.bin",
            read_findings,
            Error(&["unrecognised format", "not JSON"]),
        ),
        (
            "findings-lone-surrogate.json",
            read_findings,
            Error(&["line 1, column 79", "surrogate"]),
        ),
        (
            "findings-wrong-field-types.json",
            read_findings,
            Read {
                kept: 1,
                rejected: &[
                    &["findings[0]", "field `line`", "is an object"],
                    &["findings[1]", "field `severity`", "is a number"],
                    &["findings[2]", "field `title`", "is an array"],
                ],
            },
        ),
        (
            "findings-duplicate-ids.json",
            read_findings,
            Read {
                kept: 2,
                rejected: &[&["findings[1]", "reuses id `F1` of findings[0]"]],
            },
        ),
        // The core readers do not know the repository: these are read whole
        // here, and confined by review-fix (see its reliability test).
        (
            "findings-outside-repo.json",
            read_findings,
            Read {
                kept: 4,
                rejected: &[],
            },
        ),
        (
            "findings-symlink-escape.json",
            read_findings,
            Read {
                kept: 2,
                rejected: &[],
            },
        ),
        (
            "sarif-wrong-types.sarif",
            read_findings,
            Read {
                kept: 1,
                rejected: &[
                    &["runs[0].results[1]", "message.text"],
                    &["runs[0].results[2]", "is a string, expected an object"],
                ],
            },
        ),
        (
            "rdjsonl-bad-lines.jsonl",
            read_findings,
            Read {
                kept: 1,
                rejected: &[
                    &["rdjsonl-bad-lines.jsonl:2", "EOF"],
                    &["rdjsonl-bad-lines.jsonl:3", "expected"],
                    &[
                        "rdjsonl-bad-lines.jsonl:4",
                        "`location.range.start.line` is a string, expected a number",
                    ],
                ],
            },
        ),
    ]
}

#[test]
fn every_corpus_file_gives_a_located_error_or_located_rejections_and_writes_nothing() {
    check_corpus(THIS_TEST, &cases());
}

/// A 10 MB field (generated here rather than committed) is refused fast,
/// with its place: the finding on its own, the rest kept.
#[test]
fn a_ten_megabyte_field_is_refused_fast_with_its_place() {
    let huge = "x".repeat(10 << 20);
    let export = serde_json::json!({"findings": [
        {"id": "F1", "title": "t", "severity": "low", "file": "src/lib.rs", "line": 1,
         "description": huge},
        {"id": "F2", "title": "u", "severity": "low", "file": "src/lib.rs", "line": 2},
    ]})
    .to_string();
    let started = Instant::now();
    let out = formats::detect_and_parse(&export, "huge.json").unwrap();
    let findings_took = started.elapsed();
    assert_eq!(out.findings.len(), 1);
    assert_eq!(out.findings[0].id.as_str(), "F2");
    assert_eq!(
        out.rejected
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "huge.json: findings[0]: finding `F1`: field `description`: is 10485760 bytes, \
          over the limit of 65536 bytes (64 KiB)"
        ]
    );
    eprintln!(
        "10 MB field refused: findings {:.0} ms",
        findings_took.as_secs_f64() * 1000.0
    );
    assert!(findings_took < Duration::from_secs(5), "{findings_took:?}");
}
