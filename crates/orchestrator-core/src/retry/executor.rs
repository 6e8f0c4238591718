//! The milestone executor: rounds of attempts, permission questions, hints
//! and escalation, with I/O only through [`Agent`], [`Gate`] and [`EventSink`].

use std::ops::ControlFlow;

use crate::agent::{Agent, AgentError, AgentRequest};
use crate::event::{Event, EventSink};
use crate::gate::{Answer, Gate, GateOption, Question, check_answer};

use super::analysis::{Intervention, RoundContext, analyze_failures, intervene};
use super::criteria::{parse_report, permission_question, validate_exit_criteria};
use super::report::{build_attempt_prompt, render_human_report};
use super::{
    AttemptRecord, AttemptResult, HistoryEntry, MAX_PERMISSION_REASKS, MILESTONE_STATE_VERSION,
    Milestone, MilestoneOutcome, MilestoneState, RetryPolicy, attempts, since_last_human,
};

/// Question id of the permission gate.
pub const PERMISSION_QUESTION_ID: &str = "retry.permission";
/// Question id of the escalation gate.
pub const ESCALATION_QUESTION_ID: &str = "retry.escalation";
/// What is appended to the instruction when the agent is told to go on.
pub const PROCEED: &str = "Yes, proceed.";

/// Runs `milestone` until its exit criteria pass, a human is needed, or the
/// gate declines.
///
/// `request` is the template of every agent call (id, role, working
/// directory, time limit, schema, context); its instruction is replaced by
/// each attempt's prompt. Pass the `state` of an earlier
/// [`MilestoneOutcome::NeedsHuman`] to resume after the human acted: a fresh
/// round starts and the cap counts from there.
///
/// An agent error counts as a failed attempt, with the error text as the
/// failure; a cancelled call ([`AgentError::Cancelled`]) pauses instead
/// ([`MilestoneOutcome::NeedsHuman`], the attempt not counted); an agent
/// that declines the request ([`AgentError::Unsupported`], "not fixable by
/// this agent") ends the milestone in [`MilestoneOutcome::Failed`] after that
/// one attempt, since asking the same agent again cannot help.
///
/// Events: [`Event::AttemptFailed`] per failed attempt, [`Event::Escalated`]
/// when a human is needed, [`Event::GateAsked`]/[`Event::GateAnswered`]
/// around every gate question, [`Event::Warning`] when a gate errs.
///
/// Gates: an agent that only asks permission goes to the gate (question
/// `retry.permission`, options Proceed / Stop) unless the policy is in auto
/// mode; an escalation asks the gate a blocking question
/// (`retry.escalation`, options "Resume later" / "Stop", the report as
/// details). Stop ends in [`MilestoneOutcome::Failed`]; anything else in
/// [`MilestoneOutcome::NeedsHuman`]. The executor never starts a round past
/// the cap by itself.
pub async fn run_milestone(
    agent: &dyn Agent,
    gate: &dyn Gate,
    sink: &dyn EventSink,
    milestone: &Milestone,
    policy: &RetryPolicy,
    request: AgentRequest,
    state: Option<MilestoneState>,
) -> MilestoneOutcome {
    let run = Run {
        agent,
        gate,
        sink,
        milestone,
        policy,
        request: &request,
    };
    let mut st = match open_state(milestone, state) {
        ControlFlow::Continue(st) => st,
        ControlFlow::Break(refused) => return refused,
    };
    loop {
        let round = st.next_round;
        st = match run.round(st, round).await {
            ControlFlow::Continue(st) => st,
            ControlFlow::Break(outcome) => return outcome,
        };
        // The round failed: analyse, then hints or a human.
        st.next_round = round + 1;
        let window = since_last_human(&st.history);
        let analysis = analyze_failures(attempts(window));
        let ctx = RoundContext::from_window(window, policy.max_rounds.max(1));
        match intervene(&analysis, &ctx) {
            Intervention::GiveHints { hints } => st.history.push(HistoryEntry::Hints {
                round: round + 1,
                hints,
            }),
            Intervention::AskHuman { reason } => {
                return run.escalate(st, round, reason, &analysis).await;
            }
        }
    }
}

