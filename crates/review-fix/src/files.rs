//! The session's files, as typed serde structs.
//!
//! The seed defines `partial-plan-N.json`, `fix-plan.json` and
//! `fix-progress-N.json`; their field names are kept exactly. The seed leaves
//! `fix-summary.md`, `fix-history.json`, `active-fix-session.json` and resume
//! undefined: their schemas are ours, versioned, and documented in
//! `crates/review-fix/FORMATS.md`. Every file is written atomically
//! ([`orchestrator_core::state::write_json_atomic`]).

use std::path::PathBuf;

use orchestrator_core::finding::Finding;
use orchestrator_core::vcs::Checkpoint;
use orchestrator_core::verify::{RunOutcome, VerifyConfig, VerifyMode};
use serde::{Deserialize, Serialize};

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
    /// Completed share, 0–100.
    pub percent_complete: f64,
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
        let in_progress = count(&|x| x.status == ProgressStatus::InProgress);
        let pending = count(&|x| x.status == ProgressStatus::Pending);
        let done = fixed + failed + not_fixable;
        self.summary = ProgressSummary {
            total_findings: total,
            pending,
            in_progress,
            fixed,
            failed,
            not_fixable,
            percent_complete: if total == 0 {
                100.0
            } else {
                ((done as f64) * 1000.0 / (total as f64)).round() / 10.0
            },
        };
    }

    /// The finding entry with this id.
    pub fn finding_mut(&mut self, id: &str) -> Option<&mut ProgressFinding> {
        self.findings.iter_mut().find(|f| f.finding_id == id)
    }
}

/// `findings.json`: the normalised findings of the session (ours), so that a
/// resumed session does not need its inputs again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingsFile {
    /// Format version ([`FINDINGS_VERSION`]).
    pub version: u32,
    /// The findings that were planned.
    pub findings: Vec<Finding>,
    /// Findings rejected before planning.
    pub rejected: Vec<RejectedFinding>,
    /// The re-lint keys of the rejected findings (absent in older files), so
    /// that the next re-lint pass leaves them out like those it tried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected_keys: Vec<String>,
}

/// A finding (or input entry) left out of the session, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedFinding {
    /// The finding id, or the input location for an unreadable entry.
    pub finding_id: String,
    /// The file it points at, when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Why.
    pub reason: String,
}

/// Where the session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionPhase {
    /// Reading inputs and batching.
    Discovery,
    /// Planning batches.
    Planning,
    /// Waiting for the gate to approve the plan.
    AwaitingApproval,
    /// Running stages.
    Executing,
    /// Writing the summary.
    Completing,
}

/// A fix whose files are being changed right now: the checkpoint to restore
/// on resume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    /// The group.
    pub group_id: String,
    /// The finding.
    pub finding_id: String,
    /// The tree the fix is applied in (the repository or a worktree).
    pub tree: PathBuf,
    /// The checkpoint taken before the agent ran.
    pub checkpoint: Checkpoint,
}

/// A worktree the session created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorktreeRecord {
    /// The group working in it.
    pub group_id: String,
    /// Its path.
    pub path: PathBuf,
    /// Its branch.
    pub branch: String,
}

/// Options a session was started with, kept for resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOptions {
    /// Attempts per finding.
    pub max_iterations: u32,
    /// Findings per batch.
    pub batch_size: usize,
    /// Planning agents at once.
    pub max_parallel: usize,
    /// Groups of a parallel stage at once.
    pub max_parallel_groups: usize,
    /// `worktree` or `serial`.
    pub isolation: String,
    /// Whether a dirty tree was allowed.
    pub allow_dirty: bool,
    /// The test command the session started with, as the argv that ran it
    /// (`sh -c …` for a shell line), for a resume to run again; absent when
    /// the caller recorded none. The library never runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_command: Option<Vec<String>>,
}

