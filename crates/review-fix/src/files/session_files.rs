//! The session-level files: the normalised findings, the active-session file
//! (what a resume needs), the history entry and the batch-verification state.

use super::*;

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
    /// Each finding's key in the findings ledger (by finding id), computed
    /// from the files as the findings saw them (absent in older files).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ledger_keys: BTreeMap<String, String>,
    /// Findings the findings ledger left out of the session (fixed,
    /// declined, not fixable by this agent, failed), and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<RejectedFinding>,
    /// Each finding's SARIF `baselineState` against the ledger before the
    /// session (`new`, `unchanged`, `updated`), by finding id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub baseline: BTreeMap<String, String>,
    /// The ledger keys the session's findings no longer have (SARIF
    /// `absent`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<String>,
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

/// A fix whose files are being changed right now in the repository's own
/// working tree (which only older versions fixed in): a resume names it
/// and rolls nothing back. A fix in an engine worktree is not recorded: a
/// resume removes the worktree whole.
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
pub(super) fn paths_as_text<S: serde::Serializer>(
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
    /// Findings deferred to a re-lint pass (ours; absent when zero).
    #[serde(default, skip_serializing_if = "crate::files::is_zero")]
    pub deferred: usize,
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
    /// The attempt that failed (1-based; 0 in sessions written before it
    /// was recorded).
    #[serde(default)]
    pub attempt: u32,
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

pub use orchestrator_core::agent::{AgentSpend, ItemLimits};
