//! Executor tests with a scripted agent and a scripted gate defined here.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use proptest::prelude::*;

use super::analysis::{REASON_COMPLEX, REASON_NO_PROGRESS, REASON_ROUND_LIMIT};
use super::*;
use crate::agent::{Agent, AgentError, AgentRequest, AgentResponse, Role};
use crate::event::{CollectingSink, Event};
use crate::gate::{AlwaysDefer, Answer, AutoYes, Gate, GateError, Question};

/// Answers from a script, in order; the last answer repeats once the script
/// is used up. Records every instruction it receives.
#[derive(Debug)]
struct ScriptedAgent {
    script: Mutex<VecDeque<Result<String, AgentError>>>,
    last: Mutex<Option<Result<String, AgentError>>>,
    instructions: Mutex<Vec<String>>,
}

impl ScriptedAgent {
    fn new(script: Vec<Result<String, AgentError>>) -> Self {
        Self {
            script: Mutex::new(script.into()),
            last: Mutex::new(None),
            instructions: Mutex::new(Vec::new()),
        }
    }

    fn texts(texts: &[&str]) -> Self {
        Self::new(texts.iter().map(|t| Ok((*t).to_owned())).collect())
    }

    fn instructions(&self) -> Vec<String> {
        self.instructions.lock().unwrap().clone()
    }

    fn calls(&self) -> usize {
        self.instructions.lock().unwrap().len()
    }
}

#[async_trait]
impl Agent for ScriptedAgent {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        self.instructions.lock().unwrap().push(request.instruction);
        let next = self.script.lock().unwrap().pop_front();
        let reply = match next {
            Some(r) => {
                *self.last.lock().unwrap() = Some(r.clone());
                r
            }
            None => self
                .last
                .lock()
                .unwrap()
                .clone()
                .unwrap_or_else(|| Ok(String::new())),
        };
        reply.map(AgentResponse::text)
    }
}

/// Answers questions from a script (then defers); records the questions.
#[derive(Debug, Default)]
struct ScriptedGate {
    answers: Mutex<VecDeque<Answer>>,
    asked: Mutex<Vec<Question>>,
}

impl ScriptedGate {
    fn new(answers: Vec<Answer>) -> Self {
        Self {
            answers: Mutex::new(answers.into()),
            asked: Mutex::default(),
        }
    }

    fn asked(&self) -> Vec<Question> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Gate for ScriptedGate {
    async fn ask(&self, question: &Question) -> Result<Answer, GateError> {
        self.asked.lock().unwrap().push(question.clone());
        Ok(self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Answer::Deferred))
    }
}

const STATUS: &str = "Response status = 200";
const AUTH: &str = "API authentication works";

fn milestone() -> Milestone {
    Milestone {
        id: "M1".into(),
        title: "Core implementation (1 record)".into(),
        instruction: "Fetch one place from the Maps API and store it.".into(),
        exit_criteria: vec![STATUS.into(), AUTH.into()],
    }
}

fn template() -> AgentRequest {
    AgentRequest::new("phase-1/M1", Role::Execute, "(replaced)", "/work/repo")
}

const PASS: &str = "## Milestone M1 Results\n\
    - [x] Response status = 200 - PASS - Got status 200\n\
    - [x] API authentication works - PASS - No 401 errors\n";

/// A report where the status criterion fails with `why`.
fn fail(why: &str) -> String {
    format!(
        "## Milestone M1 Results\n\
         - [ ] Response status = 200 - FAIL - {why}\n\
         - [x] API authentication works - PASS - ok\n"
    )
}

fn policy(attempts_per_round: u32, max_rounds: u32, auto_mode: bool) -> RetryPolicy {
    RetryPolicy {
        attempts_per_round,
        max_rounds,
        auto_mode,
    }
}

async fn run(
    agent: &ScriptedAgent,
    gate: &dyn Gate,
    policy: RetryPolicy,
    state: Option<MilestoneState>,
) -> (MilestoneOutcome, Vec<Event>) {
    let sink = CollectingSink::new();
    let outcome = run_milestone(agent, gate, &sink, &milestone(), &policy, template(), state).await;
    (outcome, sink.events())
}

