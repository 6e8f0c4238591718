//! The fix loop with fakes: FakeVcs over a temp dir, FakeAgent editing files,
//! ScriptedGate, and a scripted CI provider.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use orchestrator_ci_autofix::fix_loop::{DIFF_CAP, cap_diff, commit_message};
use orchestrator_ci_autofix::provider::{CheckLog, CheckRun, CiProvider, ProviderError};
use orchestrator_ci_autofix::{
    AutofixConfig, AutofixContext, AutofixError, AutofixOutcome, FailedCheck, LocalConfig,
    LocalProvider, Target, run_autofix,
};
use orchestrator_core::agent::{AgentResponse, Role};
use orchestrator_core::cadence::{Action, Classification, SubClass};
use orchestrator_core::event::{CollectingSink, Event};
use orchestrator_core::fakes::{FakeAgent, FakeVcs, Reply, ScriptedCommands, ScriptedGate};
use orchestrator_core::gate::Answer;
use orchestrator_core::vcs::Vcs;

const FMT_LOG: &str =
    "Diff in /w/src/lib.rs:1:\n-pub fn f()->u32{1}\n+pub fn f() -> u32 {\n+    1\n+}\n";
const TEST_LOG: &str = "running 1 test\ntest tests::adds ... FAILED\nthread 'tests::adds' panicked at src/lib.rs:15:9:\nassertion `left == right` failed\n";
const ODD_LOG: &str = "Run ./build.sh\nsomething odd happened\n";

/// A CI provider that replays scripted check runs and logs.
#[derive(Debug)]
struct ScriptedCi {
    runs: Mutex<VecDeque<CheckRun>>,
    logs: BTreeMap<String, String>,
    pushes: bool,
    /// What `diff` answers.
    diff: Result<String, ProviderError>,
    /// Whether `failed_logs` fails.
    logs_fail: bool,
    /// How often `diff` was called.
    diff_calls: Mutex<usize>,
    /// The `head` of every `wait_for_checks`.
    heads: Mutex<Vec<Option<String>>>,
}

impl ScriptedCi {
    fn new(runs: Vec<CheckRun>, logs: &[(&str, &str)], pushes: bool) -> Arc<Self> {
        Arc::new(Self::build(runs, logs, pushes))
    }

    fn build(runs: Vec<CheckRun>, logs: &[(&str, &str)], pushes: bool) -> Self {
        Self {
            runs: Mutex::new(runs.into()),
            logs: logs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            pushes,
            diff: Ok(String::new()),
            logs_fail: false,
            diff_calls: Mutex::new(0),
            heads: Mutex::new(Vec::new()),
        }
    }

    fn heads(&self) -> Vec<Option<String>> {
        self.heads.lock().unwrap().clone()
    }

    fn diff_calls(&self) -> usize {
        *self.diff_calls.lock().unwrap()
    }
}

fn gh_failure(command: &str) -> ProviderError {
    ProviderError::Command {
        command: command.into(),
        status: Some(1),
        stderr: "HTTP 502: Bad Gateway".into(),
    }
}

#[async_trait]
impl CiProvider for ScriptedCi {
    fn pushes(&self) -> bool {
        self.pushes
    }
    async fn wait_for_checks(&self, head: Option<&str>) -> Result<CheckRun, ProviderError> {
        self.heads.lock().unwrap().push(head.map(str::to_owned));
        let mut runs = self.runs.lock().unwrap();
        Ok(if runs.len() > 1 {
            runs.pop_front().unwrap()
        } else {
            runs.front().cloned().unwrap_or(CheckRun::Green)
        })
    }
    async fn failed_logs(&self, checks: &[FailedCheck]) -> Result<Vec<CheckLog>, ProviderError> {
        if self.logs_fail {
            return Err(gh_failure("gh run view 1 --log-failed"));
        }
        Ok(checks
            .iter()
            .map(|c| CheckLog::new(&c.name, self.logs.get(&c.name).cloned().unwrap_or_default()))
            .collect())
    }
    async fn diff(&self) -> Result<String, ProviderError> {
        *self.diff_calls.lock().unwrap() += 1;
        self.diff.clone()
    }
}

fn check(name: &str) -> FailedCheck {
    FailedCheck {
        name: name.into(),
        run_id: Some("1".into()),
        log_url: None,
        conclusion_detail: None,
    }
}

fn failed(name: &str) -> CheckRun {
    CheckRun::Failed(vec![check(name)])
}

fn repo() -> (tempfile::TempDir, Arc<FakeVcs>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "pub fn f()->u32{1}\n").unwrap();
    let vcs = Arc::new(FakeVcs::init(dir.path()).unwrap());
    (dir, vcs)
}

fn edit(path: &str, content: &str) -> Reply {
    Reply::Edit {
        files: vec![(path.into(), Some(content.into()))],
        response: AgentResponse::text("fixed"),
    }
}

struct Run {
    outcome: Result<AutofixOutcome, AutofixError>,
    gate: Arc<ScriptedGate>,
    agent: Arc<FakeAgent>,
    sink: Arc<CollectingSink>,
}

async fn run(
    vcs: &Arc<FakeVcs>,
    agent: FakeAgent,
    answers: Vec<Answer>,
    ci: Arc<dyn CiProvider>,
    initial: &str,
    tweak: impl FnOnce(&mut AutofixConfig),
) -> Run {
    let gate = ScriptedGate::new(answers);
    let agent = Arc::new(agent);
    let mut config = AutofixConfig::new(Target::Pr {
        number: 785,
        branch: "main".into(),
        forge: orchestrator_core::forge::ForgeKind::Github,
    });
    config.initial_failures = Some(vec![check(initial)]);
    config.now = Some("2026-05-07T10:00:00Z".parse().unwrap());
    tweak(&mut config);
    let sink = Arc::new(CollectingSink::new());
    let ctx = AutofixContext {
        vcs: vcs.clone(),
        agent: agent.clone(),
        gate: gate.clone(),
        provider: ci,
        sink: sink.clone(),
        config,
    };
    Run {
        outcome: run_autofix(ctx).await,
        gate,
        agent,
        sink,
    }
}

fn audit(root: &Path) -> String {
    std::fs::read_to_string(root.join(".moai/reports/ci-autofix/PR-785-2026-05-07.md")).unwrap()
}

#[tokio::test]
async fn iteration_one_asks_then_applies_pushes_and_turns_green() {
    let (dir, vcs) = repo();
    let agent =
        FakeAgent::new("fmt").otherwise(edit("src/lib.rs", "pub fn f() -> u32 {\n    1\n}\n"));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(
        &vcs,
        agent,
        vec![Answer::chose(0)],
        ci.clone(),
        "Lint",
        |_| {},
    )
    .await;
    let AutofixOutcome::Green { commits } = r.outcome.unwrap() else {
        panic!("not green")
    };
    assert_eq!(commits.len(), 1);
    assert_eq!(
        ci.heads(),
        [Some(commits[0].clone())],
        "after the push the checks are waited for at the pushed commit"
    );
    let asked = r.gate.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].id, "ci-autofix.apply-patch");
    assert_eq!(asked[0].label(0), Some("Apply patch (recommended)"));
    let head = vcs.head().await.unwrap();
    assert_eq!(head.as_str(), commits[0]);
    assert_eq!(vcs.remote_branch("origin", "main"), Some(head.clone()));
    // Green removes the state file; the audit log keeps the iteration.
    assert!(!dir.path().join(".moai/state/ci-autofix-785.json").exists());
    let audit = audit(dir.path());
    assert!(audit.starts_with("# CI Auto-Fix Log — PR #785 — 2026-05-07\n"));
    assert!(audit.contains("## Iteration 1\n\n- **classification**: mechanical\n- **sub_class**: trivial\n- **action**: applied\n"));
    assert!(vcs.status().await.unwrap().is_clean());
}

