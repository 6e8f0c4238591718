//! `planex --verify`: the flags of verified execution and the
//! [`Verification`] they make (see `orchestrator_planex::verify`).

use std::sync::Arc;

use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_planex::{CriteriaSource, Planex, ScopeMode, Verification};

use super::Failure;

/// The flags of verified execution.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyFlags {
    /// Verify each task instead of trusting its agent: the files it changed
    /// are measured, a change outside its scope fails it, the engine runs
    /// its execution_directives (or --test-cmd) itself, and a task that
    /// passes lands as its own commit `feat(planex): <title> [<id>]`.
    /// The working tree must be clean; with -c 1 tasks run one at a time
    /// in it, with more each runs in a git worktree of its own and lands by
    /// cherry-pick.
    #[arg(long, global = true)]
    pub verify: bool,

    /// With --verify: what a change outside a task's scope does.
    #[arg(long, global = true, value_enum, default_value_t = ScopeFlag::Enforce, requires = "verify")]
    pub scope_mode: ScopeFlag,

    /// With --verify: the command that verifies a task without
    /// execution_directives (a shell line run in the repository).
    #[arg(long, global = true, value_name = "CMD", requires = "verify")]
    pub test_cmd: Option<String>,

    /// With --verify: accept uncommitted changes; they are never committed,
    /// restored or overwritten (a task that changes one fails, naming it).
    #[arg(long, global = true, requires = "verify")]
    pub allow_dirty: bool,
}

/// `--scope-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeFlag {
    /// The task fails with the paths named, and its change is rolled back.
    Enforce,
    /// A warning names the paths; the task goes on.
    Warn,
}

/// `planex` with the verification the flags ask for (none without
/// `--verify`); the repository must be a git work tree.
pub(super) async fn verified(planex: Planex, flags: &VerifyFlags) -> Result<Planex, Failure> {
    if !flags.verify {
        return Ok(planex);
    }
    let vcs = GitVcs::open(planex.repo())
        .await
        .map_err(|e| Failure::new(format!("--verify needs a git repository: {e}")))?;
    let shell = planex.options().execution.criteria == CriteriaSource::AgentStatus;
    let verification = Verification::new(Arc::new(vcs), Arc::new(ProcessRunner::default()))
        .with_scope_mode(match flags.scope_mode {
            ScopeFlag::Enforce => ScopeMode::Enforce,
            ScopeFlag::Warn => ScopeMode::Warn,
        })
        .with_test_command(flags.test_cmd.clone())
        .with_allow_dirty(flags.allow_dirty)
        .with_executor_runs_directives(shell);
    Ok(planex.with_verification(verification))
}
