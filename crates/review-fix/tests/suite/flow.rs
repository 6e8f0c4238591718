//! The flow with fakes: FakeVcs over a real directory, FakeAgent edits,
//! ScriptedTestRunner that fails while a file holds `BAD`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, Usage};
use orchestrator_core::event::{CollectingSink, Event};
use orchestrator_core::fakes::{FakeAgent, FakeVcs, Reply, ScriptedTestRunner};
use orchestrator_core::gate::{AlwaysDefer, AutoYes, Gate};
use orchestrator_core::test_runner::TestReport;
use orchestrator_core::vcs::{CommitId, Vcs};
use orchestrator_review_fix::{
    AgentSpend, ExecutionMode, FixPlan, FixProgress, FixResult, Isolation, ItemLimits, Outcome,
    PartialPlan, PlannerMode, ProgressStatus, ReviewFixConfig, ReviewFixError, Services,
    SharedRunner, VerifyMode, run,
};
use serde_json::json;

pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) vcs: Arc<FakeVcs>,
    pub(crate) sink: Arc<CollectingSink>,
    pub(crate) tests: Arc<ScriptedTestRunner>,
}

impl Fixture {
    pub(crate) fn new(files: &[(&str, &str)]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        let vcs = Arc::new(FakeVcs::init(dir.path()).unwrap());
        let tests = Arc::new(ScriptedTestRunner::from_fn(|req| {
            let bad = ["src/a.rs", "src/b.rs", "src/c.rs"].iter().any(|f| {
                std::fs::read_to_string(req.workdir.join(f)).is_ok_and(|t| t.contains("BAD"))
            });
            if bad {
                TestReport::failing(
                    vec!["tests::it_works".into()],
                    "assertion failed: BAD found",
                )
            } else {
                TestReport::passing(3)
            }
        }));
        Fixture {
            dir,
            vcs,
            sink: Arc::new(CollectingSink::new()),
            tests,
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a review-cycle export into `.review/` (engine-owned, excluded).
    pub(crate) fn export(&self, findings: serde_json::Value) -> PathBuf {
        let dir = self.root().join(".review");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fix-export-1.json");
        std::fs::write(
            &path,
            json!({"session_id": "WFS-1", "findings": findings}).to_string(),
        )
        .unwrap();
        path
    }

    pub(crate) fn services(&self, agent: Arc<dyn Agent>, gate: Arc<dyn Gate>) -> Services {
        Services {
            agent,
            vcs: self.vcs.clone(),
            tests: Arc::new(SharedRunner(self.tests.clone())),
            gate,
            sink: self.sink.clone(),
            provisioner: None,
        }
    }

    pub(crate) async fn messages(&self, base: &CommitId) -> Vec<String> {
        self.vcs
            .log_since(base)
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.message)
            .collect()
    }
}

pub(crate) fn finding(id: &str, file: &str, line: u32, title: &str) -> serde_json::Value {
    json!({"id": id, "title": title, "severity": "medium", "dimension": "quality",
           "file": file, "line": line, "description": format!("{title} at {file}:{line}"),
           "recommendations": ["fix it"]})
}

pub(crate) fn edit(file: &str, content: &str) -> Reply {
    Reply::Edit {
        files: vec![(file.to_owned(), Some(content.to_owned()))],
        response: AgentResponse::text("done"),
    }
}

pub(crate) fn config(inputs: Vec<PathBuf>) -> ReviewFixConfig {
    ReviewFixConfig::default()
        .with_inputs(inputs)
        .with_planner(PlannerMode::Deterministic)
        // These tests pin one-by-one verification; batch verification has
        // its own tests (`batch.rs`).
        .with_verify(VerifyMode::Each)
}

fn read_progress(session: &Path, n: usize) -> FixProgress {
    serde_json::from_slice(&std::fs::read(session.join(format!("fix-progress-{n}.json"))).unwrap())
        .unwrap()
}

pub(crate) const FILES: &[(&str, &str)] = &[
    ("src/a.rs", "a1\na2\na3\n"),
    ("src/b.rs", "b1\nb2\n"),
    ("src/c.rs", "c1\n"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
async fn good_fixes_commit_and_a_breaking_fix_is_rolled_back_and_reported() {
    let fx = Fixture::new(FILES);
    let base = fx.vcs.head().await.unwrap();
    let input = fx.export(json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("F2", "src/b.rs", 1, "Rename b1"),
        finding("F3", "src/a.rs", 2, "Break a2"),
    ]));
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("F1", edit("src/a.rs", "A1\na2\na3\n"))
            .on("F2", edit("src/b.rs", "B1\nb2\n"))
            .on("F3", edit("src/a.rs", "A1\nBAD\na3\n")),
    );
    let report = run(
        config(vec![input]),
        fx.services(agent.clone(), Arc::new(AutoYes)),
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, Outcome::SomeFailed);
    assert_eq!(report.outcome.exit_code(), 1);
    assert_eq!(fx.messages(&base).await.len(), 2, "one commit per good fix");
    let mut messages = fx.messages(&base).await;
    messages.sort();
    assert_eq!(
        messages,
        [
            "fix(quality): Rename a1 [F1]",
            "fix(quality): Rename b1 [F2]"
        ]
    );
    // Files: the good fixes are in, the bad one rolled back.
    assert_eq!(
        std::fs::read_to_string(fx.root().join("src/a.rs")).unwrap(),
        "A1\na2\na3\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root().join("src/b.rs")).unwrap(),
        "B1\nb2\n"
    );
    assert!(fx.vcs.status().await.unwrap().is_clean());
    // F3's second attempt made the identical change: it was tested only
    // once (and re-run once to rule out a flaky failure), and the finding
    // stopped at the repeat instead of asking a third time.
    assert_eq!(agent.calls_for("F3"), 2);
    assert_eq!(
        fx.tests.runs(),
        6,
        "the base, F1, F2, F3's first attempt and its flaky check, and the two groups' \
         combination tested at landing"
    );
    assert_eq!(report.verification.test_runs, 6);
    assert_eq!(report.verification.reruns, 1);
    assert_eq!(report.verification.each_runs, 6);
    assert_eq!(report.verification.flaky, 0);
    // Parallel stage: two groups on different files, in worktrees.
    let plan = report.plan.clone().unwrap();
    assert_eq!(plan.timeline.len(), 1);
    assert_eq!(plan.timeline[0].execution_mode, ExecutionMode::Parallel);
    // Progress files carry the seed's fields and results.
    let session = report.session_dir.clone();
    assert!(session.starts_with(fx.root().join(".review/fixes")));
    let g_a = plan
        .groups
        .iter()
        .position(|g| g.files == ["src/a.rs"])
        .unwrap()
        + 1;
    let p = read_progress(&session, g_a);
    assert_eq!(p.status, ProgressStatus::Completed);
    assert_eq!(p.phase, "done");
    assert_eq!(p.summary.fixed, 1);
    assert_eq!(p.summary.failed, 1);
    assert_eq!(p.summary.percent_complete, 100.0);
    let f1 = p.findings.iter().find(|f| f.finding_id == "F1").unwrap();
    assert_eq!(f1.result, Some(FixResult::Fixed));
    assert_eq!(f1.attempts, 1);
    assert_eq!(f1.test_passed, Some(true));
    let landed: Vec<String> = fx
        .vcs
        .log_since(&base)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id.to_string())
        .collect();
    assert!(
        landed.contains(f1.commit_hash.as_ref().unwrap()),
        "commit_hash is the landed commit"
    );
    let f3 = p.findings.iter().find(|f| f.finding_id == "F3").unwrap();
    assert_eq!(f3.result, Some(FixResult::Failed));
    assert_eq!(f3.attempts, 2);
    assert_eq!(f3.commit_hash, None);
    assert!(
        f3.error_message
            .as_ref()
            .unwrap()
            .contains("attempt 2 repeats attempt 1 (the identical change)")
    );
    assert!(f3.error_message.as_ref().unwrap().contains("BAD found"));
    let kinds: Vec<&str> = p.errors.iter().map(|e| e.error_type.as_str()).collect();
    assert_eq!(kinds, ["test_failure", "repeat"]);
    // The second attempt's prompt carried the failing output.
    let second = agent
        .calls()
        .into_iter()
        .filter(|c| c.id == "F3")
        .nth(1)
        .unwrap();
    assert!(
        second.instruction.contains("BAD found"),
        "{}",
        second.instruction
    );
    assert_eq!(second.context["finding"]["id"], "F3");
    let snapshot = serde_json::to_value(&p).unwrap();
    insta::assert_json_snapshot!("progress_of_a_group_with_a_rollback", snapshot, {
        ".last_update" => "[time]",
        ".started_at" => "[time]",
        ".findings[].started_at" => "[time]",
        ".findings[].completed_at" => "[time]",
        ".findings[].commit_hash" => insta::dynamic_redaction(|value, _| {
            if value.is_nil() { value } else { "[commit]".into() }
        }),
        ".errors[].timestamp" => "[time]",
    });
    // Completion files.
    assert!(!session.join("active-fix-session.json").exists());
    let summary = std::fs::read_to_string(session.join("fix-summary.md")).unwrap();
    assert!(
        summary.contains("| F3 | Break a2 | src/a.rs:2 |"),
        "{summary}"
    );
    let history: serde_json::Value =
        serde_json::from_slice(&std::fs::read(session.join("fix-history.json")).unwrap()).unwrap();
    assert_eq!(history["version"], 1);
    assert_eq!(history["entries"][0]["fixed"], 2);
    assert_eq!(history["entries"][0]["failed"], 1);
    // Worktrees are gone, and so is the repository's folder for them
    // outside it.
    let outside = orchestrator_core::state::worktree_root(fx.root());
    assert!(
        !outside.exists(),
        "{} is left, holding {:?}; warnings: {:?}",
        outside.display(),
        walkdir_names(&outside),
        fx.sink
            .events()
            .iter()
            .filter(|e| matches!(e, Event::Warning { .. }))
            .collect::<Vec<_>>()
    );
    assert!(!session.join("worktrees").exists());
    // Events: commits and test runs are reported.
    let events = fx.sink.events();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::CommitMade { .. }))
            .count(),
        2
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::TestsRan { passed: false, .. }))
    );
    assert!(!events.iter().any(|e| matches!(e, Event::Escalated { .. })));
}

