//! A verified task's start and end (see [`crate::verify`]): before its
//! first attempt, a commit it landed before a crash is found, or the tree
//! it runs in — the working tree, or a worktree of the run's pool when
//! tasks run at once — is checkpointed; after the retry executor is done, a passed
//! task's measured change is committed (and, from a worktree, landed on
//! the current branch) and anything else is rolled back.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use orchestrator_core::agent::Agent;
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::retry::MilestoneOutcome;
use orchestrator_core::vcs::{CherryPick, Vcs};
use orchestrator_core::worktree::{Lease, PoolError};

use super::VerifyEnv;
use super::results::{LastReport, TaskOutput, completed_task, failed_task, unfinished};
use crate::journal::TaskResult;
use crate::rows::{RowStatus, TaskRow};
use crate::verify::{
    InFlight, TaskWorktree, Verification, Verified, VerifyingAgent, commit_message, in_flight_path,
    landed_commit,
};

/// How a verified task starts.
pub(super) enum Start {
    /// Run it through this agent, in this folder.
    Run(Arc<VerifyingAgent>, PathBuf),
    /// It landed before an interruption: its result.
    Landed(Box<TaskResult>),
}

/// Finds the task's commit from an earlier run, or makes and checkpoints
/// the tree it runs in and wraps `agent` for its attempts. `Err`: why the
/// task cannot start.
pub(super) async fn verified_start(
    env: &VerifyEnv,
    row: &TaskRow,
    agent: Arc<dyn Agent>,
    sink: &Arc<dyn EventSink>,
) -> Result<Start, String> {
    let main = &env.verification.vcs;
    match landed_commit(main.as_ref(), &env.base, &row.id).await {
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
    let record_path = in_flight_path(&env.dir, &row.id);
    let (vcs, worktree, lease) = match &env.pool {
        None => (Arc::clone(main), None, None),
        Some(pool) => {
            // The tip the task's dependencies landed on, read between
            // landings; the worktree is made or moved there outside the
            // landing lock (a new slot's setup may take a while).
            let tip = {
                let _landing = env.lock.lock().await;
                main.head().await
            }
            .map_err(|e| format!("the history cannot be read: {e}"))?;
            let lease = pool.acquire(&tip).await.map_err(|e| match e {
                PoolError::Setup(e) => format!("the task's worktree could not be set up: {e}"),
                e => {
                    format!("{e}; run with -c 1 to verify tasks one at a time in the working tree")
                }
            })?;
            let worktree = TaskWorktree {
                path: lease.path().to_path_buf(),
                branch: lease.record.branch.clone(),
            };
            // Kept before the agent starts: a crash from here on leaves a
            // record for `--continue`, which removes the worktree.
            if let Err(e) = keep(
                &record_path,
                &InFlight {
                    id: row.id.clone(),
                    checkpoint: None,
                    worktree: Some(worktree.clone()),
                },
            ) {
                pool.release(lease);
                return Err(e);
            }
            (Arc::clone(&lease.vcs), Some(worktree), Some(lease))
        }
    };
    let checkpoint = match vcs.checkpoint().await {
        Ok(c) => c,
        Err(e) => {
            give_back(env, lease).await;
            return Err(format!("the task's tree cannot be checkpointed: {e}"));
        }
    };
    if worktree.is_none() {
        // Kept before the agent starts, so a crash from here on can be
        // undone.
        keep(
            &record_path,
            &InFlight {
                id: row.id.clone(),
                checkpoint: Some(checkpoint.clone()),
                worktree: None,
            },
        )?;
    }
    let root = vcs.root().to_path_buf();
    let verification = Verification {
        vcs,
        ..(*env.verification).clone()
    };
    let task_env = lease.as_ref().map(|l| l.env.clone()).unwrap_or_default();
    Ok(Start::Run(
        Arc::new(VerifyingAgent {
            inner: agent,
            verification: Arc::new(verification),
            sink: Arc::clone(sink),
            row: row.clone(),
            checkpoint,
            found: Mutex::new(Verified::default()),
            worktree,
            lease: Mutex::new(lease),
            env: task_env,
        }),
        root,
    ))
}

/// Gives a task's worktree back to the run's pool: clean (committed and
/// landed, or rolled back), it waits for the next task; otherwise it is
/// removed, whatever it holds (it is the engine's).
async fn give_back(env: &VerifyEnv, lease: Option<Lease>) {
    let (Some(pool), Some(lease)) = (&env.pool, lease) else {
        return;
    };
    let clean = lease.vcs.status().await.is_ok_and(|s| s.is_clean());
    if clean {
        pool.release(lease);
    } else {
        pool.discard(lease).await;
    }
}

/// Writes the in-flight record.
fn keep(path: &Path, record: &InFlight) -> Result<(), String> {
    orchestrator_core::state::write_json_atomic(path, record)
        .map_err(|e| format!("the task's checkpoint cannot be kept: {e}"))
}

/// Removes the in-flight record; a failure is a warning.
fn forget(path: &Path, sink: &Arc<dyn EventSink>) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        sink.emit(&Event::Warning {
            message: format!("{} could not be removed: {e}", path.display()),
        });
    }
}

