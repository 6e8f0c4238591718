//! What a run is told: its configuration, the services it uses, and how
//! it gets a test runner per tree.

use crate::*;

/// How groups run. Either way a group runs in a git worktree of the run's
/// pool, never in the user's tree (where the user may be working), and
/// its verified fixes land on the checked-out branch by cherry-pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Groups of a parallel stage run at once, each in its own worktree.
    #[default]
    Worktree,
    /// Every group runs alone, one after the other, in one worktree; each
    /// verified fix lands as soon as it passes.
    Serial,
}

impl Isolation {
    /// `worktree` or `serial`.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Worktree => "worktree",
            Isolation::Serial => "serial",
        }
    }
}

/// The options of a run (the CLI's flags).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReviewFixConfig {
    /// Findings files or review directories (`--fix`); may be empty with `resume`.
    pub inputs: Vec<PathBuf>,
    /// Attempts per finding (`--max-iterations`, default 3).
    pub max_iterations: u32,
    /// Findings per planning batch (`--batch-size`, default 5).
    pub batch_size: usize,
    /// Planning agents at once (`--max-parallel`, default 10).
    pub max_parallel: usize,
    /// Groups of a parallel stage at once (`--max-parallel-groups`, default 3).
    pub max_parallel_groups: usize,
    /// Where groups run (`--isolation`).
    pub isolation: Isolation,
    /// Run on a dirty tree, never touching the dirty files (`--allow-dirty`).
    pub allow_dirty: bool,
    /// Refuse to fix when tests fail before any fix (`--require-green-base`);
    /// by default a red base is named and fixes are judged by "no new
    /// failure".
    pub require_green_base: bool,
    /// The base's test result when already known (a re-lint pass continues
    /// from the previous pass's tip, which no fix left worse than its
    /// base): no test run at the base then.
    pub known_baseline: Option<orchestrator_core::test_runner::Baseline>,
    /// Plan only (`--dry-run`).
    pub dry_run: bool,
    /// Continue the newest unfinished session (`--resume`).
    pub resume: bool,
    /// How batches are planned (`Deterministic` with the builtin agent).
    pub planner: PlannerMode,
    /// Time limit of one planning agent (default 10 min).
    pub planning_time_limit: Duration,
    /// Time limit of one group (default 20 min).
    pub group_time_limit: Duration,
    /// Time limit of one fix agent call, if any.
    pub fix_time_limit: Option<Duration>,
    /// What the agent may spend on one finding (`--item-max-cost-usd`, …);
    /// an attempt starts only below every limit.
    pub item_limits: crate::files::ItemLimits,
    /// Time limit of one test run, if any.
    pub test_time_limit: Option<Duration>,
    /// How fixes are verified (`--verify each|batch|auto`, default `auto`).
    /// `batch` and `auto` need groups that run at once: with
    /// [`Isolation::Serial`] every fix is tested on its own, as with `each`.
    pub verify: VerifyMode,
    /// Re-runs of a failing test run on the identical tree before a fix is
    /// blamed (`--flaky-reruns N`, default 1; `0` trusts every failure).
    pub flaky_reruns: u32,
    /// Findings to leave out of a new session, counted by
    /// [`relint::relint_key`]: per key, that many occurrences (the first in
    /// input order) are left out — those an earlier re-lint pass tried and
    /// did not fix (see [`relint`]). Empty by default.
    pub skip: relint::KeyCounts,
    /// The test command to record in the session (the argv the
    /// [`TestRunnerFactory`] runs), so that a resume can use the same one;
    /// the library itself only writes it down.
    pub test_command: Option<Vec<String>>,
    /// The main tree's Cargo target folder, which seeds a worktree slot's
    /// own on its first use (see `exec/seed.rs`); `None`: `CARGO_TARGET_DIR`
    /// when set (relative to the repository), else the repository's
    /// `target`. Only read, never written.
    pub cargo_seed: Option<PathBuf>,
    /// Try again the findings the findings ledger says failed before
    /// (`--retry-failed`); by default they are skipped like fixed ones.
    pub retry_failed: bool,
    /// The cap on the cache's build folders (`[cache] max_size`, default
    /// 20 GiB): a run prunes the cache under it when it starts (see
    /// `orchestrator_core::state::cache`).
    pub cache_max_size: u64,
    /// Write the run's results as SARIF 2.1.0 to this file when it
    /// completes (`--sarif-out FILE`; see [`crate::findings_ledger::sarif`]).
    pub sarif_out: Option<PathBuf>,
}

