//! End to end with real git ([`GitVcs`]), a real `cargo test`
//! ([`CommandTestRunner`]) and the builtin [`SuggestionAgent`] on a temporary
//! git copy of `examples/quickstart` and its committed clippy JSON.
//!
//! The quickstart has seven machine-applicable clippy findings: six are
//! good, and one (`len_zero` in `src/ring.rs`) would break a test, because
//! `Ring::is_empty` means "capacity zero", not "no samples".

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orchestrator_adapters::test_runner::CommandTestRunner;
use orchestrator_core::test_runner::TestRunner;
use orchestrator_core::trash::read_manifest;
use orchestrator_review_fix::{FixResult, Outcome, RunReport, TreeEnv, VerifyMode, run};

use crate::support::{
    config, copy_quickstart, git, kill_after_first_commit, run_as_child, services,
};

/// (message, tree) of every commit since `base`.
fn commits_since(repo: &Path, base: &str) -> Vec<(String, String)> {
    git(
        repo,
        &[
            "log",
            "--reverse",
            "--format=%T %s",
            &format!("{base}..HEAD"),
        ],
    )
    .lines()
    .map(|l| {
        let (tree, msg) = l.split_once(' ').unwrap();
        (msg.to_owned(), tree.to_owned())
    })
    .collect()
}

