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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::agent::{
    Agent, AgentError, AgentRequest, AgentResponse, Role, SessionCarry,
};
use orchestrator_core::ask::run_within;
use orchestrator_core::event::{Event, EventSink, JobStatus};
use orchestrator_core::gate::Gate;
use orchestrator_core::retry::{
    HistoryEntry, Milestone, MilestoneOutcome, MilestoneState, RetryPolicy, run_milestone,
};
use orchestrator_core::scheduler::{
    CancelHandle, JobId, JobOutcome, JobSpec, SKIP_REASON, Scheduler, SchedulerConfig,
};
use orchestrator_core::state::write_csv_atomic;
use serde_json::Value;
use tokio::task::JoinSet;

use crate::error::PlanexError;
use crate::journal::{ExploreResult, JournalEntry, PausedTask, TaskResult};
use crate::protocol::{
    CONTEXT_VERSION, EXPLORE_FINDINGS_MAX, PlanexContext, TASK_FINDINGS_MAX, WireExploreRow,
    WireTaskRow, execute_instruction, explore_instruction, explore_schema, list_field,
    split_criteria, status_field, str_field, task_report_schema, truncate_chars,
};
use crate::report::build_prev_context;
use crate::rows::{EXPLORE_COLUMNS, RowStatus, TASK_COLUMNS, TaskRow};
use crate::session::{Session, SessionState};
use crate::{CriteriaSource, PlanexOptions};

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

/// The scheduler status a row starts with (pending rows: none).
pub(crate) fn initial_status(status: RowStatus) -> Option<JobStatus> {
    match status {
        RowStatus::Pending => None,
        RowStatus::Completed => Some(JobStatus::Completed),
        RowStatus::Failed => Some(JobStatus::Failed),
        RowStatus::Skipped => Some(JobStatus::Skipped),
    }
}

/// The scheduler settings of a run.
pub(crate) fn scheduler_config(options: &PlanexOptions) -> SchedulerConfig {
    SchedulerConfig {
        mode: options.schedule,
        concurrency: options.concurrency.max(1),
    }
}

/// Temporary per-wave CSVs and wave-completion checkpoints.
struct WaveFiles {
    headers: Vec<String>,
    /// Which wave each pending row is in.
    wave_of: HashMap<String, u32>,
    /// Rows not yet final, per wave.
    remaining: BTreeMap<u32, usize>,
    /// Rows started, per wave: the cells of the wave CSV.
    started: BTreeMap<u32, Vec<Vec<String>>>,
    /// Waves that became complete since the last checkpoint.
    completed: BTreeSet<u32>,
    /// Name prefix of the wave CSVs (`explore-wave-` / `task-wave-`).
    prefix: &'static str,
}

impl WaveFiles {
    fn new(sched: &Scheduler, headers: Vec<String>, prefix: &'static str) -> Self {
        let mut wave_of = HashMap::new();
        let mut remaining = BTreeMap::new();
        for (i, spec) in sched.specs().iter().enumerate() {
            let job = JobId(i);
            if sched.state(job) == orchestrator_core::scheduler::JobState::Pending {
                let wave = sched.wave(job);
                wave_of.insert(spec.id.clone(), wave);
                *remaining.entry(wave).or_insert(0usize) += 1;
            }
        }
        Self {
            headers,
            wave_of,
            remaining,
            started: BTreeMap::new(),
            completed: BTreeSet::new(),
            prefix,
        }
    }

    fn path(&self, session: &Session, wave: u32) -> PathBuf {
        session.dir().join(format!("{}{wave}.csv", self.prefix))
    }

    /// A row of `wave` started: (re)writes the wave's CSV with it.
    fn started(
        &mut self,
        session: &Session,
        wave: u32,
        cells: Vec<String>,
    ) -> Result<(), PlanexError> {
        let path = self.path(session, wave);
        let rows = self.started.entry(wave).or_default();
        rows.push(cells);
        write_csv_atomic(path, &self.headers, rows)?;
        Ok(())
    }

