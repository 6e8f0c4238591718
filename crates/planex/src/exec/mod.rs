//! Phases 2 and 4 on the core scheduler.
//!
//! The scheduler ([`Scheduler`]) decides what may start (dependencies,
//! concurrency, write scopes, eager or waves); the driver here runs what it
//! hands out as tokio tasks and hands each result to a [`Host`] — one for
//! explore rows, one for task rows — which journals it (fsynced) before the
//! scheduler hears of it. The driver is ours rather than the scheduler's
//! stock `run` because a task that needs a human must *pause* the session:
//! no new job starts, running ones finish and are recorded, and the paused
//! task and its dependents stay pending for the resume.
//!
//! Cancellation ([`CancelHandle`]) aborts the running jobs; they and every
//! job not started stay pending. A job that finished before the abort took
//! effect is recorded as usual.
//!
//! By concern: `drive.rs` is the driver and the [`Host`] trait, `waves.rs`
//! the per-wave CSVs and checkpoints, `explore.rs` the phase 2 host,
//! `task.rs` the phase 4 host, `attempts.rs` one task through the retry
//! executor (the agent call, its report validated) and `results.rs` the task
//! results made of the last report.
//!
//! [`Scheduler`]: orchestrator_core::scheduler::Scheduler
//! [`CancelHandle`]: orchestrator_core::scheduler::CancelHandle
//! [`Host`]: drive::Host

use std::path::PathBuf;
use std::sync::Arc;

use orchestrator_core::agent::Agent;
use orchestrator_core::event::{EventSink, JobStatus};
use orchestrator_core::gate::Gate;
use orchestrator_core::scheduler::SchedulerConfig;

use crate::PlanexOptions;
use crate::rows::RowStatus;

mod attempts;
mod drive;
mod explore;
mod results;
mod task;
mod verified;
mod waves;

pub(crate) use drive::drive;
pub(crate) use explore::{ExploreHost, explore_specs};
pub(crate) use task::{TaskHost, task_specs, task_specs_of};

/// The scheduler status a row starts with (pending rows: none).
pub(crate) fn initial_status(status: RowStatus) -> Option<JobStatus> {
    match status {
        RowStatus::Pending => None,
        RowStatus::Completed => Some(JobStatus::Completed),
        RowStatus::Failed => Some(JobStatus::Failed),
        RowStatus::Skipped => Some(JobStatus::Skipped),
    }
}

/// The scheduler settings of a run's tasks (phase 4).
pub(crate) fn scheduler_config(options: &PlanexOptions) -> SchedulerConfig {
    SchedulerConfig {
        mode: options.schedule,
        concurrency: options.tasks_at_once(),
    }
}

/// The scheduler settings of a run's exploration (phase 2).
pub(crate) fn explore_scheduler_config(options: &PlanexOptions) -> SchedulerConfig {
    SchedulerConfig {
        mode: options.schedule,
        concurrency: options.concurrency.max(1),
    }
}

/// What every job needs from the run.
#[derive(Clone)]
pub(crate) struct JobEnv {
    pub agent: Arc<dyn Agent>,
    pub gate: Arc<dyn Gate>,
    pub sink: Arc<dyn EventSink>,
    pub workdir: PathBuf,
    pub options: PlanexOptions,
    /// Verified execution, when the run has it.
    pub verify: Option<VerifyEnv>,
}

/// What a verified task needs from the run (see [`crate::verify`]).
#[derive(Clone)]
pub(crate) struct VerifyEnv {
    pub verification: Arc<crate::verify::Verification>,
    /// The tasks whose commit landed since the session's base (HEAD when
    /// its first verified run started) when this run started: they landed
    /// before an interruption. Read once: a task starts at most once per
    /// run.
    pub landed: std::collections::HashMap<String, orchestrator_core::vcs::CommitId>,
    /// The session folder, for the in-flight records.
    pub dir: PathBuf,
    /// The run's worktrees (outside the repository, one per slot,
    /// provisioned once): every verified task runs in one.
    pub pool: Arc<orchestrator_core::worktree::WorktreePool>,
    /// Held while the repository's own tree or refs change (worktrees
    /// added or removed, landings). It guards the branch tip the run last
    /// saw there (read when a task starts, or landed): a task whose tree
    /// started from it lands by fast-forward.
    pub lock: Arc<tokio::sync::Mutex<Option<orchestrator_core::vcs::CommitId>>>,
}
