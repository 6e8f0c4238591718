//! # orchestrator-review-fix
//!
//! The review-fix flow: findings → batches → parallel plans → verified fix
//! commits, with isolation, rollback and resume. It follows the review-cycle
//! fix phases (discovery and batching, parallel planning, stage execution,
//! completion) and keeps their session files.
//!
//! ## Data flow
//!
//! ```text
//!  --fix inputs ──► input::load_inputs (format by content, confined to the
//!                   repository, de-duplicated)           ── findings.json
//!        │
//!        ▼
//!  core batching ──► plan::plan_batches (≤ max_parallel agents, validated,
//!                    one retry, deterministic fallback)  ── partial-plan-N.json
//!        │
//!        ▼
//!  plan::aggregate (G1..Gn, shared stages, no shared files) ── fix-plan.json
//!        │
//!        ▼
//!  exec::run_stages: per stage, groups in worktrees (parallel) or the main
//!  tree (serial); per finding analyse → fix → tests → restore/retry → commit;
//!  worktree commits landed by cherry-pick        ── fix-progress-N.json
//!    --verify batch|auto: fixes committed untested in worktrees, then
//!    landing::land_batch tests "landed + next k" trial trees with the core
//!    Verifier; passing commits land, a dropped fix goes back to the agent
//!                                                  ── verify-state.json
//!        │
//!        ▼
//!  completion ──► fix-summary.md, fix-history.json, active-fix-session.json removed
//! ```
//!
//! The entry point is [`run`]: a [`ReviewFixConfig`] (the CLI's flags) and
//! [`Services`] (agent, VCS, test runner factory, gate, event sink) in, a
//! [`RunReport`] whose [`Outcome`] maps to the exit code out.
//!
//! ## Invariants
//! - Commits land only on the checked-out branch of the repository, one per
//!   fixed finding, each with exactly the fix's write-set.
//! - A file dirty or untracked before the run is never modified, restored or
//!   committed; rollback restores exactly a fix's write-set.
//! - Every state file is written atomically at every step; a run killed at
//!   any instant resumes (`resume`) without committing anything twice.
//! - Only commits whose tree passed the tests land on the checked-out
//!   branch; with deterministic tests `batch` and `auto` land exactly the
//!   commits `each` lands, in the same order.

pub mod error;
mod exec;
pub mod files;
pub mod input;
mod landing;
pub mod ledger;
pub mod plan;
pub mod relint;
pub mod session;
pub mod summary;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orchestrator_core::agent::Agent;
use orchestrator_core::batching::{BatchConfig, batch_findings};
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::finding::Finding;
use orchestrator_core::gate::{Answer, Gate, GateOption, Question};
use orchestrator_core::state::{read_json, read_json_if_exists, write_atomic, write_json_atomic};
use orchestrator_core::test_runner::TestRunner;
use orchestrator_core::text::counted;
use orchestrator_core::vcs::{CommitId, CommitInfo, Vcs};

pub use error::ReviewFixError;
pub use exec::commit_message;
pub use files::*;
pub use input::{InferredTestCommand, infer_test_command};
pub use orchestrator_core::verify::VerifyMode;
pub use plan::PlannerMode;

/// The flow name in events.
pub const FLOW: &str = "review-fix";

/// The id of the plan-approval gate question.
pub const PLAN_QUESTION_ID: &str = "review-fix.plan";

/// Engine-owned folders excluded from version control.
pub const ENGINE_FOLDERS: [&str; 3] = [".review/", ".workflow/", ".moai/"];

/// Where groups run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Groups of a parallel stage each run in their own git worktree.
    #[default]
    Worktree,
    /// Every group runs in the main tree, one at a time.
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
    /// Time limit of one test run, if any.
    pub test_time_limit: Option<Duration>,
    /// How fixes are verified (`--verify each|batch|auto`, default `auto`).
    /// `batch` and `auto` need worktrees: with [`Isolation::Serial`] every
    /// fix is tested on its own, as with `each`.
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
            dry_run: false,
            resume: false,
            planner: PlannerMode::Agent,
            planning_time_limit: Duration::from_secs(600),
            group_time_limit: Duration::from_secs(1200),
            fix_time_limit: None,
            test_time_limit: None,
            verify: VerifyMode::Auto,
            flaky_reruns: 1,
            skip: relint::KeyCounts::new(),
            test_command: None,
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
}

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
}