/// A call refused at a run limit stops the run resumably: no question is
/// asked (nothing to decide), the tree and HEAD are as they were, the audit
/// log records the stop, the state file keeps the iteration unused, and the
/// next run (with room to spend) makes iteration 1's fix.
#[tokio::test]
async fn a_run_limit_stops_without_using_up_the_iteration() {
    let (dir, vcs) = repo();
    let head = vcs.head().await.unwrap();
    let refused = orchestrator_core::agent::AgentError::Budget {
        message: "3 of 3 agent calls used".into(),
    };
    let agent = FakeAgent::new("x").otherwise(Reply::Fail(refused));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![], ci.clone(), "Lint", |_| {}).await;
    let outcome = r.outcome.unwrap();
    assert_eq!(
        outcome,
        AutofixOutcome::LimitReached {
            reason: "3 of 3 agent calls used".into()
        }
    );
    assert_eq!(outcome.exit_code(), 3);
    assert!(r.gate.asked().is_empty(), "{:?}", r.gate.asked());
    assert!(r.sink.events().iter().any(|e| matches!(e,
        Event::Warning { message } if message.starts_with("the run's limit is reached (3 of 3 agent calls used)"))));
    assert_eq!(vcs.head().await.unwrap(), head);
    assert!(vcs.status().await.unwrap().is_clean());
    assert!(audit(dir.path()).contains("- **action**: stopped at the run's limit\n"));
    assert!(dir.path().join(".moai/state/ci-autofix-785.json").exists());

    let agent =
        FakeAgent::new("fmt").otherwise(edit("src/lib.rs", "pub fn f() -> u32 {\n    1\n}\n"));
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |_| {}).await;
    let AutofixOutcome::Green { commits } = r.outcome.unwrap() else {
        panic!("not green")
    };
    assert_eq!(commits.len(), 1);
    // The iteration's one call is an event (`--json`); the refused call of
    // the first run was none.
    let calls: Vec<(String, u32)> = r
        .sink
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::AgentCall { id, total, .. } => Some((id.clone(), total.calls)),
            _ => None,
        })
        .collect();
    assert_eq!(calls, [("iter-1".to_owned(), 1)]);
    let log = vcs.log_since(&head).await.unwrap();
    assert_eq!(log.len(), 1);
    assert!(log[0].message.trim_end().ends_with("(iter 1)"), "{log:?}");
}

/// An edit whose answer reports `cost_usd` dollars for 1000 tokens.
fn costly_edit(cost_usd: f64) -> Reply {
    let mut response = AgentResponse::text("fixed");
    response.usage = Some(orchestrator_core::agent::Usage {
        input_tokens: 900,
        output_tokens: 100,
        cost_usd,
        turns: 3,
    });
    Reply::Edit {
        files: vec![(
            "src/lib.rs".into(),
            Some("pub fn f() -> u32 {\n    1\n}\n".into()),
        )],
        response,
    }
}

/// The iteration's own limit goes with the request (for the agents that
/// can stop at it), and a call that spent past it anyway has its patch
/// discarded: the iteration escalates with the limit named, no patch is
/// offered and nothing committed. A call within the limit lands as usual.
#[tokio::test]
async fn a_patch_made_past_the_iterations_limit_is_discarded() {
    use orchestrator_core::agent::ItemLimits;
    let limits = ItemLimits::new(Some(0.25), Some(5000), None);
    let (_dir, vcs) = repo();
    let head = vcs.head().await.unwrap();
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let agent = FakeAgent::new("fmt").otherwise(costly_edit(0.30));
    let r = run(&vcs, agent, vec![], ci.clone(), "Lint", |c| {
        c.iteration_limits = limits;
    })
    .await;
    assert_eq!(r.agent.calls()[0].spend_limits, limits);
    let AutofixOutcome::Escalated { action, reason, .. } = r.outcome.unwrap() else {
        panic!("not escalated")
    };
    assert_eq!(action, Action::EscalateNoPatch);
    assert!(
        reason.contains(
            "the iteration's limit was passed: the call spent $0.3000, over its limit of $0.2500; its patch was discarded"
        ),
        "{reason}"
    );
    assert!(
        r.gate
            .asked()
            .iter()
            .all(|q| q.id != "ci-autofix.apply-patch"),
        "no patch to apply: {:?}",
        r.gate.asked()
    );
    assert_eq!(vcs.head().await.unwrap(), head);
    assert!(vcs.status().await.unwrap().is_clean());
    assert_eq!(
        std::fs::read_to_string(vcs.root().join("src/lib.rs")).unwrap(),
        "pub fn f()->u32{1}\n"
    );

    let (_dir, vcs) = repo();
    let agent = FakeAgent::new("fmt").otherwise(costly_edit(0.20));
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |c| {
        c.iteration_limits = limits;
    })
    .await;
    assert!(matches!(r.outcome.unwrap(), AutofixOutcome::Green { commits } if commits.len() == 1));
}

/// An agent that stopped at the iteration's limit itself (claude's
/// `--max-budget-usd`, the tool agent's token count) answers
/// [`AgentError::CallLimit`]: the iteration escalates with it named; the
/// run's limits are untouched, so this is no resumable stop.
#[tokio::test]
async fn an_agent_stopped_at_the_iterations_limit_escalates_with_it_named() {
    let (_dir, vcs) = repo();
    let head = vcs.head().await.unwrap();
    let stopped = orchestrator_core::agent::AgentError::CallLimit {
        message: "claude stopped at the call's limit of $0.0010".into(),
    };
    let agent = FakeAgent::new("x").otherwise(Reply::Fail(stopped));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![], ci, "Lint", |_| {}).await;
    let outcome = r.outcome.unwrap();
    assert_eq!(outcome.exit_code(), 3);
    let AutofixOutcome::Escalated { reason, .. } = outcome else {
        panic!("not escalated")
    };
    assert!(
        reason.contains(
            "the iteration's limit was reached: claude stopped at the call's limit of $0.0010"
        ),
        "{reason}"
    );
    assert_eq!(vcs.head().await.unwrap(), head);
    assert!(vcs.status().await.unwrap().is_clean());
}

