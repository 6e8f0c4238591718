//! Verified execution, planex's default: the flags that shape it or opt
//! out of it (`--no-commit`), and the [`Verification`] they make (see
//! `orchestrator_planex::verify`).

use std::path::Path;
use std::sync::Arc;

use orchestrator_adapters::git::GitVcs;
use orchestrator_planex::{CriteriaSource, Planex, ScopeMode, Verification, session_verified};

use super::{Action, Failure};

/// The flags of verified execution.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyFlags {
    /// Verify each task (the default; accepted to say so explicitly): the
    /// files it changed are measured, a change outside its scope fails it,
    /// the engine runs its execution_directives (or --test-cmd) itself, and
    /// a task that passes lands as its own commit `feat(planex): <title>
    /// [<id>]`. The working tree must be a clean git work tree; with -c 1
    /// tasks run one at a time in it, with more each runs in a git worktree
    /// of its own and lands by cherry-pick.
    #[arg(long, global = true, conflicts_with = "no_commit")]
    pub verify: bool,

    /// Trust the agents and leave their changes uncommitted in the working
    /// tree (no git needed). Tasks then share the tree: an LLM agent's tasks
    /// run one at a time; the shell agent's directives still run -c at once.
    /// A session keeps the mode its first execution ran in.
    #[arg(long, global = true)]
    pub no_commit: bool,

    /// What a change outside a task's scope does.
    #[arg(long, global = true, value_enum, default_value_t = ScopeFlag::Enforce)]
    pub scope_mode: ScopeFlag,

    /// The command that verifies a task without execution_directives (a
    /// shell line run in the repository).
    #[arg(long, global = true, value_name = "CMD", conflicts_with = "no_commit")]
    pub test_cmd: Option<String>,

    /// Accept uncommitted changes; they are never committed, restored or
    /// overwritten (a task whose change would touch one waits, verified and
    /// kept, naming it: commit or stash yours, then `--continue`).
    #[arg(long, global = true, conflicts_with = "no_commit")]
    pub allow_dirty: bool,
    /// Where tasks' checks run: `local`, or `ray` / `ray=http://head:8265`
    /// for jobs on a Ray cluster (`[runner]` in orchestrator.toml;
    /// RAY_ADDRESS); -c is then bounded by its CPUs. The shell agent's
    /// directives run there too, their file changes brought back.
    #[arg(long, global = true, value_name = "local|ray[=URL]")]
    pub runner: Option<String>,
}

/// `--scope-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeFlag {
    /// The task fails with the paths named, and its change is rolled back.
    Enforce,
    /// A warning names the paths; the task goes on.
    Warn,
}

/// Whether the tasks of `action` are verified: not with `--no-commit` nor
/// when nothing executes (`--plan-only`); a continued session keeps the
/// mode its first execution ran in unless a flag says otherwise; else yes.
pub(super) fn wanted(flags: &VerifyFlags, action: &Action, plan_only: bool, repo: &Path) -> bool {
    if flags.no_commit || plan_only {
        return false;
    }
    if flags.verify || flags.allow_dirty || flags.test_cmd.is_some() {
        return true;
    }
    match action {
        // An unknown session is the flow's error to report, unverified or not.
        Action::Continue(id) | Action::RetryFailed(id) => {
            session_verified(repo, id.as_deref()).is_ok_and(|mode| mode.unwrap_or(true))
        }
        Action::Plan(_) | Action::Run(_) => true,
    }
}

/// The Ray runner `--runner` and `[runner]` ask for, checked; `None` to
/// run the checks here.
pub(super) fn remote(
    repo: &Path,
    files: &crate::setup::ConfigFiles,
    flags: &VerifyFlags,
) -> Result<Option<crate::remote::Remote>, Failure> {
    crate::remote::for_repo(repo, files, flags.runner.as_deref())
        .map_err(|e| Failure::new(format!("--runner: {e}")))
}

/// `planex` with verification when `on`; the repository must then be a
/// git work tree.
pub(super) async fn verified(
    planex: Planex,
    flags: &VerifyFlags,
    on: bool,
    provisioner: Option<Arc<dyn orchestrator_core::worktree::Provisioner>>,
    remote: Option<&crate::remote::Remote>,
) -> Result<Planex, Failure> {
    if !on {
        return Ok(planex);
    }
    let vcs = GitVcs::open(planex.repo()).await.map_err(|e| {
        Failure::new(format!(
            "planex verifies each task and lands it as a commit, which needs a git work tree ({e}); \
             run it in one (`git init` and commit), or pass --no-commit to leave the agents' \
             changes unverified in the tree"
        ))
    })?;
    let shell = planex.options().execution.criteria == CriteriaSource::AgentStatus;
    let verification = Verification::new(
        Arc::new(vcs),
        remote.map_or_else(
            || Arc::new(orchestrator_adapters::process::ProcessRunner::default()) as _,
            crate::remote::Remote::command_runner,
        ),
    )
    .with_scope_mode(match flags.scope_mode {
        ScopeFlag::Enforce => ScopeMode::Enforce,
        ScopeFlag::Warn => ScopeMode::Warn,
    })
    .with_test_command(flags.test_cmd.clone())
    .with_allow_dirty(flags.allow_dirty)
    .with_provisioner(provisioner)
    .with_executor_runs_directives(shell);
    Ok(planex.with_verification(verification))
}