fn passed_attempts(outcome: &MilestoneOutcome) -> u32 {
    match outcome {
        MilestoneOutcome::Passed { attempts, .. } => *attempts,
        other => panic!("expected Passed, got {other:#?}"),
    }
}

fn needs_human(outcome: MilestoneOutcome) -> (String, String, MilestoneState) {
    match outcome {
        MilestoneOutcome::NeedsHuman {
            reason,
            report_markdown,
            state,
        } => (reason, report_markdown, state),
        other => panic!("expected NeedsHuman, got {other:#?}"),
    }
}

fn failed_reason(outcome: &MilestoneOutcome) -> &str {
    match outcome {
        MilestoneOutcome::Failed { reason, .. } => reason,
        other => panic!("expected Failed, got {other:#?}"),
    }
}

fn event_names(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Event::AttemptFailed { round, attempt, .. } => {
                format!("attempt_failed {round}.{attempt}")
            }
            Event::Escalated { reason, .. } => format!("escalated: {reason}"),
            Event::GateAsked { question, .. } => format!("gate_asked {question}"),
            Event::GateAnswered { question, choice } => {
                format!(
                    "gate_answered {question} {}",
                    choice.as_deref().unwrap_or("(deferred)")
                )
            }
            other => format!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn passes_on_the_first_attempt() {
    let agent = ScriptedAgent::texts(&[PASS]);
    let (outcome, events) = run(&agent, &AlwaysDefer, RetryPolicy::default(), None).await;
    assert_eq!(passed_attempts(&outcome), 1);
    assert!(events.is_empty(), "{events:?}");
    let prompt = &agent.instructions()[0];
    assert!(
        prompt.contains("- Response status = 200\n- API authentication works\n"),
        "{prompt}"
    );
    assert!(!prompt.contains("Previous attempts"), "{prompt}");
}

#[tokio::test]
async fn fails_twice_then_hints_then_passes_in_round_two() {
    let agent = ScriptedAgent::new(vec![
        Ok(fail("Got 401 (Unauthorized)")),
        Ok(fail("Got 401 (Unauthorized)")),
        Ok(PASS.into()),
    ]);
    let (outcome, events) = run(&agent, &AlwaysDefer, RetryPolicy::default(), None).await;
    assert_eq!(passed_attempts(&outcome), 3);
    assert_eq!(
        event_names(&events),
        ["attempt_failed 1.1", "attempt_failed 1.2"]
    );
    let MilestoneOutcome::Passed { history, .. } = outcome else {
        unreachable!()
    };
    assert!(matches!(&history[2], HistoryEntry::Hints { round: 2, hints } if hints.len() == 5));
    let prompts = agent.instructions();
    // Attempt 2 of round 1 already carries attempt 1's failure.
    assert!(prompts[1].contains("- FAIL Response status = 200: Got 401 (Unauthorized)"));
    assert!(!prompts[1].contains("Hints for this round"));
    insta::assert_snapshot!("round_two_prompt", prompts[2]);
}

#[tokio::test]
async fn different_errors_go_to_a_human_and_resume_from_serialized_state() {
    let agent = ScriptedAgent::new(vec![
        Ok(fail("Got 500 (Internal Server Error)")),
        Err(AgentError::Failed {
            message: "connection reset".into(),
            exit_code: Some(1),
        }),
    ]);
    // AutoYes never answers a blocking question: it defers.
    let (outcome, events) = run(&agent, &AutoYes, RetryPolicy::default(), None).await;
    assert_eq!(
        event_names(&events),
        [
            "attempt_failed 1.1",
            "attempt_failed 1.2",
            &format!("escalated: {REASON_COMPLEX}"),
            "gate_asked retry.escalation",
            "gate_answered retry.escalation (deferred)",
        ]
    );
    let (reason, report, state) = needs_human(outcome);
    assert_eq!(reason, REASON_COMPLEX);
    insta::assert_snapshot!("different_errors_report", report);
    assert_eq!(state.next_round, 2);

    let json = serde_json::to_string_pretty(&state).unwrap();
    let restored: MilestoneState = serde_json::from_str(&json).unwrap();
    assert_eq!(restored, state);
    let restored = restored.with_human_note("Restarted the API gateway.");

    let agent = ScriptedAgent::texts(&[PASS]);
    let (outcome, events) = run(&agent, &AutoYes, RetryPolicy::default(), Some(restored)).await;
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(passed_attempts(&outcome), 3);
    let MilestoneOutcome::Passed { history, .. } = &outcome else {
        unreachable!()
    };
    assert!(history.contains(&HistoryEntry::HumanResumed {
        round: 2,
        note: Some("Restarted the API gateway.".into())
    }));
    let prompt = &agent.instructions()[0];
    assert!(prompt.contains("> Restarted the API gateway."), "{prompt}");
    // Failures from before the human acted are not repeated to the agent.
    assert!(!prompt.contains("Previous attempts"), "{prompt}");
}

#[tokio::test]
async fn state_serializes_with_a_version_and_tagged_entries() {
    let agent = ScriptedAgent::new(vec![Ok(fail("Got 500")), Ok(fail("Got 503"))]);
    let (outcome, _) = run(&agent, &AlwaysDefer, RetryPolicy::default(), None).await;
    let (_, _, state) = needs_human(outcome);
    insta::assert_json_snapshot!("needs_human_state", state);
}

#[tokio::test]
async fn the_round_cap_ends_a_same_error_loop() {
    let agent = ScriptedAgent::texts(&[&fail("Got 401")]);
    let (outcome, events) = run(&agent, &AlwaysDefer, RetryPolicy::default(), None).await;
    let (reason, report, _) = needs_human(outcome);
    assert_eq!(reason, REASON_ROUND_LIMIT);
    assert_eq!(agent.calls(), 6);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::AttemptFailed { .. }))
            .count(),
        6
    );
    insta::assert_snapshot!("round_limit_report", report);
}

