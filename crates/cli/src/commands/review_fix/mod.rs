//! `orchestrator review-fix`: fix code-review findings, one verified commit
//! per fix.
//!
//! This module only wires: it resolves the options (flags over
//! `orchestrator.toml` over the flow's defaults), picks the agent, the test
//! command and the gate, and hands everything to
//! [`orchestrator_review_fix::run`]. What it prints:
//!
//! - progress on stderr (or `--json` event lines on stdout);
//! - a closing summary on stdout: the counts, the commits, the failures and
//!   the path of `fix-summary.md` (with `--json`: one last line
//!   `{"event": "summary", …}`);
//! - with `--dry-run`, the plan;
//! - with `--mr N` / `--pr N` (GitLab), what was delivered into the request
//!   (`request`: the forge, the routed agent, the delivery lines).
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
use orchestrator_adapters::test_runner::{CommandTestRunner, RemoteTestRunner, TestCommand};
use orchestrator_core::agent::Agent;
use orchestrator_core::command::CommandSpec;
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::state::event_log::RunState;
use orchestrator_core::test_runner::{TestReport, TestRequest, TestRunner, TestRunnerError};
use orchestrator_core::text::counted;
use orchestrator_review_fix::relint::{PassesReport, Relint, StopReason, run_with_relint};
use orchestrator_review_fix::{
    FixPlan, Isolation, ItemLimits, Outcome, PlannerMode, ReviewFixConfig, RunReport, Services,
    TestRunnerFactory, TreeEnv, infer_test_command,
};
use serde_json::json;

use super::{Exit, out};
use crate::setup::{self, ConfigFiles};

mod options;
mod render;
mod request;
mod running;
mod tests_cmd;

use running::*;

pub use options::*;
pub use render::*;
pub use request::*;
pub use tests_cmd::*;

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
    /// One group at a time, in one worktree; each fix lands as it passes.
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
    /// A findings file (review-cycle export, SARIF, rdjson/rdjsonl,
    /// cargo/clippy `--message-format=json`, `ruff check --output-format
    /// json`, `eslint -f json`; detected from the content) or a review
    /// directory (its newest export is used). Repeatable.
    #[arg(long = "fix", value_name = "PATH")]
    pub fix: Vec<PathBuf>,
    /// The git repository to fix; commits land on its checked-out branch.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// The agent: builtin (apply machine-applicable suggestions, no LLM),
    /// claude, codex, gemini, openai, `openai:<model>`, or `command:<cmd>`. Default: the
    /// `orchestrator.toml` / ORCHESTRATOR_AGENT choice, else builtin.
    #[arg(long, value_name = "SPEC")]
    pub agent: Option<String>,
    /// Limits on what the run's agents may spend.
    #[command(flatten)]
    pub budget: setup::BudgetFlags,
    /// Limits on what the agent may spend on one finding.
    #[command(flatten)]
    pub item_budget: setup::ItemBudgetFlags,
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
    /// Where test runs run: `local`, or `ray` / `ray=http://head:8265` for
    /// jobs on a Ray cluster (`[runner]` in orchestrator.toml; RAY_ADDRESS).
    #[arg(long, value_name = "local|ray[=URL]")]
    pub runner: Option<String>,
    /// How groups run: `worktree` (the groups of a parallel stage at once,
    /// each in its own git worktree) or `serial` (one group at a time, in
    /// one worktree). Never in your working tree, where you may be working.
    #[arg(long, value_enum, default_value_t = IsolationArg::Worktree)]
    pub isolation: IsolationArg,
    /// Run on a dirty tree; dirty and untracked files are then never touched.
    #[arg(long)]
    pub allow_dirty: bool,
    /// Try again the findings an earlier run failed to fix. By default the
    /// findings ledger (.review/ledger.json, `orchestrator findings list`)
    /// skips them, like fixed, declined and not-fixable ones.
    #[arg(long)]
    pub retry_failed: bool,
    /// Also write the run's results as SARIF 2.1.0 to FILE, for a
    /// code-scanning upload: every result with its baselineState against
    /// the findings ledger (new, unchanged, updated, absent), the fixes as
    /// SARIF fixes.
    #[arg(long, value_name = "FILE")]
    pub sarif_out: Option<PathBuf>,
    /// Refuse to fix when tests already fail before any fix. By default the
    /// tests run once at the base first: failing tests are named and each
    /// fix is judged by "no test fails that passed at the base".
    #[arg(long)]
    pub require_green_base: bool,
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
    /// A pull/merge request whose review threads to fix, and delivery.
    #[command(flatten)]
    pub request: RequestFlags,
}

