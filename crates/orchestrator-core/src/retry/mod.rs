//! Milestone execution with rounds of attempts, failure analysis, hints and
//! escalation to a human.
//!
//! A [`Milestone`] is an instruction plus exit criteria the agent must report
//! on. [`run_milestone`] runs it in **rounds** of
//! [`RetryPolicy::attempts_per_round`] attempts. Each attempt's answer is
//! validated against the exit criteria ([`criteria`]); the next attempt's
//! instruction carries the failing criteria with their explanations. After a
//! failed round the failures are analysed ([`analysis`]: same error /
//! different errors / intermittent, simple / complex) and the policy either
//! gives hints for the next round or escalates to a human with a markdown
//! report ([`report`]).
//!
//! ## Every loop ends
//! The seed this follows allows unlimited rounds; that is the runaway-retry
//! failure users report. Here the **round cap is checked first** after every
//! failed round ([`RetryPolicy::max_rounds`]), an agent that only asks
//! permission is re-asked at most [`MAX_PERMISSION_REASKS`] times per
//! attempt, and the executor never starts a round past the cap on its own: a
//! person resumes it by passing the [`MilestoneState`] back. One call to
//! [`run_milestone`] makes at most
//! `attempts_per_round × max_rounds × (1 + MAX_PERMISSION_REASKS)` agent calls.
//!
//! ## Resuming
//! [`MilestoneOutcome::NeedsHuman`] carries a serde-serialisable, versioned
//! [`MilestoneState`]. Passing it back to [`run_milestone`] records that a
//! human acted (with their note, if any, shown to the agent) and starts a
//! fresh round; round cap, guidance count and failure analysis then count
//! from that point.
//!
//! ## Example
//!
//! ```
//! use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, Role};
//! use orchestrator_core::event::NullSink;
//! use orchestrator_core::gate::AutoYes;
//! use orchestrator_core::retry::{Milestone, MilestoneOutcome, RetryPolicy, run_milestone};
//!
//! /// An agent that reports every criterion as passed.
//! #[derive(Debug)]
//! struct Done;
//!
//! #[async_trait::async_trait]
//! impl Agent for Done {
//!     fn name(&self) -> &str { "done" }
//!     async fn run(&self, _: AgentRequest) -> Result<AgentResponse, AgentError> {
//!         Ok(AgentResponse::text("- [x] Builds - PASS - cargo build is green"))
//!     }
//! }
//!
//! let milestone = Milestone {
//!     id: "M1".into(),
//!     title: "Skeleton".into(),
//!     instruction: "Create the crate skeleton.".into(),
//!     exit_criteria: vec!["Builds".into()],
//! };
//! let request = AgentRequest::new("M1", Role::Execute, "", ".");
//! let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! let outcome = rt.block_on(run_milestone(
//!     &Done, &AutoYes, &NullSink, &milestone, &RetryPolicy::default(), request, None,
//! ));
//! assert!(matches!(outcome, MilestoneOutcome::Passed { attempts: 1, .. }));
//! ```

pub mod analysis;
pub mod criteria;
mod executor;
pub mod report;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use analysis::{
    Analysis, Complexity, Confidence, ErrorPattern, Intervention, RoundContext, analyze_failures,
    generate_hints, intervene,
};
pub use criteria::{
    CriterionResult, ReportedCriterion, Validation, parse_report, permission_question,
    validate_exit_criteria,
};
pub use executor::{ESCALATION_QUESTION_ID, PERMISSION_QUESTION_ID, PROCEED, run_milestone};
pub use report::{build_attempt_prompt, render_human_report};

/// How many times one attempt re-asks an agent that only asked permission to
/// proceed, before the attempt counts as failed.
pub const MAX_PERMISSION_REASKS: u32 = 2;

/// Version of the [`MilestoneState`] format.
pub const MILESTONE_STATE_VERSION: u32 = 1;

/// A step of work with exit criteria the agent must report on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Milestone {
    /// Identifier (`M1`, `phase-2.3`); used as the job id in events.
    pub id: String,
    /// Short title.
    pub title: String,
    /// What to do, in natural language.
    pub instruction: String,
    /// Criteria that must all PASS for the milestone to pass (no criteria:
    /// any answer that is not an error or a permission question passes).
    #[serde(alias = "exitCriteria")]
    pub exit_criteria: Vec<String>,
}

/// How many attempts and rounds a milestone gets before a human is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Attempts per round (the seed's quota: 2). Zero is read as 1.
    pub attempts_per_round: u32,
    /// Rounds before the milestone goes to a human (counted since the start
    /// or since the last human action). Zero is read as 1.
    pub max_rounds: u32,
    /// Whether the user approved the workflow up front: an agent that only
    /// asks permission to proceed is answered "Yes, proceed." automatically
    /// instead of asking the gate.
    pub auto_mode: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts_per_round: 2,
            max_rounds: 3,
            auto_mode: false,
        }
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AttemptResult {
    /// The agent answered; its report was validated.
    Validated {
        /// The validation of the exit criteria.
        validation: Validation,
    },
    /// The agent call failed.
    AgentError {
        /// The error text.
        message: String,
    },
    /// The agent kept asking permission to proceed after every re-ask.
    KeptAskingPermission {
        /// The agent's last question.
        question: String,
    },
}

