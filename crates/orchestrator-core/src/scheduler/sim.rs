//! Runs a [`Scheduler`] on a virtual clock: no sleeping, no tasks.
//!
//! The same state machine as the tokio driver makes every decision; the
//! simulation only supplies durations and outcomes. Jobs that end at the
//! same instant are all reported before anything new starts, as a real run
//! would see them if they finished together.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use super::{JobId, JobOutcome, Scheduler};

/// One job run in a simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimRun {
    /// The job.
    pub job: JobId,
    /// Virtual start time.
    pub start: Duration,
    /// Virtual end time.
    pub end: Duration,
}

/// What a simulation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimTrace {
    /// When the last job ended.
    pub makespan: Duration,
    /// Every run, in start order.
    pub runs: Vec<SimRun>,
}

/// Drives `scheduler` to the end: each started job takes `duration(job)` of
/// virtual time and then ends with `outcome(job)`.
pub fn simulate(
    scheduler: &mut Scheduler,
    mut duration: impl FnMut(JobId) -> Duration,
    mut outcome: impl FnMut(JobId) -> JobOutcome,
) -> SimTrace {
    let mut now = Duration::ZERO;
    let mut trace = SimTrace::default();
    // (end, start order, run index): the start order breaks ties so that
    // equal end times finish in start order.
    let mut running: BinaryHeap<Reverse<(Duration, usize)>> = BinaryHeap::new();
    loop {
        while let Some(job) = scheduler.next_startable() {
            let end = now + duration(job);
            running.push(Reverse((end, trace.runs.len())));
            trace.runs.push(SimRun {
                job,
                start: now,
                end,
            });
        }
        let Some(Reverse((end, run))) = running.pop() else {
            break;
        };
        now = end;
        let job = trace.runs[run].job;
        scheduler.on_finished(job, outcome(job));
        while let Some(&Reverse((next_end, next_run))) = running.peek() {
            if next_end != now {
                break;
            }
            running.pop();
            let job = trace.runs[next_run].job;
            scheduler.on_finished(job, outcome(job));
        }
    }
    trace.makespan = now;
    trace
}
