//! The session's files, as typed serde structs.
//!
//! The seed defines `partial-plan-N.json`, `fix-plan.json` and
//! `fix-progress-N.json`; their field names are kept exactly. The seed leaves
//! `fix-summary.md`, `fix-history.json`, `active-fix-session.json` and resume
//! undefined: their schemas are ours, versioned, and documented in
//! `crates/review-fix/FORMATS.md`. Every file is written atomically
//! ([`orchestrator_core::state::write_json_atomic`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use orchestrator_core::finding::Finding;
use orchestrator_core::vcs::Checkpoint;
use orchestrator_core::verify::{RunOutcome, VerifyConfig, VerifyMode};
use serde::{Deserialize, Serialize};

mod session_files;
pub use session_files::*;

/// Version of `active-fix-session.json`.
pub const ACTIVE_SESSION_VERSION: u32 = 1;
/// Version of `fix-history.json`.
pub const HISTORY_VERSION: u32 = 1;
/// Version of `findings.json`.
pub const FINDINGS_VERSION: u32 = 1;
/// Version written into `fix-summary.md` (an HTML comment on its first line).
pub const SUMMARY_VERSION: u32 = 1;

/// How the groups of a stage run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionMode {
    /// Groups run at the same time, each in its own worktree.
    Parallel,
    /// Groups run one after another in the main tree.
    Serial,
}

/// A group's fix strategy (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixStrategy {
    /// How the findings are fixed.
    pub approach: String,
    /// Why this approach.
    #[serde(default)]
    pub rationale: String,
    /// `low`, `medium` or `high`.
    #[serde(default = "default_complexity")]
    pub complexity: String,
    /// The planner's estimate.
    #[serde(default)]
    pub estimated_duration_minutes: u32,
    /// Test selection, substituted for `{pattern}` in the test command
    /// (empty: the whole suite).
    #[serde(default)]
    pub test_pattern: String,
    /// What happens when a fix breaks the tests.
    #[serde(default)]
    pub rollback_plan: String,
}

fn default_complexity() -> String {
    "medium".to_owned()
}

/// A group's risk assessment (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RiskAssessment {
    /// `low`, `medium` or `high`.
    pub level: String,
    /// What could go wrong.
    #[serde(default)]
    pub concerns: Vec<String>,
    /// How it is contained.
    #[serde(default)]
    pub mitigation: String,
}

/// A group of findings fixed together by one executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanGroup {
    /// `G1`, `G2`, … (local to the batch in a partial plan, global in the
    /// aggregated plan).
    pub group_id: String,
    /// A short name.
    pub group_name: String,
    /// The finding ids, in fixing order.
    pub findings: Vec<String>,
    /// The strategy.
    pub fix_strategy: FixStrategy,
    /// The risk.
    pub risk_assessment: RiskAssessment,
    /// The progress file (aggregated plan only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_file: Option<String>,
    /// The batch the group was planned in (aggregated plan only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<u32>,
    /// The files the group's findings touch (aggregated plan only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// One stage of a timeline (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineStage {
    /// 1-based stage number.
    pub stage: u32,
    /// Group ids in the stage.
    pub groups: Vec<String>,
    /// How its groups run.
    pub execution_mode: ExecutionMode,
    /// Stages that must finish first.
    #[serde(default)]
    pub depends_on: Vec<u32>,
    /// Why the stage looks like this.
    #[serde(default)]
    pub rationale: String,
}

/// Metadata of a partial plan (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartialPlanMetadata {
    /// Findings in the batch.
    pub findings_count: usize,
    /// Groups in the plan.
    pub groups_count: usize,
    /// When the plan was made (RFC 3339).
    pub created_at: String,
    /// Who made it: the agent's name, or `deterministic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner: Option<String>,
    /// Why the deterministic fallback was used, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
}

/// `partial-plan-N.json`: one batch's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartialPlan {
    /// The batch.
    pub batch_id: u32,
    /// Groups with local ids.
    pub groups: Vec<PlanGroup>,
    /// Local timeline.
    pub timeline: Vec<TimelineStage>,
    /// Metadata.
    pub metadata: PartialPlanMetadata,
}

/// `execution_strategy` of the aggregated plan (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionStrategy {
    /// `parallel`, `serial` or `hybrid`.
    pub approach: String,
    /// Groups of a parallel stage run at once.
    pub parallel_limit: usize,
    /// Number of stages.
    pub total_stages: usize,
    /// Why.
    pub rationale: String,
}

