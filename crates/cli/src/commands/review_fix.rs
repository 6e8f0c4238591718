//! `orchestrator review-fix`: fix code-review findings, one verified commit
//! per fix.
//!
//! This file only wires: it resolves the options (flags over
//! `orchestrator.toml` over the flow's defaults), picks the agent, the test
//! command and the gate, and hands everything to
//! [`orchestrator_review_fix::run`]. What it prints:
//!
//! - progress on stderr (or `--json` event lines on stdout);
//! - a closing summary on stdout: the counts, the commits, the failures and
//!   the path of `fix-summary.md` (with `--json`: one last line
//!   `{"event": "summary", …}`);
//! - with `--dry-run`, the plan.
//!
//! Exit codes come from the library: 0 every finding fixed (or a dry run),
//! 1 some failed, were not fixable or were rejected, 2 unreadable input or
//! wrong usage, 3 a gate needs a human or the run was interrupted (the
//! session is resumable with `--resume`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use orchestrator_adapters::builtin::SuggestionAgent;
use orchestrator_adapters::config::{CommandLine, Config, split_command};
use orchestrator_adapters::factory::{AgentChoice, build_agent};
use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::process::{ProcessRunner, shell_quote};
use orchestrator_adapters::test_runner::{CommandTestRunner, TestCommand};
use orchestrator_core::agent::Agent;
use orchestrator_core::command::CommandSpec;
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::test_runner::{TestReport, TestRequest, TestRunner, TestRunnerError};
use orchestrator_core::text::counted;
use orchestrator_review_fix::relint::{PassesReport, Relint, StopReason, run_with_relint};
use orchestrator_review_fix::{
    FixPlan, Isolation, Outcome, PlannerMode, ReviewFixConfig, RunReport, Services,
    TestRunnerFactory, TreeEnv, infer_test_command,
};
use serde_json::json;

use super::{Exit, out};
use crate::setup;

/// How `--verify` tests fixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VerifyArg {
    /// One test run per fix (the seed's behaviour).
    Each,
    /// A stage's fixes landed in order and tested at the tip, bisected on
    /// failure (merge-queue style); lands exactly what `each` lands.
    Batch,
    /// `batch`, switching to `each` when the estimated failure rate is high.
    Auto,
}

impl From<VerifyArg> for orchestrator_review_fix::VerifyMode {
    fn from(arg: VerifyArg) -> Self {
        match arg {
            VerifyArg::Each => Self::Each,
            VerifyArg::Batch => Self::Batch,
            VerifyArg::Auto => Self::Auto,
        }
    }
}

/// Where `--isolation` runs groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IsolationArg {
    /// Each group of a parallel stage in its own git worktree.
    Worktree,
    /// Every group in the main tree, one at a time.
    Serial,
}

impl From<IsolationArg> for Isolation {
    fn from(arg: IsolationArg) -> Self {
        match arg {
            IsolationArg::Worktree => Isolation::Worktree,
            IsolationArg::Serial => Isolation::Serial,
        }
    }
}

/// Arguments of `orchestrator review-fix`.
#[derive(Debug, clap::Args)]
#[command(after_help = REVIEW_FIX_EXIT_CODES)]
pub struct ReviewFixArgs {
    /// A findings file (review-cycle export, SARIF, rdjson/rdjsonl, or
    /// cargo/clippy `--message-format=json`; detected from the content) or a
    /// review directory (its newest export is used). Repeatable.
    #[arg(long = "fix", value_name = "PATH")]
    pub fix: Vec<PathBuf>,
    /// The git repository to fix; commits land on its checked-out branch.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// The agent: builtin (apply machine-applicable suggestions, no LLM),
    /// claude, codex, gemini, openai, or `command:<cmd>`. Default: the
    /// `orchestrator.toml` / ORCHESTRATOR_AGENT choice, else builtin.
    #[arg(long, value_name = "SPEC")]
    pub agent: Option<String>,
    /// The test command run after each fix (`{pattern}` becomes the group's
    /// test pattern). Default: `[tests] command` of `orchestrator.toml`, else
    /// inferred (Cargo.toml → cargo test, package.json → npm test, pytest
    /// configuration → pytest, go.mod → go test ./...).
    #[arg(long, value_name = "CMD")]
    pub test_cmd: Option<String>,
    /// Fix attempts per finding [default: 3].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iterations: Option<u32>,
    /// Findings per planning batch [default: 5].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: Option<u32>,
    /// Planning agents at once [default: 10].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_parallel: Option<u32>,
    /// Groups of a parallel stage at once [default: 3].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_parallel_groups: Option<u32>,
    /// Where groups run: `worktree` (parallel groups in their own git
    /// worktrees) or `serial` (every group in the main tree, in order).
    #[arg(long, value_enum, default_value_t = IsolationArg::Worktree)]
    pub isolation: IsolationArg,
    /// Run on a dirty tree; dirty and untracked files are then never touched.
    #[arg(long)]
    pub allow_dirty: bool,
    /// How fixes are verified: one test run each, or batched with bisection.
    #[arg(long, value_enum, default_value_t = VerifyArg::Auto)]
    pub verify: VerifyArg,
    /// Re-runs of an identical tree after a failing test run; a failure that
    /// then passes is reported as flaky and not blamed on the fix.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub flaky_reruns: u32,
    /// Re-run this findings command after each pass and fix, in a further
    /// pass, what earlier fixes uncovered (e.g. `cargo clippy
    /// --message-format=json`; its stdout is read like a `--fix` file).
    /// Default: `[review_fix] relint` of `orchestrator.toml`, else no
    /// re-lint.
    #[arg(long, value_name = "CMD")]
    pub relint: Option<String>,
    /// Passes in all with `--relint`, the first included [default: 4].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub relint_passes: Option<u32>,
    /// Plan only: print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Continue the newest unfinished session.
    #[arg(long)]
    pub resume: bool,
    /// Approve the plan without asking.
    #[arg(short = 'y', long = "yes")]
    pub yes: bool,
    /// Print events as JSON lines on stdout (the last line is the summary).
    #[arg(long)]
    pub json: bool,
}