#[tokio::test]
async fn iteration_two_trivial_is_applied_silently() {
    let (dir, vcs) = repo();
    let agent = FakeAgent::new("fmt")
        .on(
            "ci-autofix.fix.iter-1",
            edit("src/lib.rs", "pub fn f() -> u32 { 1 }\n"),
        )
        .on(
            "ci-autofix.fix.iter-2",
            edit("src/lib.rs", "pub fn f() -> u32 {\n    1\n}\n"),
        );
    let ci = ScriptedCi::new(
        vec![failed("Lint"), CheckRun::Green],
        &[("Lint", FMT_LOG)],
        false,
    );
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |_| {}).await;
    let AutofixOutcome::Green { commits } = r.outcome.unwrap() else {
        panic!("not green")
    };
    assert_eq!(commits.len(), 2);
    assert_eq!(r.gate.asked().len(), 1, "only iteration 1 asks");
    assert_eq!(
        vcs.remote_branch("origin", "main"),
        None,
        "local provider without push"
    );
    let audit = audit(dir.path());
    assert!(audit.contains("## Iteration 2\n\n- **classification**: mechanical\n- **sub_class**: trivial\n- **action**: applied (silent)\n"));
}

#[tokio::test]
async fn semantic_failure_escalates_with_a_diagnosis_and_no_patch() {
    let (dir, vcs) = repo();
    let head = vcs.head().await.unwrap();
    let agent = FakeAgent::new("x")
        .on(
            "ci-autofix.diagnose.iter-1",
            Reply::text("`add` subtracts."),
        )
        .otherwise(edit("src/lib.rs", "changed\n"));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Test", TEST_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Test", |_| {}).await;
    assert_eq!(r.outcome_code(), 3);
    let AutofixOutcome::Escalated {
        action,
        report,
        choice,
        ..
    } = r.outcome.unwrap()
    else {
        panic!("not escalated")
    };
    assert_eq!(action, Action::EscalateNoPatch);
    assert!(report.contains("## Diagnosis\n\n`add` subtracts."));
    assert_eq!(choice.as_deref(), Some("Fix it by hand (recommended)"));
    assert!(r.agent.calls().iter().all(|c| c.role == Role::Diagnose));
    assert_eq!(vcs.head().await.unwrap(), head, "no commit");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        "pub fn f()->u32{1}\n"
    );
}

impl Run {
    fn outcome_code(&self) -> i32 {
        self.outcome.as_ref().map_or(-1, AutofixOutcome::exit_code)
    }
}

#[tokio::test]
async fn unknown_twice_in_a_row_is_a_manual_takeover() {
    let (dir, vcs) = repo();
    let ci: Arc<ScriptedCi> = ScriptedCi::new(vec![CheckRun::Green], &[("Build", ODD_LOG)], true);
    let first = run(
        &vcs,
        FakeAgent::new("x").otherwise(Reply::text("no idea")),
        vec![Answer::chose(0)],
        ci.clone(),
        "Build",
        |_| {},
    )
    .await;
    let AutofixOutcome::Escalated { action, .. } = first.outcome.unwrap() else {
        panic!()
    };
    assert_eq!(action, Action::EscalateNoPatch);
    // The state survives the escalation: a re-run sees the previous unknown.
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join(".moai/state/ci-autofix-785.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["last_classification"], "unknown");
    let second = run(&vcs, FakeAgent::new("x"), vec![], ci, "Build", |_| {}).await;
    let AutofixOutcome::Escalated {
        action,
        reason,
        choice,
        ..
    } = second.outcome.unwrap()
    else {
        panic!()
    };
    assert_eq!(action, Action::ManualTakeover);
    assert!(reason.contains("classifier cannot interpret"));
    assert_eq!(choice, None);
    assert!(second.gate.asked()[0].blocking);
}

#[tokio::test]
async fn still_failing_after_iteration_three_is_a_blocking_escalation() {
    let (_dir, vcs) = repo();
    let start = vcs.head().await.unwrap();
    let agent = FakeAgent::new("fmt")
        .on("ci-autofix.fix.iter-1", edit("src/lib.rs", "a\n"))
        .on("ci-autofix.fix.iter-2", edit("src/lib.rs", "b\n"))
        .on("ci-autofix.fix.iter-3", edit("src/lib.rs", "c\n"));
    let ci = ScriptedCi::new(vec![failed("Lint")], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |_| {}).await;
    let AutofixOutcome::Escalated {
        action,
        choice,
        report,
        ..
    } = r.outcome.unwrap()
    else {
        panic!()
    };
    assert_eq!(action, Action::MandatoryBlockingEscalation);
    assert_eq!(choice, None, "a blocking question is never auto-answered");
    let asked = r.gate.asked();
    assert_eq!(
        asked.len(),
        2,
        "iteration 1 confirm + the blocking escalation"
    );
    assert!(asked[1].blocking);
    assert_eq!(asked[1].label(0), Some("Fix it by hand (recommended)"));
    assert!(report.contains("| 3 | mechanical | trivial | applied (silent) |"));
    assert_eq!(
        r.agent
            .calls()
            .iter()
            .filter(|c| c.role == Role::Fix)
            .count(),
        3
    );
    let messages: Vec<String> = vcs
        .log_since(&start)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.message)
        .collect();
    assert_eq!(
        messages,
        (1..=3)
            .map(|i| format!("fix(ci): auto-fix mechanical failure (iter {i})"))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_patch_touching_a_protected_path_is_discarded_and_escalated() {
    let (dir, vcs) = repo();
    let head = vcs.head().await.unwrap();
    let agent = FakeAgent::new("x").otherwise(Reply::Edit {
        files: vec![
            ("src/lib.rs".into(), Some("fixed\n".into())),
            (".github/workflows/ci.yml".into(), Some("on: push\n".into())),
        ],
        response: AgentResponse::text("done"),
    });
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |_| {}).await;
    let AutofixOutcome::Escalated { reason, .. } = r.outcome.unwrap() else {
        panic!()
    };
    assert!(
        reason.contains("protected paths (.github/workflows/ci.yml)"),
        "{reason}"
    );
    assert_eq!(vcs.head().await.unwrap(), head);
    assert!(!dir.path().join(".github/workflows/ci.yml").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        "pub fn f()->u32{1}\n"
    );
}

#[tokio::test]
async fn a_rejected_patch_is_restored_and_escalated() {
    let (dir, vcs) = repo();
    let agent = FakeAgent::new("x").otherwise(edit("src/lib.rs", "fixed\n"));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(1)], ci, "Lint", |_| {}).await;
    let AutofixOutcome::Escalated { reason, .. } = r.outcome.unwrap() else {
        panic!()
    };
    assert_eq!(reason, "the user rejected the patch");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        "pub fn f()->u32{1}\n"
    );
}

#[tokio::test]
async fn a_dirty_tree_is_refused_unless_allowed_and_then_left_alone() {
    let (dir, vcs) = repo();
    std::fs::write(dir.path().join("notes.txt"), "mine\n").unwrap();
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(
        &vcs,
        FakeAgent::new("x"),
        vec![],
        ci.clone(),
        "Lint",
        |_| {},
    )
    .await;
    let err = r.outcome.unwrap_err();
    assert_eq!(
        err.to_string(),
        "working tree is dirty (notes.txt); commit or stash them, or pass --allow-dirty"
    );
    let agent = FakeAgent::new("x").otherwise(edit("src/lib.rs", "fixed\n"));
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |c| {
        c.allow_dirty = true
    })
    .await;
    assert!(matches!(r.outcome.unwrap(), AutofixOutcome::Green { .. }));
    assert_eq!(vcs.status().await.unwrap().dirty_paths(), ["notes.txt"]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "mine\n"
    );
}

