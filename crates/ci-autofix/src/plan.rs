//! Which target a run works on and where its CI results come from: the
//! choice the CLI used to make itself, with the checks a library user needs
//! too (a handoff is only fixed on the branch it names; a pull request and
//! `push` need a checked-out branch).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::command::CommandRunner;

use crate::handoff::Handoff;
use crate::provider::{CiProvider, GithubConfig, GithubProvider, LocalConfig, LocalProvider};
use crate::state::Target;

/// What the run was asked to fix.
#[derive(Debug, Clone)]
pub enum RunSource {
    /// A CI watcher's handoff: its pull request's failed checks.
    Handoff {
        /// The handoff.
        handoff: Handoff,
        /// Time between two polls of the PR's checks.
        poll_interval: Duration,
        /// How long to wait for pending checks.
        timeout: Duration,
    },
    /// A pull request's failing checks, read with `gh`.
    Pr {
        /// The pull request.
        number: u64,
        /// Time between two polls of the PR's checks.
        poll_interval: Duration,
        /// How long to wait for pending checks.
        timeout: Duration,
    },
    /// Checks run locally.
    Local(LocalConfig),
}

/// The run's target, its provider, and the handoff it came with.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// What the state and audit files are keyed by.
    pub target: Target,
    /// Where check results come from.
    pub provider: Arc<dyn CiProvider>,
    /// The handoff, when the run started from one.
    pub handoff: Option<Handoff>,
}

/// Why a run cannot start on the checked-out tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The handoff names another branch than the checked-out one.
    #[error(
        "the handoff is for branch `{handoff_branch}` but the repository has {} checked out; check out the PR's branch first (`gh pr checkout {pr}`)",
        checked_out.as_deref().map_or_else(|| "a detached HEAD".to_owned(), |b| format!("`{b}`"))
    )]
    WrongBranch {
        /// The handoff's branch.
        handoff_branch: String,
        /// The checked-out branch (`None`: detached).
        checked_out: Option<String>,
        /// The handoff's pull request.
        pr: u64,
    },
    /// A pull request needs its branch checked out.
    #[error("HEAD is detached; check out the branch of PR #{pr} first (`gh pr checkout {pr}`)")]
    DetachedPr {
        /// The pull request.
        pr: u64,
    },
    /// Pushing needs a branch.
    #[error("HEAD is detached; --push needs a checked-out branch")]
    DetachedPush,
}

/// Chooses the target and provider for `source` in the repository at
/// `root`, whose checked-out branch is `branch` (`None`: detached HEAD).
pub fn plan_run(
    source: RunSource,
    branch: Option<String>,
    root: &Path,
    runner: Arc<dyn CommandRunner>,
) -> Result<RunPlan, PlanError> {
    let github = |pr: u64, poll_interval: Duration, timeout: Duration| -> Arc<dyn CiProvider> {
        Arc::new(GithubProvider::new(
            Arc::clone(&runner),
            root,
            GithubConfig {
                pr,
                poll_interval,
                timeout,
            },
        ))
    };
    match source {
        RunSource::Handoff {
            handoff,
            poll_interval,
            timeout,
        } => {
            if branch.as_deref() != Some(handoff.branch.as_str()) {
                return Err(PlanError::WrongBranch {
                    handoff_branch: handoff.branch.clone(),
                    checked_out: branch,
                    pr: handoff.pr_number,
                });
            }
            Ok(RunPlan {
                target: Target::Pr {
                    number: handoff.pr_number,
                    branch: handoff.branch.clone(),
                },
                provider: github(handoff.pr_number, poll_interval, timeout),
                handoff: Some(handoff),
            })
        }
        RunSource::Pr {
            number,
            poll_interval,
            timeout,
        } => {
            let Some(branch) = branch else {
                return Err(PlanError::DetachedPr { pr: number });
            };
            Ok(RunPlan {
                target: Target::Pr { number, branch },
                provider: github(number, poll_interval, timeout),
                handoff: None,
            })
        }
        RunSource::Local(config) => {
            if config.push && branch.is_none() {
                return Err(PlanError::DetachedPush);
            }
            Ok(RunPlan {
                target: Target::Local {
                    branch: branch.unwrap_or_else(|| "HEAD".to_owned()),
                },
                provider: Arc::new(LocalProvider::new(runner, root, config)),
                handoff: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::fakes::ScriptedCommands;

    fn handoff(branch: &str) -> Handoff {
        Handoff::parse(&format!(
            r#"{{"prNumber": 785, "branch": "{branch}", "failedChecks": [{{"name": "Lint"}}]}}"#
        ))
        .unwrap()
    }

    fn runner() -> Arc<dyn CommandRunner> {
        Arc::new(ScriptedCommands::new())
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_handoff_is_only_fixed_on_its_branch() {
        let source = |b: &str| RunSource::Handoff {
            handoff: handoff(b),
            poll_interval: SECOND,
            timeout: SECOND,
        };
        let plan = plan_run(
            source("feat"),
            Some("feat".into()),
            Path::new("/r"),
            runner(),
        )
        .unwrap();
        assert_eq!(
            plan.target,
            Target::Pr {
                number: 785,
                branch: "feat".into()
            }
        );
        assert!(plan.handoff.is_some());
        let err = plan_run(
            source("feat"),
            Some("main".into()),
            Path::new("/r"),
            runner(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the handoff is for branch `feat` but the repository has `main` checked out; check out the PR's branch first (`gh pr checkout 785`)"
        );
        let err = plan_run(source("feat"), None, Path::new("/r"), runner()).unwrap_err();
        assert!(err.to_string().contains("a detached HEAD"), "{err}");
    }

    #[test]
    fn a_pr_and_push_need_a_branch_and_local_runs_on_head() {
        let pr = RunSource::Pr {
            number: 7,
            poll_interval: SECOND,
            timeout: SECOND,
        };
        assert_eq!(
            plan_run(pr, None, Path::new("/r"), runner()).unwrap_err(),
            PlanError::DetachedPr { pr: 7 }
        );
        let local = |push| {
            RunSource::Local(LocalConfig {
                checks: vec!["true".into()],
                base: None,
                push,
                time_limit: None,
            })
        };
        assert_eq!(
            plan_run(local(true), None, Path::new("/r"), runner()).unwrap_err(),
            PlanError::DetachedPush
        );
        let plan = plan_run(local(false), None, Path::new("/r"), runner()).unwrap();
        assert_eq!(
            plan.target,
            Target::Local {
                branch: "HEAD".into()
            }
        );
    }
}
