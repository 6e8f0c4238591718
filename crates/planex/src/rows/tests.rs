use std::fs;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use orchestrator_core::state::{NdjsonBoard, SkipReason};

/// The seed's sample `explore.csv`, verbatim.
const SEED_EXPLORE: &str = r#"id,angle,description,focus,deps,wave,status,findings,key_files,error
"E1","architecture","Explore codebase architecture for: auth system","architecture","","1","pending","","",""
"E2","dependencies","Explore dependency landscape for: auth system","dependencies","","1","pending","","",""
"E3","testing","Explore test infrastructure for: auth system","testing","","1","pending","","",""
"#;

/// The seed's sample `tasks.csv`, verbatim.
const SEED_TASKS: &str = r#"id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave,status,findings,files_modified,tests_passed,acceptance_met,error
"T1","Setup types","Create type definitions","Verify types compile with tsc","All interfaces exported","src/types/**","Follow existing patterns || src/types/index.ts","tsc --noEmit","","E1;E2","1","pending","","","","",""
"T2","Implement core","Implement core auth logic","Unit test: login returns token","Login flow works end-to-end","src/auth/**","Reuse BaseService || src/services/Base.ts","npm test -- --grep auth","T1","E1;E2;T1","2","pending","","","","",""
"#;

fn parse_tasks(text: &str) -> Result<Vec<TaskRow>, StateError> {
    let path = Path::new("s/tasks.csv");
    TaskRow::from_table(path, &CsvTable::parse(path, text.as_bytes())?)
}

