//! `orchestrator planex`: explore → plan → execute a requirement in
//! dependency order, resume a session, retry its failed tasks, or run a
//! person-written tasks.csv.
//!
//! Everything here is wiring (see the `orchestrator-planex` crate docs): pick
//! the agents, the gate and the reporter, call one [`Planex`] entry point,
//! print the outcome, exit with its code.
//!
//! ## Output
//!
//! - Text mode: progress lines on stderr (the human reporter), then the
//!   summary and, when the run stopped, the resume hint on stdout.
//! - `--json`: one JSON object per line on stdout, every event
//!   (`{"event":"phase_started",…}`), and always a last line that ends the
//!   stream: `{"event":"summary","exit_code":N,"outcome":{…},"resume_hint":…}`
//!   when the flow returned an outcome, or
//!   `{"event":"error","exit_code":2,"message":"…"}` when it could not run.
//!   Errors also go to stderr as `error: …`.
//!
//! ## Agents
//!
//! - `run <tasks.csv>` uses the shell agent unless `--agent` says otherwise:
//!   each row's `execution_directives` runs with `sh -c` in the repository,
//!   its exit status the only criterion, once per task (`--max-rounds`
//!   raises that). `--agent builtin` is the same agent.
//! - The full flow needs an LLM agent (`--agent claude|codex|gemini|openai|
//!   command:…`, or `[agent]` in `orchestrator.toml`).
//! - `approve [SESSION_ID]` needs no agent: it records the approval of the
//!   plan a session stopped at (where no terminal could ask), so that a
//!   plain `--continue` goes on.
//! - `--continue` / `--retry-failed` pick like the session was started: a
//!   session made by `run` defaults to the shell agent; a planned one needs
//!   an LLM agent, except that `--agent shell` may execute its tasks.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_adapters::factory::{AgentChoice, build_agent};
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_core::agent::{Agent, ItemLimits};
use orchestrator_core::state::event_log::RunState;
use orchestrator_planex::session::{
    ResumePhase, SessionInfo, SessionSource, SessionStatus, list_sessions, sessions_dir,
};
use orchestrator_planex::{
    Agents, CancelHandle, ExecutionPolicy, Mode, Outcome, OutcomeStatus, Planex, PlanexError,
    PlanexOptions, ShellTaskAgent,
};
use serde_json::json;

use super::{Exit, out};

mod agents;
mod approve;
mod ending;
mod verify;
use crate::setup::{self, ConfigFiles};
use agents::{Picked, agents_for, session_needs};
use approve::approve;

const AFTER_HELP: &str = "\
Examples:
  orchestrator planex \"Add a health-check endpoint\" --agent claude
  orchestrator planex run tasks.csv -c 8 -y         # shell agent: no LLM needed
  orchestrator planex --continue                    # newest resumable session
  orchestrator planex approve && orchestrator planex --continue   # no terminal
  orchestrator planex --retry-failed wpp-20260228-auth -y

Without -y each plan is approved at a prompt; where no terminal can ask,
the run stops at the gate (exit 3) until `approve` or `--continue -y`.

Each task is verified and lands as its own commit, so the repository must
be a clean git work tree with a commit (--allow-dirty relaxes the first);
--no-commit trusts the agents and leaves their changes in the tree.

Exit codes: 0 every task completed, 1 some failed or were skipped,
2 bad input, 3 stopped at a gate, for a human or by Ctrl-C (resumable).";

/// Arguments of `orchestrator planex`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct PlanexArgs {
    /// `run <tasks.csv>`.
    #[command(subcommand)]
    pub command: Option<PlanexCommand>,

    /// The requirement to explore, plan and execute (the whole flow).
    #[arg(value_name = "REQUIREMENT", conflicts_with_all = ["resume", "retry_failed"])]
    pub requirement: Option<String>,

    /// Resume the newest resumable session, or SESSION_ID, where it stopped.
    #[arg(
        long = "continue",
        value_name = "SESSION_ID",
        num_args = 0..=1,
        conflicts_with = "retry_failed"
    )]
    pub resume: Option<Option<String>>,

    /// Reset the failed and skipped tasks of the newest session (or
    /// SESSION_ID) and run them again.
    #[arg(long, value_name = "SESSION_ID", num_args = 0..=1)]
    pub retry_failed: Option<Option<String>>,

    /// Flags shared by every form (also accepted after `run <tasks.csv>`).
    #[command(flatten)]
    pub flags: PlanexFlags,
}

