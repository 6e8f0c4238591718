//! The flow: [`Planex`] and its four entry points.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, Role};
use orchestrator_core::ask::{AskFailure, AskPolicy, NextAttempt, ask};
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::gate::{Answer, Gate, GateOption, Question, check_answer};
use orchestrator_core::scheduler::{CancelHandle, Scheduler};
use orchestrator_core::state::{CsvTable, read_csv, read_ndjson, remove_stale_temp_files_in};
use orchestrator_core::timeline::TimelineRecorder;
use serde_json::Value;

use crate::error::PlanexError;
use crate::exec::{
    ExploreHost, JobEnv, TaskHost, drive, explore_scheduler_config, explore_specs, task_specs,
};
use crate::journal::JournalEntry;
use crate::plan::{RowSource, angles_from_answer, tasks_from_answer, validate_tasks_from};
use crate::protocol::{
    CONTEXT_VERSION, PLAN_ANGLES_ID, PLAN_TASKS_ID, PlanexContext, angles_schema,
    plan_angles_instruction, plan_tasks_instruction, tasks_schema,
};
use crate::report::{
    ReportHeader, Summary, render_context_md, render_execution_plan, render_explore_plan,
    synthesize,
};
use crate::rows::{Discovery, RowStatus, TaskRow, write_explore_csv};
use crate::scopes::scope_waits;
use crate::session::{
    ApprovedBy, ResumePhase, Session, SessionSource, SessionState, SessionStatus, session_timestamp,
};
use crate::{
    Approved, EXECUTE_GATE_ID, EXPLORE_GATE_ID, FLOW, GatePoint, Outcome, OutcomeStatus,
    PlanexOptions, Stop,
};

mod support;
use support::*;

mod gates;
pub use gates::PlanOnly;
pub use verifying::session_verified;

mod planner;

mod limit;

mod verifying;

/// How many times the planner is asked before its answer counts as unusable.
const PLANNER_ATTEMPTS: u32 = 2;

/// The agents of a run. Often one agent plays every part ([`Agents::all`]).
#[derive(Debug, Clone)]
pub struct Agents {
    /// Picks exploration angles and decomposes tasks ([`Role::Plan`]).
    pub planner: Arc<dyn Agent>,
    /// Explores one angle ([`Role::Explore`]).
    pub explorer: Arc<dyn Agent>,
    /// Executes one task ([`Role::Execute`]); a
    /// [`ShellTaskAgent`](crate::ShellTaskAgent) for `run` without an LLM.
    pub executor: Arc<dyn Agent>,
}

impl Agents {
    /// One agent for every part.
    pub fn all(agent: Arc<dyn Agent>) -> Self {
        Self {
            planner: agent.clone(),
            explorer: agent.clone(),
            executor: agent,
        }
    }
}

/// The lite-planex flow over one repository.
///
/// ```no_run
/// # async fn demo(agent: std::sync::Arc<dyn orchestrator_core::agent::Agent>) -> Result<(), orchestrator_planex::PlanexError> {
/// use std::sync::Arc;
/// use orchestrator_core::event::NullSink;
/// use orchestrator_core::gate::AutoYes;
/// use orchestrator_planex::{Agents, Planex, PlanexOptions};
///
/// let options = PlanexOptions::default().with_auto_yes(true);
/// let planex = Planex::new(".", Agents::all(agent), Arc::new(AutoYes), Arc::new(NullSink), options);
/// let outcome = planex.plan("Add a health-check endpoint").await?;
/// println!("{}", outcome.summary);
/// std::process::exit(outcome.exit_code().into());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Planex {
    repo: PathBuf,
    agents: Agents,
    gate: Arc<dyn Gate>,
    sink: Arc<dyn EventSink>,
    options: PlanexOptions,
    cancel: CancelHandle,
    /// Times the rows from the events for `timeline.svg`; `sink` is it.
    timeline: Arc<TimelineRecorder>,
    /// Why the run stopped at a run limit of its agent, once it has.
    limit: limit::LimitSlot,
    /// What each row and planning step spent in this run.
    spend: limit::SpendBook,
    /// Verified execution ([`Planex::with_verification`]).
    verification: Option<Arc<crate::verify::Verification>>,
}

