//! The driver: runs the jobs the scheduler hands out as tokio tasks and
//! hands each result to a [`Host`], pausing or stopping when told to.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use orchestrator_core::event::{Event, EventSink, JobStatus};
use orchestrator_core::scheduler::{CancelHandle, JobId, JobOutcome, SKIP_REASON, Scheduler};
use tokio::task::JoinSet;

use crate::error::PlanexError;

/// A job's future, spawned on the runtime.
pub(crate) type JobFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What a host makes of a finished job.
pub(crate) enum Finish {
    /// Tell the scheduler it ended like this.
    Done(JobOutcome),
    /// The job needs a human: stop starting jobs, leave it pending.
    Pause,
}

/// The flow-specific half of the driver.
pub(crate) trait Host {
    /// What a job's future yields.
    type Output: Send + 'static;
    /// Builds the future of job `id` (in wave `wave`), which starts now.
    fn start(&mut self, id: &str, wave: u32) -> Result<JobFuture<Self::Output>, PlanexError>;
    /// Records a finished job (journal first).
    fn finished(&mut self, id: &str, output: Self::Output) -> Result<Finish, PlanexError>;
    /// Records a job that failed without an output (its task panicked).
    fn lost(&mut self, id: &str, detail: &str) -> Result<(), PlanexError>;
    /// Records a job the scheduler skipped.
    fn skipped(&mut self, id: &str, detail: &str) -> Result<(), PlanexError>;
    /// Called after every step: checkpoints finished waves.
    fn after_step(&mut self) -> Result<(), PlanexError>;
}

/// How a drive ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DriveEnd {
    /// The cancel handle fired.
    pub interrupted: bool,
    /// A job paused for a human.
    pub paused: bool,
}

/// Runs the scheduler's jobs through `host` until nothing more can start.
pub(crate) async fn drive<H: Host>(
    sched: &mut Scheduler,
    host: &mut H,
    sink: &dyn EventSink,
    cancel: &CancelHandle,
) -> Result<DriveEnd, PlanexError> {
    let mut tasks: JoinSet<H::Output> = JoinSet::new();
    let mut running: HashMap<tokio::task::Id, JobId> = HashMap::new();
    let result = drive_loop(sched, host, sink, cancel, &mut tasks, &mut running).await;
    if result.is_err() {
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
    result
}

async fn drive_loop<H: Host>(
    sched: &mut Scheduler,
    host: &mut H,
    sink: &dyn EventSink,
    cancel: &CancelHandle,
    tasks: &mut JoinSet<H::Output>,
    running: &mut HashMap<tokio::task::Id, JobId>,
) -> Result<DriveEnd, PlanexError> {
    let mut end = DriveEnd::default();
    loop {
        if cancel.is_cancelled() {
            end.interrupted = true;
            break;
        }
        while let Some(job) = sched.next_startable() {
            let id = sched.spec(job).id.clone();
            let future = host.start(&id, sched.wave(job))?;
            let handle = tasks.spawn(future);
            running.insert(handle.id(), job);
        }
        forward_events(sched, host, sink)?;
        host.after_step()?;
        if tasks.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            () = cancel.cancelled() => {
                end.interrupted = true;
                break;
            }
            joined = tasks.join_next_with_id() => {
                let Some(joined) = joined else { continue };
                match joined {
                    Ok((task, output)) => {
                        if let Some(job) = running.remove(&task) {
                            record(sched, host, job, output, &mut end)?;
                        }
                    }
                    Err(err) => {
                        if let Some(job) = running.remove(&err.id()) {
                            let detail = if err.is_panic() { "job panicked" } else { "job task was aborted" };
                            let id = sched.spec(job).id.clone();
                            host.lost(&id, detail)?;
                            sched.on_finished(job, JobOutcome::failed(detail));
                        }
                    }
                }
            }
        }
    }
    if end.interrupted {
        tasks.abort_all();
        while let Some(joined) = tasks.join_next_with_id().await {
            if let Ok((task, output)) = joined
                && let Some(job) = running.remove(&task)
            {
                record(sched, host, job, output, &mut end)?;
            }
        }
        sched.cancel_running(orchestrator_core::scheduler::CANCEL_REASON);
    }
    forward_events(sched, host, sink)?;
    host.after_step()?;
    Ok(end)
}

fn record<H: Host>(
    sched: &mut Scheduler,
    host: &mut H,
    job: JobId,
    output: H::Output,
    end: &mut DriveEnd,
) -> Result<(), PlanexError> {
    let id = sched.spec(job).id.clone();
    match host.finished(&id, output)? {
        Finish::Done(outcome) => {
            sched.on_finished(job, outcome);
        }
        Finish::Pause => {
            end.paused = true;
            sched.halt();
        }
    }
    Ok(())
}

/// Sends the scheduler's events on, journaling skips first.
fn forward_events<H: Host>(
    sched: &mut Scheduler,
    host: &mut H,
    sink: &dyn EventSink,
) -> Result<(), PlanexError> {
    for event in sched.take_events() {
        if let Event::JobFinished {
            id,
            status: JobStatus::Skipped,
            detail,
        } = &event
        {
            host.skipped(id, detail.as_deref().unwrap_or(SKIP_REASON))?;
        }
        sink.emit(&event);
    }
    Ok(())
}
