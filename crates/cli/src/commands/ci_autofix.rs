//! `orchestrator ci-autofix`: classify a failed CI check, watch a PR's
//! required checks, and run the cadence-matrix fix loop on GitHub or locally.
//!
//! - `ci-autofix classify [FILE|-] [--json]` — the seed's `classification=…` /
//!   `sub_class=…` lines, or JSON with the evidence. Exit 0 whenever the input
//!   could be read, 2 otherwise.
//! - `ci-autofix watch --pr N [--timeout S]` — the CI watcher, with the seed's
//!   watcher codes: 0 green, 1 error (bad usage included), 2 a required check
//!   failed (the handoff JSON on stdout), 3 timeout.
//! - `ci-autofix --handoff FILE|-`, `ci-autofix --pr N`,
//!   `ci-autofix --local --check CMD…` — the fix loop
//!   ([`orchestrator_ci_autofix::run_autofix`]). Exit 0 green, 1 still failing
//!   (or the CI could not be reached), 2 bad input, 3 escalated to a human or
//!   interrupted.
//!
//! Why `watch` parses its own arguments: the top-level parser (`Cli::parse`
//! in `main.rs`) exits 2 on a usage error, but the watcher's contract reserves
//! 2 for "a required check failed" — a script that treats 2 as "start the fix
//! loop" must never start it on a typo. So the `watch` subcommand only
//! collects its raw arguments ([`WatchRaw`]) and [`run`] parses them with
//! [`WatchArgs`]' own parser (`try_parse_from`), mapping a usage error to 1
//! and `--help` to 0. Every other subcommand keeps clap's usual exit code 2.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgGroup, Parser};
use jiff::Timestamp;
use orchestrator_adapters::builtin::CiFixAgent;
use orchestrator_adapters::config::Config;
use orchestrator_adapters::factory::{AgentChoice, build_agent};
use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_ci_autofix::report::audit_log_path;
use orchestrator_ci_autofix::state::{StateFile, StateFileError};
use orchestrator_ci_autofix::{
    AutofixConfig, AutofixContext, AutofixError, AutofixOutcome, GithubConfig, GithubProvider,
    Handoff, LocalConfig, RunSource, Target, WatchOutcome, classify, plan_run, watch,
};
use orchestrator_core::Agent;
use orchestrator_core::agent::ItemLimits;
use orchestrator_core::command::CommandRunner;
use orchestrator_core::state::StateError;
use orchestrator_core::state::event_log::RunState;
use orchestrator_core::vcs::Vcs;
use serde_json::json;

use super::{Exit, out, read_input};
use crate::setup::{self, ConfigFiles};

mod render;
use render::*;

/// Arguments of `orchestrator ci-autofix`: a subcommand (`classify`,
/// `watch`) or the fix loop's flags.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct CiAutofixArgs {
    /// `classify` or `watch`; without one, the fix loop runs.
    #[command(subcommand)]
    pub command: Option<CiAutofixCommand>,
    /// The fix loop's flags.
    #[command(flatten)]
    pub fix: FixArgs,
}

/// The subcommands of `orchestrator ci-autofix`.
#[derive(Debug, clap::Subcommand)]
pub enum CiAutofixCommand {
    /// Classify a failed check's log: mechanical (trivial / non-trivial),
    /// semantic or unknown. Exit 0 whenever the input could be read.
    Classify(ClassifyArgs),
    /// Wait for a PR's required checks (the CI watcher). Exit 0 green, 1 error
    /// (bad usage included), 2 a required check failed (the handoff JSON on
    /// stdout), 3 timeout.
    #[command(
        disable_help_flag = true,
        override_usage = "orchestrator ci-autofix watch --pr <N> [--timeout <S>] [--poll-interval <S>] [--repo <DIR>]"
    )]
    Watch(WatchRaw),
}

/// Arguments of `orchestrator ci-autofix classify`.
#[derive(Debug, clap::Args)]
pub struct ClassifyArgs {
    /// The failed check's log (`-` or nothing: standard input).
    #[arg(value_name = "FILE|-", default_value = "-")]
    pub log: PathBuf,
    /// Print `{"classification", "sub_class", "evidence"}` instead of the
    /// seed's two lines.
    #[arg(long)]
    pub json: bool,
}

