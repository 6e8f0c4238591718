//! Verify, don't trust: what a task changed is measured, held to its
//! scope, checked by the engine, and landed as the task's own commit.
//!
//! With a [`Verification`] ([`Planex::with_verification`](crate::Planex::with_verification)),
//! each task runs from a [`Checkpoint`] of the working tree, and every
//! attempt of its agent goes through the engine's verifying wrapper:
//!
//! 1. the agent answers; a failure or a `failed` report rolls the tree back
//!    to the checkpoint (the retry executor then decides what follows);
//! 2. the **measured** change is what the tree shows changed since the
//!    checkpoint (created and deleted files included) — not the agent's
//!    `files_modified`, which is kept as its claim;
//! 3. a change outside the task's `scope` globs fails the attempt with the
//!    paths named and is rolled back ([`ScopeMode::Enforce`]; with
//!    [`ScopeMode::Warn`] it is a warning); an empty scope allows any path;
//! 4. an agent-executed task that changed nothing fails with "no change";
//! 5. the engine runs the task's verification itself — its
//!    `execution_directives`, else the project's test command — and
//!    `tests_passed` is that run's result; a failing run fails the attempt
//!    with its output (which the retry executor passes to the next
//!    attempt) and rolls the change back.
//!
//! A task that passes lands as one commit, `feat(planex): <title> [<id>]`
//! with a `Planex-Task: <id>` trailer, of exactly the measured
//! paths; a task that fails or pauses leaves the tree at its checkpoint.
//! Before a task runs, a commit with its trailer since the run's start
//! means it landed before a crash: it is recorded as completed, never run
//! or committed twice. A task's worktree is named in the session folder
//! while it runs ([`InFlight`]): `--continue` after a crash removes it.
//!
//! Every task runs in a git worktree outside the repository, never in the
//! user's working tree, where the user may be working (an edit made there
//! while an agent worked could not be told from the agent's): a slot of
//! the run's [`WorktreePool`](orchestrator_core::worktree::WorktreePool),
//! made and provisioned (ignored dependency folders, setup commands) once
//! and moved to each new task's tip, so with `-c 1` one worktree serves
//! every task and its build folders stay warm. Tasks whose scopes overlap
//! never run at once. A passed task is committed there and landed on the
//! current branch by cherry-pick, one landing at a time, so commits land
//! in dependency order; a landing that conflicts fails the task with the
//! paths named; a landing the user's uncommitted work is in the way of
//! changes nothing — the commit is kept in the task's record and the task
//! pauses (exit 3) until the user commits, stashes or unstages, and
//! `--continue` lands it without running the task again. The worktree goes
//! back to the pool either
//! way. A task is verified on the tip it started from: peers
//! independent of it may land in between. The shell agent runs the
//! directives itself ([`Verification::with_executor_runs_directives`]):
//! they are its verification, run once, and a task of it that changes
//! nothing passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse};
use orchestrator_core::command::{CommandRunner, CommandSpec};
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::vcs::{Checkpoint, CommitId, Vcs, VcsError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::protocol::{list_field, status_field};
use crate::rows::{RowStatus, TaskRow};

/// How much of a failing verification's output the error keeps.
const CHECK_OUTPUT_MAX: usize = 2000;

/// What a change outside a task's scope does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeMode {
    /// The attempt fails with the paths named, and the change is rolled back.
    #[default]
    Enforce,
    /// A warning names the paths; the task goes on (`--scope-mode warn`).
    Warn,
}

/// The services and settings of verified execution.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Verification {
    /// The repository's working tree.
    pub vcs: Arc<dyn Vcs>,
    /// Runs the verification commands.
    pub runner: Arc<dyn CommandRunner>,
    /// The project's test command, run for a task without
    /// `execution_directives` (none: such a task is not tested, and its
    /// `tests_passed` stays empty).
    pub test_command: Option<String>,
    /// What a change outside a task's scope does.
    pub scope_mode: ScopeMode,
    /// Whether the executor runs the task's directives itself (the shell
    /// agent): then they are not run again, and a task that changes nothing
    /// passes.
    pub executor_runs_directives: bool,
    /// Time limit of one verification run.
    pub check_time_limit: Duration,
    /// Accept a dirty working tree (`--allow-dirty`): every task then runs
    /// in a worktree of its own made at HEAD, without the user's
    /// uncommitted changes, which are never committed, restored or
    /// overwritten; a task whose commit would change one of those files
    /// does not land and fails with it named.
    pub allow_dirty: bool,
    /// Gives each task worktree what the project needs (ignored
    /// dependency folders, setup commands) before the agent runs in it.
    pub provisioner: Option<Arc<dyn orchestrator_core::worktree::Provisioner>>,
}