#[tokio::test]
async fn no_progress_after_two_rounds_of_guidance_is_reachable() {
    let agent = ScriptedAgent::texts(&[&fail("Got 401")]);
    let (outcome, _) = run(&agent, &AlwaysDefer, policy(2, 5, false), None).await;
    let (reason, _, state) = needs_human(outcome);
    assert_eq!(reason, REASON_NO_PROGRESS);
    assert_eq!(agent.calls(), 6);
    assert_eq!(state.next_round, 4);
}

#[tokio::test]
async fn progress_keeps_the_hints_coming_until_the_cap() {
    // Round 3 passes one more criterion than before: progress, so round 4 runs.
    let both =
        "- [ ] Response status = 200 - FAIL - Got 401\n- [ ] API authentication works - FAIL - 401";
    let agent = ScriptedAgent::new(vec![
        Ok(both.into()),
        Ok(both.into()),
        Ok(both.into()),
        Ok(both.into()),
        Ok(fail("Got 401")),
        Ok(fail("Got 401")),
        Ok(PASS.into()),
    ]);
    let (outcome, _) = run(&agent, &AlwaysDefer, policy(2, 5, false), None).await;
    assert_eq!(passed_attempts(&outcome), 7);
}

#[tokio::test]
async fn agent_errors_are_failed_attempts() {
    let boom = || {
        Err(AgentError::Failed {
            message: "boom".into(),
            exit_code: Some(2),
        })
    };
    let agent = ScriptedAgent::new(vec![boom(), boom(), Ok(PASS.into())]);
    let (outcome, events) = run(&agent, &AlwaysDefer, RetryPolicy::default(), None).await;
    assert_eq!(passed_attempts(&outcome), 3);
    assert_eq!(
        events[0],
        Event::AttemptFailed {
            id: "M1".into(),
            round: 1,
            attempt: 1,
            error: "agent error: agent failed: boom".into(),
        }
    );
    assert!(agent.instructions()[2].contains("- FAIL agent error: agent failed: boom"));
}

