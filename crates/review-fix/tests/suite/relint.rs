//! Re-lint passes with real git, a real linter process and the builtin
//! suggestion agent.
//!
//! The "linter" is a small `awk` program: every line of `a.txt` that starts
//! with `((` is reported (rdjsonl) with a suggestion that removes one layer
//! of parentheses. So `((((x))))` takes three fixes, and each fix only
//! exposes the next finding once it is committed — as with clippy lints
//! that appear after another lint's fix.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use crate::support::git;
use orchestrator_adapters::builtin::SuggestionAgent;
use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_adapters::test_runner::CommandTestRunner;
use orchestrator_core::command::CommandSpec;
use orchestrator_core::event::NullSink;
use orchestrator_core::gate::AutoYes;
use orchestrator_review_fix::relint::{Relint, StopReason, run_with_relint};
use orchestrator_review_fix::{
    Isolation, Outcome, PlannerMode, ReviewFixConfig, Services, SharedRunner,
};

/// The linter script (`sh LINTER` in the repository prints its findings).
const LINTER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/paren_lint.sh");

/// A repository with `a.txt`, and the first pass's findings (the linter's
/// output on it) as a file outside the repository.
pub(crate) fn fixture(parent: &Path, text: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let repo = parent.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("a.txt"), text).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "test@example.invalid"]);
    git(&repo, &["config", "user.name", "Test"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "start"]);
    let out = Command::new("sh")
        .arg(LINTER)
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(out.status.success());
    let input = parent.join("findings.rdjsonl");
    std::fs::write(&input, &out.stdout).unwrap();
    (repo, input)
}

pub(crate) async fn services(repo: &Path, test: &str) -> Services {
    Services {
        agent: Arc::new(SuggestionAgent::new()),
        vcs: Arc::new(GitVcs::open(repo).await.unwrap()),
        tests: Arc::new(SharedRunner(Arc::new(CommandTestRunner::shell(test)))),
        gate: Arc::new(AutoYes),
        sink: Arc::new(NullSink),
        provisioner: None,
    }
}

fn config(input: std::path::PathBuf) -> ReviewFixConfig {
    ReviewFixConfig::default()
        .with_inputs(vec![input])
        .with_planner(PlannerMode::Deterministic)
        .with_isolation(Isolation::Serial)
        .with_max_iterations(1)
}

fn relint(max_passes: u32) -> Relint {
    Relint::new(
        CommandSpec::new("sh", [LINTER], "."),
        Arc::new(ProcessRunner::default()),
        max_passes,
    )
}

fn subjects(repo: &Path) -> Vec<String> {
    git(repo, &["log", "--format=%s", "--reverse"])
        .lines()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn relint_fixes_what_earlier_fixes_uncover_and_never_retries_a_failed_finding() {
    let tmp = tempfile::tempdir().unwrap();
    // `((q))` → `(q)` breaks the "tests"; the three layers around x come
    // off one pass at a time.
    let (repo, input) = fixture(tmp.path(), "((((x))))\nplain\n((q))\n");
    let test = "! grep -qx '(q)' a.txt";
    let report = run_with_relint(config(input), services(&repo, test).await, Some(&relint(5)))
        .await
        .unwrap();

    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "(x)\nplain\n((q))\n"
    );
    assert_eq!(report.passes.len(), 3, "one pass per layer of x");
    assert_eq!(report.stop, StopReason::NoNewFindings);
    // Pass 1 tried x and q; q failed and is reported again by every re-lint,
    // but it is never tried again.
    let per_pass: Vec<(usize, usize, usize)> = report
        .passes
        .iter()
        .map(|p| (p.findings.len(), p.count("fixed"), p.commits.len()))
        .collect();
    assert_eq!(per_pass, [(2, 1, 1), (1, 1, 1), (1, 1, 1)]);
    assert!(
        report.passes[1]
            .notes
            .iter()
            .any(|n| n.contains("already tried in an earlier pass, left out: 1")),
        "{:?}",
        report.passes[1].notes
    );
    assert_eq!(
        (report.findings(), report.count("fixed"), report.commits()),
        (4, 3, 3)
    );
    assert_eq!(report.outcome(), Outcome::SomeFailed, "q was not fixed");
    assert_eq!(
        report.test_runs(),
        6,
        "the base (once: later passes start from a tip no fix left worse); x: one run per pass; q: its failing run and the re-run that rules out a flaky test"
    );
    let subjects = subjects(&repo);
    assert_eq!(subjects.len(), 3, "{subjects:?}");
    assert!(
        subjects.iter().all(|s| s.starts_with("fix(")),
        "{subjects:?}"
    );
    // Each pass is a complete session of its own.
    let sessions: BTreeSet<_> = report
        .passes
        .iter()
        .map(|p| p.session_dir.clone())
        .collect();
    assert_eq!(sessions.len(), 3);
    for p in &report.passes {
        assert!(p.session_dir.join("fix-summary.md").is_file());
        assert!(!p.session_dir.join("active-fix-session.json").exists());
    }
    assert_eq!(
        git(&repo, &["status", "--porcelain"]),
        "",
        "the tree is clean"
    );
}