/// Setters, one per field, so the struct (`#[non_exhaustive]`) can be built
/// outside this crate: start from `Default`/`new` and chain them.
impl ReviewFixConfig {
    /// Sets [`ReviewFixConfig::inputs`].
    pub fn with_inputs(mut self, inputs: Vec<PathBuf>) -> Self {
        self.inputs = inputs;
        self
    }

    /// Sets [`ReviewFixConfig::max_iterations`].
    pub fn with_max_iterations(mut self, max_iterations: u32) -> Self {
        self.max_iterations = max_iterations;
        self
    }

    /// Sets [`ReviewFixConfig::batch_size`].
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Sets [`ReviewFixConfig::max_parallel`].
    pub fn with_max_parallel(mut self, max_parallel: usize) -> Self {
        self.max_parallel = max_parallel;
        self
    }

    /// Sets [`ReviewFixConfig::max_parallel_groups`].
    pub fn with_max_parallel_groups(mut self, max_parallel_groups: usize) -> Self {
        self.max_parallel_groups = max_parallel_groups;
        self
    }

    /// Sets [`ReviewFixConfig::isolation`].
    pub fn with_isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    /// Sets [`ReviewFixConfig::allow_dirty`].
    pub fn with_allow_dirty(mut self, allow_dirty: bool) -> Self {
        self.allow_dirty = allow_dirty;
        self
    }

    /// Sets [`ReviewFixConfig::require_green_base`].
    pub fn with_require_green_base(mut self, require: bool) -> Self {
        self.require_green_base = require;
        self
    }

    /// Sets [`ReviewFixConfig::known_baseline`].
    pub fn with_known_baseline(
        mut self,
        baseline: Option<orchestrator_core::test_runner::Baseline>,
    ) -> Self {
        self.known_baseline = baseline;
        self
    }

    /// Sets [`ReviewFixConfig::dry_run`].
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Sets [`ReviewFixConfig::resume`].
    pub fn with_resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// Sets [`ReviewFixConfig::item_limits`].
    pub fn with_item_limits(mut self, item_limits: crate::files::ItemLimits) -> Self {
        self.item_limits = item_limits;
        self
    }

    /// Sets [`ReviewFixConfig::planner`].
    pub fn with_planner(mut self, planner: PlannerMode) -> Self {
        self.planner = planner;
        self
    }

    /// Sets [`ReviewFixConfig::planning_time_limit`].
    pub fn with_planning_time_limit(mut self, planning_time_limit: Duration) -> Self {
        self.planning_time_limit = planning_time_limit;
        self
    }

    /// Sets [`ReviewFixConfig::group_time_limit`].
    pub fn with_group_time_limit(mut self, group_time_limit: Duration) -> Self {
        self.group_time_limit = group_time_limit;
        self
    }

    /// Sets [`ReviewFixConfig::fix_time_limit`].
    pub fn with_fix_time_limit(mut self, fix_time_limit: Option<Duration>) -> Self {
        self.fix_time_limit = fix_time_limit;
        self
    }

    /// Sets [`ReviewFixConfig::test_time_limit`].
    pub fn with_test_time_limit(mut self, test_time_limit: Option<Duration>) -> Self {
        self.test_time_limit = test_time_limit;
        self
    }

    /// Sets [`ReviewFixConfig::verify`].
    pub fn with_verify(mut self, verify: VerifyMode) -> Self {
        self.verify = verify;
        self
    }

    /// Sets [`ReviewFixConfig::flaky_reruns`].
    pub fn with_flaky_reruns(mut self, flaky_reruns: u32) -> Self {
        self.flaky_reruns = flaky_reruns;
        self
    }

    /// Sets [`ReviewFixConfig::skip`].
    pub fn with_skip(mut self, skip: relint::KeyCounts) -> Self {
        self.skip = skip;
        self
    }

    /// Sets [`ReviewFixConfig::test_command`].
    pub fn with_test_command(mut self, test_command: Option<Vec<String>>) -> Self {
        self.test_command = test_command;
        self
    }

    /// Sets [`ReviewFixConfig::cargo_seed`].
    pub fn with_cargo_seed(mut self, cargo_seed: Option<PathBuf>) -> Self {
        self.cargo_seed = cargo_seed;
        self
    }