/// The subcommands of `orchestrator planex`.
#[derive(Debug, clap::Subcommand)]
pub enum PlanexCommand {
    /// Execute a tasks.csv a person wrote (phases 4–5) in a new session;
    /// the default agent runs each row's execution_directives with sh -c.
    Run {
        /// The tasks.csv (the seed's columns; unknown columns are kept).
        tasks: PathBuf,
    },
    /// Approve the plan a stopped session waits at, without running it, for
    /// the next --continue (where no terminal can ask).
    Approve {
        /// The session (default: the newest resumable one).
        session: Option<String>,
    },
}

/// Flags of every `planex` form.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanexFlags {
    /// Approve every gate; a task that escalates is marked failed instead of
    /// pausing the session.
    #[arg(short = 'y', long = "yes", global = true)]
    pub yes: bool,

    /// Explore and plan, write tasks.csv, and stop before executing
    /// (exit 3): `planex approve` then `--continue`, or `--continue -y`,
    /// executes the plan. The exploration plan is approved for you.
    #[arg(long, conflicts_with = "yes")]
    pub plan_only: bool,

    /// How many rows run at once.
    #[arg(
        short = 'c',
        long,
        global = true,
        value_name = "N",
        default_value_t = 4,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub concurrency: u32,

    /// eager: a task starts as soon as its dependencies finish (critical path
    /// first); waves: the seed's barrier after each wave.
    #[arg(long, global = true, value_enum, default_value_t = Schedule::Eager)]
    pub schedule: Schedule,

    /// The agent: shell, builtin, claude, codex, gemini, openai, `openai:<model>` or
    /// `command:<cmd>` (default: shell for `run`, else orchestrator.toml).
    #[arg(long, global = true, value_name = "SPEC")]
    pub agent: Option<String>,

    /// Limits on what the run's agents may spend.
    #[command(flatten)]
    pub budget: setup::BudgetFlags,

    /// Limits on what one task may spend.
    #[command(flatten)]
    pub item_budget: setup::ItemBudgetFlags,

    /// Rounds of attempts before a task goes to a human (default: 2 for LLM
    /// agents, 1 for the shell agent).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_rounds: Option<u32>,

    /// The repository (sessions go to DIR/.workflow/.lite-plan/).
    #[arg(long, global = true, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,

    /// JSON lines on stdout (every event, then a summary line) instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Verified execution.
    #[command(flatten)]
    pub verify: verify::VerifyFlags,
}

/// `--schedule`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Schedule {
    /// Critical-path ready queue.
    Eager,
    /// The seed's wave barriers.
    Waves,
}

impl From<Schedule> for Mode {
    fn from(s: Schedule) -> Self {
        match s {
            Schedule::Eager => Mode::Eager,
            Schedule::Waves => Mode::Waves,
        }
    }
}

/// Which entry point to call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    Plan(String),
    Run(PathBuf),
    Continue(Option<String>),
    RetryFailed(Option<String>),
}

/// What a session needs from its agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// Only task execution, from a person-written tasks.csv: the shell agent
    /// by default.
    TasksFromFile,
    /// Only task execution of a planned session: an LLM agent by default,
    /// the shell agent on request.
    Execution,
    /// Planning (and exploring): an LLM agent.
    Planning,
}

/// A printed, mapped failure.
struct Failure {
    message: String,
    /// Extra lines for stderr only (a listing of sessions).
    details: Option<String>,
}

impl Failure {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            details: None,
        }
    }
}