#[tokio::test]
async fn local_mode_runs_the_checks_and_commits_without_pushing() {
    let (dir, vcs) = repo();
    let commands = Arc::new(
        ScriptedCommands::new()
            .on("cargo fmt --check", 1, FMT_LOG)
            .on("cargo fmt --check", 0, ""),
    );
    let provider = Arc::new(LocalProvider::new(
        commands.clone(),
        dir.path(),
        LocalConfig {
            checks: vec!["cargo fmt --check".into()],
            base: None,
            push: false,
            time_limit: None,
        },
    ));
    let agent =
        FakeAgent::new("fmt").otherwise(edit("src/lib.rs", "pub fn f() -> u32 {\n    1\n}\n"));
    let r = run(
        &vcs,
        agent,
        vec![Answer::chose(0)],
        provider,
        "unused",
        |c| {
            c.target = Target::Local {
                branch: "main".into(),
            };
            c.initial_failures = None;
        },
    )
    .await;
    let AutofixOutcome::Green { commits } = r.outcome.unwrap() else {
        panic!()
    };
    assert_eq!(commits.len(), 1);
    let checks_run = commands
        .calls()
        .iter()
        .filter(|c| c.program == "sh")
        .count();
    assert_eq!(checks_run, 2);
    assert_eq!(vcs.remote_branch("origin", "main"), None);
    assert!(
        dir.path()
            .join(".moai/reports/ci-autofix/local-main-2026-05-07.md")
            .exists()
    );
    assert_eq!(
        commit_message(Classification::Mechanical(SubClass::Trivial), 1),
        "fix(ci): auto-fix mechanical failure (iter 1)"
    );
}

/// In local mode the agent sees the working change (`git diff` against the
/// merge base with the upstream, or with `--base`), and from the second
/// iteration on every earlier iteration's patch with the checks after it.
#[tokio::test]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
async fn local_mode_gives_the_agent_the_working_change_and_the_earlier_patches() {
    const WORKING: &str = "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -0,0 +1 @@\n+pub fn f()->u32{1}\n";
    let (dir, vcs) = repo();
    let commands = Arc::new(
        ScriptedCommands::new()
            .on("cargo fmt --check", 1, FMT_LOG)
            .on("cargo fmt --check", 1, FMT_LOG)
            .on("cargo fmt --check", 0, ""),
    );
    // The working change comes through the (guarded) Vcs, never a git
    // process of the provider's own.
    vcs.script_base(Some("origin/main"), &[("origin/main", WORKING)]);
    let provider = Arc::new(
        LocalProvider::new(
            commands.clone(),
            dir.path(),
            LocalConfig {
                checks: vec!["cargo fmt --check".into()],
                base: None,
                push: false,
                time_limit: None,
            },
        )
        .with_vcs(vcs.clone()),
    );
    let agent = FakeAgent::new("fmt")
        .on(
            "ci-autofix.fix.iter-1",
            edit("src/lib.rs", "pub fn f() -> u32 {1}\n"),
        )
        .on(
            "ci-autofix.fix.iter-2",
            edit("src/lib.rs", "pub fn f() -> u32 {\n    1\n}\n"),
        );
    let r = run(
        &vcs,
        agent,
        vec![Answer::chose(0)],
        provider,
        "unused",
        |c| {
            c.target = Target::Local {
                branch: "main".into(),
            };
            c.initial_failures = None;
        },
    )
    .await;
    let AutofixOutcome::Green { commits } = r.outcome.unwrap() else {
        panic!("not green")
    };
    assert_eq!(commits.len(), 2);
    let prompts: Vec<String> = r
        .agent
        .calls()
        .iter()
        .map(|c| c.instruction.clone())
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:#?}");
    for p in &prompts {
        assert!(
            p.contains("+pub fn f()->u32{1}\n```"),
            "the working change:\n{p}"
        );
    }
    assert!(!prompts[0].contains("Earlier iterations"), "{}", prompts[0]);
    let short = &commits[0][..7];
    let earlier = prompts[1]
        .split("**Earlier iterations of this run**")
        .nth(1)
        .unwrap_or_else(|| panic!("no earlier iterations in:\n{}", prompts[1]));
    let expect_head = format!(
        " (each patch is committed; the checks did not pass after it):\n\n\
         ### Iteration 1 (mechanical/trivial), commit {short}\n\
         Checks after it: still failing: cargo fmt --check\n\
         ```diff\n\
         diff --git a/src/lib.rs b/src/lib.rs\n"
    );
    assert!(earlier.starts_with(&expect_head), "{earlier}");
    for line in ["-pub fn f()->u32{1}", "+pub fn f() -> u32 {1}"] {
        assert!(earlier.lines().any(|l| l == line), "{line} in:\n{earlier}");
    }

    // `--base` replaces the upstream; no upstream and no --base is an
    // error that says what to pass (the loop makes it a warning).
    let with_base = LocalProvider::new(
        commands.clone(),
        dir.path(),
        LocalConfig {
            base: Some("release".into()),
            ..LocalConfig::default()
        },
    )
    .with_vcs(vcs.clone());
    let err = with_base.diff().await.unwrap_err();
    assert!(
        err.to_string().contains("git diff against release")
            && err.to_string().contains("unknown base `release`"),
        "the diff is taken against release: {err}"
    );
    vcs.script_base(None, &[]);
    let p = LocalProvider::new(commands.clone(), dir.path(), LocalConfig::default())
        .with_vcs(vcs.clone());
    assert_eq!(
        p.diff().await.unwrap_err().to_string(),
        "no base to diff the working change against: the branch has no upstream (no upstream configured for the branch); pass --base <REF>"
    );
    let bad = LocalProvider::new(
        commands,
        dir.path(),
        LocalConfig {
            base: Some("--output=/tmp/x".into()),
            ..LocalConfig::default()
        },
    );
    assert_eq!(
        bad.diff().await.unwrap_err().to_string(),
        "--base \"--output=/tmp/x\" is not a ref (it starts with `-`)"
    );
}

/// The fix an agent answers as a unified diff instead of editing files.
const FMT_DIFF: &str = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1,3 @@\n-pub fn f()->u32{1}\n+pub fn f() -> u32 {\n+    1\n+}\n";