/// A finding outside the repository (as rustc reports for `/rustc/...`
/// sources) is rejected by the first pass and left out, silently, by the
/// later ones; the same finding reported twice is merged with one note.
#[tokio::test]
async fn a_finding_outside_the_repository_is_rejected_once_and_duplicates_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = r#"{"message":"std says hi","location":{"path":"/rustc/abc/library/core/src/lib.rs","range":{"start":{"line":3,"column":1}}},"code":{"value":"external"}}"#;
    // The linter: its findings, each twice (a lib and a test target), and
    // the outside finding.
    let script = tmp.path().join("lint.sh");
    std::fs::write(
        &script,
        format!("sh {LINTER}; sh {LINTER}; echo '{outside}'\n"),
    )
    .unwrap();
    let (repo, _) = fixture(tmp.path(), "(((x)))\n");
    let first = Command::new("sh")
        .arg(&script)
        .current_dir(&repo)
        .output()
        .unwrap();
    let input = tmp.path().join("first.rdjsonl");
    std::fs::write(&input, &first.stdout).unwrap();
    let lint = Relint::new(
        CommandSpec::new("sh", [script.to_str().unwrap()], "."),
        Arc::new(ProcessRunner::default()),
        4,
    );
    let report = run_with_relint(config(input), services(&repo, "true").await, Some(&lint))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "(x)\n"
    );
    assert_eq!(report.passes.len(), 2, "{:?}", report.stop);
    let rejected: Vec<usize> = report.passes.iter().map(|p| p.count("rejected")).collect();
    assert_eq!(rejected, [1, 0], "rejected in the first pass only");
    for (i, pass) in report.passes.iter().enumerate() {
        let merged: Vec<&String> = pass.notes.iter().filter(|n| n.contains("merged")).collect();
        assert_eq!(
            merged,
            ["1 duplicate merged"],
            "pass {}: {:?}",
            i + 1,
            pass.notes
        );
        assert!(
            !pass.notes.iter().any(|n| n.contains("; dropped")),
            "{:?}",
            pass.notes
        );
    }
    assert!(
        report.passes[1]
            .notes
            .iter()
            .any(|n| n.contains("already tried in an earlier pass, left out: 1")),
        "{:?}",
        report.passes[1].notes
    );
}

#[tokio::test]
async fn the_pass_limit_stops_the_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = fixture(tmp.path(), "((((x))))\n");
    let report = run_with_relint(
        config(input),
        services(&repo, "true").await,
        Some(&relint(2)),
    )
    .await
    .unwrap();
    assert_eq!(report.passes.len(), 2);
    assert_eq!(report.stop, StopReason::PassLimit);
    assert_eq!(report.outcome(), Outcome::AllFixed);
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "((x))\n"
    );
}

#[tokio::test]
async fn without_relint_one_pass_runs_and_a_failing_linter_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = fixture(tmp.path(), "((((x))))\n");
    let once = run_with_relint(config(input.clone()), services(&repo, "true").await, None)
        .await
        .unwrap();
    assert_eq!(
        (once.passes.len(), once.stop.clone()),
        (1, StopReason::NotAsked)
    );
    assert_eq!(once.outcome(), Outcome::AllFixed);

    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = fixture(tmp.path(), "((((x))))\n");
    let broken = Relint::new(
        CommandSpec::shell("echo 'lint: no such config' >&2; exit 3", "."),
        Arc::new(ProcessRunner::default()),
        4,
    );
    let report = run_with_relint(config(input), services(&repo, "true").await, Some(&broken))
        .await
        .unwrap();
    assert_eq!(report.passes.len(), 1, "the first pass ran");
    match &report.stop {
        StopReason::CommandFailed {
            message,
            stderr_tail,
        } => {
            assert!(message.contains("exited with 3"), "{message}");
            assert_eq!(stderr_tail, "lint: no such config");
        }
        other => panic!("stopped because {other:?}"),
    }
    assert_eq!(
        report.outcome(),
        Outcome::SomeFailed,
        "a re-lint that cannot run is not a clean finish"
    );
}

/// A fixed finding is gone from the code: an identical one the linter
/// reports later (here `((x))` again, once the line below lost a layer) is
/// new and is fixed, not skipped as already tried.
#[tokio::test]
async fn an_identical_finding_after_a_fixed_one_is_fixed_too() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = fixture(tmp.path(), "((x))\n(((x)))\n");
    let report = run_with_relint(
        config(input),
        services(&repo, "true").await,
        Some(&relint(4)),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "(x)\n(x)\n"
    );
    assert_eq!(report.passes.len(), 2);
    assert_eq!(report.stop, StopReason::NoNewFindings);
    assert_eq!((report.count("fixed"), report.commits()), (3, 3));
}

/// The overlap linter (see `tests/data/overlap_lint.sh`).
const OVERLAP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/overlap_lint.sh");

