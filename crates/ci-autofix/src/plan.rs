//! Which target a run works on and where its CI results come from: the
//! choice the CLI used to make itself. A pull request's fix is made on the
//! PR's head whatever is checked out (the loop reads the head and checks
//! the handoff's branch against it, see `pr_head`); `push` in local mode
//! needs a checked-out branch.

use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::command::CommandRunner;
use orchestrator_core::vcs::Vcs;

use crate::handoff::Handoff;
use orchestrator_core::forge::{Forge, ForgeKind};

use crate::provider::{
    CiProvider, ForgeProvider, GithubConfig, GithubProvider, LocalConfig, LocalProvider,
};
use crate::state::Target;

/// How a GitHub run polls: between polls, in all, and how long a head may
/// show no check at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Polling {
    /// Time between two polls of the PR's checks.
    pub poll_interval: Duration,
    /// How long to wait for pending checks.
    pub timeout: Duration,
    /// How long a head may have no check at all before the run ends with
    /// "no checks" (CI may take a moment to start).
    pub no_checks_grace: Duration,
}

/// What the run was asked to fix.
#[derive(Debug, Clone)]
pub enum RunSource {
    /// A CI watcher's handoff: its pull request's failed checks.
    Handoff {
        /// The handoff.
        handoff: Handoff,
        /// How to poll.
        polling: Polling,
    },
    /// A pull request's failing checks, read with `gh`.
    Pr {
        /// The pull request.
        number: u64,
        /// How to poll.
        polling: Polling,
    },
    /// A request's pipeline on a forge (a GitLab merge request).
    Forge {
        /// The forge.
        forge: Arc<dyn Forge>,
        /// The request.
        number: u64,
        /// How to poll.
        polling: Polling,
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
#[non_exhaustive]
pub enum PlanError {
    /// Pushing needs a branch.
    #[error("HEAD is detached; --push needs a checked-out branch")]
    DetachedPush,
}

/// Chooses the target and provider for `source` in the repository `vcs`,
/// whose checked-out branch is `branch` (`None`: detached HEAD).
pub fn plan_run(
    source: RunSource,
    branch: Option<String>,
    vcs: Arc<dyn Vcs>,
    runner: Arc<dyn CommandRunner>,
) -> Result<RunPlan, PlanError> {
    let root = vcs.root().to_path_buf();
    let github = |pr: u64, p: Polling| -> Arc<dyn CiProvider> {
        Arc::new(GithubProvider::new(
            Arc::clone(&runner),
            &root,
            GithubConfig {
                pr,
                poll_interval: p.poll_interval,
                timeout: p.timeout,
                no_checks_grace: p.no_checks_grace,
            },
        ))
    };
    match source {
        RunSource::Handoff { handoff, polling } => Ok(RunPlan {
            target: Target::Pr {
                number: handoff.pr_number,
                branch: handoff.branch.clone(),
                forge: ForgeKind::Github,
            },
            provider: github(handoff.pr_number, polling),
            handoff: Some(handoff),
        }),
        RunSource::Pr { number, polling } => Ok(RunPlan {
            target: Target::Pr {
                number,
                branch: branch.unwrap_or_else(|| "HEAD".to_owned()),
                forge: ForgeKind::Github,
            },
            provider: github(number, polling),
            handoff: None,
        }),
        RunSource::Forge {
            forge,
            number,
            polling: p,
        } => Ok(RunPlan {
            target: Target::Pr {
                number,
                branch: branch.unwrap_or_else(|| "HEAD".to_owned()),
                forge: forge.kind(),
            },
            provider: Arc::new(ForgeProvider::new(
                forge,
                GithubConfig {
                    pr: number,
                    poll_interval: p.poll_interval,
                    timeout: p.timeout,
                    no_checks_grace: p.no_checks_grace,
                },
            )),
            handoff: None,
        }),
        RunSource::Local(config) => {
            if config.push && branch.is_none() {
                return Err(PlanError::DetachedPush);
            }
            Ok(RunPlan {
                target: Target::Local {
                    branch: branch.unwrap_or_else(|| "HEAD".to_owned()),
                },
                provider: Arc::new(
                    LocalProvider::new(Arc::clone(&runner), &root, config).with_vcs(vcs),
                ),
                handoff: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::fakes::{FakeVcs, ScriptedCommands};

    fn runner() -> Arc<dyn CommandRunner> {
        Arc::new(ScriptedCommands::new())
    }

    #[test]
    fn push_needs_a_branch_and_local_runs_on_head() {
        let dir = tempfile::tempdir().unwrap();
        let vcs: Arc<dyn Vcs> = Arc::new(FakeVcs::init(dir.path()).unwrap());
        let local = |push| {
            RunSource::Local(LocalConfig {
                checks: vec!["true".into()],
                base: None,
                push,
                time_limit: None,
            })
        };
        assert_eq!(
            plan_run(local(true), None, Arc::clone(&vcs), runner()).unwrap_err(),
            PlanError::DetachedPush
        );
        let plan = plan_run(local(false), None, Arc::clone(&vcs), runner()).unwrap();
        assert_eq!(
            plan.target,
            Target::Local {
                branch: "HEAD".into()
            }
        );
        // A pull request runs whatever is checked out: the loop finds its head.
        let polling = Polling {
            poll_interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            no_checks_grace: Duration::from_secs(1),
        };
        let plan = plan_run(RunSource::Pr { number: 7, polling }, None, vcs, runner()).unwrap();
        assert_eq!(
            plan.target,
            Target::Pr {
                number: 7,
                branch: "HEAD".into(),
                forge: ForgeKind::Github,
            }
        );
    }
}