/// The state a run starts from: a new one, or the state of an earlier
/// [`MilestoneOutcome::NeedsHuman`] with the human's action recorded (its
/// note, the round a resume starts). A state of another version or another
/// milestone is refused: the outcome to return.
fn open_state(
    milestone: &Milestone,
    state: Option<MilestoneState>,
) -> ControlFlow<MilestoneOutcome, MilestoneState> {
    let Some(mut s) = state else {
        return ControlFlow::Continue(MilestoneState::new(&milestone.id));
    };
    if s.version != MILESTONE_STATE_VERSION {
        return ControlFlow::Break(MilestoneOutcome::Failed {
            reason: format!(
                "milestone state version {} is not supported (expected {MILESTONE_STATE_VERSION})",
                s.version
            ),
            history: s.history,
        });
    }
    if s.milestone_id != milestone.id {
        return ControlFlow::Break(MilestoneOutcome::Failed {
            reason: format!(
                "milestone state belongs to milestone `{}`, not `{}`",
                s.milestone_id, milestone.id
            ),
            history: s.history,
        });
    }
    let note = s.human_note.take();
    s.next_round = s.next_round.max(1);
    s.history.push(HistoryEntry::HumanResumed {
        round: s.next_round,
        note,
    });
    ControlFlow::Continue(s)
}

/// What every step of one [`run_milestone`] call shares.
struct Run<'a> {
    agent: &'a dyn Agent,
    gate: &'a dyn Gate,
    sink: &'a dyn EventSink,
    milestone: &'a Milestone,
    policy: &'a RetryPolicy,
    request: &'a AgentRequest,
}