/// The raw arguments of `orchestrator ci-autofix watch`, parsed by
/// [`WatchArgs`] in [`run`] so that a usage error exits 1 (see the module docs).
#[derive(Debug, clap::Args)]
pub struct WatchRaw {
    /// `--pr <N> [--timeout <S>] [--poll-interval <S>] [--repo <DIR>]` (`--help` for details).
    #[arg(
        value_name = "ARGS",
        num_args = 0..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<String>,
}

/// Arguments of `orchestrator ci-autofix watch`.
#[derive(Debug, Parser)]
#[command(
    name = "orchestrator ci-autofix watch",
    about = "Wait for a pull request's required checks (polls `gh pr view` for the head's checks).",
    after_help = "Exit codes:\n  0  all required checks passed\n  1  error, including bad usage\n  2  a required check failed (the handoff JSON on stdout)\n  3  checks still pending at the time limit"
)]
pub struct WatchArgs {
    /// The pull request.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pr: u64,
    /// How long to wait for pending checks, in seconds.
    #[arg(long, value_name = "S", default_value = "1800", value_parser = parse_seconds)]
    pub timeout: Duration,
    /// Time between two polls, in seconds.
    #[arg(long, value_name = "S", default_value = "10", value_parser = parse_seconds)]
    pub poll_interval: Duration,
    /// The repository (its checked-out branch names the handoff's branch).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
}

/// The fix loop's flags: exactly one of `--handoff`, `--pr`, `--local`.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("mode").required(true).args(["handoff", "pr", "local"])))]
pub struct FixArgs {
    /// Fix the failed checks of a CI watcher handoff (`-`: standard input).
    #[arg(long, value_name = "FILE|-")]
    pub handoff: Option<PathBuf>,
    /// Watch the PR's required checks, fix, push, and watch again.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pr: Option<u64>,
    /// Run the checks locally (`--check`) instead of on GitHub.
    #[arg(long, requires = "check")]
    pub local: bool,
    /// Local mode: a check command, run with `sh -c` in the repository (repeatable).
    // "needs --local" is checked in `run_fix`: clap's `requires = "local"`
    // was not enforced here (`--pr 3 --check x` parsed), `local` being a
    // member of the required `mode` group.
    #[arg(long, value_name = "CMD")]
    pub check: Vec<String>,
    /// Local mode: push fix commits too (GitHub modes always push).
    #[arg(long, requires = "local")]
    pub push: bool,
    /// Local mode: time limit of one check run, in seconds.
    #[arg(long, value_name = "S", requires = "local", value_parser = parse_seconds)]
    pub check_timeout: Option<Duration>,
    /// Local mode: the ref the working change is diffed against for the
    /// agent (default: the branch's upstream).
    #[arg(long, value_name = "REF", requires = "local")]
    pub base: Option<String>,
    /// The agent: builtin, claude, codex, gemini, openai, `openai:<model>` or `command:<cmd>`
    /// (default: orchestrator.toml, else builtin — formatters and linter fixers).
    #[arg(long, value_name = "SPEC")]
    pub agent: Option<String>,
    /// Limits on what the run's agents may spend.
    #[command(flatten)]
    pub budget: setup::BudgetFlags,
    /// Limits on what the agent may spend on one iteration (its one fix
    /// call; `--item-max-agent-calls` does not apply).
    #[command(flatten)]
    pub item_budget: setup::ItemBudgetFlags,
    /// Iterations before the mandatory escalation.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iterations: u32,
    /// Answer every confirmation with its recommended option.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Print the events and the outcome as JSON lines on stdout.
    #[arg(long)]
    pub json: bool,
    /// The repository (the top of its work tree).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Accept uncommitted changes; the dirty files are never touched.
    #[arg(long)]
    pub allow_dirty: bool,
    /// The remote fix commits are pushed to.
    #[arg(long, value_name = "NAME", default_value = "origin")]
    pub remote: String,
    /// GitHub modes: how long to wait for pending checks, in seconds.
    #[arg(long, value_name = "S", default_value = "1800", value_parser = parse_seconds)]
    pub timeout: Duration,
    /// GitHub modes: time between two polls of the checks, in seconds.
    #[arg(long, value_name = "S", default_value = "10", value_parser = parse_seconds)]
    pub poll_interval: Duration,
}

