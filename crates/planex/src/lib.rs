//! # orchestrator-planex
//!
//! The lite-planex flow: **explore → plan → execute in dependency order**,
//! over the seed's CSV session folders, with confirmation gates, context
//! passing between rows, and resume after a crash at any instant.
//!
//! ## Data flow
//!
//! ```text
//! requirement
//!   │ phase 1: planner agent (Role::Plan, schema-checked) picks 1–4 angles
//!   ▼
//! explore.csv ──gate (Approve / Modify / Cancel)──┐
//!   │ phase 2: explore rows on the core scheduler   │ Modify / Cancel / deferred:
//!   │          (concurrency, 300 s per row),        │ stop (exit 3), resume later
//!   │          findings → journal → explore.csv     │
//!   ▼                                               │
//! synthesis (files named by several angles)         │
//!   │ phase 3: planner returns 3–10 tasks; ids, deps, cycles, context ids
//!   │          checked; waves computed
//!   ▼                                               │
//! tasks.csv ──gate (Execute / Modify / Cancel)──────┘
//!   │ phase 4: tasks on the core scheduler (eager or waves, write scopes),
//!   │          prev_context from explore.csv + tasks.csv, each task through
//!   │          the retry executor with its acceptance criteria as exit
//!   │          criteria; failures skip hard dependents; results → journal
//!   ▼
//! results.csv, context.md, Summary   (phase 5)
//! ```
//!
//! Everything touches the world through core traits: [`Agent`] (planner,
//! explorers, executors), [`Gate`], [`EventSink`], and — for the
//! [`ShellTaskAgent`] and verified execution — [`CommandRunner`] and
//! [`Vcs`]. This crate spawns no process.
//!
//! With [`Planex::with_verification`] phase 4 trusts no agent: each task's
//! change is measured from a checkpoint, held to its scope, verified by the
//! engine's own run of its directives, and landed as its own commit (see
//! [`verify`]).
//!
//! ## Entry points ([`Planex`])
//!
//! | CLI                                         | library                      |
//! |---------------------------------------------|------------------------------|
//! | `orchestrator planex "<requirement>"`       | [`Planex::plan`]             |
//! | `orchestrator planex --continue [SESSION]`  | [`Planex::resume`]           |
//! | `orchestrator planex run <tasks.csv>`       | [`Planex::run_tasks_file`]   |
//! | `orchestrator planex --retry-failed [SESSION]` | [`Planex::retry_failed`]  |
//! | `orchestrator planex approve [SESSION]`     | [`approve_plan`]             |
//! | listing sessions                            | [`list_sessions`]            |
//!
//! Each returns an [`Outcome`] (exit code 0 all completed, 1 some failed or
//! skipped, 3 stopped at a gate or for a human) or a [`PlanexError`] (exit
//! code 2). [`Outcome::summary`] is what the terminal prints.
//!
//! Also public: [`PlanexOptions`] (`#[non_exhaustive]`: `Default` and its
//! `with_…` setters), [`rows`] (the seed's CSV rows and the discovery
//! board), [`session`] (session folders and their files), [`journal`],
//! [`protocol`] (what agents are asked and answer), [`report`] (the texts
//! built from rows), [`validate_tasks`], [`scope_waits`].
//!
//! ## Wiring it up (what the CLI does)
//!
//! ```text
//! let options = PlanexOptions::default().with_auto_yes(auto_yes).with_concurrency(n) /* … */;
//! // `--agent shell`: ExecutionPolicy::shell() and
//! //   Agents { executor: Arc::new(ShellTaskAgent::new(process_runner)), .. }
//! // `--max-rounds N`: options.execution.max_rounds = N
//! let planex = Planex::new(repo, agents, gate, event_sink, options).with_cancel(ctrl_c);
//! let outcome = planex.run_tasks_file(path).await?;   // or plan / resume / retry_failed
//! print!("{}", outcome.summary); if let Some(h) = outcome.resume_hint() { println!("{h}") }
//! exit(outcome.exit_code())                            // an Err: exit(PlanexError::EXIT_CODE)
//! ```
//!
//! The futures must run inside a tokio runtime with the time driver enabled
//! (rows run as spawned tasks). Progress comes as [`Event`]s: phases,
//! `WaveStarted` (waves mode), `JobStarted` / `JobFinished` per row (skips
//! with the reason `Dependency failed or skipped`), retry attempts, gate
//! questions, escalations and warnings.
//!
//! [`Event`]: orchestrator_core::event::Event
//!
//! ## Invariants
//! - A row that finished is in the fsynced journal before anything else
//!   happens; the CSVs are rewritten from memory at each wave's end, each
//!   phase's end and on resume ([`journal`]). A completed row is never run
//!   again — not after a `kill -9`, not after `--retry-failed`.
//! - One engine per session: the session lock is held for the whole run.
//! - A plan runs only once approved: the approval (gate answer or `-y`) is
//!   written to `session.json` before its phase starts, and a resumed
//!   session whose plan holds no approval asks that gate again. A crash
//!   between writing `tasks.csv` and the answer never runs the plan.
//! - The CSV columns are exactly the seed's; unknown columns are kept.
//!
//! [`Agent`]: orchestrator_core::agent::Agent
//! [`Gate`]: orchestrator_core::gate::Gate
//! [`EventSink`]: orchestrator_core::event::EventSink
//! [`CommandRunner`]: orchestrator_core::command::CommandRunner
//! [`Vcs`]: orchestrator_core::vcs::Vcs