const REVIEW_FIX_EXIT_CODES: &str = "\
Exit codes:
  0  every finding was fixed (or --dry-run)
  1  some findings failed, were not fixable or were rejected
  2  an input cannot be read or parsed, or wrong usage
  3  a human must approve the plan, or the run was interrupted (--resume)";

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
pub fn run(args: &ReviewFixArgs, files: &ConfigFiles) -> Exit {
    let mut resolved = match resolve(args, files) {
        Ok(resolved) => resolved,
        Err(e) => return fail(e),
    };
    let runtime = match setup::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::SomeFailed;
        }
    };
    let chosen = crate::remote::choose(&resolved.config, args.runner.as_deref());
    let remote = match runtime.block_on(chosen) {
        Ok(remote) => remote,
        Err(e) => return fail(format!("--runner: {e}")),
    };
    if remote.is_some() {
        crate::remote::warn_unsent(&args.repo, &resolved.config);
    }
    if let Some(r) = remote
        .as_ref()
        .filter(|_| args.max_parallel_groups.is_none())
    {
        resolved.flow.max_parallel_groups = r.width;
    }
    let started = Instant::now();
    let mut reporter = setup::reporter(args.json);
    // Failure details carry the tail of the test output: the terminal gets
    // their first line (fix-summary.md, --json and the session's log keep
    // them whole).
    if !args.json {
        reporter.terminal = Arc::new(FirstLines(Arc::clone(&reporter.terminal)));
    }
    let exit = runtime.block_on(execute(args, resolved, remote, reporter, started));
    // Stop whatever an interrupted run left (its child processes are killed
    // when their tasks are dropped) without waiting on it for long.
    runtime.shutdown_timeout(Duration::from_secs(5));
    exit
}

/// Resolves the inputs in the order a user reads them: the findings first
/// (`--fix` paths are relative to where the user typed them, not to
/// --repo; one that cannot be read stops the run before anything is
/// touched), then the repository, the configuration, the test command, the
/// re-lint and the agent — and says which it uses.
fn resolve(args: &ReviewFixArgs, files: &ConfigFiles) -> Result<Resolved, String> {
    check_usage(args)?;
    let (inputs, repo) = resolve_paths(args)?;
    let config = setup::effective_config_with_items(
        &repo,
        args.agent.as_deref(),
        &args.budget,
        &args.item_budget,
        files,
    )?
    .into_config();
    let tests = choose_tests(args, &config, &repo, &inputs)?;
    let relint = resolve_relint(args, &config, &repo)?;
    let (agent, planner, agent_name) = choose_agent(&config, args.request.number().is_some())?;
    announce(&agent_name, tests.as_ref(), relint.as_ref());
    let provisioner = setup::provisioner(&config);
    let mut flow = flow_config(args, &config, inputs, planner);
    flow.test_command = tests.as_ref().map(ResolvedTests::argv);
    Ok(Resolved {
        repo,
        config,
        tests,
        relint,
        agent,
        flow,
        provisioner,
    })
}

/// Flags that do not go together, or nothing to do.
fn check_usage(args: &ReviewFixArgs) -> Result<(), String> {
    let number = args.request.number();
    if args.fix.is_empty() && !args.resume && number.is_none() {
        return Err(
            "give at least one findings file or review directory (--fix PATH), a request (--mr N, --pr N), or --resume"
                .to_owned(),
        );
    }
    if let Some(flag) = args.request.stray() {
        return Err(format!(
            "{flag} needs a request to deliver into: --mr N or --pr N"
        ));
    }
    if number.is_some() && (args.resume || args.dry_run) {
        return Err("--mr/--pr run a fresh session: drop --resume and --dry-run".to_owned());
    }
    Ok(())
}