/// `active-fix-session.json` (ours, versioned): the marker of an unfinished
/// session and everything resume needs. Removed when the session completes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActiveSession {
    /// Format version ([`ACTIVE_SESSION_VERSION`]).
    pub version: u32,
    /// The session id (`fix-{timestamp}`).
    pub fix_session_id: String,
    /// The session directory.
    pub session_dir: PathBuf,
    /// The repository.
    pub repo: PathBuf,
    /// The input files, for the record (resume reads `findings.json`, not
    /// these). A name that is not UTF-8 is written with U+FFFD in place of
    /// its invalid bytes: JSON holds only text.
    #[serde(serialize_with = "paths_as_text")]
    pub inputs: Vec<PathBuf>,
    /// Process id of the engine that holds the session.
    pub pid: u32,
    /// 1 for the first run, +1 per resume.
    pub run: u32,
    /// When the session started.
    pub started_at: String,
    /// Last write.
    pub last_update: String,
    /// Where the session is.
    pub phase: SessionPhase,
    /// HEAD of the checked-out branch when the session started: fix commits
    /// are found in the log since this commit.
    pub base_head: String,
    /// The checked-out branch.
    pub branch: Option<String>,
    /// Files dirty or untracked before the session: never touched.
    pub dirty_before: Vec<String>,
    /// Options.
    pub options: SessionOptions,
    /// Fixes in flight.
    #[serde(default)]
    pub in_flight: Vec<InFlight>,
    /// Worktrees alive.
    #[serde(default)]
    pub worktrees: Vec<WorktreeRecord>,
    /// Stages finished.
    #[serde(default)]
    pub stages_completed: Vec<u32>,
}

/// Serializes paths as text, lossily where a path is not UTF-8.
fn paths_as_text<S: serde::Serializer>(
    paths: &[PathBuf],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(paths.iter().map(|p| p.to_string_lossy()))
}

/// One run of a session in `fix-history.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The session.
    pub fix_session_id: String,
    /// The run number.
    pub run: u32,
    /// Whether the run resumed an earlier one.
    pub resumed: bool,
    /// When the run started.
    pub started_at: String,
    /// When it ended.
    pub finished_at: String,
    /// `all_fixed`, `some_failed`, `needs_human`, `stopped`.
    pub outcome: String,
    /// Findings read.
    pub total_findings: usize,
    /// Findings fixed.
    pub fixed: usize,
    /// Findings failed.
    pub failed: usize,
    /// Findings the agent declined as not fixable by it (ours).
    #[serde(default)]
    pub not_fixable: usize,
    /// Findings rejected before planning.
    pub rejected: usize,
    /// Commits on the checked-out branch, oldest first.
    pub commits: Vec<String>,
    /// Test runs made in this run.
    pub test_runs: u32,
    /// How the run verified fixes and what it saved (absent in entries
    /// written before batch verification).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<VerificationStats>,
}

/// Test runs of a run, and what testing every fix on its own would have
/// needed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerificationStats {
    /// The mode fixes were verified with (`each`, `batch`, `auto`; `each`
    /// when serial isolation forced it).
    pub mode: VerifyMode,
    /// Test runs made, re-runs included.
    pub test_runs: u32,
    /// Of which re-runs of an identical tree to rule out a flaky failure.
    pub reruns: u32,
    /// What `each` would have needed for the same decisions: one run per
    /// tested fix plus the same re-runs.
    pub each_runs: u32,
    /// Failures that passed on a re-run of the identical tree (the fix was
    /// kept).
    pub flaky: u32,
}

impl VerificationStats {
    /// `each_runs − test_runs` (negative when batching cost more).
    pub fn runs_saved(&self) -> i64 {
        i64::from(self.each_runs) - i64::from(self.test_runs)
    }
}

/// Version of `verify-state.json`.
pub const VERIFY_STATE_VERSION: u32 = 1;

/// A failed attempt whose result is known: the same change fails again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownFailure {
    /// Digest of the attempt's changed paths and contents.
    pub digest: String,
    /// The failure fed back to the agent.
    pub message: String,
}

/// One fix waiting in the landing queue of a batch verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedFix {
    /// The finding.
    pub finding_id: String,
    /// Its group.
    pub group_id: String,
    /// A commit holding exactly the fix (its parent is wherever it was
    /// made); `None` when the fix must be made again (after a drop).
    pub commit: Option<String>,
    /// Digest of the fix's change, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Fix attempts made so far.
    pub attempts: u32,
    /// The failing output to feed into the next attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Attempts that failed, by digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<KnownFailure>,
}

/// `verify-state.json` (ours, versioned): the batch verification of a stage
/// in flight. The verifier is deterministic, so the queue, its
/// configuration and the outcomes recorded so far rebuild it exactly
/// (`Verifier::resume`); removed when the stage's verification ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyState {
    /// Format version ([`VERIFY_STATE_VERSION`]).
    pub version: u32,
    /// The stage.
    pub stage: u32,
    /// The current segment (a new one starts after each drop or removal).
    pub segment: u32,
    /// The verifier's configuration for this segment (priors carry the
    /// session's earlier decisions).
    pub config: VerifyConfig,
    /// The fixes still to decide, in landing order.
    pub queue: Vec<QueuedFix>,
    /// Outcomes of the segment's test runs, in run order.
    pub outcomes: Vec<RunOutcome>,
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
