//! The bad-input corpus (`tests/data/bad-input/` at the repository root)
//! through the core readers: findings (`formats::detect_and_parse`), task
//! CSVs (`rows::read_tasks_csv`, then `waves::compute_waves`), JSON state
//! files (`state::read_json`) and NDJSON boards (`state::read_ndjson`).
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
use std::time::{Duration, Instant};

use orchestrator_core::formats;
use orchestrator_core::rows::read_tasks_csv;
use orchestrator_core::state::{read_json, read_ndjson};
use orchestrator_core::waves::{WaveOptions, WaveTask, compute_waves};
use reliability_support::{Repo, assert_covers_readme_rows, corpus_dir, readme_cases};

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
                ["core", "review-fix", "planex", "ci-autofix", "adapters"].contains(&t)
            }),
            "{file}: unknown test {test:?}"
        );
    }
}

/// What a reader made of a corpus file.
#[derive(Debug)]
enum Outcome {
    /// The whole file was refused with this message.
    Error(String),
    /// The file was read: entries kept, and one message per rejected entry
    /// or skipped line.
    Read { kept: usize, rejected: Vec<String> },
}

/// Runs `read` on a copy of `file` inside a fresh repository, with the
/// budget, no-panic and nothing-written checks.
fn run_case(file: &str, read: impl FnOnce(&Path) -> Outcome) -> Outcome {
    let repo = Repo::new();
    let input = repo.input(file);
    let before = repo.snapshot();
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&input)))
        .unwrap_or_else(|_| panic!("{file}: the reader panicked"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{file}: took {:?}",
        started.elapsed()
    );
    assert_eq!(
        repo.snapshot(),
        before,
        "{file}: the reader wrote something"
    );
    outcome
}

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