#[tokio::test]
async fn a_cancelled_call_pauses_instead_of_retrying() {
    let agent = ScriptedAgent::new(vec![Ok(fail("Got 401")), Err(AgentError::Cancelled)]);
    let (outcome, events) = run(&agent, &AlwaysDefer, RetryPolicy::default(), None).await;
    let (reason, _, state) = needs_human(outcome);
    assert_eq!(reason, "agent call cancelled");
    assert_eq!(agent.calls(), 2);
    assert_eq!(event_names(&events), ["attempt_failed 1.1"]);
    assert_eq!((state.total_attempts(), state.next_round), (1, 2));
}

#[tokio::test]
async fn a_declined_request_is_attempted_once() {
    let agent = ScriptedAgent::new(vec![
        Err(AgentError::Unsupported {
            reason: "no machine-applicable suggestion".into(),
        }),
        Ok(PASS.to_owned()),
    ]);
    let (outcome, events) = run(&agent, &AlwaysDefer, policy(3, 2, true), None).await;
    let MilestoneOutcome::Failed { reason, history } = outcome else {
        panic!("expected Failed, got {outcome:?}");
    };
    assert_eq!(
        reason,
        "agent cannot handle this request: no machine-applicable suggestion"
    );
    assert_eq!(agent.calls(), 1);
    assert_eq!(event_names(&events), ["attempt_failed 1.1"]);
    assert_eq!(history.len(), 1);
}

#[tokio::test]
async fn final_errors_are_attempted_once_and_transient_ones_retried() {
    let finals = [
        AgentError::Unavailable {
            message: "claude authentication failed: Invalid API key".into(),
        },
        AgentError::Budget {
            message: "claude stopped with error_max_turns".into(),
        },
        AgentError::LoopDetected {
            signature: "edit: text not found".into(),
            count: 3,
        },
    ];
    for error in finals {
        let expected = error.to_string();
        let agent = ScriptedAgent::new(vec![Err(error), Ok(PASS.to_owned())]);
        let (outcome, _) = run(&agent, &AlwaysDefer, policy(3, 2, true), None).await;
        let MilestoneOutcome::Failed { reason, .. } = outcome else {
            panic!("expected Failed for {expected}, got {outcome:?}");
        };
        assert_eq!(reason, expected);
        assert_eq!(agent.calls(), 1, "{expected}");
    }
    let agent = ScriptedAgent::new(vec![
        Err(AgentError::Failed {
            message: "claude reported the API answered 529: overloaded".into(),
            exit_code: Some(1),
        }),
        Ok(PASS.to_owned()),
    ]);
    let (outcome, _) = run(&agent, &AlwaysDefer, policy(3, 2, true), None).await;
    assert_eq!(passed_attempts(&outcome), 2);
    assert_eq!(agent.calls(), 2);
}

#[tokio::test]
async fn permission_question_is_answered_in_auto_mode() {
    let agent = ScriptedAgent::texts(&["I read the code and have a plan. Should I proceed?", PASS]);
    let gate = ScriptedGate::default();
    let (outcome, events) = run(&agent, &gate, policy(2, 3, true), None).await;
    assert_eq!(passed_attempts(&outcome), 1);
    assert!(events.is_empty(), "{events:?}");
    assert!(gate.asked().is_empty());
    let prompts = agent.instructions();
    assert_eq!(prompts.len(), 2);
    assert_eq!(prompts[1], format!("{}\n\nYes, proceed.", prompts[0]));
    let MilestoneOutcome::Passed { history, .. } = outcome else {
        unreachable!()
    };
    assert!(matches!(&history[0], HistoryEntry::Attempt(a) if a.permission_reasks == 1));
}