/// Runs the command.
pub fn run(args: &PlanexArgs, files: &ConfigFiles) -> Exit {
    let json = args.flags.json;
    // `approve` needs no agent and runs no flow.
    if let Some(PlanexCommand::Approve { session }) = &args.command
        && args.requirement.is_none()
        && args.resume.is_none()
        && args.retry_failed.is_none()
    {
        return approve(json, &args.flags.repo, session.as_deref());
    }
    match prepare(args, files) {
        Ok(Prepared {
            planex,
            action,
            reporter,
            verify,
            provisioner,
            remote,
            cache: _cache,
        }) => {
            let runtime = match setup::runtime() {
                Ok(rt) => rt,
                Err(e) => return fail(json, Failure::new(e)),
            };
            let result = runtime.block_on(async {
                let cancel = CancelHandle::new();
                setup::cancel_on_ctrl_c(cancel.clone());
                let planex = verify::verified(
                    planex.with_cancel(cancel),
                    &args.flags.verify,
                    verify,
                    provisioner,
                    remote.as_ref(),
                )
                .await?;
                let result = match &action {
                    Action::Plan(requirement) => planex.plan(requirement).await,
                    Action::Run(path) => planex.run_tasks_file(path).await,
                    Action::Continue(id) => planex.resume(id.as_deref()).await,
                    Action::RetryFailed(id) => planex.retry_failed(id.as_deref()).await,
                };
                crate::remote::finish(remote.as_ref(), "planex").await;
                Ok(result)
            });
            // The runtime is dropped here: a Ctrl-C listener must not outlive the run.
            drop(runtime);
            if let Some(human) = &reporter.human {
                human.finish();
            }
            match &result {
                Ok(Ok(outcome)) => {
                    let (state, reason) = ending::run_state(outcome);
                    reporter.finish(i32::from(outcome.exit_code()), state, reason);
                }
                Ok(Err(e)) => reporter.finish(2, RunState::Error, Some(e.to_string())),
                Err(failure) => {
                    let failure: &Failure = failure;
                    reporter.finish(2, RunState::Error, Some(failure.message.clone()));
                }
            }
            match result {
                Ok(Ok(outcome)) => report(json, &outcome),
                Ok(Err(e)) => fail(json, flow_failure(&args.flags.repo, &e)),
                Err(failure) => fail(json, failure),
            }
        }
        Err(failure) => fail(json, failure),
    }
}

/// The failure printed for a library error: where no session could be
/// picked, with a listing of the sessions found.
fn flow_failure(repo: &Path, e: &PlanexError) -> Failure {
    let details = match e {
        PlanexError::NoSession { .. }
        | PlanexError::SessionNotFound { .. }
        | PlanexError::NothingToResume { .. } => session_listing(repo).ok(),
        _ => None,
    };
    Failure {
        message: e.to_string(),
        details,
    }
}

/// What [`prepare`] builds.
struct Prepared {
    planex: Planex,
    action: Action,
    reporter: setup::Reporter,
    /// Whether tasks are verified (see [`verify::wanted`]).
    verify: bool,
    /// What each task worktree is given (`[worktree]`, or detection).
    provisioner: Option<Arc<dyn orchestrator_core::worktree::Provisioner>>,
    /// The Ray runner of `--runner`, when one was chosen.
    remote: Option<crate::remote::Remote>,
    /// The repository's cache folders, held while tasks are verified in
    /// worktrees.
    cache: Option<orchestrator_core::state::CacheLease>,
}

/// Parses the form, resolves the repository and agents, builds the flow.
fn prepare(args: &PlanexArgs, files: &ConfigFiles) -> Result<Prepared, Failure> {
    let action = action(args)?;
    let flags = &args.flags;
    let repo = repo_dir(&flags.repo)?;
    let needs = match &action {
        Action::Plan(_) => Needs::Planning,
        Action::Run(_) => Needs::TasksFromFile,
        Action::Continue(id) | Action::RetryFailed(id) => {
            let retry = matches!(action, Action::RetryFailed(_));
            session_needs(&repo, id.as_deref(), retry)?
        }
    };
    let remote = verify::remote(&repo, files, &flags.verify)?;
    let Picked {
        agents,
        policy,
        item_limits,
    } = agents_for(
        &repo,
        flags.agent.as_deref(),
        &flags.budget,
        &flags.item_budget,
        needs,
        files,
        remote.as_ref(),
    )?;
    let gate: Arc<dyn orchestrator_core::gate::Gate> = if flags.plan_only {
        Arc::new(orchestrator_planex::PlanOnly)
    } else {
        setup::gate(flags.yes)
    };
    let verify = verify::wanted(&flags.verify, &action, flags.plan_only, &repo);
    let (provisioner, cache) = if verify {
        let cap = crate::commands::cache::cache_cap(&repo, files).map_err(Failure::new)?;
        (
            setup::provisioner_of(&repo, files).map_err(Failure::new)?,
            crate::commands::cache::claim_and_prune(&repo, cap),
        )
    } else {
        (None, None)
    };
    let concurrency = crate::remote::bound(remote.as_ref(), flags.concurrency.max(1) as usize);
    let options = options(flags, policy, item_limits, concurrency, verify);
    let reporter = setup::reporter(flags.json);
    if let Some(h) = &reporter.human {
        h.watch_spend(Arc::clone(&agents.executor));
    }
    let planex = Planex::new(repo, agents, gate, reporter.sink(), options);
    Ok(Prepared {
        planex,
        action,
        reporter,
        verify,
        provisioner,
        remote,
        cache,
    })
}