const REVIEW_FIX_EXIT_CODES: &str = "\
Exit codes:
  0  every finding was fixed (or --dry-run)
  1  some findings failed, were not fixable or were rejected
  2  an input cannot be read or parsed, or wrong usage
  3  a human must approve the plan, or the run was interrupted (--resume)";

/// The test command and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTests {
    /// What runs.
    pub command: TestCommand,
    /// Where it came from, for the output (`--test-cmd`, `orchestrator.toml`,
    /// `inferred: Cargo.toml found`).
    pub source: String,
    /// The time limit of one run (`[tests] timeout_secs`).
    pub time_limit: Option<Duration>,
    /// The JUnit report the command writes (`[tests] junit_report`).
    pub junit_report: Option<PathBuf>,
}

impl ResolvedTests {
    /// The argv that runs the command (`sh -c …` for a shell line), as
    /// recorded in the session.
    pub fn argv(&self) -> Vec<String> {
        match &self.command {
            TestCommand::Argv(argv) => argv.clone(),
            TestCommand::Shell(script) => vec!["sh".into(), "-c".into(), script.clone()],
        }
    }

    /// The command as shown to the user.
    pub fn display(&self) -> String {
        match &self.command {
            TestCommand::Argv(argv) => orchestrator_adapters::config::join_command(argv),
            TestCommand::Shell(script) => script.clone(),
        }
    }
}

/// Picks the test command: `--test-cmd` (split into words like a shell
/// would, without expansion), else `[tests]` of `orchestrator.toml`, else
/// what the project implies. `Err` names what is missing or wrong.
pub fn resolve_tests(
    flag: Option<&str>,
    config: &Config,
    repo: &Path,
) -> Result<ResolvedTests, String> {
    if let Some(line) = flag {
        let argv = split_command(line).map_err(|e| {
            format!("--test-cmd {line:?}: {e} (for a shell pipeline use: --test-cmd \"sh -c '…'\")")
        })?;
        if argv.is_empty() {
            return Err("--test-cmd is empty".to_owned());
        }
        return Ok(ResolvedTests {
            command: TestCommand::Argv(argv),
            source: "--test-cmd".to_owned(),
            time_limit: None,
            junit_report: None,
        });
    }
    if let Some(section) = &config.tests {
        let command = match section.command_line().map_err(|e| e.to_string())? {
            CommandLine::Argv(argv) => TestCommand::Argv(argv),
            CommandLine::Shell(script) => TestCommand::Shell(script),
        };
        return Ok(ResolvedTests {
            command,
            source: "orchestrator.toml [tests]".to_owned(),
            time_limit: section.timeout(),
            junit_report: section.junit_report.clone(),
        });
    }
    match infer_test_command(repo) {
        Some(inferred) => Ok(ResolvedTests {
            command: TestCommand::Argv(inferred.argv),
            source: format!("inferred: {}", inferred.reason),
            time_limit: None,
            junit_report: None,
        }),
        None => Err(format!(
            "no test command for {}: pass --test-cmd CMD or set [tests] command in orchestrator.toml \
             (nothing to infer: no Cargo.toml, package.json test script, pytest configuration or go.mod)",
            repo.display()
        )),
    }
}

/// The test command of a `--resume` without `--test-cmd`: the one the
/// session recorded (with `[tests]`' time limit and report when it is the
/// same command), else what [`resolve_tests`] picks.
pub fn resolve_resume_tests(
    recorded: Option<Vec<String>>,
    config: &Config,
    repo: &Path,
) -> Result<ResolvedTests, String> {
    let fresh = resolve_tests(None, config, repo);
    match (recorded, fresh) {
        (Some(argv), Ok(fresh)) if fresh.argv() == argv => Ok(fresh),
        (Some(argv), _) if !argv.is_empty() => Ok(ResolvedTests {
            command: TestCommand::Argv(argv),
            source: "recorded in the session".to_owned(),
            time_limit: None,
            junit_report: None,
        }),
        (_, fresh) => fresh,
    }
}

/// The test runner for each tree: the resolved command, with
/// `CARGO_TARGET_DIR` set to the tree's own target directory in a worktree
/// (trees that share one could run each other's builds). The main tree keeps
/// the caller's environment, so a `CARGO_TARGET_DIR` set by the user is used
/// there.
#[derive(Debug, Clone)]
pub struct CliTests {
    tests: ResolvedTests,
}

impl CliTests {
    /// A factory for `tests`.
    pub fn new(tests: ResolvedTests) -> Self {
        Self { tests }
    }

