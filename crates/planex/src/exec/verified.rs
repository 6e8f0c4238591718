//! A verified task's start and end (see [`crate::verify`]): before its
//! first attempt, a commit it landed before a crash is found (or a commit
//! kept because the user's work blocked its landing is landed), or a
//! worktree of the run's pool is taken at the tip and checkpointed — the
//! agent never works in the user's tree, where the user may be working;
//! after the retry executor is done, a passed task's measured change is
//! committed there and landed on the current branch (never over the
//! user's uncommitted work: blocked, the commit is kept and the task
//! pauses), and anything else is rolled back in the worktree.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use orchestrator_core::agent::Agent;
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::retry::{MilestoneOutcome, MilestoneState};
use orchestrator_core::vcs::{CherryPick, CommitId, FastForward, Vcs};
use orchestrator_core::worktree::{Lease, PoolError};

use super::VerifyEnv;
use super::results::{LastReport, TaskOutput, completed_task, failed_task, unfinished};
use crate::journal::{PausedTask, TaskResult};
use crate::rows::{RowStatus, TaskRow};
use crate::verify::{
    InFlight, TaskWorktree, Verification, Verified, VerifyingAgent, commit_message, in_flight_path,
};

/// How a verified task starts.
pub(super) enum Start {
    /// Run it through this agent, in this folder.
    Run(Arc<VerifyingAgent>, PathBuf),
    /// It landed before an interruption (or its kept commit landed now):
    /// its result.
    Landed(Box<TaskResult>),
    /// Its kept commit is still blocked by the user's uncommitted work.
    Blocked(Box<PausedTask>),
}

/// Why a task's verified commit did not land.
enum LandError {
    /// The user's uncommitted work is in the way of these paths: nothing
    /// was changed, the commit is kept for the next run.
    Blocked(Vec<String>),
    /// It conflicts or git failed: the task fails with this.
    Failed(String),
}

/// The pause of a task whose verified commit is blocked by the user's
/// uncommitted work (see [`InFlight::landing`]).
fn blocked_pause(row: &TaskRow, commit: &str, paths: &[String]) -> PausedTask {
    PausedTask {
        id: row.id.clone(),
        reason: format!(
            "task {}'s verified commit {} is not landed: your uncommitted changes to {} are in the way (nothing of them was touched); commit, stash or unstage them, then run `orchestrator planex --continue`, which lands the kept commit",
            row.id,
            &commit[..commit.len().min(12)],
            paths.join(", ")
        ),
        report_markdown: String::new(),
        state: MilestoneState::new(&row.id),
    }
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
    if let Some(commit) = env.landed.get(&row.id) {
        return Ok(Start::Landed(Box::new(landed_result(
            row,
            commit.as_str(),
            "landed as commit {} before the run was interrupted",
        ))));
    }
    if let Some(start) = land_kept(env, row, sink).await {
        return Ok(start);
    }
    let record_path = in_flight_path(&env.dir, &row.id);
    // The tip the task's dependencies landed on, read between landings;
    // the worktree is made or moved there outside the landing lock (a new
    // slot's setup may take a while).
    let tip = {
        let mut last = env.lock.lock().await;
        let tip = main.head().await;
        *last = tip.as_ref().ok().cloned();
        tip
    }
    .map_err(|e| format!("the history cannot be read: {e}"))?;
    let lease = env.pool.acquire(&tip).await.map_err(|e| match e {
        PoolError::Setup(e) => format!("the task's worktree could not be set up: {e}"),
        e => e.to_string(),
    })?;
    let worktree = TaskWorktree {
        path: lease.path().to_path_buf(),
        branch: lease.record.branch.clone(),
    };
    // Kept before the agent starts: a crash from here on leaves a record
    // for `--continue`, which removes the worktree.
    if let Err(e) = keep(
        &record_path,
        &InFlight {
            id: row.id.clone(),
            checkpoint: None,
            worktree: Some(worktree.clone()),
            landing: None,
        },
    ) {
        env.pool.release(lease);
        return Err(e);
    }
    let checkpoint = match lease.checkpoint().await {
        Ok(c) => c,
        Err(e) => {
            give_back(env, Some(lease), false).await;
            return Err(format!("the task's tree cannot be checkpointed: {e}"));
        }
    };
    let root = lease.path().to_path_buf();
    let verification = Verification {
        vcs: Arc::clone(&lease.vcs),
        ..(*env.verification).clone()
    };
    let task_env = lease.env.clone();
    Ok(Start::Run(
        Arc::new(VerifyingAgent {
            inner: agent,
            verification: Arc::new(verification),
            sink: Arc::clone(sink),
            row: row.clone(),
            base: tip,
            checkpoint,
            found: Mutex::new(Verified::default()),
            left_clean: AtomicBool::new(false),
            lease: Mutex::new(Some(lease)),
            env: task_env,
        }),
        root,
    ))
}

