//! The pure scheduling state machine.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use super::scope::{ScopePrefix, overlaps};
use super::{
    JobId, JobOutcome, JobResult, JobSpec, Mode, SKIP_REASON, SchedulerConfig, SchedulerError,
};
use crate::event::{Event, EventSink, JobStatus};
use crate::waves::{WaveOptions, WaveTask, compute_waves};

mod priority;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Not started (waiting for dependencies, a slot, its scopes or its wave).
    Pending,
    /// Started and not yet finished.
    Running,
    /// Finished with this status.
    Done(JobStatus),
}

/// Above this many jobs, the transitive-dependent count used as a tie-break
/// is estimated (sum over successors) instead of counted exactly with bit
/// sets, which would need `n²/8` bytes.
const EXACT_DESCENDANTS_MAX: usize = 4096;

/// The scheduling policy as a state machine: no clock, no tasks, no I/O.
///
/// Drive it by calling [`next_startable`](Self::next_startable) until it
/// returns `None`, running what it hands out, and reporting each end with
/// [`on_finished`](Self::on_finished); stop when nothing is running and
/// nothing can start. Every transition is recorded as an [`Event`]
/// (drain with [`take_events`](Self::take_events)).
#[derive(Debug, Clone)]
pub struct Scheduler {
    specs: Vec<JobSpec>,
    config: SchedulerConfig,
    index: HashMap<String, u32>,
    state: Vec<JobState>,
    detail: Vec<Option<String>>,
    wave: Vec<u32>,
    /// Ordering successors in CSR form: `succ[succ_start[i]..succ_start[i+1]]`
    /// with a flag telling whether the edge is a hard dependency.
    succ_start: Vec<u32>,
    succ: Vec<(u32, bool)>,
    /// Hard dependencies in CSR form.
    hard_start: Vec<u32>,
    hard: Vec<u32>,
    /// Unfinished ordering predecessors per job.
    waiting: Vec<u32>,
    scopes: Vec<Vec<ScopePrefix>>,
    running: usize,
    scoped_running: Vec<u32>,
    finished: usize,
    halted: bool,
    events: Vec<Event>,
    // Eager mode.
    rank: Vec<u32>,
    by_rank: Vec<u32>,
    ready: BinaryHeap<Reverse<u32>>,
    // Waves mode.
    layers: Vec<Vec<u32>>,
    next_layer: usize,
    wave_pending: VecDeque<u32>,
}