    /// The runner for `tree`, as a concrete type (for inspection).
    pub fn command_runner(&self, tree: &TreeEnv) -> CommandTestRunner {
        let mut runner = CommandTestRunner::new(self.tests.command.clone());
        if let Some(dir) = &tree.cargo_target_dir {
            runner = runner.env("CARGO_TARGET_DIR", dir.display().to_string());
        }
        if let Some(limit) = self.tests.time_limit {
            runner = runner.time_limit(limit);
        }
        if let Some(report) = &self.tests.junit_report {
            runner = runner.junit_xml(report.clone());
        }
        runner
    }
}

impl TestRunnerFactory for CliTests {
    fn runner(&self, tree: &TreeEnv) -> Arc<dyn TestRunner> {
        Arc::new(self.command_runner(tree))
    }
}

/// The tests of a dry run without a test command: the flow plans and runs
/// nothing, so a run that reaches this is a bug, reported as an unusable
/// configuration rather than a pass.
#[derive(Debug, Clone, Copy)]
pub struct NoTests;

#[async_trait::async_trait]
impl TestRunner for NoTests {
    async fn run(&self, _request: TestRequest) -> Result<TestReport, TestRunnerError> {
        Err(TestRunnerError::Config(
            "no test command: pass --test-cmd CMD or set [tests] command in orchestrator.toml"
                .to_owned(),
        ))
    }
}

impl TestRunnerFactory for NoTests {
    fn runner(&self, _tree: &TreeEnv) -> Arc<dyn TestRunner> {
        Arc::new(NoTests)
    }
}

/// The library options for `args`: flags over `[review_fix]` of
/// `orchestrator.toml` over the flow's defaults. `inputs` are the `--fix`
/// paths made absolute against the current directory.
pub fn flow_config(
    args: &ReviewFixArgs,
    config: &Config,
    inputs: Vec<PathBuf>,
    planner: PlannerMode,
) -> ReviewFixConfig {
    let defaults = ReviewFixConfig::default();
    let section = &config.review_fix;
    let usize_of = |n: u32| usize::try_from(n).unwrap_or(usize::MAX);
    ReviewFixConfig {
        inputs,
        max_iterations: args
            .max_iterations
            .or(section.max_iterations.map(|n| n.get()))
            .unwrap_or(defaults.max_iterations),
        batch_size: args
            .batch_size
            .map(usize_of)
            .or(section.batch_size.map(|n| n.get()))
            .unwrap_or(defaults.batch_size),
        max_parallel: args
            .max_parallel
            .map(usize_of)
            .or(section.max_parallel.map(|n| n.get()))
            .unwrap_or(defaults.max_parallel),
        max_parallel_groups: args
            .max_parallel_groups
            .map(usize_of)
            .unwrap_or(defaults.max_parallel_groups),
        isolation: args.isolation.into(),
        verify: args.verify.into(),
        flaky_reruns: args.flaky_reruns,
        allow_dirty: args.allow_dirty,
        dry_run: args.dry_run,
        resume: args.resume,
        planner,
        ..defaults
    }
}

/// The default number of passes with a re-lint command.
pub const DEFAULT_RELINT_PASSES: u32 = 4;

/// The re-lint command and pass limit: `--relint` (split into words like
/// `--test-cmd`) over `[review_fix] relint`; `None` without either.
pub fn resolve_relint(
    args: &ReviewFixArgs,
    config: &Config,
    repo: &Path,
) -> Result<Option<Relint>, String> {
    let argv = match (&args.relint, config.review_fix.relint_command()) {
        (Some(line), _) => {
            let argv = split_command(line).map_err(|e| {
                format!("--relint {line:?}: {e} (for a shell pipeline use: --relint \"sh -c '…'\")")
            })?;
            if argv.is_empty() {
                return Err("--relint is empty".to_owned());
            }
            argv
        }
        (None, Some(Ok(CommandLine::Argv(argv)))) => argv,
        (None, Some(Ok(CommandLine::Shell(script)))) => vec!["sh".into(), "-c".into(), script],
        (None, Some(Err(e))) => return Err(e.to_string()),
        (None, None) => {
            if args.relint_passes.is_some() {
                return Err(
                    "--relint-passes needs a re-lint command: --relint CMD or [review_fix] relint in orchestrator.toml"
                        .to_owned(),
                );
            }
            return Ok(None);
        }
    };
    let passes = args
        .relint_passes
        .or(config.review_fix.relint_passes.map(|n| n.get()))
        .unwrap_or(DEFAULT_RELINT_PASSES);
    let (program, rest) = argv.split_first().ok_or("--relint is empty")?;
    Ok(Some(Relint::new(
        CommandSpec::new(program.clone(), rest.iter().cloned(), repo),
        Arc::new(ProcessRunner::default()),
        passes,
    )))
}

fn fail(message: impl std::fmt::Display) -> Exit {
    eprintln!("error: {message}");
    Exit::BadInput
}

fn exit_of(code: u8) -> Exit {
    match code {
        0 => Exit::Success,
        1 => Exit::SomeFailed,
        3 => Exit::NeedsHuman,
        _ => Exit::BadInput,
    }
}