impl Outcome {
    /// The process exit code: 0 all fixed or dry run, 1 some failed or
    /// stopped, 3 a gate needs a human. (2, unreadable input or wrong usage,
    /// is [`ReviewFixError::exit_code`].)
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::AllFixed | Outcome::DryRun => 0,
            Outcome::SomeFailed | Outcome::Stopped => 1,
            Outcome::NeedsHuman { .. } => 3,
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
        }
    }
}

/// How one finding ended, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingReport {
    /// The finding id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// `fixed`, `failed`, `not_fixable` (declined by the agent), `rejected`
    /// or `pending`.
    pub result: String,
    /// Attempts made.
    pub attempts: u32,
    /// The commit on the checked-out branch.
    pub commit: Option<String>,
    /// Why it failed or was rejected.
    pub error: Option<String>,
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
}

/// The verify mode a configuration runs with: `batch` and `auto` need
/// worktrees, so serial isolation verifies each fix on its own.
pub fn effective_mode(config: &ReviewFixConfig) -> VerifyMode {
    if config.isolation == Isolation::Serial {
        VerifyMode::Each
    } else {
        config.verify
    }
}

fn emit_phase(sink: &dyn EventSink, phase: &str, started: bool) {
    let (flow, phase) = (FLOW.to_owned(), phase.to_owned());
    sink.emit(&if started {
        Event::PhaseStarted { flow, phase }
    } else {
        Event::PhaseFinished { flow, phase }
    });
}

/// Runs (or resumes) a review-fix session. See the crate docs.
///
/// One run per repository at a time: the repository lock
/// ([`lock_repository`]) is held for the whole run, and a second run on the
/// same repository — whatever review folder it uses — fails with
/// [`ReviewFixError::RepoBusy`] before it changes anything.
pub async fn run(config: ReviewFixConfig, services: Services) -> Result<RunReport, ReviewFixError> {
    let _lock = lock_repository(services.vcs.root())?;
    run_locked(config, services).await
}

/// Takes the repository-wide lock of review-fix runs
/// (`{repo}/.review/.lock`, an OS file lock the kernel releases when the
/// process dies, so a killed run leaves nothing stale). [`run`] and
/// [`relint::run_with_relint`] take it themselves; it is public for callers
/// that must keep other runs out around their own work.
pub fn lock_repository(
    repo: &Path,
) -> Result<orchestrator_core::state::SessionLock, ReviewFixError> {
    let dir = repo.join(".review");
    std::fs::create_dir_all(&dir).map_err(|e| ReviewFixError::io("create", &dir, e))?;
    orchestrator_core::state::SessionLock::acquire(&dir).map_err(|e| ReviewFixError::RepoBusy {
        repo: repo.to_path_buf(),
        source: Box::new(e),
    })
}