/// Records the approval of the plan a session waits at — the newest
/// resumable session, or the one named — without running anything, so that
/// the next [`Planex::resume`] goes on without asking. It answers a gate
/// that could not be asked (no terminal) other than by `-y`, which also
/// approves every later gate and fails escalated tasks.
///
/// The plan is the one the session resumes at: `tasks.csv` once it exists,
/// else `explore.csv`. A plan approved before is reported as such
/// ([`Approved::already`]) and not written again. The session lock is held
/// while the approval is written, so a running engine is never raced.
pub fn approve_plan(repo: &Path, session_id: Option<&str>) -> Result<Approved, PlanexError> {
    let mut session = Session::open(repo, session_id)?;
    let gate = match session.resume_phase() {
        ResumePhase::Execute => GatePoint::ExecutionPlan,
        ResumePhase::Explore => GatePoint::ExplorePlan,
        ResumePhase::Nothing => {
            return Err(PlanexError::NothingToResume {
                dir: session.dir().to_path_buf(),
            });
        }
    };
    let already = session.approval(gate).is_some();
    if !already {
        session.approve(gate, ApprovedBy::Command, Timestamp::now())?;
    }
    Ok(Approved {
        session_id: session.id().to_owned(),
        gate,
        file: session.dir().join(gate.file_name()),
        already,
    })
}

/// Per-run bookkeeping.
struct Run {
    session: Session,
    state: SessionState,
    warnings: Vec<String>,
    /// What this run's task worktrees cost, when tasks ran in worktrees.
    worktrees: Option<orchestrator_core::worktree::PoolStats>,
}

impl Planex {
    /// A flow over `repo` (sessions go to `<repo>/.workflow/.lite-plan/`).
    pub fn new(
        repo: impl Into<PathBuf>,
        agents: Agents,
        gate: Arc<dyn Gate>,
        sink: Arc<dyn EventSink>,
        options: PlanexOptions,
    ) -> Self {
        let timeline = Arc::new(TimelineRecorder::new(sink));
        Self {
            repo: repo.into(),
            agents,
            gate,
            sink: timeline.clone(),
            timeline,
            options,
            cancel: CancelHandle::new(),
            limit: limit::LimitSlot::default(),
            spend: limit::SpendBook::default(),
            verification: None,
        }
    }

    /// Builder: stop the run when `cancel` fires (Ctrl-C). Running rows are
    /// abandoned and stay pending; the outcome is [`Stop::Interrupted`].
    pub fn with_cancel(mut self, cancel: CancelHandle) -> Self {
        self.cancel = cancel;
        self
    }

    /// The handle that interrupts this flow.
    pub fn cancel_handle(&self) -> &CancelHandle {
        &self.cancel
    }

    /// The settings.
    pub fn options(&self) -> &PlanexOptions {
        &self.options
    }

    /// The repository.
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    /// The whole flow for `requirement`, in a new session: phase 1 (angles,
    /// gate), phase 2 (explore), phase 3 (tasks, gate), phase 4 (execute),
    /// phase 5 (results.csv, context.md).
    pub async fn plan(&self, requirement: &str) -> Result<Outcome, PlanexError> {
        self.check_options()?;
        if requirement.trim().is_empty() {
            return Err(PlanexError::InvalidOption(
                "the requirement is empty".to_owned(),
            ));
        }
        self.check_clean(None).await?;
        let session = self.opened(Session::create(
            &self.repo,
            requirement,
            SessionSource::Plan,
            Timestamp::now(),
        )?);
        let mut run = Run {
            session,
            state: SessionState::default(),
            warnings: Vec::new(),
            worktrees: None,
        };
        self.phase_started("plan-explore");
        let explore = match self.interruptible(self.plan_angles(&run.session)).await {
            Some(result) => result?,
            None => return self.stopped(run, self.interruption()),
        };
        write_explore_csv(run.session.explore_csv(), &explore)?;
        run.state.explore = Some(explore);
        self.phase_finished("plan-explore");
        if let Some(stop) = self.gate(GatePoint::ExplorePlan, &mut run).await? {
            return self.stopped(run, stop);
        }
        self.explore_onwards(run).await
    }