    /// A row became final.
    fn row_final(&mut self, id: &str) {
        if let Some(wave) = self.wave_of.remove(id)
            && let Some(left) = self.remaining.get_mut(&wave)
        {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.completed.insert(wave);
            }
        }
    }

    /// Checkpoints when a wave completed since the last call, and removes the
    /// completed waves' CSVs.
    fn flush(&mut self, session: &mut Session, state: &SessionState) -> Result<(), PlanexError> {
        if self.completed.is_empty() {
            return Ok(());
        }
        session.checkpoint(state)?;
        for wave in std::mem::take(&mut self.completed) {
            session.remove_file(&self.path(session, wave))?;
        }
        Ok(())
    }

    /// Removes every wave CSV this run wrote.
    fn remove_all(&self, session: &Session) -> Result<(), PlanexError> {
        for wave in self.started.keys() {
            session.remove_file(&self.path(session, *wave))?;
        }
        Ok(())
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
}

/// Phase 2: the explore rows.
pub(crate) struct ExploreHost<'a> {
    session: &'a mut Session,
    state: &'a mut SessionState,
    env: JobEnv,
    waves: WaveFiles,
}

impl<'a> ExploreHost<'a> {
    pub(crate) fn new(
        session: &'a mut Session,
        state: &'a mut SessionState,
        env: JobEnv,
        sched: &Scheduler,
    ) -> Self {
        let headers = EXPLORE_COLUMNS[..6]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let waves = WaveFiles::new(sched, headers, "explore-wave-");
        Self {
            session,
            state,
            env,
            waves,
        }
    }

    /// Final checkpoint and cleanup.
    pub(crate) fn finish(self) -> Result<(), PlanexError> {
        self.session.checkpoint(self.state)?;
        self.waves.remove_all(self.session)
    }

    fn record(&mut self, result: ExploreResult) -> Result<(), PlanexError> {
        let entry = JournalEntry::Explore(result);
        self.session.record(entry.clone())?;
        self.state.apply(&entry);
        if let JournalEntry::Explore(r) = &entry {
            self.waves.row_final(&r.id);
        }
        Ok(())
    }
}

/// The specs of the explore rows.
pub(crate) fn explore_specs(state: &SessionState) -> Vec<JobSpec> {
    state
        .explore_rows()
        .iter()
        .map(|r| {
            let mut spec = JobSpec::new(&r.id)
                .title(&r.angle)
                .deps(r.deps.iter().cloned());
            spec.initial = initial_status(r.status);
            spec
        })
        .collect()
}

impl Host for ExploreHost<'_> {
    type Output = ExploreResult;

    fn start(&mut self, id: &str, wave: u32) -> Result<JobFuture<ExploreResult>, PlanexError> {
        let Some(row) = self
            .state
            .explore_rows()
            .iter()
            .find(|r| r.id == id)
            .cloned()
        else {
            let id = id.to_owned();
            return Ok(Box::pin(async move {
                failed_explore(&id, "row not found in explore.csv")
            }));
        };
        let wire = WireExploreRow::from(&row);
        self.waves.started(
            self.session,
            wave,
            vec![
                wire.id.clone(),
                wire.angle.clone(),
                wire.description.clone(),
                wire.focus.clone(),
                wire.deps.clone(),
                wire.wave.clone(),
            ],
        )?;
        let session_dir = self.session.dir().display().to_string();
        let discoveries = self.session.discoveries().display().to_string();
        let limit = self.env.options.explore_time_limit;
        let context = PlanexContext::Explore {
            version: CONTEXT_VERSION,
            session_dir: session_dir.clone(),
            discoveries: discoveries.clone(),
            row: wire,
        };
        let request = AgentRequest::new(
            &row.id,
            Role::Explore,
            explore_instruction(&row, &session_dir, &discoveries),
            self.env.workdir.clone(),
        )
        .with_artifacts_dir(self.session.dir())
        .with_schema(explore_schema())
        .with_time_limit(limit)
        .with_context(serde_json::to_value(&context).unwrap_or(Value::Null));
        let agent = self.env.agent.clone();
        Ok(Box::pin(run_explore(agent, request, limit)))
    }

    fn finished(&mut self, _id: &str, result: ExploreResult) -> Result<Finish, PlanexError> {
        let outcome = match result.status {
            RowStatus::Completed => JobOutcome::completed(),
            _ => JobOutcome::failed(result.error.clone()),
        };
        self.record(result)?;
        Ok(Finish::Done(outcome))
    }

    fn lost(&mut self, id: &str, detail: &str) -> Result<(), PlanexError> {
        self.record(failed_explore(id, detail))
    }

    fn skipped(&mut self, id: &str, detail: &str) -> Result<(), PlanexError> {
        self.record(ExploreResult {
            id: id.to_owned(),
            status: RowStatus::Skipped,
            findings: String::new(),
            key_files: Vec::new(),
            error: detail.to_owned(),
        })
    }

    fn after_step(&mut self) -> Result<(), PlanexError> {
        self.waves.flush(self.session, self.state)
    }
}

