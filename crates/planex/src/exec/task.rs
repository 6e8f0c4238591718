//! Phase 4: the task rows, each run through the retry executor; a task that
//! needs a human pauses the session.

use orchestrator_core::agent::{AgentRequest, Role};
use orchestrator_core::retry::{Milestone, RetryPolicy};
use orchestrator_core::scheduler::{JobOutcome, JobSpec, Scheduler};
use serde_json::Value;

use super::attempts::TaskJob;
use super::drive::{Finish, Host, JobFuture};
use super::results::TaskOutput;
use super::results::failed_task;
use super::waves::WaveFiles;
use super::{JobEnv, initial_status};
use crate::CriteriaSource;
use crate::error::PlanexError;
use crate::journal::{JournalEntry, TaskResult};
use crate::protocol::{
    CONTEXT_VERSION, PlanexContext, WireTaskRow, execute_instruction, split_criteria,
    task_report_schema,
};
use crate::report::build_prev_context;
use crate::rows::{RowStatus, TASK_COLUMNS, TaskRow};
use crate::session::{Session, SessionState};

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
            let scopes = r.scope_globs();
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
    /// The host of the task rows of `state`, as scheduled by `sched`.
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
            verify: self.env.verify.clone().map(|env| (env, row.clone())),
            sink_for_verify: self.env.sink.clone(),
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
            verified: None,
        })
    }

    fn after_step(&mut self) -> Result<(), PlanexError> {
        self.waves.flush(self.session, self.state)
    }
}
