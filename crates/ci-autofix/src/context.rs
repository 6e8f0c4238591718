//! What one ci-autofix run is given and how it can fail: its settings
//! ([`AutofixConfig`]), what it talks to ([`AutofixContext`]), its error
//! ([`AutofixError`]), and the paths no automatic fix may change
//! ([`is_protected`]). Shared by the loop (`fix_loop`) and the tree the
//! agent works in (`fix_tree`), which both depend on it and not on each
//! other's way up.

use std::sync::Arc;

use jiff::Timestamp;
use orchestrator_core::agent::{Agent, ItemLimits};
use orchestrator_core::event::EventSink;
use orchestrator_core::gate::Gate;
use orchestrator_core::vcs::{Vcs, VcsError};

use crate::handoff::FailedCheck;
use crate::provider::{CiProvider, ProviderError};
use crate::state::{MOAI_DIR, StateFileError, Target};

/// Settings of one run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AutofixConfig {
    /// What the loop works on.
    pub target: Target,
    /// Iterations before the mandatory escalation (3).
    pub max_iterations: u32,
    /// Accept a dirty tree (its dirty files are never touched).
    pub allow_dirty: bool,
    /// Remote to push to.
    pub remote: String,
    /// Failed checks already known (from a watcher handoff); `None` runs or
    /// waits for the checks first.
    pub initial_failures: Option<Vec<FailedCheck>>,
    /// Extra protected paths (exact repository-relative paths, e.g. the
    /// required-checks config).
    pub protected_paths: Vec<String>,
    /// A fixed clock for reproducible files (tests); `None` is the real clock.
    pub now: Option<Timestamp>,
    /// What the agent may spend on one iteration (its one fix call:
    /// dollars and tokens; `max_calls` does not apply). Passed with the
    /// request, so an agent that can stop itself stops there; a call that
    /// spent past it anyway has its patch discarded, and the iteration
    /// escalates with the limit named.
    pub iteration_limits: ItemLimits,
    /// Gives the temporary worktree of a dirty tree's fix what the project
    /// needs (ignored dependency folders, setup commands) before the agent
    /// runs in it.
    pub provisioner: Option<Arc<dyn orchestrator_core::worktree::Provisioner>>,
    /// Re-run a failed test (a semantic or unknown failure) once at the
    /// same commit before the first fix, to tell a flaky test from broken
    /// code (`--rerun-before-fix`; the CLI's default is on for GitHub).
    pub rerun_before_fix: bool,
    /// The command that goes on from a confirmation gate this run stops at
    /// (the CLI: its own arguments, without the program name), kept with
    /// the gate ([`crate::state::ConfirmGate::resume`]) so that whoever
    /// answers it — a person, the dashboard — can continue the run.
    pub resume_command: Vec<String>,
}

/// Setters, one per field, so the struct (`#[non_exhaustive]`) can be built
/// outside this crate: start from `Default`/`new` and chain them.
impl AutofixConfig {
    /// Sets [`AutofixConfig::target`].
    pub fn with_target(mut self, target: Target) -> Self {
        self.target = target;
        self
    }

    /// Sets [`AutofixConfig::iteration_limits`].
    pub fn with_iteration_limits(mut self, limits: ItemLimits) -> Self {
        self.iteration_limits = limits;
        self
    }

    /// Sets [`AutofixConfig::provisioner`].
    pub fn with_provisioner(
        mut self,
        provisioner: Option<Arc<dyn orchestrator_core::worktree::Provisioner>>,
    ) -> Self {
        self.provisioner = provisioner;
        self
    }

    /// Sets [`AutofixConfig::rerun_before_fix`].
    pub fn with_rerun_before_fix(mut self, rerun: bool) -> Self {
        self.rerun_before_fix = rerun;
        self
    }

    /// Sets [`AutofixConfig::resume_command`].
    pub fn with_resume_command(mut self, command: Vec<String>) -> Self {
        self.resume_command = command;
        self
    }

    /// Sets [`AutofixConfig::max_iterations`].
    pub fn with_max_iterations(mut self, max_iterations: u32) -> Self {
        self.max_iterations = max_iterations;
        self
    }

    /// Sets [`AutofixConfig::allow_dirty`].
    pub fn with_allow_dirty(mut self, allow_dirty: bool) -> Self {
        self.allow_dirty = allow_dirty;
        self
    }

    /// Sets [`AutofixConfig::remote`].
    pub fn with_remote(mut self, remote: String) -> Self {
        self.remote = remote;
        self
    }