/// The repository folder of `--repo`, canonical; one that cannot be used
/// is an error naming it.
fn repo_dir(flag: &Path) -> Result<PathBuf, Failure> {
    let repo = std::fs::canonicalize(flag).map_err(|e| {
        Failure::new(format!(
            "the repository directory {} cannot be used: {e}",
            flag.display()
        ))
    })?;
    if !repo.is_dir() {
        return Err(Failure::new(format!(
            "the repository {} is not a directory",
            repo.display()
        )));
    }
    Ok(repo)
}

/// The flow's options from the flags: the agents' execution policy (with
/// `--max-rounds`), the concurrency — unverified, an agent's tasks share
/// the working tree, so they run one at a time and none sees (or undoes)
/// another's half-done edit — the schedule and the per-task limits.
fn options(
    flags: &PlanexFlags,
    policy: ExecutionPolicy,
    item_limits: ItemLimits,
    concurrency: usize,
    verify: bool,
) -> PlanexOptions {
    let mut execution = policy;
    if let Some(rounds) = flags.max_rounds {
        execution.max_rounds = rounds;
    }
    let shell = execution.criteria == orchestrator_planex::CriteriaSource::AgentStatus;
    let serial = !verify && !flags.plan_only && !shell && concurrency > 1;
    if serial {
        eprintln!(
            "note: with --no-commit an agent's tasks share the working tree and run one at a time (-c {concurrency} still applies to exploration)"
        );
    }
    PlanexOptions::default()
        .with_auto_yes(flags.yes && !flags.plan_only)
        .with_concurrency(concurrency)
        .with_task_concurrency(serial.then_some(1))
        .with_schedule(flags.schedule.into())
        .with_execution(execution)
        .with_item_limits(item_limits)
}

fn action(args: &PlanexArgs) -> Result<Action, Failure> {
    match (
        &args.command,
        &args.requirement,
        &args.resume,
        &args.retry_failed,
    ) {
        (Some(PlanexCommand::Run { tasks }), None, None, None) => Ok(Action::Run(tasks.clone())),
        (Some(PlanexCommand::Run { .. }), ..) => Err(Failure::new(
            "`planex run <tasks.csv>` takes no requirement, --continue or --retry-failed",
        )),
        // `approve` alone is no flow and is taken before (see `run`).
        (Some(PlanexCommand::Approve { .. }), ..) => Err(Failure::new(
            "`planex approve [SESSION_ID]` takes no requirement, --continue or --retry-failed",
        )),
        (None, Some(requirement), None, None) => {
            if requirement.trim().is_empty() {
                Err(Failure::new("the requirement is empty"))
            } else {
                Ok(Action::Plan(requirement.clone()))
            }
        }
        (None, None, Some(id), None) => Ok(Action::Continue(id.clone())),
        (None, None, None, Some(id)) => Ok(Action::RetryFailed(id.clone())),
        (None, None, None, None) => Err(Failure::new(
            "give a requirement, --continue [SESSION_ID], --retry-failed [SESSION_ID] or `run <tasks.csv>` (see `orchestrator planex --help`)",
        )),
        // clap rejects the other combinations; say so if one slips through.
        _ => Err(Failure::new(
            "a requirement, --continue and --retry-failed cannot be combined",
        )),
    }
}

