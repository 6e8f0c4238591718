//! The tokio driver: runs the jobs a [`Scheduler`] hands out as tasks.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{JobId, JobOutcome, JobResult, Scheduler};
use crate::event::{EventSink, JobStatus};

/// The detail recorded on jobs stopped by a [`CancelHandle`].
pub const CANCEL_REASON: &str = "cancelled";

/// Cancels a [`run`] from anywhere: clone it, hand a copy to the run, call
/// [`cancel`](Self::cancel) from another task or a signal handler.
#[derive(Debug, Clone)]
pub struct CancelHandle {
    tx: Arc<watch::Sender<bool>>,
}

impl Default for CancelHandle {
    fn default() -> Self {
        Self::new()
    }
}

impl CancelHandle {
    /// A handle that has not been cancelled.
    pub fn new() -> Self {
        Self {
            tx: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Requests cancellation. Idempotent.
    pub fn cancel(&self) {
        self.tx.send_replace(true);
    }

    /// Whether cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once cancellation is requested.
    pub async fn cancelled(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives in `self`, so the channel cannot close first.
        let _ = rx.wait_for(|&c| c).await;
    }
}

/// What a [`run`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunReport {
    /// Final status and detail of every finished job (including jobs already
    /// final when the run began), by id.
    pub results: BTreeMap<String, JobResult>,
    /// Jobs that never started (non-empty only after a cancellation).
    pub pending: Vec<String>,
    /// Whether the run was cancelled.
    pub cancelled: bool,
}

/// Runs the scheduler's jobs as tokio tasks until all have a final status or
/// `cancel` fires.
///
/// `job` is called once per started job and returns its future, which is
/// spawned (hence `Send + 'static`). A job with a
/// [`timeout`](super::JobSpec::timeout) that exceeds it is dropped and ends
/// [`JobStatus::TimedOut`]; a job whose task panics ends `Failed`. On
/// cancellation the running jobs are aborted (their futures dropped) and end
/// [`JobStatus::Cancelled`]; jobs not started stay pending, and the scheduler
/// (borrowed, not consumed) keeps that state. It is halted afterwards and
/// starts nothing more: to resume, build a new [`Scheduler`] whose specs
/// carry the report's statuses as [`initial`](super::JobSpec::initial)
/// (`Cancelled` counts as pending). Every transition reaches `sink` as it
/// happens.
pub async fn run<F, Fut>(
    scheduler: &mut Scheduler,
    mut job: F,
    sink: &dyn EventSink,
    cancel: &CancelHandle,
) -> RunReport
where
    F: FnMut(JobId) -> Fut,
    Fut: Future<Output = JobOutcome> + Send + 'static,
{
    let mut tasks: JoinSet<JobOutcome> = JoinSet::new();
    let mut task_job: HashMap<tokio::task::Id, JobId> = HashMap::new();
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    let mut was_cancelled = false;
    loop {
        if cancel.is_cancelled() {
            was_cancelled = true;
            break;
        }
        while let Some(id) = scheduler.next_startable() {
            let fut = job(id);
            let handle = match scheduler.spec(id).timeout {
                Some(limit) => tasks.spawn(async move {
                    match tokio::time::timeout(limit, fut).await {
                        Ok(outcome) => outcome,
                        Err(_) => JobOutcome::timed_out(limit),
                    }
                }),
                None => tasks.spawn(fut),
            };
            task_job.insert(handle.id(), id);
        }
        scheduler.emit_events(sink);
        if tasks.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            () = &mut cancelled => {
                was_cancelled = true;
                break;
            }
            joined = tasks.join_next_with_id() => {
                let (task, outcome) = match joined {
                    Some(Ok((task, outcome))) => (task, outcome),
                    Some(Err(err)) => {
                        let detail = if err.is_panic() { "job panicked" } else { "job task was aborted" };
                        (err.id(), JobOutcome { status: JobStatus::Failed, detail: Some(detail.to_owned()) })
                    }
                    None => continue,
                };
                if let Some(id) = task_job.remove(&task) {
                    scheduler.on_finished(id, outcome);
                }
            }
        }
    }
    if was_cancelled {
        tasks.abort_all();
        // Wait until every aborted future has been dropped, so that nothing
        // of a cancelled job runs after `run` returns. A job that finished
        // before the abort took effect keeps its real outcome.
        while let Some(joined) = tasks.join_next_with_id().await {
            if let Ok((task, outcome)) = joined
                && let Some(id) = task_job.remove(&task)
            {
                scheduler.on_finished(id, outcome);
            }
        }
        scheduler.cancel_running(CANCEL_REASON);
    }
    scheduler.emit_events(sink);
    RunReport {
        results: scheduler.results(),
        pending: scheduler.pending_ids(),
        cancelled: was_cancelled,
    }
}
