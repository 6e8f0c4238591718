//! End-to-end tests of the planex flow over fake agents, scripted gates and
//! scripted commands, in temporary repositories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::agent::Agent;
use orchestrator_core::command::CommandOutput;
use orchestrator_core::event::{CollectingSink, Event, EventSink, JobStatus};
use orchestrator_core::fakes::{FakeAgent, Reply, ScriptedCommands, ScriptedGate};
use orchestrator_core::gate::{Answer, AutoYes, Gate};
use orchestrator_planex::protocol::PlanexContext;
use orchestrator_planex::rows::{RowStatus, TaskRow, read_explore_csv, read_tasks_csv};
use orchestrator_planex::session::{SessionStatus, list_sessions};
use orchestrator_planex::{
    Agents, Approved, CancelHandle, EXECUTE_GATE_ID, EXPLORE_GATE_ID, ExecutionPolicy, GatePoint,
    Mode, OutcomeStatus, Planex, PlanexError, PlanexOptions, ShellTaskAgent, Stop, approve_plan,
};
use serde_json::json;

const REQUIREMENT: &str = "Add token auth to the API";

fn options(auto_yes: bool) -> PlanexOptions {
    PlanexOptions::default()
        .with_auto_yes(auto_yes)
        .with_concurrency(4)
        .with_schedule(Mode::Eager)
        .with_planner_time_limit(Duration::from_secs(10))
        .with_explore_time_limit(Duration::from_secs(10))
        .with_task_time_limit(Duration::from_secs(10))
        .with_execution(ExecutionPolicy::agent())
}

fn planex(
    repo: &Path,
    agent: Arc<dyn Agent>,
    gate: Arc<dyn Gate>,
    options: PlanexOptions,
) -> (Planex, Arc<CollectingSink>) {
    let sink = Arc::new(CollectingSink::new());
    let p = Planex::new(repo, Agents::all(agent), gate, sink.clone(), options);
    (p, sink)
}

fn angles() -> Reply {
    Reply::json(json!({
        "type": "feature",
        "complexity": "Medium",
        "angles": [
            {"id": "E1", "angle": "architecture", "description": "Explore codebase architecture for: auth", "focus": "modules, layering"},
            {"id": "E2", "angle": "testing", "description": "Explore test infrastructure for: auth", "focus": "test runner, fixtures"}
        ]
    }))
}

fn explored(id: &str, findings: &str, files: &[&str]) -> Reply {
    Reply::json(
        json!({"id": id, "status": "completed", "findings": findings, "key_files": files, "error": ""}),
    )
}

/// A diamond: T1 → (T2, T3) → T4, plus context links to both explorations.
fn diamond() -> Reply {
    Reply::json(json!({"tasks": [
        {"id": "T1", "title": "Token types", "description": "Define the token types", "test": "Unit test: token parses",
         "acceptance_criteria": "T1 works", "scope": "src/token/**", "hints": "Follow serde patterns || src/lib.rs",
         "execution_directives": "cargo test token", "deps": [], "context_from": ["E1", "E2"]},
        {"id": "T2", "title": "Issue tokens", "description": "Issue tokens on login, \"quoted\", with, commas", "test": "Unit test: login returns token",
         "acceptance_criteria": "T2 works", "scope": "src/issue/**", "hints": "", "execution_directives": "cargo test issue",
         "deps": ["T1"], "context_from": ["E1", "T1"]},
        {"id": "T3", "title": "Check tokens", "description": "Middleware\nover two lines", "test": "Unit test: bad token is 401",
         "acceptance_criteria": "T3 works", "scope": "src/check/**", "hints": "", "execution_directives": "cargo test check",
         "deps": ["T1"], "context_from": ["E2", "T1"]},
        {"id": "T4", "title": "Wire it up", "description": "Wire issue and check into the router", "test": "Integration test: login then call",
         "acceptance_criteria": "T4 works", "scope": "src/router.rs", "hints": "", "execution_directives": "cargo test",
         "deps": ["T2", "T3"], "context_from": ["T2", "T3"]}
    ]}))
}

fn done(id: &str, findings: &str, files: &[&str]) -> Reply {
    Reply::json(json!({
        "id": id, "status": "completed", "findings": findings, "files_modified": files,
        "tests_passed": true, "acceptance_met": format!("{id} works: yes"), "error": "",
        "criteria": [{"criterion": format!("{id} works"), "status": "PASS", "explanation": "verified"}]
    }))
}

fn failed(id: &str, error: &str) -> Reply {
    Reply::json(json!({
        "id": id, "status": "failed", "findings": "could not", "files_modified": [],
        "tests_passed": false, "acceptance_met": "", "error": error
    }))
}

/// A planner + explorer + executor that completes the diamond.
fn happy_agent() -> FakeAgent {
    happy_agent_with(vec![])
}

/// [`happy_agent`] with some ids answering differently.
fn happy_agent_with(overrides: Vec<(&str, Reply)>) -> FakeAgent {
    let defaults = vec![
        ("plan-angles", angles()),
        (
            "E1",
            explored(
                "E1",
                "Handlers live in src/api; a BaseService pattern",
                &["src/api/mod.rs", "src/lib.rs"],
            ),
        ),
        (
            "E2",
            explored(
                "E2",
                "cargo test with fixtures in tests/",
                &["tests/common.rs", "src/lib.rs"],
            ),
        ),
        ("plan-tasks", diamond()),
        (
            "T1",
            done(
                "T1",
                "Token types in src/token/mod.rs",
                &["src/token/mod.rs"],
            ),
        ),
        ("T2", done("T2", "Issuer done", &["src/issue/mod.rs"])),
        ("T3", done("T3", "Checker done", &["src/check/mod.rs"])),
        ("T4", done("T4", "Router wired", &["src/router.rs"])),
    ];
    let mut agent = FakeAgent::new("fake");
    for (id, reply) in defaults {
        let reply = overrides
            .iter()
            .find(|(o, _)| *o == id)
            .map_or(reply, |(_, r)| r.clone());
        agent = agent.on(id, reply);
    }
    agent
}

/// The `prev_context` a task request carried.
fn prev_context_of(agent: &FakeAgent, id: &str) -> String {
    let call = agent
        .calls()
        .into_iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no call for {id}"));
    match serde_json::from_value::<PlanexContext>(call.context).unwrap() {
        PlanexContext::Task { row, .. } => {
            assert!(call.instruction.contains(&row.prev_context));
            row.prev_context
        }
        other => panic!("not a task context: {other:?}"),
    }
}

fn status_of(rows: &[TaskRow], id: &str) -> (RowStatus, String) {
    let r = rows.iter().find(|r| r.id == id).unwrap();
    (r.status, r.error.clone())
}