    /// Continues the newest resumable session (or the one named): at phase 4
    /// when it has a tasks.csv, else at phase 2. Completed rows are never
    /// run again; rows paused for a human resume from their saved state.
    ///
    /// A plan is run only once approved: when the session holds no approval
    /// of the plan it resumes at (it stopped at that gate — Modify, deferred,
    /// interrupted — or died before the gate was answered), the gate is asked
    /// again; `-y` answers it, and so does an earlier [`approve_plan`].
    pub async fn resume(&self, session_id: Option<&str>) -> Result<Outcome, PlanexError> {
        self.check_options()?;
        let mut run = self.reopen(session_id)?;
        match run.session.resume_phase() {
            ResumePhase::Execute => {
                if let Some(stop) = self
                    .ensure_approved(GatePoint::ExecutionPlan, &mut run)
                    .await?
                {
                    return self.stopped(run, stop);
                }
                self.execute(run).await
            }
            ResumePhase::Explore => {
                if let Some(stop) = self
                    .ensure_approved(GatePoint::ExplorePlan, &mut run)
                    .await?
                {
                    return self.stopped(run, stop);
                }
                self.explore_onwards(run).await
            }
            ResumePhase::Nothing => Err(PlanexError::NothingToResume {
                dir: run.session.dir().to_path_buf(),
            }),
        }
    }

    /// Resets the failed and skipped tasks of a session (the newest, or the
    /// one named) to pending and executes them again (phases 4–5).
    pub async fn retry_failed(&self, session_id: Option<&str>) -> Result<Outcome, PlanexError> {
        self.check_options()?;
        let mut run = self.reopen(session_id)?;
        if run.state.tasks.is_none() {
            return Err(PlanexError::NothingToResume {
                dir: run.session.dir().to_path_buf(),
            });
        }
        if let Some(stop) = self
            .ensure_approved(GatePoint::ExecutionPlan, &mut run)
            .await?
        {
            return self.stopped(run, stop);
        }
        let ids: Vec<String> = run
            .state
            .task_rows()
            .iter()
            .filter(|t| matches!(t.status, RowStatus::Failed | RowStatus::Skipped))
            .map(|t| t.id.clone())
            .collect();
        if !ids.is_empty() {
            let entry = JournalEntry::Reset { ids };
            run.session.record(entry.clone())?;
            run.state.apply(&entry);
            run.session.checkpoint(&run.state)?;
        }
        self.execute(run).await
    }

    /// Executes a person-written tasks.csv (phases 4–5) in a new session.
    ///
    /// The file is checked before any session is created: a malformed CSV is
    /// an error naming the line and column, an invalid plan one naming the
    /// line and id. It is copied in as the session's `tasks.csv` with waves
    /// computed; unknown columns are kept; rows already `completed` are not
    /// run.
    pub async fn run_tasks_file(&self, tasks_csv: &Path) -> Result<Outcome, PlanexError> {
        self.check_options()?;
        let (mut rows, lines) = read_tasks_with_lines(tasks_csv)?;
        let name = tasks_csv.display().to_string();
        validate_tasks_from(
            &mut rows,
            None,
            RowSource {
                name: &name,
                lines: Some(&lines),
            },
        )?;
        self.check_clean(Some(&name)).await?;
        let file_name = tasks_csv
            .file_name()
            .map_or_else(|| name.clone(), |n| n.to_string_lossy().into_owned());
        let session = self.opened(Session::create(
            &self.repo,
            &format!("run {file_name}"),
            SessionSource::Run {
                tasks_csv: name.clone(),
            },
            Timestamp::now(),
        )?);
        let mut run = Run {
            session,
            state: SessionState {
                explore: None,
                tasks: Some(rows),
                ..SessionState::default()
            },
            warnings: Vec::new(),
            worktrees: None,
        };
        run.session.checkpoint(&run.state)?;
        if let Some(stop) = self.gate(GatePoint::ExecutionPlan, &mut run).await? {
            return self.stopped(run, stop);
        }
        self.execute(run).await
    }

    /// Options and agents, checked before anything runs.
    fn check_options(&self) -> Result<(), PlanexError> {
        if self.options.concurrency == 0 {
            return Err(PlanexError::InvalidOption(
                "concurrency must be at least 1, got 0".to_owned(),
            ));
        }
        // Every entry point can reach phase 4; refuse before the planner's
        // first paid call rather than at the first task.
        if !self.agents.executor.changes_files() {
            return Err(PlanexError::AgentCannotChangeFiles {
                agent: self.agents.executor.name().to_owned(),
            });
        }
        Ok(())
    }

