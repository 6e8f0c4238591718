//! Phase 2: the explore rows, each one agent call whose validated answer is
//! journaled as the row's result.

use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::agent::{Agent, AgentRequest, Role};
use orchestrator_core::ask::run_within;
use orchestrator_core::scheduler::{JobOutcome, JobSpec, Scheduler};
use serde_json::Value;

use super::drive::{Finish, Host, JobFuture};
use super::waves::WaveFiles;
use super::{JobEnv, initial_status};
use crate::error::PlanexError;
use crate::journal::{ExploreResult, JournalEntry};
use crate::protocol::{
    CONTEXT_VERSION, EXPLORE_FINDINGS_MAX, PlanexContext, WireExploreRow, explore_instruction,
    explore_schema, list_field, status_field, str_field, truncate_chars,
};
use crate::rows::{EXPLORE_COLUMNS, RowStatus};
use crate::session::{Session, SessionState};

/// Phase 2: the explore rows.
pub(crate) struct ExploreHost<'a> {
    session: &'a mut Session,
    state: &'a mut SessionState,
    env: JobEnv,
    waves: WaveFiles,
}

impl<'a> ExploreHost<'a> {
    /// The host of the explore rows of `state`, as scheduled by `sched`.
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