/// A session file with the volatile parts (paths, session id, time) replaced.
fn redacted(dir: &Path, file: &str) -> String {
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    text.replace(&id, "[session-id]")
        .lines()
        .map(|l| {
            if l.starts_with("**Completed**: ") {
                "**Completed**: [timestamp]".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn job_finished(events: &[Event], id: &str) -> Option<(JobStatus, Option<String>)> {
    events.iter().find_map(|e| match e {
        Event::JobFinished {
            id: i,
            status,
            detail,
        } if i == id => Some((*status, detail.clone())),
        _ => None,
    })
}

fn started_order(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::JobStarted { id, .. } if id.starts_with('T') => Some(id.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
async fn full_flow_runs_a_diamond_and_writes_the_seed_files() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent());
    let (p, sink) = planex(repo.path(), agent.clone(), Arc::new(AutoYes), options(true));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    assert_eq!(outcome.exit_code(), 0);
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    let s = &outcome.summary;
    assert_eq!(
        (
            s.explore_total,
            s.explore_completed,
            s.tasks_total,
            s.completed,
            s.waves
        ),
        (2, 2, 4, 4, 3)
    );
    assert!(
        s.session_id.starts_with("wpp-") && s.session_id.ends_with("-add-token-auth-to-the-api")
    );

    // Context passing, exactly in the seed's format.
    assert_eq!(
        prev_context_of(&agent, "T1"),
        "[Explore architecture] Handlers live in src/api; a BaseService pattern\n  Key files: src/api/mod.rs;src/lib.rs\n[Explore testing] cargo test with fixtures in tests/\n  Key files: tests/common.rs;src/lib.rs"
    );
    assert_eq!(
        prev_context_of(&agent, "T2"),
        "[Explore architecture] Handlers live in src/api; a BaseService pattern\n  Key files: src/api/mod.rs;src/lib.rs\n[Task T1: Token types] Token types in src/token/mod.rs\n  Modified: src/token/mod.rs"
    );
    assert_eq!(
        prev_context_of(&agent, "T4"),
        "[Task T2: Issue tokens] Issuer done\n  Modified: src/issue/mod.rs\n[Task T3: Check tokens] Checker done\n  Modified: src/check/mod.rs"
    );
    // The synthesis named the file both angles found.
    let plan_call = agent
        .calls()
        .into_iter()
        .find(|c| c.id == "plan-tasks")
        .unwrap();
    assert!(
        plan_call.instruction.contains("  src/lib.rs ← E1, E2"),
        "{}",
        plan_call.instruction
    );
    // Every row ran once; the diamond's order held.
    for id in [
        "plan-angles",
        "E1",
        "E2",
        "plan-tasks",
        "T1",
        "T2",
        "T3",
        "T4",
    ] {
        assert_eq!(agent.calls_for(id), 1, "{id}");
    }
    let order = started_order(&sink.events());
    assert_eq!(order.first().map(String::as_str), Some("T1"));
    assert_eq!(order.last().map(String::as_str), Some("T4"));

    // The seed's files; temporary wave CSVs are gone.
    let dir = &s.session_dir;
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ".lock",
            "context.md",
            "discoveries.ndjson",
            "explore.csv",
            "journal.ndjson",
            "results.csv",
            "session.json",
            "spend.json",
            "tasks.csv",
            "timeline.svg",
            "unverified.txt"
        ]
    );
    // Beside them, the picture of the schedule: a bar per row that ran.
    let svg = std::fs::read_to_string(dir.join("timeline.svg")).unwrap();
    for id in ["E1", "E2", "T1", "T2", "T3", "T4"] {
        assert!(
            svg.contains(&format!("<title>{id} ")),
            "no bar for {id}:\n{svg}"
        );
    }
    assert_eq!(svg.matches("<g><title>").count(), 6, "{svg}");
    assert!(
        std::fs::read_to_string(dir.join("context.md"))
            .unwrap()
            .contains("![Timeline of this run](timeline.svg)")
    );
    assert_eq!(
        std::fs::read(dir.join("results.csv")).unwrap(),
        std::fs::read(dir.join("tasks.csv")).unwrap()
    );
    insta::assert_snapshot!("diamond_explore_csv", redacted(dir, "explore.csv"));
    insta::assert_snapshot!("diamond_tasks_csv", redacted(dir, "tasks.csv"));
    insta::assert_snapshot!("diamond_results_csv", redacted(dir, "results.csv"));
    insta::assert_snapshot!("diamond_context_md", redacted(dir, "context.md"));
    insta::assert_snapshot!(
        "diamond_summary",
        outcome
            .summary
            .to_string()
            .replace(&dir.display().to_string(), "[session]")
            .replace(&s.session_id, "[session-id]")
    );

    let phases: Vec<String> = sink
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::PhaseStarted { phase, .. } => Some(phase.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        phases,
        [
            "plan-explore",
            "explore",
            "plan-tasks",
            "execute",
            "aggregate"
        ]
    );
}

#[tokio::test]
async fn waves_mode_keeps_the_seed_barriers() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent());
    let mut o = options(true);
    o.schedule = Mode::Waves;
    let (p, sink) = planex(repo.path(), agent, Arc::new(AutoYes), o);
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    let waves: Vec<(u32, Vec<String>)> = sink
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::WaveStarted { wave, jobs } if jobs.iter().any(|j| j.starts_with('T')) => {
                Some((*wave, jobs.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        waves,
        [
            (1, vec!["T1".to_owned()]),
            (2, vec!["T2".to_owned(), "T3".to_owned()]),
            (3, vec!["T4".to_owned()])
        ]
    );
}

#[tokio::test]
async fn a_failure_skips_hard_dependents_but_not_context_readers() {
    let repo = tempfile::tempdir().unwrap();
    // T5 reads T2's context (order only) and must still run after T2 fails.
    let tasks = Reply::json(json!({"tasks": [
        {"id": "T1", "title": "a", "description": "a", "acceptance_criteria": "T1 works", "deps": [], "context_from": ["E1"]},
        {"id": "T2", "title": "b", "description": "b", "acceptance_criteria": "T2 works", "deps": ["T1"], "context_from": []},
        {"id": "T3", "title": "c", "description": "c", "acceptance_criteria": "T3 works", "deps": ["T2"], "context_from": []},
        {"id": "T4", "title": "d", "description": "d", "acceptance_criteria": "T4 works", "deps": ["T3"], "context_from": []},
        {"id": "T5", "title": "e", "description": "e", "acceptance_criteria": "T5 works", "deps": [], "context_from": ["T2"]}
    ]}));
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("plan-angles", angles())
            .on("E1", explored("E1", "x", &[]))
            .on("E2", explored("E2", "y", &[]))
            .on("plan-tasks", tasks)
            .on("T1", done("T1", "one", &[]))
            .on("T2", failed("T2", "compile error in src/b.rs"))
            .on("T5", done("T5", "five", &[])),
    );
    let (p, sink) = planex(repo.path(), agent.clone(), Arc::new(AutoYes), options(true));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Incomplete);
    assert_eq!(outcome.exit_code(), 1);
    let rows = read_tasks_csv(outcome.summary.session_dir.join("results.csv")).unwrap();
    assert_eq!(status_of(&rows, "T1").0, RowStatus::Completed);
    let (st, err) = status_of(&rows, "T2");
    assert_eq!(st, RowStatus::Failed);
    assert!(err.contains("compile error in src/b.rs"), "{err}");
    for id in ["T3", "T4"] {
        assert_eq!(
            status_of(&rows, id),
            (
                RowStatus::Skipped,
                "Dependency failed or skipped".to_owned()
            )
        );
        assert_eq!(agent.calls_for(id), 0);
    }
    assert_eq!(status_of(&rows, "T5").0, RowStatus::Completed);
    // --max-rounds 2 × 1 attempt, the failure fed back into the second.
    assert_eq!(agent.calls_for("T2"), 2);
    let second = agent
        .calls()
        .into_iter()
        .filter(|c| c.id == "T2")
        .nth(1)
        .unwrap();
    assert!(
        second.instruction.contains("compile error in src/b.rs"),
        "{}",
        second.instruction
    );
    // T5 started only after T2 finished, and saw no context from it.
    let events = sink.events();
    let pos = |f: &dyn Fn(&Event) -> bool| events.iter().position(f).unwrap();
    let t2_done = pos(&|e| matches!(e, Event::JobFinished { id, .. } if id == "T2"));
    let t5_start = pos(&|e| matches!(e, Event::JobStarted { id, .. } if id == "T5"));
    assert!(t2_done < t5_start);
    assert_eq!(
        prev_context_of(&agent, "T5"),
        "No previous context available"
    );
    assert_eq!(
        job_finished(&events, "T4"),
        Some((
            JobStatus::Skipped,
            Some("Dependency failed or skipped".to_owned())
        ))
    );
    let summary = outcome.summary;
    assert_eq!(
        (summary.completed, summary.failed, summary.skipped),
        (2, 1, 2)
    );
}