#[tokio::test]
async fn a_diff_in_the_agents_answer_is_applied_confirmed_and_committed() {
    let (dir, vcs) = repo();
    let start = vcs.head().await.unwrap();
    let answer = format!("The formatter wants this:\n\n```diff\n{FMT_DIFF}```\n");
    let agent = FakeAgent::new("llm").otherwise(Reply::text(answer));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(
        &vcs,
        agent,
        vec![Answer::chose(0)],
        ci.clone(),
        "Lint",
        |_| {},
    )
    .await;
    let AutofixOutcome::Green { commits } = r.outcome.unwrap() else {
        panic!("not green")
    };
    assert_eq!(commits.len(), 1);
    assert_eq!(
        ci.heads(),
        [Some(commits[0].clone())],
        "after the push the checks are waited for at the pushed commit"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        "pub fn f() -> u32 {\n    1\n}\n"
    );
    let asked = r.gate.asked();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0]
            .details
            .as_deref()
            .unwrap()
            .contains("- src/lib.rs"),
        "{:?}",
        asked[0].details
    );
    let log = vcs.log_since(&start).await.unwrap();
    assert_eq!(
        log.iter().map(|c| c.message.as_str()).collect::<Vec<_>>(),
        ["fix(ci): auto-fix mechanical failure (iter 1)"]
    );
    assert!(vcs.status().await.unwrap().is_clean());
    assert!(
        r.agent.calls()[0]
            .instruction
            .contains("or answer with a unified diff")
    );
}

#[tokio::test]
async fn a_diff_that_does_not_apply_escalates_and_writes_nothing() {
    let (dir, vcs) = repo();
    let head = vcs.head().await.unwrap();
    // The second file's hunk does not match: the first must not be written either.
    let diff = format!(
        "{FMT_DIFF}--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1 +1 @@\n-fn main(){{}}\n+fn main() {{}}\n"
    );
    let agent = FakeAgent::new("llm").otherwise(Reply::text(diff));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |_| {}).await;
    let AutofixOutcome::Escalated { action, reason, .. } = r.outcome.unwrap() else {
        panic!("not escalated")
    };
    assert_eq!(action, Action::EscalateNoPatch);
    assert_eq!(
        reason,
        "the agent's diff was not applied: `src/main.rs`: the diff changes it, but it does not exist"
    );
    assert_eq!(vcs.head().await.unwrap(), head);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        "pub fn f()->u32{1}\n"
    );
    assert!(vcs.status().await.unwrap().is_clean());
    assert!(
        audit(dir.path())
            .contains("- **escalation_reason**: the agent's diff was not applied: `src/main.rs`")
    );

    // A diff to a protected path is refused the same way.
    let protected = "```diff\n--- a/.github/workflows/ci.yml\n+++ b/.github/workflows/ci.yml\n@@ -0,0 +1 @@\n+on: push\n```\n";
    let agent = FakeAgent::new("llm").otherwise(Reply::text(protected));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    std::fs::remove_file(dir.path().join(".moai/state/ci-autofix-785.json")).unwrap();
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |_| {}).await;
    let AutofixOutcome::Escalated { reason, .. } = r.outcome.unwrap() else {
        panic!("not escalated")
    };
    assert_eq!(
        reason,
        "the agent's diff was not applied: `.github/workflows/ci.yml` is a protected path; the patch was refused"
    );
    assert!(!dir.path().join(".github").exists());
}

#[tokio::test]
async fn the_pr_diff_is_fetched_once_per_iteration_and_capped_in_the_instruction() {
    let (_dir, vcs) = repo();
    let agent = FakeAgent::new("fmt")
        .on(
            "ci-autofix.fix.iter-1",
            edit("src/lib.rs", "pub fn f() -> u32 { 1 }\n"),
        )
        .on(
            "ci-autofix.fix.iter-2",
            edit("src/lib.rs", "pub fn f() -> u32 {\n    1\n}\n"),
        );
    let mut big = String::from(
        "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2000 +1,2000 @@\n",
    );
    while big.len() < DIFF_CAP + 5_000 {
        big.push_str("+a line of the change under test\n");
    }
    big.push_str("+THE LAST LINE\n");
    let mut ci = ScriptedCi::build(
        vec![failed("Lint"), CheckRun::Green],
        &[("Lint", FMT_LOG)],
        true,
    );
    ci.diff = Ok(big.clone());
    let ci = Arc::new(ci);
    let r = run(
        &vcs,
        agent,
        vec![Answer::chose(0)],
        ci.clone(),
        "Lint",
        |_| {},
    )
    .await;
    assert!(matches!(r.outcome.unwrap(), AutofixOutcome::Green { .. }));
    assert_eq!(ci.diff_calls(), 2, "one fetch per iteration");
    let calls = r.agent.calls();
    assert_eq!(calls.len(), 2);
    for call in &calls {
        let text = &call.instruction;
        assert!(text.contains(
            "**PR diff (the change under test):**\n```diff\ndiff --git a/src/lib.rs b/src/lib.rs\n"
        ));
        assert!(!text.contains("THE LAST LINE"), "the diff is capped");
        assert!(text.contains(&format!(
            "[… PR diff truncated: the first {} of {} bytes are shown]",
            cap_diff(&big, DIFF_CAP).split("[…").next().unwrap().len(),
            big.len()
        )));
        assert!(
            text.contains("Diff in /w/src/lib.rs:1:"),
            "the log is there too"
        );
    }
    assert!(
        r.sink
            .events()
            .iter()
            .all(|e| !matches!(e, Event::Warning { .. }))
    );
}

#[tokio::test]
async fn a_failed_diff_fetch_is_a_warning_and_a_failed_log_fetch_an_error() {
    let (dir, vcs) = repo();
    let agent =
        FakeAgent::new("fmt").otherwise(edit("src/lib.rs", "pub fn f() -> u32 {\n    1\n}\n"));
    let mut ci = ScriptedCi::build(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    ci.diff = Err(gh_failure("gh pr diff 785"));
    let r = run(
        &vcs,
        agent,
        vec![Answer::chose(0)],
        Arc::new(ci),
        "Lint",
        |_| {},
    )
    .await;
    assert!(matches!(r.outcome.unwrap(), AutofixOutcome::Green { .. }));
    let expected = "could not fetch the PR diff (going on without it): `gh pr diff 785` failed with exit status 1: HTTP 502: Bad Gateway";
    let warnings: Vec<String> = r
        .sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Warning { message } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(warnings, [expected]);
    assert!(
        audit(dir.path()).contains(&format!("- **warning**: {expected}\n")),
        "{}",
        audit(dir.path())
    );
    assert!(!r.agent.calls()[0].instruction.contains("**PR diff"));

    let (_dir, vcs) = repo();
    let mut ci = ScriptedCi::build(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    ci.logs_fail = true;
    let ci = Arc::new(ci);
    let r = run(
        &vcs,
        FakeAgent::new("x"),
        vec![],
        ci.clone(),
        "Lint",
        |_| {},
    )
    .await;
    let err = r.outcome.unwrap_err();
    assert!(matches!(err, AutofixError::Provider(_)));
    assert_eq!(
        err.to_string(),
        "ci: `gh run view 1 --log-failed` failed with exit status 1: HTTP 502: Bad Gateway"
    );
    assert!(r.agent.calls().is_empty());
    assert_eq!(ci.diff_calls(), 0);
}

// ------------------------------------------------------------ dirty trees

const OTHER_AT_HEAD: &str = "pub fn two() -> u32 {\n    2\n}\n";
/// The user's uncommitted edit of `src/other.rs` (badly formatted, too).
const OTHER_DIRTY: &str = "pub fn two()->u32{2}\n// work in progress, not committed\n";
const FIXED_LIB: &str = "pub fn f() -> u32 {\n    1\n}\n";

/// `repo()` plus committed `src/other.rs` and `src/old.rs`; then the user
/// edits `src/other.rs` and adds an untracked `notes.txt`.
fn dirty_repo() -> (tempfile::TempDir, Arc<FakeVcs>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "pub fn f()->u32{1}\n").unwrap();
    std::fs::write(dir.path().join("src/other.rs"), OTHER_AT_HEAD).unwrap();
    std::fs::write(dir.path().join("src/old.rs"), "// unused\n").unwrap();
    let vcs = Arc::new(FakeVcs::init(dir.path()).unwrap());
    std::fs::write(dir.path().join("src/other.rs"), OTHER_DIRTY).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "my notes\n").unwrap();
    (dir, vcs)
}