/// A fix that overlaps one applied earlier in the pass is deferred, not
/// "not fixable", and the next pass applies it at its new place, as `cargo
/// clippy --fix`, ruff and ESLint do; within a pass the fixes go in the
/// order the linter emitted them (here `double` before `dash-x`, although
/// `dash-x` sorts first by id); a finding whose fix an earlier one already
/// made (`pair-b`) is fixed without a commit of its own.
#[tokio::test]
async fn an_overlapping_fix_is_deferred_and_the_next_pass_applies_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _) = fixture(tmp.path(), "a --x b\npair\nend\n");
    let lint = |dir: &Path| {
        let out = Command::new("sh")
            .arg(OVERLAP)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success());
        out.stdout
    };
    let input = tmp.path().join("overlap.rdjsonl");
    std::fs::write(&input, lint(&repo)).unwrap();
    let relint = Relint::new(
        CommandSpec::new("sh", [OVERLAP], "."),
        Arc::new(ProcessRunner::default()),
        4,
    );
    let report = run_with_relint(config(input), services(&repo, "true").await, Some(&relint))
        .await
        .unwrap();

    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "a x b\nend\n"
    );
    let results = |i: usize| -> Vec<(String, String)> {
        let mut r: Vec<(String, String)> = report.passes[i]
            .findings
            .iter()
            .map(|f| (f.id.clone(), f.result.clone()))
            .collect();
        r.sort();
        r
    };
    assert_eq!(
        results(0),
        [
            ("dash-x@a.txt:1:4".to_owned(), "deferred".to_owned()),
            ("double@a.txt:1:3".to_owned(), "fixed".to_owned()),
            ("pair-a@a.txt:2:1".to_owned(), "fixed".to_owned()),
            ("pair-b@a.txt:2:3".to_owned(), "fixed".to_owned()),
        ]
    );
    assert_eq!(
        results(1),
        [("dash-x@a.txt:1:3".to_owned(), "fixed".to_owned())],
        "the deferred finding, at its new place"
    );
    assert_eq!(report.passes.len(), 2, "{:?}", report.stop);
    assert_eq!(report.stop, StopReason::NoNewFindings);
    assert_eq!(report.outcome(), Outcome::AllFixed);
    assert_eq!(
        subjects(&repo),
        [
            "fix(quality): double dash [double@a.txt:1:3]",
            "fix(quality): first of a pair [pair-a@a.txt:2:1]",
            "fix(quality): dash before x [dash-x@a.txt:1:3]",
        ],
        "one commit per change: pair-b's fix was pair-a's"
    );
    let summary =
        std::fs::read_to_string(report.passes[0].session_dir.join("fix-summary.md")).unwrap();
    assert!(summary.contains("1 deferred to a re-lint"), "{summary}");
}

/// A finding rejected because its file has uncommitted changes is counted
/// as tried: the re-lint reports it again, and no pass is opened for it.
#[tokio::test]
async fn a_finding_in_a_dirty_file_does_not_start_another_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _) = fixture(tmp.path(), "((x))\n");
    std::fs::write(repo.join("b.txt"), "((y))\n").unwrap();
    git(&repo, &["add", "b.txt"]);
    git(&repo, &["commit", "-q", "-m", "b"]);
    // The user's unfinished work in b.txt.
    std::fs::write(repo.join("b.txt"), "((z))\n").unwrap();
    let out = Command::new("sh")
        .arg(LINTER)
        .current_dir(&repo)
        .output()
        .unwrap();
    let input = tmp.path().join("findings2.rdjsonl");
    std::fs::write(&input, &out.stdout).unwrap();
    let mut cfg = config(input);
    cfg.allow_dirty = true;
    let report = run_with_relint(cfg, services(&repo, "true").await, Some(&relint(4)))
        .await
        .unwrap();
    assert_eq!(report.passes.len(), 1, "{:?}", report.stop);
    assert_eq!(report.stop, StopReason::NoNewFindings);
    assert_eq!(report.count("fixed"), 1);
    assert_eq!(
        std::fs::read_to_string(repo.join("b.txt")).unwrap(),
        "((z))\n"
    );
}

/// A pass that cannot open its session ends the passes with the reason;
/// the earlier passes' report and commits stay.
#[tokio::test]
async fn a_later_pass_that_cannot_run_keeps_the_earlier_report() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = fixture(tmp.path(), "(((x)))\n");
    // A linter that also leaves a file in the tree: the next pass finds the
    // tree dirty and refuses to start.
    let messy = Relint::new(
        CommandSpec::new("sh", ["-c", &format!("touch stray.log; sh {LINTER}")], "."),
        Arc::new(ProcessRunner::default()),
        4,
    );
    let report = run_with_relint(config(input), services(&repo, "true").await, Some(&messy))
        .await
        .unwrap();
    assert_eq!(report.passes.len(), 1);
    assert_eq!(report.commits(), 1);
    match &report.stop {
        StopReason::PassFailed { pass, message } => {
            assert_eq!(*pass, 2);
            assert!(message.contains("stray.log"), "{message}");
        }
        other => panic!("stopped because {other:?}"),
    }
    assert_eq!(report.outcome(), Outcome::SomeFailed);
}