#[tokio::test]
async fn timed_out_and_unreporting_tasks_fail() {
    let repo = tempfile::tempdir().unwrap();
    let csv = repo.path().join("tasks.csv");
    std::fs::write(
        &csv,
        "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave\n\
         T1,hang,h,,T1 works,,,,,,\nT2,mute,m,,T2 works,,,,,,\nT3,after,a,,T3 works,,,,T1,,\n",
    )
    .unwrap();
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("T1", Reply::Hang)
            .on("T2", Reply::text("I did it, trust me.")),
    );
    let mut o = options(true);
    o.task_time_limit = Duration::from_millis(50);
    let (p, _) = planex(repo.path(), agent.clone(), Arc::new(AutoYes), o);
    let outcome = p.run_tasks_file(&csv).await.unwrap();
    let rows = read_tasks_csv(outcome.summary.session_dir.join("tasks.csv")).unwrap();
    let (st, err) = status_of(&rows, "T1");
    assert_eq!(st, RowStatus::Failed);
    assert!(err.contains("timed out"), "{err}");
    let (st, err) = status_of(&rows, "T2");
    assert_eq!(st, RowStatus::Failed);
    assert!(err.contains("expected a JSON answer"), "{err}");
    assert_eq!(status_of(&rows, "T3").0, RowStatus::Skipped);
    assert_eq!(outcome.exit_code(), 1);
}

#[tokio::test]
async fn gates_approve_modify_cancel() {
    // Approve, then Execute.
    let repo = tempfile::tempdir().unwrap();
    let gate = ScriptedGate::new(vec![Answer::chose(0), Answer::chose(0)]);
    let (p, _) = planex(
        repo.path(),
        Arc::new(happy_agent()),
        gate.clone(),
        options(false),
    );
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    let asked: Vec<String> = gate.asked().iter().map(|q| q.id.clone()).collect();
    assert_eq!(asked, ["planex.explore-plan", "planex.execution-plan"]);
    let details = gate.asked()[0].details.clone().unwrap();
    assert!(
        details.contains("## Exploration Plan (2 angles)"),
        "{details}"
    );
    assert!(
        details.contains("  - [E1] architecture: modules, layering"),
        "{details}"
    );
    assert!(
        gate.asked()[1]
            .prompt
            .contains("Proceed with 4 tasks across 3 waves?")
    );

    // Modify at the first gate: stop with a hint, edit explore.csv, continue.
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent());
    let gate = ScriptedGate::new(vec![Answer::chose(1)]);
    let (p, _) = planex(repo.path(), agent.clone(), gate, options(false));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    let dir = outcome.summary.session_dir.clone();
    assert_eq!(
        outcome.status,
        OutcomeStatus::Stopped(Stop::Modify {
            gate: GatePoint::ExplorePlan,
            file: dir.join("explore.csv")
        })
    );
    assert_eq!(outcome.exit_code(), 3);
    let hint = outcome.resume_hint().unwrap();
    assert!(
        hint.contains("explore.csv") && hint.contains("--continue"),
        "{hint}"
    );
    assert_eq!(agent.calls_for("E1"), 0);
    // The person edits E2's focus.
    let mut rows = read_explore_csv(dir.join("explore.csv")).unwrap();
    rows[1].focus = "fixtures only, \"quoted\", ünïcode".to_owned();
    orchestrator_planex::rows::write_explore_csv(dir.join("explore.csv"), &rows).unwrap();
    // Modify is not an approval: the edited plan is shown at its gate again.
    let gate = ScriptedGate::new(vec![Answer::chose(0), Answer::chose(0)]);
    let (p, _) = planex(repo.path(), agent.clone(), gate.clone(), options(false));
    let outcome = p.resume(None).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    let e2 = agent.calls().into_iter().find(|c| c.id == "E2").unwrap();
    assert!(
        e2.instruction
            .contains("**Focus**: fixtures only, \"quoted\", ünïcode"),
        "{}",
        e2.instruction
    );
    let asked: Vec<String> = gate.asked().iter().map(|q| q.id.clone()).collect();
    assert_eq!(asked, ["planex.explore-plan", "planex.execution-plan"]);
    assert!(
        gate.asked()[0]
            .details
            .as_deref()
            .unwrap_or_default()
            .contains("fixtures only"),
        "the gate shows the edited plan"
    );

    // Cancel at the second gate: nothing executes; the session is not resumable by default.
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent());
    let gate = ScriptedGate::new(vec![Answer::chose(0), Answer::chose(2)]);
    let (p, _) = planex(repo.path(), agent.clone(), gate, options(false));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(
        outcome.status,
        OutcomeStatus::Stopped(Stop::Cancelled {
            gate: GatePoint::ExecutionPlan
        })
    );
    assert_eq!(agent.calls_for("T1"), 0);
    let sessions = list_sessions(repo.path()).unwrap();
    assert_eq!(sessions[0].meta.status, SessionStatus::Cancelled);
    let err = p.resume(None).await.unwrap_err();
    assert!(
        matches!(err, PlanexError::NoSession { ref found, .. } if found.len() == 1),
        "{err}"
    );

    // A gate that cannot answer now defers: stop resumably.
    let repo = tempfile::tempdir().unwrap();
    let gate = ScriptedGate::new(vec![]);
    let (p, _) = planex(repo.path(), Arc::new(happy_agent()), gate, options(false));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(
        outcome.status,
        OutcomeStatus::Stopped(Stop::Deferred {
            gate: GatePoint::ExplorePlan
        })
    );
}

#[tokio::test]
async fn all_explorations_failing_falls_back_to_the_requirement() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("plan-angles", angles())
            .on("E1", Reply::fail("no access"))
            .on("E2", Reply::json(json!({"id": "E2", "status": "failed", "findings": "", "error": "repo too big"})))
            .on("plan-tasks", diamond())
            .otherwise(done("T", "x", &[])),
    );
    let (p, sink) = planex(repo.path(), agent.clone(), Arc::new(AutoYes), options(true));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert!(
        outcome
            .warnings
            .iter()
            .any(|w| w.contains("every exploration failed")),
        "{:?}",
        outcome.warnings
    );
    assert!(sink.events().iter().any(|e| matches!(e, Event::Warning { message } if message.contains("planning from the requirement alone"))));
    let plan_call = agent
        .calls()
        .into_iter()
        .find(|c| c.id == "plan-tasks")
        .unwrap();
    match serde_json::from_value::<PlanexContext>(plan_call.context).unwrap() {
        PlanexContext::PlanTasks {
            without_exploration,
            ..
        } => assert!(without_exploration),
        other => panic!("{other:?}"),
    }
    let explore = read_explore_csv(outcome.summary.session_dir.join("explore.csv")).unwrap();
    assert_eq!(explore[0].status, RowStatus::Failed);
    assert_eq!(explore[0].error, "agent failed: no access");
    assert_eq!(explore[1].error, "repo too big");
    // No exploration findings reach the tasks.
    assert_eq!(
        prev_context_of(&agent, "T1"),
        "No previous context available"
    );
}

#[tokio::test]
async fn an_invalid_planner_answer_is_fed_back_once() {
    let repo = tempfile::tempdir().unwrap();
    let cyclic = Reply::json(json!({"tasks": [
        {"id": "T1", "title": "a", "description": "a", "deps": ["T3"]},
        {"id": "T2", "title": "b", "description": "b", "deps": ["T1"]},
        {"id": "T3", "title": "c", "description": "c", "deps": ["T2"]}
    ]}));
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("plan-angles", angles())
            .on("E1", explored("E1", "x", &[]))
            .on("E2", explored("E2", "y", &[]))
            .on("plan-tasks", cyclic),
    );
    let (p, _) = planex(repo.path(), agent.clone(), Arc::new(AutoYes), options(true));
    let err = p.plan(REQUIREMENT).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid task plan in planner answer: dependency cycle: T1 → T3 → T2 → T1"
    );
    assert_eq!(err.exit_code(), 2);
    assert_eq!(agent.calls_for("plan-tasks"), 2);
    let second = agent
        .calls()
        .into_iter()
        .filter(|c| c.id == "plan-tasks")
        .nth(1)
        .unwrap();
    assert!(
        second
            .instruction
            .contains("Your previous answer was rejected: dependency cycle")
    );
}

#[tokio::test]
async fn an_agent_that_cannot_change_files_is_refused_before_any_call() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent().answers_only());
    let (p, _) = planex(repo.path(), agent.clone(), Arc::new(AutoYes), options(true));
    let err = p.plan(REQUIREMENT).await.unwrap_err();
    assert!(
        matches!(&err, PlanexError::AgentCannotChangeFiles { agent } if agent == "fake"),
        "{err}"
    );
    assert!(err.to_string().contains("cannot change files"), "{err}");
    assert_eq!(err.exit_code(), 2);
    assert!(agent.calls().is_empty(), "{:?}", agent.calls());
    // No session was created either.
    assert!(!repo.path().join(".workflow").exists());
}