mod error;
mod exec;
mod flow;
pub mod journal;
mod plan;
pub mod protocol;
pub mod report;
pub mod rows;
mod scope_match;
mod scopes;
pub mod session;
mod shell;
pub mod verify;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use error::PlanexError;
pub use flow::{Agents, PlanOnly, Planex, approve_plan, session_verified};
pub use orchestrator_core::scheduler::{CancelHandle, Mode};
pub use plan::{ValidatedPlan, validate_tasks};
pub use report::ScopeWait;
pub use report::Summary;
pub use scopes::scope_waits;
pub use session::{SessionInfo, list_sessions};
pub use shell::{EXIT_STATUS_CRITERION, PREV_CONTEXT_ENV, ShellTaskAgent};
pub use verify::{ScopeMode, Verification};

/// The flow name in [`Event::PhaseStarted`](orchestrator_core::event::Event::PhaseStarted).
pub const FLOW: &str = "planex";

/// Gate question id of the exploration plan (phase 1).
pub const EXPLORE_GATE_ID: &str = "planex.explore-plan";
/// Gate question id of the execution plan (phase 3).
pub const EXECUTE_GATE_ID: &str = "planex.execution-plan";

/// Where a task's exit criteria come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CriteriaSource {
    /// The row's `acceptance_criteria`, one criterion per line or
    /// `;`-separated item: the agent must report each as PASS.
    #[default]
    AcceptanceCriteria,
    /// No criteria: the agent's own status decides (the shell agent, whose
    /// exit status is its only criterion).
    AgentStatus,
}

/// How tasks are executed and retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionPolicy {
    /// Rounds of attempts before a task goes to a human (`--max-rounds`).
    pub max_rounds: u32,
    /// Attempts per round; the failure is fed back between attempts.
    pub attempts_per_round: u32,
    /// Where exit criteria come from.
    pub criteria: CriteriaSource,
}

impl ExecutionPolicy {
    /// For LLM agents: 2 rounds of 1 attempt, acceptance criteria checked.
    pub fn agent() -> Self {
        Self {
            max_rounds: 2,
            attempts_per_round: 1,
            criteria: CriteriaSource::AcceptanceCriteria,
        }
    }

