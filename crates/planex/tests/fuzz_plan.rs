//! Fuzzing of planex's readers: `validate_tasks` on random task lists
//! (duplicate ids, unknown and cyclic dependencies, odd ids), the journal
//! reader on mutations of a real journal and on arbitrary bytes, and
//! `protocol::split_criteria` on arbitrary text, and the typed task and
//! exploration rows (`TaskRow::from_table`, `ExploreRow::from_table`) on
//! arbitrary bytes and mutations of a real `tasks.csv`. No panic, bounded
//! time, and every rejected plan names the row and the id.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fuzz_support;

use std::path::{Path, PathBuf};

use fuzz_support::{PARSE_BUDGET, bounded, config, hostile_bytes, hostile_text, mutated};
use orchestrator_core::state::CsvTable;
use orchestrator_planex::journal::{Journal, JournalEntry, TaskResult, read_journal};
use orchestrator_planex::protocol::split_criteria;
use orchestrator_planex::rows::{ExploreRow, RowStatus, TaskRow};
use orchestrator_planex::validate_tasks;
use proptest::prelude::*;

fn data(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// An id from a small pool so that duplicates, known and unknown references
/// and cycles all happen often; plus odd ids.
fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (1u8..8).prop_map(|n| format!("T{n}")),
        1 => (1u8..3).prop_map(|n| format!("E{n}")),
        1 => Just(String::new()),
        1 => Just(" T1 ".to_owned()),
        1 => "[a-zA-Z0-9;| -]{0,6}",
    ]
}

fn task() -> impl Strategy<Value = TaskRow> {
    (
        id(),
        proptest::collection::vec(id(), 0..3),
        proptest::collection::vec(id(), 0..2),
    )
        .prop_map(|(id, deps, context_from)| {
            let mut row = TaskRow::new(id, "title", "description");
            row.deps = deps;
            row.context_from = context_from;
            row
        })
}

/// A journal as the flow writes it, for mutation.
fn journal_bytes() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(dir.path()).unwrap();
    for (i, status) in [RowStatus::Completed, RowStatus::Failed, RowStatus::Skipped]
        .into_iter()
        .enumerate()
    {
        journal
            .append(JournalEntry::Task(TaskResult {
                id: format!("T{i}"),
                status,
                ..serde_json::from_value(serde_json::json!({"id": "x", "status": "completed"}))
                    .unwrap()
            }))
            .unwrap();
    }
    journal
        .append(JournalEntry::Reset {
            ids: vec!["T1".into(), "T2".into()],
        })
        .unwrap();
    std::fs::read(journal.path()).unwrap()
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn task_plans_are_accepted_or_rejected_with_the_row_and_id(
        mut rows in proptest::collection::vec(task(), 0..10)
    ) {
        let original = rows.clone();
        match bounded(PARSE_BUDGET, "validate_tasks", || validate_tasks(&mut rows, None)) {
            Ok(plan) => {
                // Every dependency is a task of an earlier wave.
                for row in &rows {
                    let wave = row.wave.expect("a wave for every row");
                    prop_assert!(wave >= 1 && wave <= plan.max_wave);
                    for dep in &row.deps {
                        let dep_row = rows.iter().find(|r| r.id.trim() == dep.trim());
                        if let Some(dep_row) = dep_row {
                            prop_assert!(dep_row.wave.unwrap() < wave, "{dep} not before {}", row.id);
                        }
                    }
                }
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains("tasks"), "{msg}");
                prop_assert_eq!(e.exit_code(), 2);
                // Nothing but the waves may change, and only on success.
                prop_assert_eq!(&rows.iter().map(|r| &r.id).collect::<Vec<_>>(),
                                &original.iter().map(|r| &r.id).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn journals_of_mutated_or_arbitrary_bytes_never_panic(
        bytes in prop_oneof![mutated(journal_bytes(), 6), hostile_bytes(500)]
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.ndjson");
        std::fs::write(&path, &bytes).unwrap();
        let read = bounded(PARSE_BUDGET, "read_journal", || read_journal(&path)).unwrap();
        if let Some(w) = &read.warning {
            prop_assert!(w.contains("journal.ndjson"), "{w}");
        }
    }

    #[test]
    fn criteria_text_never_panics(text in hostile_text(64)) {
        let criteria = bounded(PARSE_BUDGET, "split_criteria", || split_criteria(&text));
        for c in criteria {
            prop_assert!(!c.trim().is_empty());
        }
    }
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn csv_tables_of_arbitrary_bytes_never_panic(bytes in hostile_bytes(600)) {
        check_csv(&bytes)?;
    }

    #[test]
    fn tasks_csv_mutations_never_panic(
        bytes in mutated(data("tests/data/tasks.csv").into_bytes(), 6)
    ) {
        check_csv(&bytes)?;
    }
}

/// CSV contract: an error names the file (and a line for CSV syntax
/// errors); typed rows fail only with an error that names file and line.
fn check_csv(bytes: &[u8]) -> Result<(), TestCaseError> {
    let path = PathBuf::from("fuzz/tasks.csv");
    let table = match bounded(PARSE_BUDGET, "CsvTable::parse", || {
        CsvTable::parse(&path, bytes)
    }) {
        Ok(table) => table,
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(msg.contains("fuzz/tasks.csv"), "{msg}");
            prop_assert!(msg.contains("line") || msg.contains("header"), "{msg}");
            return Ok(());
        }
    };
    for row in &table.rows {
        prop_assert_eq!(row.fields.len(), table.headers.len());
    }
    if let Err(e) = TaskRow::from_table(&path, &table) {
        prop_assert!(e.to_string().contains("fuzz/tasks.csv"), "{e}");
    }
    if let Err(e) = ExploreRow::from_table(&path, &table) {
        prop_assert!(e.to_string().contains("fuzz/tasks.csv"), "{e}");
    }
    Ok(())
}