/// [`run`], with the repository lock already held by the caller.
pub(crate) async fn run_locked(
    config: ReviewFixConfig,
    services: Services,
) -> Result<RunReport, ReviewFixError> {
    if config.inputs.is_empty() && !config.resume {
        return Err(ReviewFixError::Usage(
            "give at least one findings file or review directory (--fix), or --resume".to_owned(),
        ));
    }
    if config.max_iterations == 0 || config.batch_size == 0 || config.max_parallel == 0 {
        return Err(ReviewFixError::Usage(
            "max iterations, batch size and max parallel must be at least 1".to_owned(),
        ));
    }
    let vcs = Arc::clone(&services.vcs);
    let sink = Arc::clone(&services.sink);
    let repo = vcs.root().to_path_buf();
    for folder in ENGINE_FOLDERS {
        vcs.exclude(folder)
            .await
            .map_err(|e| ReviewFixError::vcs(format!("excluding {folder}"), e))?;
    }
    let run_started = now();
    emit_phase(sink.as_ref(), "discovery", true);
    let first_input = config.inputs.first().map(|p| absolute(&repo, p));
    let root = session::fixes_root(&repo, first_input.as_deref());
    let opened = if config.resume {
        open_for_resume(&config, &services, &root).await?
    } else {
        open_new(&config, &services, &root).await?
    };
    let Opened {
        paths,
        lock: _lock,
        mut active,
        findings_file,
        mut notes,
    } = opened;
    // A resumed session keeps what its plan was made for: where groups run
    // and how many run at once.
    let config = if config.resume {
        keep_session_layout(config, &active.options, &mut notes)
    } else {
        config
    };
    emit_phase(sink.as_ref(), "discovery", false);

    // Planning (skipped when a resumed session already has its plan).
    let findings: Vec<Finding> = findings_file.findings.clone();
    let plan: FixPlan = match read_json_if_exists::<FixPlan>(paths.plan())? {
        Some(plan) => plan,
        None => {
            active.phase = SessionPhase::Planning;
            active.last_update = now();
            session::write_active(&paths, &active)?;
            emit_phase(sink.as_ref(), "planning", true);
            let batches = batch_findings(
                &findings,
                &BatchConfig {
                    batch_size: config.batch_size,
                    ..BatchConfig::default()
                },
            );
            let partials = plan::plan_batches(
                Arc::clone(&services.agent),
                Arc::clone(&sink),
                &batches,
                &findings,
                &plan::PlanningOptions {
                    mode: config.planner,
                    workdir: repo.clone(),
                    session_id: paths.id(),
                    max_parallel: config.max_parallel,
                    time_limit: config.planning_time_limit,
                },
            )
            .await;
            for p in &partials {
                write_json_atomic(paths.partial_plan(p.batch_id), p)?;
            }
            let by_id: HashMap<String, &Finding> =
                findings.iter().map(|f| (f.id.to_string(), f)).collect();
            let fallback_batches = if config.planner == PlannerMode::Agent {
                partials
                    .iter()
                    .filter(|p| p.metadata.fallback_reason.is_some())
                    .map(|p| p.batch_id)
                    .collect()
            } else {
                Vec::new()
            };
            let plan = plan::aggregate(
                &partials,
                &by_id,
                &plan::AggregateOptions {
                    fix_session_id: paths.id(),
                    parallel_limit: config.max_parallel_groups,
                    worktrees: config.isolation == Isolation::Worktree,
                    fallback_batches,
                },
            );
            write_json_atomic(paths.plan(), &plan)?;
            let by_id: HashMap<String, Finding> = findings
                .iter()
                .map(|f| (f.id.to_string(), f.clone()))
                .collect();
            for (i, g) in plan.groups.iter().enumerate() {
                write_json_atomic(
                    paths.progress(i + 1),
                    &exec::init_progress(g, i + 1, &by_id),
                )?;
            }
            emit_phase(sink.as_ref(), "planning", false);
            plan
        }
    };

    let done = |outcome: Outcome| Completion {
        outcome,
        run_started: run_started.clone(),
        notes: notes.clone(),
    };

    if config.dry_run {
        let c = done(Outcome::DryRun);
        return complete(
            &paths,
            &active,
            &plan,
            &findings_file,
            c,
            VerificationStats {
                mode: effective_mode(&config),
                ..VerificationStats::default()
            },
            &vcs,
            sink.as_ref(),
        )
        .await;
    }

    // Approval.
    if matches!(
        active.phase,
        SessionPhase::Planning | SessionPhase::AwaitingApproval | SessionPhase::Discovery
    ) {
        active.phase = SessionPhase::AwaitingApproval;
        active.last_update = now();
        session::write_active(&paths, &active)?;
        let question = Question::new(
            PLAN_QUESTION_ID,
            format!(
                "Fix {} in {} over {} ({} isolation)?",
                counted(plan.metadata.total_findings as u64, "finding", "findings"),
                counted(plan.groups.len() as u64, "group", "groups"),
                counted(plan.timeline.len() as u64, "stage", "stages"),
                plan.metadata.isolation
            ),
            vec![
                GateOption::new("Proceed", "Run the plan and commit the verified fixes"),
                GateOption::new("Stop", "Keep the plan; resume later with --resume"),
            ],
        )
        .with_details(format!("Plan: {}", paths.plan().display()));
        sink.emit(&Event::GateAsked {
            question: question.id.clone(),
            prompt: question.prompt.clone(),
        });
        let answer = services.gate.ask(&question).await;
        let choice = match &answer {
            Ok(Answer::Chosen { index, .. }) => question.label(*index).map(str::to_owned),
            _ => None,
        };
        sink.emit(&Event::GateAnswered {
            question: question.id.clone(),
            choice,
        });
        match answer {
            Ok(Answer::Chosen { index: 0, .. }) => {}
            Ok(Answer::Chosen { .. }) => {
                return Ok(stopped_report(&paths, Outcome::Stopped, Some(plan), notes));
            }
            Ok(Answer::Deferred) | Err(_) => {
                let reason = match answer {
                    Err(e) => format!("the plan approval could not be asked: {e}"),
                    _ => "the plan waits for approval; run again with --resume".to_owned(),
                };
                sink.emit(&Event::Escalated {
                    id: None,
                    reason: reason.clone(),
                });
                return Ok(stopped_report(
                    &paths,
                    Outcome::NeedsHuman { reason },
                    Some(plan),
                    notes,
                ));
            }
        }
    }

    // Execution.
    active.phase = SessionPhase::Executing;
    active.last_update = now();
    session::write_active(&paths, &active)?;
    emit_phase(sink.as_ref(), "execution", true);
    let finding_map: HashMap<String, Finding> = findings
        .iter()
        .map(|f| (f.id.to_string(), f.clone()))
        .collect();
    let shared = Arc::new(exec::Shared {
        config: config.clone(),
        agent: Arc::clone(&services.agent),
        vcs: Arc::clone(&vcs),
        tests: Arc::clone(&services.tests),
        sink: Arc::clone(&sink),
        paths: paths.clone(),
        plan: plan.clone(),
        findings: finding_map.clone(),
        active: Mutex::new(active),
        test_runs: AtomicU32::new(0),
        cargo: repo.join("Cargo.toml").is_file(),
        batch: config.verify != VerifyMode::Each && config.isolation == Isolation::Worktree,
        stats: Mutex::new(VerificationStats {
            mode: effective_mode(&config),
            ..VerificationStats::default()
        }),
        digests: Mutex::new(HashMap::new()),
        decided: Mutex::new((0, 0)),
        ledger: ledger::Ledger::open(&paths.dir)?,
    });
    exec::recover(&shared).await;
    let landed = exec::landed_commits(&shared).await;
    let mut progress: HashMap<String, exec::Progress> = HashMap::new();
    for (i, g) in plan.groups.iter().enumerate() {
        let path = paths.progress(i + 1);
        let mut p: FixProgress = match read_json_if_exists(&path)? {
            Some(p) => p,
            None => exec::init_progress(g, i + 1, &finding_map),
        };
        prepare_for_run(&mut p, &finding_map, &landed);
        let handle = exec::Progress::new(path, p, Arc::clone(&sink));
        handle.update(|_| {});
        progress.insert(g.group_id.clone(), handle);
    }
    exec::run_stages(Arc::clone(&shared), &progress).await;
    emit_phase(sink.as_ref(), "execution", false);
    let active = match shared.active.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    };
    let all: Vec<FixProgress> = plan
        .groups
        .iter()
        .filter_map(|g| progress.get(&g.group_id).map(exec::Progress::snapshot))
        .collect();
    let failed = all
        .iter()
        .flat_map(|p| p.findings.iter())
        .any(|f| f.result != Some(FixResult::Fixed));
    let outcome = if failed || !findings_file.rejected.is_empty() {
        Outcome::SomeFailed
    } else {
        Outcome::AllFixed
    };
    let mut verification = shared.with_stats(|s| *s);
    verification.test_runs = shared.test_runs.load(Ordering::SeqCst);
    complete(
        &paths,
        &active,
        &plan,
        &findings_file,
        done(outcome),
        verification,
        &vcs,
        sink.as_ref(),
    )
    .await
}