/// An event sink that also forwards to a channel, to watch a run from a test.
#[derive(Debug)]
struct Tap(
    tokio::sync::mpsc::UnboundedSender<Event>,
    Arc<CollectingSink>,
);

impl EventSink for Tap {
    fn emit(&self, event: &Event) {
        self.1.emit(event);
        let _ = self.0.send(event.clone());
    }
}

#[tokio::test]
async fn resume_after_a_crash_never_reruns_finished_rows() {
    let repo = tempfile::tempdir().unwrap();
    // T3 hangs: the run is dropped (like kill -9) once T2 has finished.
    let first = Arc::new(happy_agent_with(vec![
        ("T2", done("T2", "two", &["b.rs"])),
        ("T3", Reply::Hang),
    ]));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sink = Arc::new(Tap(tx, Arc::new(CollectingSink::new())));
    let p = Planex::new(
        repo.path(),
        Agents::all(first.clone()),
        Arc::new(AutoYes),
        sink,
        options(true),
    );
    let mut run = Box::pin(p.plan(REQUIREMENT));
    let mut seen_t2 = false;
    while !seen_t2 {
        tokio::select! {
            outcome = &mut run => panic!("the run ended: {outcome:?}"),
            Some(event) = rx.recv() => {
                seen_t2 = matches!(event, Event::JobFinished { ref id, .. } if id == "T2");
            }
        }
    }
    // While it runs, a second engine is refused.
    let sessions = list_sessions(repo.path()).unwrap();
    let dir = sessions[0].dir.clone();
    let other = planex(
        repo.path(),
        Arc::new(FakeAgent::new("x")),
        Arc::new(AutoYes),
        options(true),
    )
    .0;
    let err = other.resume(None).await.unwrap_err();
    assert!(err.to_string().contains("is locked by pid"), "{err}");
    // The crash: the future is dropped mid-run, no cleanup code runs.
    drop(run);
    // T2 is only in the journal: its wave (with T3) never finished.
    let on_disk = read_tasks_csv(dir.join("tasks.csv")).unwrap();
    assert_eq!(status_of(&on_disk, "T1").0, RowStatus::Completed);
    assert_eq!(status_of(&on_disk, "T2").0, RowStatus::Pending);
    assert!(
        std::fs::read_to_string(dir.join("journal.ndjson"))
            .unwrap()
            .contains("\"id\":\"T2\"")
    );

    // Writes the crash cut short leave temporary files; the resume deletes
    // them all, whichever state file they were for.
    let leftovers = [
        ".results.csv.AbC123.tmp",
        ".task-wave-2.csv.XyZ789.tmp",
        ".context.md.Qq1234.tmp",
    ];
    for name in leftovers {
        std::fs::write(dir.join(name), "cut short").unwrap();
    }

    let second = Arc::new(
        FakeAgent::new("fake2")
            .otherwise(done("T", "later", &[]))
            .on("T3", done("T3", "three", &[]))
            .on("T4", done("T4", "four", &[])),
    );
    let (p2, _) = planex(
        repo.path(),
        second.clone(),
        Arc::new(AutoYes),
        options(true),
    );
    let outcome = p2.resume(None).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    for id in ["plan-angles", "E1", "E2", "plan-tasks", "T1", "T2"] {
        assert_eq!(second.calls_for(id), 0, "{id} was re-run");
    }
    assert_eq!(second.calls_for("T3"), 1);
    assert_eq!(second.calls_for("T4"), 1);
    assert_eq!(
        prev_context_of(&second, "T4"),
        "[Task T2: Issue tokens] two\n  Modified: b.rs\n[Task T3: Check tokens] three"
    );
    assert_eq!(first.calls_for("T1"), 1);
    for name in leftovers {
        assert!(!dir.join(name).exists(), "{name} is left");
    }
}

/// A gate that approves the questions named in `approve` and never answers
/// the others: the person is still reading when the process dies.
#[derive(Debug)]
struct Stalls {
    approve: Vec<&'static str>,
    asked: tokio::sync::mpsc::UnboundedSender<String>,
}

#[async_trait::async_trait]
impl Gate for Stalls {
    async fn ask(
        &self,
        question: &orchestrator_core::gate::Question,
    ) -> Result<Answer, orchestrator_core::gate::GateError> {
        if self.approve.contains(&question.id.as_str()) {
            return Ok(Answer::chose(0));
        }
        let _ = self.asked.send(question.id.clone());
        std::future::pending().await
    }
}

/// Runs `future` until `gate_id` is asked, then drops it (the crash).
async fn crash_at_gate<F: std::future::Future>(
    future: F,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    gate_id: &str,
) where
    F::Output: std::fmt::Debug,
{
    let mut run = Box::pin(future);
    tokio::select! {
        outcome = &mut run => panic!("the run ended before the gate: {outcome:?}"),
        Some(id) = rx.recv() => assert_eq!(id, gate_id),
    }
}

fn approvals(repo: &Path) -> serde_json::Value {
    let dir = list_sessions(repo).unwrap().pop().unwrap().dir;
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("session.json")).unwrap()).unwrap();
    meta["approvals"].clone()
}

/// A gate nobody can answer (no terminal) stops the run with a hint naming
/// both ways to answer it, and an approval recorded outside a run lets the
/// next resume go on without asking, one gate at a time.
#[tokio::test]
async fn a_deferred_gate_says_how_to_answer_and_an_approval_lets_resume_proceed() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent());
    let gate = ScriptedGate::new(vec![]);
    let (p, _) = planex(repo.path(), agent.clone(), gate.clone(), options(false));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(
        outcome.status,
        OutcomeStatus::Stopped(Stop::Deferred {
            gate: GatePoint::ExplorePlan
        })
    );
    let id = outcome.session_id().to_owned();
    let dir = outcome.summary.session_dir.clone();
    assert_eq!(
        outcome.resume_hint().unwrap(),
        format!(
            "Waiting for approval of the exploration plan ({}); nobody could be asked here (no terminal).\n\
             Approve it: orchestrator planex approve {id}\n\
             Then run it: orchestrator planex --continue {id}\n\
             Or approve every gate as the run goes (-y): orchestrator planex --continue {id} -y",
            dir.join("explore.csv").display()
        )
    );
    drop(p);

    // The approval runs nothing and names the plan.
    let approved = approve_plan(repo.path(), None).unwrap();
    assert_eq!(
        approved,
        Approved {
            session_id: id.clone(),
            gate: GatePoint::ExplorePlan,
            file: dir.join("explore.csv"),
            already: false,
        }
    );
    assert_eq!(approvals(repo.path())["explore_plan"]["by"], "command");
    assert_eq!(agent.calls_for("E1"), 0);
    assert!(
        approve_plan(repo.path(), Some(id.as_str()))
            .unwrap()
            .already,
        "a second approval changes nothing"
    );

    // Resuming with nobody to answer explores, then stops at the next gate.
    let gate = ScriptedGate::new(vec![]);
    let (p, _) = planex(repo.path(), agent.clone(), gate.clone(), options(false));
    let outcome = p.resume(None).await.unwrap();
    assert_eq!(
        outcome.status,
        OutcomeStatus::Stopped(Stop::Deferred {
            gate: GatePoint::ExecutionPlan
        })
    );
    let asked: Vec<String> = gate.asked().iter().map(|q| q.id.clone()).collect();
    assert_eq!(asked, [EXECUTE_GATE_ID], "the approved gate is not asked");
    assert_eq!((agent.calls_for("E1"), agent.calls_for("T1")), (1, 0));
    drop(p);

    let approved = approve_plan(repo.path(), None).unwrap();
    assert_eq!(
        (approved.gate, approved.file, approved.already),
        (GatePoint::ExecutionPlan, dir.join("tasks.csv"), false)
    );
    let gate = ScriptedGate::new(vec![]);
    let (p, _) = planex(repo.path(), agent.clone(), gate.clone(), options(false));
    let outcome = p.resume(None).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    assert!(gate.asked().is_empty(), "{:?}", gate.asked());
    assert_eq!(agent.calls_for("T4"), 1);
    assert_eq!(approvals(repo.path())["execution_plan"]["by"], "command");

    // Nothing to approve where there is no session.
    let empty = tempfile::tempdir().unwrap();
    let err = approve_plan(empty.path(), None).unwrap_err();
    assert!(matches!(err, PlanexError::NoSession { .. }), "{err}");
}

