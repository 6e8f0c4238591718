use super::key::{CONTEXT_LINES, context_at, ledger_key, normalise};
use super::*;
use orchestrator_core::finding::Severity;
use proptest::prelude::*;

fn finding_at(line: u32) -> Finding {
    Finding::new(
        format!("R1@src/a.rs:{line}:1"),
        "unused thing",
        Severity::Medium,
    )
    .with_category("clippy::unused")
    .at("src/a.rs", Some(line))
}

fn insert(lines: &[String], at: usize, new: &[String]) -> String {
    let mut out: Vec<String> = lines[..at].to_vec();
    out.extend_from_slice(new);
    out.extend_from_slice(&lines[at..]);
    out.join("\n")
}

/// Whether a window of the file overlapping the inserted lines
/// `[at, at + n)` repeats `context` exactly (the one case where an
/// insertion may change the key: a new identical spot above).
fn insertion_repeats_context(text: &str, at: usize, n: usize, context: &str) -> bool {
    let lines: Vec<String> = text.lines().map(normalise).collect();
    let first = at.saturating_sub(CONTEXT_LINES - 1);
    (first..at + n).any(|i| lines[i..(i + CONTEXT_LINES).min(lines.len())].join("\n") == context)
}

proptest! {
    /// A finding moved by lines inserted anywhere above it keeps its key.
    #[test]
    fn inserted_lines_above_keep_the_key(
        lines in prop::collection::vec("[a-d{}; ]{0,8}", 1..40),
        pick in any::<prop::sample::Index>(),
        place in any::<prop::sample::Index>(),
        inserted in prop::collection::vec("[a-d{}; ]{0,8}", 1..=20),
    ) {
        let at = pick.index(lines.len());
        let before = lines.join("\n");
        let line = u32::try_from(at + 1).unwrap();
        let key = ledger_key(&finding_at(line), Some(&before));
        let insert_at = place.index(at + 1);
        let after = insert(&lines, insert_at, &inserted);
        if let Some((context, _)) = context_at(&before, line) {
            prop_assume!(!insertion_repeats_context(&after, insert_at, inserted.len(), &context));
        }
        let moved = line + u32::try_from(inserted.len()).unwrap();
        prop_assert_eq!(ledger_key(&finding_at(moved), Some(&after)), key);
    }
}

fn sample_lines() -> Vec<String> {
    (1..=30)
        .map(|i| format!("    let v{i} = compute({i});"))
        .collect()
}

#[test]
fn a_finding_moved_by_ten_lines_keeps_its_key() {
    let lines = sample_lines();
    let before = lines.join("\n");
    let key = ledger_key(&finding_at(12), Some(&before));
    let ten: Vec<String> = (0..10).map(|i| format!("// added {i}")).collect();
    let after = insert(&lines, 3, &ten);
    assert_eq!(ledger_key(&finding_at(22), Some(&after)), key);
    // Re-indenting the lines keeps it too.
    let reindented = before.replace("    let", "\tlet");
    assert_eq!(ledger_key(&finding_at(12), Some(&reindented)), key);
}

#[test]
fn a_changed_line_another_rule_or_an_identical_spot_changes_the_key() {
    let lines = sample_lines();
    let before = lines.join("\n");
    let key = ledger_key(&finding_at(12), Some(&before));
    let edited = before.replace("compute(12)", "compute(99)");
    assert_ne!(ledger_key(&finding_at(12), Some(&edited)), key);
    let other_rule = finding_at(12).with_category("clippy::other");
    assert_ne!(ledger_key(&other_rule, Some(&before)), key);
    let twice = format!("{}\n{}", lines[11..14].join("\n"), before);
    // The same three lines earlier in the file: the finding is their second
    // occurrence now, and the first occurrence gets the old key.
    assert_ne!(ledger_key(&finding_at(15), Some(&twice)), key);
    assert_eq!(ledger_key(&finding_at(1), Some(&twice)), key);
}

#[test]
fn partial_fingerprints_win_over_the_source() {
    let mut f = finding_at(3);
    f.partial_fingerprints
        .insert("primaryLocationLineHash".to_owned(), "abc:1".to_owned());
    let key = ledger_key(&f, Some("a\nb\nc\n"));
    let mut moved = finding_at(40);
    moved.partial_fingerprints = f.partial_fingerprints.clone();
    assert_eq!(ledger_key(&moved, None), key);
    assert_ne!(ledger_key(&finding_at(3), Some("a\nb\nc\n")), key);
}

#[test]
fn without_a_readable_line_the_title_keys_it() {
    let f = finding_at(3);
    assert_eq!(ledger_key(&f, None), ledger_key(&finding_at(9), None));
    assert_eq!(ledger_key(&f, Some("one line")), ledger_key(&f, None));
}