/// The summary with run-specific values replaced.
fn redact_summary(text: &str, report: &RunReport) -> String {
    let mut out = text.replace(&report.fix_session_id, "fix-<session>");
    for (i, c) in report.commits.iter().enumerate() {
        out = out.replace(&c.id.as_str()[..7], &format!("<c{}>", i + 1));
    }
    // Test output (thread ids, timings, the order of parallel test lines)
    // differs between runs: keep the first line of each error block.
    let mut lines = Vec::new();
    let mut in_block = 0;
    for l in out.lines() {
        if l.starts_with("- Started:") {
            lines.push("- Started: <time>; finished: <time>".to_owned());
        } else if l.starts_with("- `fix-<session>:") {
            // A trash entry's reason names the worktree slot and the
            // checkpoint's commit, which differ between runs.
            let l = l.find(" in worktree slot-").map_or(l, |cut| &l[..cut]);
            lines.push(format!("{l} in worktree slot-<n> (back to <base>)"));
        } else if l.starts_with("- Worktrees:") {
            lines.push(crate::redact_worktree_times(l));
        } else if l == "```text" {
            in_block = 1;
            lines.push(l.to_owned());
        } else if l == "```" {
            if in_block > 1 {
                lines.push("<test output>".to_owned());
            }
            in_block = 0;
            lines.push(l.to_owned());
        } else if in_block == 1 {
            in_block = 2;
            lines.push(l.to_owned());
        } else if in_block == 0 {
            lines.push(l.to_owned());
        }
    }
    lines.join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
async fn builtin_fixes_the_quickstart_with_rollback_and_leaves_dirty_files_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, clippy) = copy_quickstart(tmp.path());
    let target = tmp.path().join("target");
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    // The user's own work: an untracked file and a modified tracked file.
    std::fs::write(repo.join("notes.txt"), "my notes\n").unwrap();
    let readme = format!(
        "{}\nlocal edit\n",
        std::fs::read_to_string(repo.join("README.md")).unwrap()
    );
    std::fs::write(repo.join("README.md"), &readme).unwrap();
    // A finding that points outside the repository.
    let evil = tmp.path().join("evil.json");
    std::fs::write(
        &evil,
        r#"[{"id": "EVIL-1", "title": "Read the password file", "severity": "high", "dimension": "security", "file": "../../../../etc/passwd", "line": 1, "description": "x"}]"#,
    )
    .unwrap();

    let seen = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let report = run(
        config(vec![clippy, evil]),
        services(&repo, &target, Arc::clone(&seen)).await,
    )
    .await
    .unwrap();
    let wall = started.elapsed();
    eprintln!(
        "quickstart: {} findings, {} fixed, {} commits, {} test runs, {:.1}s",
        report.findings.len(),
        report.count("fixed"),
        report.commits.len(),
        report.test_runs,
        wall.as_secs_f64()
    );

    assert_eq!(report.outcome, Outcome::SomeFailed);
    assert_eq!(report.count("fixed"), 6, "{:#?}", report.findings);
    assert_eq!(report.count("failed"), 1);
    assert_eq!(report.count("rejected"), 1);
    let evil = report.findings.iter().find(|f| f.id == "EVIL-1").unwrap();
    assert!(
        evil.error
            .as_ref()
            .unwrap()
            .contains("outside the repository")
    );

    // One commit per good fix, each touching exactly its file, on main.
    let commits = commits_since(&repo, &base);
    assert_eq!(commits.len(), 6, "{commits:#?}");
    assert_eq!(git(&repo, &["branch", "--show-current"]).trim(), "main");
    for (msg, _) in &commits {
        assert!(msg.starts_with("fix("), "{msg}");
        assert!(msg.ends_with(']'), "{msg}");
    }
    let ids = git(&repo, &["log", "--format=%H", &format!("{base}..HEAD")]);
    for id in ids.lines() {
        let files = git(&repo, &["show", "--format=", "--name-only", id]);
        assert_eq!(files.lines().count(), 1, "{id}: {files}");
    }
    // The breaking suggestion was rolled back, retried and reported.
    let ring = report
        .findings
        .iter()
        .find(|f| f.result == "failed")
        .unwrap();
    assert_eq!(ring.attempts, 2, "the identical second attempt stops it");
    let error = ring.error.as_ref().unwrap();
    assert!(error.contains("ring_labels"), "{error}");
    assert!(error.contains("attempt 2 repeats attempt 1"), "{error}");
    assert!(
        std::fs::read_to_string(repo.join("src/ring.rs"))
            .unwrap()
            .contains("self.len() == 0")
    );
    // The user's files are byte-identical; nothing else is dirty.
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.txt")).unwrap(),
        "my notes\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).unwrap(),
        readme
    );
    let status = git(&repo, &["status", "--porcelain"]);
    assert_eq!(status, " M README.md\n?? notes.txt\n");
    // The fixed crate passes its tests, and the worktrees are gone.
    let after = CommandTestRunner::argv(["cargo", "test", "--quiet", "--offline"])
        .env("CARGO_TARGET_DIR", target.display().to_string())
        .run(orchestrator_core::test_runner::TestRequest::all(&repo))
        .await
        .unwrap();
    assert!(after.is_pass(), "{}", after.log);
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 1);
    assert!(!git(&repo, &["branch", "--list"]).contains("review-fix/"));
    // Worktrees got their own Cargo target directory, per slot, in the
    // repository's build cache (kept from run to run).
    let envs = seen.lock().unwrap().clone();
    let wt: Vec<&TreeEnv> = envs.iter().filter(|e| e.worktree_slot.is_some()).collect();
    assert!(!wt.is_empty(), "a parallel stage ran in worktrees");
    let cache = orchestrator_core::state::build_cache_root(&repo);
    assert!(wt.iter().all(|e| {
        e.cargo_target_dir
            .as_ref()
            .is_some_and(|d| d.starts_with(&cache))
    }));

    // Each rollback saved the failed attempt's bytes to the trash under
    // a reason naming the finding it was an attempt at.
    let trash = read_manifest(&report.session_dir.join("trash")).unwrap();
    assert!(!trash.entries.is_empty());
    for entry in &trash.entries {
        assert!(
            entry.reason.starts_with(
                "rollback of an attempt at finding clippy::len_zero@src/ring.rs:42:12 \
                 (length comparison to zero) in worktree slot-"
            ),
            "{entry:?}"
        );
    }

    // Snapshots of the plan and the summary, run-specific values redacted.
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.session_dir.join("fix-plan.json")).unwrap())
            .unwrap();
    insta::assert_json_snapshot!("quickstart_fix_plan", plan, {
        ".fix_session_id" => "[session]",
        ".metadata.created_at" => "[time]",
    });
    let summary = std::fs::read_to_string(report.session_dir.join("fix-summary.md")).unwrap();
    insta::assert_snapshot!("quickstart_fix_summary", redact_summary(&summary, &report));
    // The timeline the summary links: a bar (with its tooltip) per finding
    // the run started, each in a worker slot.
    let svg = std::fs::read_to_string(report.session_dir.join("timeline.svg")).unwrap();
    let started: Vec<&str> = report
        .findings
        .iter()
        .filter(|f| f.attempts > 0)
        .map(|f| f.id.as_str())
        .collect();
    assert!(!started.is_empty());
    for id in &started {
        assert!(
            svg.contains(&format!("<title>{id} ")),
            "no bar for {id}:\n{svg}"
        );
    }
    assert_eq!(svg.matches("<g><title>").count(), started.len(), "{svg}");
    let progress: orchestrator_review_fix::FixProgress = serde_json::from_slice(
        &std::fs::read(report.session_dir.join("fix-progress-1.json")).unwrap(),
    )
    .unwrap();
    assert!(
        progress
            .findings
            .iter()
            .all(|f| f.result == Some(FixResult::Fixed))
    );
    let landed: Vec<String> = report.commits.iter().map(|c| c.id.to_string()).collect();
    assert!(
        progress
            .findings
            .iter()
            .all(|f| landed.contains(f.commit_hash.as_ref().unwrap()))
    );
}