/// Gives a task's worktree back to the run's pool: clean (committed, or
/// rolled back), it waits for the next task; otherwise it is removed,
/// whatever it holds (it is the engine's). `known_clean`: its whole change
/// was committed, so it is not read again (the next task's move still
/// refuses a tree that is not clean).
async fn give_back(env: &VerifyEnv, lease: Option<Lease>, known_clean: bool) {
    let Some(lease) = lease else {
        return;
    };
    let pool = &env.pool;
    let clean = known_clean || lease.vcs.status().await.is_ok_and(|s| s.is_clean());
    if clean {
        pool.release(lease);
    } else {
        pool.discard(lease).await;
    }
}

/// The completed result of a task whose commit is on the branch.
fn landed_result(row: &TaskRow, commit: &str, findings: &str) -> TaskResult {
    TaskResult {
        id: row.id.clone(),
        status: RowStatus::Completed,
        findings: findings.replace("{}", &commit[..commit.len().min(7)]),
        files_modified: Vec::new(),
        tests_passed: None,
        acceptance_met: String::new(),
        error: String::new(),
        verified: Some(Verified {
            commit: Some(commit.to_owned()),
            ..Verified::default()
        }),
    }
}

/// A verified commit an earlier run kept because the user's work blocked
/// its landing: landed now (the task's result), blocked again (the pause),
/// or gone (the record is dropped and the task runs again: `None`).
async fn land_kept(env: &VerifyEnv, row: &TaskRow, sink: &Arc<dyn EventSink>) -> Option<Start> {
    let path = in_flight_path(&env.dir, &row.id);
    let record = orchestrator_core::state::read_json_if_exists::<InFlight>(&path)
        .ok()
        .flatten()?;
    let commit = record.landing?;
    match land(env, &CommitId(commit.clone()), None).await {
        Ok(landed) => {
            said_landed(sink.as_ref(), &row.id, &landed, row);
            forget(&path, sink);
            Some(Start::Landed(Box::new(landed_result(
                row,
                &landed,
                "its verified commit, kept while your changes were in the way, landed as {}",
            ))))
        }
        Err(LandError::Blocked(paths)) => Some(Start::Blocked(Box::new(blocked_pause(
            row, &commit, &paths,
        )))),
        Err(LandError::Failed(e)) => {
            sink.emit(&Event::Warning {
                message: format!(
                    "task {}'s kept commit {commit} could not be landed ({e}); the task runs again",
                    row.id
                ),
            });
            forget(&path, sink);
            None
        }
    }
}

/// Says a landed task commit like the other flows' commits, for the log
/// and watchers (the dashboard's diffs).
fn said_landed(sink: &dyn EventSink, id: &str, commit: &str, row: &TaskRow) {
    sink.emit(&Event::CommitMade {
        id: id.to_owned(),
        commit: commit.to_owned(),
        summary: commit_message(row)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
    });
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
    give_back(env, lease, agent.left_clean.load(Ordering::Relaxed)).await;
    let record = in_flight_path(&env.dir, &row.id);
    let kept = orchestrator_core::state::read_json_if_exists::<InFlight>(&record)
        .ok()
        .flatten()
        .is_some_and(|r| r.landing.is_some());
    if !kept {
        forget(&record, &agent.sink);
    }
    output
}