impl Verification {
    /// Verification over `vcs`, commands through `runner`: scopes enforced,
    /// no project test command, 10 minutes per verification run.
    pub fn new(vcs: Arc<dyn Vcs>, runner: Arc<dyn CommandRunner>) -> Self {
        Self {
            vcs,
            runner,
            test_command: None,
            scope_mode: ScopeMode::Enforce,
            executor_runs_directives: false,
            check_time_limit: Duration::from_secs(600),
            allow_dirty: false,
            provisioner: None,
        }
    }

    /// Sets [`Verification::provisioner`].
    pub fn with_provisioner(
        mut self,
        provisioner: Option<Arc<dyn orchestrator_core::worktree::Provisioner>>,
    ) -> Self {
        self.provisioner = provisioner;
        self
    }

    /// Sets [`Verification::allow_dirty`].
    pub fn with_allow_dirty(mut self, allow: bool) -> Self {
        self.allow_dirty = allow;
        self
    }

    /// Sets [`Verification::test_command`].
    pub fn with_test_command(mut self, command: Option<String>) -> Self {
        self.test_command = command.filter(|c| !c.trim().is_empty());
        self
    }

    /// Sets [`Verification::scope_mode`].
    pub fn with_scope_mode(mut self, mode: ScopeMode) -> Self {
        self.scope_mode = mode;
        self
    }

    /// Sets [`Verification::executor_runs_directives`].
    pub fn with_executor_runs_directives(mut self, yes: bool) -> Self {
        self.executor_runs_directives = yes;
        self
    }

    /// Sets [`Verification::check_time_limit`].
    pub fn with_check_time_limit(mut self, limit: Duration) -> Self {
        self.check_time_limit = limit;
        self
    }

    /// The command that verifies `row`, if any: its directives, else the
    /// project's test command; none when the executor runs the directives.
    pub fn check_for(&self, row: &TaskRow) -> Option<String> {
        if self.executor_runs_directives {
            return None;
        }
        let directives = row.execution_directives.trim();
        if directives.is_empty() {
            self.test_command.clone()
        } else {
            Some(directives.to_owned())
        }
    }
}

/// What verification found for one task, journaled with its result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verified {
    /// The task's commit, when it landed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The files the agent said it modified, when that differs from the
    /// measured change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claimed_files: Vec<String>,
    /// The verification command run by the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// Paths changed outside the task's scope (kept with [`ScopeMode::Warn`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_scope: Vec<String>,
    /// The attempts its agent made in this run.
    #[serde(default)]
    pub attempts: u32,
}

/// The commit message of a task: `feat(planex): <title> [<id>]` and the
/// `Planex-Task: <id>` trailer that finds it again after a crash. It holds
/// nothing of the session or the time, so the same plan gives the same
/// commits.
pub fn commit_message(row: &TaskRow) -> String {
    let title = row.title.lines().next().unwrap_or_default().trim();
    format!("feat(planex): {title} [{}]\n\n{}", row.id, trailer(&row.id))
}

/// The trailer line of a task's commit.
fn trailer(id: &str) -> String {
    format!("{TRAILER_KEY}{id}")
}

/// The trailer's key, with its separator.
const TRAILER_KEY: &str = "Planex-Task: ";

/// The commit since `base` (HEAD when the session's first verified run
/// started, so every commit after it was made in the session's lifetime)
/// that landed task `id`, if one did.
pub(crate) async fn landed_commit(
    vcs: &dyn Vcs,
    base: &CommitId,
    id: &str,
) -> Result<Option<CommitId>, VcsError> {
    Ok(landed_commits(vcs, base).await?.remove(id))
}

/// Every task that landed since `base`, with the first commit that landed
/// it (by its `Planex-Task` trailer): one read of the history, so a run
/// looks its tasks up instead of reading the history once per task.
pub(crate) async fn landed_commits(
    vcs: &dyn Vcs,
    base: &CommitId,
) -> Result<HashMap<String, CommitId>, VcsError> {
    let mut landed = HashMap::new();
    for c in vcs.log_since(base).await? {
        for line in c.message.lines() {
            if let Some(id) = line.trim().strip_prefix(TRAILER_KEY) {
                landed.entry(id.to_owned()).or_insert_with(|| c.id.clone());
            }
        }
    }
    Ok(landed)
}

/// A verified task in flight: the checkpoint its change is measured from,
/// written (atomically) to the session folder before its agent starts and
/// removed once its result is known, so that a run killed in between can
/// roll the half-done change back (or find its commit) on `--continue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    /// The task.
    pub id: String,
    /// The working tree before it started, when it runs there (one task at
    /// a time); `--continue` restores it unless the task landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// Its own worktree, when tasks run at once; `--continue` removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<TaskWorktree>,
    /// The task's verified commit, kept when landing it was blocked by the
    /// user's uncommitted work: the next run lands it (or is blocked again)
    /// instead of running the task again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landing: Option<String>,
}