fn failed_explore(id: &str, error: &str) -> ExploreResult {
    ExploreResult {
        id: id.to_owned(),
        status: RowStatus::Failed,
        findings: String::new(),
        key_files: Vec::new(),
        error: error.to_owned(),
    }
}

/// One explore row: the agent's validated answer, or a failure.
async fn run_explore(
    agent: Arc<dyn Agent>,
    request: AgentRequest,
    limit: Duration,
) -> ExploreResult {
    let id = request.id.clone();
    match run_within(agent.as_ref(), request, limit).await {
        Err(e) => failed_explore(&id, &e.to_string()),
        Ok(response) => {
            let value = response.structured.unwrap_or(Value::Null);
            let status = status_field(&value);
            let mut error = str_field(&value, "error");
            if status != RowStatus::Completed && error.trim().is_empty() {
                error = "the agent reported status failed".to_owned();
            }
            ExploreResult {
                id,
                status,
                findings: truncate_chars(&str_field(&value, "findings"), EXPLORE_FINDINGS_MAX),
                key_files: list_field(value.get("key_files")),
                error: if status == RowStatus::Completed {
                    String::new()
                } else {
                    error
                },
            }
        }
    }
}

/// What a task job yields.
pub(crate) enum TaskOutput {
    /// Completed or failed.
    Done(TaskResult),
    /// Needs a human; resume from the state.
    Paused(PausedTask),
}

/// Phase 4: the task rows.
pub(crate) struct TaskHost<'a> {
    session: &'a mut Session,
    state: &'a mut SessionState,
    env: JobEnv,
    waves: WaveFiles,
    /// Tasks paused in this run: `(id, reason)`.
    pub paused: Vec<(String, String)>,
}

/// The specs of the task rows: `deps` are hard dependencies, task ids in
/// `context_from` order-only edges, `scope` (`;`-separated globs) the write
/// scopes.
pub(crate) fn task_specs(state: &SessionState) -> Vec<JobSpec> {
    task_specs_of(state.task_rows())
}

/// [`task_specs`] of bare rows.
pub(crate) fn task_specs_of(rows: &[TaskRow]) -> Vec<JobSpec> {
    rows.iter()
        .map(|r| {
            let after: Vec<String> = r
                .context_from
                .iter()
                .filter(|id| !r.deps.contains(id) && rows.iter().any(|t| &t.id == *id))
                .cloned()
                .collect();
            let scopes: Vec<String> = r
                .scope
                .split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            let mut spec = JobSpec::new(&r.id)
                .title(&r.title)
                .deps(r.deps.iter().cloned())
                .after(after)
                .scopes(scopes);
            spec.initial = initial_status(r.status);
            spec
        })
        .collect()
}

impl<'a> TaskHost<'a> {
    pub(crate) fn new(
        session: &'a mut Session,
        state: &'a mut SessionState,
        env: JobEnv,
        sched: &Scheduler,
    ) -> Self {
        let headers = TASK_COLUMNS[..11]
            .iter()
            .map(|s| (*s).to_owned())
            .chain(std::iter::once("prev_context".to_owned()))
            .collect();
        let waves = WaveFiles::new(sched, headers, "task-wave-");
        Self {
            session,
            state,
            env,
            waves,
            paused: Vec::new(),
        }
    }

    /// Final checkpoint and cleanup.
    pub(crate) fn finish(self) -> Result<Vec<(String, String)>, PlanexError> {
        self.session.checkpoint(self.state)?;
        self.waves.remove_all(self.session)?;
        Ok(self.paused)
    }

    fn record(&mut self, result: TaskResult) -> Result<(), PlanexError> {
        let id = result.id.clone();
        let entry = JournalEntry::Task(result);
        self.session.record(entry.clone())?;
        self.state.apply(&entry);
        self.waves.row_final(&id);
        Ok(())
    }
}