fn read_tasks(path: &Path) -> Outcome {
    let rows = match read_tasks_csv(path) {
        Ok(rows) => rows,
        Err(e) => return Outcome::Error(e.to_string()),
    };
    let tasks: Vec<WaveTask<'_>> = rows
        .iter()
        .map(|r| WaveTask::new(&r.id).deps(r.deps.iter().map(String::as_str)))
        .collect();
    match compute_waves(&tasks, WaveOptions::default()) {
        Ok(_) => Outcome::Read {
            kept: rows.len(),
            rejected: Vec::new(),
        },
        // The waves module numbers rows; the file is the caller's to name.
        Err(e) => Outcome::Error(format!("{}: {e}", path.display())),
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

/// The expected outcome of each case: an error with these fragments, or a
/// read keeping `kept` entries and rejecting one entry per fragment list.
enum Expect {
    Error(&'static [&'static str]),
    Read {
        kept: usize,
        rejected: &'static [&'static [&'static str]],
    },
}

type Reader = fn(&Path) -> Outcome;

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
        (
            "tasks-empty.csv",
            read_tasks,
            Error(&["no `id` column", "line 1"]),
        ),
        (
            "tasks-unbalanced-quote.csv",
            read_tasks,
            Error(&["line 3", "unbalanced quote"]),
        ),
        (
            "tasks-unclosed-quote.csv",
            read_tasks,
            Error(&["line 4", "unbalanced quote"]),
        ),
        (
            "tasks-ragged-row.csv",
            read_tasks,
            Error(&["line 3", "expected 17 fields", "found 3"]),
        ),
        (
            "tasks-wrong-field-types.csv",
            read_tasks,
            Error(&["line 3", "column `wave`", "\"second\""]),
        ),
        (
            "tasks-missing-id-column.csv",
            read_tasks,
            Error(&["no `id` column", "line 1"]),
        ),
        (
            "tasks-invalid-utf8.csv",
            read_tasks,
            Error(&["line 3", "invalid UTF-8 in field 2"]),
        ),
        (
            "tasks-binary.bin",
            read_tasks,
            Error(&["line 1", "invalid UTF-8"]),
        ),
        (
            "tasks-duplicate-ids.csv",
            read_tasks,
            Error(&["duplicate task id \"T1\" in row 3", "first seen in row 1"]),
        ),
        (
            "tasks-unknown-dep.csv",
            read_tasks,
            Error(&["task \"T2\" (row 2) depends on unknown task \"T9\""]),
        ),
        (
            "tasks-cycle.csv",
            read_tasks,
            Error(&["dependency cycle", "T1", "T2", "T3"]),
        ),
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

fn check(file: &str, outcome: &Outcome, expect: &Expect) {
    match (outcome, expect) {
        (Outcome::Error(msg), Expect::Error(fragments)) => {
            assert!(
                msg.contains(file),
                "{file}: the message does not name the file: {msg}"
            );
            for f in *fragments {
                assert!(msg.contains(f), "{file}: {f:?} missing from: {msg}");
            }
        }
        (
            Outcome::Read { kept, rejected },
            Expect::Read {
                kept: want,
                rejected: want_rejected,
            },
        ) => {
            assert_eq!(kept, want, "{file}: entries kept ({rejected:?})");
            assert_eq!(rejected.len(), want_rejected.len(), "{file}: {rejected:?}");
            for (msg, fragments) in rejected.iter().zip(want_rejected.iter()) {
                assert!(
                    msg.contains(file),
                    "{file}: the rejection does not name the file: {msg}"
                );
                for f in *fragments {
                    assert!(msg.contains(f), "{file}: {f:?} missing from: {msg}");
                }
            }
        }
        (other, _) => panic!("{file}: unexpected outcome {other:?}"),
    }
}

#[test]
fn every_corpus_file_gives_a_located_error_or_located_rejections_and_writes_nothing() {
    let cases = cases();
    assert_covers_readme_rows(THIS_TEST, cases.iter().map(|(f, _, _)| *f));
    for (file, reader, expect) in &cases {
        let outcome = run_case(file, reader);
        check(file, &outcome, expect);
    }
}

/// A path that is not UTF-8 still reads, and errors show it (lossily).
#[test]
fn a_non_utf8_file_name_is_named_in_the_error() {
    use std::os::unix::ffi::OsStrExt;
    let repo = Repo::new();
    let name = std::ffi::OsStr::from_bytes(b"tasks-\xff\xfe.csv");
    let path = repo.path().join(name);
    std::fs::copy(corpus_dir().join("tasks-ragged-row.csv"), &path).unwrap();
    let before = repo.snapshot();
    let err = read_tasks_csv(&path).unwrap_err().to_string();
    assert!(err.contains("tasks-\u{fffd}\u{fffd}.csv"), "{err}");
    assert!(err.contains("line 3"), "{err}");
    assert_eq!(repo.snapshot(), before);
}

const TASKS_HEADER: &str = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave,status,findings,files_modified,tests_passed,acceptance_met,error";
/// The 14 cells after `description`.
const REST: &str = ",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"pending\",\"\",\"\",\"\",\"\",\"\"";

/// A 10 MB field (generated here rather than committed) is refused fast,
/// with its place: a finding on its own (the rest kept), a task CSV whole.
/// An NDJSON board has no field limit (the engine hands agents its path,
/// never its content): a 10 MB line is read.
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

    let repo = Repo::new();
    let csv = repo.path().join("tasks.csv");
    std::fs::write(
        &csv,
        format!("{TASKS_HEADER}\n\"T1\",\"t\",\"{huge}\"{REST}\n\"T2\",\"u\",\"v\"{REST}\n"),
    )
    .unwrap();
    let started = Instant::now();
    let err = read_tasks_csv(&csv).unwrap_err().to_string();
    let csv_took = started.elapsed();
    assert_eq!(
        err,
        format!(
            "CSV file {} line 2 column `description`: the cell is 10485760 bytes, \
             over the limit of 1048576 bytes (1 MiB)",
            csv.display()
        )
    );
    // The same cell with a stray quote in its middle is refused with its line.
    std::fs::write(
        &csv,
        format!("{TASKS_HEADER}\n\"T1\",\"t\",\"{huge}\"x{huge}\"{REST}\n"),
    )
    .unwrap();
    let err = read_tasks_csv(&csv).unwrap_err().to_string();
    assert!(
        err.contains("line 2") && err.contains("unbalanced quote"),
        "{err}"
    );

    let board = repo.path().join("discoveries.ndjson");
    std::fs::write(
        &board,
        format!("{{\"data\": \"{huge}\"}}\n{{\"cut\": \"{huge}\n"),
    )
    .unwrap();
    let read = read_ndjson::<serde_json::Value>(&board).unwrap();
    assert_eq!((read.entries.len(), read.skipped.len()), (1, 1));
    assert_eq!(read.skipped[0].line, 2);

    eprintln!(
        "10 MB field refused: findings {:.0} ms, tasks.csv {:.0} ms",
        findings_took.as_secs_f64() * 1000.0,
        csv_took.as_secs_f64() * 1000.0
    );
    assert!(findings_took < Duration::from_secs(5), "{findings_took:?}");
    assert!(csv_took < Duration::from_secs(5), "{csv_took:?}");
}