/// Lands `commit`, made in the task's worktree on `base` (when known), on
/// the current branch: the new commit's id, or why not. While the branch
/// is still at `base` (nothing landed and the user committed nothing since
/// the task started) it moves there by fast-forward, the commit landing as
/// it is; otherwise it is picked onto the tip.
async fn land(
    env: &VerifyEnv,
    commit: &CommitId,
    base: Option<&CommitId>,
) -> Result<String, LandError> {
    let mut last = env.lock.lock().await;
    let vcs = &env.verification.vcs;
    if let Some(base) = base
        && last.as_ref() == Some(base)
    {
        // The fast-forward reads HEAD itself: `last` is only the hint
        // that saves picking when it is likely to work.
        match vcs.fast_forward(base, commit).await {
            Ok(FastForward::Moved) => {
                *last = Some(commit.clone());
                return Ok(commit.as_str().to_owned());
            }
            Ok(FastForward::Blocked { paths }) => return Err(LandError::Blocked(paths)),
            Ok(FastForward::NotPossible) | Err(_) => {}
        }
    }
    *last = None;
    match vcs.cherry_pick(commit).await {
        Ok(CherryPick::Applied { commit }) => {
            let landed = commit.as_str().to_owned();
            *last = Some(commit);
            Ok(landed)
        }
        Ok(CherryPick::Blocked { paths }) => Err(LandError::Blocked(paths)),
        Ok(CherryPick::Conflict { paths }) => Err(LandError::Failed(format!(
            "the task's change does not land on the current branch: it conflicts in {} with what landed since it started",
            paths.join(", ")
        ))),
        Err(e) => Err(LandError::Failed(format!(
            "the task's change could not be landed: {e}"
        ))),
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
    let found = agent
        .found
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    match outcome {
        MilestoneOutcome::Passed { .. } => settle_passed(agent, env, row, last, found).await,
        unfinished_outcome => {
            let note = rollback(agent).await;
            let mut output = unfinished(&row.id, last, unfinished_outcome, auto_yes, &note);
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

/// Rolls the task's change back to its checkpoint; what that adds to the
/// failure's message (nothing, or that it could not be rolled back).
async fn rollback(agent: &VerifyingAgent) -> String {
    agent
        .verification
        .vcs
        .restore(&agent.checkpoint)
        .await
        .err()
        .map(|e| format!("; its change could not be rolled back: {e}"))
        .unwrap_or_default()
}

/// A task whose attempt passed: its change is measured, committed and
/// landed, and its result lists the files and what verification found
/// (`verified`) — without a test result when nothing was run.
async fn settle_passed(
    agent: &VerifyingAgent,
    env: &VerifyEnv,
    row: &TaskRow,
    last: LastReport,
    mut verified: Verified,
) -> TaskOutput {
    let id = &row.id;
    // The passing attempt's report carries its measured change (see
    // `VerifyingAgent::accept`); it still holds unless a check ran after.
    let measured = last
        .as_ref()
        .filter(|_| verified.check.is_none())
        .map(|(_, files)| files.clone());
    let mut result = completed_task(id, last);
    let changed = match measured {
        Some(changed) => Ok(changed),
        None => {
            agent
                .verification
                .vcs
                .changed_since(&agent.checkpoint)
                .await
        }
    };
    let changed = match changed {
        Ok(c) => c,
        Err(e) => {
            let note = rollback(agent).await;
            return TaskOutput::Done(failed_task(
                id,
                None,
                format!("the task's change cannot be measured: {e}{note}"),
            ));
        }
    };
    if changed.is_empty() {
        agent.left_clean.store(true, Ordering::Relaxed);
    } else {
        match commit_and_land(agent, env, row, &changed).await {
            Ok(commit) => verified.commit = Some(commit),
            Err(output) => return output,
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

/// Commits the task's `changed` files and lands the commit on the branch;
/// the landed commit's id. A failure fails the task; a landing the
/// user's tree blocks keeps the commit for the next run, which lands it
/// without running the task again, and pauses.
async fn commit_and_land(
    agent: &VerifyingAgent,
    env: &VerifyEnv,
    row: &TaskRow,
    changed: &[String],
) -> Result<String, TaskOutput> {
    let id = &row.id;
    let vcs: &dyn Vcs = agent.verification.vcs.as_ref();
    let commit = match vcs.commit(changed, &commit_message(row)).await {
        Ok(commit) => {
            agent.left_clean.store(true, Ordering::Relaxed);
            commit
        }
        Err(e) => {
            let note = rollback(agent).await;
            return Err(TaskOutput::Done(failed_task(
                id,
                None,
                format!("the task's commit failed: {e}{note}"),
            )));
        }
    };
    match land(env, &commit, Some(&agent.base)).await {
        Ok(commit) => {
            said_landed(agent.sink.as_ref(), id, &commit, row);
            Ok(commit)
        }
        Err(LandError::Failed(error)) => Err(TaskOutput::Done(failed_task(id, None, error))),
        Err(LandError::Blocked(paths)) => {
            let kept = InFlight {
                id: id.clone(),
                checkpoint: None,
                worktree: None,
                landing: Some(commit.as_str().to_owned()),
            };
            if let Err(e) = keep(&in_flight_path(&env.dir, id), &kept) {
                return Err(TaskOutput::Done(failed_task(id, None, e)));
            }
            Err(TaskOutput::Paused(blocked_pause(
                row,
                commit.as_str(),
                &paths,
            )))
        }
    }
}