/// Parses a non-negative number of seconds (`30`, `0.5`).
fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("`{text}` is not a non-negative number of seconds"))
}

/// Runs the command.
pub fn run(args: &CiAutofixArgs, files: &ConfigFiles) -> Exit {
    match &args.command {
        Some(CiAutofixCommand::Classify(a)) => run_classify(a),
        Some(CiAutofixCommand::Watch(raw)) => run_watch_raw(&raw.args),
        None => run_fix(&args.fix, files),
    }
}

fn run_classify(args: &ClassifyArgs) -> Exit {
    let (text, _name) = match read_input(&args.log) {
        Ok(v) => v,
        Err(exit) => return exit,
    };
    let report = classify(&text);
    if args.json {
        out(&format!("{}\n", report.to_json()));
    } else {
        let mut text = report.to_text();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        out(&text);
    }
    Exit::Success
}

/// The watcher's exit codes, in terms of [`Exit`]'s numbers.
mod watch_exit {
    use super::Exit;
    /// All required checks passed.
    pub const GREEN: Exit = Exit::Success;
    /// An error (bad usage, `gh` failed).
    pub const ERROR: Exit = Exit::SomeFailed;
    /// A required check failed; the handoff is on stdout.
    pub const FAILED: Exit = Exit::BadInput;
    /// Still pending at the time limit.
    pub const TIMEOUT: Exit = Exit::NeedsHuman;
}

fn run_watch_raw(raw: &[String]) -> Exit {
    let argv =
        std::iter::once("orchestrator ci-autofix watch".to_owned()).chain(raw.iter().cloned());
    let args = match WatchArgs::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                watch_exit::ERROR
            } else {
                // --help
                watch_exit::GREEN
            };
        }
    };
    let rt = match setup::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return watch_exit::ERROR;
        }
    };
    rt.block_on(run_watch(&args))
}

async fn run_watch(args: &WatchArgs) -> Exit {
    let vcs = match GitVcs::open(&args.repo).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return watch_exit::ERROR;
        }
    };
    let branch = match vcs.current_branch().await {
        Ok(Some(b)) => b,
        Ok(None) => "HEAD".to_owned(),
        Err(e) => {
            eprintln!("error: {e}");
            return watch_exit::ERROR;
        }
    };
    let provider = GithubProvider::new(
        Arc::new(ProcessRunner::default()),
        vcs.root(),
        GithubConfig {
            pr: args.pr,
            poll_interval: args.poll_interval,
            timeout: args.timeout,
        },
    );
    match watch(&provider, args.pr, &branch).await {
        Ok(WatchOutcome::Green) => {
            eprintln!("watch: all required checks of PR #{} passed", args.pr);
            watch_exit::GREEN
        }
        Ok(WatchOutcome::Failed(handoff)) => {
            out(&format!("{}\n", handoff.to_json()));
            let names: Vec<&str> = handoff
                .failed_checks
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            eprintln!(
                "watch: {} required check(s) of PR #{} failed: {}",
                names.len(),
                args.pr,
                names.join(", ")
            );
            watch_exit::FAILED
        }
        Ok(WatchOutcome::TimedOut) => {
            eprintln!(
                "watch: checks of PR #{} still pending after {}s",
                args.pr,
                args.timeout.as_secs_f64()
            );
            watch_exit::TIMEOUT
        }
        Err(e) => {
            eprintln!("error: {e}");
            eprintln!("hint: check `gh auth status` and the network");
            watch_exit::ERROR
        }
    }
}

