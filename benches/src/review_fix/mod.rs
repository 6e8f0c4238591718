//! review-fix's wall time, split: real `review-fix` runs (library, builtin
//! agent, real git, real test and lint commands) with every test run, lint
//! run and git invocation timed, against a reference measured in the same
//! run.
//!
//! Two workloads, each with its own reference:
//! - [`registry`]: pinned crates from the registry (the clippy
//!   differential's list) with `-W clippy::pedantic`: the initial lint plus
//!   `review-fix --relint` with `cargo test`, against `cargo clippy --fix`
//!   followed by one `cargo test` on a copy of the same crate; the final
//!   sources must be identical.
//! - [`synthetic`]: a repository of N exact suggestions (one per line, ten
//!   or twenty per file) and a test command of `true`, against a shell loop
//!   doing one `sed` and one `git commit` per fix; the final trees must be
//!   identical.
//!
//! The registry half first prints [`pass_rule`]: the verification model's
//! expected test runs per pass, stage by stage against the low failure-rate
//! pass rule, at rates across `[0, 1]`.
//!
//! A run's [`Split`]: wall time, lint (runs, time), tests (runs, time), git
//! (invocations, time, and the subcommands that cost most) and the rest
//! (wall minus the three: the engine's own work, the agent's edits, state
//! files). Concurrent worktrees overlap, so the parts may sum to more than
//! the wall; the rest is then negative and says so.

pub mod pass_rule;
pub mod registry;
pub mod synthetic;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use orchestrator_adapters::builtin::SuggestionAgent;
use orchestrator_adapters::git::{GitSpent, GitVcs};
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_adapters::test_runner::{CommandTestRunner, TestCommand};
use orchestrator_core::command::{CommandError, CommandOutput, CommandRunner, CommandSpec};
use orchestrator_core::event::NullSink;
use orchestrator_core::gate::AutoYes;
use orchestrator_core::test_runner::{TestReport, TestRequest, TestRunner, TestRunnerError};
use orchestrator_review_fix::relint::{PassesReport, Relint, run_with_relint};
use orchestrator_review_fix::{PlannerMode, ReviewFixConfig, Services, TestRunnerFactory, TreeEnv};

/// Runs and summed wall time of one kind of work.
#[derive(Debug, Default)]
pub struct Meter(Mutex<(u64, Duration)>);

impl Meter {
    fn add(&self, time: Duration) {
        let mut m = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        m.0 += 1;
        m.1 += time;
    }

    /// (runs, time) so far.
    pub fn read(&self) -> (u64, Duration) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where one run's wall time went (module docs).
#[derive(Debug, Clone, Default)]
pub struct Split {
    /// Wall time, lint included.
    pub wall: Duration,
    /// Lint runs (the initial one included) and their time.
    pub lint: (u64, Duration),
    /// Test runs and their time.
    pub tests: (u64, Duration),
    /// Git invocations and their time.
    pub git: (u64, Duration),
    /// Git per subcommand.
    pub git_by: BTreeMap<String, GitSpent>,
    /// Commits the run made on the branch.
    pub commits: usize,
    /// Passes the run made.
    pub passes: usize,
}

impl Split {
    /// Wall minus lint, tests and git, in seconds (negative when concurrent
    /// parts overlapped).
    pub fn rest_s(&self) -> f64 {
        self.wall.as_secs_f64()
            - self.lint.1.as_secs_f64()
            - self.tests.1.as_secs_f64()
            - self.git.1.as_secs_f64()
    }

    /// The figures of this split under `key` (`{key}_wall_s`, …).
    pub fn figures(&self, key: &str) -> Vec<(String, f64)> {
        vec![
            (format!("{key}_wall_s"), self.wall.as_secs_f64()),
            (format!("{key}_lint_runs"), self.lint.0 as f64),
            (format!("{key}_lint_s"), self.lint.1.as_secs_f64()),
            (format!("{key}_test_runs"), self.tests.0 as f64),
            (format!("{key}_test_s"), self.tests.1.as_secs_f64()),
            (format!("{key}_git_runs"), self.git.0 as f64),
            (format!("{key}_git_s"), self.git.1.as_secs_f64()),
            (format!("{key}_rest_s"), self.rest_s()),
        ]
    }