const CHILD_ENV: &str = "REVIEW_FIX_E2E_CHILD_REPO";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_run_then_resume_gives_the_same_commits() {
    kill_9_then_resume(
        VerifyMode::Each,
        "e2e::kill_9_mid_run_then_resume_gives_the_same_commits",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_batch_verification_then_resume_gives_the_same_commits() {
    kill_9_then_resume(
        VerifyMode::Batch,
        "e2e::kill_9_mid_batch_verification_then_resume_gives_the_same_commits",
    )
    .await;
}

/// Kills a session (in `mode`) with SIGKILL once its first fix commit is on
/// the branch, resumes it, and compares the commits with an uninterrupted
/// `each` run. `test` is the calling test's name: the child process runs it.
async fn kill_9_then_resume(mode: VerifyMode, test: &str) {
    // Child role: run the session until the parent kills this process.
    if run_as_child(CHILD_ENV, mode).await {
        return;
    }

    // Reference: an uninterrupted run.
    let reference = tempfile::tempdir().unwrap();
    let (ref_repo, ref_input) = copy_quickstart(reference.path());
    let ref_base = git(&ref_repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let target = reference.path().join("target");
    run(
        config(vec![ref_input]),
        services(&ref_repo, &target, Arc::clone(&seen)).await,
    )
    .await
    .unwrap();
    let expected = commits_since(&ref_repo, &ref_base);
    assert_eq!(expected.len(), 6);

    // Interrupted: a child process runs the session and is SIGKILLed once the
    // first fix commit is on the branch.
    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = copy_quickstart(tmp.path());
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    kill_after_first_commit(test, CHILD_ENV, tmp.path(), &base);
    let before = commits_since(&repo, &base).len();
    assert!(
        before < expected.len(),
        "killed before the end ({before} commits)"
    );

    let mut cfg = config(vec![input]);
    cfg.resume = true;
    cfg.verify = mode;
    let report = run(cfg, services(&repo, &tmp.path().join("target"), seen).await)
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::SomeFailed);
    assert_eq!(report.count("fixed"), 6);
    let got = commits_since(&repo, &base);
    assert_eq!(
        got, expected,
        "same commits (message and tree) as an uninterrupted run"
    );
    let status = git(&repo, &["status", "--porcelain"]);
    assert_eq!(status, "", "nothing left over in the tree");
    assert_eq!(
        git(&repo, &["worktree", "list"]).lines().count(),
        1,
        "the interrupted run's worktrees are removed"
    );
}

/// What a quickstart session did.
struct Session {
    commits: Vec<(String, String)>,
    report: RunReport,
    summary: String,
    wall: Duration,
}

/// One session on a fresh copy of the quickstart.
async fn quickstart_session(mode: VerifyMode) -> Session {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, clippy) = copy_quickstart(tmp.path());
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let mut cfg = config(vec![clippy]);
    cfg.verify = mode;
    let started = Instant::now();
    let report = run(
        cfg,
        services(
            &repo,
            &tmp.path().join("target"),
            Arc::new(Mutex::new(Vec::new())),
        )
        .await,
    )
    .await
    .unwrap();
    let wall = started.elapsed();
    let commits = commits_since(&repo, &base);
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "{mode}");
    assert_eq!(
        git(&repo, &["worktree", "list"]).lines().count(),
        1,
        "{mode}"
    );
    assert!(!git(&repo, &["branch", "--list"]).contains("review-fix/"));
    if mode != VerifyMode::Each {
        // Every commit on the branch passes the crate's tests.
        for (i, id) in git(&repo, &["rev-list", "--reverse", &format!("{base}..HEAD")])
            .lines()
            .enumerate()
        {
            let check = tmp.path().join(format!("check-{i}"));
            git(
                &repo,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "--detach",
                    check.to_str().unwrap(),
                    id,
                ],
            );
            let r = CommandTestRunner::argv(["cargo", "test", "--quiet", "--offline"])
                .env(
                    "CARGO_TARGET_DIR",
                    tmp.path().join("target").display().to_string(),
                )
                .run(orchestrator_core::test_runner::TestRequest::all(&check))
                .await
                .unwrap();
            assert!(
                r.is_pass(),
                "{mode}: commit {id} fails its tests: {}",
                r.log
            );
            git(&repo, &["worktree", "remove", check.to_str().unwrap()]);
        }
    }
    let summary = std::fs::read_to_string(report.session_dir.join("fix-summary.md")).unwrap();
    Session {
        commits,
        report,
        summary,
        wall,
    }
}

