//! The fix loop with fakes: FakeVcs over a temp dir, FakeAgent editing files,
//! ScriptedGate, and a scripted CI provider.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use orchestrator_ci_autofix::fix_loop::commit_message;
use orchestrator_ci_autofix::provider::{CheckLog, CheckRun, CiProvider, ProviderError};
use orchestrator_ci_autofix::{
    AutofixConfig, AutofixContext, AutofixError, AutofixOutcome, FailedCheck, LocalConfig,
    LocalProvider, Target, run_autofix,
};
use orchestrator_core::agent::{AgentResponse, Role};
use orchestrator_core::cadence::{Action, Classification, SubClass};
use orchestrator_core::event::CollectingSink;
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
}

impl ScriptedCi {
    fn new(runs: Vec<CheckRun>, logs: &[(&str, &str)], pushes: bool) -> Arc<Self> {
        Arc::new(Self {
            runs: Mutex::new(runs.into()),
            logs: logs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            pushes,
        })
    }
}

#[async_trait]
impl CiProvider for ScriptedCi {
    fn pushes(&self) -> bool {
        self.pushes
    }
    async fn wait_for_checks(&self) -> Result<CheckRun, ProviderError> {
        let mut runs = self.runs.lock().unwrap();
        Ok(if runs.len() > 1 {
            runs.pop_front().unwrap()
        } else {
            runs.front().cloned().unwrap_or(CheckRun::Green)
        })
    }
    async fn failed_logs(&self, checks: &[FailedCheck]) -> Result<Vec<CheckLog>, ProviderError> {
        Ok(checks
            .iter()
            .map(|c| CheckLog {
                name: c.name.clone(),
                log: self.logs.get(&c.name).cloned().unwrap_or_default(),
            })
            .collect())
    }
    async fn diff(&self) -> Result<String, ProviderError> {
        Ok(String::new())
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
    });
    config.initial_failures = Some(vec![check(initial)]);
    config.now = Some("2026-05-07T10:00:00Z".parse().unwrap());
    tweak(&mut config);
    let ctx = AutofixContext {
        vcs: vcs.clone(),
        agent: agent.clone(),
        gate: gate.clone(),
        provider: ci,
        sink: Arc::new(CollectingSink::new()),
        config,
    };
    Run {
        outcome: run_autofix(ctx).await,
        gate,
        agent,
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
    let r = run(&vcs, agent, vec![Answer::chose(0)], ci, "Lint", |_| {}).await;
    let AutofixOutcome::Green { commits } = r.outcome.unwrap() else {
        panic!("not green")
    };
    assert_eq!(commits.len(), 1);
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
    assert_eq!(commands.calls().len(), 2);
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