/// `config` with the isolation and group parallelism the session was
/// planned with (the plan's stages depend on both), and a note when the
/// flags asked for something else.
fn keep_session_layout(
    mut config: ReviewFixConfig,
    options: &SessionOptions,
    notes: &mut Vec<String>,
) -> ReviewFixConfig {
    let isolation = match options.isolation.as_str() {
        "serial" => Isolation::Serial,
        "worktree" => Isolation::Worktree,
        _ => config.isolation,
    };
    if isolation != config.isolation || options.max_parallel_groups != config.max_parallel_groups {
        notes.push(format!(
            "resumed with the session's isolation {} and {} parallel groups (asked: {} and {})",
            isolation.as_str(),
            options.max_parallel_groups,
            config.isolation.as_str(),
            config.max_parallel_groups
        ));
    }
    config.isolation = isolation;
    config.max_parallel_groups = options.max_parallel_groups.max(1);
    config
}

/// Resets what a resumed run must redo: in-flight findings and findings
/// fixed in a worktree whose commit never landed go back to pending; a
/// finding whose commit is on the branch is fixed.
fn prepare_for_run(
    p: &mut FixProgress,
    findings: &HashMap<String, Finding>,
    landed: &HashMap<String, CommitId>,
) {
    for f in &mut p.findings {
        let landed_commit = findings
            .get(&f.finding_id)
            .and_then(|x| landed.get(&commit_message(x)));
        match (f.result, landed_commit) {
            (_, Some(c)) => {
                f.status = ProgressStatus::Completed;
                f.result = Some(FixResult::Fixed);
                f.commit_hash = Some(c.to_string());
                f.test_passed = Some(true);
            }
            (Some(FixResult::Failed | FixResult::NotFixable), None) => {}
            (_, None) => {
                f.status = ProgressStatus::Pending;
                f.result = None;
                f.commit_hash = None;
                f.test_passed = None;
                f.completed_at = None;
            }
        }
    }
    if p.findings
        .iter()
        .any(|f| f.status != ProgressStatus::Completed)
    {
        p.status = ProgressStatus::Pending;
    }
    p.current_finding = None;
    p.flow_control = FlowControl::default();
    p.recount();
}

