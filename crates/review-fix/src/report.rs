//! What a run returns: its outcome and every finding's end.

use crate::*;

/// How a run ended; maps to the CLI's exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every finding was fixed (exit 0).
    AllFixed,
    /// Some findings failed, were not fixable or were rejected (exit 1).
    SomeFailed,
    /// The plan was written and nothing executed (exit 0).
    DryRun,
    /// The gate declined the plan; the session stays resumable (exit 1).
    Stopped,
    /// The gate needs a human; the session stays resumable (exit 3).
    NeedsHuman {
        /// Why.
        reason: String,
    },
    /// A run limit of the agent (`[budget]`: cost, tokens, calls, wall
    /// time) was reached: no further fix started, the fixes verified so
    /// far are committed, the rest are pending, and the session stays
    /// resumable (exit 3), with a higher limit if need be.
    LimitReached {
        /// Which limit, and what was spent.
        reason: String,
    },
}

impl Outcome {
    /// The process exit code: 0 all fixed or dry run, 1 some failed or
    /// stopped, 3 a gate needs a human or a run limit was reached. (2, unreadable input or wrong usage,
    /// is [`ReviewFixError::exit_code`].)
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::AllFixed | Outcome::DryRun => 0,
            Outcome::SomeFailed | Outcome::Stopped => 1,
            Outcome::NeedsHuman { .. } | Outcome::LimitReached { .. } => 3,
        }
    }

    /// The name used in `fix-history.json`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::AllFixed => "all_fixed",
            Outcome::SomeFailed => "some_failed",
            Outcome::DryRun => "dry_run",
            Outcome::Stopped => "stopped",
            Outcome::NeedsHuman { .. } => "needs_human",
            Outcome::LimitReached { .. } => "limit_reached",
        }
    }
}

/// How one finding ended, for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingReport {
    /// The finding id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// `fixed`, `failed`, `not_fixable` (declined by the agent), `deferred`
    /// (overlaps an earlier fix; a re-lint pass tries it again), `rejected`
    /// or `pending`.
    pub result: String,
    /// Attempts made.
    pub attempts: u32,
    /// The commit on the checked-out branch.
    pub commit: Option<String>,
    /// Why it failed or was rejected.
    pub error: Option<String>,
    /// What the agent spent on it, when it was called.
    pub spend: Option<crate::files::AgentSpend>,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The session id.
    pub fix_session_id: String,
    /// The session directory.
    pub session_dir: PathBuf,
    /// How it ended.
    pub outcome: Outcome,
    /// The plan, when there is one.
    pub plan: Option<FixPlan>,
    /// Every finding.
    pub findings: Vec<FindingReport>,
    /// The session's commits on the checked-out branch, oldest first.
    pub commits: Vec<CommitInfo>,
    /// Test runs in this run.
    pub test_runs: u32,
    /// How fixes were verified: test runs, re-runs, what `each` would have
    /// needed, flaky failures.
    pub verification: VerificationStats,
    /// Notes for the user (formats read, duplicates dropped).
    pub notes: Vec<String>,
}

impl RunReport {
    /// Findings with the given result.
    pub fn count(&self, result: &str) -> usize {
        self.findings.iter().filter(|f| f.result == result).count()
    }

    /// What the agent spent on every finding, with cost and test runs per
    /// verified fix (`None` when no agent was called).
    pub fn spend_line(&self) -> Option<String> {
        crate::summary::spend_line(
            self.findings.iter().filter_map(|f| f.spend.as_ref()),
            self.count("fixed"),
            self.test_runs,
        )
    }
}
