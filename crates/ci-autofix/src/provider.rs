//! Where failed checks and their logs come from: [`CiProvider`].
//!
//! - [`GithubProvider`] drives the `gh` CLI through a [`CommandRunner`]: a
//!   pull request's head ([`PrHead`]) and checks, the latest attempt of
//!   each, which of them are required, each failed job's log, re-runs of a
//!   job (details in the `github` module).
//! - [`ForgeProvider`] polls any core `Forge` (GitLab merge requests'
//!   pipelines): the request's head, its newest pipeline's failed jobs and
//!   their traces, job retries (details in the `forge` module).
//! - [`LocalProvider`] runs configured check commands (`sh -c <cmd>`) in the
//!   repository and keeps the output of the failing ones as their logs; its
//!   git calls (the working change) go through the guarded [`Vcs`].
//!
//! Neither spawns a process itself: the runner and the `Vcs` do (the real
//! ones live in `orchestrator-adapters`).
//!
//! [`Vcs`]: orchestrator_core::vcs::Vcs

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::command::{CommandRunner, CommandSpec};

use crate::handoff::{FailedCheck, Handoff};

mod forge;
mod github;
mod local;
mod rollup;
pub use forge::ForgeProvider;
pub use github::{GithubConfig, GithubProvider};
pub use local::*;
pub use rollup::{PR_VIEW_FIELDS, PrHead};

/// `gh run view --log-failed` output is capped at 200 KB (the tail is kept).
pub const LOG_CAP: usize = 200 * 1024;

/// Why a provider call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// A command could not run or exited non-zero.
    #[error("`{command}` failed{}: {stderr}", status.map(|s| format!(" with exit status {s}")).unwrap_or_default())]
    Command {
        /// The command line.
        command: String,
        /// Exit status, if it exited.
        status: Option<i32>,
        /// Its standard error (or the spawn error).
        stderr: String,
    },
    /// A failed check has no run id to fetch its log with.
    #[error(
        "failed check `{check}` has no run id (neither `runId` nor a `/actions/runs/<id>/` logUrl)"
    )]
    NoRunId {
        /// The check's name.
        check: String,
    },
    /// Local mode has nothing to diff the working change against.
    #[error(
        "no base to diff the working change against: the branch has no upstream ({stderr}); pass --base <REF>"
    )]
    NoBase {
        /// What `git rev-parse @{{upstream}}` said.
        stderr: String,
    },
    /// A `--base` that git would read as an option.
    #[error("--base {base:?} is not a ref (it starts with `-`)")]
    BadBase {
        /// The value given.
        base: String,
    },
    /// Output could not be parsed.
    #[error("could not parse the output of `{command}`: {message}")]
    Parse {
        /// The command line.
        command: String,
        /// What was wrong.
        message: String,
    },
}

/// The log of one failed check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLog {
    /// The check's name.
    pub name: String,
    /// Its log (empty when it has none).
    pub log: String,
    /// Why the check cannot be fixed from a log (a commit status of another
    /// CI has none); `None` for a log to classify and fix.
    pub not_fixable: Option<String>,
}

impl CheckLog {
    /// The log of check `name`.
    pub fn new(name: &str, log: String) -> Self {
        Self {
            name: name.to_owned(),
            log,
            not_fixable: None,
        }
    }

    /// Check `name`, which has no log to fix it from, and why.
    pub fn not_fixable(name: &str, reason: String) -> Self {
        Self {
            name: name.to_owned(),
            log: String::new(),
            not_fixable: Some(reason),
        }
    }
}

/// The state of the required checks after waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckRun {
    /// All required checks passed.
    Green,
    /// These required checks failed.
    Failed(Vec<FailedCheck>),
    /// Checks were still pending when the time limit ran out.
    TimedOut,
    /// No check was reported on this head commit within the grace period:
    /// nothing to wait for, nothing to fix.
    NoChecks {
        /// The head commit.
        head: String,
    },
}

/// How a re-run of one failed check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RerunOutcome {
    /// It passed at the same commit.
    Passed,
    /// It failed again; the new attempt (its log is read from it).
    Failed(FailedCheck),
    /// Still running at the time limit.
    TimedOut,
    /// The provider cannot re-run this check.
    Unsupported,
}

