//! One task through the retry executor: the agent call held to its time
//! limit, its report validated and kept, and the milestone's outcome made
//! a task result or a pause.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, SessionCarry};
use orchestrator_core::ask::run_within;
use orchestrator_core::event::EventSink;
use orchestrator_core::gate::Gate;
use orchestrator_core::retry::{Milestone, MilestoneState, RetryPolicy, run_milestone};
use serde_json::Value;

use super::results::{LastReport, TaskOutput, failed_task, unfinished};
use super::verified::{Start, verified_end, verified_start};
use crate::protocol::{status_field, str_field};
use crate::rows::RowStatus;
use crate::rows::TaskRow;

/// One task, run through the retry executor.
pub(super) struct TaskJob {
    pub(super) agent: Arc<dyn Agent>,
    pub(super) gate: Arc<dyn Gate>,
    pub(super) sink: Arc<dyn EventSink>,
    pub(super) milestone: Milestone,
    pub(super) policy: RetryPolicy,
    pub(super) request: AgentRequest,
    pub(super) resume: Option<MilestoneState>,
    pub(super) limit: Duration,
    pub(super) auto_yes: bool,
    /// Verified execution of this row, when the run has it.
    pub(super) verify: Option<(super::VerifyEnv, TaskRow)>,
    pub(super) sink_for_verify: Arc<dyn EventSink>,
}

impl TaskJob {
    /// Runs the task's attempts; its result, or the pause for a human.
    pub(super) async fn run(self) -> TaskOutput {
        let id = self.milestone.id.clone();
        let mut request = self.request.clone();
        // A retry of the task resumes the agent's own session: it keeps
        // what it read and tried (see `SessionCarry`).
        let carried: Arc<dyn Agent> = Arc::new(SessionCarry::new(self.agent.clone()));
        let (inner, verifying) = match &self.verify {
            None => (carried, None),
            Some((env, row)) => {
                match verified_start(env, row, carried, &self.sink_for_verify).await {
                    Ok(Start::Run(agent, root)) => {
                        // The task works in its own worktree, with what
                        // the worktree's environment gives.
                        request.workdir = root;
                        request.env.extend(agent.env.clone());
                        (agent.clone() as Arc<dyn Agent>, Some(agent))
                    }
                    Ok(Start::Landed(result)) => return TaskOutput::Done(*result),
                    Ok(Start::Blocked(paused)) => return TaskOutput::Paused(*paused),
                    Err(error) => return TaskOutput::Done(failed_task(&id, None, error)),
                }
            }
        };
        let reporter = ReportingAgent {
            inner,
            limit: self.limit,
            last: Mutex::new(None),
        };
        let outcome = run_milestone(
            &reporter,
            self.gate.as_ref(),
            self.sink.as_ref(),
            &self.milestone,
            &self.policy,
            request,
            self.resume.clone(),
        )
        .await;
        let last = reporter.take_last();
        if let (Some(agent), Some((env, row))) = (&verifying, &self.verify) {
            return verified_end(agent, env, row, outcome, last, self.auto_yes).await;
        }
        unfinished(&id, last, outcome, self.auto_yes, "")
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