/// Where a task runs when verified tasks run at once: a git worktree
/// outside the repository, on a scratch branch, made at the tip its
/// dependencies landed on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskWorktree {
    /// The worktree's folder.
    pub path: std::path::PathBuf,
    /// Its branch (`planex/<session>/<task>`).
    pub branch: String,
}

/// The in-flight record of task `id` in the session folder `dir`.
pub fn in_flight_path(dir: &std::path::Path, id: &str) -> std::path::PathBuf {
    dir.join(format!("{IN_FLIGHT_PREFIX}{id}.json"))
}

/// The file-name prefix of in-flight records.
pub const IN_FLIGHT_PREFIX: &str = "verify-inflight-";

/// The agent of one verified task: the executor's answer measured, held to
/// the scope and checked, attempt by attempt (see the module docs).
#[derive(Debug)]
pub(crate) struct VerifyingAgent {
    pub(crate) inner: Arc<dyn Agent>,
    pub(crate) verification: Arc<Verification>,
    pub(crate) sink: Arc<dyn EventSink>,
    pub(crate) row: TaskRow,
    /// The branch tip the task's worktree started from.
    pub(crate) base: orchestrator_core::vcs::CommitId,
    pub(crate) checkpoint: Checkpoint,
    /// What the last passing attempt found.
    pub(crate) found: Mutex<Verified>,
    /// Set once the task's whole measured change is committed (or it had
    /// none): its worktree then holds nothing and goes back to the pool
    /// without a status read.
    pub(crate) left_clean: std::sync::atomic::AtomicBool,
    /// The pool's lease on the task's worktree (its `verification.vcs` is
    /// that worktree's), given back when the task ends.
    pub(crate) lease: Mutex<Option<orchestrator_core::worktree::Lease>>,
    /// Environment for the checks run in the task's tree (the worktree's).
    pub(crate) env: std::collections::BTreeMap<String, String>,
}

impl VerifyingAgent {
    /// Rolls the tree back to the task's checkpoint; a failure is an agent
    /// failure naming it (the user's dirty files are never touched: the
    /// restore refuses instead).
    async fn rollback(&self) -> Result<(), AgentError> {
        self.verification
            .vcs
            .restore(&self.checkpoint)
            .await
            .map(drop)
            .map_err(|e| AgentError::Failed {
                message: format!("the task's change could not be rolled back: {e}"),
                exit_code: None,
            })
    }

    /// Fails the attempt with `message`, the change rolled back.
    async fn reject(&self, message: String) -> Result<AgentResponse, AgentError> {
        self.rollback().await?;
        Err(AgentError::Failed {
            message,
            exit_code: None,
        })
    }

    /// The paths of `changed` outside the row's scope (none when it has no
    /// scope).
    fn outside_scope(&self, changed: &[String]) -> Vec<String> {
        let globs = self.row.scope_globs();
        if globs.is_empty() {
            return Vec::new();
        }
        // Exact glob semantics: unsure means outside (the scheduler's own
        // overlap test errs the other way, as scheduling should).
        let scope = crate::scope_match::ScopeMatcher::new(&globs);
        changed
            .iter()
            .filter(|p| !scope.matches(p))
            .cloned()
            .collect()
    }

    /// Runs `line` in the tree; `Err` with its output when it fails.
    async fn check(&self, line: &str) -> Result<(), String> {
        let root = self.verification.vcs.root().to_path_buf();
        let mut spec =
            CommandSpec::shell(line, root).with_time_limit(self.verification.check_time_limit);
        spec.env = self.env.clone();
        let output = match self.verification.runner.run(spec).await {
            Ok(o) => o,
            Err(e) => return Err(format!("verification `{line}` could not run: {e}")),
        };
        if output.success() && !output.timed_out {
            return Ok(());
        }
        let status = if output.timed_out {
            format!(
                "timed out after {:.0}s",
                self.verification.check_time_limit.as_secs_f64()
            )
        } else {
            output.exit_code.map_or_else(
                || "was killed by a signal".to_owned(),
                |c| format!("exited with status {c}"),
            )
        };
        let tail = crate::shell::tail_chars(&output.combined(), CHECK_OUTPUT_MAX);
        let mut message = format!(
            "verification by the engine failed: `{line}` {status} (the agent's report is not taken for it)"
        );
        if !tail.is_empty() {
            message.push_str(":\n");
            message.push_str(&tail);
        }
        Err(message)
    }
}