#[tokio::test]
async fn permission_question_goes_to_the_gate_in_manual_mode() {
    let ask = "Do you want me to create the table first?";
    // Proceed.
    let agent = ScriptedAgent::texts(&[ask, PASS]);
    let gate = ScriptedGate::new(vec![Answer::chose(0)]);
    let (outcome, events) = run(&agent, &gate, RetryPolicy::default(), None).await;
    assert_eq!(passed_attempts(&outcome), 1);
    assert_eq!(
        event_names(&events),
        [
            "gate_asked retry.permission",
            "gate_answered retry.permission Proceed"
        ]
    );
    let asked = gate.asked();
    assert_eq!(
        asked[0].prompt,
        format!("The agent working on milestone M1 asks: {ask}")
    );
    assert_eq!(asked[0].label(1), Some("Stop"));
    assert!(!asked[0].blocking);
    assert!(agent.instructions()[1].ends_with("Yes, proceed."));

    // Stop.
    let agent = ScriptedAgent::texts(&[ask]);
    let gate = ScriptedGate::new(vec![Answer::chose(1)]);
    let (outcome, _) = run(&agent, &gate, RetryPolicy::default(), None).await;
    assert!(failed_reason(&outcome).starts_with("the gate declined"));
    assert_eq!(agent.calls(), 1);

    // Nobody there: pause before any attempt finished; the resume reruns round 1.
    let agent = ScriptedAgent::texts(&[ask]);
    let (outcome, _) = run(&agent, &AlwaysDefer, RetryPolicy::default(), None).await;
    let (reason, report, state) = needs_human(outcome);
    assert_eq!(
        reason,
        format!("the agent asked permission to proceed: {ask}")
    );
    assert!(report.contains("_No attempt finished yet._"), "{report}");
    assert_eq!(state.next_round, 1);
}

#[tokio::test]
async fn a_question_next_to_a_report_is_not_a_permission_request() {
    let text = format!("{PASS}\nShould I proceed to the next milestone?");
    let agent = ScriptedAgent::texts(&[&text]);
    let gate = ScriptedGate::default();
    let (outcome, _) = run(&agent, &gate, RetryPolicy::default(), None).await;
    assert_eq!(passed_attempts(&outcome), 1);
    assert!(gate.asked().is_empty());
}

#[test]
fn milestones_accept_the_seed_field_name() {
    let m: Milestone = serde_json::from_str(
        r#"{"id": "M1", "title": "t", "instruction": "i", "exitCriteria": ["a"]}"#,
    )
    .unwrap();
    assert_eq!(m.exit_criteria, ["a"]);
}

#[tokio::test]
async fn an_agent_that_keeps_asking_fails_the_attempt() {
    let agent = ScriptedAgent::texts(&["Continue?"]);
    let (outcome, _) = run(&agent, &AlwaysDefer, policy(2, 1, true), None).await;
    let (reason, report, _) = needs_human(outcome);
    assert_eq!(reason, REASON_ROUND_LIMIT);
    // Two attempts, each: the question and two re-asks.
    assert_eq!(agent.calls(), 6);
    assert!(
        report.contains("kept asking permission to proceed → Continue?"),
        "{report}"
    );
}

#[tokio::test]
async fn escalation_gate_can_stop_or_leave_a_note() {
    let agent = ScriptedAgent::new(vec![Ok(fail("Got 500")), Ok(fail("Got 503"))]);
    let gate = ScriptedGate::new(vec![Answer::chose(1)]);
    let (outcome, _) = run(&agent, &gate, RetryPolicy::default(), None).await;
    assert_eq!(
        failed_reason(&outcome),
        format!("stopped at the gate after escalation: {REASON_COMPLEX}")
    );
    let asked = gate.asked();
    assert!(asked[0].blocking);
    assert!(
        asked[0]
            .details
            .as_deref()
            .unwrap_or_default()
            .starts_with("# Human intervention required")
    );

    let agent = ScriptedAgent::new(vec![Ok(fail("Got 500")), Ok(fail("Got 503"))]);
    let gate = ScriptedGate::new(vec![Answer::Chosen {
        index: 0,
        note: Some("Quota raised".into()),
    }]);
    let (outcome, _) = run(&agent, &gate, RetryPolicy::default(), None).await;
    let (_, _, state) = needs_human(outcome);
    assert_eq!(state.human_note.as_deref(), Some("Quota raised"));
}