    /// The git subcommands by time, most first, as `name×runs=seconds`.
    pub fn git_top(&self, n: usize) -> String {
        let mut by: Vec<_> = self.git_by.iter().collect();
        by.sort_by_key(|b| std::cmp::Reverse(b.1.time));
        by.iter()
            .take(n)
            .map(|(k, v)| format!("{k}×{}={:.2}s", v.runs, v.time.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Git spent between two readings of [`orchestrator_adapters::git::spent`].
pub fn git_delta(
    before: &BTreeMap<String, GitSpent>,
    after: &BTreeMap<String, GitSpent>,
) -> BTreeMap<String, GitSpent> {
    after
        .iter()
        .map(|(k, a)| {
            let b = before.get(k).copied().unwrap_or_default();
            (
                k.clone(),
                GitSpent {
                    runs: a.runs - b.runs,
                    time: a.time.saturating_sub(b.time),
                },
            )
        })
        .filter(|(_, s)| s.runs > 0)
        .collect()
}

/// Test runners that time every run.
#[derive(Debug)]
struct TimedTests {
    command: Vec<String>,
    /// `CARGO_TARGET_DIR` for the main tree (worktrees get their own).
    target_dir: Option<PathBuf>,
    meter: Arc<Meter>,
}

#[derive(Debug)]
struct TimedTestRunner {
    inner: CommandTestRunner,
    meter: Arc<Meter>,
}

#[async_trait]
impl TestRunner for TimedTestRunner {
    async fn run(&self, request: TestRequest) -> Result<TestReport, TestRunnerError> {
        let started = Instant::now();
        let report = self.inner.run(request).await;
        self.meter.add(started.elapsed());
        report
    }
}

impl TestRunnerFactory for TimedTests {
    fn runner(&self, tree: &TreeEnv) -> Arc<dyn TestRunner> {
        let mut inner = CommandTestRunner::new(TestCommand::Argv(self.command.clone()));
        if let Some(dir) = tree.cargo_target_dir.as_ref().or(self.target_dir.as_ref()) {
            inner = inner.env("CARGO_TARGET_DIR", dir.display().to_string());
        }
        for (key, value) in &tree.env {
            inner = inner.env(key, value);
        }
        Arc::new(TimedTestRunner {
            inner,
            meter: Arc::clone(&self.meter),
        })
    }
}

/// A command runner that times every run.
#[derive(Debug)]
struct TimedCommands {
    inner: ProcessRunner,
    meter: Arc<Meter>,
}

#[async_trait]
impl CommandRunner for TimedCommands {
    async fn run(&self, spec: CommandSpec) -> Result<CommandOutput, CommandError> {
        let started = Instant::now();
        let out = self.inner.run(spec).await;
        self.meter.add(started.elapsed());
        out
    }
}

/// What [`run_ours`] runs.
#[derive(Debug, Clone)]
pub struct OurRun {
    /// The repository (clean, committed).
    pub repo: PathBuf,
    /// The lint command (argv): run first for the findings, then as the
    /// re-lint when `relint_passes > 1`; `None` with `findings` given.
    pub lint: Option<Vec<String>>,
    /// A findings file given instead of a first lint.
    pub findings: Option<PathBuf>,
    /// Passes in all.
    pub relint_passes: u32,
    /// The test command (argv).
    pub tests: Vec<String>,
    /// Environment of lint and test commands (`CARGO_TARGET_DIR`).
    pub env: BTreeMap<String, String>,
}

/// Runs review-fix as `orchestrator review-fix --agent builtin [--relint …]
/// --batch-size 100 -y` does, timing its parts (module docs).
pub async fn run_ours(run: &OurRun) -> Result<(Split, PassesReport), String> {
    let lint_meter = Arc::new(Meter::default());
    let test_meter = Arc::new(Meter::default());
    let runner: Arc<dyn CommandRunner> = Arc::new(TimedCommands {
        inner: ProcessRunner::default(),
        meter: Arc::clone(&lint_meter),
    });
    let git_before = orchestrator_adapters::git::spent();
    let started = Instant::now();
    let findings = match (&run.findings, &run.lint) {
        (Some(f), _) => f.clone(),
        (None, Some(argv)) => first_lint(&run.repo, argv, &run.env, runner.as_ref()).await?,
        (None, None) => return Err("neither findings nor a lint command".to_owned()),
    };
    let relint = run
        .lint
        .as_ref()
        .filter(|_| run.relint_passes > 1)
        .map(|argv| {
            let mut spec = CommandSpec::new(argv[0].clone(), argv[1..].iter().cloned(), &run.repo);
            spec.env = run.env.clone();
            Relint::new(spec, Arc::clone(&runner), run.relint_passes)
        });
    let vcs = GitVcs::open(&run.repo).await.map_err(|e| e.to_string())?;
    let services = Services {
        agent: Arc::new(SuggestionAgent::new()),
        vcs: Arc::new(vcs),
        tests: Arc::new(TimedTests {
            command: run.tests.clone(),
            target_dir: run.env.get("CARGO_TARGET_DIR").map(PathBuf::from),
            meter: Arc::clone(&test_meter),
        }),
        gate: Arc::new(AutoYes),
        sink: Arc::new(NullSink),
        provisioner: None,
    };
    let config = ReviewFixConfig::default()
        .with_inputs(vec![findings])
        .with_batch_size(100)
        .with_planner(PlannerMode::Deterministic)
        .with_test_command(Some(run.tests.clone()))
        .with_cargo_seed(run.env.get("CARGO_TARGET_DIR").map(PathBuf::from));
    let report = run_with_relint(config, services, relint.as_ref())
        .await
        .map_err(|e| e.to_string())?;
    let wall = started.elapsed();
    let git_by = git_delta(&git_before, &orchestrator_adapters::git::spent());
    let git = git_by
        .values()
        .fold((0, Duration::ZERO), |(n, t), s| (n + s.runs, t + s.time));
    let split = Split {
        wall,
        lint: lint_meter.read(),
        tests: test_meter.read(),
        git,
        git_by,
        commits: report.commits(),
        passes: report.passes.len(),
    };
    Ok((split, report))
}

/// Runs the lint once for the first pass's findings, kept beside the
/// repository (not in it: the tree stays clean).
async fn first_lint(
    repo: &Path,
    argv: &[String],
    env: &BTreeMap<String, String>,
    runner: &dyn CommandRunner,
) -> Result<PathBuf, String> {
    let mut spec = CommandSpec::new(argv[0].clone(), argv[1..].iter().cloned(), repo);
    spec.env = env.clone();
    spec.output_limit = orchestrator_review_fix::relint::OUTPUT_LIMIT;
    let out = runner.run(spec).await.map_err(|e| e.to_string())?;
    if out.exit_code != Some(0) {
        return Err(format!("lint {argv:?} failed: {}", tail(&out.stderr)));
    }
    let file = repo.with_extension("findings.json");
    std::fs::write(&file, out.stdout).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(file)
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// Runs `program args` in `dir`, failing with its stderr.
pub fn sh(
    dir: &Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied())
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .output()
        .map_err(|e| format!("{program} {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {args:?} in {}: {}",
            dir.display(),
            tail(&String::from_utf8_lossy(&out.stderr))
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `git init` + one commit of everything in `dir`.
pub fn commit_all(dir: &Path, message: &str) -> Result<(), String> {
    sh(dir, "git", &["init", "-q", "-b", "main"], &[])?;
    sh(dir, "git", &["config", "user.name", "bench"], &[])?;
    sh(
        dir,
        "git",
        &["config", "user.email", "bench@example.invalid"],
        &[],
    )?;
    sh(dir, "git", &["add", "-A"], &[])?;
    sh(dir, "git", &["commit", "-qm", message], &[])?;
    Ok(())
}

/// The median of `xs` (NaN when empty).
pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// The figures: registry crates, then the synthetic repositories.
pub fn perf_figures() -> Vec<(String, f64)> {
    let mut out = synthetic_figures();
    out.extend(registry_figures());
    out
}

/// The synthetic repositories' figures alone (`perf-report
/// review-fix-synthetic`).
pub fn synthetic_figures() -> Vec<(String, f64)> {
    runtime().map_or_else(Vec::new, |rt| synthetic::perf_figures(&rt))
}

/// The registry crates' figures alone (`perf-report review-fix-registry`).
pub fn registry_figures() -> Vec<(String, f64)> {
    runtime().map_or_else(Vec::new, |rt| registry::perf_figures(&rt))
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .ok()
}