/// The user's uncommitted files are byte-identical and still uncommitted.
async fn assert_dirty_files_untouched(dir: &Path, vcs: &FakeVcs) {
    assert_eq!(
        std::fs::read(dir.join("src/other.rs")).unwrap(),
        OTHER_DIRTY.as_bytes()
    );
    assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"my notes\n");
    assert_eq!(
        vcs.status().await.unwrap().dirty_paths(),
        ["notes.txt", "src/other.rs"]
    );
}

/// The fix agent ran in a temporary worktree outside the repository, and
/// that worktree, its directory and its branch are gone.
async fn assert_fix_ran_in_a_removed_worktree(root: &Path, vcs: &FakeVcs, agent: &FakeAgent) {
    let calls = agent.calls();
    let fix = calls.iter().find(|c| c.role == Role::Fix).unwrap();
    let workdir = &fix.workdir;
    assert!(!workdir.starts_with(root), "{}", workdir.display());
    assert!(!workdir.exists(), "{} is left", workdir.display());
    assert!(!workdir.parent().unwrap().exists(), "its temp dir is left");
    // The branch is named after the worktree's temporary directory and its
    // slot; a branch of that name can be created again, so it was deleted.
    let branch = format!(
        "{}-{}",
        workdir
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap(),
        workdir.file_name().unwrap().to_str().unwrap()
    );
    assert!(branch.starts_with("ci-autofix-"), "{branch}");
    let branch = branch.as_str();
    let probe = tempfile::tempdir().unwrap();
    let path = probe.path().join("probe");
    let head = vcs.head().await.unwrap();
    vcs.worktree_add(&path, branch, &head).await.unwrap();
    vcs.worktree_remove(&path, branch).await.unwrap();
}

#[tokio::test]
async fn in_a_dirty_tree_a_patch_that_rewrites_a_dirty_file_escalates_and_changes_nothing() {
    let (dir, vcs) = dirty_repo();
    let head = vcs.head().await.unwrap();
    // Like `cargo fmt --all`: the agent rewrites every file, the user's too.
    let agent = FakeAgent::new("fmt").otherwise(Reply::Edit {
        files: vec![
            ("src/lib.rs".into(), Some(FIXED_LIB.into())),
            (
                "src/other.rs".into(),
                Some("pub fn two() -> u32 { 2 }\n".into()),
            ),
        ],
        response: AgentResponse::text("formatted"),
    });
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |c| {
        c.allow_dirty = true
    })
    .await;
    let AutofixOutcome::Escalated { action, reason, .. } = r.outcome.unwrap() else {
        panic!("not escalated")
    };
    assert_eq!(action, Action::EscalateNoPatch);
    assert_eq!(
        reason,
        "the patch changes src/other.rs, which has uncommitted changes in your working tree; \
         nothing was applied and your files were left as they are"
    );
    let asked: Vec<String> = r.gate.asked().into_iter().map(|q| q.id).collect();
    assert_eq!(asked, ["ci-autofix.escalate-no-patch"], "no patch offered");
    assert_eq!(vcs.head().await.unwrap(), head, "nothing committed");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        "pub fn f()->u32{1}\n",
        "the clean file is not half-applied either"
    );
    assert_dirty_files_untouched(dir.path(), &vcs).await;
    assert_fix_ran_in_a_removed_worktree(dir.path(), &vcs, &r.agent).await;
    assert!(audit(dir.path()).contains("- **escalation_reason**: the patch changes src/other.rs"));
}

#[tokio::test]
async fn in_a_dirty_tree_a_patch_of_clean_files_is_copied_over_and_committed_alone() {
    let (dir, vcs) = dirty_repo();
    let start = vcs.head().await.unwrap();
    // A change, a deletion and a new file, all clean in the user's tree.
    let agent = FakeAgent::new("fmt").otherwise(Reply::Edit {
        files: vec![
            ("src/lib.rs".into(), Some(FIXED_LIB.into())),
            ("src/old.rs".into(), None),
            (
                "src/new.rs".into(),
                Some("pub fn three() -> u32 {\n    3\n}\n".into()),
            ),
        ],
        response: AgentResponse::text("formatted"),
    });
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |c| {
        c.allow_dirty = true
    })
    .await;
    let AutofixOutcome::Green { commits } = r.outcome.unwrap() else {
        panic!("not green")
    };
    assert_eq!(commits.len(), 1);
    let asked = r.gate.asked();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0]
            .details
            .as_deref()
            .unwrap()
            .starts_with("Files changed:\n- src/lib.rs\n- src/new.rs\n- src/old.rs\n"),
        "{:?}",
        asked[0].details
    );
    let root = dir.path();
    assert_eq!(
        std::fs::read_to_string(root.join("src/lib.rs")).unwrap(),
        FIXED_LIB
    );
    assert!(!root.join("src/old.rs").exists());
    assert!(root.join("src/new.rs").is_file());
    // Committed: the three files are clean now; the user's files are not.
    assert_dirty_files_untouched(root, &vcs).await;
    let log = vcs.log_since(&start).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(
        log[0].message,
        "fix(ci): auto-fix mechanical failure (iter 1)"
    );
    assert_fix_ran_in_a_removed_worktree(root, &vcs, &r.agent).await;
}

#[tokio::test]
async fn in_a_dirty_tree_an_agents_diff_is_applied_in_the_worktree() {
    let (dir, vcs) = dirty_repo();
    let head = vcs.head().await.unwrap();
    // The diff is made against HEAD (the worktree), where other.rs is clean
    // and formatted; it still touches the user's dirty file.
    let to_other = "```diff\n--- a/src/other.rs\n+++ b/src/other.rs\n@@ -1,3 +1 @@\n-pub fn two() -> u32 {\n-    2\n-}\n+pub fn two() -> u32 { 2 }\n```\n";
    let agent = FakeAgent::new("llm").otherwise(Reply::text(to_other));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |c| {
        c.allow_dirty = true
    })
    .await;
    let AutofixOutcome::Escalated { reason, .. } = r.outcome.unwrap() else {
        panic!("not escalated")
    };
    assert!(
        reason.starts_with("the patch changes src/other.rs, which has uncommitted changes"),
        "{reason}"
    );
    assert_eq!(vcs.head().await.unwrap(), head);
    assert_dirty_files_untouched(dir.path(), &vcs).await;
    assert_fix_ran_in_a_removed_worktree(dir.path(), &vcs, &r.agent).await;

    // A diff of the clean file only lands and is committed.
    std::fs::remove_file(dir.path().join(".moai/state/ci-autofix-785.json")).unwrap();
    let answer = format!("```diff\n{FMT_DIFF}```\n");
    let agent = FakeAgent::new("llm").otherwise(Reply::text(answer));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |c| {
        c.allow_dirty = true
    })
    .await;
    assert!(matches!(r.outcome.unwrap(), AutofixOutcome::Green { .. }));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        FIXED_LIB
    );
    assert_eq!(vcs.log_since(&head).await.unwrap().len(), 1);
    assert_dirty_files_untouched(dir.path(), &vcs).await;
}