#[async_trait]
impl Agent for VerifyingAgent {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn changes_files(&self) -> bool {
        self.inner.changes_files()
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let attempt = {
            let mut found = self.found.lock().unwrap_or_else(PoisonError::into_inner);
            found.attempts += 1;
            found.attempts
        };
        let vcs = &self.verification.vcs;
        // Each attempt starts from the task's checkpoint. The first starts
        // right after it was taken (nothing ran in the task's worktree
        // since), so only a later one can find anything to roll back.
        if attempt > 1
            && !vcs
                .changed_since(&self.checkpoint)
                .await
                .map_err(failed)?
                .is_empty()
        {
            self.rollback().await?;
        }
        let response = match self.inner.run(request).await {
            Ok(r) => r,
            Err(e) => {
                self.rollback().await?;
                return Err(e);
            }
        };
        let report = response.structured.as_ref().unwrap_or(&Value::Null);
        if status_field(report) != RowStatus::Completed {
            // The agent's own failure: the report turns it into a failed
            // attempt.
            self.rollback().await?;
            return Ok(response);
        }
        let judged = match self.judge().await? {
            Ok(judged) => judged,
            Err(message) => return self.reject(message).await,
        };
        Ok(self.accept(response, judged))
    }
}

/// What verification found in an attempt the agent reported completed.
struct Judged {
    /// The files changed since the checkpoint.
    measured: Vec<String>,
    /// Those outside the task's scope (kept, with a warning, in `warn`
    /// mode).
    outside: Vec<String>,
    /// The check the engine ran, when it ran one.
    check: Option<String>,
}

impl VerifyingAgent {
    /// Judges the change of an attempt the agent reported completed: it is
    /// measured (a change to files the user had uncommitted changes in is
    /// an error, and nothing is rolled back), must stay inside the task's
    /// scope (`enforce`; `warn` says so), must not be empty, and must pass
    /// the task's check. The inner `Err` is why the attempt is rejected.
    async fn judge(&self) -> Result<Result<Judged, String>, AgentError> {
        let measured = match self.verification.vcs.changed_since(&self.checkpoint).await {
            Ok(m) => m,
            Err(VcsError::TouchedDirty { paths }) => {
                // The user's own uncommitted work: never restored or
                // overwritten, so nothing is rolled back.
                return Err(AgentError::Failed {
                    message: format!(
                        "the task changed files that had uncommitted changes before the run ({}); they are left as they are",
                        paths.join(", ")
                    ),
                    exit_code: None,
                });
            }
            Err(e) => return Ok(Err(format!("the task's change cannot be measured: {e}"))),
        };
        let outside = self.outside_scope(&measured);
        if !outside.is_empty() {
            let paths = outside.join(", ");
            match self.verification.scope_mode {
                ScopeMode::Enforce => {
                    return Ok(Err(format!(
                        "the task changed files outside its scope `{}`: {paths}; its change was rolled back",
                        self.row.scope
                    )));
                }
                ScopeMode::Warn => self.sink.emit(&Event::Warning {
                    message: format!(
                        "task {} changed files outside its scope `{}`: {paths}",
                        self.row.id, self.row.scope
                    ),
                }),
            }
        }
        if measured.is_empty() && !self.verification.executor_runs_directives {
            return Ok(Err(
                "no change: the agent reported the task completed, but no file changed".to_owned(),
            ));
        }
        let check = self.verification.check_for(&self.row);
        if let Some(line) = &check
            && let Err(message) = self.check(line).await
        {
            return Ok(Err(message));
        }
        Ok(Ok(Judged {
            measured,
            outside,
            check,
        }))
    }

    /// The verified attempt's response: its report lists the measured
    /// files (and, when the engine's run or the shell agent's directives
    /// passed, `tests_passed`), and what was found is kept for the task's
    /// result.
    fn accept(&self, mut response: AgentResponse, judged: Judged) -> AgentResponse {
        let Judged {
            measured,
            outside,
            check,
        } = judged;
        let mut report = response.structured.clone().unwrap_or(Value::Null);
        let claimed = list_field(report.get("files_modified"));
        if let Some(map) = report.as_object_mut() {
            map.insert("files_modified".into(), json!(measured));
            if check.is_some() || self.verification.executor_runs_directives {
                // The engine's run (or the shell agent's directives) passed.
                // Untested, the report keeps its schema-valid claim here and
                // the task's result records no test (see `verified_end`).
                map.insert("tests_passed".into(), Value::Bool(true));
            }
        }
        let mut claimed_sorted = claimed.clone();
        claimed_sorted.sort();
        let mut found = self.found.lock().unwrap_or_else(PoisonError::into_inner);
        *found = Verified {
            commit: None,
            claimed_files: if claimed_sorted == measured {
                Vec::new()
            } else {
                claimed
            },
            check,
            outside_scope: outside,
            attempts: found.attempts,
        };
        drop(found);
        response.structured = Some(report);
        response.files_changed = measured;
        response
    }
}

fn failed(e: VcsError) -> AgentError {
    AgentError::Failed {
        message: format!("the working tree cannot be read: {e}"),
        exit_code: None,
    }
}