#[tokio::test]
async fn a_crash_before_a_gate_is_answered_never_runs_the_unapproved_plan() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent());

    // Dies at the exploration gate: explore.csv exists, nobody approved it.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let gate = Arc::new(Stalls {
        approve: vec![],
        asked: tx,
    });
    let (p, _) = planex(repo.path(), agent.clone(), gate, options(false));
    crash_at_gate(p.plan(REQUIREMENT), &mut rx, EXPLORE_GATE_ID).await;
    drop(p);
    assert_eq!(approvals(repo.path()), serde_json::Value::Null);

    // `--continue` with nobody to answer stops at that gate again; nothing is explored.
    let gate = ScriptedGate::new(vec![]);
    let (p, _) = planex(repo.path(), agent.clone(), gate.clone(), options(false));
    let outcome = p.resume(None).await.unwrap();
    assert_eq!(
        outcome.status,
        OutcomeStatus::Stopped(Stop::Deferred {
            gate: GatePoint::ExplorePlan
        })
    );
    assert_eq!(gate.asked()[0].id, EXPLORE_GATE_ID);
    assert_eq!(agent.calls_for("E1"), 0);
    drop(p);

    // Approved this time; dies at the execution gate: tasks.csv exists, unapproved.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let gate = Arc::new(Stalls {
        approve: vec![EXPLORE_GATE_ID],
        asked: tx,
    });
    let (p, _) = planex(repo.path(), agent.clone(), gate, options(false));
    crash_at_gate(p.resume(None), &mut rx, EXECUTE_GATE_ID).await;
    drop(p);
    let a = approvals(repo.path());
    assert_eq!(a["explore_plan"]["by"], "gate");
    assert_eq!(a["execution_plan"], serde_json::Value::Null);
    assert_eq!(
        (agent.calls_for("E1"), agent.calls_for("plan-tasks")),
        (1, 1)
    );

    // `--continue` without -y: the execution gate again, and no task runs.
    let gate = ScriptedGate::new(vec![]);
    let (p, _) = planex(repo.path(), agent.clone(), gate.clone(), options(false));
    let outcome = p.resume(None).await.unwrap();
    assert_eq!(
        outcome.status,
        OutcomeStatus::Stopped(Stop::Deferred {
            gate: GatePoint::ExecutionPlan
        })
    );
    let asked: Vec<String> = gate.asked().iter().map(|q| q.id.clone()).collect();
    assert_eq!(asked, [EXECUTE_GATE_ID]);
    assert_eq!(agent.calls_for("T1"), 0);
    drop(p);

    // `--continue -y` is the approval: it is recorded before anything runs.
    // T3 hangs, and the run dies once T2 has finished.
    let slow = Arc::new(happy_agent_with(vec![("T3", Reply::Hang)]));
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let sink = Arc::new(Tap(tx, Arc::new(CollectingSink::new())));
    let p = Planex::new(
        repo.path(),
        Agents::all(slow.clone()),
        Arc::new(AutoYes),
        sink,
        options(true),
    );
    {
        let mut run = Box::pin(p.resume(None));
        loop {
            tokio::select! {
                outcome = &mut run => panic!("the run ended: {outcome:?}"),
                Some(event) = events.recv() => {
                    if matches!(event, Event::JobFinished { ref id, .. } if id == "T2") {
                        break;
                    }
                }
            }
        }
    }
    drop(p);
    assert_eq!(approvals(repo.path())["execution_plan"]["by"], "auto_yes");
    assert_eq!(slow.calls_for("E1"), 0, "the exploration is not run again");

    // The plan was approved before the crash: resuming without -y and with
    // nobody to answer goes on without asking.
    let gate = ScriptedGate::new(vec![]);
    let (p, _) = planex(repo.path(), agent.clone(), gate.clone(), options(false));
    let outcome = p.resume(None).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    assert!(gate.asked().is_empty(), "{:?}", gate.asked());
    assert_eq!(
        (
            agent.calls_for("T1"),
            agent.calls_for("T2"),
            agent.calls_for("T3")
        ),
        (0, 0, 1)
    );
}

#[tokio::test]
async fn cancellation_interrupts_and_resume_finishes() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent_with(vec![("T3", Reply::Hang)]));
    let cancel = CancelHandle::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sink = Arc::new(Tap(tx, Arc::new(CollectingSink::new())));
    let p = Planex::new(
        repo.path(),
        Agents::all(agent.clone()),
        Arc::new(AutoYes),
        sink,
        options(true),
    )
    .with_cancel(cancel.clone());
    let watcher = tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            if matches!(e, Event::JobFinished { ref id, .. } if id == "T2") {
                cancel.cancel();
            }
        }
    });
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Stopped(Stop::Interrupted));
    assert_eq!(outcome.exit_code(), 3);
    assert_eq!((outcome.summary.completed, outcome.summary.pending), (2, 2));
    drop(p);
    watcher.await.unwrap();
    let rows = read_tasks_csv(outcome.summary.session_dir.join("tasks.csv")).unwrap();
    assert_eq!(status_of(&rows, "T2").0, RowStatus::Completed);
    assert_eq!(status_of(&rows, "T3").0, RowStatus::Pending);
}

/// A run limit of the agent stops the run resumably: the task whose call
/// the budget refused stays pending (it is not failed), the run ends as
/// stopped at the limit with exit 3, and resuming (with a higher limit)
/// runs only that task.
#[tokio::test(start_paused = true)]
async fn a_run_limit_stops_resumably_and_resume_runs_the_rest() {
    let repo = tempfile::tempdir().unwrap();
    let refused = orchestrator_core::agent::AgentError::Budget {
        message: "$0.8000 of $0.5000 spent".into(),
    };
    let agent = Arc::new(happy_agent_with(vec![
        ("T4", Reply::Fail(refused)),
        (
            "T1",
            priced(done("T1", "Token types", &["src/token/mod.rs"]), 0.01),
        ),
    ]));
    let (p, sink) = planex(repo.path(), agent.clone(), Arc::new(AutoYes), options(true));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(
        outcome.status,
        OutcomeStatus::Stopped(Stop::LimitReached {
            limit: "$0.8000 of $0.5000 spent".into()
        })
    );
    assert_eq!(outcome.exit_code(), 3);
    assert_eq!((outcome.summary.completed, outcome.summary.pending), (3, 1));
    assert_eq!(outcome.summary.failed, 0);
    let hint = outcome.resume_hint().unwrap();
    assert!(
        hint.contains("Stopped at the run's limit ($0.8000 of $0.5000 spent)"),
        "{hint}"
    );
    assert!(hint.contains("orchestrator planex --continue"), "{hint}");
    let warned = sink.events().iter().any(|e| {
        matches!(e, Event::Warning { message } if message.starts_with("the run's limit is reached ($0.8000"))
    });
    assert!(warned, "{:?}", sink.events());
    let dir = outcome.summary.session_dir.clone();
    let rows = read_tasks_csv(dir.join("tasks.csv")).unwrap();
    assert_eq!(status_of(&rows, "T3").0, RowStatus::Completed);
    assert_eq!(status_of(&rows, "T4").0, RowStatus::Pending);
    assert!(!dir.join("context.md").exists());

    // Resumed with room to spend: only T4 runs, and the run completes.
    let fresh = Arc::new(happy_agent_with(vec![(
        "T4",
        priced(done("T4", "Router wired", &["src/router.rs"]), 0.02),
    )]));
    let (p, _) = planex(repo.path(), fresh.clone(), Arc::new(AutoYes), options(true));
    let outcome = p.resume(None).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    assert_eq!(
        (
            fresh.calls_for("T1"),
            fresh.calls_for("T3"),
            fresh.calls_for("T4")
        ),
        (0, 0, 1)
    );
    // context.md counts both runs' spend: T1's of the first, T4's of the
    // second (the refused call counted nothing).
    let context = std::fs::read_to_string(dir.join("context.md")).unwrap();
    assert!(context.contains("| T1 | 1 | 240 | $0.0100 |"), "{context}");
    assert!(context.contains("| T4 | 1 | 240 | $0.0200 |"), "{context}");
    assert!(
        context.contains("| **Total** | 8 | 480 | $0.0300 |"),
        "{context}"
    );
    // results.csv carries each task's spend after the seed's columns;
    // tasks.csv keeps the seed's.
    let results = read_tasks_csv(dir.join("results.csv")).unwrap();
    let spend = |id: &str| {
        results
            .iter()
            .find(|r| r.id == id)
            .unwrap()
            .extra
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        spend("T1"),
        "agent_calls=1 agent_tokens=240 agent_cost_usd=0.0100"
    );
    assert_eq!(
        spend("T4"),
        "agent_calls=1 agent_tokens=240 agent_cost_usd=0.0200"
    );
    assert_eq!(
        spend("T3"),
        "agent_calls=1 agent_tokens=0 agent_cost_usd=0.0000"
    );
    let tasks = read_tasks_csv(dir.join("tasks.csv")).unwrap();
    assert!(tasks.iter().all(|r| r.extra.is_empty()));
}