impl Scheduler {
    /// Validates the jobs (unique ids, known dependencies, no cycle) and
    /// prepares the schedule.
    pub fn new(specs: Vec<JobSpec>, config: SchedulerConfig) -> Result<Self, SchedulerError> {
        if config.concurrency == 0 {
            return Err(SchedulerError::ZeroConcurrency);
        }
        let n = specs.len();
        let (wave, rows_of_deps) = resolve_rows(&specs)?;
        let edges = Edges::of(&rows_of_deps);
        let state: Vec<JobState> = specs
            .iter()
            .map(|s| match s.initial {
                None | Some(JobStatus::Cancelled) => JobState::Pending,
                Some(status) => JobState::Done(status),
            })
            .collect();
        let scopes = specs
            .iter()
            .map(|s| {
                s.scopes
                    .iter()
                    .filter_map(|g| ScopePrefix::parse(g))
                    .collect()
            })
            .collect();
        let index = specs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i as u32))
            .collect();
        let mut sched = Self {
            specs,
            config,
            index,
            detail: vec![None; n],
            wave,
            succ_start: edges.succ_start,
            succ: edges.succ,
            hard_start: edges.hard_start,
            hard: edges.hard,
            waiting: edges.waiting,
            scopes,
            running: 0,
            scoped_running: Vec::new(),
            finished: state
                .iter()
                .filter(|s| matches!(s, JobState::Done(_)))
                .count(),
            state,
            halted: false,
            events: Vec::new(),
            rank: Vec::new(),
            by_rank: Vec::new(),
            ready: BinaryHeap::new(),
            layers: Vec::new(),
            next_layer: 0,
            wave_pending: VecDeque::new(),
        };
        sched.prepare();
        Ok(sched)
    }

    /// Readies the first jobs for the mode (eager: ranked by priority; waves:
    /// the layers) and carries the jobs finished before the run to their
    /// dependents.
    fn prepare(&mut self) {
        let n = self.specs.len();
        match self.config.mode {
            Mode::Eager => {
                self.rank_by_priority();
                for i in 0..n {
                    if self.state[i] == JobState::Pending && self.waiting[i] == 0 {
                        self.ready.push(Reverse(self.rank[i]));
                    }
                }
            }
            Mode::Waves => self.build_layers(),
        }
        for i in 0..n {
            if let JobState::Done(status) = self.state[i] {
                self.propagate(i as u32, status);
            }
        }
    }

    /// The settings.
    pub fn config(&self) -> SchedulerConfig {
        self.config
    }

    /// Number of jobs.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether there are no jobs.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The spec of a job.
    pub fn spec(&self, job: JobId) -> &JobSpec {
        &self.specs[job.0]
    }

    /// All specs, in [`JobId`] order.
    pub fn specs(&self) -> &[JobSpec] {
        &self.specs
    }

    /// The job with this id.
    pub fn job_id(&self, id: &str) -> Option<JobId> {
        self.index.get(id).map(|&i| JobId(i as usize))
    }

    /// Where a job is.
    pub fn state(&self, job: JobId) -> JobState {
        self.state[job.0]
    }

    /// The job's dependency wave (1-based), over hard and order-only edges.
    pub fn wave(&self, job: JobId) -> u32 {
        self.wave[job.0]
    }

    /// In eager mode, the job's place in the priority order (0 first).
    pub fn priority_rank(&self, job: JobId) -> Option<u32> {
        self.rank.get(job.0).copied()
    }

    /// How many jobs are running.
    pub fn running_count(&self) -> usize {
        self.running
    }

    /// The running jobs.
    pub fn running(&self) -> Vec<JobId> {
        self.ids_in(JobState::Running)
    }

    /// Whether every job has a final status.
    pub fn is_finished(&self) -> bool {
        self.finished == self.specs.len()
    }

    /// Whether [`halt`](Self::halt) or
    /// [`cancel_running`](Self::cancel_running) stopped new starts.
    pub fn is_halted(&self) -> bool {
        self.halted
    }

    /// Ids of the jobs that have not started (they stay pending after a
    /// cancellation, so that a resumed run picks them up).
    pub fn pending_ids(&self) -> Vec<String> {
        self.ids_in(JobState::Pending)
            .into_iter()
            .map(|j| self.specs[j.0].id.clone())
            .collect()
    }

    /// Final status and detail of every finished job, by id.
    pub fn results(&self) -> BTreeMap<String, JobResult> {
        self.state
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                JobState::Done(status) => Some((
                    self.specs[i].id.clone(),
                    JobOutcome {
                        status: *status,
                        detail: self.detail[i].clone(),
                    },
                )),
                _ => None,
            })
            .collect()
    }

    /// Takes the events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Sends the events recorded since the last call to `sink`.
    pub fn emit_events(&mut self, sink: &dyn EventSink) {
        for event in self.events.drain(..) {
            sink.emit(&event);
        }
    }

    /// The next job that may start now, marked running; `None` when nothing
    /// can start until a running job finishes (or ever, when all is done or
    /// the scheduler is halted).
    pub fn next_startable(&mut self) -> Option<JobId> {
        if self.halted || self.running >= self.config.concurrency {
            return None;
        }
        let job = match self.config.mode {
            Mode::Eager => self.next_eager()?,
            Mode::Waves => self.next_in_wave()?,
        };
        self.start(job);
        Some(JobId(job as usize))
    }

    /// Records how a running job ended: frees its slot and scopes, and (for
    /// anything but `Completed`) skips its dependents. Returns `false` and
    /// changes nothing when the job is not running.
    pub fn on_finished(&mut self, job: JobId, outcome: JobOutcome) -> bool {
        let i = job.0;
        if self.state.get(i) != Some(&JobState::Running) {
            return false;
        }
        self.release(i as u32);
        self.finish(i as u32, outcome.status, outcome.detail);
        self.propagate(i as u32, outcome.status);
        true
    }

    /// Stops starting jobs; running ones may still finish.
    pub fn halt(&mut self) {
        self.halted = true;
    }

    /// Halts and marks every running job [`JobStatus::Cancelled`] with
    /// `detail`. Their dependents are not skipped: they stay pending, like
    /// every job that had not started, so the state can be resumed.
    pub fn cancel_running(&mut self, detail: &str) -> Vec<JobId> {
        self.halted = true;
        let running = self.running();
        for &job in &running {
            let i = job.0 as u32;
            self.release(i);
            self.finish(i, JobStatus::Cancelled, Some(detail.to_owned()));
        }
        running
    }

    fn ids_in(&self, wanted: JobState) -> Vec<JobId> {
        self.state
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == wanted)
            .map(|(i, _)| JobId(i))
            .collect()
    }

    fn conflicts(&self, job: u32) -> bool {
        let mine = &self.scopes[job as usize];
        !mine.is_empty()
            && self
                .scoped_running
                .iter()
                .any(|&r| overlaps(mine, &self.scopes[r as usize]))
    }

    fn start(&mut self, job: u32) {
        let i = job as usize;
        self.state[i] = JobState::Running;
        self.running += 1;
        if !self.scopes[i].is_empty() {
            self.scoped_running.push(job);
        }
        self.events.push(Event::JobStarted {
            id: self.specs[i].id.clone(),
            title: self.specs[i].title.clone(),
        });
    }

    fn release(&mut self, job: u32) {
        self.running -= 1;
        if let Some(pos) = self.scoped_running.iter().position(|&r| r == job) {
            self.scoped_running.swap_remove(pos);
        }
    }

    fn finish(&mut self, job: u32, status: JobStatus, detail: Option<String>) {
        let i = job as usize;
        self.state[i] = JobState::Done(status);
        self.finished += 1;
        self.events.push(Event::JobFinished {
            id: self.specs[i].id.clone(),
            status,
            detail: detail.clone(),
        });
        self.detail[i] = detail;
    }

    /// A job reached a final status: its successors have one fewer
    /// predecessor to wait for, and in eager mode its hard dependents are
    /// skipped at once (transitively). Waves mode skips at wave start, like
    /// the seed.
    fn propagate(&mut self, job: u32, status: JobStatus) {
        let eager = self.config.mode == Mode::Eager;
        let mut stack = vec![(job, status)];
        while let Some((u, st)) = stack.pop() {
            let (from, to) = (
                self.succ_start[u as usize] as usize,
                self.succ_start[u as usize + 1] as usize,
            );
            for k in from..to {
                let (s, is_hard) = self.succ[k];
                let si = s as usize;
                if eager
                    && is_hard
                    && st != JobStatus::Completed
                    && self.state[si] == JobState::Pending
                {
                    self.finish(s, JobStatus::Skipped, Some(SKIP_REASON.to_owned()));
                    stack.push((s, JobStatus::Skipped));
                }
                self.waiting[si] -= 1;
                if eager && self.waiting[si] == 0 && self.state[si] == JobState::Pending {
                    self.ready.push(Reverse(self.rank[si]));
                }
            }
        }
    }

    fn next_eager(&mut self) -> Option<u32> {
        let mut blocked = Vec::new();
        let mut found = None;
        while let Some(Reverse(r)) = self.ready.pop() {
            let job = self.by_rank[r as usize];
            if self.state[job as usize] != JobState::Pending {
                continue;
            }
            if self.conflicts(job) {
                blocked.push(Reverse(r));
                continue;
            }
            found = Some(job);
            break;
        }
        self.ready.extend(blocked);
        found
    }

    fn next_in_wave(&mut self) -> Option<u32> {
        loop {
            if self.wave_pending.is_empty() {
                if self.running > 0 || !self.open_next_wave() {
                    return None;
                }
                continue;
            }
            let pos = self.wave_pending.iter().position(|&j| !self.conflicts(j))?;
            return self.wave_pending.remove(pos);
        }
    }

    /// Opens the next wave that has something to run, skipping (with the
    /// seed's reason) the jobs whose hard dependencies did not complete.
    fn open_next_wave(&mut self) -> bool {
        while self.next_layer < self.layers.len() {
            let w = self.next_layer;
            self.next_layer += 1;
            let layer = std::mem::take(&mut self.layers[w]);
            let mut runnable = Vec::new();
            for &j in &layer {
                let i = j as usize;
                if self.state[i] != JobState::Pending {
                    continue;
                }
                let deps = &self.hard[self.hard_start[i] as usize..self.hard_start[i + 1] as usize];
                let doomed = deps.iter().any(|&d| {
                    matches!(self.state[d as usize], JobState::Done(s) if s != JobStatus::Completed)
                });
                if doomed {
                    self.finish(j, JobStatus::Skipped, Some(SKIP_REASON.to_owned()));
                    self.propagate(j, JobStatus::Skipped);
                } else {
                    runnable.push(j);
                }
            }
            if !runnable.is_empty() {
                self.events.push(Event::WaveStarted {
                    wave: w as u32 + 1,
                    jobs: runnable
                        .iter()
                        .map(|&j| self.specs[j as usize].id.clone())
                        .collect(),
                });
                self.wave_pending = runnable.into();
                return true;
            }
        }
        false
    }
}