#[tokio::test]
async fn serial_isolation_runs_one_group_at_a_time_outside_the_users_tree() {
    let fx = Fixture::new(FILES);
    let base = fx.vcs.head().await.unwrap();
    let input = fx.export(json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("F2", "src/b.rs", 1, "Rename b1"),
    ]));
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("F1", edit("src/a.rs", "A1\na2\na3\n"))
            .on("F2", edit("src/b.rs", "B1\nb2\n")),
    );
    let mut cfg = config(vec![input]);
    cfg.isolation = orchestrator_review_fix::Isolation::Serial;
    let report = run(cfg, fx.services(agent, Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::AllFixed);
    let plan = report.plan.unwrap();
    assert_eq!(plan.timeline.len(), 2);
    assert!(
        plan.timeline
            .iter()
            .all(|s| s.execution_mode == ExecutionMode::Serial)
    );
    assert_eq!(plan.execution_strategy.approach, "serial");
    assert_eq!(fx.messages(&base).await.len(), 2);
    // One group at a time in the one worktree of the run's pool, never in
    // the user's tree, where the user may be working.
    let trees: std::collections::BTreeSet<_> = fx
        .tests
        .requests()
        .iter()
        .map(|r| r.workdir.clone())
        .collect();
    assert_eq!(trees.len(), 1, "{trees:?}");
    assert!(!trees.iter().any(|t| t.starts_with(fx.root())), "{trees:?}");
}

