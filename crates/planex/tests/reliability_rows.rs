//! The task CSVs of the bad-input corpus (`tests/data/bad-input/`) through
//! the row reader (`rows::read_tasks_csv`, then `waves::compute_waves`):
//! each fails with a message naming the file and the place (line, column,
//! row), nothing panics and nothing is written. `reliability_bad_input.rs`
//! runs the same files through `Planex::run_tasks_file`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability_support;

use std::path::Path;
use std::time::{Duration, Instant};

use orchestrator_core::waves::{WaveOptions, WaveTask, compute_waves};
use orchestrator_planex::rows::read_tasks_csv;
use reliability_support::{Expect, Outcome, Reader, Repo, check_corpus, corpus_dir};

/// The corpus README's `test` column names the flow's test; this one reads
/// the same files one layer down.
const THIS_TEST: &str = "planex";

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

fn cases() -> Vec<(&'static str, Reader, Expect)> {
    use Expect::Error;
    vec![
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
    ]
}

#[test]
fn every_task_file_gives_a_located_error_and_writes_nothing() {
    check_corpus(THIS_TEST, &cases());
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

/// A 10 MB cell (generated here rather than committed) refuses the task CSV
/// whole, fast, with its place.
#[test]
fn a_ten_megabyte_cell_is_refused_fast_with_its_place() {
    let huge = "x".repeat(10 << 20);
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
    eprintln!(
        "10 MB field refused: tasks.csv {:.0} ms",
        csv_took.as_secs_f64() * 1000.0
    );
    assert!(csv_took < Duration::from_secs(5), "{csv_took:?}");
}