impl Run<'_> {
    /// The attempts of `round`: [`ControlFlow::Break`] with the outcome
    /// when one passes or the milestone ends (a refusal, a stop, a pause);
    /// [`ControlFlow::Continue`] with the state when every attempt failed.
    async fn round(
        &self,
        mut st: MilestoneState,
        round: u32,
    ) -> ControlFlow<MilestoneOutcome, MilestoneState> {
        let milestone = self.milestone;
        for attempt in 1..=self.policy.attempts_per_round.max(1) {
            let prompt = build_attempt_prompt(
                milestone,
                &st.history,
                round,
                attempt,
                self.policy.auto_mode,
            );
            let step = run_attempt(
                self.agent,
                self.gate,
                self.sink,
                milestone,
                self.policy,
                self.request,
                &prompt,
            )
            .await;
            // `refused`: the agent declined; the attempt counts and ends it.
            let (result, permission_reasks, refused) = match step {
                Step::Finished {
                    result,
                    permission_reasks,
                } => (result, permission_reasks, None),
                Step::Refused {
                    result,
                    reason,
                    permission_reasks,
                } => (result, permission_reasks, Some(reason)),
                Step::Stop { reason } => {
                    return ControlFlow::Break(MilestoneOutcome::Failed {
                        reason,
                        history: st.history,
                    });
                }
                Step::Defer { reason } => return ControlFlow::Break(self.pause(st, round, reason)),
            };
            let record = AttemptRecord {
                round,
                attempt,
                result,
                permission_reasks,
            };
            let passed = record.passed();
            if !passed {
                self.sink.emit(&Event::AttemptFailed {
                    id: milestone.id.clone(),
                    round,
                    attempt,
                    error: record.summary(),
                });
            }
            st.history.push(HistoryEntry::Attempt(record));
            if let Some(reason) = refused {
                return ControlFlow::Break(MilestoneOutcome::Failed {
                    reason,
                    history: st.history,
                });
            }
            if passed {
                return ControlFlow::Break(MilestoneOutcome::Passed {
                    attempts: st.total_attempts(),
                    history: st.history,
                });
            }
        }
        ControlFlow::Continue(st)
    }

    /// The gate could not answer during `round`: pause for a human, the
    /// round to resume at being the next one when this one had started.
    fn pause(&self, mut st: MilestoneState, round: u32, reason: String) -> MilestoneOutcome {
        let round_started = attempts(&st.history).any(|a| a.round == round);
        st.next_round = if round_started { round + 1 } else { round };
        let analysis = failed_analysis(&st.history);
        let report = render_human_report(self.milestone, &st.history, &reason, analysis.as_ref());
        MilestoneOutcome::NeedsHuman {
            reason,
            report_markdown: report,
            state: st,
        }
    }

    /// The failures of `round` need a human: record and report the
    /// escalation, then ask the gate whether to stop or resume later.
    async fn escalate(
        &self,
        mut st: MilestoneState,
        round: u32,
        reason: String,
        analysis: &super::Analysis,
    ) -> MilestoneOutcome {
        let milestone = self.milestone;
        st.history.push(HistoryEntry::Escalated {
            round,
            reason: reason.clone(),
        });
        self.sink.emit(&Event::Escalated {
            id: Some(milestone.id.clone()),
            reason: reason.clone(),
        });
        let report = render_human_report(milestone, &st.history, &reason, Some(analysis));
        let question = Question::new(
            ESCALATION_QUESTION_ID,
            format!(
                "Milestone {} ({}) needs a human: {reason}. Resolve the issue, then resume.",
                milestone.id, milestone.title
            ),
            vec![
                GateOption::new(
                    "Resume later",
                    "I will act, then resume the milestone from its saved state",
                ),
                GateOption::new("Stop", "Give up this milestone"),
            ],
        )
        .with_details(report.clone())
        .blocking();
        match ask(self.gate, self.sink, &question).await {
            Some(Answer::Chosen { index: 1, .. }) => MilestoneOutcome::Failed {
                reason: format!("stopped at the gate after escalation: {reason}"),
                history: st.history,
            },
            Some(Answer::Chosen { note, .. }) => {
                st.human_note = note;
                MilestoneOutcome::NeedsHuman {
                    reason,
                    report_markdown: report,
                    state: st,
                }
            }
            Some(Answer::Deferred) | None => MilestoneOutcome::NeedsHuman {
                reason,
                report_markdown: report,
                state: st,
            },
        }
    }
}

/// The analysis of the failed attempts since the last human action, if any.
fn failed_analysis(history: &[HistoryEntry]) -> Option<super::Analysis> {
    let window = since_last_human(history);
    attempts(window)
        .any(|a| !a.passed())
        .then(|| analyze_failures(attempts(window)))
}

/// How one attempt went.
enum Step {
    /// The attempt finished (passed or failed).
    Finished {
        result: AttemptResult,
        permission_reasks: u32,
    },
    /// The gate declined: the milestone fails.
    Stop { reason: String },
    /// The agent declined the request ([`AgentError::Unsupported`]) or
    /// failed in a way a retry cannot mend ([`AgentError::is_final`]): the
    /// attempt counts once and the milestone fails.
    Refused {
        result: AttemptResult,
        reason: String,
        permission_reasks: u32,
    },
    /// The gate could not answer now: pause for a human.
    Defer { reason: String },
}