#[tokio::test]
async fn resume_rejects_foreign_or_future_state() {
    let agent = ScriptedAgent::texts(&[PASS]);
    let other = MilestoneState::new("M9");
    let (outcome, _) = run(&agent, &AlwaysDefer, RetryPolicy::default(), Some(other)).await;
    assert_eq!(
        failed_reason(&outcome),
        "milestone state belongs to milestone `M9`, not `M1`"
    );
    let mut future = MilestoneState::new("M1");
    future.version = 99;
    let (outcome, _) = run(&agent, &AlwaysDefer, RetryPolicy::default(), Some(future)).await;
    assert_eq!(
        failed_reason(&outcome),
        "milestone state version 99 is not supported (expected 1)"
    );
    assert_eq!(agent.calls(), 0);
}

#[derive(Debug, Clone)]
enum Behaviour {
    Fail(u8),
    Error,
    AskPermission,
    Garbage,
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        (0u8..3).prop_map(Behaviour::Fail),
        Just(Behaviour::Error),
        Just(Behaviour::AskPermission),
        Just(Behaviour::Garbage),
    ]
}

fn reply(b: &Behaviour) -> Result<String, AgentError> {
    match b {
        Behaviour::Fail(n) => Ok(fail(&format!("error {n}"))),
        Behaviour::Error => Err(AgentError::Timeout { seconds: 1.0 }),
        Behaviour::AskPermission => Ok("Should I proceed?".into()),
        Behaviour::Garbage => Ok("I changed some files.".into()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// An agent that never passes: every run ends, within the cap, and every
    /// agent call is an attempt or a permission re-ask.
    #[test]
    fn every_loop_ends(
        attempts_per_round in 0u32..4,
        max_rounds in 0u32..5,
        auto_mode in any::<bool>(),
        gate_proceeds in any::<bool>(),
        script in proptest::collection::vec(behaviour(), 1..40),
        resumes in 0usize..3,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let policy = policy(attempts_per_round, max_rounds, auto_mode);
        let agent = ScriptedAgent::new(script.iter().map(reply).collect());
        // A gate that always says Proceed to permission questions and defers escalations.
        let proceed = crate::gate::CallbackGate::new(|q: &Question| {
            if q.blocking { Answer::Deferred } else { Answer::chose(0) }
        });
        let gate: &dyn Gate = if gate_proceeds { &proceed } else { &AlwaysDefer };
        let per_run_cap = attempts_per_round.max(1) as usize * max_rounds.max(1) as usize;
        let mut state = None;
        let mut calls_before = 0;
        for _ in 0..=resumes {
            let sink = CollectingSink::new();
            let outcome = rt.block_on(run_milestone(
                &agent, gate, &sink, &milestone(), &policy, template(), state.take(),
            ));
            let calls = agent.calls() - calls_before;
            calls_before = agent.calls();
            let (reason, after) = match outcome {
                MilestoneOutcome::NeedsHuman { reason, state, .. } => (reason, state),
                other => {
                    return Err(TestCaseError::fail(format!(
                        "an always-failing agent ended with {other:?}"
                    )));
                }
            };
            let run_attempts: Vec<&AttemptRecord> =
                attempts(since_last_human(&after.history)).collect();
            let reasks: usize = run_attempts.iter().map(|a| a.permission_reasks as usize).sum();
            prop_assert!(run_attempts.len() <= per_run_cap);
            prop_assert!(reasks <= MAX_PERMISSION_REASKS as usize * run_attempts.len());
            // Every call is a recorded attempt or a re-ask, except the first
            // call of an attempt paused at the permission gate.
            let paused = usize::from(reason.starts_with("the agent asked permission"));
            prop_assert_eq!(calls, run_attempts.len() + reasks + paused);
            // The bound of the brief: attempts × rounds + permission re-asks.
            prop_assert!(calls <= per_run_cap + reasks);
            state = Some(after);
        }
    }
}