/// The counts a watcher handoff carries besides the failed checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CheckCounts {
    /// How many required checks there are (`totalRequired`).
    pub total_required: u64,
    /// How many checks that are not required failed (`auxiliaryFailCount`).
    pub auxiliary_failed: u64,
}

/// A source of CI results. Object-safe.
#[async_trait]
pub trait CiProvider: Send + Sync + fmt::Debug {
    /// Whether fixes are pushed (GitHub) or only committed (local, unless configured).
    fn pushes(&self) -> bool;

    /// Runs or waits for the required checks. With `head` (the commit just
    /// pushed), a provider that reads a remote CI waits until the results
    /// are that commit's; local checks run on the tree as it is.
    async fn wait_for_checks(&self, head: Option<&str>) -> Result<CheckRun, ProviderError>;

    /// The log of each failed check (an error if any log cannot be fetched).
    async fn failed_logs(&self, checks: &[FailedCheck]) -> Result<Vec<CheckLog>, ProviderError>;

    /// The change under test (PR diff), for the agent's context. A failure
    /// here is only a warning for the loop.
    async fn diff(&self) -> Result<String, ProviderError>;

    /// The counts for a handoff of the last finished
    /// [`CiProvider::wait_for_checks`]; `None` when unknown (the handoff then
    /// says 0). The default knows nothing.
    async fn check_counts(&self) -> Result<Option<CheckCounts>, ProviderError> {
        Ok(None)
    }

    /// The command lines of the checks when the provider runs them itself
    /// (local mode), so the fixing agent may be allowed to run them; empty
    /// for a remote CI (the default), whose commands are not known here.
    fn check_commands(&self) -> Vec<String> {
        Vec::new()
    }

    /// The pull request's head, read now; `None` for a provider without
    /// one (local checks, the default).
    async fn pr_head(&self) -> Result<Option<PrHead>, ProviderError> {
        Ok(None)
    }

    /// The pull request's head as the last poll saw it, without asking.
    fn seen_head(&self) -> Option<PrHead> {
        None
    }

    /// Re-runs one failed check at the same commit and waits for it. The
    /// default cannot.
    async fn rerun(&self, check: &FailedCheck) -> Result<RerunOutcome, ProviderError> {
        let _ = check;
        Ok(RerunOutcome::Unsupported)
    }

    /// What the provider has to tell the run once (e.g. "the base branch
    /// requires no checks: every check counts"), each said once; taken
    /// out by the call.
    fn take_notices(&self) -> Vec<String> {
        Vec::new()
    }
}

fn keep_tail(mut text: String, cap: usize) -> String {
    if text.len() <= cap {
        return text;
    }
    let mut cut = text.len() - cap;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.replace_range(..cut, "");
    text
}

/// What [`watch`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchOutcome {
    /// All required checks passed (exit 0).
    Green,
    /// Some failed: the handoff for the fix loop (exit 1).
    Failed(Handoff),
    /// Still pending at the time limit (exit 3).
    TimedOut,
    /// No check at all on the head after the grace period (exit 3).
    NoChecks {
        /// The head commit.
        head: String,
    },
}

impl WatchOutcome {
    /// The exit code, from the table every command shares: 0 green, 1 a
    /// required check failed (the job ran and something failed), 3 a person
    /// must look (still pending at the time limit, or no CI ran at all);
    /// 2 is bad usage.
    pub fn exit_code(&self) -> i32 {
        match self {
            WatchOutcome::Green => 0,
            WatchOutcome::Failed(_) => 1,
            WatchOutcome::TimedOut | WatchOutcome::NoChecks { .. } => 3,
        }
    }
}