/// Metadata of the aggregated plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixPlanMetadata {
    /// Findings planned.
    pub total_findings: usize,
    /// Groups.
    pub total_groups: usize,
    /// Batches planned.
    pub total_batches: usize,
    /// Batches whose plan is the deterministic fallback.
    #[serde(default)]
    pub fallback_batches: Vec<u32>,
    /// `worktree` or `serial`.
    pub isolation: String,
    /// When the plan was aggregated (RFC 3339).
    pub created_at: String,
}

/// `fix-plan.json`: the aggregated plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixPlan {
    /// The fix session.
    pub fix_session_id: String,
    /// Groups `G1..Gn`.
    pub groups: Vec<PlanGroup>,
    /// Global stages, run in order.
    pub timeline: Vec<TimelineStage>,
    /// How the stages run.
    pub execution_strategy: ExecutionStrategy,
    /// Metadata.
    pub metadata: FixPlanMetadata,
}

impl FixPlan {
    /// The group with this id.
    pub fn group(&self, id: &str) -> Option<&PlanGroup> {
        self.groups.iter().find(|g| g.group_id == id)
    }
}

/// Status of a finding or a group in a progress file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProgressStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done (see `result` for how it went).
    Completed,
    /// The group stopped (time limit, unrecoverable error).
    Failed,
}

/// How a finding ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FixResult {
    /// Committed with passing tests.
    Fixed,
    /// Not fixed (tests kept failing, the fix broke something, time limit).
    Failed,
    /// The agent declined it: it cannot fix this kind of finding (the
    /// builtin agent and a finding without a machine-applicable suggestion).
    /// Not attempted again; `not_fixable` in the files (ours, beside the
    /// seed's two values).
    #[serde(rename = "not_fixable")]
    NotFixable,
    /// Its fix overlaps one applied earlier in the same session (the
    /// builtin agent's [`orchestrator_core::agent::AgentError::Conflict`]),
    /// as `cargo fix`, ruff and ESLint skip such a fix within a pass: not
    /// tried again in this session, but a re-lint pass (`--relint`) reports
    /// it at its new place and tries it there. `deferred` in the files
    /// (ours).
    Deferred,
}

/// One finding in a progress file (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressFinding {
    /// The finding id.
    pub finding_id: String,
    /// Its title.
    pub finding_title: String,
    /// Its file.
    pub file: String,
    /// Its line, when known.
    pub line: Option<u32>,
    /// Status.
    pub status: ProgressStatus,
    /// Result once completed.
    pub result: Option<FixResult>,
    /// Fix attempts made.
    pub attempts: u32,
    /// When work on it started.
    pub started_at: Option<String>,
    /// When it completed.
    pub completed_at: Option<String>,
    /// The commit on the checked-out branch (after landing).
    pub commit_hash: Option<String>,
    /// Whether the tests passed with the fix.
    pub test_passed: Option<bool>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// What the agent spent on it (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<AgentSpend>,
}

/// Counts of a progress file (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressSummary {
    /// Findings in the group.
    pub total_findings: usize,
    /// Not started.
    pub pending: usize,
    /// Being worked on.
    pub in_progress: usize,
    /// Fixed.
    pub fixed: usize,
    /// Failed.
    pub failed: usize,
    /// Declined by the agent as not fixable by it (ours).
    #[serde(default)]
    pub not_fixable: usize,
    /// Deferred to a re-lint pass: the fix overlaps an earlier one (ours;
    /// absent when zero).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deferred: usize,
    /// Completed share, 0–100.
    pub percent_complete: f64,
}

/// Whether a count is zero (left out of the files then).
pub(crate) fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The finding being worked on (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrentFinding {
    /// The finding id.
    pub finding_id: String,
    /// Its title.
    pub finding_title: String,
    /// Its file.
    pub file: String,
    /// Its line.
    pub line: Option<u32>,
    /// `analyzing`, `fixing`, `testing` or `committing`.
    pub status: String,
    /// What is being done, for humans.
    pub action: String,
}

/// One flow-control step (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowStep {
    /// `analyze_context`, `apply_fix`, `run_tests`, `commit_changes`.
    pub step: String,
    /// What the step does.
    pub action: String,
    /// `pending`, `in-progress`, `completed` or `failed`.
    pub status: String,
    /// When it started.
    pub started_at: Option<String>,
    /// When it ended.
    pub completed_at: Option<String>,
}

/// Flow control of the current finding (seed field names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowControl {
    /// Steps taken for the current attempt.
    pub implementation_approach: Vec<FlowStep>,
    /// The step in progress.
    pub current_step: Option<String>,
}