/// Prints the outcome and maps its exit code.
fn report(json: bool, outcome: &Outcome) -> Exit {
    let code = outcome.exit_code();
    let hint = outcome.resume_hint();
    if json {
        let line = json!({
            "event": "summary",
            "exit_code": code,
            "outcome": outcome,
            "resume_hint": hint,
        });
        out(&format!("{line}\n"));
    } else {
        out(&render_outcome(outcome));
    }
    match code {
        0 => Exit::Success,
        1 => Exit::SomeFailed,
        3 => Exit::NeedsHuman,
        _ => Exit::BadInput,
    }
}

/// The text printed at the end of a run: the seed's summary when phase 5
/// ran; when the run stopped before it, the same counts titled "Stopped"
/// with the session folder (results.csv and context.md do not exist yet),
/// then how to resume.
pub fn render_outcome(outcome: &Outcome) -> String {
    let mut text = if matches!(outcome.status, OutcomeStatus::Stopped(_)) {
        let s = &outcome.summary;
        let mut text = String::new();
        let _ = writeln!(text, "## Lite Planex Stopped\n");
        let _ = writeln!(text, "- **Session**: {}", s.session_id);
        let _ = writeln!(
            text,
            "- **Explore**: {}/{} angles",
            s.explore_completed, s.explore_total
        );
        let _ = writeln!(
            text,
            "- **Tasks**: {}/{} completed, {} failed, {} skipped, {} pending",
            s.completed, s.tasks_total, s.failed, s.skipped, s.pending
        );
        let _ = writeln!(text, "- **Waves**: {}", s.waves);
        let _ = orchestrator_planex::report::write_scope_waits(&mut text, &s.scope_waits);
        let _ = writeln!(text);
        let _ = writeln!(text, "**Session folder**: {}", s.session_dir.display());
        text
    } else {
        outcome.summary.to_string()
    };
    if let Some(hint) = outcome.resume_hint() {
        let _ = write!(text, "\n{hint}\n");
    }
    text
}

fn fail(json: bool, failure: Failure) -> Exit {
    eprintln!("error: {}", failure.message);
    if let Some(details) = &failure.details {
        eprint!("{details}");
    }
    if json {
        let line = json!({
            "event": "error",
            "exit_code": PlanexError::EXIT_CODE,
            "message": failure.message,
        });
        out(&format!("{line}\n"));
    }
    Exit::BadInput
}

/// The sessions of `repo` as printed after a failed `--continue`.
fn session_listing(repo: &Path) -> Result<String, PlanexError> {
    let repo = std::fs::canonicalize(repo).unwrap_or_else(|_| repo.to_path_buf());
    let sessions = list_sessions(&repo)?;
    Ok(render_sessions(&repo, &sessions).unwrap_or_default())
}

