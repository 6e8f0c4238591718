//! Execution: stages in order, groups in worktrees or the main tree, one
//! verified commit per finding, landing by cherry-pick.
//!
//! Per finding: analyse → apply the fix (agent) → run the tests → on failure
//! restore exactly the fix's write-set and try again with the failure output,
//! up to `max_iterations` attempts → on success commit exactly the write-set
//! as `fix({dimension}): {title} [{id}]`. The attempts go through the core
//! retry executor ([`run_milestone`]): each attempt is one milestone attempt
//! whose failure text (agent error or test output) is fed into the next
//! attempt's prompt. The group's `fix-progress-N.json` is rewritten at every
//! step.
//!
//! Verification: with `--verify each` (or serial isolation) [`verify_fix`]
//! tests each fix in its tree, re-running a failure on the identical tree up
//! to `flaky_reruns` times, and [`land_stage`] cherry-picks a parallel
//! stage's commits. With `batch`/`auto` a worktree tree has `defer` set: a
//! fix still has to apply and its write-set is still checked, but it is
//! committed untested, and `crate::landing` verifies the stage's commits
//! at landing; `crate::stages`, above both, decides which a stage gets.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, Role};
use orchestrator_core::edit::{AppliedEdit, EditHistory};
use orchestrator_core::event::{Event, EventSink, JobStatus};
use orchestrator_core::finding::{Finding, digest_hex};
use orchestrator_core::gate::{Answer, Gate, GateError, Question};
use orchestrator_core::retry::{
    ESCALATION_QUESTION_ID, Milestone, MilestoneOutcome, RetryPolicy, run_milestone,
};
use orchestrator_core::state::{read_json_if_exists, write_json_atomic};
use orchestrator_core::test_runner::{Baseline, TestReport, TestRequest, TestRunner};
use orchestrator_core::text::counted;
use orchestrator_core::vcs::{Checkpoint, CherryPick, CommitId, Vcs, VcsError};
use orchestrator_core::worktree::{Lease, PoolError, PoolJournal, SlotRecord};

use crate::files::{
    ActiveSession, CurrentFinding, FixPlan, FixProgress, FixResult, FlowControl, FlowStep,
    InFlight, KnownFailure, PlanGroup, ProgressError, ProgressFinding, ProgressStatus,
    ProgressSummary, ProgressVerification, VerificationStats, WorktreeRecord, now,
};
use crate::session::SessionPaths;
use crate::sync::lock;
use crate::{ReviewFixConfig, TestRunnerFactory, TreeEnv};
use orchestrator_core::verify::VerifyMode;

mod baseline;
mod commit;
mod finding;
mod groups;
mod progress;
mod recover;
mod seed;
mod step;
mod testing;
mod unattemptable;

pub(crate) use baseline::*;
pub(crate) use finding::*;
pub(crate) use groups::*;
pub(crate) use progress::*;
pub(crate) use recover::*;
pub(crate) use testing::*;
pub(crate) use unattemptable::*;

/// The commit message of a finding's fix.
pub fn commit_message(f: &Finding) -> String {
    let title: String = f.title.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("fix({}): {} [{}]", f.dimension_or_general(), title, f.id)
}

/// Everything the groups of a session share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: ReviewFixConfig,
    pub agent: Arc<dyn Agent>,
    pub vcs: Arc<dyn Vcs>,
    pub tests: Arc<dyn TestRunnerFactory>,
    pub sink: Arc<dyn EventSink>,
    pub paths: SessionPaths,
    pub plan: FixPlan,
    pub findings: HashMap<String, Finding>,
    pub active: Arc<Mutex<ActiveSession>>,
    /// The run's worktrees: one per slot, provisioned once, reused by the
    /// stages' groups and the trial trees of batch verification.
    pub pool: orchestrator_core::worktree::WorktreePool,
    pub test_runs: AtomicU32,
    pub cargo: bool,
    /// Fixes are committed untested in worktrees and verified at landing
    /// (`batch`/`auto` with worktree isolation).
    pub batch: bool,
    /// Re-runs, each-equivalent runs and flaky failures so far.
    pub stats: Mutex<VerificationStats>,
    /// Digests of untested fixes committed in worktrees, by finding.
    pub digests: Mutex<HashMap<String, String>>,
    /// Fixes decided by batch verification: (dropped, landed).
    pub decided: Mutex<(u32, u32)>,
    /// Which edits produced which file content (`edit-history.json`).
    pub ledger: crate::ledger::Ledger,
    /// Why the run stopped starting work (a run limit of the agent, or
    /// the user's uncommitted work in the way of a landing), once it has.
    pub halted: Mutex<Option<Halt>>,
    /// The tests failing at the base, which no fix is blamed for (see
    /// [`establish`]).
    pub baseline: Mutex<Baseline>,
    /// The base whose test run was put off until a run fails (see
    /// [`establish`]); taken by the first failing run, which measures it.
    pub base_pending: tokio::sync::Mutex<Option<CommitId>>,
}

/// The agent whose every fix applies a linter's machine-applicable
/// suggestion.
const SUGGESTION_AGENT: &str = "builtin-suggestion";

impl Shared {
    /// Whether every fix of the run applies a linter's exact suggestion
    /// (the builtin agent): cheap to make again, and rarely wrong.
    pub(crate) fn applies_exact_suggestions(&self) -> bool {
        self.agent.name() == SUGGESTION_AGENT
    }

