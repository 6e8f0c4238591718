//! SuggestionAgent on real clippy output, SARIF and rdjson samples, with a
//! real cargo to check the result.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod builtin_support;

use std::collections::BTreeSet;

use builtin_support::{cargo, fix_request, fixture_crate, fixtures, format_samples, read};
use orchestrator_adapters::builtin::SuggestionAgent;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, Role};
use orchestrator_core::finding::{Finding, Suggestion, TextEdit};
use orchestrator_findings::formats::{self, ParseOptions};

fn clippy_findings() -> Vec<Finding> {
    let text = std::fs::read_to_string(fixtures().join("clippy.json")).unwrap();
    let out = formats::detect_and_parse(&text, "clippy.json").unwrap();
    assert!(out.rejected.is_empty(), "{:?}", out.rejected);
    out.findings
}

fn by_category<'a>(findings: &'a [Finding], category: &str) -> &'a Finding {
    findings
        .iter()
        .find(|f| f.category.as_deref() == Some(category))
        .unwrap_or_else(|| panic!("no {category} finding"))
}

fn unsupported_reason(result: Result<impl std::fmt::Debug, AgentError>) -> String {
    match result {
        Err(AgentError::Unsupported { reason }) => reason,
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

/// Machine-applicable clippy findings in a fresh `cargo clippy` run.
fn fresh_clippy_findings(dir: &std::path::Path) -> Vec<Finding> {
    let (ok, stdout, stderr) = cargo(dir, &["clippy", "--all-targets", "--message-format=json"]);
    let out = formats::detect_and_parse(&stdout, "after.json").unwrap();
    let errors: Vec<&str> = out
        .findings
        .iter()
        .filter(|f| f.severity == orchestrator_core::Severity::High)
        .map(|f| f.description.as_str())
        .collect();
    assert!(
        ok,
        "clippy failed on the fixed crate:\n{stderr}\n{}\n{}",
        errors.join("\n"),
        read(dir, "src/lib.rs")
    );
    assert!(
        stdout.contains(r#""reason":"build-finished","success":true"#),
        "{stdout}"
    );
    out.findings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_clippy_suggestions_apply_one_finding_at_a_time() {
    let dir = fixture_crate();
    let findings = clippy_findings();
    let agent = SuggestionAgent::new();
    let mut fixed: Vec<String> = Vec::new();
    let mut stale: Vec<String> = Vec::new();
    let mut unfixable: Vec<String> = Vec::new();
    for finding in &findings {
        let category = finding.category.clone().unwrap();
        match agent.run(fix_request(dir.path(), finding)).await {
            Ok(resp) => {
                assert_eq!(resp.files_changed, ["src/lib.rs"], "{}", finding.id);
                fixed.push(category);
            }
            Err(AgentError::Unsupported { reason }) if reason.contains("stale suggestion") => {
                stale.push(category)
            }
            Err(AgentError::Unsupported { reason }) if reason.contains("not fixable") => {
                unfixable.push(category)
            }
            Err(e) => panic!("{}: unexpected error {e}", finding.id),
        }
    }
    // The three findings clippy gives no machine-applicable fix for.
    assert_eq!(
        unfixable,
        [
            "clippy::needless_range_loop",
            "clippy::too_many_arguments",
            "clippy::ptr_arg"
        ]
    );
    // redundant_clone removed `.clone()`, so let_and_return's replaced text
    // `let copy = greeting.clone();` is gone: reported stale, not applied.
    assert_eq!(stale, ["clippy::let_and_return"]);
    assert_eq!(fixed.len(), 13, "{fixed:?}");
    // bool_comparison was re-anchored inside needless_bool's replacement.
    let lib = read(dir.path(), "src/lib.rs");
    assert!(lib.contains("use std::fmt::Write;\n"), "{lib}");
    assert!(
        lib.contains("pub fn is_set(flag: bool) -> bool {\n    flag\n}"),
        "{lib}"
    );
    assert!(lib.contains("(0..10).contains(&n)"));
    assert!(lib.contains("let copy = greeting;"));

    // A fresh clippy run: none of the fixed lints is left, except those
    // whose fix was stale; the crate builds and its tests pass.
    let after = fresh_clippy_findings(dir.path());
    let stale_set: BTreeSet<&str> = stale.iter().map(String::as_str).collect();
    let remaining: Vec<&str> = after
        .iter()
        .filter(|f| !f.suggestions.is_empty())
        .filter_map(|f| f.category.as_deref())
        .collect();
    for category in &remaining {
        assert!(
            !fixed.iter().any(|c| c == category) || stale_set.contains(category),
            "{category} is still reported after its fix: {remaining:?}"
        );
    }
    // Left: the stale let_and_return in `greet`, and a new let_and_return in
    // `describe` that removing its `return` uncovered.
    let ids: Vec<String> = after
        .iter()
        .filter(|f| !f.suggestions.is_empty())
        .map(|f| f.id.to_string())
        .collect();
    assert_eq!(
        ids,
        [
            "clippy::let_and_return@src/lib.rs:95:5",
            "clippy::let_and_return@src/lib.rs:113:5"
        ]
    );
    let (ok, _, stderr) = cargo(dir.path(), &["test", "--quiet"]);
    assert!(ok, "the fixed crate's tests fail:\n{stderr}");
}

#[tokio::test]
async fn stale_suggestion_is_reported_and_the_file_is_untouched() {
    let dir = fixture_crate();
    let findings = clippy_findings();
    let finding = by_category(&findings, "clippy::manual_range_contains");
    let lib = read(dir.path(), "src/lib.rs").replace("n >= 0 && n < 10", "n >= 0 && n <= 9");
    std::fs::write(dir.path().join("src/lib.rs"), &lib).unwrap();
    let reason = unsupported_reason(
        SuggestionAgent::new()
            .run(fix_request(dir.path(), finding))
            .await,
    );
    assert!(
        reason.contains("stale suggestion for src/lib.rs:31")
            && reason.contains("n >= 0 && n < 10"),
        "{reason}"
    );
    assert_eq!(read(dir.path(), "src/lib.rs"), lib);
}

#[tokio::test]
async fn overlapping_edits_are_refused_and_nothing_is_written() {
    let dir = fixture_crate();
    let findings = clippy_findings();
    let mut merged = by_category(&findings, "clippy::needless_bool").clone();
    let inner = by_category(&findings, "clippy::bool_comparison");
    merged.suggestions[0]
        .edits
        .extend(inner.suggestions[0].edits.iter().cloned());
    let before = read(dir.path(), "src/lib.rs");
    let reason = unsupported_reason(
        SuggestionAgent::new()
            .run(fix_request(dir.path(), &merged))
            .await,
    );
    assert!(
        reason.contains("overlapping edits in src/lib.rs"),
        "{reason}"
    );
    assert_eq!(read(dir.path(), "src/lib.rs"), before);
}

#[tokio::test]
async fn finding_without_suggestion_is_not_fixable_by_this_agent() {
    let dir = fixture_crate();
    let findings = clippy_findings();
    let finding = by_category(&findings, "clippy::too_many_arguments");
    let reason = unsupported_reason(
        SuggestionAgent::new()
            .run(fix_request(dir.path(), finding))
            .await,
    );
    assert_eq!(
        reason,
        "finding clippy::too_many_arguments@src/lib.rs:88:1 carries no machine-applicable suggestion: not fixable by this agent"
    );
}

fn edit_of(file: &str, original: &str) -> Finding {
    let mut f = Finding::new("P1", "path test", orchestrator_core::Severity::Low);
    f.suggestions.push(Suggestion {
        message: None,
        edits: vec![TextEdit {
            file: file.into(),
            start_line: 1,
            start_column: 1,
            end_line: 1,
            end_column: 1 + original.chars().count() as u32,
            byte_range: None,
            original: original.into(),
            replacement: "pwned".into(),
        }],
    });
    f
}

#[tokio::test]
async fn paths_that_leave_the_workdir_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    let dir = fixture_crate();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        dir.path().join("link.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("linkdir")).unwrap();
    let absolute = outside.path().join("secret.txt").display().to_string();
    let cases = [
        ("../secret.txt", "contains `..`"),
        ("src/../../secret.txt", "contains `..`"),
        (absolute.as_str(), "is absolute"),
        ("link.txt", "outside the working directory"),
        ("linkdir/secret.txt", "outside the working directory"),
        ("", "is empty"),
        ("src/missing.rs", "cannot resolve"),
    ];
    for (path, why) in cases {
        let reason = unsupported_reason(
            SuggestionAgent::new()
                .run(fix_request(dir.path(), &edit_of(path, "secret")))
                .await,
        );
        assert!(
            reason.contains(&format!("refusing to edit {path:?}")) && reason.contains(why),
            "{path}: {reason}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "secret\n"
    );
}

#[tokio::test]
async fn malformed_context_is_reported() {
    let dir = fixture_crate();
    let agent = SuggestionAgent::new();
    let no_finding = AgentRequest::new("x", Role::Fix, "", dir.path());
    let reason = unsupported_reason(agent.run(no_finding).await);
    assert!(reason.contains("has no `finding` key"), "{reason}");
    let bad = AgentRequest::new("x", Role::Fix, "", dir.path())
        .with_context(serde_json::json!({"finding": {"id": 3}}));
    let reason = unsupported_reason(agent.run(bad).await);
    assert!(reason.contains("does not hold a finding"), "{reason}");
}

#[tokio::test]
async fn a_later_alternative_applies_when_the_first_is_stale() {
    let dir = fixture_crate();
    let mut finding = edit_of("src/lib.rs", "this text is not in the file");
    let good = edit_of("src/lib.rs", "Doubles a number");
    finding.suggestions.push(good.suggestions[0].clone());
    let resp = SuggestionAgent::new()
        .run(fix_request(dir.path(), &finding))
        .await
        .unwrap();
    assert_eq!(resp.files_changed, ["src/lib.rs"]);
    assert!(read(dir.path(), "src/lib.rs").contains("/// pwned (needless_return)."));
}

fn reader_for(dir: &std::path::Path) -> impl Fn(&str) -> Option<String> + '_ {
    move |path: &str| std::fs::read_to_string(dir.join(path)).ok()
}

#[tokio::test]
async fn sarif_and_rdjson_samples_apply_and_the_crate_still_builds() {
    let dir = fixture_crate();
    let agent = SuggestionAgent::new();
    let reader = reader_for(dir.path());
    let options = ParseOptions {
        sources: Some(&reader),
    };
    // Read both files before any fix, as a session does.
    let mut findings = Vec::new();
    for name in ["sample.sarif", "sample.rdjson"] {
        let text = std::fs::read_to_string(format_samples().join(name)).unwrap();
        let out = formats::detect_and_parse_with(&text, name, &options).unwrap();
        findings.extend(out.findings);
    }
    let mut applied = Vec::new();
    for f in findings.iter().filter(|f| !f.suggestions.is_empty()) {
        let resp = agent.run(fix_request(dir.path(), f)).await.unwrap();
        assert_eq!(resp.files_changed, ["src/lib.rs"]);
        applied.push(f.category.clone().unwrap());
    }
    assert_eq!(
        applied,
        [
            "example/needless-return",
            "example/single-char-pattern",
            "len-zero",
            "single-char-add-str",
            "noisy-doc"
        ]
    );
    let lib = read(dir.path(), "src/lib.rs");
    for expected in [
        "    n * 2\n}",
        "line.split(',')",
        "if words.is_empty() {",
        "out.push('!');",
    ] {
        assert!(lib.contains(expected), "missing {expected:?}:\n{lib}");
    }
    assert!(!lib.contains("Sums a slice"));
    let (ok, _, stderr) = cargo(dir.path(), &["build", "--quiet"]);
    assert!(ok, "{stderr}");
}

#[tokio::test]
async fn unanchored_sarif_fix_is_refused_without_a_source_reader() {
    let dir = fixture_crate();
    let text = std::fs::read_to_string(format_samples().join("sample.sarif")).unwrap();
    let out = formats::detect_and_parse(&text, "sample.sarif").unwrap();
    let f = by_category(&out.findings, "example/single-char-pattern");
    let before = read(dir.path(), "src/lib.rs");
    let reason = unsupported_reason(SuggestionAgent::new().run(fix_request(dir.path(), f)).await);
    assert!(
        reason.contains("does not carry the text it replaces"),
        "{reason}"
    );
    assert_eq!(read(dir.path(), "src/lib.rs"), before);
    // The SARIF fix that carries a snippet needs no reader.
    let f = by_category(&out.findings, "example/needless-return");
    SuggestionAgent::new()
        .run(fix_request(dir.path(), f))
        .await
        .unwrap();
    assert!(read(dir.path(), "src/lib.rs").contains("    n * 2\n}"));
}

/// The same findings, each placed through the file's edit history as
/// review-fix passes it: every fix lands exactly where clippy recorded it,
/// so the result is all the applied edits at once against the original (the
/// way `cargo fix` applies suggestions), and a fix whose text an earlier fix
/// changed is refused as a conflict ([`AgentError::Conflict`], for the
/// re-lint) instead of re-anchored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_clippy_suggestions_placed_through_the_edit_history() {
    use orchestrator_core::edit::{AppliedEdit, EditHistory};

    let dir = fixture_crate();
    let original = read(dir.path(), "src/lib.rs");
    let findings = clippy_findings();
    let agent = SuggestionAgent::new();
    let mut history = EditHistory::new();
    let mut conflicts = Vec::new();
    for finding in &findings {
        let request = fix_request(dir.path(), finding).with_context(serde_json::json!({
            "finding": finding,
            "edit_history": {"src/lib.rs": history},
        }));
        match agent.run(request).await {
            Ok(resp) => {
                let applied: Vec<AppliedEdit> = serde_json::from_value(
                    resp.structured.unwrap()["applied_edits"]["src/lib.rs"].clone(),
                )
                .unwrap();
                history.record(&applied);
            }
            // Not "not fixable": a re-lint reports it at its new place.
            Err(AgentError::Conflict { reason }) if reason.contains("conflicts with") => {
                conflicts.push(finding.category.clone().unwrap());
            }
            Err(AgentError::Unsupported { reason }) if reason.contains("not fixable") => {}
            Err(e) => panic!("{}: unexpected error {e}", finding.id),
        }
    }
    // Two fixes touch text an earlier fix replaced.
    assert_eq!(
        conflicts,
        ["clippy::bool_comparison", "clippy::let_and_return"],
        "{conflicts:?}"
    );
    // The file is the original with every applied edit at once.
    let mut want = String::new();
    let mut at = 0;
    for e in history.edits() {
        want.push_str(&original[at..e.start]);
        want.push_str(&e.replacement);
        at = e.end;
    }
    want.push_str(&original[at..]);
    assert_eq!(read(dir.path(), "src/lib.rs"), want);
    let after = fresh_clippy_findings(dir.path());
    assert!(
        after
            .iter()
            .any(|f| f.category.as_deref() == Some("clippy::let_and_return")),
        "the refused fix is reported again for the next pass"
    );
    let (ok, _, stderr) = cargo(dir.path(), &["test", "--quiet"]);
    assert!(ok, "the fixed crate's tests fail:\n{stderr}");
}

/// A pure insertion into a file that changed in ways nobody recorded
/// (`null` history) is refused rather than placed by its old line.
#[tokio::test]
async fn an_insertion_into_an_unrecorded_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "// moved\npub fn f() {}\n").unwrap();
    let edit = TextEdit {
        file: "src/lib.rs".into(),
        start_line: 1,
        start_column: 1,
        end_line: 1,
        end_column: 1,
        byte_range: Some((0, 0)),
        original: String::new(),
        replacement: "#[must_use]\n".into(),
    };
    let mut finding = Finding::new("F1", "must use", orchestrator_core::Severity::Low);
    finding.suggestions.push(Suggestion {
        message: None,
        edits: vec![edit],
    });
    let request = AgentRequest::new("F1", Role::Fix, "", dir.path()).with_context(
        serde_json::json!({"finding": finding, "edit_history": {"src/lib.rs": null}}),
    );
    let reason = unsupported_reason(SuggestionAgent::new().run(request).await);
    assert!(reason.contains("cannot be placed exactly"), "{reason}");
    assert_eq!(
        read(dir.path(), "src/lib.rs"),
        "// moved\npub fn f() {}\n",
        "nothing changed"
    );
}

/// A fix of a file reached through a symlink inside the working directory
/// is written through the link, which stays a link; the write goes through a
/// temporary file no other writer can hold (a file named like the old,
/// predictable temporary name is left alone) and leaves nothing behind.
#[tokio::test]
async fn a_fix_is_written_through_a_symlink_and_its_temporary_file_is_its_own() {
    let dir = fixture_crate();
    let root = dir.path();
    std::fs::write(root.join("src/real.txt"), "let secret = 1;\n").unwrap();
    std::os::unix::fs::symlink("real.txt", root.join("src/link.txt")).unwrap();
    let squatter = root.join(format!(
        "src/.real.txt.orchestrator-{}.tmp",
        std::process::id()
    ));
    std::fs::write(&squatter, "someone else's\n").unwrap();
    SuggestionAgent::new()
        .run(fix_request(root, &edit_of("src/link.txt", "secret")))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("src/real.txt")).unwrap(),
        "let pwned = 1;\n"
    );
    assert!(
        std::fs::symlink_metadata(root.join("src/link.txt"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link is still a link"
    );
    assert_eq!(
        std::fs::read_to_string(&squatter).unwrap(),
        "someone else's\n"
    );
    let left: Vec<String> = std::fs::read_dir(root.join("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".orchestrator-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
