//! A verified task's start and end (see [`crate::verify`]): before its
//! first attempt, a commit it landed before a crash is found, or the
//! working tree is checkpointed; after the retry executor is done, a
//! passed task's measured change is committed and anything else is rolled
//! back to the checkpoint.

use std::sync::{Arc, Mutex, PoisonError};

use orchestrator_core::agent::Agent;
use orchestrator_core::event::EventSink;
use orchestrator_core::retry::MilestoneOutcome;

use super::VerifyEnv;
use super::results::{LastReport, TaskOutput, completed_task, failed_task, failure_text};
use crate::journal::{PausedTask, TaskResult};
use crate::rows::{RowStatus, TaskRow};
use crate::verify::{
    InFlight, Verified, VerifyingAgent, commit_message, in_flight_path, landed_commit,
};

/// How a verified task starts.
pub(super) enum Start {
    /// Run it through this agent.
    Run(Arc<VerifyingAgent>),
    /// It landed before an interruption: its result.
    Landed(Box<TaskResult>),
}

/// Finds the task's commit from an earlier run, or checkpoints the tree
/// and wraps `agent` for its attempts. `Err`: why the task cannot start.
pub(super) async fn verified_start(
    env: &VerifyEnv,
    row: &TaskRow,
    agent: Arc<dyn Agent>,
    sink: &Arc<dyn EventSink>,
) -> Result<Start, String> {
    let vcs = &env.verification.vcs;
    match landed_commit(vcs.as_ref(), &env.base, &row.id).await {
        Ok(Some(commit)) => {
            return Ok(Start::Landed(Box::new(TaskResult {
                id: row.id.clone(),
                status: RowStatus::Completed,
                findings: format!(
                    "landed as commit {} before the run was interrupted",
                    commit.short()
                ),
                files_modified: Vec::new(),
                tests_passed: None,
                acceptance_met: String::new(),
                error: String::new(),
                verified: Some(Verified {
                    commit: Some(commit.as_str().to_owned()),
                    ..Verified::default()
                }),
            })));
        }
        Ok(None) => {}
        Err(e) => return Err(format!("the history cannot be read: {e}")),
    }
    let checkpoint = vcs
        .checkpoint()
        .await
        .map_err(|e| format!("the working tree cannot be checkpointed: {e}"))?;
    // Kept before the agent starts, so a crash from here on can be undone.
    let record = InFlight {
        id: row.id.clone(),
        checkpoint: checkpoint.clone(),
    };
    orchestrator_core::state::write_json_atomic(in_flight_path(&env.dir, &row.id), &record)
        .map_err(|e| format!("the task's checkpoint cannot be kept: {e}"))?;
    Ok(Start::Run(Arc::new(VerifyingAgent {
        inner: agent,
        verification: Arc::clone(&env.verification),
        sink: Arc::clone(sink),
        row: row.clone(),
        checkpoint,
        found: Mutex::new(Verified::default()),
    })))
}

/// The task's result: a passed task's measured change committed, anything
/// else rolled back to the checkpoint (a pause too: the resumed attempt
/// starts from there). Its in-flight record goes once that is done: a
/// crash before leaves it for `--continue`, which finds the commit or
/// rolls back.
pub(super) async fn verified_end(
    agent: &VerifyingAgent,
    env: &VerifyEnv,
    row: &TaskRow,
    outcome: MilestoneOutcome,
    last: LastReport,
    auto_yes: bool,
) -> TaskOutput {
    let output = settle(agent, env, row, outcome, last, auto_yes).await;
    let path = in_flight_path(&env.dir, &row.id);
    if let Err(e) = std::fs::remove_file(&path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        agent.sink.emit(&orchestrator_core::event::Event::Warning {
            message: format!("{} could not be removed: {e}", path.display()),
        });
    }
    output
}

/// [`verified_end`] before the record goes.
async fn settle(
    agent: &VerifyingAgent,
    env: &VerifyEnv,
    row: &TaskRow,
    outcome: MilestoneOutcome,
    last: LastReport,
    auto_yes: bool,
) -> TaskOutput {
    let vcs = &env.verification.vcs;
    let found = agent
        .found
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let id = row.id.clone();
    let rollback = || async {
        vcs.restore(&agent.checkpoint)
            .await
            .err()
            .map(|e| format!("; its change could not be rolled back: {e}"))
            .unwrap_or_default()
    };
    match outcome {
        MilestoneOutcome::Passed { .. } => {
            let mut result = completed_task(&id, last);
            let changed = match vcs.changed_since(&agent.checkpoint).await {
                Ok(c) => c,
                Err(e) => {
                    let note = rollback().await;
                    return TaskOutput::Done(failed_task(
                        &id,
                        None,
                        format!("the task's change cannot be measured: {e}{note}"),
                    ));
                }
            };
            let mut verified = found;
            if !changed.is_empty() {
                match vcs.commit(&changed, &commit_message(row)).await {
                    Ok(commit) => verified.commit = Some(commit.as_str().to_owned()),
                    Err(e) => {
                        let note = rollback().await;
                        return TaskOutput::Done(failed_task(
                            &id,
                            None,
                            format!("the task's commit failed: {e}{note}"),
                        ));
                    }
                }
            }
            result.files_modified = changed;
            if verified.check.is_none() && !env.verification.executor_runs_directives {
                // Nothing was run: the agent's word is not a test result.
                result.tests_passed = None;
            }
            result.verified = Some(verified);
            TaskOutput::Done(result)
        }
        MilestoneOutcome::Failed { reason, history } => {
            let note = rollback().await;
            let mut result = failed_task(
                &id,
                last,
                format!("{}{note}", failure_text(&history, &reason)),
            );
            result.files_modified.clear();
            result.tests_passed = None;
            result.verified = Some(Verified {
                check: env.verification.check_for(row),
                ..Verified::default()
            });
            TaskOutput::Done(result)
        }
        MilestoneOutcome::NeedsHuman {
            reason,
            report_markdown,
            state,
        } => {
            let note = rollback().await;
            if auto_yes {
                let error = format!(
                    "{} (escalated: {reason}){note}",
                    failure_text(&state.history, &reason)
                );
                let mut result = failed_task(&id, last, error);
                result.files_modified.clear();
                result.tests_passed = None;
                TaskOutput::Done(result)
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