/// An error recorded in a progress file (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressError {
    /// The finding, when the error belongs to one.
    pub finding_id: Option<String>,
    /// `test_failure`, `agent_error`, `not_fixable`, `vcs_error`,
    /// `landing_conflict`, `timeout`.
    pub error_type: String,
    /// What happened.
    pub message: String,
    /// When.
    pub timestamp: String,
}

/// `fix-progress-N.json`: one group's live state (seed field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixProgress {
    /// `fix-progress-N`.
    pub progress_id: String,
    /// The group.
    pub group_id: String,
    /// Its name.
    pub group_name: String,
    /// Group status.
    pub status: ProgressStatus,
    /// `pending`, `analyzing`, `fixing`, `testing`, `committing`, `landing`, `done`.
    pub phase: String,
    /// The agent working on the group.
    pub assigned_agent: Option<String>,
    /// When work started.
    pub started_at: Option<String>,
    /// Last write.
    pub last_update: String,
    /// The findings.
    pub findings: Vec<ProgressFinding>,
    /// Counts.
    pub summary: ProgressSummary,
    /// The finding being worked on.
    pub current_finding: Option<CurrentFinding>,
    /// Steps of the current finding.
    pub flow_control: FlowControl,
    /// Errors so far.
    pub errors: Vec<ProgressError>,
    /// How the group's fixes were verified (ours; absent until a test ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<ProgressVerification>,
}

/// The test runs that verified a group's fixes, in a progress file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressVerification {
    /// `each`, `batch` or `auto`.
    pub mode: VerifyMode,
    /// Test runs that tested the group's fixes, re-runs included. With
    /// batch verification a run tests several groups at once: these are the
    /// runs of the group's stage, shared by its groups.
    pub test_runs: u32,
    /// Of which re-runs of an identical tree (flaky checks).
    pub reruns: u32,
    /// What testing one fix at a time would have needed.
    pub each_runs: u32,
    /// `each_runs − test_runs`.
    pub runs_saved: i64,
    /// The group's fixes kept after a flaky failure.
    pub flaky: u32,
}

impl ProgressVerification {
    /// No test run yet, verified `mode`.
    pub fn empty(mode: VerifyMode) -> Self {
        Self {
            mode,
            test_runs: 0,
            reruns: 0,
            each_runs: 0,
            runs_saved: 0,
            flaky: 0,
        }
    }
}

impl FixProgress {
    /// Recomputes `summary` from the findings.
    pub fn recount(&mut self) {
        let total = self.findings.len();
        let count =
            |f: &dyn Fn(&ProgressFinding) -> bool| self.findings.iter().filter(|x| f(x)).count();
        let fixed = count(&|x| x.result == Some(FixResult::Fixed));
        let failed = count(&|x| x.result == Some(FixResult::Failed));
        let not_fixable = count(&|x| x.result == Some(FixResult::NotFixable));
        let deferred = count(&|x| x.result == Some(FixResult::Deferred));
        let in_progress = count(&|x| x.status == ProgressStatus::InProgress);
        let pending = count(&|x| x.status == ProgressStatus::Pending);
        let done = fixed + failed + not_fixable + deferred;
        self.summary = ProgressSummary {
            total_findings: total,
            pending,
            in_progress,
            fixed,
            failed,
            not_fixable,
            deferred,
            percent_complete: if total == 0 {
                100.0
            } else {
                ((done as f64) * 1000.0 / (total as f64)).round() / 10.0
            },
        };
    }

    /// The finding entry with this id.
    pub fn finding(&self, id: &str) -> Option<&ProgressFinding> {
        self.findings.iter().find(|f| f.finding_id == id)
    }

    /// The entry of finding `id`, to change.
    pub fn finding_mut(&mut self, id: &str) -> Option<&mut ProgressFinding> {
        self.findings.iter_mut().find(|f| f.finding_id == id)
    }
}

/// `fix-history.json` (ours, versioned).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixHistory {
    /// Format version ([`HISTORY_VERSION`]).
    pub version: u32,
    /// Runs, oldest first.
    pub entries: Vec<HistoryEntry>,
}

impl Default for FixHistory {
    fn default() -> Self {
        Self {
            version: HISTORY_VERSION,
            entries: Vec::new(),
        }
    }
}

/// The current time as RFC 3339 UTC with second precision.
pub fn now() -> String {
    let ts = jiff::Timestamp::now();
    ts.round(jiff::Unit::Second).unwrap_or(ts).to_string()
}