/// Runs the command.
pub fn run(args: &ReviewFixArgs) -> Exit {
    if args.fix.is_empty() && !args.resume {
        return fail(
            "give at least one findings file or review directory (--fix PATH), or --resume",
        );
    }
    // Inputs in the order a user reads them: the findings first (`--fix`
    // paths are relative to where the user typed them, not to --repo; one
    // that cannot be read stops the run before anything is touched), then
    // the repository, the configuration, the test command and the agent.
    let mut inputs = Vec::new();
    for p in &args.fix {
        let abs = match std::path::absolute(p) {
            Ok(abs) => abs,
            Err(e) => return fail(format!("cannot resolve --fix {}: {e}", p.display())),
        };
        if let Err(e) = orchestrator_review_fix::input::resolve_input(&abs) {
            return fail(e);
        }
        inputs.push(abs);
    }
    let repo = match std::path::absolute(&args.repo) {
        Ok(p) => p,
        Err(e) => {
            return fail(format!(
                "cannot resolve --repo {}: {e}",
                args.repo.display()
            ));
        }
    };
    if !repo.is_dir() {
        return fail(format!("--repo {}: no such directory", args.repo.display()));
    }
    let config = match setup::config(&repo, args.agent.as_deref()) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let resolved = if args.resume && args.test_cmd.is_none() {
        resolve_resume_tests(
            orchestrator_review_fix::session::recorded_test_command(
                &repo,
                inputs.first().map(PathBuf::as_path),
            ),
            &config,
            &repo,
        )
    } else {
        resolve_tests(args.test_cmd.as_deref(), &config, &repo)
    };
    // A dry run runs no tests, so it needs no test command; a `--test-cmd`
    // that cannot be used is still an error.
    let tests = match resolved {
        Ok(t) => Some(t),
        Err(_) if args.dry_run && args.test_cmd.is_none() => None,
        Err(e) => return fail(e),
    };
    let relint = match resolve_relint(args, &config, &repo) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let (agent, planner, agent_name): (Arc<dyn Agent>, PlannerMode, String) =
        match build_agent(&config) {
            Ok(AgentChoice::Builtin) => (
                Arc::new(SuggestionAgent::new()),
                PlannerMode::Deterministic,
                "builtin (machine-applicable suggestions; deterministic plan)".to_owned(),
            ),
            Ok(AgentChoice::Agent(agent)) => {
                let name = agent.name().to_owned();
                (agent, PlannerMode::Agent, name)
            }
            Err(e) => return fail(format!("--agent: {e}")),
        };
    eprintln!("review-fix: agent {agent_name}");
    match &tests {
        Some(t) => eprintln!("review-fix: test command `{}` ({})", t.display(), t.source),
        None => eprintln!("review-fix: no test command (a dry run runs no tests)"),
    }
    if let Some(r) = &relint {
        eprintln!(
            "review-fix: re-lint with `{}` after each pass (at most {} passes)",
            orchestrator_adapters::config::join_command(
                &std::iter::once(r.command.program.clone())
                    .chain(r.command.args.iter().cloned())
                    .collect::<Vec<_>>()
            ),
            r.max_passes
        );
    }
    let mut flow = flow_config(args, &config, inputs, planner);
    flow.test_command = tests.as_ref().map(ResolvedTests::argv);
    let runtime = match setup::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::SomeFailed;
        }
    };
    let started = Instant::now();
    let json_mode = args.json;
    let yes = args.yes;
    let test_display = tests.as_ref().map(ResolvedTests::display);
    let test_source = tests.as_ref().map(|t| t.source.clone());
    let (sink, human) = setup::reporter(json_mode);
    // Failure details carry the tail of the test output: the terminal gets
    // their first line (fix-summary.md and --json keep them whole).
    let sink: Arc<dyn EventSink> = if json_mode {
        sink
    } else {
        Arc::new(FirstLines(sink))
    };
    let exit = runtime.block_on(async move {
        let vcs = match GitVcs::open(&repo).await {
            Ok(v) => v,
            Err(e) => return fail(format!("--repo {}: {e}", repo.display())),
        };
        // One run per repository at a time: the library takes the lock.
        let root = orchestrator_core::vcs::Vcs::root(&vcs).to_path_buf();
        let services = Services {
            agent,
            vcs: Arc::new(vcs),
            tests: match tests {
                Some(tests) => Arc::new(CliTests::new(tests)),
                None => Arc::new(NoTests),
            },
            gate: setup::gate(yes),
            sink,
        };
        let fixes_dir = orchestrator_review_fix::session::fixes_root(
            &root,
            flow.inputs.first().map(PathBuf::as_path),
        );
        let relint_flags = relint.as_ref().map(|r| {
            let mut argv = vec![r.command.program.clone()];
            argv.extend(r.command.args.iter().cloned());
            format!(
                " --relint {} --relint-passes {}",
                shell_quote(&orchestrator_adapters::config::join_command(&argv)),
                r.max_passes
            )
        });
        let result = tokio::select! {
            r = run_with_relint(flow, services, relint.as_ref()) => r,
            _ = tokio::signal::ctrl_c() => {
                if let Some(h) = &human {
                    h.finish();
                }
                let open = !orchestrator_review_fix::session::unfinished_sessions(&fixes_dir).is_empty();
                if open {
                    eprintln!(
                        "\ninterrupted: running fixes were stopped and their files restored on resume; \
                         continue with `{}{}`",
                        resume_hint(&root),
                        relint_flags.as_deref().unwrap_or_default()
                    );
                } else {
                    eprintln!(
                        "\ninterrupted between passes: the fixes so far are committed; \
                         run the same command again to re-lint and go on"
                    );
                }
                return Exit::NeedsHuman;
            }
        };
        if let Some(h) = &human {
            h.finish();
        }
        match result {
            Ok(passes) => {
                let context = SummaryContext {
                    test_command: test_display,
                    test_source,
                    wall: started.elapsed(),
                };
                if json_mode {
                    out(&render_passes_json(&passes, &context));
                } else {
                    out(&render_passes(&passes, &context));
                }
                exit_of(passes.outcome().exit_code())
            }
            Err(e) => {
                eprintln!("error: {e}");
                exit_of(e.exit_code())
            }
        }
    });
    // Stop whatever an interrupted run left (its child processes are killed
    // when their tasks are dropped) without waiting on it for long.
    runtime.shutdown_timeout(Duration::from_secs(5));
    exit
}