    /// Sets [`ReviewFixConfig::sarif_out`].
    pub fn with_sarif_out(mut self, sarif_out: Option<PathBuf>) -> Self {
        self.sarif_out = sarif_out;
        self
    }

    /// Sets [`ReviewFixConfig::retry_failed`].
    pub fn with_retry_failed(mut self, retry_failed: bool) -> Self {
        self.retry_failed = retry_failed;
        self
    }

    /// Sets [`ReviewFixConfig::cache_max_size`].
    pub fn with_cache_max_size(mut self, bytes: u64) -> Self {
        self.cache_max_size = bytes;
        self
    }
}

impl Default for ReviewFixConfig {
    fn default() -> Self {
        Self {
            inputs: Vec::new(),
            max_iterations: 3,
            batch_size: 5,
            max_parallel: 10,
            max_parallel_groups: 3,
            isolation: Isolation::Worktree,
            allow_dirty: false,
            require_green_base: false,
            known_baseline: None,
            dry_run: false,
            resume: false,
            planner: PlannerMode::Agent,
            planning_time_limit: Duration::from_secs(600),
            group_time_limit: Duration::from_secs(1200),
            fix_time_limit: None,
            item_limits: crate::files::ItemLimits::default(),
            test_time_limit: None,
            verify: VerifyMode::Auto,
            flaky_reruns: 1,
            skip: relint::KeyCounts::new(),
            test_command: None,
            cargo_seed: None,
            retry_failed: false,
            sarif_out: None,
            cache_max_size: orchestrator_core::state::cache::DEFAULT_MAX_SIZE,
        }
    }
}

/// The tree a test run happens in, for [`TestRunnerFactory`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEnv {
    /// The tree's root (the repository or a worktree).
    pub root: PathBuf,
    /// The worktree slot (0..max_parallel_groups), `None` for the main tree.
    pub worktree_slot: Option<usize>,
    /// For a Cargo project in a worktree: the target directory to use (one
    /// per slot under the session, reused across stages, never by two trees
    /// at once). Set it as `CARGO_TARGET_DIR` for the test command: cargo
    /// names a root package's artifacts the same in every checkout, so trees
    /// that share a target directory can run each other's builds.
    pub cargo_target_dir: Option<PathBuf>,
    /// Environment for commands run in this tree: what the worktree's
    /// provisioner gives (`[worktree] env`, a virtualenv's `PATH`); empty
    /// for the main tree.
    pub env: std::collections::BTreeMap<String, String>,
}

/// Gives the test runner for a tree, so that each worktree can have its own
/// environment (a Cargo target directory, say).
pub trait TestRunnerFactory: Send + Sync + fmt::Debug {
    /// The runner for tests in `tree`.
    fn runner(&self, tree: &TreeEnv) -> Arc<dyn TestRunner>;
}

/// The same runner for every tree.
#[derive(Debug, Clone)]
pub struct SharedRunner(pub Arc<dyn TestRunner>);

impl TestRunnerFactory for SharedRunner {
    fn runner(&self, _tree: &TreeEnv) -> Arc<dyn TestRunner> {
        Arc::clone(&self.0)
    }
}

/// A factory from a function.
pub struct FnRunnerFactory<F>(pub F);

impl<F> fmt::Debug for FnRunnerFactory<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnRunnerFactory")
    }
}

impl<F> TestRunnerFactory for FnRunnerFactory<F>
where
    F: Fn(&TreeEnv) -> Arc<dyn TestRunner> + Send + Sync,
{
    fn runner(&self, tree: &TreeEnv) -> Arc<dyn TestRunner> {
        (self.0)(tree)
    }
}

/// What the flow acts through.
#[derive(Debug, Clone)]
pub struct Services {
    /// Plans batches (role `plan`, unless the planner is deterministic) and
    /// fixes findings (role `fix`, the finding in `context.finding`).
    pub agent: Arc<dyn Agent>,
    /// The repository; commits land on its checked-out branch.
    pub vcs: Arc<dyn Vcs>,
    /// Test runners per tree.
    pub tests: Arc<dyn TestRunnerFactory>,
    /// Approves the plan before execution.
    pub gate: Arc<dyn Gate>,
    /// Receives events.
    pub sink: Arc<dyn EventSink>,
    /// Gives each worktree what the project needs before a fix or a test
    /// runs in it (`None`: worktrees hold only what git tracks).
    pub provisioner: Option<Arc<dyn orchestrator_core::worktree::Provisioner>>,
}