fn run_fix(args: &FixArgs, files: &ConfigFiles) -> Exit {
    let handoff = match &args.handoff {
        Some(path) => {
            // The library's errors name the file (or `<stdin>`).
            let read = if path.as_os_str() == "-" {
                match read_input(path) {
                    Ok((text, name)) => Handoff::parse_named(&text, &name),
                    Err(exit) => return exit,
                }
            } else {
                Handoff::read(path)
            };
            match read {
                Ok(h) => Some(h),
                Err(e) => {
                    eprintln!("error: {e}");
                    return Exit::BadInput;
                }
            }
        }
        None => None,
    };
    if !args.local && !args.check.is_empty() {
        eprintln!(
            "error: --check is for local mode; add --local (GitHub modes read the PR's checks)"
        );
        return Exit::BadInput;
    }
    if args.local && args.check.iter().any(|c| c.trim().is_empty()) {
        eprintln!("error: --check needs a command (got an empty one)");
        return Exit::BadInput;
    }
    if args.item_budget.item_max_agent_calls.is_some() {
        eprintln!(
            "error: --item-max-agent-calls: a ci-autofix iteration is one agent call; \
             limit its dollars or tokens (--item-max-cost-usd, --item-max-tokens), \
             or the run's calls (--max-agent-calls)"
        );
        return Exit::BadInput;
    }
    let config = match setup::effective_config_with_items(
        &args.repo,
        args.agent.as_deref(),
        &args.budget,
        &args.item_budget,
        files,
    ) {
        Ok(c) => c.into_config(),
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadInput;
        }
    };
    let rt = match setup::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::SomeFailed;
        }
    };
    rt.block_on(fix_loop(args, handoff, &config))
}

/// The library's [`RunSource`] for these flags.
fn run_source(args: &FixArgs, handoff: Option<Handoff>) -> RunSource {
    if let Some(handoff) = handoff {
        return RunSource::Handoff {
            handoff,
            poll_interval: args.poll_interval,
            timeout: args.timeout,
        };
    }
    if let Some(number) = args.pr {
        return RunSource::Pr {
            number,
            poll_interval: args.poll_interval,
            timeout: args.timeout,
        };
    }
    RunSource::Local(LocalConfig {
        checks: args.check.clone(),
        base: args.base.clone(),
        push: args.push,
        time_limit: args.check_timeout,
    })
}

async fn fix_loop(args: &FixArgs, handoff: Option<Handoff>, config: &Config) -> Exit {
    let vcs = match GitVcs::open(&args.repo).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadInput;
        }
    };
    let branch = match vcs.current_branch().await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::SomeFailed;
        }
    };
    let root = vcs.root().to_path_buf();
    let runner: Arc<dyn CommandRunner> = Arc::new(ProcessRunner::default());
    let agent: Arc<dyn Agent> = match build_agent(config) {
        Ok(AgentChoice::Builtin) => Arc::new(CiFixAgent::new(Arc::clone(&runner))),
        Ok(AgentChoice::Agent(a)) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadInput;
        }
    };
    let plan = match plan_run(
        run_source(args, handoff),
        branch,
        &root,
        Arc::clone(&runner),
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadInput;
        }
    };
    let target = plan.target.clone();
    let mut cfg = AutofixConfig::new(plan.target);
    cfg.max_iterations = args.max_iterations;
    cfg.allow_dirty = args.allow_dirty;
    cfg.remote = args.remote.clone();
    cfg.initial_failures = plan.handoff.map(|h| h.failed_checks);
    // `[budget] item_max_agent_calls` is the other flows' (an iteration is
    // one call); the dollars and tokens hold each iteration's call.
    cfg.iteration_limits = ItemLimits::new(
        config.budget.item_max_cost_usd,
        config.budget.item_max_tokens,
        None,
    );
    cfg.provisioner = setup::provisioner(config);
    let reporter = setup::reporter(args.json);
    let (sink, human) = (reporter.sink(), reporter.human.clone());
    if let Some(h) = &human {
        h.watch_spend(Arc::clone(&agent));
    }
    let ctx = AutofixContext {
        vcs: Arc::new(vcs),
        agent,
        gate: setup::gate(args.yes),
        provider: plan.provider,
        sink,
        config: cfg,
    };
    let result = tokio::select! {
        r = orchestrator_ci_autofix::run_autofix(ctx) => Some(r),
        _ = tokio::signal::ctrl_c() => None,
    };
    if let Some(h) = &human {
        h.finish();
    }
    let summary = Summary {
        json: args.json,
        yes: args.yes,
        root: &root,
        target: &target,
    };
    let (code, state, reason) = match &result {
        None => (3, RunState::Interrupted, None),
        Some(Ok(outcome)) => run_end(outcome),
        Some(Err(e)) => (2, RunState::Error, Some(e.to_string())),
    };
    reporter.finish(code, state, reason);
    match result {
        None => summary.interrupted(),
        Some(Ok(outcome)) => summary.outcome(&outcome),
        Some(Err(e)) => summary.error(&e),
    }
}