/// The command that continues an interrupted run in `root` (the session
/// recorded its test command), quoted for a POSIX shell.
pub fn resume_hint(root: &Path) -> String {
    format!(
        "orchestrator review-fix --resume --repo {}",
        shell_quote(&root.display().to_string())
    )
}

/// Forwards events with multi-line messages cut to their first line.
#[derive(Debug)]
struct FirstLines(Arc<dyn EventSink>);

/// The first line of `text`, without the "Test output (tail):" lead-in that
/// announces the lines cut.
pub fn first_line(text: &str) -> &str {
    let line = text.lines().next().unwrap_or_default();
    line.strip_suffix("Test output (tail):")
        .map_or(line, str::trim_end)
}

impl EventSink for FirstLines {
    fn emit(&self, event: &Event) {
        let cut = |s: &String| first_line(s).to_owned();
        let short = match event {
            Event::AttemptFailed {
                id,
                round,
                attempt,
                error,
            } => Event::AttemptFailed {
                id: id.clone(),
                round: *round,
                attempt: *attempt,
                error: cut(error),
            },
            Event::JobFinished { id, status, detail } => Event::JobFinished {
                id: id.clone(),
                status: *status,
                detail: detail.as_ref().map(cut),
            },
            Event::Escalated { id, reason } => Event::Escalated {
                id: id.clone(),
                reason: cut(reason),
            },
            Event::Warning { message } => Event::Warning {
                message: cut(message),
            },
            other => other.clone(),
        };
        self.0.emit(&short);
    }
}

/// What the summary shows besides the report.
#[derive(Debug, Clone)]
pub struct SummaryContext {
    /// The test command as shown; `None` for a dry run without one.
    pub test_command: Option<String>,
    /// Where it came from; `None` without a test command.
    pub test_source: Option<String>,
    /// Wall time of the run.
    pub wall: Duration,
}

fn outcome_line(outcome: &Outcome) -> String {
    match outcome {
        Outcome::AllFixed => "every finding fixed".to_owned(),
        Outcome::SomeFailed => "some findings were not fixed".to_owned(),
        Outcome::DryRun => "dry run: plan written, nothing changed".to_owned(),
        Outcome::Stopped => "stopped at the plan; continue with --resume".to_owned(),
        Outcome::NeedsHuman { reason } => {
            format!("waiting for a human: {reason} (approve with -y, or run in a terminal)")
        }
    }
}

/// The plan as text: stages, their groups, each group's findings.
pub fn render_plan(plan: &FixPlan, titles: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan {}: {} in {} over {} ({} isolation)",
        plan.fix_session_id,
        counted(plan.metadata.total_findings as u64, "finding", "findings"),
        counted(plan.groups.len() as u64, "group", "groups"),
        counted(plan.timeline.len() as u64, "stage", "stages"),
        plan.metadata.isolation
    );
    if !plan.metadata.fallback_batches.is_empty() {
        let batches: Vec<String> = plan
            .metadata
            .fallback_batches
            .iter()
            .map(u32::to_string)
            .collect();
        let _ = writeln!(
            out,
            "  (deterministic fallback plan for batch {})",
            batches.join(", ")
        );
    }
    for stage in &plan.timeline {
        let mode = match stage.execution_mode {
            orchestrator_review_fix::ExecutionMode::Parallel => "parallel",
            orchestrator_review_fix::ExecutionMode::Serial => "serial",
        };
        let _ = writeln!(
            out,
            "Stage {} ({mode}): {}",
            stage.stage,
            stage.groups.join(", ")
        );
        for gid in &stage.groups {
            let Some(g) = plan.group(gid) else { continue };
            let _ = writeln!(
                out,
                "  {} {} [{}] risk {}",
                g.group_id,
                g.group_name,
                g.files.join(", "),
                g.risk_assessment.level
            );
            for f in &g.findings {
                match titles(f) {
                    Some(t) => {
                        let _ = writeln!(out, "    {f}  {t}");
                    }
                    None => {
                        let _ = writeln!(out, "    {f}");
                    }
                }
            }
        }
    }
    out
}

