//! `orchestrator ci-autofix`: classify a failed CI check, watch a PR's
//! required checks, and run the cadence-matrix fix loop on GitHub or locally.
//!
//! - `ci-autofix classify [FILE|-] [--json]` — the seed's `classification=…` /
//!   `sub_class=…` lines, or JSON with the evidence. Exit 0 whenever the input
//!   could be read, 2 otherwise.
//! - `ci-autofix watch --pr N [--timeout S]` — the CI watcher.
//! - `ci-autofix approve|decline [KEY]` — answer the confirmation gate a
//!   run stopped at (`--confirm gate`, or no terminal to ask on);
//!   `ci-autofix --continue KEY` goes on from it.
//! - `ci-autofix --handoff FILE|-`, `ci-autofix --pr N`, `ci-autofix --mr N`
//!   (GitLab; also `--pr` on a GitLab remote),
//!   `ci-autofix --local --check CMD…` — the fix loop
//!   ([`orchestrator_ci_autofix::run_autofix`]).
//!
//! One exit-code table for every subcommand, as for every command: 0
//! success (green, or passed on a re-run), 1 the job ran and something
//! failed (a required check failed — `watch` prints the handoff JSON on
//! stdout —, still failing, or the CI could not be reached), 2 bad input or
//! usage (clap's usage errors, a refused PR head), 3 a person is needed
//! (escalated, interrupted, still pending at the time limit, no checks at
//! all on the head).

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::ArgGroup;
use jiff::Timestamp;
use orchestrator_adapters::builtin::CiFixAgent;
use orchestrator_adapters::config::Config;
use orchestrator_adapters::factory::{AgentChoice, build_agent};
use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_ci_autofix::report::audit_log_path;
use orchestrator_ci_autofix::state::{StateFile, StateFileError};
use orchestrator_ci_autofix::{
    AutofixConfig, AutofixContext, AutofixError, AutofixOutcome, CiProvider as _, GateDecision,
    GithubConfig, GithubProvider, Handoff, LocalConfig, Polling, RunSource, Target, WatchOutcome,
    classify, plan_run, watch,
};
use orchestrator_core::Agent;
use orchestrator_core::agent::ItemLimits;
use orchestrator_core::command::CommandRunner;
use orchestrator_core::gate::AlwaysDefer;
use orchestrator_core::state::StateError;
use orchestrator_core::state::event_log::RunState;
use orchestrator_core::vcs::Vcs;
use serde_json::json;

use super::{Exit, out, read_input};
use crate::setup::{self, ConfigFiles};

mod confirm;
mod forge;
mod render;
mod run_loop;
pub use confirm::{AnswerArgs, ConfirmMode};
use render::*;
use run_loop::*;

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
    /// Wait for a PR's required checks (the CI watcher). Exit 0 green, 1 a
    /// required check failed (the handoff JSON on stdout) or an error, 2 bad
    /// usage, 3 still pending at the time limit or no checks at all.
    #[command(
        after_help = "Exit codes:\n  0  all required checks passed\n  1  a required check failed (the handoff JSON on stdout), or gh failed\n  2  bad usage\n  3  still pending at the time limit, or no checks at all on the PR head"
    )]
    Watch(WatchArgs),
    /// Approve the patch a run waits to have confirmed: recorded (who,
    /// when, from where); `ci-autofix --continue KEY` then lands and
    /// pushes it as a run confirmed on the spot does. Exit 0 recorded, 2
    /// no such gate.
    Approve(AnswerArgs),
    /// Decline the patch a run waits to have confirmed: its kept commit is
    /// dropped and the iteration escalates. Exit 0 recorded, 2 no such gate.
    Decline(AnswerArgs),
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

/// Arguments of `orchestrator ci-autofix watch`.
#[derive(Debug, clap::Args)]
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
    /// How long the PR head may show no check at all before the watch ends
    /// with "no checks", in seconds.
    #[arg(long, value_name = "S", default_value = "120", value_parser = parse_seconds)]
    pub checks_grace: Duration,
    /// The repository (its `origin` remote names the GitHub repository).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
}