/// The task's result: a passed task's measured change committed, anything
/// else rolled back to the checkpoint (a pause too: the resumed attempt
/// starts from there). Its worktree and in-flight record go once that is
/// done: a crash before leaves the record for `--continue`, which finds
/// the commit or rolls back.
pub(super) async fn verified_end(
    agent: &VerifyingAgent,
    env: &VerifyEnv,
    row: &TaskRow,
    outcome: MilestoneOutcome,
    last: LastReport,
    auto_yes: bool,
) -> TaskOutput {
    let output = settle(agent, env, row, outcome, last, auto_yes).await;
    let lease = agent
        .lease
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    give_back(env, lease).await;
    forget(&in_flight_path(&env.dir, &row.id), &agent.sink);
    output
}

/// Lands `commit`, made in the task's worktree, on the current branch.
async fn land(
    env: &VerifyEnv,
    commit: &orchestrator_core::vcs::CommitId,
) -> Result<String, String> {
    let _landing = env.lock.lock().await;
    match env.verification.vcs.cherry_pick(commit).await {
        Ok(CherryPick::Applied { commit }) => Ok(commit.as_str().to_owned()),
        Ok(CherryPick::Conflict { paths }) => Err(format!(
            "the task's change does not land on the current branch: it conflicts in {} with what landed since it started",
            paths.join(", ")
        )),
        Err(e) => Err(format!("the task's change could not be landed: {e}")),
    }
}

/// [`verified_end`] before the worktree and the record go.
async fn settle(
    agent: &VerifyingAgent,
    env: &VerifyEnv,
    row: &TaskRow,
    outcome: MilestoneOutcome,
    last: LastReport,
    auto_yes: bool,
) -> TaskOutput {
    let vcs: &dyn Vcs = agent.verification.vcs.as_ref();
    let id = row.id.clone();
    let rollback = || async {
        vcs.restore(&agent.checkpoint)
            .await
            .err()
            .map(|e| format!("; its change could not be rolled back: {e}"))
            .unwrap_or_default()
    };
    let found = agent
        .found
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
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
                let commit = match vcs.commit(&changed, &commit_message(row)).await {
                    Ok(commit) => commit,
                    Err(e) => {
                        let note = rollback().await;
                        return TaskOutput::Done(failed_task(
                            &id,
                            None,
                            format!("the task's commit failed: {e}{note}"),
                        ));
                    }
                };
                let landed = if agent.worktree.is_some() {
                    land(env, &commit).await
                } else {
                    Ok(commit.as_str().to_owned())
                };
                match landed {
                    Ok(commit) => {
                        // Said like the other flows' commits, for the log
                        // and watchers (the dashboard's diffs).
                        agent.sink.emit(&Event::CommitMade {
                            id: id.clone(),
                            commit: commit.clone(),
                            summary: commit_message(row)
                                .lines()
                                .next()
                                .unwrap_or_default()
                                .to_owned(),
                        });
                        verified.commit = Some(commit);
                    }
                    Err(error) => return TaskOutput::Done(failed_task(&id, None, error)),
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
        unfinished_outcome => {
            let note = rollback().await;
            let mut output = unfinished(&id, last, unfinished_outcome, auto_yes, &note);
            if let TaskOutput::Done(result) = &mut output {
                // Nothing of it stays, whatever the agent reported.
                result.files_modified.clear();
                result.tests_passed = None;
                result.verified = Some(Verified {
                    check: env.verification.check_for(row),
                    attempts: found.attempts,
                    ..Verified::default()
                });
            }
            output
        }
    }
}