/// The closing summary printed on stdout.
pub fn render_summary(report: &RunReport, context: &SummaryContext) -> String {
    let mut out = String::new();
    if report.outcome == Outcome::DryRun
        && let Some(plan) = &report.plan
    {
        let titles = |id: &str| {
            report
                .findings
                .iter()
                .find(|f| f.id == id)
                .map(|f| f.title.clone())
        };
        out.push_str(&render_plan(plan, &titles));
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "review-fix {}: {}",
        report.fix_session_id,
        outcome_line(&report.outcome)
    );
    for note in &report.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    if report.outcome != Outcome::DryRun {
        let _ = writeln!(
            out,
            "  findings: {} ({} fixed, {} failed, {}{} rejected)",
            report.findings.len(),
            report.count("fixed"),
            report.count("failed"),
            match report.count("not_fixable") {
                0 => String::new(),
                n => format!("{n} not fixable by this agent, "),
            },
            report.count("rejected"),
        );
        let v = &report.verification;
        let tests = match (&context.test_command, &context.test_source) {
            (Some(command), Some(source)) => format!("`{command}`, {source}"),
            (Some(command), None) => format!("`{command}`"),
            (None, _) => "no test command".to_owned(),
        };
        let _ = writeln!(
            out,
            "  commits: {}; test runs: {} ({tests}); wall time {:.1}s",
            report.commits.len(),
            v.test_runs,
            context.wall.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "  verification: {}; one by one would need {} runs, saved {}; re-runs {}, flaky {}",
            v.mode,
            v.each_runs,
            v.runs_saved(),
            v.reruns,
            v.flaky
        );
        for c in &report.commits {
            let short = &c.id.as_str()[..c.id.as_str().len().min(7)];
            let subject = c.message.lines().next().unwrap_or_default();
            let _ = writeln!(out, "    {short} {subject}");
        }
        let not_fixed: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.result != "fixed")
            .collect();
        if !not_fixed.is_empty() {
            let _ = writeln!(out, "  not fixed:");
            for f in not_fixed {
                let why = f.error.as_deref().map(first_line).unwrap_or_default();
                let attempts = if f.attempts > 0 && f.result != "not_fixable" {
                    format!(" after {}", counted(f.attempts, "attempt", "attempts"))
                } else {
                    String::new()
                };
                let result = if f.result == "not_fixable" {
                    "not fixable by this agent"
                } else {
                    f.result.as_str()
                };
                let _ = writeln!(out, "    {} {result}{attempts}: {why}", f.id);
            }
        }
    }
    let summary = report
        .session_dir
        .join(orchestrator_review_fix::session::SUMMARY_FILE);
    if summary.is_file() {
        let _ = writeln!(out, "  summary: {}", summary.display());
    } else {
        let _ = writeln!(out, "  session: {}", report.session_dir.display());
    }
    out
}