/// The fix loop's flags: exactly one of `--handoff`, `--pr`, `--local`.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("mode").required(true).args(["handoff", "pr", "mr", "local", "continue_from"])))]
pub struct FixArgs {
    /// Fix the failed checks of a CI watcher handoff (`-`: standard input).
    #[arg(long, value_name = "FILE|-")]
    pub handoff: Option<PathBuf>,
    /// Watch the PR's required checks, fix, push, and watch again.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pr: Option<u64>,
    /// Watch a GitLab merge request's pipeline, fix, push, and watch again
    /// (token: GITLAB_TOKEN; instance and project: the remote).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub mr: Option<u64>,
    /// GitLab: the instance's URL when the remote does not give it (an
    /// instance under a relative root, or an API host other than the
    /// remote's); implies GitLab for `--pr`.
    #[arg(long, value_name = "URL")]
    pub gitlab_url: Option<String>,
    /// Go on from the confirmation gate of target KEY (`785`,
    /// `local-main`) with the flags its run had: lands the kept patch once
    /// approved, asks again (or stops there again) when not.
    #[arg(long = "continue", value_name = "KEY")]
    pub continue_from: Option<String>,
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
    #[arg(short = 'y', long, conflicts_with = "confirm")]
    pub yes: bool,
    /// When a patch the cadence matrix wants confirmed is confirmed: `ask`
    /// on the terminal (without one, stop at the gate), or always stop at
    /// the `gate` — the verified patch kept as a commit on an engine
    /// branch, not applied — to answer later (`approve`/`decline`, or
    /// `orchestrator serve`). Exit 3 at a gate.
    #[arg(long, value_enum, value_name = "WHEN")]
    pub confirm: Option<ConfirmMode>,
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
    /// GitHub modes: how long the PR head may show no check at all before
    /// the run ends with "no checks", in seconds.
    #[arg(long, value_name = "S", default_value = "120", value_parser = parse_seconds)]
    pub checks_grace: Duration,
    /// Re-run a failed test once at the same commit before its first fix
    /// (flaky if it passes: reported, nothing committed). Default: on for
    /// GitHub (`gh run rerun --job`), off locally (re-runs the check).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub rerun_before_fix: Option<bool>,
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
        Some(CiAutofixCommand::Watch(w)) => run_watch_sync(w),
        Some(CiAutofixCommand::Approve(a)) => confirm::run_answer(a, GateDecision::Approve),
        Some(CiAutofixCommand::Decline(a)) => confirm::run_answer(a, GateDecision::Decline),
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

fn run_watch_sync(args: &WatchArgs) -> Exit {
    let rt = match setup::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::SomeFailed;
        }
    };
    rt.block_on(run_watch(args))
}

async fn run_watch(args: &WatchArgs) -> Exit {
    let vcs = match GitVcs::open(&args.repo).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::BadInput;
        }
    };
    let provider = GithubProvider::new(
        Arc::new(ProcessRunner::default()),
        vcs.root(),
        GithubConfig {
            pr: args.pr,
            poll_interval: args.poll_interval,
            timeout: args.timeout,
            no_checks_grace: args.checks_grace,
        },
    );
    let result = watch(&provider, args.pr, "HEAD").await;
    for message in provider.take_notices() {
        eprintln!("note: {message}");
    }
    match result {
        Ok(WatchOutcome::Green) => {
            eprintln!("watch: all required checks of PR #{} passed", args.pr);
            Exit::Success
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
            Exit::SomeFailed
        }
        Ok(WatchOutcome::TimedOut) => {
            eprintln!(
                "watch: checks of PR #{} still pending after {}s",
                args.pr,
                args.timeout.as_secs_f64()
            );
            Exit::NeedsHuman
        }
        Ok(WatchOutcome::NoChecks { head }) => {
            eprintln!(
                "watch: no checks on {} (the head of PR #{}) after {}s: is CI set up for this branch?",
                &head[..head.len().min(12)],
                args.pr,
                args.checks_grace.as_secs_f64()
            );
            Exit::NeedsHuman
        }
        Err(e) => {
            eprintln!("error: {e}");
            eprintln!("hint: check `gh auth status` and the network");
            Exit::SomeFailed
        }
    }
}

fn run_fix(args: &FixArgs, files: &ConfigFiles) -> Exit {
    let resumed;
    let args = match &args.continue_from {
        Some(key) => match confirm::continued(args, key) {
            Ok(a) => {
                resumed = a;
                &resumed
            }
            Err(e) => {
                eprintln!("error: {e}");
                return Exit::BadInput;
            }
        },
        None => args,
    };
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
    let _cache = super::cache::claim_and_prune(&args.repo, config.cache.max_size_bytes());
    rt.block_on(fix_loop(args, handoff, &config))
}