/// How an outcome reads in the session's log: exit code, state, reason.
fn run_end(outcome: &AutofixOutcome) -> (i32, RunState, Option<String>) {
    let state = match outcome {
        AutofixOutcome::Green { .. } => RunState::Done,
        AutofixOutcome::StillFailing { .. } => RunState::Failed,
        AutofixOutcome::LimitReached { .. } => RunState::Limit,
        _ => RunState::Waiting,
    };
    let reason = match outcome {
        AutofixOutcome::Green { .. } => None,
        AutofixOutcome::StillFailing { reason }
        | AutofixOutcome::LimitReached { reason }
        | AutofixOutcome::Escalated { reason, .. } => Some(reason.clone()),
    };
    (outcome.exit_code(), state, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cli;

    fn parse(args: &[&str]) -> Result<CiAutofixArgs, clap::Error> {
        let argv = ["orchestrator", "ci-autofix"].iter().chain(args);
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            crate::Command::CiAutofix(a) => a,
            other => panic!("parsed as {other:?}"),
        })
    }

    #[test]
    fn modes_are_exclusive_and_one_is_required() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["--pr", "3", "--local", "--check", "true"]).is_err());
        assert!(parse(&["--local"]).is_err(), "--local needs --check");
        assert!(
            parse(&["--pr", "3", "--push"]).is_err(),
            "--push needs --local"
        );
        assert!(parse(&["--pr", "0"]).is_err());
        let a = parse(&[
            "--local",
            "--check",
            "a",
            "--check",
            "b",
            "-y",
            "--max-iterations",
            "2",
        ])
        .unwrap();
        assert_eq!(a.fix.check, ["a", "b"]);
        assert!(a.fix.yes && a.fix.local);
        assert_eq!(a.fix.max_iterations, 2);
        assert_eq!(a.fix.repo, PathBuf::from("."));
        let a = parse(&["--handoff", "-", "--agent", "claude"]).unwrap();
        assert_eq!(a.fix.handoff, Some(PathBuf::from("-")));
        assert_eq!(a.fix.agent.as_deref(), Some("claude"));
    }

    #[test]
    fn subcommands_parse_without_the_loop_flags() {
        let a = parse(&["classify", "--json"]).unwrap();
        match a.command {
            Some(CiAutofixCommand::Classify(c)) => {
                assert!(c.json);
                assert_eq!(c.log, PathBuf::from("-"));
            }
            other => panic!("{other:?}"),
        }
        // `watch` keeps its arguments raw, even bad ones: its own parser decides.
        let a = parse(&["watch", "--pr", "x", "--bogus"]).unwrap();
        match a.command {
            Some(CiAutofixCommand::Watch(w)) => assert_eq!(w.args, ["--pr", "x", "--bogus"]),
            other => panic!("{other:?}"),
        }
        assert!(parse(&["--local", "--check", "x", "classify"]).is_err());
    }

    #[test]
    fn watch_arguments() {
        let w = WatchArgs::try_parse_from(["w", "--pr", "7", "--timeout", "0.5"]).unwrap();
        assert_eq!(w.pr, 7);
        assert_eq!(w.timeout, Duration::from_millis(500));
        assert_eq!(w.poll_interval, Duration::from_secs(10));
        assert!(WatchArgs::try_parse_from(["w"]).is_err());
        assert!(WatchArgs::try_parse_from(["w", "--pr", "7", "--timeout", "-1"]).is_err());
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        assert_eq!(parse_seconds("2.25"), Ok(Duration::from_millis(2250)));
        assert!(parse_seconds("soon").is_err());
        assert!(parse_seconds("-3").is_err());
    }
}