/// `REVIEW_FIX_MEASURE=1` adds `auto` and prints the figures as a table.
const MEASURE_ENV: &str = "REVIEW_FIX_MEASURE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_on_the_quickstart_lands_what_each_lands_with_fewer_runs() {
    let mut modes = vec![VerifyMode::Each, VerifyMode::Batch];
    if std::env::var_os(MEASURE_ENV).is_some() {
        modes.push(VerifyMode::Auto);
    }
    let mut results = Vec::new();
    for mode in modes {
        results.push((mode, quickstart_session(mode).await));
    }
    let each_commits = &results[0].1.commits;
    let each = &results[0].1.report;
    assert_eq!(each_commits.len(), 6);
    for (
        mode,
        Session {
            commits,
            report,
            wall,
            ..
        },
    ) in &results
    {
        let v = &report.verification;
        eprintln!(
            "quickstart --verify {mode}: {} findings, {} fixed, {} commits, {} test runs ({} re-runs; one by one: {}, saved {}), {:.1}s",
            report.findings.len(),
            report.count("fixed"),
            commits.len(),
            v.test_runs,
            v.reruns,
            v.each_runs,
            v.runs_saved(),
            wall.as_secs_f64()
        );
        assert_eq!(commits, each_commits, "{mode} lands what each lands");
        assert_eq!(report.count("fixed"), 6, "{mode}");
        assert_eq!(report.count("failed"), 1, "{mode}");
        assert_eq!(v.each_runs, each.verification.test_runs, "{mode}");
        if *mode != VerifyMode::Each {
            assert!(
                v.test_runs < each.verification.test_runs,
                "{mode}: {} runs vs {} one by one",
                v.test_runs,
                each.verification.test_runs
            );
        }
    }
    let batch = &results[1].1;
    insta::assert_snapshot!(
        "quickstart_fix_summary_batch",
        redact_summary(&batch.summary, &batch.report)
    );
}