/// The library's [`RunSource`] for these flags (`forge`: the GitLab
/// forge of a `--mr` run, or of a `--pr` on a GitLab remote).
fn run_source(
    args: &FixArgs,
    handoff: Option<Handoff>,
    forge: Option<Arc<dyn orchestrator_core::forge::Forge>>,
) -> RunSource {
    let polling = Polling {
        poll_interval: args.poll_interval,
        timeout: args.timeout,
        no_checks_grace: args.checks_grace,
    };
    if let Some(handoff) = handoff {
        return RunSource::Handoff { handoff, polling };
    }
    if let (Some(forge), Some(number)) = (forge, args.mr.or(args.pr)) {
        return RunSource::Forge {
            forge,
            number,
            polling,
        };
    }
    if let Some(number) = args.pr {
        return RunSource::Pr { number, polling };
    }
    RunSource::Local(LocalConfig {
        checks: args.check.clone(),
        base: args.base.clone(),
        push: args.push,
        time_limit: args.check_timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cli;
    use clap::Parser as _;

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
        assert!(parse(&["--pr", "3", "--mr", "3"]).is_err());
        assert!(parse(&["--mr", "0"]).is_err());
        let mr = parse(&["--mr", "4", "--gitlab-url", "https://example.com/gitlab"]).unwrap();
        assert_eq!(
            (mr.fix.mr, mr.fix.gitlab_url.as_deref()),
            (Some(4), Some("https://example.com/gitlab"))
        );
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
        // `watch` is parsed like every subcommand: a usage error is clap's (exit 2).
        assert!(parse(&["watch", "--pr", "x"]).is_err());
        assert!(parse(&["watch", "--pr", "7", "--bogus"]).is_err());
        assert!(parse(&["watch"]).is_err(), "--pr is required");
        assert!(parse(&["--local", "--check", "x", "classify"]).is_err());
    }

    #[test]
    fn watch_arguments() {
        let Some(CiAutofixCommand::Watch(w)) = parse(&["watch", "--pr", "7", "--timeout", "0.5"])
            .unwrap()
            .command
        else {
            panic!("not watch")
        };
        assert_eq!(w.pr, 7);
        assert_eq!(w.timeout, Duration::from_millis(500));
        assert_eq!(w.poll_interval, Duration::from_secs(10));
        assert_eq!(w.checks_grace, Duration::from_secs(120));
        assert!(parse(&["watch", "--pr", "7", "--timeout", "-1"]).is_err());
        // --rerun-before-fix: bare is on, `=false` off, absent is the mode's default.
        let a = parse(&["--pr", "7", "--rerun-before-fix"]).unwrap();
        assert_eq!(a.fix.rerun_before_fix, Some(true));
        let a = parse(&["--pr", "7", "--rerun-before-fix=false"]).unwrap();
        assert_eq!(a.fix.rerun_before_fix, Some(false));
        assert_eq!(parse(&["--pr", "7"]).unwrap().fix.rerun_before_fix, None);
    }

    /// The command a gate keeps parses back to the run's own settings: the
    /// mode (a handoff's PR by number), checks, limits, timings, the
    /// repository; never `-y`, `--json` or `--confirm`.
    #[test]
    #[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
    fn the_command_a_gate_keeps_parses_back_to_the_same_run() {
        let root = Path::new("/r");
        let local = Target::Local {
            branch: "main".into(),
        };
        let pr = Target::Pr {
            number: 7,
            branch: "feat".into(),
            forge: orchestrator_core::forge::ForgeKind::Github,
        };
        for (argv, target) in [
            (
                &[
                    "--local",
                    "--check",
                    "cargo fmt --check",
                    "--check",
                    "a b",
                    "--push",
                    "--check-timeout",
                    "2.5",
                    "--base",
                    "origin/main",
                    "-y",
                    "--json",
                    "--max-cost-usd",
                    "1.5",
                    "--max-wall",
                    "2m",
                    "--item-max-tokens",
                    "900",
                    "--max-iterations",
                    "2",
                    "--allow-dirty",
                    "--remote",
                    "up",
                    "--rerun-before-fix=true",
                    "--agent",
                    "command:fix it",
                ][..],
                &local,
            ),
            (
                &[
                    "--handoff",
                    "h.json",
                    "--confirm",
                    "gate",
                    "--timeout",
                    "30",
                ][..],
                &pr,
            ),
            (
                &["--mr", "4", "--gitlab-url", "https://g.example/gl"][..],
                &pr,
            ),
        ] {
            let first = parse(argv).unwrap().fix;
            let kept = confirm::resume_args(&first, target, root);
            assert!(
                !kept
                    .iter()
                    .any(|a| ["-y", "--json", "--confirm", "--handoff"].contains(&a.as_str())),
                "{kept:?}"
            );
            let again = parse(&kept.iter().skip(1).map(String::as_str).collect::<Vec<_>>())
                .unwrap()
                .fix;
            let view = |a: &FixArgs| {
                format!(
                    "{:?} {:?} {:?} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {} {} {} {:?} {:?} {:?} {:?}",
                    a.local,
                    a.check,
                    a.mr,
                    a.push,
                    a.check_timeout,
                    a.base,
                    a.agent,
                    a.gitlab_url,
                    a.budget.max_cost_usd,
                    a.budget.max_wall,
                    a.item_budget.item_max_tokens,
                    a.max_iterations,
                    a.allow_dirty,
                    a.remote,
                    a.timeout,
                    a.poll_interval,
                    a.checks_grace,
                    a.rerun_before_fix
                )
            };
            assert_eq!(view(&again), view(&first), "{kept:?}");
            assert_eq!(
                again.pr,
                first
                    .pr
                    .or(target.pr_number())
                    .filter(|_| first.mr.is_none())
            );
            assert_eq!(again.repo, root);
            assert!(!again.yes && !again.json && again.confirm.is_none());
        }
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        assert_eq!(parse_seconds("2.25"), Ok(Duration::from_millis(2250)));
        assert!(parse_seconds("soon").is_err());
        assert!(parse_seconds("-3").is_err());
    }
}