#[tokio::test]
async fn in_a_dirty_tree_an_untracked_file_is_never_overwritten() {
    let (dir, vcs) = dirty_repo();
    let agent = FakeAgent::new("x").otherwise(Reply::Edit {
        files: vec![
            ("src/lib.rs".into(), Some(FIXED_LIB.into())),
            ("notes.txt".into(), Some("generated\n".into())),
        ],
        response: AgentResponse::text("done"),
    });
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |c| {
        c.allow_dirty = true
    })
    .await;
    let AutofixOutcome::Escalated { reason, .. } = r.outcome.unwrap() else {
        panic!("not escalated")
    };
    assert!(
        reason.starts_with("the patch changes notes.txt, which has"),
        "{reason}"
    );
    assert_dirty_files_untouched(dir.path(), &vcs).await;
}

#[tokio::test]
async fn in_a_dirty_tree_no_change_at_head_says_the_failure_may_be_the_users() {
    let (dir, vcs) = dirty_repo();
    let agent = FakeAgent::new("fmt").otherwise(Reply::Edit {
        files: vec![],
        response: AgentResponse::text("nothing to format"),
    });
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |c| {
        c.allow_dirty = true
    })
    .await;
    let AutofixOutcome::Escalated { reason, .. } = r.outcome.unwrap() else {
        panic!("not escalated")
    };
    assert_eq!(
        reason,
        "the agent proposed no patch (no file changed, and no unified diff in its answer changed one); \
         it ran on a clean checkout of HEAD, without your uncommitted changes (notes.txt, src/other.rs) \
         — if the failure comes from them, fix it by hand"
    );
    assert_dirty_files_untouched(dir.path(), &vcs).await;
    assert_fix_ran_in_a_removed_worktree(dir.path(), &vcs, &r.agent).await;
}

/// A gate that, while the patch waits for confirmation, lets the user commit
/// (or edit) `src/lib.rs`, then accepts.
#[derive(Debug)]
struct BusyUserGate {
    vcs: Arc<FakeVcs>,
    commit: bool,
}

#[async_trait]
impl orchestrator_core::gate::Gate for BusyUserGate {
    async fn ask(
        &self,
        q: &orchestrator_core::gate::Question,
    ) -> Result<Answer, orchestrator_core::gate::GateError> {
        if q.id == "ci-autofix.apply-patch" {
            std::fs::write(
                self.vcs.root().join("src/lib.rs"),
                "pub fn f() -> u32 { 7 }\n",
            )
            .unwrap();
            if self.commit {
                self.vcs
                    .commit(&["src/lib.rs".into()], "user: f is 7")
                    .await
                    .unwrap();
            }
        }
        Ok(Answer::chose(0))
    }
}

#[tokio::test]
async fn in_a_dirty_tree_a_patch_does_not_land_over_what_the_user_did_meanwhile() {
    for commit in [true, false] {
        let (dir, vcs) = dirty_repo();
        let mut config = AutofixConfig::new(Target::Pr {
            number: 785,
            branch: "main".into(),
            forge: orchestrator_core::forge::ForgeKind::Github,
        });
        config.initial_failures = Some(vec![check("Lint")]);
        config.allow_dirty = true;
        let ctx = AutofixContext {
            vcs: vcs.clone(),
            agent: Arc::new(FakeAgent::new("fmt").otherwise(edit("src/lib.rs", FIXED_LIB))),
            gate: Arc::new(BusyUserGate {
                vcs: vcs.clone(),
                commit,
            }),
            provider: ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true),
            sink: Arc::new(CollectingSink::new()),
            config,
        };
        let AutofixOutcome::Escalated { reason, .. } = run_autofix(ctx).await.unwrap() else {
            panic!("not escalated")
        };
        if commit {
            assert!(
                reason.starts_with("HEAD moved from ")
                    && reason.ends_with(" while the fix was made; the patch was discarded"),
                "{reason}"
            );
        } else {
            assert!(
                reason.starts_with(
                    "the patch changes src/lib.rs, which has uncommitted or staged changes"
                ),
                "{reason}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
            "pub fn f() -> u32 { 7 }\n",
            "the user's version stays"
        );
        assert_eq!(
            std::fs::read(dir.path().join("src/other.rs")).unwrap(),
            OTHER_DIRTY.as_bytes()
        );
    }
}

/// No code path in this crate can pass a force or amend flag to git.
#[test]
fn no_force_push_or_amend_anywhere_in_the_sources() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src];
    let mut scanned = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for needle in [
                    "--force",
                    "\"-f\"",
                    "--force-with-lease",
                    "--amend",
                    "push -f",
                    "reset --hard",
                ] {
                    assert!(
                        !text.contains(needle),
                        "{} contains {needle}",
                        path.display()
                    );
                }
                scanned += 1;
            }
        }
    }
    assert!(scanned >= 8, "scanned only {scanned} files");
}

// ------------------------------------------------- the confirmation gate

fn state_json(root: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(root.join(".moai/state/ci-autofix-785.json")).unwrap(),
    )
    .unwrap()
}

const FORMATTED: &str = "pub fn f() -> u32 {\n    1\n}\n";