fn absolute(repo: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        repo.join(p)
    }
}

struct Opened {
    paths: session::SessionPaths,
    lock: orchestrator_core::state::SessionLock,
    active: ActiveSession,
    findings_file: FindingsFile,
    notes: Vec<String>,
}

fn options_of(config: &ReviewFixConfig) -> SessionOptions {
    SessionOptions {
        max_iterations: config.max_iterations,
        batch_size: config.batch_size,
        max_parallel: config.max_parallel,
        max_parallel_groups: config.max_parallel_groups,
        isolation: config.isolation.as_str().to_owned(),
        allow_dirty: config.allow_dirty,
        test_command: config.test_command.clone(),
    }
}

async fn open_new(
    config: &ReviewFixConfig,
    services: &Services,
    root: &Path,
) -> Result<Opened, ReviewFixError> {
    let vcs = &services.vcs;
    let repo = vcs.root().to_path_buf();
    let status = vcs
        .status()
        .await
        .map_err(|e| ReviewFixError::vcs("reading the working tree status", e))?;
    let dirty = status.dirty_paths();
    if !dirty.is_empty() && !config.allow_dirty {
        return Err(ReviewFixError::DirtyTree { paths: dirty });
    }
    let inputs: Vec<PathBuf> = config.inputs.iter().map(|p| absolute(&repo, p)).collect();
    let loaded = input::load_inputs(&repo, &inputs)?;
    // A live session elsewhere under the same root is another engine at work.
    for other in session::unfinished_sessions(root) {
        if let Some(holder) = orchestrator_core::state::SessionLock::holder_of(&other) {
            services.sink.emit(&Event::Warning {
                message: format!(
                    "fix session {} is unfinished (held by pid {}); resume it with --resume",
                    other.display(),
                    holder.pid
                ),
            });
        } else {
            services.sink.emit(&Event::Warning {
                message: format!(
                    "fix session {} is unfinished; resume it with --resume",
                    other.display()
                ),
            });
        }
    }
    let abandoned = session::remove_abandoned_sessions(root, session::ABANDONED_AFTER);
    let dir = session::new_session_dir(root);
    let lock = session::lock_session(&dir)?;
    let paths = session::SessionPaths::for_repo(&dir, &repo);
    let dirty_set: BTreeSet<&String> = dirty.iter().collect();
    let mut findings = Vec::new();
    let mut skipped = 0usize;
    let mut skip_left = config.skip.clone();
    // What an earlier pass rejected is left out like what it tried.
    let mut rejected = Vec::with_capacity(loaded.rejected.len());
    for r in loaded.rejected {
        if let Some(key) = loaded.rejected_keys.get(&r.finding_id)
            && let Some(n) = skip_left.get_mut(key)
            && *n > 0
        {
            *n -= 1;
            skipped += 1;
            continue;
        }
        rejected.push(r);
    }
    for f in loaded.findings {
        if !skip_left.is_empty()
            && let Some(n) = skip_left.get_mut(&relint::relint_key(&f))
            && *n > 0
        {
            *n -= 1;
            skipped += 1;
            continue;
        }
        let touches_dirty = plan::finding_files(&f)
            .iter()
            .find(|p| dirty_set.contains(p))
            .cloned();
        match touches_dirty {
            Some(p) => rejected.push(RejectedFinding {
                finding_id: f.id.to_string(),
                file: f.file.clone(),
                reason: format!("{p} has uncommitted changes; it is never touched"),
            }),
            None => findings.push(f),
        }
    }
    for r in &rejected {
        services.sink.emit(&Event::Warning {
            message: format!("finding {} rejected: {}", r.finding_id, r.reason),
        });
    }
    let mut notes = loaded.notes;
    if !abandoned.is_empty() {
        notes.push(format!(
            "removed session folders of runs killed before their session was recorded: {}",
            abandoned
                .iter()
                .filter_map(|d| d.file_name().and_then(|n| n.to_str()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if skipped > 0 {
        notes.push(format!(
            "findings already tried in an earlier pass, left out: {skipped}"
        ));
    }
    // The same diagnostic reported for several targets (`--lib --tests`) is
    // one finding: merged, counted once, said once.
    match loaded.duplicates.len() {
        0 => {}
        1 => notes.push("1 duplicate merged".to_owned()),
        n => notes.push(format!("{n} duplicates merged")),
    }
    let rejected_keys = rejected
        .iter()
        .filter_map(|r| loaded.rejected_keys.get(&r.finding_id).cloned())
        .collect();
    let findings_file = FindingsFile {
        version: FINDINGS_VERSION,
        findings,
        rejected,
        rejected_keys,
    };
    write_json_atomic(paths.findings(), &findings_file)?;
    // The files as the findings saw them: the baseline of every fix's edits.
    let edit_files: BTreeSet<String> = findings_file
        .findings
        .iter()
        .flat_map(|f| f.suggestions.iter())
        .flat_map(|s| s.edits.iter().map(|e| e.file.clone()))
        .collect();
    ledger::Ledger::start(&paths.dir, &repo, &edit_files)?;
    let head = vcs
        .head()
        .await
        .map_err(|e| ReviewFixError::vcs("reading HEAD", e))?;
    let branch = vcs
        .current_branch()
        .await
        .map_err(|e| ReviewFixError::vcs("reading the current branch", e))?;
    let ts = now();
    let active = ActiveSession {
        version: ACTIVE_SESSION_VERSION,
        fix_session_id: paths.id(),
        session_dir: dir.clone(),
        repo: repo.clone(),
        inputs,
        pid: std::process::id(),
        run: 1,
        started_at: ts.clone(),
        last_update: ts,
        phase: SessionPhase::Discovery,
        base_head: head.to_string(),
        branch,
        dirty_before: dirty,
        options: options_of(config),
        in_flight: Vec::new(),
        worktrees: Vec::new(),
        stages_completed: Vec::new(),
    };
    session::write_active(&paths, &active)?;
    Ok(Opened {
        paths,
        lock,
        active,
        findings_file,
        notes,
    })
}

async fn open_for_resume(
    config: &ReviewFixConfig,
    services: &Services,
    root: &Path,
) -> Result<Opened, ReviewFixError> {
    let Some(dir) = session::unfinished_sessions(root).into_iter().next() else {
        return Err(ReviewFixError::NothingToResume {
            dir: root.to_path_buf(),
        });
    };
    let lock = session::lock_session(&dir)?;
    // What interrupted atomic writes left (every file is rewritten whole).
    orchestrator_core::state::remove_stale_temp_files_in(&dir)?;
    let paths = session::SessionPaths::for_repo(&dir, services.vcs.root());
    let Some(mut active) = session::read_active(&paths)? else {
        return Err(ReviewFixError::NothingToResume {
            dir: root.to_path_buf(),
        });
    };
    let findings_file: FindingsFile = read_json(paths.findings())?;
    if findings_file.version != FINDINGS_VERSION {
        return Err(ReviewFixError::Version {
            path: paths.findings(),
            found: findings_file.version,
            expected: FINDINGS_VERSION,
        });
    }
    // Restore an interrupted in-flight fix before looking at the tree.
    let repo = services.vcs.root().to_path_buf();
    let head = services.vcs.head().await.ok();
    for f in &active.in_flight {
        if f.tree == repo
            && head.as_ref() == Some(&f.checkpoint.head)
            && let Err(e) = services.vcs.restore(&f.checkpoint).await
        {
            services.sink.emit(&Event::Warning {
                message: format!(
                    "failed to restore the interrupted fix of {}: {e}",
                    f.finding_id
                ),
            });
        }
    }
    active.in_flight.retain(|f| f.tree != repo);
    let status = services
        .vcs
        .status()
        .await
        .map_err(|e| ReviewFixError::vcs("reading the working tree status", e))?;
    let before: BTreeSet<&String> = active.dirty_before.iter().collect();
    let new_dirty: Vec<String> = status
        .dirty_paths()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    if !(new_dirty.is_empty() || config.allow_dirty || active.options.allow_dirty) {
        return Err(ReviewFixError::DirtyTree { paths: new_dirty });
    }
    active.dirty_before.extend(new_dirty);
    // A test command given to the resume replaces the recorded one.
    if config.test_command.is_some() {
        active.options.test_command.clone_from(&config.test_command);
    }
    active.run += 1;
    active.pid = std::process::id();
    active.last_update = now();
    session::write_active(&paths, &active)?;
    Ok(Opened {
        paths,
        lock,
        active,
        findings_file,
        notes: Vec::new(),
    })
}

/// A report for a run that stopped before execution (the session stays).
fn stopped_report(
    paths: &session::SessionPaths,
    outcome: Outcome,
    plan: Option<FixPlan>,
    notes: Vec<String>,
) -> RunReport {
    RunReport {
        fix_session_id: paths.id(),
        session_dir: paths.dir.clone(),
        outcome,
        plan,
        findings: Vec::new(),
        commits: Vec::new(),
        test_runs: 0,
        verification: VerificationStats::default(),
        notes,
    }
}

/// How a run ended, for [`complete`].
struct Completion {
    outcome: Outcome,
    run_started: String,
    notes: Vec<String>,
}

/// Writes the summary and the history entry, removes the active marker.
#[allow(clippy::too_many_arguments)]
async fn complete(
    paths: &session::SessionPaths,
    active: &ActiveSession,
    plan: &FixPlan,
    findings_file: &FindingsFile,
    completion: Completion,
    verification: VerificationStats,
    vcs: &Arc<dyn Vcs>,
    sink: &dyn EventSink,
) -> Result<RunReport, ReviewFixError> {
    let Completion {
        outcome,
        run_started,
        notes,
    } = completion;
    let run_started = run_started.as_str();
    emit_phase(sink, "completion", true);
    let progress: Vec<FixProgress> = (1..=plan.groups.len())
        .filter_map(|n| read_json_if_exists(paths.progress(n)).ok().flatten())
        .collect();
    let commits = vcs
        .log_since(&CommitId(active.base_head.clone()))
        .await
        .map_err(|e| ReviewFixError::vcs("reading the branch log", e))?;
    let finished = now();
    let summary = summary::render_summary(&summary::SummaryInput {
        fix_session_id: &active.fix_session_id,
        run: active.run,
        started_at: &active.started_at,
        finished_at: &finished,
        plan: Some(plan),
        progress: &progress,
        rejected: &findings_file.rejected,
        verification,
        outcome: outcome.as_str(),
    });
    write_atomic(paths.summary(), summary.as_bytes())?;
    let mut findings: Vec<FindingReport> = progress
        .iter()
        .flat_map(|p| p.findings.iter())
        .map(|f| FindingReport {
            id: f.finding_id.clone(),
            title: f.finding_title.clone(),
            result: match f.result {
                Some(FixResult::Fixed) => "fixed",
                Some(FixResult::Failed) => "failed",
                Some(FixResult::NotFixable) => "not_fixable",
                None => "pending",
            }
            .to_owned(),
            attempts: f.attempts,
            commit: f.commit_hash.clone(),
            error: f.error_message.clone(),
        })
        .collect();
    findings.extend(findings_file.rejected.iter().map(|r| FindingReport {
        id: r.finding_id.clone(),
        title: String::new(),
        result: "rejected".to_owned(),
        attempts: 0,
        commit: None,
        error: Some(r.reason.clone()),
    }));
    let mut history: FixHistory = read_json_if_exists(paths.history())?.unwrap_or_default();
    if history.version != HISTORY_VERSION {
        return Err(ReviewFixError::Version {
            path: paths.history(),
            found: history.version,
            expected: HISTORY_VERSION,
        });
    }
    history.entries.push(HistoryEntry {
        fix_session_id: active.fix_session_id.clone(),
        run: active.run,
        resumed: active.run > 1,
        started_at: run_started.to_owned(),
        finished_at: finished,
        outcome: outcome.as_str().to_owned(),
        total_findings: findings.len(),
        fixed: findings.iter().filter(|f| f.result == "fixed").count(),
        failed: findings.iter().filter(|f| f.result == "failed").count(),
        not_fixable: findings
            .iter()
            .filter(|f| f.result == "not_fixable")
            .count(),
        rejected: findings_file.rejected.len(),
        commits: commits.iter().map(|c| c.id.to_string()).collect(),
        test_runs: verification.test_runs,
        verification: Some(verification),
    });
    write_json_atomic(paths.history(), &history)?;
    match std::fs::remove_file(paths.active()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(ReviewFixError::io("remove", paths.active(), e)),
    }
    // The session's worktree folder outside the repository, and the
    // repository's, once empty (`remove_dir` leaves a folder with anything
    // in it alone).
    let worktrees = paths.worktrees();
    let _ = std::fs::remove_dir(&worktrees);
    if let Some(repo_folder) = worktrees.parent() {
        let _ = std::fs::remove_dir(repo_folder);
    }
    emit_phase(sink, "completion", false);
    Ok(RunReport {
        fix_session_id: active.fix_session_id.clone(),
        session_dir: paths.dir.clone(),
        outcome,
        plan: Some(plan.clone()),
        findings,
        commits,
        test_runs: verification.test_runs,
        verification,
        notes,
    })
}
