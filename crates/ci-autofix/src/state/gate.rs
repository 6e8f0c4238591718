//! The confirmation gate a run stopped at, as the state file keeps it
//! (`gate`): the verified patch's commit (kept on an engine branch in an
//! engine worktree, never in the user's tree), what the person needs to
//! decide (classification, evidence, files, the cadence's reason) and,
//! once given, the answer with who gave it and from where.

use serde::{Deserialize, Serialize};

/// The question id of the patch confirmation.
pub const APPLY_PATCH_QUESTION: &str = "ci-autofix.apply-patch";

/// A patch waiting for a person's confirmation (the state file's `gate`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfirmGate {
    /// The iteration the patch belongs to (not finished yet).
    pub iteration: u32,
    /// The question (`ci-autofix.apply-patch`).
    pub question: String,
    /// What is asked, in words.
    pub prompt: String,
    /// `mechanical`, … (the iteration's classification).
    pub classification: String,
    /// `trivial` or `non-trivial`.
    pub sub_class: String,
    /// Why the cadence matrix asks.
    pub reason: String,
    /// The failed checks of the iteration.
    #[serde(default)]
    pub checks: Vec<String>,
    /// The log lines that decided the classification.
    #[serde(default)]
    pub evidence: Vec<GateEvidence>,
    /// The files the patch changes.
    pub write_set: Vec<String>,
    /// The commit the patch was made on: it lands only while the tree is
    /// still there.
    pub base: String,
    /// The patch's commit (full id), made in the engine's worktree.
    pub commit: String,
    /// The commit's subject.
    pub message: String,
    /// The engine branch that keeps the commit until it lands or is dropped.
    pub keep_branch: String,
    /// The engine worktree on `keep_branch` (outside the repository).
    pub keep_path: std::path::PathBuf,
    /// The patch as a unified diff (what the person reviews).
    #[serde(default)]
    pub diff: String,
    /// Warnings of the iteration so far.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What the agent spent on the patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_spend: Option<orchestrator_core::agent::AgentSpend>,
    /// When the run stopped here (RFC 3339).
    pub asked_at: String,
    /// The command that goes on from here once answered (the CLI's own
    /// arguments, without the program name); empty when the embedder gave
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resume: Vec<String>,
    /// The answer, once given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<GateAnswer>,
}

/// One deciding log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateEvidence {
    /// 1-based line in the log.
    pub line: usize,
    /// The rule that matched.
    pub rule: String,
    /// The line.
    pub text: String,
}

/// What the person decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateDecision {
    /// Land (and push) the kept commit, as a confirmed run does.
    Approve,
    /// Drop the kept commit and escalate.
    Decline,
}

impl GateDecision {
    /// `approve` or `decline`.
    pub fn as_str(self) -> &'static str {
        match self {
            GateDecision::Approve => "approve",
            GateDecision::Decline => "decline",
        }
    }
}

/// Who answered a gate, in the style of planex's approvals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnsweredBy {
    /// The run's own gate (a terminal prompt, `-y`) when it resumed.
    Gate,
    /// `orchestrator ci-autofix approve|decline`.
    Command,
    /// The dashboard (`orchestrator serve`).
    Dashboard,
}

/// The recorded answer of a gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateAnswer {
    /// Approve or decline.
    pub decision: GateDecision,
    /// When (RFC 3339, UTC).
    pub at: String,
    /// How.
    pub by: AnsweredBy,
    /// Where from, in words (`orchestrator ci-autofix approve (pid 12)`,
    /// `dashboard http://127.0.0.1:8080 (from 127.0.0.1:50012)`).
    pub origin: String,
}
