//! Runs a DAG of jobs with bounded concurrency.
//!
//! The scheduler is split in two so that one piece of code serves both real
//! runs and simulations:
//!
//! - [`Scheduler`] is a **pure state machine**: it owns the ready set, the
//!   running set, the write-scope locks and the skip cascade, and answers two
//!   questions — [`Scheduler::next_startable`] ("which job may start now?")
//!   and [`Scheduler::on_finished`] ("this job ended like this"). It records an
//!   [`Event`](crate::event::Event) for every transition. It knows nothing of
//!   time or tasks.
//! - Drivers feed it: [`run`] (feature `runtime`) runs jobs as tokio tasks (bounded concurrency,
//!   per-job timeouts, cancellation, events to an
//!   [`EventSink`](crate::event::EventSink)); [`sim::simulate`] runs it on a
//!   virtual clock without sleeping, for tests and for the makespan figures in
//!   `benches/`.
//!
//! ## Rules
//! - **Hard dependencies** ([`JobSpec::deps`]): a dependency that ends
//!   failed, timed out, skipped or cancelled skips the dependent with reason
//!   [`SKIP_REASON`] ("Dependency failed or skipped"), transitively.
//! - **Order-only dependencies** ([`JobSpec::after`], from planex's
//!   `context_from`): the dependent waits for them but is never skipped
//!   because of them.
//! - **Write scopes** ([`JobSpec::scopes`], globs like `src/auth/**`): two
//!   jobs whose scopes overlap never run at the same time. The overlap test is
//!   conservative, see [`scope`].
//! - **Resume**: a job whose [`JobSpec::initial`] status is final is not run
//!   again; a completed one counts as a completed dependency. `Cancelled` (or
//!   `None`) means pending.
//! - **Modes** ([`Mode`]): `Waves` is the seed's loop — a barrier after each
//!   wave, jobs within a wave started in id order; `Eager` starts a job the
//!   moment its dependencies have finished and a slot and its scopes are
//!   free, highest priority first (see [`Mode::Eager`]).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::event::JobStatus;
use crate::waves::WaveError;

#[cfg(feature = "runtime")]
mod driver;
mod policy;
pub mod scope;
pub mod sim;

#[cfg(feature = "runtime")]
pub use driver::{CANCEL_REASON, CancelHandle, RunReport, run};
pub use policy::{JobState, Scheduler};

/// The detail recorded on a job skipped because of a dependency (the seed's
/// wording).
pub const SKIP_REASON: &str = "Dependency failed or skipped";

/// How the ready jobs are ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The seed's behaviour: jobs run wave by wave (see
    /// [`compute_waves`](crate::waves::compute_waves)), with a barrier after
    /// each wave; within a wave, jobs start in id order up to the concurrency.
    #[default]
    Waves,
    /// A ready queue: a job starts as soon as its dependencies have finished
    /// and a slot and its scopes are free. Among ready jobs the one with the
    /// longest remaining critical path goes first (measured with the duration
    /// estimates when there are any, else in jobs); ties go to the job with
    /// more transitive dependents, then to the smaller id.
    Eager,
}

/// Scheduler settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Waves or eager.
    pub mode: Mode,
    /// How many jobs may run at once (at least 1).
    pub concurrency: usize,
}

impl Default for SchedulerConfig {
    /// Waves mode with the seed's default concurrency of 4.
    fn default() -> Self {
        Self {
            mode: Mode::Waves,
            concurrency: 4,
        }
    }
}

/// One job to schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSpec {
    /// Unique id.
    pub id: String,
    /// Human title, carried into `JobStarted` events.
    pub title: Option<String>,
    /// Hard dependencies: must complete, or this job is skipped.
    pub deps: Vec<String>,
    /// Order-only dependencies: must have finished (in any way) first. Planex
    /// puts here the task ids of `context_from` (not the `E*` exploration
    /// ids, which are not jobs).
    pub after: Vec<String>,
    /// Write scopes (globs). Empty: conflicts with nothing.
    pub scopes: Vec<String>,
    /// Expected duration, used for the critical path in eager mode.
    pub estimate: Option<Duration>,
    /// Time limit; a job that exceeds it ends [`JobStatus::TimedOut`].
    pub timeout: Option<Duration>,
    /// Status carried over from a resumed session; `None` or `Cancelled`
    /// means pending.
    pub initial: Option<JobStatus>,
}

impl JobSpec {
    /// A pending job with this id and nothing else.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }

    /// Sets the title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the hard dependencies.
    pub fn deps<S: Into<String>>(mut self, deps: impl IntoIterator<Item = S>) -> Self {
        self.deps = deps.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the order-only dependencies.
    pub fn after<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> Self {
        self.after = ids.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the write scopes.
    pub fn scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the duration estimate.
    pub fn estimate(mut self, estimate: Duration) -> Self {
        self.estimate = Some(estimate);
        self
    }

    /// Sets the time limit.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the status carried over from a resumed session.
    pub fn initial(mut self, status: JobStatus) -> Self {
        self.initial = Some(status);
        self
    }
}

/// A job's handle: its position in the spec list given to
/// [`Scheduler::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub usize);

impl JobId {
    /// The position in the spec list.
    pub fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// How a job run ended, as reported by the job itself (or by the driver for
/// timeouts and cancellation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobOutcome {
    /// The final status.
    pub status: JobStatus,
    /// A short explanation (error, summary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl JobOutcome {
    /// Completed, without detail.
    pub fn completed() -> Self {
        Self {
            status: JobStatus::Completed,
            detail: None,
        }
    }

    /// Failed, with the error.
    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            status: JobStatus::Failed,
            detail: Some(error.into()),
        }
    }

    /// Timed out after `limit`.
    pub fn timed_out(limit: Duration) -> Self {
        Self {
            status: JobStatus::TimedOut,
            detail: Some(format!("timed out after {}", format_duration(limit))),
        }
    }

    /// Adds a detail.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

/// The final status of a job and its detail, as returned in result maps.
pub type JobResult = JobOutcome;

/// Why a scheduler could not be built.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchedulerError {
    /// The dependency graph is invalid (cycle, unknown or duplicate id).
    #[error("invalid job graph: {0}")]
    Graph(#[from] WaveError),
    /// A concurrency of zero would never run anything.
    #[error("invalid scheduler config: concurrency must be at least 1, got 0")]
    ZeroConcurrency,
}

/// `1.5s`, `250ms`, `2m 5s`: short and exact enough for a detail line.
fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        let s = ms / 1000;
        if s >= 60 && s.is_multiple_of(60) {
            format!("{}m", s / 60)
        } else if s >= 60 {
            format!("{}m {}s", s / 60, s % 60)
        } else {
            format!("{s}s")
        }
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests;