/// The `--fix` inputs, each made absolute and checked to be readable, and
/// the repository folder.
fn resolve_paths(args: &ReviewFixArgs) -> Result<(Vec<PathBuf>, PathBuf), String> {
    let mut inputs = Vec::new();
    for p in &args.fix {
        let abs = std::path::absolute(p)
            .map_err(|e| format!("cannot resolve --fix {}: {e}", p.display()))?;
        orchestrator_review_fix::input::resolve_input(&abs).map_err(|e| e.to_string())?;
        inputs.push(abs);
    }
    let repo = std::path::absolute(&args.repo)
        .map_err(|e| format!("cannot resolve --repo {}: {e}", args.repo.display()))?;
    if !repo.is_dir() {
        return Err(format!("--repo {}: no such directory", args.repo.display()));
    }
    Ok((inputs, repo))
}

/// The test command: `--test-cmd`, the configuration's, the one a resumed
/// session recorded, or inferred. A dry run needs none, but a `--test-cmd`
/// that cannot be used is still an error.
fn choose_tests(
    args: &ReviewFixArgs,
    config: &Config,
    repo: &Path,
    inputs: &[PathBuf],
) -> Result<Option<ResolvedTests>, String> {
    let resolved = if args.resume && args.test_cmd.is_none() {
        resolve_resume_tests(
            orchestrator_review_fix::session::recorded_test_command(
                repo,
                inputs.first().map(PathBuf::as_path),
            ),
            config,
            repo,
        )
    } else {
        resolve_tests(args.test_cmd.as_deref(), config, repo)
    };
    match resolved {
        Ok(t) => Ok(Some(t)),
        Err(_) if args.dry_run && args.test_cmd.is_none() => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The agent, the planner mode and the agent's name for the terminal. On a
/// request (`request`), suggestions go to the builtin agent and the rest to
/// the configured LLM agent.
fn choose_agent(
    config: &Config,
    request: bool,
) -> Result<(Arc<dyn Agent>, PlannerMode, String), String> {
    let (agent, planner, name): (Arc<dyn Agent>, PlannerMode, String) =
        match build_agent(config).map_err(|e| format!("--agent: {e}"))? {
            AgentChoice::Builtin => (
                Arc::new(SuggestionAgent::new()),
                PlannerMode::Deterministic,
                "builtin (machine-applicable suggestions; deterministic plan)".to_owned(),
            ),
            AgentChoice::Agent(agent) => {
                let name = agent.name().to_owned();
                (agent, PlannerMode::Agent, name)
            }
        };
    let agent = match (request, planner) {
        (false, _) => agent,
        (true, PlannerMode::Deterministic) => routed(agent, None),
        (true, _) => routed(Arc::new(SuggestionAgent::new()), Some(agent)),
    };
    Ok((agent, planner, name))
}

/// Says on stderr which agent, test command and re-lint the run uses.
fn announce(agent_name: &str, tests: Option<&ResolvedTests>, relint: Option<&Relint>) {
    eprintln!("review-fix: agent {agent_name}");
    match tests {
        Some(t) => eprintln!("review-fix: test command `{}` ({})", t.display(), t.source),
        None => eprintln!("review-fix: no test command (a dry run runs no tests)"),
    }
    if let Some(r) = relint {
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
}

/// The command that continues an interrupted run in `root` (the session
/// recorded its test command), quoted for a POSIX shell.
pub fn resume_hint(root: &Path) -> String {
    format!(
        "orchestrator review-fix --resume --repo {}",
        shell_quote(&root.display().to_string())
    )
}

/// How a run's outcome reads in the session's log.
fn run_state(outcome: &Outcome) -> (RunState, Option<String>) {
    match outcome {
        Outcome::AllFixed | Outcome::DryRun => (RunState::Done, None),
        Outcome::SomeFailed => (RunState::Failed, None),
        Outcome::Stopped => (RunState::Waiting, Some("the plan was declined".to_owned())),
        Outcome::NeedsHuman { reason } => (RunState::Waiting, Some(reason.clone())),
        Outcome::LimitReached { reason } => (RunState::Limit, Some(reason.clone())),
    }
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

#[cfg(test)]
mod tests;