#[tokio::test]
async fn a_planning_agent_that_answers_garbage_falls_back_after_one_retry() {
    let fx = Fixture::new(FILES);
    let input = fx.export(json!([finding("F1", "src/a.rs", 1, "Rename a1")]));
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on(
                "plan-batch-1",
                Reply::text("I think we should refactor everything!"),
            )
            .on("F1", edit("src/a.rs", "A1\na2\na3\n")),
    );
    let mut cfg = config(vec![input]);
    cfg.planner = PlannerMode::Agent;
    let report = run(cfg, fx.services(agent.clone(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::AllFixed);
    assert_eq!(agent.calls_for("plan-batch-1"), 2);
    let retry = agent
        .calls()
        .into_iter()
        .filter(|c| c.id == "plan-batch-1")
        .nth(1)
        .unwrap();
    assert!(
        retry
            .instruction
            .contains("Your previous answer was rejected")
    );
    let partial: PartialPlan = serde_json::from_slice(
        &std::fs::read(report.session_dir.join("partial-plan-1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(partial.metadata.planner.as_deref(), Some("deterministic"));
    assert!(partial.metadata.fallback_reason.unwrap().contains("JSON"));
    let plan: FixPlan =
        serde_json::from_slice(&std::fs::read(report.session_dir.join("fix-plan.json")).unwrap())
            .unwrap();
    assert_eq!(plan.metadata.fallback_batches, [1]);
}

#[tokio::test]
async fn a_valid_agent_plan_is_used_and_aggregated() {
    let fx = Fixture::new(FILES);
    let input = fx.export(json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("F2", "src/a.rs", 2, "Rename a2"),
    ]));
    let partial = json!({
        "batch_id": 1,
        "groups": [
            {"group_id": "G1", "group_name": "first", "findings": ["F1"],
             "fix_strategy": {"approach": "rename", "test_pattern": "a_tests"},
             "risk_assessment": {"level": "low"}},
            {"group_id": "G2", "group_name": "second", "findings": ["F2"],
             "fix_strategy": {"approach": "rename"},
             "risk_assessment": {"level": "low"}}
        ],
        "timeline": [
            {"stage": 1, "groups": ["G1"], "execution_mode": "serial"},
            {"stage": 2, "groups": ["G2"], "execution_mode": "serial", "depends_on": [1]}
        ]
    });
    let agent = Arc::new(
        FakeAgent::new("planner")
            .on("plan-batch-1", Reply::json(partial))
            .on("F1", edit("src/a.rs", "A1\na2\na3\n"))
            .on("F2", edit("src/a.rs", "A1\nA2\na3\n")),
    );
    let mut cfg = config(vec![input]);
    cfg.planner = PlannerMode::Agent;
    let report = run(cfg, fx.services(agent.clone(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::AllFixed);
    let plan = report.plan.unwrap();
    assert_eq!(plan.groups.len(), 2);
    assert_eq!(plan.groups[0].group_name, "first");
    assert_eq!(plan.timeline[1].depends_on, [1]);
    assert!(plan.metadata.fallback_batches.is_empty());
    // The group's test pattern reaches the test runner (the base runs
    // every test).
    let patterns: Vec<_> = fx.tests.requests().into_iter().map(|r| r.pattern).collect();
    assert_eq!(patterns, [None, Some("a_tests".to_owned()), None]);
}

#[tokio::test]
async fn a_dirty_tree_is_refused_and_with_allow_dirty_its_files_are_untouched() {
    let fx = Fixture::new(FILES);
    let input = fx.export(json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("F2", "src/b.rs", 1, "Rename b1"),
    ]));
    std::fs::write(fx.root().join("src/b.rs"), "b1 local edit\nb2\n").unwrap();
    std::fs::write(fx.root().join("notes.txt"), "mine").unwrap();
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("F1", edit("src/a.rs", "A1\na2\na3\n"))
            .on("F2", edit("src/b.rs", "B1\nb2\n")),
    );
    let err = run(
        config(vec![input.clone()]),
        fx.services(agent.clone(), Arc::new(AutoYes)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ReviewFixError::DirtyTree { .. }), "{err}");
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("src/b.rs"), "{err}");

    let mut cfg = config(vec![input]);
    cfg.allow_dirty = true;
    let report = run(cfg, fx.services(agent.clone(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::SomeFailed);
    assert_eq!(report.count("fixed"), 1);
    assert_eq!(report.count("rejected"), 1);
    assert_eq!(agent.calls_for("F2"), 0);
    assert_eq!(
        std::fs::read_to_string(fx.root().join("src/b.rs")).unwrap(),
        "b1 local edit\nb2\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root().join("notes.txt")).unwrap(),
        "mine"
    );
}

/// `--allow-dirty` (issue 32): the agent works apart from the user's tree.
/// An agent that writes over the user's modified file, besides the file of
/// its finding, overwrites nothing of the user's: their edit is still there,
/// byte for byte, whatever becomes of the fix.
#[tokio::test]
async fn with_allow_dirty_an_agent_writing_over_the_users_modified_file_changes_nothing_of_theirs()
{
    let fx = Fixture::new(FILES);
    let input = fx.export(json!([finding("F1", "src/a.rs", 1, "Rename a1")]));
    std::fs::write(fx.root().join("src/b.rs"), "b1 local edit\nb2\n").unwrap();
    std::fs::write(fx.root().join("notes.txt"), "mine").unwrap();
    let stray = || Reply::Edit {
        files: vec![
            ("src/a.rs".to_owned(), Some("A1\na2\na3\n".to_owned())),
            (
                "src/b.rs".to_owned(),
                Some("B1 by the agent\nb2\n".to_owned()),
            ),
            ("notes.txt".to_owned(), None),
        ],
        response: AgentResponse::text("done"),
    };
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("F1", stray())
            .on("F1", stray())
            .on("F1", stray()),
    );
    let mut cfg = config(vec![input]);
    cfg.allow_dirty = true;
    run(cfg, fx.services(agent.clone(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert!(agent.calls_for("F1") >= 1);
    for call in agent.calls() {
        assert!(
            !call.workdir.starts_with(fx.root()),
            "the agent worked in the user's tree: {}",
            call.workdir.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(fx.root().join("src/b.rs")).unwrap(),
        "b1 local edit\nb2\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root().join("notes.txt")).unwrap(),
        "mine"
    );
}

#[tokio::test]
async fn a_path_traversal_finding_is_rejected_and_the_rest_goes_on() {
    let fx = Fixture::new(FILES);
    let input = fx.export(json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("EVIL", "../../../../etc/passwd", 1, "Steal"),
    ]));
    let agent = Arc::new(FakeAgent::new("fake").on("F1", edit("src/a.rs", "A1\na2\na3\n")));
    let report = run(
        config(vec![input]),
        fx.services(agent.clone(), Arc::new(AutoYes)),
    )
    .await
    .unwrap();
    assert_eq!(report.outcome.exit_code(), 1);
    let evil = report.findings.iter().find(|f| f.id == "EVIL").unwrap();
    assert_eq!(evil.result, "rejected");
    assert!(
        evil.error
            .as_ref()
            .unwrap()
            .contains("outside the repository")
    );
    assert_eq!(agent.calls_for("EVIL"), 0);
    assert_eq!(report.count("fixed"), 1);
}

#[tokio::test]
async fn an_unsupported_finding_is_reported_failed_without_retries() {
    let fx = Fixture::new(FILES);
    let input = fx.export(json!([finding("F1", "src/a.rs", 1, "Rename a1")]));
    let agent = Arc::new(FakeAgent::new("fake").on(
        "F1",
        Reply::Fail(AgentError::Unsupported {
            reason: "no suggestion".into(),
        }),
    ));
    let report = run(
        config(vec![input]),
        fx.services(agent.clone(), Arc::new(AutoYes)),
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, Outcome::SomeFailed);
    assert_eq!(agent.calls_for("F1"), 1, "a refusal is not retried");
    assert_eq!(fx.tests.runs(), 1, "only the base was tested");
    let f = &report.findings[0];
    assert!(f.error.as_ref().unwrap().contains("no suggestion"), "{f:?}");
}

#[tokio::test]
async fn dry_run_writes_the_plan_and_changes_nothing() {
    let fx = Fixture::new(FILES);
    let base = fx.vcs.head().await.unwrap();
    let input = fx.export(json!([finding("F1", "src/a.rs", 1, "Rename a1")]));
    let agent = Arc::new(FakeAgent::new("fake"));
    let mut cfg = config(vec![input]);
    cfg.dry_run = true;
    let report = run(cfg, fx.services(agent.clone(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::DryRun);
    assert_eq!(report.outcome.exit_code(), 0);
    assert!(agent.calls().is_empty());
    assert!(report.session_dir.join("fix-plan.json").is_file());
    assert!(report.session_dir.join("fix-progress-1.json").is_file());
    assert_eq!(fx.vcs.head().await.unwrap(), base);
}

#[tokio::test]
async fn an_agent_that_cannot_change_files_is_refused_unless_planning_only() {
    let fx = Fixture::new(FILES);
    let base = fx.vcs.head().await.unwrap();
    let input = fx.export(json!([finding("F1", "src/a.rs", 1, "Rename a1")]));
    let agent = Arc::new(FakeAgent::new("chat").answers_only());
    let err = run(
        config(vec![input.clone()]),
        fx.services(agent.clone(), Arc::new(AutoYes)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ReviewFixError::AgentCannotChangeFiles { agent } if agent == "chat"),
        "{err}"
    );
    assert!(err.to_string().contains("--dry-run"), "{err}");
    assert_eq!(err.exit_code(), 2);
    assert!(agent.calls().is_empty());
    assert_eq!(fx.vcs.head().await.unwrap(), base);
    // Planning only needs answers: a dry run takes it.
    let mut cfg = config(vec![input]);
    cfg.dry_run = true;
    let report = run(cfg, fx.services(agent, Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::DryRun);
}

/// An edit whose answer reports 100 input and 10 output tokens, two turns
/// and `cost` dollars.
fn costly_edit(file: &str, content: &str, cost: f64) -> Reply {
    let mut response = AgentResponse::text("done");
    response.usage = Some(Usage {
        input_tokens: 100,
        output_tokens: 10,
        cost_usd: cost,
        turns: 2,
    });
    Reply::Edit {
        files: vec![(file.to_owned(), Some(content.to_owned()))],
        response,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_findings_budget_fails_that_finding_only_and_the_spend_is_reported() {
    let fx = Fixture::new(FILES);
    let input = fx.export(json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("F3", "src/b.rs", 2, "Break b2"),
    ]));
    // F3's attempts each break the tests differently, at $0.30 each: the
    // first two start below the $0.50 limit, the third would not.
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("F1", costly_edit("src/a.rs", "A1\na2\na3\n", 0.3))
            .on("F3", costly_edit("src/b.rs", "b1\nBAD1\n", 0.3))
            .on("F3", costly_edit("src/b.rs", "b1\nBAD2\n", 0.3))
            .on("F3", costly_edit("src/b.rs", "b1\nBAD3\n", 0.3)),
    );
    let cfg = config(vec![input]).with_item_limits(ItemLimits::new(Some(0.5), None, None));
    let report = run(cfg, fx.services(agent.clone(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::SomeFailed);
    assert_eq!(agent.calls_for("F1"), 1);
    assert_eq!(agent.calls_for("F3"), 2, "the third attempt is over budget");
    // Each call carries what is left of the finding's limit.
    let left: Vec<Option<f64>> = agent
        .calls()
        .iter()
        .filter(|r| r.id == "F3")
        .map(|r| {
            r.spend_limits
                .max_cost_usd
                .map(|usd| (usd * 100.0).round() / 100.0)
        })
        .collect();
    assert_eq!(left, [Some(0.5), Some(0.2)]);
    let f1 = report.findings.iter().find(|f| f.id == "F1").unwrap();
    assert_eq!(f1.result, "fixed");
    let f3 = report.findings.iter().find(|f| f.id == "F3").unwrap();
    assert_eq!(f3.result, "failed");
    let error = f3.error.as_deref().unwrap();
    assert!(
        error.contains("the finding's budget: $0.6000 of $0.5000 spent"),
        "{error}"
    );
    let spend = f3.spend.unwrap();
    assert_eq!(
        (
            spend.calls,
            spend.input_tokens,
            spend.output_tokens,
            spend.turns
        ),
        (2, 200, 20, 4)
    );
    assert!((spend.cost_usd - 0.6).abs() < 1e-9);
    // The totals, per verified fix, in the report and in fix-summary.md.
    let mut total = AgentSpend::default();
    total.add(&f1.spend.unwrap());
    total.add(&spend);
    assert_eq!(total.calls, 3);
    let line = format!(
        "Agent: 3 calls, 330 tokens, $0.9000; per verified fix: $0.9000, {:.1} test runs",
        f64::from(report.test_runs)
    );
    assert_eq!(report.spend_line().as_deref(), Some(line.as_str()));
    let summary = std::fs::read_to_string(report.session_dir.join("fix-summary.md")).unwrap();
    assert!(summary.contains(&format!("- {line}\n")), "{summary}");
}

#[tokio::test]
async fn a_deferred_gate_needs_a_human_and_resume_finishes_the_session() {
    let fx = Fixture::new(FILES);
    let base = fx.vcs.head().await.unwrap();
    let input = fx.export(json!([finding("F1", "src/a.rs", 1, "Rename a1")]));
    let agent = Arc::new(FakeAgent::new("fake").on("F1", edit("src/a.rs", "A1\na2\na3\n")));
    let report = run(
        config(vec![input.clone()]),
        fx.services(agent.clone(), Arc::new(AlwaysDefer)),
    )
    .await
    .unwrap();
    assert!(matches!(report.outcome, Outcome::NeedsHuman { .. }));
    assert_eq!(report.outcome.exit_code(), 3);
    assert!(report.session_dir.join("active-fix-session.json").is_file());
    assert!(agent.calls().is_empty());

    let mut cfg = config(vec![input]);
    cfg.resume = true;
    let resumed = run(cfg, fx.services(agent.clone(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(resumed.session_dir, report.session_dir);
    assert_eq!(resumed.outcome, Outcome::AllFixed);
    assert_eq!(fx.messages(&base).await, ["fix(quality): Rename a1 [F1]"]);
    let history: serde_json::Value = serde_json::from_slice(
        &std::fs::read(resumed.session_dir.join("fix-history.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(history["entries"][0]["run"], 2);
    assert_eq!(history["entries"][0]["resumed"], true);
}

/// A resumed session runs where its plan was made for: flags asking for
/// another isolation are overridden, with a note.
#[tokio::test]
async fn a_resume_keeps_the_sessions_isolation_and_says_so() {
    let fx = Fixture::new(FILES);
    let input = fx.export(json!([finding("F1", "src/a.rs", 1, "Rename a1")]));
    let agent = Arc::new(FakeAgent::new("fake").on("F1", edit("src/a.rs", "A1\na2\na3\n")));
    let mut first = config(vec![input.clone()]);
    first.isolation = Isolation::Serial;
    let report = run(first, fx.services(agent.clone(), Arc::new(AlwaysDefer)))
        .await
        .unwrap();
    assert!(matches!(report.outcome, Outcome::NeedsHuman { .. }));

    let mut cfg = config(vec![input]);
    cfg.resume = true;
    cfg.isolation = Isolation::Worktree;
    cfg.verify = VerifyMode::Auto;
    let resumed = run(cfg, fx.services(agent, Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(resumed.outcome, Outcome::AllFixed);
    assert!(
        resumed.notes.iter().any(|n| n.contains(
            "resumed with the session's isolation serial and 3 parallel groups (asked: worktree and 3)"
        )),
        "{:?}",
        resumed.notes
    );
    assert_eq!(
        resumed.verification.mode,
        VerifyMode::Each,
        "serial isolation verifies each fix on its own"
    );
}

#[tokio::test]
async fn resume_with_nothing_to_resume_is_a_usage_error() {
    let fx = Fixture::new(FILES);
    let cfg = ReviewFixConfig::default().with_resume(true);
    let err = run(
        cfg,
        fx.services(Arc::new(FakeAgent::new("x")), Arc::new(AutoYes)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, ReviewFixError::NothingToResume { .. }),
        "{err}"
    );
    assert_eq!(err.exit_code(), 2);
}

/// An agent that edits like a fake, but on one finding (or on every one,
/// with `*`) hangs after editing (the run is then dropped mid-fix, as if
/// killed).
#[derive(Debug)]
struct HangsOn {
    inner: FakeAgent,
    hang_on: String,
    /// Where the hanging request worked.
    hung_in: std::sync::Mutex<Option<PathBuf>>,
}

impl HangsOn {
    fn new(inner: FakeAgent, hang_on: &str) -> Self {
        Self {
            inner,
            hang_on: hang_on.to_owned(),
            hung_in: std::sync::Mutex::new(None),
        }
    }

    fn hung_in(&self) -> Option<PathBuf> {
        self.hung_in.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Agent for HangsOn {
    fn name(&self) -> &str {
        "hangs"
    }
    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let id = request.id.clone();
        let workdir = request.workdir.clone();
        let r = self.inner.run(request).await;
        if id == self.hang_on || self.hang_on == "*" {
            *self.hung_in.lock().unwrap() = Some(workdir);
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        r
    }
}

#[tokio::test]
async fn an_interrupted_run_resumes_to_the_same_commits_without_redoing_fixes() {
    let findings = json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("F2", "src/a.rs", 2, "Rename a2"),
        finding("F3", "src/a.rs", 3, "Rename a3"),
    ]);
    let fake = || {
        FakeAgent::new("fake")
            .on("F1", edit("src/a.rs", "A1\na2\na3\n"))
            .on("F2", edit("src/a.rs", "A1\nA2\na3\n"))
            .on("F3", edit("src/a.rs", "A1\nA2\nA3\n"))
    };
    // Uninterrupted reference run.
    let reference = Fixture::new(FILES);
    let ref_base = reference.vcs.head().await.unwrap();
    let input = reference.export(findings.clone());
    run(
        config(vec![input]),
        reference.services(Arc::new(fake()), Arc::new(AutoYes)),
    )
    .await
    .unwrap();
    let expected: Vec<(String, String)> = reference
        .vcs
        .log_since(&ref_base)
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.message, c.tree))
        .collect();
    assert_eq!(expected.len(), 3);

    // Interrupted run: F2's edit is on disk when the run is dropped.
    let fx = Fixture::new(FILES);
    let base = fx.vcs.head().await.unwrap();
    let input = fx.export(findings);
    let hanging = Arc::new(HangsOn::new(fake(), "F2"));
    let services = fx.services(hanging.clone(), Arc::new(AutoYes));
    let cfg = config(vec![input.clone()]);
    let handle = tokio::spawn(async move { run(cfg, services).await });
    let tree = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(tree) = hanging.hung_in()
                && std::fs::read_to_string(tree.join("src/a.rs")).unwrap() == "A1\nA2\na3\n"
            {
                return tree;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    handle.abort();
    let _ = handle.await;
    // F2's half-done edit is in its worktree, never in the user's tree;
    // F1 landed when it passed.
    assert!(!tree.starts_with(fx.root()), "{}", tree.display());
    assert_eq!(
        std::fs::read_to_string(fx.root().join("src/a.rs")).unwrap(),
        "A1\na2\na3\n"
    );
    assert_eq!(fx.messages(&base).await, ["fix(quality): Rename a1 [F1]"]);

    // Writes the kill cut short leave temporary files; the resume deletes
    // them all, whichever state file they were for.
    let session = std::fs::read_dir(fx.root().join(".review/fixes"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let leftovers = [
        ".fix-progress-1.json.AbC123.tmp",
        ".fix-plan.json.XyZ789.tmp",
    ];
    for name in leftovers {
        std::fs::write(session.join(name), "cut short").unwrap();
    }

    // A second engine while the first still "holds" nothing: resume works.
    let agent = Arc::new(fake());
    let mut cfg = config(vec![input]);
    cfg.resume = true;
    let report = run(cfg, fx.services(agent.clone(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::AllFixed);
    assert_eq!(agent.calls_for("F1"), 0, "a fixed finding is not re-run");
    assert_eq!(agent.calls_for("F2"), 1);
    let got: Vec<(String, String)> = fx
        .vcs
        .log_since(&base)
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.message, c.tree))
        .collect();
    assert_eq!(got, expected);
    for name in leftovers {
        assert!(!session.join(name).exists(), "{name} is left");
    }
}

/// A kill leaves worktrees in states a resume must clean up: with a fix in
/// flight (uncommitted changes), a branch without its folder (git killed
/// while it made or removed the worktree), or recorded but never made.
/// Found by the CLI crash-resume harness (`crates/cli/tests/crash_resume.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
async fn a_resume_removes_every_worktree_an_interrupted_run_left() {
    let findings = json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("F2", "src/b.rs", 1, "Rename b1"),
    ]);
    let fake = || {
        FakeAgent::new("fake")
            .on("F1", edit("src/a.rs", "A1\na2\na3\n"))
            .on("F2", edit("src/b.rs", "B1\nb2\n"))
    };
    let fx = Fixture::new(FILES);
    let base = fx.vcs.head().await.unwrap();
    let input = fx.export(findings);
    // Two files, two groups: one parallel stage, each group in a worktree.
    // Both edits are in their worktrees, uncommitted, when the run is
    // dropped (both fixes hang after editing, so that no group goes on
    // after the drop as a detached task could).
    let hanging = Arc::new(HangsOn::new(fake(), "*"));
    let services = fx.services(hanging, Arc::new(AutoYes));
    let cfg = config(vec![input.clone()]);
    let handle = tokio::spawn(async move { run(cfg, services).await });
    let fixes = fx.root().join(".review/fixes");
    let session = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let found = std::fs::read_dir(&fixes)
                .into_iter()
                .flatten()
                .find_map(|e| {
                    let dir = e.ok()?.path();
                    let edited = |file: &str, text: &str| {
                        std::fs::read_dir(
                            orchestrator_core::state::worktree_root(fx.root()).join("review-fix"),
                        )
                        .into_iter()
                        .flatten()
                        .flatten()
                        .any(|w| {
                            std::fs::read_to_string(w.path().join(file)).is_ok_and(|t| t == text)
                        })
                    };
                    (edited("src/a.rs", "A1\na2\na3\n") && edited("src/b.rs", "B1\nb2\n"))
                        .then_some(dir)
                });
            if let Some(dir) = found {
                return dir;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    handle.abort();
    let _ = handle.await;

    let active_path = session.join("active-fix-session.json");
    let mut active: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&active_path).unwrap()).unwrap();
    let id = session.file_name().unwrap().to_str().unwrap().to_owned();
    let mut left: Vec<(PathBuf, String)> = active["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                PathBuf::from(w["path"].as_str().unwrap()),
                w["branch"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(!left.is_empty(), "{active:#}");
    // Killed part-way through a removal: the folder is gone, the branch
    // and the record are left.
    let half = session.join("worktrees/r1-G8");
    let half_branch = format!("review-fix/{id}/r1-G8");
    fx.vcs
        .worktree_add(&half, &half_branch, &base)
        .await
        .unwrap();
    std::fs::remove_dir_all(&half).unwrap();
    // Killed after the record was written, before git made the worktree.
    let never = session.join("worktrees/r1-G9");
    let never_branch = format!("review-fix/{id}/r1-G9");
    for (path, branch, group) in [(&half, &half_branch, "G8"), (&never, &never_branch, "G9")] {
        active["worktrees"]
            .as_array_mut()
            .unwrap()
            .push(json!({"group_id": group, "path": path, "branch": branch}));
    }
    std::fs::write(&active_path, serde_json::to_vec_pretty(&active).unwrap()).unwrap();
    left.push((half, half_branch));
    left.push((never, never_branch));

    let mut cfg = config(vec![input]);
    cfg.resume = true;
    let report = run(cfg, fx.services(Arc::new(fake()), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::AllFixed);
    let warnings: Vec<String> = fx
        .sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Warning { message } => Some(message),
            _ => None,
        })
        .collect();
    assert!(
        !warnings.iter().any(|w| w.contains("worktree")),
        "{warnings:#?}"
    );
    for (path, branch) in &left {
        assert!(!path.exists(), "{} is left", path.display());
        // The branch is gone too: the same worktree can be made again.
        fx.vcs
            .worktree_add(path, branch, &base)
            .await
            .unwrap_or_else(|e| {
                panic!("{branch} is left: {e}");
            });
        fx.vcs.worktree_remove(path, branch).await.unwrap();
    }
}

/// One run per repository, kept by the library: while one holds the
/// repository, `run` and `run_with_relint` — even with their findings in
/// another review folder — refuse before they change anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_on_one_repository_is_refused_by_the_library() {
    let fx = Fixture::new(FILES);
    let base = fx.vcs.head().await.unwrap();
    let input = fx.export(json!([finding("F1", "src/a.rs", 1, "Rename a1")]));
    let elsewhere = tempfile::tempdir().unwrap();
    let other = elsewhere.path().join("findings.json");
    std::fs::copy(&input, &other).unwrap();
    let agent = || -> Arc<dyn Agent> {
        Arc::new(FakeAgent::new("fake").on("F1", edit("src/a.rs", "A1\na2\na3\n")))
    };
    let held = orchestrator_review_fix::lock_repository(fx.root()).unwrap();
    for inputs in [vec![input.clone()], vec![other.clone()]] {
        let err = run(
            config(inputs.clone()),
            fx.services(agent(), Arc::new(AutoYes)),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(
                err,
                orchestrator_review_fix::ReviewFixError::RepoBusy { .. }
            ),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("another review-fix run is in progress"),
            "{err}"
        );
        assert_eq!(err.exit_code(), 2);
        let err = orchestrator_review_fix::relint::run_with_relint(
            config(inputs),
            fx.services(agent(), Arc::new(AutoYes)),
            None,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(
                err,
                orchestrator_review_fix::ReviewFixError::RepoBusy { .. }
            ),
            "{err}"
        );
    }
    assert!(fx.messages(&base).await.is_empty(), "nothing was committed");
    assert!(
        !fx.root().join(".review/fixes").exists(),
        "no session was made"
    );
    drop(held);
    let report = run(config(vec![input]), fx.services(agent(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::AllFixed);
}

/// A run limit in front of an agent, as the factory's `Budget` wrapper
/// answers: after `max` calls, every call is refused with a budget error.
#[derive(Debug)]
struct CallLimit {
    inner: Arc<FakeAgent>,
    max: u32,
    calls: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl Agent for CallLimit {
    fn name(&self) -> &str {
        "limited"
    }
    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let made = self.calls.load(std::sync::atomic::Ordering::SeqCst);
        if made >= self.max {
            return Err(AgentError::Budget {
                message: format!("{made} of {} agent calls made", self.max),
            });
        }
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.run(request).await
    }
}

fn limit_script() -> Arc<FakeAgent> {
    // F2's first edit breaks the tests; its second passes.
    Arc::new(
        FakeAgent::new("fake")
            .on("F1", edit("src/a.rs", "A1\na2\na3\n"))
            .on("F2", edit("src/b.rs", "b1\nBAD\n"))
            .on("F2", edit("src/b.rs", "B1\nb2\n"))
            .on("F3", edit("src/c.rs", "C1\n")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_limit_stops_resumably_and_resume_lands_the_same_commits() {
    let findings = json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("F2", "src/b.rs", 1, "Rename b1"),
        finding("F3", "src/c.rs", 1, "Rename c1"),
    ]);
    let serial = |inputs| config(inputs).with_isolation(Isolation::Serial);

    // The reference: no limit.
    let free = Fixture::new(FILES);
    let free_base = free.vcs.head().await.unwrap();
    let input = free.export(findings.clone());
    let unlimited = run(
        serial(vec![input]),
        free.services(limit_script(), Arc::new(AutoYes)),
    )
    .await
    .unwrap();
    assert_eq!(unlimited.outcome, Outcome::AllFixed);
    let expected = free.messages(&free_base).await;
    assert_eq!(expected.len(), 3);

    // Two calls: F1's fix, F2's first (failing) attempt. F2's second
    // attempt is refused at the limit: it stays pending, its tree restored.
    let fx = Fixture::new(FILES);
    let base = fx.vcs.head().await.unwrap();
    let input = fx.export(findings);
    let script = limit_script();
    let limited = Arc::new(CallLimit {
        inner: Arc::clone(&script),
        max: 2,
        calls: 0.into(),
    });
    let report = run(
        serial(vec![input.clone()]),
        fx.services(limited, Arc::new(AutoYes)),
    )
    .await
    .unwrap();
    assert_eq!(
        report.outcome,
        Outcome::LimitReached {
            reason: "2 of 2 agent calls made".to_owned()
        }
    );
    assert_eq!(report.outcome.exit_code(), 3);
    assert!(report.session_dir.join("active-fix-session.json").is_file());
    assert_eq!(
        fx.messages(&base).await,
        ["fix(quality): Rename a1 [F1]"],
        "the verified fix is kept"
    );
    assert_eq!(script.calls_for("F3"), 0, "no new work starts");
    let result = |id: &str| {
        let f = report.findings.iter().find(|f| f.id == id).unwrap();
        (f.result.clone(), f.attempts)
    };
    assert_eq!(result("F1"), ("fixed".to_owned(), 1));
    assert_eq!(result("F2"), ("pending".to_owned(), 1));
    assert_eq!(result("F3"), ("pending".to_owned(), 0));
    assert_eq!(
        std::fs::read_to_string(fx.root().join("src/b.rs")).unwrap(),
        "b1\nb2\n"
    );
    let summary = std::fs::read_to_string(report.session_dir.join("fix-summary.md")).unwrap();
    assert!(summary.contains("limit_reached"), "{summary}");

    // Resumed with the limit raised (here: none): the same commits.
    let resumed = run(
        serial(vec![input]).with_resume(true),
        fx.services(limit_script(), Arc::new(AutoYes)),
    )
    .await
    .unwrap();
    assert_eq!(resumed.session_dir, report.session_dir);
    assert_eq!(resumed.outcome, Outcome::AllFixed);
    assert_eq!(fx.messages(&base).await, expected);
    for file in ["src/a.rs", "src/b.rs", "src/c.rs"] {
        assert_eq!(
            std::fs::read_to_string(fx.root().join(file)).unwrap(),
            std::fs::read_to_string(free.root().join(file)).unwrap(),
            "{file}"
        );
    }
    assert!(!report.session_dir.join("active-fix-session.json").exists());
}

/// Every path under `dir`, relative to it: what a leftover folder holds.
fn walkdir_names(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            out.push(
                path.strip_prefix(dir)
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
            );
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}