fn tasks_bytes(rows: &[TaskRow]) -> String {
    let bytes = TaskRow::to_table(rows)
        .to_csv_bytes(Path::new("s/tasks.csv"))
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn seed_explore_csv_reads_and_rewrites_byte_for_byte() {
    let path = Path::new("explore.csv");
    let rows = ExploreRow::from_table(
        path,
        &CsvTable::parse(path, SEED_EXPLORE.as_bytes()).unwrap(),
    )
    .unwrap();
    let mut e1 = ExploreRow::new(
        "E1",
        "architecture",
        "Explore codebase architecture for: auth system",
        "architecture",
    );
    e1.wave = Some(1);
    assert_eq!(rows[0], e1);
    assert_eq!(rows.len(), 3);
    let back = ExploreRow::to_table(&rows).to_csv_bytes(path).unwrap();
    assert_eq!(String::from_utf8(back).unwrap(), SEED_EXPLORE);
}

#[test]
fn seed_tasks_csv_reads_and_rewrites_byte_for_byte() {
    let rows = parse_tasks(SEED_TASKS).unwrap();
    assert_eq!(rows.len(), 2);
    let t2 = &rows[1];
    assert_eq!(t2.deps, ["T1"]);
    assert_eq!(t2.context_from, ["E1", "E2", "T1"]);
    assert_eq!(t2.wave, Some(2));
    assert_eq!(t2.status, RowStatus::Pending);
    assert_eq!(t2.tests_passed, None);
    assert_eq!(
        t2.hint_parts(),
        ("Reuse BaseService", vec!["src/services/Base.ts"])
    );
    assert!(t2.extra.is_empty());
    assert_eq!(tasks_bytes(&rows), SEED_TASKS);
}

#[test]
fn lists_are_trimmed_and_empty_items_dropped() {
    assert_eq!(split_list(" E1 ; ;E2;; T3 "), ["E1", "E2", "T3"]);
    assert!(split_list("").is_empty());
    assert!(split_list(" ; ").is_empty());
}

#[test]
fn status_and_flags_are_lenient_about_case_and_blanks() {
    assert_eq!("".parse::<RowStatus>(), Ok(RowStatus::Pending));
    assert_eq!(" Completed ".parse::<RowStatus>(), Ok(RowStatus::Completed));
    assert_eq!(
        "done".parse::<RowStatus>().unwrap_err().to_string(),
        "unknown row status \"done\", expected one of pending, completed, failed, skipped"
    );
    let header = TASK_COLUMNS.join(",");
    let rows = parse_tasks(&format!(
        "{header}\nT1,a,b,c,d,e,f,g,,,1,FAILED,,,TRUE,,boom\nT2,a,b,c,d,e,f,g,,,,,,, false ,,\n"
    ))
    .unwrap();
    assert_eq!(
        (rows[0].status, rows[0].tests_passed),
        (RowStatus::Failed, Some(true))
    );
    assert_eq!((rows[1].wave, rows[1].tests_passed), (None, Some(false)));
}

#[test]
fn wave_csv_without_output_columns_keeps_prev_context_as_extra() {
    let text = concat!(
        "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,",
        "deps,context_from,wave,prev_context\n",
        "\"T2\",\"Implement core\",\"d\",\"t\",\"a\",\"src/**\",\"\",\"\",\"T1\",\"E1;T1\",\"2\",",
        "\"[Task T1] Created types\"\n",
    );
    let rows = parse_tasks(text).unwrap();
    assert_eq!(rows[0].status, RowStatus::Pending);
    assert_eq!(rows[0].findings, "");
    assert_eq!(
        rows[0].extra,
        [(
            "prev_context".to_owned(),
            "[Task T1] Created types".to_owned()
        )]
    );
    let table = TaskRow::to_table(&rows);
    assert_eq!(
        table.headers.last().map(String::as_str),
        Some("prev_context")
    );
    assert_eq!(table.headers.len(), TASK_COLUMNS.len() + 1);
}

#[test]
fn missing_required_column_names_file_and_column() {
    let err = parse_tasks("id,title,description\n\"T1\",\"a\",\"b\"\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "CSV file s/tasks.csv has no `test` column (header line 1)"
    );
    let explore = Path::new("e.csv");
    let table = CsvTable::parse(explore, b"id,angle,description,focus,deps\n").unwrap();
    let err = ExploreRow::from_table(explore, &table).unwrap_err();
    assert_eq!(
        err.to_string(),
        "CSV file e.csv has no `wave` column (header line 1)"
    );
}

#[test]
fn bad_values_name_file_line_column_and_expected_values() {
    let header = TASK_COLUMNS.join(",");
    let ok = "T1,a,b,c,d,e,f,g,,,1,pending,,,,,";
    let cases = [
        (
            "T2,a,b,c,d,e,f,g,,,1,done,,,,,",
            "CSV file s/tasks.csv line 3 column `status`: invalid value \"done\", \
             expected one of pending, completed, failed, skipped (or empty)",
        ),
        (
            "T2,a,b,c,d,e,f,g,,,two,pending,,,,,",
            "CSV file s/tasks.csv line 3 column `wave`: invalid value \"two\", \
             expected a whole number (the wave, 1-based) or empty",
        ),
        (
            "T2,a,b,c,d,e,f,g,,,-1,pending,,,,,",
            "CSV file s/tasks.csv line 3 column `wave`: invalid value \"-1\", \
             expected a whole number (the wave, 1-based) or empty",
        ),
        (
            "T2,a,b,c,d,e,f,g,,,1,pending,,,yes,,",
            "CSV file s/tasks.csv line 3 column `tests_passed`: invalid value \"yes\", \
             expected true, false or empty",
        ),
    ];
    for (row, expected) in cases {
        let err = parse_tasks(&format!("{header}\n{ok}\n{row}\n")).unwrap_err();
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn extra_columns_are_unioned_in_first_appearance_order() {
    let mut a = TaskRow::new("T1", "a", "b");
    a.extra = vec![
        ("owner".into(), "ann".into()),
        ("id".into(), "ignored".into()),
    ];
    let mut b = TaskRow::new("T2", "c", "d");
    b.extra = vec![("note".into(), "n".into()), ("owner".into(), "bob".into())];
    let table = TaskRow::to_table(&[a, b]);
    assert_eq!(&table.headers[TASK_COLUMNS.len()..], ["owner", "note"]);
    assert_eq!(&table.rows[0].fields[TASK_COLUMNS.len()..], ["ann", ""]);
    assert_eq!(&table.rows[1].fields[TASK_COLUMNS.len()..], ["bob", "n"]);
    assert_eq!(table.rows[0].fields[0], "T1");
}

#[test]
fn hint_parts_split_tips_and_files() {
    let mut t = TaskRow::new("T1", "", "");
    t.hints = "Use the builder || a.rs; b.rs;".into();
    assert_eq!(t.hint_parts(), ("Use the builder", vec!["a.rs", "b.rs"]));
    t.hints = "|| only/files.rs".into();
    assert_eq!(t.hint_parts(), ("", vec!["only/files.rs"]));
    t.hints = "just tips".into();
    assert_eq!(t.hint_parts(), ("just tips", vec![]));
}

#[test]
fn files_round_trip_through_the_convenience_functions() {
    let dir = tempfile::tempdir().unwrap();
    let explore_path = dir.path().join("explore.csv");
    let mut e = ExploreRow::new("E1", "testing", "d", "f");
    e.status = RowStatus::Completed;
    e.key_files = vec!["src/a.rs".into(), "src/b.rs".into()];
    write_explore_csv(&explore_path, std::slice::from_ref(&e)).unwrap();
    assert_eq!(read_explore_csv(&explore_path).unwrap(), [e]);

    let tasks_path = dir.path().join("tasks.csv");
    let mut t = TaskRow::new("T1", "t", "d");
    t.tests_passed = Some(false);
    t.files_modified = vec!["x.rs".into()];
    write_tasks_csv(&tasks_path, std::slice::from_ref(&t)).unwrap();
    assert_eq!(read_tasks_csv(&tasks_path).unwrap(), [t]);
    assert!(
        read_tasks_csv(dir.path().join("missing.csv"))
            .unwrap_err()
            .is_not_found()
    );
}

#[test]
fn written_tasks_csv_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.csv");
    let mut t1 = TaskRow::new("T1", "Setup types", "Create type definitions");
    t1.test = "Verify types compile with tsc".into();
    t1.acceptance_criteria = "All interfaces exported".into();
    t1.scope = "src/types/**".into();
    t1.hints = "Follow existing patterns || src/types/index.ts".into();
    t1.execution_directives = "tsc --noEmit".into();
    t1.context_from = vec!["E1".into(), "E2".into()];
    t1.wave = Some(1);
    t1.status = RowStatus::Completed;
    t1.findings = "Added \"AuthToken\", \"Session\" types;\nre-exported from index.ts".into();
    t1.files_modified = vec!["src/types/auth.ts".into(), "src/types/index.ts".into()];
    t1.tests_passed = Some(true);
    t1.acceptance_met = "All interfaces exported: met".into();
    t1.extra = vec![("owner".into(), "agent-1".into())];
    let mut t2 = TaskRow::new(
        "T2",
        "Implement core",
        "Implement core auth logic, with 2FA ✓",
    );
    t2.deps = vec!["T1".into()];
    t2.context_from = vec!["E1".into(), "E2".into(), "T1".into()];
    t2.wave = Some(2);
    t2.status = RowStatus::Failed;
    t2.tests_passed = Some(false);
    t2.error = "npm test exited with 1".into();
    write_tasks_csv(&path, &[t1, t2]).unwrap();
    insta::assert_snapshot!("tasks_csv", fs::read_to_string(&path).unwrap());
}

#[test]
fn discoveries_use_the_seed_field_names() {
    let d = Discovery {
        ts: "2026-02-28T10:00:00+08:00".into(),
        worker: "E1".into(),
        kind: DiscoveryType::CodePattern,
        data: json!({"name": "BaseService", "file": "src/services/Base.ts"}),
    };
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({"ts": "2026-02-28T10:00:00+08:00", "worker": "E1", "type": "code_pattern",
               "data": {"name": "BaseService", "file": "src/services/Base.ts"}})
    );
    for kind in DiscoveryType::ALL {
        assert_eq!(serde_json::to_value(kind).unwrap(), json!(kind.as_str()));
        assert_eq!(kind.to_string(), kind.as_str());
    }
    let now = Discovery::now("T1", DiscoveryType::Blocker, json!({"issue": "x"}));
    assert!(now.ts.parse::<jiff::Timestamp>().is_ok());
}

#[test]
fn discovery_board_skips_unknown_types_with_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("discoveries.ndjson");
    fs::write(
        &path,
        concat!(
            r#"{"ts":"t","worker":"E1","type":"tech_stack","data":{"framework":"axum"}}"#,
            "\n",
            r#"{"ts":"t","worker":"E2","type":"rumour","data":{}}"#,
            "\n",
        ),
    )
    .unwrap();
    let board = NdjsonBoard::open(&path).unwrap();
    board
        .append(&Discovery::now(
            "T1",
            DiscoveryType::TestCommand,
            json!({"command": "cargo test"}),
        ))
        .unwrap();
    let read = board.read::<Discovery>().unwrap();
    assert_eq!(
        read.entries.iter().map(|d| d.kind).collect::<Vec<_>>(),
        [DiscoveryType::TechStack, DiscoveryType::TestCommand]
    );
    assert_eq!(read.skipped.len(), 1);
    assert_eq!(
        (read.skipped[0].line, read.skipped[0].reason),
        (2, SkipReason::Malformed)
    );
    assert!(
        read.skipped[0]
            .message
            .starts_with("unknown variant `rumour`"),
        "{:?}",
        read.skipped
    );
}