/// The closing summary of all passes: one pass is [`render_summary`]; with
/// re-lint passes, each pass's summary under a `pass N` heading, then the
/// totals and why the passes stopped.
pub fn render_passes(passes: &PassesReport, context: &SummaryContext) -> String {
    // One pass that is the whole story (no re-lint, or a dry run or a plan
    // waiting for approval, after which nothing re-lints): its summary.
    if let ([only], StopReason::NotAsked | StopReason::NotExecuted) =
        (passes.passes.as_slice(), &passes.stop)
    {
        return render_summary(only, context);
    }
    let mut out = String::new();
    let n = passes.passes.len();
    for (i, report) in passes.passes.iter().enumerate() {
        let _ = writeln!(out, "pass {}/{n}:", i + 1);
        out.push_str(&render_summary(report, &pass_context(passes, i, context)));
    }
    let _ = writeln!(
        out,
        "review-fix: {} ({}): {}; {} ({} fixed, {} failed, {}{} rejected); {}; {}; wall time {:.1}s",
        counted(n as u64, "pass", "passes"),
        passes.stop,
        outcome_line(&passes.outcome()),
        counted(passes.findings() as u64, "finding", "findings"),
        passes.count("fixed"),
        passes.count("failed"),
        match passes.count("not_fixable") {
            0 => String::new(),
            k => format!("{k} not fixable by this agent, "),
        },
        passes.count("rejected"),
        counted(passes.commits() as u64, "commit", "commits"),
        counted(u64::from(passes.test_runs()), "test run", "test runs"),
        context.wall.as_secs_f64()
    );
    if let StopReason::CommandFailed { stderr_tail, .. } = &passes.stop
        && !stderr_tail.trim().is_empty()
    {
        let _ = writeln!(out, "  the re-lint command's stderr ends:");
        for line in stderr_tail.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    out
}

/// The summary context of pass `i`: its own wall time.
fn pass_context(passes: &PassesReport, i: usize, context: &SummaryContext) -> SummaryContext {
    SummaryContext {
        wall: passes.walls.get(i).copied().unwrap_or(context.wall),
        ..context.clone()
    }
}

/// The `--json` closing lines: without re-lint, one `summary` line
/// ([`summary_json`]); with `--relint` (even when one pass ran), a
/// `pass_summary` line per pass and a last `summary` line with the totals
/// (`passes`, `relint_stop`, `relint_stderr_tail`, the findings of every
/// pass — each with its `pass` — and their commits).
pub fn render_passes_json(passes: &PassesReport, context: &SummaryContext) -> String {
    let mut out = String::new();
    let many = passes.passes.len() > 1 || passes.stop != StopReason::NotAsked;
    if !many && let [only] = passes.passes.as_slice() {
        let _ = writeln!(out, "{}", summary_json(only, context));
        return out;
    }
    let mut findings = Vec::new();
    let mut commits = Vec::new();
    for (i, report) in passes.passes.iter().enumerate() {
        let mut line = summary_json(report, &pass_context(passes, i, context));
        line["event"] = json!("pass_summary");
        line["pass"] = json!(i + 1);
        if let Some(f) = line["findings"].as_array() {
            findings.extend(f.iter().cloned().map(|mut f| {
                f["pass"] = json!(i + 1);
                f
            }));
        }
        if let Some(c) = line["commits"].as_array() {
            commits.extend(c.iter().cloned());
        }
        let _ = writeln!(out, "{line}");
    }
    let outcome = passes.outcome();
    let last = passes.passes.last().map(|r| summary_json(r, context));
    // `wall_time_s` stays the whole run's.
    let mut total = last.unwrap_or_else(|| json!({}));
    total["event"] = json!("summary");
    total["outcome"] = json!(outcome.as_str());
    total["exit_code"] = json!(outcome.exit_code());
    total["passes"] = json!(passes.passes.len());
    total["relint_stop"] = json!(passes.stop.to_string());
    if let StopReason::CommandFailed { stderr_tail, .. } = &passes.stop {
        total["relint_stderr_tail"] = json!(stderr_tail);
    }
    total["findings"] = json!(findings);
    total["commits"] = json!(commits);
    total["counts"] = json!({
        "total": passes.findings(),
        "fixed": passes.count("fixed"),
        "failed": passes.count("failed"),
        "rejected": passes.count("rejected"),
    });
    total["test_runs"] = json!(passes.test_runs());
    let _ = writeln!(out, "{total}");
    out
}

/// The closing summary as one JSON object (`--json`).
pub fn summary_json(report: &RunReport, context: &SummaryContext) -> serde_json::Value {
    let summary = report
        .session_dir
        .join(orchestrator_review_fix::session::SUMMARY_FILE);
    json!({
        "event": "summary",
        "flow": orchestrator_review_fix::FLOW,
        "fix_session_id": report.fix_session_id,
        "session_dir": report.session_dir,
        "summary_file": summary.is_file().then_some(summary),
        "outcome": report.outcome.as_str(),
        "exit_code": report.outcome.exit_code(),
        "findings": report.findings.iter().map(|f| json!({
            "id": f.id,
            "title": f.title,
            "result": f.result,
            "attempts": f.attempts,
            "commit": f.commit,
            "error": f.error,
        })).collect::<Vec<_>>(),
        "counts": {
            "total": report.findings.len(),
            "fixed": report.count("fixed"),
            "failed": report.count("failed"),
            "rejected": report.count("rejected"),
        },
        "commits": report.commits.iter().map(|c| json!({
            "id": c.id.as_str(),
            "message": c.message.lines().next().unwrap_or_default(),
        })).collect::<Vec<_>>(),
        "test_runs": report.verification.test_runs,
        "verification": {
            "mode": report.verification.mode.to_string(),
            "test_runs": report.verification.test_runs,
            "reruns": report.verification.reruns,
            "each_runs": report.verification.each_runs,
            "runs_saved": report.verification.runs_saved(),
            "flaky": report.verification.flaky,
        },
        "test_command": context.test_command,
        "test_command_source": context.test_source,
        "wall_time_s": context.wall.as_secs_f64(),
        "plan": report.plan,
        "notes": report.notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> ReviewFixArgs {
        let mut argv = vec!["orchestrator", "review-fix"];
        argv.extend_from_slice(args);
        match crate::Cli::try_parse_from(argv).unwrap().command {
            crate::Command::ReviewFix(a) => a,
            other => panic!("parsed {other:?}"),
        }
    }

    #[test]
    fn flags_parse_and_override_the_config_file() {
        let args = parse(&[
            "--fix",
            "a.json",
            "--fix",
            "b.sarif",
            "--max-iterations",
            "5",
            "--max-parallel-groups",
            "2",
            "--isolation",
            "serial",
            "-y",
            "--json",
        ]);
        assert_eq!(
            args.fix,
            [PathBuf::from("a.json"), PathBuf::from("b.sarif")]
        );
        assert!(args.yes && args.json && !args.dry_run);
        let config =
            Config::parse_str("version = 1\n[review_fix]\nbatch_size = 7\nmax_iterations = 9\n")
                .unwrap();
        let flow = flow_config(&args, &config, vec![], PlannerMode::Deterministic);
        assert_eq!(flow.max_iterations, 5, "the flag wins over the file");
        assert_eq!(flow.batch_size, 7, "the file wins over the default");
        assert_eq!(flow.max_parallel, 10, "the default");
        assert_eq!(flow.max_parallel_groups, 2);
        assert_eq!(flow.isolation, Isolation::Serial);
        assert_eq!(flow.planner, PlannerMode::Deterministic);
    }

    #[test]
    fn zero_counts_and_unknown_isolation_are_usage_errors() {
        let bad = |args: &[&str]| {
            let mut argv = vec!["orchestrator", "review-fix"];
            argv.extend_from_slice(args);
            crate::Cli::try_parse_from(argv).unwrap_err().kind()
        };
        assert_eq!(
            bad(&["--fix", "x", "--batch-size", "0"]),
            clap::error::ErrorKind::ValueValidation
        );
        assert_eq!(
            bad(&["--fix", "x", "--isolation", "docker"]),
            clap::error::ErrorKind::InvalidValue
        );
    }

    #[test]
    fn the_test_command_comes_from_the_flag_the_file_or_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let none = Config::default();
        let err = resolve_tests(None, &none, dir.path()).unwrap_err();
        assert!(err.contains("--test-cmd"), "{err}");

        std::fs::write(dir.path().join("go.mod"), "module x\n").unwrap();
        let inferred = resolve_tests(None, &none, dir.path()).unwrap();
        assert_eq!(inferred.display(), "go test ./...");
        assert_eq!(inferred.source, "inferred: go.mod found");

        let file = Config::parse_str(
            "version = 1\n[tests]\ncommand = \"make check\"\ntimeout_secs = 60\n",
        )
        .unwrap();
        let from_file = resolve_tests(None, &file, dir.path()).unwrap();
        assert_eq!(
            from_file.command,
            TestCommand::Argv(vec!["make".into(), "check".into()])
        );
        assert_eq!(from_file.time_limit, Some(Duration::from_secs(60)));

        let flag = resolve_tests(Some("cargo test -q 'a b'"), &file, dir.path()).unwrap();
        assert_eq!(
            flag.command,
            TestCommand::Argv(vec![
                "cargo".into(),
                "test".into(),
                "-q".into(),
                "a b".into()
            ])
        );
        assert_eq!(flag.source, "--test-cmd");
        let piped = resolve_tests(Some("cargo test | tee log"), &file, dir.path()).unwrap_err();
        assert!(piped.contains("sh -c"), "{piped}");
    }

    #[test]
    fn the_relint_command_comes_from_the_flag_or_the_file() {
        let repo = Path::new("/repo");
        let none = Config::default();
        assert!(
            resolve_relint(&parse(&["--fix", "x"]), &none, repo)
                .unwrap()
                .is_none()
        );
        let file = Config::parse_str(
            "version = 1\n[review_fix]\nrelint = [\"cargo\", \"clippy\", \"--message-format=json\"]\nrelint_passes = 2\n",
        )
        .unwrap();
        let from_file = resolve_relint(&parse(&["--fix", "x"]), &file, repo)
            .unwrap()
            .unwrap();
        assert_eq!(from_file.command.program, "cargo");
        assert_eq!(from_file.command.args, ["clippy", "--message-format=json"]);
        assert_eq!(from_file.command.cwd, repo);
        assert_eq!(from_file.max_passes, 2);
        let flag = resolve_relint(
            &parse(&[
                "--fix",
                "x",
                "--relint",
                "ruff check --output-format sarif",
                "--relint-passes",
                "7",
            ]),
            &file,
            repo,
        )
        .unwrap()
        .unwrap();
        assert_eq!(flag.command.program, "ruff");
        assert_eq!(flag.max_passes, 7, "the flag wins over the file");
        let bad = Config::parse_str("version = 1\n[review_fix]\nrelint = []\n").unwrap();
        let err = resolve_relint(&parse(&["--fix", "x"]), &bad, repo).unwrap_err();
        assert!(err.contains("[review_fix] relint"), "{err}");
    }

    #[test]
    fn the_resume_hint_quotes_the_repository() {
        assert_eq!(
            resume_hint(Path::new("/work/repo")),
            "orchestrator review-fix --resume --repo /work/repo"
        );
        assert_eq!(
            resume_hint(Path::new("/my repo's")),
            r"orchestrator review-fix --resume --repo '/my repo'\''s'"
        );
    }

    #[test]
    fn terminal_lines_keep_the_first_line_of_a_failure() {
        assert_eq!(
            first_line(
                "the tests failed (failing: a::b); the fix was rolled back. Test output (tail):\nrunning 5 tests\n"
            ),
            "the tests failed (failing: a::b); the fix was rolled back."
        );
        assert_eq!(first_line("one line"), "one line");
        assert_eq!(first_line(""), "");
        let seen = Arc::new(orchestrator_core::event::CollectingSink::default());
        let sink = FirstLines(seen.clone());
        sink.emit(&Event::Warning {
            message: "first\nsecond".into(),
        });
        assert_eq!(
            seen.events(),
            [Event::Warning {
                message: "first".into()
            }]
        );
    }

    #[test]
    fn worktrees_get_their_own_cargo_target_dir_and_the_main_tree_inherits() {
        let tests = CliTests::new(ResolvedTests {
            command: TestCommand::Argv(vec!["cargo".into(), "test".into()]),
            source: "--test-cmd".into(),
            time_limit: None,
            junit_report: None,
        });
        let main = tests.command_runner(&TreeEnv {
            root: "/repo".into(),
            worktree_slot: None,
            cargo_target_dir: None,
        });
        let wt = tests.command_runner(&TreeEnv {
            root: "/repo/.review/wt".into(),
            worktree_slot: Some(1),
            cargo_target_dir: Some("/s/targets/wt1".into()),
        });
        assert_eq!(
            main,
            CommandTestRunner::argv(["cargo", "test"]),
            "the main tree runs with the caller's environment"
        );
        assert_eq!(
            wt,
            CommandTestRunner::argv(["cargo", "test"]).env("CARGO_TARGET_DIR", "/s/targets/wt1")
        );
    }
}