    /// For [`ShellTaskAgent`]: each task runs once (1 round of 1 attempt),
    /// its exit status the only criterion. Raise `max_rounds` to retry.
    pub fn shell() -> Self {
        Self {
            max_rounds: 1,
            attempts_per_round: 1,
            criteria: CriteriaSource::AgentStatus,
        }
    }
}

impl Default for ExecutionPolicy {
    fn default() -> Self {
        Self::agent()
    }
}

/// Settings of a run (the CLI flags).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PlanexOptions {
    /// `-y`: skip the gates; an escalated task is marked failed instead of
    /// pausing the session.
    pub auto_yes: bool,
    /// `-c`: how many rows run at once (at least 1; default 4).
    pub concurrency: usize,
    /// `--schedule`: eager (default) or the seed's waves.
    pub schedule: Mode,
    /// Time limit of one planner call.
    pub planner_time_limit: Duration,
    /// Time limit of one explore row (default 300 s).
    pub explore_time_limit: Duration,
    /// Time limit of one task attempt (default 600 s).
    pub task_time_limit: Duration,
    /// Retry rounds and criteria.
    pub execution: ExecutionPolicy,
    /// What the agent may spend on one task over all its attempts
    /// (`--item-max-*`): no attempt starts past a limit, and the task fails
    /// with it named while the run goes on.
    pub item_limits: orchestrator_core::agent::ItemLimits,
    /// How many tasks of phase 4 run at once when it differs from `-c`
    /// (which then applies to exploration only): the CLI runs an LLM
    /// agent's unverified tasks one at a time, as they share one tree.
    pub task_concurrency: Option<usize>,
}

/// Setters, one per field, so the struct (`#[non_exhaustive]`) can be built
/// outside this crate: start from `Default`/`new` and chain them.
impl PlanexOptions {
    /// Sets [`PlanexOptions::auto_yes`].
    pub fn with_auto_yes(mut self, auto_yes: bool) -> Self {
        self.auto_yes = auto_yes;
        self
    }

    /// Sets [`PlanexOptions::concurrency`].
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// Sets [`PlanexOptions::schedule`].
    pub fn with_schedule(mut self, schedule: Mode) -> Self {
        self.schedule = schedule;
        self
    }

    /// Sets [`PlanexOptions::planner_time_limit`].
    pub fn with_planner_time_limit(mut self, planner_time_limit: Duration) -> Self {
        self.planner_time_limit = planner_time_limit;
        self
    }

    /// Sets [`PlanexOptions::explore_time_limit`].
    pub fn with_explore_time_limit(mut self, explore_time_limit: Duration) -> Self {
        self.explore_time_limit = explore_time_limit;
        self
    }

    /// Sets [`PlanexOptions::task_time_limit`].
    pub fn with_task_time_limit(mut self, task_time_limit: Duration) -> Self {
        self.task_time_limit = task_time_limit;
        self
    }

    /// Sets [`PlanexOptions::execution`].
    pub fn with_execution(mut self, execution: ExecutionPolicy) -> Self {
        self.execution = execution;
        self
    }

    /// Sets [`PlanexOptions::task_concurrency`].
    pub fn with_task_concurrency(mut self, task_concurrency: Option<usize>) -> Self {
        self.task_concurrency = task_concurrency;
        self
    }

    /// How many tasks of phase 4 run at once (at least 1).
    pub fn tasks_at_once(&self) -> usize {
        self.task_concurrency.unwrap_or(self.concurrency).max(1)
    }

    /// Sets [`PlanexOptions::item_limits`].
    pub fn with_item_limits(mut self, item_limits: orchestrator_core::agent::ItemLimits) -> Self {
        self.item_limits = item_limits;
        self
    }
}

impl Default for PlanexOptions {
    fn default() -> Self {
        Self {
            auto_yes: false,
            concurrency: 4,
            schedule: Mode::Eager,
            planner_time_limit: Duration::from_secs(600),
            explore_time_limit: Duration::from_secs(300),
            task_time_limit: Duration::from_secs(600),
            execution: ExecutionPolicy::agent(),
            item_limits: orchestrator_core::agent::ItemLimits::default(),
            task_concurrency: None,
        }
    }
}