/// Text with the characters CSV has to quote, plus arbitrary unicode.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::string::string_regex("[a-z \",;\n\r|é中🎉\t']{0,16}").unwrap(),
        any::<String>(),
    ]
}

/// List items that survive `;`-joining: non-empty, trimmed, no `;`.
fn list() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(
        proptest::string::string_regex(
            "[A-Za-z0-9_./*é中-]([A-Za-z0-9_ ./*é中\"',-]{0,8}[A-Za-z0-9])?",
        )
        .unwrap(),
        0..4,
    )
}

fn status() -> impl Strategy<Value = RowStatus> {
    proptest::sample::select(RowStatus::ALL.to_vec())
}

prop_compose! {
    fn task_row(extra_names: Vec<String>)(
        texts in proptest::collection::vec(text(), 11),
        lists in proptest::collection::vec(list(), 3),
        context_from in list(),
        wave in proptest::option::of(any::<u32>()),
        status in status(),
        tests_passed in proptest::option::of(any::<bool>()),
        extra_values in proptest::collection::vec(text(), extra_names.len()),
    ) -> TaskRow {
        let mut t = texts.into_iter();
        let mut l = lists.into_iter();
        let mut next = || t.next().unwrap_or_default();
        TaskRow {
            id: next(),
            title: next(),
            description: next(),
            test: next(),
            acceptance_criteria: next(),
            scope: next(),
            hints: next(),
            execution_directives: next(),
            deps: l.next().unwrap_or_default(),
            context_from,
            wave,
            status,
            findings: next(),
            files_modified: l.next().unwrap_or_default(),
            tests_passed,
            acceptance_met: next(),
            error: next(),
            extra: extra_names.iter().cloned().zip(extra_values).collect(),
        }
    }
}

fn task_table() -> impl Strategy<Value = Vec<TaskRow>> {
    proptest::collection::btree_set(
        proptest::string::string_regex("x_[a-z]{1,5}").unwrap(),
        0..3,
    )
    .prop_flat_map(|names| {
        let names: Vec<String> = names.into_iter().collect();
        proptest::collection::vec(task_row(names), 0..6)
    })
}

proptest! {
    #[test]
    fn task_rows_round_trip_through_csv(rows in task_table()) {
        let path = Path::new("p/tasks.csv");
        let bytes = TaskRow::to_table(&rows).to_csv_bytes(path).unwrap();
        let table = CsvTable::parse(path, &bytes).unwrap();
        let back = TaskRow::from_table(path, &table).unwrap();
        prop_assert_eq!(back, rows);
    }
}