/// A limit reached while the planner decomposes the tasks stops the run
/// before any task, resumably.
#[tokio::test(start_paused = true)]
async fn a_run_limit_in_planning_stops_before_the_tasks() {
    let repo = tempfile::tempdir().unwrap();
    let refused = orchestrator_core::agent::AgentError::Budget {
        message: "9 of 9 agent calls used".into(),
    };
    let agent = Arc::new(happy_agent_with(vec![("plan-tasks", Reply::Fail(refused))]));
    let (p, _) = planex(repo.path(), agent.clone(), Arc::new(AutoYes), options(true));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert!(
        matches!(&outcome.status, OutcomeStatus::Stopped(Stop::LimitReached { limit }) if limit == "9 of 9 agent calls used"),
        "{:?}",
        outcome.status
    );
    assert_eq!(
        agent.calls_for("plan-tasks"),
        1,
        "a refused call is not retried"
    );
    assert_eq!(agent.calls_for("T1"), 0);

    let fresh = Arc::new(happy_agent());
    let (p, _) = planex(repo.path(), fresh.clone(), Arc::new(AutoYes), options(true));
    let outcome = p.resume(None).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    assert_eq!(
        (fresh.calls_for("E1"), fresh.calls_for("plan-tasks")),
        (0, 1)
    );
}

/// `reply` with the usage a priced backend reports: 200 + 40 tokens and
/// `cost` dollars.
fn priced(reply: Reply, cost: f64) -> Reply {
    match reply {
        Reply::Answer(mut response) => {
            response.usage = Some(orchestrator_core::agent::Usage {
                input_tokens: 200,
                output_tokens: 40,
                cost_usd: cost,
                turns: 1,
            });
            Reply::Answer(response)
        }
        other => other,
    }
}

/// What the agent spent on each row and planning step is in context.md,
/// with the total.
#[tokio::test]
async fn context_md_shows_the_spend_per_row() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent_with(vec![
        ("plan-tasks", priced(diamond(), 0.02)),
        (
            "T1",
            priced(done("T1", "Token types", &["src/token/mod.rs"]), 0.01),
        ),
        (
            "T2",
            priced(done("T2", "Issuer done", &["src/issue/mod.rs"]), 0.0125),
        ),
    ]));
    let (p, sink) = planex(repo.path(), agent, Arc::new(AutoYes), options(true));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    // Each call is an event too (`--json`), with the row's total.
    let t1: Vec<(u32, f64)> = sink
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::AgentCall { id, spend, total } if id == "T1" => {
                Some((spend.calls, total.cost_usd))
            }
            _ => None,
        })
        .collect();
    assert_eq!(t1, [(1, 0.01)]);
    let context = std::fs::read_to_string(outcome.summary.session_dir.join("context.md")).unwrap();
    let section = &context[context.find("## Agent spend").expect(&context)..];
    let table = &section[..section.find("\n\n## ").unwrap_or(section.len())];
    insta::assert_snapshot!("diamond_spend_section", table);
}

/// A task's own limit fails that task only: T2's first attempt fails, its
/// retry would be a second call where one is allowed, so T2 fails with the
/// limit named, T4 (after T2) is skipped, and T3 still completes.
#[tokio::test]
async fn a_task_limit_fails_that_task_only() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent_with(vec![(
        "T2",
        failed("T2", "missing import"),
    )]));
    let options = options(true).with_item_limits(orchestrator_core::agent::ItemLimits::new(
        None,
        None,
        Some(1),
    ));
    let (p, _) = planex(repo.path(), agent.clone(), Arc::new(AutoYes), options);
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Incomplete);
    assert_eq!(agent.calls_for("T2"), 1, "the retry was not started");
    let rows = read_tasks_csv(outcome.summary.session_dir.join("tasks.csv")).unwrap();
    let (status, error) = status_of(&rows, "T2");
    assert_eq!(status, RowStatus::Failed);
    assert!(
        error.contains("task T2's limit: 1 of 1 agent calls made"),
        "{error}"
    );
    assert_eq!(status_of(&rows, "T3").0, RowStatus::Completed);
    assert_eq!(status_of(&rows, "T4").0, RowStatus::Skipped);
}

#[tokio::test]
async fn an_escalation_pauses_resumably_and_the_task_resumes_from_its_state() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent_with(vec![(
        "T2",
        failed("T2", "needs a secret"),
    )]));
    // Approve, Execute, then the escalation question: "Resume later".
    let gate = ScriptedGate::new(vec![Answer::chose(0), Answer::chose(0), Answer::chose(0)]);
    let (p, _) = planex(repo.path(), agent.clone(), gate.clone(), options(false));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    match &outcome.status {
        OutcomeStatus::Stopped(Stop::NeedsHuman { tasks }) => assert_eq!(tasks[0].0, "T2"),
        other => panic!("{other:?}"),
    }
    assert_eq!(outcome.exit_code(), 3);
    assert!(gate.asked().iter().any(|q| q.id == "retry.escalation"));
    let dir = outcome.summary.session_dir.clone();
    let rows = read_tasks_csv(dir.join("tasks.csv")).unwrap();
    assert_eq!(status_of(&rows, "T2").0, RowStatus::Pending);
    assert_eq!(status_of(&rows, "T4").0, RowStatus::Pending);
    assert!(!dir.join("context.md").exists());
    let journal = std::fs::read_to_string(dir.join("journal.ndjson")).unwrap();
    assert!(journal.contains("\"kind\":\"paused\""), "{journal}");

    // The human fixed it; the agent now succeeds. Resume runs T2 with its history.
    let fixed = Arc::new(
        FakeAgent::new("fixed")
            .on("T2", done("T2", "two", &[]))
            .on("T4", done("T4", "four", &[])),
    );
    let (p2, _) = planex(repo.path(), fixed.clone(), Arc::new(AutoYes), options(true));
    let outcome = p2.resume(None).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    assert_eq!(fixed.calls_for("T1") + fixed.calls_for("T3"), 0);
    let call = fixed.calls().into_iter().find(|c| c.id == "T2").unwrap();
    assert!(
        call.instruction.contains("Guidance from a human"),
        "{}",
        call.instruction
    );
}

#[tokio::test]
async fn retry_failed_reruns_failed_and_skipped_rows_only() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(
        FakeAgent::new("fake")
            .on("plan-angles", angles())
            .on("E1", explored("E1", "x", &[]))
            .on("E2", explored("E2", "y", &[]))
            .on("plan-tasks", diamond())
            .on("T1", done("T1", "one", &[]))
            .on("T2", failed("T2", "flaky"))
            .on("T3", done("T3", "three", &[])),
    );
    let (p, _) = planex(repo.path(), agent, Arc::new(AutoYes), options(true));
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    assert_eq!((outcome.summary.failed, outcome.summary.skipped), (1, 1));
    let again = Arc::new(
        FakeAgent::new("again")
            .otherwise(done("T", "x", &[]))
            .on("T2", done("T2", "two", &[]))
            .on("T4", done("T4", "four", &[])),
    );
    let (p2, _) = planex(repo.path(), again.clone(), Arc::new(AutoYes), options(true));
    let outcome = p2.retry_failed(Some(outcome.session_id())).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    assert_eq!(again.calls_for("T1") + again.calls_for("T3"), 0);
    assert_eq!(again.calls_for("T2") + again.calls_for("T4"), 2);
}