/// Which gate a run stopped at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatePoint {
    /// After phase 1: the exploration plan (`explore.csv`).
    ExplorePlan,
    /// After phase 3 (or before `run`): the execution plan (`tasks.csv`).
    ExecutionPlan,
}

impl GatePoint {
    /// What the gate approves, for messages (`the execution plan`).
    pub fn plan_name(self) -> &'static str {
        match self {
            GatePoint::ExplorePlan => "the exploration plan",
            GatePoint::ExecutionPlan => "the execution plan",
        }
    }

    /// The session file holding that plan (`tasks.csv`).
    pub fn file_name(self) -> &'static str {
        match self {
            GatePoint::ExplorePlan => session::EXPLORE_CSV,
            GatePoint::ExecutionPlan => session::TASKS_CSV,
        }
    }
}

/// What [`approve_plan`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approved {
    /// The session.
    pub session_id: String,
    /// The gate whose plan is approved (the one the session resumes at).
    pub gate: GatePoint,
    /// The plan's file.
    pub file: PathBuf,
    /// Whether the plan had been approved before (nothing was written).
    pub already: bool,
}

impl Approved {
    /// What to tell the person: what was approved and the command that
    /// runs it.
    pub fn message(&self) -> String {
        let what = if self.already {
            "was already approved"
        } else {
            "is approved"
        };
        format!(
            "{} of session {} {what}: {}\nRun it: orchestrator planex --continue {}",
            capitalized(self.gate.plan_name()),
            self.session_id,
            self.file.display(),
            self.session_id
        )
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// Why a run stopped before the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Stop {
    /// The person chose Modify: edit `file`, then resume.
    Modify {
        /// The gate.
        gate: GatePoint,
        /// The file to edit.
        file: PathBuf,
    },
    /// The gate could not answer now (no terminal to ask): approve the
    /// plan with [`approve_plan`] and resume, or resume with `-y`.
    Deferred {
        /// The gate.
        gate: GatePoint,
    },
    /// The person chose Cancel.
    Cancelled {
        /// The gate.
        gate: GatePoint,
    },
    /// Tasks escalated to a human; they resume from their saved state.
    NeedsHuman {
        /// `(task id, reason)` per paused task.
        tasks: Vec<(String, String)>,
    },
    /// The run was cancelled (Ctrl-C); unfinished rows stay pending.
    Interrupted,
    /// A run limit of the agent (`[budget]`: cost, tokens, calls, wall
    /// time) was reached: the call it refused was abandoned, unfinished
    /// rows stay pending, and the run resumes (with a higher limit if need
    /// be) like an interrupted one.
    LimitReached {
        /// Which limit, and what was spent.
        limit: String,
    },
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum OutcomeStatus {
    /// Every task completed.
    Completed,
    /// Phase 5 ran, but some tasks failed or were skipped.
    Incomplete,
    /// Stopped at a gate, for a human, or by cancellation.
    Stopped(Stop),
}

/// The result of [`Planex::plan`], [`Planex::resume`],
/// [`Planex::run_tasks_file`] and [`Planex::retry_failed`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// How it ended.
    pub status: OutcomeStatus,
    /// Counts and paths, for the terminal.
    pub summary: Summary,
    /// Problems that did not stop the run (malformed journal or discovery
    /// lines, the all-explorations-failed fallback, …); also sent as
    /// [`Event::Warning`](orchestrator_core::event::Event::Warning).
    pub warnings: Vec<String>,
}

impl Outcome {
    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.summary.session_id
    }

    /// The process exit code: 0 every task completed, 1 some failed or were
    /// skipped, 3 stopped (gate, human, cancellation, run limit).
    pub fn exit_code(&self) -> u8 {
        match self.status {
            OutcomeStatus::Completed => 0,
            OutcomeStatus::Incomplete => 1,
            OutcomeStatus::Stopped(_) => 3,
        }
    }