/// One attempt in the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Round (1-based, counted over the milestone's whole life).
    pub round: u32,
    /// Attempt within the round (1-based).
    pub attempt: u32,
    /// How it ended.
    pub result: AttemptResult,
    /// How many times the agent was re-asked after asking permission.
    #[serde(default)]
    pub permission_reasks: u32,
}

impl AttemptRecord {
    /// Whether every exit criterion passed.
    pub fn passed(&self) -> bool {
        matches!(&self.result, AttemptResult::Validated { validation } if validation.all_passed)
    }

    /// The failures of this attempt as `criterion: explanation` messages (the
    /// seed's error messages), or the agent error.
    pub fn failure_messages(&self) -> Vec<String> {
        match &self.result {
            AttemptResult::Validated { validation } => validation
                .failures()
                .map(|r| format!("{}: {}", r.criterion, r.explanation))
                .collect(),
            AttemptResult::AgentError { message } => vec![format!("agent error: {message}")],
            AttemptResult::KeptAskingPermission { question } => {
                vec![format!(
                    "agent kept asking permission to proceed: {question}"
                )]
            }
        }
    }

    /// How many criteria passed (0 for an agent error).
    pub fn passed_count(&self) -> usize {
        match &self.result {
            AttemptResult::Validated { validation } => {
                validation.results.iter().filter(|r| r.passed).count()
            }
            _ => 0,
        }
    }

    /// A one-line summary of the failure, for events.
    pub fn summary(&self) -> String {
        let messages = self.failure_messages();
        match messages.len() {
            0 => "passed".to_owned(),
            1 => messages.join(""),
            n => format!("{n} criteria failed: {}", messages.join("; ")),
        }
    }
}

/// One entry of a milestone's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HistoryEntry {
    /// An attempt.
    Attempt(AttemptRecord),
    /// Hints generated after a failed round, for the round named here.
    Hints {
        /// The round the hints are for.
        round: u32,
        /// The hints.
        hints: Vec<String>,
    },
    /// The milestone was escalated to a human after this round.
    Escalated {
        /// The round that failed.
        round: u32,
        /// Why.
        reason: String,
    },
    /// A human acted and the milestone resumed at this round.
    HumanResumed {
        /// The round that starts.
        round: u32,
        /// What the human said, passed to the agent as guidance.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

/// Everything needed to resume a milestone after a human acted.
/// Persist it as JSON; the format is versioned ([`MILESTONE_STATE_VERSION`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MilestoneState {
    /// Format version.
    pub version: u32,
    /// The milestone this state belongs to.
    pub milestone_id: String,
    /// The round the next run starts.
    pub next_round: u32,
    /// What happened so far.
    pub history: Vec<HistoryEntry>,
    /// A note from the human, passed to the agent when the milestone resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_note: Option<String>,
}

impl MilestoneState {
    /// The state of a milestone that has not run yet.
    pub fn new(milestone_id: impl Into<String>) -> Self {
        Self {
            version: MILESTONE_STATE_VERSION,
            milestone_id: milestone_id.into(),
            next_round: 1,
            history: Vec::new(),
            human_note: None,
        }
    }

    /// Builder: attach the human's note (what they did or want), shown to
    /// the agent when the milestone resumes.
    pub fn with_human_note(mut self, note: impl Into<String>) -> Self {
        self.human_note = Some(note.into());
        self
    }

    /// Attempts made so far, over all rounds.
    pub fn total_attempts(&self) -> u32 {
        attempts(&self.history).count() as u32
    }
}

/// How a milestone run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum MilestoneOutcome {
    /// Every exit criterion passed.
    Passed {
        /// Attempts made over the milestone's whole life (including earlier runs).
        attempts: u32,
        /// The full history.
        history: Vec<HistoryEntry>,
    },
    /// A human must act; pass `state` back to resume.
    NeedsHuman {
        /// Why.
        reason: String,
        /// The intervention report (markdown).
        report_markdown: String,
        /// The state to resume from.
        state: MilestoneState,
    },
    /// The gate declined to go on, or the state could not be resumed.
    Failed {
        /// Why.
        reason: String,
        /// The full history.
        history: Vec<HistoryEntry>,
    },
}

/// The attempts in a history, in order.
pub fn attempts(history: &[HistoryEntry]) -> impl Iterator<Item = &AttemptRecord> {
    history.iter().filter_map(|e| match e {
        HistoryEntry::Attempt(a) => Some(a),
        _ => None,
    })
}

/// The part of a history since the last human action (the whole history if
/// no human acted): what the round cap, the guidance count and the failure
/// analysis look at.
pub fn since_last_human(history: &[HistoryEntry]) -> &[HistoryEntry] {
    match history
        .iter()
        .rposition(|e| matches!(e, HistoryEntry::HumanResumed { .. }))
    {
        Some(i) => &history[i + 1..],
        None => history,
    }
}