impl Host for TaskHost<'_> {
    type Output = TaskOutput;

    fn start(&mut self, id: &str, wave: u32) -> Result<JobFuture<TaskOutput>, PlanexError> {
        let Some(row) = self.state.task_rows().iter().find(|r| r.id == id).cloned() else {
            let result = failed_task(id, None, "row not found in tasks.csv".to_owned());
            return Ok(Box::pin(async move { TaskOutput::Done(result) }));
        };
        let prev = build_prev_context(
            &row.context_from,
            self.state.explore_rows(),
            self.state.task_rows(),
        );
        let wire = WireTaskRow::new(&row, &prev);
        self.waves.started(
            self.session,
            wave,
            vec![
                wire.id.clone(),
                wire.title.clone(),
                wire.description.clone(),
                wire.test.clone(),
                wire.acceptance_criteria.clone(),
                wire.scope.clone(),
                wire.hints.clone(),
                wire.execution_directives.clone(),
                wire.deps.clone(),
                wire.context_from.clone(),
                wire.wave.clone(),
                wire.prev_context.clone(),
            ],
        )?;
        let options = &self.env.options;
        let session_dir = self.session.dir().display().to_string();
        let discoveries = self.session.discoveries().display().to_string();
        let milestone = Milestone {
            id: row.id.clone(),
            title: row.title.clone(),
            instruction: execute_instruction(&wire, &session_dir, &discoveries),
            exit_criteria: match options.execution.criteria {
                CriteriaSource::AcceptanceCriteria => split_criteria(&row.acceptance_criteria),
                CriteriaSource::AgentStatus => Vec::new(),
            },
        };
        let context = PlanexContext::Task {
            version: CONTEXT_VERSION,
            session_dir,
            discoveries,
            row: wire,
        };
        let limit = options.task_time_limit;
        // The agent may run the task's own directives and nothing else by
        // default (see `AgentRequest::allowed_commands`).
        let request = AgentRequest::new(&row.id, Role::Execute, "", self.env.workdir.clone())
            .with_artifacts_dir(self.session.dir())
            .with_schema(task_report_schema())
            .with_time_limit(limit)
            .allow_command_line(&row.execution_directives)
            .with_context(serde_json::to_value(&context).unwrap_or(Value::Null));
        let policy = RetryPolicy {
            attempts_per_round: options.execution.attempts_per_round.max(1),
            max_rounds: options.execution.max_rounds.max(1),
            auto_mode: options.auto_yes,
        };
        let job = TaskJob {
            agent: self.env.agent.clone(),
            gate: self.env.gate.clone(),
            sink: self.env.sink.clone(),
            milestone,
            policy,
            request,
            resume: self.state.paused.get(id).map(|p| p.state.clone()),
            limit,
            auto_yes: options.auto_yes,
        };
        Ok(Box::pin(job.run()))
    }

    fn finished(&mut self, id: &str, output: TaskOutput) -> Result<Finish, PlanexError> {
        match output {
            TaskOutput::Done(result) => {
                let outcome = match result.status {
                    RowStatus::Completed => JobOutcome::completed(),
                    _ => JobOutcome::failed(result.error.clone()),
                };
                self.record(result)?;
                Ok(Finish::Done(outcome))
            }
            TaskOutput::Paused(paused) => {
                let entry = JournalEntry::Paused(paused);
                self.session.record(entry.clone())?;
                self.state.apply(&entry);
                let reason = match &entry {
                    JournalEntry::Paused(p) => p.reason.clone(),
                    _ => String::new(),
                };
                self.paused.push((id.to_owned(), reason));
                Ok(Finish::Pause)
            }
        }
    }

    fn lost(&mut self, id: &str, detail: &str) -> Result<(), PlanexError> {
        self.record(failed_task(id, None, detail.to_owned()))
    }

    fn skipped(&mut self, id: &str, detail: &str) -> Result<(), PlanexError> {
        self.record(TaskResult {
            id: id.to_owned(),
            status: RowStatus::Skipped,
            findings: String::new(),
            files_modified: Vec::new(),
            tests_passed: None,
            acceptance_met: String::new(),
            error: detail.to_owned(),
        })
    }

    fn after_step(&mut self) -> Result<(), PlanexError> {
        self.waves.flush(self.session, self.state)
    }
}