    /// Opens and locks a session, replays its journal, cleans leftovers of
    /// an interrupted run and checkpoints.
    fn reopen(&self, session_id: Option<&str>) -> Result<Run, PlanexError> {
        let mut session = self.opened(Session::open(&self.repo, session_id)?);
        let (state, warning) = session.load()?;
        let mut warnings = Vec::new();
        if let Some(w) = warning {
            self.warn(&mut warnings, w);
        }
        // Every state file's leftovers, wave files and results included.
        remove_stale_temp_files_in(session.dir())?;
        remove_wave_files(&session)?;
        self.load_spend(&session, &mut warnings);
        session.checkpoint(&state)?;
        session.set_status(SessionStatus::Active, None)?;
        Ok(Run {
            session,
            state,
            warnings,
            worktrees: None,
        })
    }

    /// Phases 2, 3 and what follows.
    async fn explore_onwards(&self, mut run: Run) -> Result<Outcome, PlanexError> {
        // Phase 2.
        if run
            .state
            .explore_rows()
            .iter()
            .any(|r| r.status == RowStatus::Pending)
        {
            self.phase_started("explore");
            let specs = explore_specs(&run.state);
            let mut sched = Scheduler::new(specs, explore_scheduler_config(&self.options))
                .map_err(|e| PlanexError::InvalidExplorePlan {
                    source_name: run.session.explore_csv().display().to_string(),
                    problems: vec![e.to_string()],
                })?;
            let env = self.env(self.stopping_at_limit(self.agents.explorer.clone()));
            let mut host = ExploreHost::new(&mut run.session, &mut run.state, env, &sched);
            let end = drive(&mut sched, &mut host, self.sink.as_ref(), &self.cancel).await?;
            host.finish()?;
            self.check_discoveries(&run.session, &mut run.warnings);
            self.phase_finished("explore");
            if end.interrupted {
                return self.stopped(run, self.interruption());
            }
        }

        // Phase 3.
        self.phase_started("plan-tasks");
        let tasks = match self.interruptible(self.plan_tasks(&mut run)).await {
            Some(result) => result?,
            None => return self.stopped(run, self.interruption()),
        };
        run.state.tasks = Some(tasks);
        run.session.checkpoint(&run.state)?;
        self.phase_finished("plan-tasks");
        if let Some(stop) = self.gate(GatePoint::ExecutionPlan, &mut run).await? {
            return self.stopped(run, stop);
        }
        self.execute(run).await
    }

    /// Phases 4 and 5.
    async fn execute(&self, mut run: Run) -> Result<Outcome, PlanexError> {
        let tasks_path = run.session.tasks_csv();
        let lines = read_csv(&tasks_path)
            .map(|t| t.rows.iter().map(|r| r.line).collect::<Vec<_>>())
            .unwrap_or_default();
        let name = tasks_path.display().to_string();
        let explore = run.state.explore.clone();
        let plan = match run.state.tasks.as_mut() {
            Some(rows) => {
                let lines = (lines.len() == rows.len()).then_some(lines.as_slice());
                validate_tasks_from(rows, explore.as_deref(), RowSource { name: &name, lines })?
            }
            None => {
                return Err(PlanexError::NothingToResume {
                    dir: run.session.dir().to_path_buf(),
                });
            }
        };
        for w in plan.warnings {
            self.warn(&mut run.warnings, w);
        }
        self.check_verified_session(&run.session)?;
        run.session.checkpoint(&run.state)?;

        // Phase 4.
        self.phase_started("execute");
        let specs = task_specs(&run.state);
        let mut sched = Scheduler::new(specs, self.task_scheduler_config()).map_err(|e| {
            PlanexError::InvalidPlan {
                source_name: name.clone(),
                problems: vec![e.to_string()],
            }
        })?;
        let mut env = self.env(self.stopping_at_limit(self.agents.executor.clone()));
        env.verify = self.verify_env(&run.session).await?;
        let pool = env.verify.as_ref().map(|v| Arc::clone(&v.pool));
        let mut host = TaskHost::new(&mut run.session, &mut run.state, env, &sched);
        let end = drive(&mut sched, &mut host, self.sink.as_ref(), &self.cancel).await;
        if let Some(pool) = pool {
            pool.close().await;
            run.worktrees = Some(pool.stats()).filter(|s| s.made > 0);
        }
        let end = end?;
        let paused = host.finish()?;
        self.phase_finished("execute");
        if end.interrupted {
            return self.stopped(run, self.interruption());
        }
        if !paused.is_empty() || !run.state.paused.is_empty() {
            let mut tasks = paused;
            for (id, p) in &run.state.paused {
                if !tasks.iter().any(|(t, _)| t == id) {
                    tasks.push((id.clone(), p.reason.clone()));
                }
            }
            return self.stopped(run, Stop::NeedsHuman { tasks });
        }

        // Phase 5.
        self.phase_started("aggregate");
        let summary = self.aggregate(&mut run)?;
        self.phase_finished("aggregate");
        let status = if summary.all_completed() {
            OutcomeStatus::Completed
        } else {
            OutcomeStatus::Incomplete
        };
        Ok(Outcome {
            status,
            summary,
            warnings: run.warnings,
        })
    }