/// The CI watcher: waits for the required checks of `pr`. A failure's
/// handoff names the PR's head branch as the provider saw it (else
/// `branch`) and carries the provider's [`CiProvider::check_counts`] (an
/// error fetching them is an error of the watch).
pub async fn watch(
    provider: &dyn CiProvider,
    pr: u64,
    branch: &str,
) -> Result<WatchOutcome, ProviderError> {
    Ok(match provider.wait_for_checks(None).await? {
        CheckRun::Green => WatchOutcome::Green,
        CheckRun::TimedOut => WatchOutcome::TimedOut,
        CheckRun::NoChecks { head } => WatchOutcome::NoChecks { head },
        CheckRun::Failed(failed_checks) => {
            let counts = provider.check_counts().await?.unwrap_or_default();
            let branch = provider
                .seen_head()
                .map_or_else(|| branch.to_owned(), |h| h.branch);
            WatchOutcome::Failed(Handoff {
                pr_number: pr,
                branch,
                total_required: counts.total_required,
                auxiliary_fail_count: counts.auxiliary_failed,
                failed_checks,
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::fakes::ScriptedCommands;

    #[tokio::test]
    async fn local_counts_every_check_as_required() {
        let local = LocalProvider::new(
            Arc::new(ScriptedCommands::new()),
            "/repo",
            LocalConfig {
                checks: vec!["a".into(), "b".into(), "c".into()],
                base: None,
                push: false,
                time_limit: None,
            },
        );
        assert_eq!(
            local.check_counts().await.unwrap(),
            Some(CheckCounts {
                total_required: 3,
                auxiliary_failed: 0
            })
        );
    }

    #[test]
    fn the_tail_of_a_long_log_is_kept() {
        let big = format!("{}END", "é".repeat(LOG_CAP));
        let kept = keep_tail(big, LOG_CAP);
        assert!(kept.len() <= LOG_CAP && kept.ends_with("END"));
    }

    #[tokio::test]
    async fn local_checks_run_through_the_shell_and_keep_failing_output() {
        let runner = Arc::new(
            ScriptedCommands::new()
                .on("cargo fmt --check", 1, "Diff in /r/src/lib.rs:1:\n")
                .on("cargo test", 0, "ok"),
        );
        let p = LocalProvider::new(
            runner.clone(),
            "/repo",
            LocalConfig {
                checks: vec!["cargo fmt --check".into(), "cargo test".into()],
                base: None,
                push: false,
                time_limit: None,
            },
        );
        let CheckRun::Failed(failed) = p.wait_for_checks(None).await.unwrap() else {
            panic!("expected a failure")
        };
        assert_eq!(failed.len(), 1);
        let logs = p.failed_logs(&failed).await.unwrap();
        assert_eq!(logs[0].log, "Diff in /r/src/lib.rs:1:\n");
        assert_eq!(runner.calls()[0].program, "sh");
        assert!(!p.pushes());
    }

    /// `--local --rerun-before-fix`: a failed check runs again as it is; a
    /// pass is reported, a failure keeps its new log.
    #[tokio::test]
    async fn a_local_check_is_rerun_by_running_it_again() {
        let runner = Arc::new(
            ScriptedCommands::new()
                .on("cargo test", 101, "test a ... FAILED\n")
                .on("cargo test", 0, "ok")
                .on("cargo test", 101, "test a ... FAILED\n")
                .on("cargo test", 101, "test b ... FAILED\n"),
        );
        let p = LocalProvider::new(
            runner,
            "/repo",
            LocalConfig {
                checks: vec!["cargo test".into()],
                ..LocalConfig::default()
            },
        );
        let CheckRun::Failed(failed) = p.wait_for_checks(None).await.unwrap() else {
            panic!("expected a failure")
        };
        assert_eq!(p.rerun(&failed[0]).await.unwrap(), RerunOutcome::Passed);
        let CheckRun::Failed(failed) = p.wait_for_checks(None).await.unwrap() else {
            panic!("expected a failure")
        };
        let RerunOutcome::Failed(again) = p.rerun(&failed[0]).await.unwrap() else {
            panic!("expected a second failure")
        };
        let logs = p.failed_logs(&[again]).await.unwrap();
        assert_eq!(logs[0].log, "test b ... FAILED\n", "the re-run's own log");
        let unknown = FailedCheck {
            name: "lint".into(),
            run_id: None,
            log_url: None,
            conclusion_detail: None,
        };
        assert_eq!(p.rerun(&unknown).await.unwrap(), RerunOutcome::Unsupported);
    }
}