/// One attempt: calls the agent, re-asking (up to [`MAX_PERMISSION_REASKS`]
/// times) when it only asks permission to proceed.
async fn run_attempt(
    agent: &dyn Agent,
    gate: &dyn Gate,
    sink: &dyn EventSink,
    milestone: &Milestone,
    policy: &RetryPolicy,
    template: &AgentRequest,
    prompt: &str,
) -> Step {
    let mut reasks = 0;
    loop {
        let mut request = template.clone();
        request.instruction = if reasks == 0 {
            prompt.to_owned()
        } else {
            format!("{prompt}\n\n{PROCEED}")
        };
        let response = match agent.run(request).await {
            Ok(r) => r,
            Err(e) => return agent_error_step(&e, reasks),
        };
        let reported = parse_report(&response.text, response.structured.as_ref());
        let question = if reported.is_empty() {
            permission_question(&response.text)
        } else {
            None
        };
        let Some(question) = question else {
            return Step::Finished {
                result: AttemptResult::Validated {
                    validation: validate_exit_criteria(&reported, &milestone.exit_criteria),
                },
                permission_reasks: reasks,
            };
        };
        if reasks >= MAX_PERMISSION_REASKS {
            return Step::Finished {
                result: AttemptResult::KeptAskingPermission { question },
                permission_reasks: reasks,
            };
        }
        if !policy.auto_mode
            && let Some(step) = ask_permission(gate, sink, milestone, &question).await
        {
            return step;
        }
        reasks += 1;
    }
}

/// The step an agent error makes of an attempt made after `reasks`
/// permission re-asks.
fn agent_error_step(e: &AgentError, reasks: u32) -> Step {
    match e {
        // A cancelled call (Ctrl-C, shutdown) is not a failure to retry:
        // pause resumably instead of calling the agent again.
        AgentError::Cancelled => Step::Defer {
            reason: AgentError::Cancelled.to_string(),
        },
        // Declined, unauthorized, out of budget…: asking again cannot
        // help, so the attempt counts once and the milestone fails.
        e if e.is_final() => Step::Refused {
            result: AttemptResult::AgentError {
                message: e.to_string(),
            },
            reason: e.to_string(),
            permission_reasks: reasks,
        },
        e => Step::Finished {
            result: AttemptResult::AgentError {
                message: e.to_string(),
            },
            permission_reasks: reasks,
        },
    }
}

/// Asks the gate whether the agent may go on after asking `question`:
/// `None` to go on, else the step that ends the attempt (stopped, or
/// deferred to a human).
async fn ask_permission(
    gate: &dyn Gate,
    sink: &dyn EventSink,
    milestone: &Milestone,
    question: &str,
) -> Option<Step> {
    let q = Question::new(
        PERMISSION_QUESTION_ID,
        format!(
            "The agent working on milestone {} asks: {question}",
            milestone.id
        ),
        vec![
            GateOption::new("Proceed", "Tell the agent to go on"),
            GateOption::new("Stop", "Stop this milestone"),
        ],
    );
    match ask(gate, sink, &q).await {
        Some(Answer::Chosen { index: 0, .. }) => None,
        Some(Answer::Chosen { .. }) => Some(Step::Stop {
            reason: format!("the gate declined to let the agent proceed: {question}"),
        }),
        Some(Answer::Deferred) | None => Some(Step::Defer {
            reason: format!("the agent asked permission to proceed: {question}"),
        }),
    }
}

/// Asks the gate, emitting the events; a gate error becomes a warning and
/// `None` (the caller pauses).
async fn ask(gate: &dyn Gate, sink: &dyn EventSink, question: &Question) -> Option<Answer> {
    sink.emit(&Event::GateAsked {
        question: question.id.clone(),
        prompt: question.prompt.clone(),
    });
    match gate
        .ask(question)
        .await
        .and_then(|answer| check_answer(question, answer))
    {
        Ok(answer) => {
            sink.emit(&Event::GateAnswered {
                question: question.id.clone(),
                choice: answer
                    .index()
                    .and_then(|i| question.label(i))
                    .map(str::to_owned),
            });
            Some(answer)
        }
        Err(e) => {
            sink.emit(&Event::Warning {
                message: e.to_string(),
            });
            sink.emit(&Event::GateAnswered {
                question: question.id.clone(),
                choice: None,
            });
            None
        }
    }
}