/// Checks the jobs (unique ids, known dependencies, no cycle) and resolves
/// them to rows: each job's wave, and its hard dependencies and ordering-only
/// predecessors (`after`) as rows.
fn resolve_rows(specs: &[JobSpec]) -> Result<(Vec<u32>, Vec<RowEdges>), SchedulerError> {
    let tasks: Vec<WaveTask<'_>> = specs
        .iter()
        .map(|s| WaveTask {
            id: &s.id,
            deps: s.deps.iter().chain(&s.after).map(String::as_str).collect(),
            context_from: Vec::new(),
        })
        .collect();
    let waves = compute_waves(&tasks, WaveOptions { lenient: false })?;
    // Every id is known now; resolve the edges to rows.
    let rows = specs
        .iter()
        .map(|s| {
            let resolve = |ids: &[String]| -> Vec<u32> {
                ids.iter()
                    .filter_map(|d| waves.row(d))
                    .map(|r| r as u32)
                    .collect()
            };
            (resolve(&s.deps), resolve(&s.after))
        })
        .collect();
    Ok((waves.by_row().to_vec(), rows))
}

/// A row's hard dependencies and ordering-only predecessors, as rows.
type RowEdges = (Vec<u32>, Vec<u32>);

/// The dependency graph in compressed (CSR) form, see [`Scheduler`]'s fields.
struct Edges {
    succ_start: Vec<u32>,
    succ: Vec<(u32, bool)>,
    hard_start: Vec<u32>,
    hard: Vec<u32>,
    waiting: Vec<u32>,
}

