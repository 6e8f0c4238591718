//! How a run ends ([`AutofixOutcome`], with its exit code) and what a fix
//! commit says.

use super::*;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutofixOutcome {
    /// The checks pass (exit 0).
    Green {
        /// Fix commits made.
        commits: Vec<String>,
    },
    /// The checks still fail or are still pending and the loop cannot go on
    /// without a person (exit 1).
    StillFailing {
        /// Why.
        reason: String,
    },
    /// The agent's call was refused at a run limit (`[budget]`): no patch
    /// was made, the iteration is not used up, and running again (with a
    /// higher limit) goes on from the state file (exit 3).
    LimitReached {
        /// Which limit, and what was spent.
        reason: String,
    },
    /// The failed checks all passed when re-run at the same commit: a
    /// flaky test, or an infrastructure failure that cleared. Nothing was
    /// committed (exit 0).
    PassedOnRerun {
        /// `flaky` or `infrastructure`.
        class: Classification,
        /// The checks that passed on their re-run.
        checks: Vec<String>,
        /// The failing tests their logs named, if any.
        tests: Vec<String>,
        /// Check runs started again.
        runs: u32,
        /// Wall time of the re-runs.
        wall: std::time::Duration,
    },
    /// No check was reported on the head commit within the grace period:
    /// nothing ran, so there is nothing to fix (exit 3: a person must see
    /// why no CI runs).
    NoChecks {
        /// The head commit.
        head: String,
    },
    /// The patch needs a person's confirmation and nobody could be asked
    /// (no terminal, or the run was told to stop at its gates): the
    /// verified patch is kept as a commit on an engine branch, the gate is
    /// recorded in the state file, and the next run of the target goes on
    /// from it once it is answered (exit 3, as planex's plan gate).
    AwaitingConfirmation {
        /// The target's key (`785`, `local-main`): what `approve` names.
        key: String,
        /// The iteration whose patch waits.
        iteration: u32,
        /// The kept commit.
        commit: String,
        /// The engine branch keeping it.
        branch: String,
        /// The files it changes.
        write_set: Vec<String>,
    },
    /// A person must decide (exit 3).
    Escalated {
        /// The cadence action that escalated.
        action: Action,
        /// Why.
        reason: String,
        /// The escalation report (markdown).
        report: String,
        /// The option the person chose, if the gate answered.
        choice: Option<String>,
    },
}

impl AutofixOutcome {
    /// Exit code: 0 green (or passed on a re-run), 1 still failing, 3
    /// escalated, waiting for confirmation, stopped at a run limit, or no
    /// checks at all.
    pub fn exit_code(&self) -> i32 {
        match self {
            AutofixOutcome::Green { .. } | AutofixOutcome::PassedOnRerun { .. } => 0,
            AutofixOutcome::StillFailing { .. } => 1,
            AutofixOutcome::Escalated { .. }
            | AutofixOutcome::AwaitingConfirmation { .. }
            | AutofixOutcome::LimitReached { .. }
            | AutofixOutcome::NoChecks { .. } => 3,
        }
    }
}

/// The commit message of a fix: `fix(ci): auto-fix <class> failure (iter <N>)`.
pub fn commit_message(class: Classification, iteration: u32) -> String {
    format!(
        "fix(ci): auto-fix {} failure (iter {iteration})",
        class.as_str()
    )
}