    /// What to tell the person about going on, when the run stopped:
    /// which file to edit and the command that resumes; at a gate nobody
    /// could answer, how to answer it (an approval command or `-y`), since
    /// resuming alone would ask the same gate again.
    pub fn resume_hint(&self) -> Option<String> {
        let resume = format!("orchestrator planex --continue {}", self.session_id());
        let OutcomeStatus::Stopped(stop) = &self.status else {
            return None;
        };
        Some(match stop {
            Stop::Modify { file, .. } => {
                format!("Edit: {}\nResume: {resume}", file.display())
            }
            Stop::Deferred { gate } => {
                let id = self.session_id();
                format!(
                    "Waiting for approval of {} ({}); nobody could be asked here (no terminal).\n\
                     Approve it: orchestrator planex approve {id}\n\
                     Then run it: {resume}\n\
                     Or approve every gate as the run goes (-y): {resume} -y",
                    gate.plan_name(),
                    self.summary.session_dir.join(gate.file_name()).display(),
                )
            }
            Stop::Cancelled { .. } => "Cancelled.".to_owned(),
            Stop::NeedsHuman { tasks } => {
                let list: Vec<String> = tasks
                    .iter()
                    .map(|(id, why)| format!("  - {id}: {why}"))
                    .collect();
                format!(
                    "Tasks need a human:\n{}\nAct on them, then resume: {resume}",
                    list.join("\n")
                )
            }
            Stop::Interrupted => format!("Interrupted. Resume: {resume}"),
            Stop::LimitReached { limit } => format!(
                "Stopped at the run's limit ({limit}); the rows not done are pending.\n\
                 Resume, with a higher limit if need be: {resume}"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: OutcomeStatus) -> Outcome {
        Outcome {
            status,
            summary: Summary {
                session_id: "wpp-20260228-auth".into(),
                session_dir: PathBuf::from("/r/.workflow/.lite-plan/wpp-20260228-auth"),
                ..Summary::default()
            },
            warnings: Vec::new(),
        }
    }

    #[test]
    fn exit_codes_and_hints() {
        assert_eq!(outcome(OutcomeStatus::Completed).exit_code(), 0);
        assert_eq!(outcome(OutcomeStatus::Completed).resume_hint(), None);
        assert_eq!(outcome(OutcomeStatus::Incomplete).exit_code(), 1);
        let modify = outcome(OutcomeStatus::Stopped(Stop::Modify {
            gate: GatePoint::ExecutionPlan,
            file: PathBuf::from("/r/s/tasks.csv"),
        }));
        assert_eq!(modify.exit_code(), 3);
        assert_eq!(
            modify.resume_hint().unwrap(),
            "Edit: /r/s/tasks.csv\nResume: orchestrator planex --continue wpp-20260228-auth"
        );
        let human = outcome(OutcomeStatus::Stopped(Stop::NeedsHuman {
            tasks: vec![("T2".into(), "round limit reached".into())],
        }));
        assert_eq!(
            human.resume_hint().unwrap(),
            "Tasks need a human:\n  - T2: round limit reached\nAct on them, then resume: orchestrator planex --continue wpp-20260228-auth"
        );
    }

    #[test]
    fn outcomes_serialize_for_json_output() {
        let o = outcome(OutcomeStatus::Stopped(Stop::Cancelled {
            gate: GatePoint::ExplorePlan,
        }));
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["status"]["status"], "stopped");
        assert_eq!(v["status"]["reason"], "cancelled");
        assert_eq!(v["status"]["gate"], "explore_plan");
        assert_eq!(v["summary"]["session_id"], "wpp-20260228-auth");
        let back: Outcome = serde_json::from_value(v).unwrap();
        assert_eq!(back, o);
    }
}

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