impl Edges {
    /// From each row's (hard dependencies, ordering-only predecessors).
    fn of(rows_of_deps: &[RowEdges]) -> Self {
        let n = rows_of_deps.len();
        let mut out_degree = vec![0u32; n + 1];
        let mut waiting = vec![0u32; n];
        for (i, (deps, after)) in rows_of_deps.iter().enumerate() {
            for &p in deps.iter().chain(after) {
                out_degree[p as usize] += 1;
            }
            waiting[i] = (deps.len() + after.len()) as u32;
        }
        let mut succ_start = vec![0u32; n + 1];
        for i in 0..n {
            succ_start[i + 1] = succ_start[i] + out_degree[i];
        }
        let mut fill = succ_start.clone();
        let mut succ = vec![(0u32, false); succ_start[n] as usize];
        let mut hard_start = Vec::with_capacity(n + 1);
        let mut hard = Vec::new();
        hard_start.push(0u32);
        for (i, (deps, after)) in rows_of_deps.iter().enumerate() {
            for (&p, is_hard) in deps
                .iter()
                .map(|p| (p, true))
                .chain(after.iter().map(|p| (p, false)))
            {
                let slot = &mut fill[p as usize];
                succ[*slot as usize] = (i as u32, is_hard);
                *slot += 1;
            }
            hard.extend_from_slice(deps);
            hard_start.push(hard.len() as u32);
        }
        Self {
            succ_start,
            succ,
            hard_start,
            hard,
            waiting,
        }
    }
}