/// Without anyone to ask, iteration 1 stops at its gate: the verified
/// patch is a commit on the gate's engine branch (in an engine worktree),
/// the user's tree and HEAD are untouched, nothing is pushed, and the
/// state file holds the gate with its commit, diff and evidence.
async fn stopped_at_the_gate() -> (tempfile::TempDir, Arc<FakeVcs>, serde_json::Value) {
    let (dir, vcs) = repo();
    let head = vcs.head().await.unwrap();
    let agent = FakeAgent::new("fmt").otherwise(edit("src/lib.rs", FORMATTED));
    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(
        &vcs,
        agent,
        vec![Answer::Deferred],
        ci.clone(),
        "Lint",
        |c| {
            c.resume_command = vec!["ci-autofix".into(), "--pr".into(), "785".into()];
        },
    )
    .await;
    assert_eq!(r.outcome_exit_code(), 3);
    let AutofixOutcome::AwaitingConfirmation {
        key,
        iteration,
        commit,
        branch,
        write_set,
    } = r.outcome.unwrap()
    else {
        panic!("not at the gate")
    };
    assert_eq!((key.as_str(), iteration), ("785", 1));
    assert_eq!(branch, "ci-autofix-gate-785");
    assert_eq!(write_set, ["src/lib.rs"]);
    assert_eq!(vcs.head().await.unwrap(), head, "nothing landed");
    assert_eq!(vcs.remote_branch("origin", "main"), None, "nothing pushed");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        "pub fn f()->u32{1}\n"
    );
    assert!(ci.heads().is_empty(), "no checks waited for");
    let state = state_json(dir.path());
    let gate = &state["gate"];
    assert_eq!(gate["commit"], commit);
    assert_eq!(gate["base"], head.as_str());
    assert_eq!(gate["classification"], "mechanical");
    assert_eq!(gate["evidence"][0]["rule"], "rustfmt");
    assert!(
        gate["diff"]
            .as_str()
            .unwrap()
            .contains("+pub fn f() -> u32 {")
    );
    assert_eq!(gate["resume"][1], "--pr");
    assert!(gate["answer"].is_null());
    assert_eq!(
        state["history"],
        serde_json::json!([]),
        "the iteration is open"
    );
    let kept = Path::new(gate["keep_path"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(kept.join("src/lib.rs")).unwrap(),
        FORMATTED,
        "the engine worktree holds the patch"
    );
    assert!(audit(dir.path()).contains("- **action**: waiting for confirmation"));
    (dir, vcs, state)
}

trait ExitCode {
    fn outcome_exit_code(&self) -> i32;
}

impl ExitCode for Run {
    fn outcome_exit_code(&self) -> i32 {
        self.outcome.as_ref().unwrap().exit_code()
    }
}

/// A run killed or stopped at its gate finds it again: asked again, no new
/// agent call; deferred again, it stops there again; confirmed, the kept
/// commit lands and is pushed as a run confirmed on the spot lands it.
#[tokio::test]
async fn a_resumed_run_finds_its_gate_again_and_lands_the_kept_patch_once_confirmed() {
    let (dir, vcs, state) = stopped_at_the_gate().await;
    let ci = || ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let agent = || FakeAgent::new("none");
    let again = run(&vcs, agent(), vec![], ci(), "Lint", |_| {}).await;
    assert!(matches!(
        again.outcome.as_ref().unwrap(),
        AutofixOutcome::AwaitingConfirmation { iteration: 1, .. }
    ));
    assert_eq!(again.agent.calls().len(), 0, "no new patch is asked for");
    assert_eq!(again.gate.asked()[0].id, "ci-autofix.apply-patch");
    assert_eq!(state_json(dir.path())["gate"], state["gate"], "unchanged");

    let ci = ci();
    let r = run(
        &vcs,
        agent(),
        vec![Answer::chose(0)],
        ci.clone(),
        "Lint",
        |_| {},
    )
    .await;
    let AutofixOutcome::Green { commits } = r.outcome.unwrap() else {
        panic!("not green")
    };
    assert_eq!(r.agent.calls().len(), 0);
    let head = vcs.head().await.unwrap();
    assert_eq!(commits, [head.to_string()]);
    assert_eq!(ci.heads(), [Some(head.to_string())]);
    assert_eq!(vcs.remote_branch("origin", "main"), Some(head));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        FORMATTED
    );
    let kept = Path::new(state["gate"]["keep_path"].as_str().unwrap());
    assert!(!kept.exists(), "the engine worktree is removed");
    assert!(audit(dir.path()).contains("- **action**: applied (approved by the run's own gate)"));
}

/// `confirm::answer` records an approval (by whom, from where) that the
/// next run lands without asking; answered twice it says so; the other
/// answer after it is refused.
#[tokio::test]
async fn an_approval_recorded_outside_the_run_lands_on_the_next_run_without_a_question() {
    use orchestrator_ci_autofix::confirm;
    use orchestrator_ci_autofix::{AnsweredBy, GateDecision};
    let (dir, vcs, _) = stopped_at_the_gate().await;
    let now = "2026-05-07T11:00:00Z".parse().unwrap();
    let approve = |by| confirm::answer(vcs.as_ref(), None, GateDecision::Approve, by, "test", now);
    let first = approve(AnsweredBy::Dashboard).await.unwrap();
    assert_eq!((first.key.as_str(), first.already), ("785", false));
    assert!(approve(AnsweredBy::Command).await.unwrap().already);
    let answer = &state_json(dir.path())["gate"]["answer"];
    assert_eq!(
        answer,
        &serde_json::json!({"decision": "approve", "at": "2026-05-07T11:00:00Z",
                            "by": "dashboard", "origin": "test"})
    );
    let refused = confirm::answer(
        vcs.as_ref(),
        Some("ci-autofix-785"),
        GateDecision::Decline,
        AnsweredBy::Command,
        "test",
        now,
    )
    .await
    .unwrap_err();
    assert!(
        refused.to_string().contains("already answered `approve`"),
        "{refused}"
    );

    let ci = ScriptedCi::new(vec![CheckRun::Green], &[("Lint", FMT_LOG)], true);
    let r = run(&vcs, FakeAgent::new("none"), vec![], ci, "Lint", |_| {}).await;
    assert!(matches!(r.outcome.unwrap(), AutofixOutcome::Green { .. }));
    assert!(
        r.gate.asked().is_empty(),
        "the recorded answer is the answer"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        FORMATTED
    );
    assert!(confirm::waiting(dir.path()).is_empty());
}

/// A decline drops the kept commit and escalates the iteration at once;
/// nothing lands, and the next run starts iteration 2 from the checks.
#[tokio::test]
async fn a_declined_patch_is_dropped_and_the_iteration_escalates() {
    use orchestrator_ci_autofix::confirm;
    use orchestrator_ci_autofix::{AnsweredBy, GateDecision};
    let (dir, vcs, state) = stopped_at_the_gate().await;
    let head = vcs.head().await.unwrap();
    let now = "2026-05-07T11:00:00Z".parse().unwrap();
    let declined = confirm::answer(
        vcs.as_ref(),
        Some("785"),
        GateDecision::Decline,
        AnsweredBy::Command,
        "orchestrator ci-autofix decline (test)",
        now,
    )
    .await
    .unwrap();
    assert!(
        declined.message().contains("is declined"),
        "{}",
        declined.message()
    );
    let after = state_json(dir.path());
    assert!(after["gate"].is_null());
    assert_eq!(after["last_action"], "escalate-no-patch");
    assert_eq!(after["history"][0]["action"], "escalated");
    assert_eq!(
        after["history"][0]["escalation_reason"],
        "the patch was declined (orchestrator ci-autofix decline (test))"
    );
    let kept = Path::new(state["gate"]["keep_path"].as_str().unwrap());
    assert!(!kept.exists(), "the kept commit's worktree is gone");
    assert_eq!(vcs.head().await.unwrap(), head);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
        "pub fn f()->u32{1}\n"
    );
    let none = confirm::answer(
        vcs.as_ref(),
        None,
        GateDecision::Approve,
        AnsweredBy::Command,
        "test",
        now,
    )
    .await
    .unwrap_err();
    assert!(
        none.to_string()
            .starts_with("no ci-autofix run waits for confirmation"),
        "{none}"
    );
}