fn write_csv(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const SHELL_TASKS: &str = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave,notes\n\
T1,build,Build it,,,,,echo build-T1,,,,first\n\
T2,left,Left side,,,,,echo left-T2,T1,T1,,\n\
T3,right,Right side,,,,,echo right-T3,T1,T1,,\n\
T4,join,\"Join, both\",,,,,echo join-T4,T2;T3,T2;T3,,\"last, \"\"quoted\"\"\"\n";

fn shell_planex(repo: &Path, runner: Arc<ScriptedCommands>) -> (Planex, Arc<CollectingSink>) {
    let mut o = options(true);
    o.execution = ExecutionPolicy::shell();
    let agent: Arc<dyn Agent> = Arc::new(ShellTaskAgent::new(runner));
    planex(repo, agent, Arc::new(AutoYes), o)
}

#[tokio::test]
async fn run_executes_a_person_written_csv_with_the_shell_agent() {
    let repo = tempfile::tempdir().unwrap();
    let csv = write_csv(repo.path(), "my-tasks.csv", SHELL_TASKS);
    let runner = Arc::new(
        ScriptedCommands::new()
            .on("echo build-T1", 0, "compiled 3 crates\n")
            .on("echo left-T2", 0, "left ok\n")
            .on("echo right-T3", 0, "right ok\n")
            .on("echo join-T4", 0, "joined\n"),
    );
    let (p, _) = shell_planex(repo.path(), runner.clone());
    let outcome = p.run_tasks_file(&csv).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    assert!(
        outcome.session_id().ends_with("-run-my-tasks-csv"),
        "{}",
        outcome.session_id()
    );
    let calls = runner.calls();
    assert_eq!(calls.len(), 4);
    let t4 = calls.iter().find(|c| c.args[1] == "echo join-T4").unwrap();
    assert_eq!(
        t4.env["ORCH_PREV_CONTEXT"],
        "[Task T2: left] left ok\n[Task T3: right] right ok"
    );
    assert_eq!(t4.env["ORCH_TASK_ID"], "T4");
    assert_eq!(t4.cwd, repo.path());
    let t1 = calls.iter().find(|c| c.args[1] == "echo build-T1").unwrap();
    assert_eq!(t1.env["ORCH_PREV_CONTEXT"], "No previous context available");
    let dir = &outcome.summary.session_dir;
    let rows = read_tasks_csv(dir.join("results.csv")).unwrap();
    assert_eq!(rows[0].findings, "compiled 3 crates");
    assert_eq!(
        rows.iter().map(|r| r.wave.unwrap()).collect::<Vec<_>>(),
        [1, 2, 2, 3]
    );
    // The unknown column survives, quotes and commas included.
    assert_eq!(
        rows[3].extra,
        [("notes".to_owned(), "last, \"quoted\"".to_owned())]
    );
    insta::assert_snapshot!("shell_results_csv", redacted(dir, "results.csv"));
}

#[tokio::test]
async fn shell_failures_cascade_and_run_once() {
    let repo = tempfile::tempdir().unwrap();
    let csv = write_csv(repo.path(), "tasks.csv", SHELL_TASKS);
    let runner = Arc::new(
        ScriptedCommands::new()
            .on("echo build-T1", 0, "ok\n")
            .on_output(
                "echo left-T2",
                Ok(CommandOutput {
                    exit_code: Some(2),
                    stderr: "left broke\n".into(),
                    ..CommandOutput::default()
                }),
            )
            .on("echo right-T3", 0, "right ok\n"),
    );
    let (p, _) = shell_planex(repo.path(), runner.clone());
    let outcome = p.run_tasks_file(&csv).await.unwrap();
    assert_eq!(outcome.exit_code(), 1);
    let rows = read_tasks_csv(outcome.summary.session_dir.join("tasks.csv")).unwrap();
    assert_eq!(
        status_of(&rows, "T2"),
        (RowStatus::Failed, "agent error: agent failed: `echo left-T2` exited with status 2: left broke (escalated: round limit reached)".to_owned())
    );
    assert_eq!(
        status_of(&rows, "T4"),
        (
            RowStatus::Skipped,
            "Dependency failed or skipped".to_owned()
        )
    );
    assert_eq!(
        runner
            .calls()
            .iter()
            .filter(|c| c.args[1] == "echo left-T2")
            .count(),
        1
    );
}

#[tokio::test]
async fn bad_csvs_are_errors_naming_line_and_column() {
    let repo = tempfile::tempdir().unwrap();
    let (p, _) = shell_planex(repo.path(), Arc::new(ScriptedCommands::new()));
    let cases = [
        (
            "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave,status\nT1,a,b,,,,,,,,,\nT2,a,b,,,,,,,,x,\n",
            "line 3 column `wave`: invalid value \"x\"",
        ),
        (
            "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave,status\nT1,a,b,,,,,,,,,done\n",
            "line 2 column `status`: invalid value \"done\"",
        ),
        ("id,title\nT1,a\n", "has no `description` column"),
        (
            "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave\nT1,a,b,,,,,,,,\nT2,a,b,,,,,,T9,,\n",
            "line 3: task \"T2\" depends on unknown task \"T9\"",
        ),
        (
            "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave\nT1,a,\"b,,,,,,,,\n",
            "unbalanced quote",
        ),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let csv = write_csv(repo.path(), &format!("bad{i}.csv"), text);
        let err = p.run_tasks_file(&csv).await.unwrap_err();
        assert!(err.to_string().contains(expected), "case {i}: {err}");
        assert_eq!(err.exit_code(), 2);
    }
    assert!(
        list_sessions(repo.path()).unwrap().is_empty(),
        "no session for bad input"
    );
}

#[tokio::test]
async fn overlapping_scopes_never_run_at_once_and_bad_discoveries_are_counted() {
    let repo = tempfile::tempdir().unwrap();
    let csv = write_csv(
        repo.path(),
        "tasks.csv",
        "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave\n\
         T1,a,a,,,src/a/**,,echo T1,,,\n\
         T2,b,b,,,src/a/x.rs,,echo T2,,,\n\
         T3,c,c,,,src/b/**,,echo T3,,,\n",
    );
    let runner = Arc::new(
        ScriptedCommands::new()
            .on("echo T1", 0, "1")
            .on("echo T2", 0, "2")
            .on("echo T3", 0, "3"),
    );
    let (p, sink) = shell_planex(repo.path(), runner);
    // Run once to get the session folder, then break its discovery board.
    let outcome = p.run_tasks_file(&csv).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    let events = sink.events();
    let pos = |f: &dyn Fn(&Event) -> bool| events.iter().position(f).unwrap();
    let t1_start = pos(&|e| matches!(e, Event::JobStarted { id, .. } if id == "T1"));
    let t1_end = pos(&|e| matches!(e, Event::JobFinished { id, .. } if id == "T1"));
    let t2_start = pos(&|e| matches!(e, Event::JobStarted { id, .. } if id == "T2"));
    let t2_end = pos(&|e| matches!(e, Event::JobFinished { id, .. } if id == "T2"));
    let t3_start = pos(&|e| matches!(e, Event::JobStarted { id, .. } if id == "T3"));
    assert!(t1_end < t2_start || t2_end < t1_start, "{events:?}");
    assert!(
        t3_start < t1_end.max(t2_end),
        "T3 has its own scope: {events:?}"
    );

    let dir = outcome.summary.session_dir.clone();
    std::fs::write(
        dir.join("discoveries.ndjson"),
        "{\"ts\":\"t\",\"worker\":\"T1\",\"type\":\"convention\",\"data\":{}}\nnot json\n{\"ts\":\"t\",\"worker\":\"T2\",\"type\":\"gossip\"}\n",
    )
    .unwrap();
    let outcome = p.resume(Some(outcome.session_id())).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    assert!(
        outcome
            .warnings
            .iter()
            .any(|w| w.contains("skipped 2 malformed lines") && w.contains("(lines 2, 3)")),
        "{:?}",
        outcome.warnings
    );
}

/// A command runner for `sleep <seconds>` lines that sleeps on the tokio
/// clock, so that a paused clock measures makespans exactly.
#[derive(Debug)]
struct VirtualSleep;

#[async_trait::async_trait]
impl orchestrator_core::command::CommandRunner for VirtualSleep {
    async fn run(
        &self,
        spec: orchestrator_core::command::CommandSpec,
    ) -> Result<CommandOutput, orchestrator_core::command::CommandError> {
        let secs: u64 = spec.args[1].trim_start_matches("sleep ").parse().unwrap();
        tokio::time::sleep(Duration::from_secs(secs)).await;
        Ok(CommandOutput {
            exit_code: Some(0),
            ..CommandOutput::default()
        })
    }
}

/// A seeded random DAG of `sleep` tasks: (csv text, durations, deps).
fn sleep_dag(n: usize, seed: u64) -> (String, Vec<u64>, Vec<Vec<usize>>) {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut csv = String::from(
        "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave\n",
    );
    let mut durations = Vec::new();
    let mut deps_of = Vec::new();
    for i in 0..n {
        let secs = 1 + (next() % 30) as u64;
        let mut deps: Vec<usize> = Vec::new();
        if i > 0 {
            for _ in 0..(next() % 3) {
                let d = next() % i;
                if !deps.contains(&d) {
                    deps.push(d);
                }
            }
        }
        let dep_ids: Vec<String> = deps.iter().map(|d| format!("T{}", d + 1)).collect();
        csv.push_str(&format!(
            "T{},t,d,,,,,sleep {secs},{},,\n",
            i + 1,
            dep_ids.join(";")
        ));
        durations.push(secs);
        deps_of.push(deps);
    }
    (csv, durations, deps_of)
}

/// Eager scheduling against the seed's waves on a 40-task DAG at -c 4, on a
/// paused (virtual) clock: eager must beat waves by 20% and stay within 20%
/// of the lower bound max(critical path, total work / 4).
#[tokio::test(start_paused = true)]
async fn eager_beats_waves_on_a_sleep_dag() {
    let repo = tempfile::tempdir().unwrap();
    let mut eager_total = 0.0;
    let mut waves_total = 0.0;
    let mut bound_total = 0.0;
    for seed in [1u64, 2, 3, 4, 5] {
        let (text, durations, deps) = sleep_dag(40, seed);
        let csv = write_csv(repo.path(), &format!("dag{seed}.csv"), &text);
        let mut finish = vec![0u64; durations.len()];
        for i in 0..durations.len() {
            finish[i] = deps[i].iter().map(|&d| finish[d]).max().unwrap_or(0) + durations[i];
        }
        let critical = *finish.iter().max().unwrap() as f64;
        let work = durations.iter().sum::<u64>() as f64 / 4.0;
        let bound = critical.max(work);
        let makespan = |mode: Mode| {
            let csv = csv.clone();
            let repo = repo.path().to_path_buf();
            async move {
                let mut o = options(true);
                o.execution = ExecutionPolicy::shell();
                o.schedule = mode;
                o.task_time_limit = Duration::from_secs(3600);
                let agent: Arc<dyn Agent> = Arc::new(ShellTaskAgent::new(Arc::new(VirtualSleep)));
                let (p, _) = planex(&repo, agent, Arc::new(AutoYes), o);
                let start = tokio::time::Instant::now();
                let outcome = p.run_tasks_file(&csv).await.unwrap();
                assert_eq!(outcome.status, OutcomeStatus::Completed);
                start.elapsed().as_secs_f64()
            }
        };
        let eager = makespan(Mode::Eager).await;
        let waves = makespan(Mode::Waves).await;
        eprintln!("seed {seed}: eager {eager:.0}s, waves {waves:.0}s, lower bound {bound:.0}s");
        eager_total += eager;
        waves_total += waves;
        bound_total += bound;
    }
    let vs_waves = eager_total / waves_total;
    let vs_bound = eager_total / bound_total;
    eprintln!(
        "eager/waves = {vs_waves:.2}, eager/bound = {vs_bound:.2}, waves/bound = {:.2}",
        waves_total / bound_total
    );
    assert!(vs_waves <= 0.8, "eager/waves = {vs_waves:.2}");
    assert!(vs_bound <= 1.2, "eager/bound = {vs_bound:.2}");
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_a_planner_call_stops_resumably() {
    let repo = tempfile::tempdir().unwrap();
    let agent = Arc::new(happy_agent_with(vec![("plan-tasks", Reply::Hang)]));
    let cancel = CancelHandle::new();
    let (p, _) = planex(repo.path(), agent, Arc::new(AutoYes), options(true));
    let p = p.with_cancel(cancel.clone());
    let trigger = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        cancel.cancel();
    });
    let outcome = p.plan(REQUIREMENT).await.unwrap();
    trigger.await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Stopped(Stop::Interrupted));
    // Explorations are done and kept; the resume goes straight to planning.
    let agent = Arc::new(happy_agent());
    let (p, _) = planex(repo.path(), agent.clone(), Arc::new(AutoYes), options(true));
    let outcome = p.resume(None).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);
    assert_eq!(agent.calls_for("E1") + agent.calls_for("E2"), 0);
    assert_eq!(agent.calls_for("plan-tasks"), 1);
}