    /// Phase 5: results.csv, context.md, the summary.
    fn aggregate(&self, run: &mut Run) -> Result<Summary, PlanexError> {
        let tasks = run.state.task_rows();
        crate::rows::write_tasks_csv(
            run.session.results_csv(),
            &verifying::with_verified(self.with_spend(tasks), &run.state.verified),
        )?;
        let completed_at = session_timestamp(Timestamp::now());
        let meta = run.session.meta();
        self.save_spend(&run.session)?;
        let mut markdown = render_context_md(
            &ReportHeader {
                session_id: &meta.id,
                requirement: &meta.requirement,
                completed_at: &completed_at,
                concurrency: self.options.tasks_at_once(),
            },
            run.state.explore_rows(),
            tasks,
            &scope_waits(tasks, &self.options),
        );
        if let Some(section) = self.verification_sections(tasks, &run.state.verified) {
            markdown.push_str(&section);
        }
        if let Some(section) = self.spend_section() {
            markdown.push_str(&section);
        }
        if let Some(stats) = &run.worktrees {
            markdown.push_str(&format!(
                "\n\n**Worktrees**: {}\n",
                crate::report::worktree_cost(stats)
            ));
        }
        if self.write_timeline(run)? {
            markdown.push_str(TIMELINE_SECTION);
        }
        orchestrator_core::state::write_atomic(run.session.context_md(), markdown.as_bytes())?;
        self.check_discoveries(&run.session, &mut run.warnings);
        run.session.set_status(SessionStatus::Finished, None)?;
        Ok(self.summary(run))
    }

    fn summary(&self, run: &Run) -> Summary {
        Summary::new(
            run.session.id(),
            run.session.dir().to_path_buf(),
            run.state.explore_rows(),
            run.state.task_rows(),
        )
        .with_scope_waits(scope_waits(run.state.task_rows(), &self.options))
        .with_worktrees(run.worktrees.clone())
    }

    /// Ends a run before phase 5: checkpoint, metadata, outcome.
    fn stopped(&self, mut run: Run, stop: Stop) -> Result<Outcome, PlanexError> {
        run.session.checkpoint(&run.state)?;
        self.save_spend(&run.session)?;
        let status = match stop {
            Stop::Cancelled { .. } => SessionStatus::Cancelled,
            _ => SessionStatus::Stopped,
        };
        let reason = serde_json::to_value(&stop)
            .ok()
            .and_then(|v| v.get("reason").and_then(Value::as_str).map(str::to_owned));
        run.session.set_status(status, reason)?;
        if let Stop::NeedsHuman { tasks } = &stop {
            for (id, reason) in tasks {
                self.sink.emit(&Event::Escalated {
                    id: Some(id.clone()),
                    reason: reason.clone(),
                });
            }
        }
        let summary = self.summary(&run);
        Ok(Outcome {
            status: OutcomeStatus::Stopped(stop),
            summary,
            warnings: run.warnings,
        })
    }

    /// Runs `future` unless the cancel handle fires first (then `None`).
    async fn interruptible<F: std::future::Future>(&self, future: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            output = future => Some(output),
        }
    }
}
