//! The base's test run put off until a run fails (the builtin agent's
//! exact suggestions): real git, the builtin agent, the paren linter of
//! `relint` and a shell "test suite" that logs which tree it ran on.

use std::path::{Path, PathBuf};

use crate::support::git;
use orchestrator_review_fix::{Outcome, PlannerMode, ReviewFixConfig, RunReport, run};

/// A repository whose `a.txt` has two findings (the paren linter of
/// `relint`), and their file.
fn fixture(parent: &Path) -> (PathBuf, PathBuf) {
    crate::relint::fixture(parent, "((x))\n((y))\n")
}

/// A test command that appends the tree's `a.txt` (one line) to `log`,
/// then prints libtest's words for `outcome`: `pass`, `red` (test `old`
/// fails) or `broken` (the crate does not compile).
fn suite(log: &Path, outcome: &str) -> String {
    let log = log.display();
    let tail = match outcome {
        "pass" => {
            "echo 'test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out'"
        }
        "red" => {
            "echo 'test old ... FAILED'; echo 'test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out'; exit 101"
        }
        _ => "echo 'error: could not compile `x` (lib) due to 1 previous error'; exit 101",
    };
    format!("tr '\\n' ' ' < a.txt >> '{log}'; echo >> '{log}'; {tail}")
}

async fn fix(repo: &Path, input: PathBuf, test: &str) -> RunReport {
    let config = ReviewFixConfig::default()
        .with_inputs(vec![input])
        .with_planner(PlannerMode::Deterministic)
        .with_max_iterations(1);
    run(config, crate::relint::services(repo, test).await)
        .await
        .unwrap()
}

/// The trees the tests ran on, one per run.
fn runs(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_owned())
        .collect()
}

#[tokio::test]
async fn fixes_that_pass_are_tested_once_and_the_base_never() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = fixture(tmp.path());
    let log = tmp.path().join("runs.log");
    let report = fix(&repo, input, &suite(&log, "pass")).await;
    assert_eq!(report.outcome, Outcome::AllFixed);
    assert_eq!(report.commits.len(), 2);
    assert_eq!(runs(&log), ["(x) (y)"], "only the tip was tested");
    assert_eq!(report.test_runs, 1);
    // One by one would have tested the base and each fix.
    assert_eq!(report.verification.each_runs, 3);
    assert!(!report.session_dir.join("baseline.json").exists());
}

#[tokio::test]
async fn a_failing_run_tests_the_base_and_is_judged_by_no_new_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = fixture(tmp.path());
    let log = tmp.path().join("runs.log");
    let report = fix(&repo, input, &suite(&log, "red")).await;
    // `old` fails at the base as on the tip: no fix is blamed.
    assert_eq!(report.outcome, Outcome::AllFixed, "{:#?}", report.findings);
    assert_eq!(report.commits.len(), 2);
    assert_eq!(
        runs(&log),
        ["(x) (y)", "((x)) ((y))"],
        "the tip, then the base"
    );
    let kept: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(report.session_dir.join("baseline.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(kept["failing_tests"], serde_json::json!(["old"]));
}

#[tokio::test]
async fn a_base_that_does_not_build_halts_the_run_with_nothing_landed() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = fixture(tmp.path());
    let before = git(&repo, &["rev-parse", "HEAD"]);
    let log = tmp.path().join("runs.log");
    let report = fix(&repo, input, &suite(&log, "broken")).await;
    match &report.outcome {
        Outcome::NeedsHuman { reason } => assert!(
            reason.contains("the base cannot be judged against")
                && reason.contains("does not build"),
            "{reason}"
        ),
        other => panic!("expected a halt for a human, got {other:?}"),
    }
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]), before, "nothing landed");
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(
        report.count("failed"),
        0,
        "no fix is blamed: {:#?}",
        report.findings
    );
    assert_eq!(
        runs(&log),
        ["(x) (y)", "((x)) ((y))"],
        "the tip, then the base"
    );
}