/// One line per session: id, status, where `--continue` would pick up, the
/// requirement. `None` when there are none.
fn render_sessions(repo: &Path, sessions: &[SessionInfo]) -> Option<String> {
    if sessions.is_empty() {
        return None;
    }
    let mut text = format!("sessions in {}:\n", sessions_dir(repo).display());
    for s in sessions {
        let status = match s.meta.status {
            SessionStatus::Active => "active",
            SessionStatus::Stopped => "stopped",
            SessionStatus::Cancelled => "cancelled",
            SessionStatus::Finished => "finished",
        };
        let phase = match s.resume_phase {
            ResumePhase::Execute => "resumes at execute",
            ResumePhase::Explore => "resumes at explore",
            ResumePhase::Nothing => "nothing to resume",
        };
        let _ = writeln!(
            text,
            "  {:<40} {:<9} {:<19} {}",
            s.id, status, phase, s.meta.requirement
        );
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::{Cli, Command};

    fn parse(args: &[&str]) -> Result<PlanexArgs, clap::Error> {
        let mut argv = vec!["orchestrator", "planex"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv)?;
        match cli.command {
            Command::Planex(a) => Ok(a),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn flags_work_before_and_after_run() {
        for argv in [
            &[
                "run",
                "t.csv",
                "-y",
                "-c",
                "2",
                "--schedule",
                "waves",
                "--json",
            ][..],
            &[
                "-y",
                "-c",
                "2",
                "--schedule",
                "waves",
                "--json",
                "run",
                "t.csv",
            ][..],
        ] {
            let a = parse(argv).unwrap();
            assert_eq!(
                action(&a).ok(),
                Some(Action::Run("t.csv".into())),
                "{argv:?}"
            );
            assert!(a.flags.yes && a.flags.json, "{argv:?}");
            assert_eq!(a.flags.concurrency, 2);
            assert_eq!(a.flags.schedule, Schedule::Waves);
        }
        let a = parse(&[
            "run",
            "t.csv",
            "--agent",
            "command:x --y",
            "--max-rounds",
            "3",
            "--repo",
            "/r",
        ])
        .unwrap();
        assert_eq!(a.flags.agent.as_deref(), Some("command:x --y"));
        assert_eq!(a.flags.max_rounds, Some(3));
        assert_eq!(a.flags.repo, PathBuf::from("/r"));
    }

    #[test]
    fn the_forms_and_their_defaults() {
        let a = parse(&["Add auth"]).unwrap();
        assert_eq!(action(&a).ok(), Some(Action::Plan("Add auth".into())));
        assert_eq!(
            (
                a.flags.yes,
                a.flags.concurrency,
                a.flags.schedule,
                a.flags.json
            ),
            (false, 4, Schedule::Eager, false)
        );
        let a = parse(&["--continue"]).unwrap();
        assert_eq!(action(&a).ok(), Some(Action::Continue(None)));
        let a = parse(&["--continue", "wpp-1", "-y"]).unwrap();
        assert_eq!(
            action(&a).ok(),
            Some(Action::Continue(Some("wpp-1".into())))
        );
        assert!(a.flags.yes);
        let a = parse(&["--retry-failed"]).unwrap();
        assert_eq!(action(&a).ok(), Some(Action::RetryFailed(None)));
        assert!(action(&parse(&[]).unwrap()).is_err());
        assert!(action(&parse(&["  "]).unwrap()).is_err());
        assert!(action(&parse(&["req", "run", "t.csv"]).unwrap()).is_err());
    }

    #[test]
    fn bad_combinations_and_values_are_usage_errors() {
        for argv in [
            &["req", "--continue"][..],
            &["--continue", "--retry-failed"][..],
            &["-c", "0", "req"][..],
            &["--schedule", "fast", "req"][..],
            &["--max-rounds", "0", "req"][..],
        ] {
            let err = parse(argv).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{argv:?}: {err}");
        }
    }

    #[test]
    fn the_full_flow_refuses_the_shell_and_builtin_agents() {
        let repo = tempfile::tempdir().unwrap();
        for spec in [Some("shell"), Some("builtin"), None] {
            let err = agents_for(
                repo.path(),
                spec,
                &setup::BudgetFlags::default(),
                &setup::ItemBudgetFlags::default(),
                Needs::Planning,
                &ConfigFiles::default(),
                None,
            )
            .err()
            .unwrap();
            assert!(
                err.message.contains("needs an LLM agent"),
                "{spec:?}: {}",
                err.message
            );
        }
        let p = agents_for(
            repo.path(),
            None,
            &setup::BudgetFlags::default(),
            &setup::ItemBudgetFlags::default(),
            Needs::TasksFromFile,
            &ConfigFiles::default(),
            None,
        )
        .ok()
        .unwrap();
        assert_eq!(
            (p.agents.executor.name(), p.policy),
            ("shell", ExecutionPolicy::shell())
        );
        let p = agents_for(
            repo.path(),
            Some("builtin"),
            &setup::BudgetFlags::default(),
            &setup::ItemBudgetFlags::default(),
            Needs::TasksFromFile,
            &ConfigFiles::default(),
            None,
        )
        .ok()
        .unwrap();
        assert_eq!(
            (p.agents.executor.name(), p.policy),
            ("shell", ExecutionPolicy::shell())
        );
        let p = agents_for(
            repo.path(),
            Some("claude"),
            &setup::BudgetFlags::default(),
            &setup::ItemBudgetFlags::default(),
            Needs::TasksFromFile,
            &ConfigFiles::default(),
            None,
        )
        .ok()
        .unwrap();
        assert_eq!(
            (p.agents.executor.name(), p.policy),
            ("claude", ExecutionPolicy::agent())
        );
        let err = agents_for(
            repo.path(),
            Some("nope"),
            &setup::BudgetFlags::default(),
            &setup::ItemBudgetFlags::default(),
            Needs::Planning,
            &ConfigFiles::default(),
            None,
        )
        .err()
        .unwrap();
        assert!(err.message.contains("--agent"), "{}", err.message);
    }
}