    /// Sets [`AutofixConfig::initial_failures`].
    pub fn with_initial_failures(mut self, initial_failures: Option<Vec<FailedCheck>>) -> Self {
        self.initial_failures = initial_failures;
        self
    }

    /// Sets [`AutofixConfig::protected_paths`].
    pub fn with_protected_paths(mut self, protected_paths: Vec<String>) -> Self {
        self.protected_paths = protected_paths;
        self
    }

    /// Sets [`AutofixConfig::now`].
    pub fn with_now(mut self, now: Option<Timestamp>) -> Self {
        self.now = now;
        self
    }
}

impl AutofixConfig {
    /// Defaults for `target`: 3 iterations, clean tree required, remote `origin`.
    pub fn new(target: Target) -> Self {
        Self {
            target,
            max_iterations: orchestrator_core::cadence::DEFAULT_MAX_ITERATIONS,
            allow_dirty: false,
            remote: "origin".into(),
            initial_failures: None,
            protected_paths: Vec::new(),
            now: None,
            iteration_limits: ItemLimits::default(),
            provisioner: None,
            rerun_before_fix: false,
            resume_command: Vec::new(),
        }
    }
}

/// Everything the loop talks to.
#[derive(Debug, Clone)]
pub struct AutofixContext {
    /// The repository.
    pub vcs: Arc<dyn Vcs>,
    /// Proposes patches (edits the tree) and diagnoses.
    pub agent: Arc<dyn Agent>,
    /// Confirmations and escalations.
    pub gate: Arc<dyn Gate>,
    /// The CI.
    pub provider: Arc<dyn CiProvider>,
    /// Progress events.
    pub sink: Arc<dyn EventSink>,
    /// Settings.
    pub config: AutofixConfig,
}

/// Why a run could not proceed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AutofixError {
    /// The pull request's head rules the fix out before any agent call (a
    /// fork that does not allow maintainer edits, local commits the PR
    /// head does not have, a head that moved), or the handoff names
    /// another branch than the PR's head.
    #[error("{reason}")]
    PrHead {
        /// Why, in words.
        reason: String,
    },
    /// The tree has uncommitted changes and `allow_dirty` is off.
    #[error("working tree is dirty ({}); commit or stash them, or pass --allow-dirty", paths.join(", "))]
    DirtyTree {
        /// The dirty paths.
        paths: Vec<String>,
    },
    /// The state file or its lock.
    #[error(transparent)]
    State(Box<StateFileError>),
    /// A git operation.
    #[error("git: {0}")]
    Vcs(#[from] VcsError),
    /// Fetching checks or logs.
    #[error("ci: {0}")]
    Provider(#[from] ProviderError),
    /// The gate failed.
    #[error("gate: {0}")]
    Gate(#[from] orchestrator_core::gate::GateError),
    /// A confirmation gate cannot be answered as asked (none waits, several
    /// do and none was named, or it was answered otherwise before).
    #[error("{reason}")]
    Confirm {
        /// Why, in words.
        reason: String,
    },
    /// A file operation while moving a fix out of its temporary worktree.
    #[error("failed to {what} {}: {source}", path.display())]
    Io {
        /// What was being done ("read", "write", …).
        what: String,
        /// The file or directory.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl From<StateFileError> for AutofixError {
    fn from(e: StateFileError) -> Self {
        AutofixError::State(Box::new(e))
    }
}

impl From<orchestrator_core::state::StateError> for AutofixError {
    fn from(e: orchestrator_core::state::StateError) -> Self {
        AutofixError::State(Box::new(StateFileError::from(e)))
    }
}

/// Whether a repository-relative path must never be changed by an automatic
/// fix: `.env*` files, anything named like credentials, keys or secrets
/// (`*credentials*`, `*_key.json`, `*secret*`), CI workflow files
/// (`.github/workflows/*`), the engine's own `.moai/` folder, and `extra`
/// (e.g. the required-checks configuration).
pub fn is_protected(path: &str, extra: &[String]) -> bool {
    let p = path.trim_start_matches("./");
    let lower = p.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    name.starts_with(".env")
        || lower.contains("credentials")
        || name.ends_with("_key.json")
        || lower.contains("secret")
        || lower.starts_with(".github/workflows/")
        || lower.starts_with(".moai/")
        || lower.starts_with(&format!("{MOAI_DIR}/"))
        || extra.iter().any(|e| e.trim_start_matches("./") == p)
}