/// Eight shell tasks with one common scope run one at a time whatever the
/// concurrency: the plan at the gate says which task waits for which
/// instead of calling the wave concurrent, and so do the summary and
/// `context.md`.
#[tokio::test]
async fn tasks_with_overlapping_scopes_say_they_serialize_in_the_plan_and_the_report() {
    let repo = tempfile::tempdir().unwrap();
    let mut csv = String::from(
        "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave\n",
    );
    for i in 1..=8 {
        csv.push_str(&format!(
            "T{i},write {i},Write out/{i},,,out/**,,echo {i},,,\n"
        ));
    }
    csv.push_str("T9,docs,Write docs,,,docs/**,,echo docs,,,\n");
    let csv = write_csv(repo.path(), "tasks.csv", &csv);
    let runner = Arc::new(ScriptedCommands::new().on("echo ", 0, "written\n"));
    let mut o = options(false);
    o.concurrency = 8;
    o.execution = ExecutionPolicy::shell();
    let gate = ScriptedGate::new(vec![Answer::chose(0)]);
    let agent: Arc<dyn Agent> = Arc::new(ShellTaskAgent::new(runner));
    let (p, _) = planex(repo.path(), agent, gate.clone(), o);
    let outcome = p.run_tasks_file(&csv).await.unwrap();
    assert_eq!(outcome.status, OutcomeStatus::Completed);

    let plan = gate.asked()[0].details.clone().unwrap();
    insta::assert_snapshot!("common_scope_execution_plan", plan);
    let waits: Vec<String> = outcome
        .summary
        .scope_waits
        .iter()
        .map(ToString::to_string)
        .collect();
    let expect: Vec<String> = (2..=8)
        .map(|i| format!("T{i} waits for T{}: overlapping scope out/**", i - 1))
        .collect();
    assert_eq!(waits, expect);
    insta::assert_snapshot!(
        "common_scope_summary",
        outcome
            .summary
            .to_string()
            .replace(&outcome.summary.session_dir.display().to_string(), "[dir]")
            .replace(outcome.session_id(), "[session-id]")
    );
    let context = std::fs::read_to_string(outcome.summary.session_dir.join("context.md")).unwrap();
    let section = context
        .split("## Serialized by Scope\n\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n---").next())
        .unwrap_or_else(|| panic!("no scope section in:\n{context}"));
    let listed: Vec<String> = expect.iter().map(|w| format!("- {w}")).collect();
    assert_eq!(
        section,
        format!(
            "Tasks whose write scopes overlap never run at the same time:\n\n{}",
            listed.join("\n")
        )
    );
}