fn ledger_with(events: Vec<Event>) -> FindingsLedger {
    let mut ledger = FindingsLedger::default();
    ledger.observe("k1", &finding_at(3), "r1", "s1", "t0");
    for e in events {
        ledger.record("k1", e, "t1");
    }
    ledger
}

#[test]
fn the_status_is_the_last_resolution_and_says_what_a_run_skips() {
    let fixed = ledger_with(vec![Event::Fixed {
        commit: "0123456789abcdef".to_owned(),
    }]);
    let entry = &fixed.entries["k1"];
    assert_eq!(
        entry.skip_reason("builtin", false, |_| true).as_deref(),
        Some("fixed in 0123456789ab")
    );
    assert_eq!(entry.skip_reason("builtin", false, |_| false), None);

    let failed = ledger_with(vec![Event::Failed {
        reason: "tests failed".to_owned(),
    }]);
    let entry = &failed.entries["k1"];
    assert!(entry.skip_reason("builtin", false, |_| true).is_some());
    assert_eq!(entry.skip_reason("builtin", true, |_| true), None);

    let not_fixable = ledger_with(vec![Event::NotFixable {
        agent: "builtin".to_owned(),
        reason: "no suggestion".to_owned(),
    }]);
    let entry = &not_fixable.entries["k1"];
    assert!(entry.skip_reason("builtin", true, |_| true).is_some());
    assert_eq!(entry.skip_reason("claude", false, |_| true), None);

    let reopened = ledger_with(vec![
        Event::Declined {
            reason: "by design".to_owned(),
        },
        Event::Reopened,
    ]);
    let entry = &reopened.entries["k1"];
    assert_eq!(entry.status(), Status::Open);
    assert_eq!(entry.history.len(), 3);
}

#[test]
fn recording_a_run_again_adds_nothing_twice() {
    let mut ledger = ledger_with(vec![Event::Fixed {
        commit: "c1".to_owned(),
    }]);
    ledger.observe("k1", &finding_at(3), "r1", "s1", "t2");
    ledger.record(
        "k1",
        Event::Fixed {
            commit: "c1".to_owned(),
        },
        "t2",
    );
    assert_eq!(ledger.entries["k1"].history.len(), 2);
}

#[test]
fn ids_resolve_by_key_prefix_or_finding_id_and_name_the_closest() {
    let mut ledger = FindingsLedger::default();
    ledger.observe("aaaa1111", &finding_at(3), "r1", "s", "t");
    ledger.observe("aaab2222", &finding_at(4), "r2", "s", "t");
    assert_eq!(ledger.resolve("aaaa").unwrap(), "aaaa1111");
    assert_eq!(ledger.resolve("R1@src/a.rs:4:1").unwrap(), "aaab2222");
    let err = ledger.resolve("aaa").unwrap_err();
    assert_eq!(err.matches, 2);
    let err = ledger.resolve("aaab2223").unwrap_err();
    assert_eq!(err.closest.first().map(String::as_str), Some("aaab2222"));
}

#[test]
fn a_corrupt_or_unknown_ledger_is_an_error_naming_it_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LEDGER_FILE);
    assert_eq!(
        FindingsLedger::read(&path).unwrap(),
        FindingsLedger::default()
    );

    std::fs::write(&path, "{\"version\": 1,\n \"entries\": {\n").unwrap();
    let err = FindingsLedger::read(&path).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("line 3"), "{message}");

    std::fs::write(&path, "{\"version\": 7, \"entries\": {}}").unwrap();
    let err = FindingsLedger::read(&path).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert_eq!(
        err.to_string(),
        format!(
            "{} has format version 7, this build reads version 1",
            path.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\"version\": 7, \"entries\": {}}"
    );
}

#[test]
fn the_ledger_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LEDGER_FILE);
    let ledger = ledger_with(vec![Event::Declined {
        reason: "by design".to_owned(),
    }]);
    ledger.write(&path).unwrap();
    assert_eq!(FindingsLedger::read(&path).unwrap(), ledger);
}

#[test]
fn two_findings_of_one_rule_on_one_line_get_two_keys() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), "let p = P { x: x, y: y };\n").unwrap();
    let at = |col: u32| {
        Finding::new(format!("R1@src/a.rs:1:{col}"), "redundant", Severity::Low)
            .with_category("clippy::redundant_field_names")
            .at("src/a.rs", Some(1))
    };
    let keys = run::keys_of(dir.path(), &[at(13), at(19)]);
    assert_eq!(keys.len(), 2);
    assert_ne!(keys["R1@src/a.rs:1:13"], keys["R1@src/a.rs:1:19"]);
}