    /// The commits a group's worktree made since `base`, oldest first, each
    /// with the finding its message names (`None` for a commit that names
    /// none). A log that cannot be read is warned about and gives none.
    pub(crate) async fn worktree_commits(
        &self,
        group: &PlanGroup,
        wt: &dyn Vcs,
        base: &CommitId,
    ) -> Vec<(orchestrator_core::vcs::CommitInfo, Option<String>)> {
        let by_message: HashMap<String, String> = group
            .findings
            .iter()
            .filter_map(|id| self.findings.get(id))
            .map(|f| (commit_message(f), f.id.to_string()))
            .collect();
        match wt.log_since(base).await {
            Ok(commits) => commits
                .into_iter()
                .map(|c| {
                    let fid = by_message.get(c.message.trim()).cloned();
                    (c, fid)
                })
                .collect(),
            Err(e) => {
                self.warn(format!("failed to list {}'s commits: {e}", group.group_id));
                Vec::new()
            }
        }
    }

    /// Stops the run from starting new work: the first reason stays.
    pub(crate) fn halt(&self, reason: &str) {
        let mut halted = lock(&self.halted);
        if halted.is_none() {
            *halted = Some(Halt::Limit(reason.to_owned()));
            self.sink.emit(&Event::Warning {
                message: format!(
                    "the run's limit is reached ({reason}): no further fix starts; the run stops resumably (--resume)"
                ),
            });
        }
    }

    /// Stops the run from starting new work because the user must act
    /// first (their uncommitted work is in the way of a landing): the first
    /// reason stays, and the run ends needing a human, resumably.
    pub(crate) fn halt_for_human(&self, reason: String) {
        let mut halted = lock(&self.halted);
        if halted.is_none() {
            self.sink.emit(&Event::Escalated {
                id: None,
                reason: reason.clone(),
            });
            *halted = Some(Halt::Human(reason));
        }
    }

    /// Why the run stopped starting work, once it has.
    pub(crate) fn halted(&self) -> Option<String> {
        lock(&self.halted).as_ref().map(|h| match h {
            Halt::Limit(r) | Halt::Human(r) => r.clone(),
        })
    }

    /// How the run ends when it stopped starting work.
    pub(crate) fn halt_outcome(&self) -> Option<crate::Outcome> {
        lock(&self.halted).as_ref().map(|h| match h {
            Halt::Limit(reason) => crate::Outcome::LimitReached {
                reason: reason.clone(),
            },
            Halt::Human(reason) => crate::Outcome::NeedsHuman {
                reason: reason.clone(),
            },
        })
    }

    pub(crate) fn warn(&self, message: String) {
        self.sink.emit(&Event::Warning { message });
    }

    /// Changes the active-session file and writes it.
    pub(crate) fn update_active(&self, f: impl FnOnce(&mut ActiveSession)) {
        let result = {
            let mut active = lock(&self.active);
            f(&mut active);
            active.last_update = now();
            write_json_atomic(self.paths.active(), &*active)
        };
        if let Err(e) = result {
            self.warn(format!("failed to write the active-session file: {e}"));
        }
    }

    /// Drops the in-flight records `gone` matches; the session file is
    /// rewritten only when there was one.
    pub(crate) fn forget_in_flight(&self, gone: impl Fn(&InFlight) -> bool) {
        let any = lock(&self.active).in_flight.iter().any(&gone);
        if any {
            self.update_active(|a| a.in_flight.retain(|f| !gone(f)));
        }
    }

    /// Test runs made so far in this process.
    pub(crate) fn test_runs(&self) -> u32 {
        self.test_runs.load(Ordering::SeqCst)
    }

    /// Fixes decided by batch verification so far: (dropped, landed).
    pub(crate) fn decided(&self) -> (u32, u32) {
        *lock(&self.decided)
    }

    pub(crate) fn add_decided(&self, dropped: u32, landed: u32) {
        let mut g = lock(&self.decided);
        g.0 += dropped;
        g.1 += landed;
    }

    /// The digest of an untested fix committed in a worktree.
    pub(crate) fn digest_of(&self, finding: &str) -> Option<String> {
        lock(&self.digests).get(finding).cloned()
    }

    pub(crate) fn with_stats<R>(&self, f: impl FnOnce(&mut VerificationStats) -> R) -> R {
        f(&mut lock(&self.stats))
    }

    fn dirty_before(&self) -> BTreeSet<String> {
        lock(&self.active).dirty_before.iter().cloned().collect()
    }
}

/// Why a run stopped starting work.
#[derive(Debug, Clone)]
pub(crate) enum Halt {
    /// A run limit of the agent was reached.
    Limit(String),
    /// The user must act first.
    Human(String),
}

/// A working tree a group runs in.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    pub vcs: Arc<dyn Vcs>,
    pub env: TreeEnv,
    /// Commit fixes without testing them (batch verification tests them at
    /// landing).
    pub defer: bool,
    /// Land each verified fix on the checked-out branch as soon as it is
    /// committed here (a group that runs alone, on the branch's tip): a
    /// kill then loses no verified fix, as in the working tree.
    pub land_each: bool,
}

pub(crate) fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}