/// One task, run through the retry executor.
struct TaskJob {
    agent: Arc<dyn Agent>,
    gate: Arc<dyn Gate>,
    sink: Arc<dyn EventSink>,
    milestone: Milestone,
    policy: RetryPolicy,
    request: AgentRequest,
    resume: Option<MilestoneState>,
    limit: Duration,
    auto_yes: bool,
}

impl TaskJob {
    async fn run(self) -> TaskOutput {
        let id = self.milestone.id.clone();
        // A retry of the task resumes the agent's own session: it keeps
        // what it read and tried (see `SessionCarry`).
        let reporter = ReportingAgent {
            inner: Arc::new(SessionCarry::new(self.agent)),
            limit: self.limit,
            last: Mutex::new(None),
        };
        let outcome = run_milestone(
            &reporter,
            self.gate.as_ref(),
            self.sink.as_ref(),
            &self.milestone,
            &self.policy,
            self.request,
            self.resume,
        )
        .await;
        let last = reporter.take_last();
        match outcome {
            MilestoneOutcome::Passed { .. } => TaskOutput::Done(completed_task(&id, last)),
            MilestoneOutcome::Failed { reason, history } => {
                TaskOutput::Done(failed_task(&id, last, failure_text(&history, &reason)))
            }
            MilestoneOutcome::NeedsHuman {
                reason,
                report_markdown,
                state,
            } => {
                if self.auto_yes {
                    let error = format!(
                        "{} (escalated: {reason})",
                        failure_text(&state.history, &reason)
                    );
                    TaskOutput::Done(failed_task(&id, last, error))
                } else {
                    TaskOutput::Paused(PausedTask {
                        id,
                        reason,
                        report_markdown,
                        state,
                    })
                }
            }
        }
    }
}

/// The last failed attempt's summary, or `reason` when no attempt ran.
fn failure_text(history: &[HistoryEntry], reason: &str) -> String {
    orchestrator_core::retry::attempts(history)
        .last()
        .filter(|a| !a.passed())
        .map_or_else(|| reason.to_owned(), |a| a.summary())
}

/// The report of the last answer: its JSON and the files the backend saw changed.
type LastReport = Option<(Value, Vec<String>)>;

fn completed_task(id: &str, last: LastReport) -> TaskResult {
    let mut r = result_from_report(id, last);
    r.status = RowStatus::Completed;
    r.error.clear();
    r
}

fn failed_task(id: &str, last: LastReport, error: String) -> TaskResult {
    let mut r = result_from_report(id, last);
    r.status = RowStatus::Failed;
    r.error = error;
    r
}

fn result_from_report(id: &str, last: LastReport) -> TaskResult {
    let (value, changed) = last.unwrap_or((Value::Null, Vec::new()));
    let mut files = list_field(value.get("files_modified"));
    for f in changed {
        if !files.contains(&f) {
            files.push(f);
        }
    }
    TaskResult {
        id: id.to_owned(),
        status: RowStatus::Pending,
        findings: truncate_chars(&str_field(&value, "findings"), TASK_FINDINGS_MAX),
        files_modified: files,
        tests_passed: value.get("tests_passed").and_then(Value::as_bool),
        acceptance_met: str_field(&value, "acceptance_met"),
        error: String::new(),
    }
}

/// Wraps the task agent for the retry executor: enforces the per-attempt time
/// limit, validates the report against the schema, keeps the last report, and
/// turns a report with status `failed` into a failed attempt.
#[derive(Debug)]
struct ReportingAgent {
    inner: Arc<dyn Agent>,
    limit: Duration,
    last: Mutex<LastReport>,
}

impl ReportingAgent {
    fn take_last(&self) -> LastReport {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

#[async_trait]
impl Agent for ReportingAgent {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn changes_files(&self) -> bool {
        self.inner.changes_files()
    }

    async fn run(&self, mut request: AgentRequest) -> Result<AgentResponse, AgentError> {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = None;
        request.time_limit = Some(self.limit);
        let response = run_within(self.inner.as_ref(), request, self.limit).await?;
        let value = response.structured.clone().unwrap_or(Value::Null);
        let status = status_field(&value);
        let error = str_field(&value, "error");
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((value, response.files_changed.clone()));
        if status != RowStatus::Completed {
            return Err(AgentError::Failed {
                message: if error.trim().is_empty() {
                    "the agent reported status failed".to_owned()
                } else {
                    error
                },
                exit_code: None,
            });
        }
        Ok(response)
    }
}
