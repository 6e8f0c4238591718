//! # orchestrator-ci-autofix
//!
//! The ci-autofix flow: a required CI check failed; read its log, classify
//! the failure, and follow the cadence matrix — confirm and apply a
//! mechanical patch, apply a trivial one silently from the second iteration,
//! escalate semantic and unknown failures with a diagnosis and no patch, and
//! stop for a human after the last iteration.
//!
//! ## Data flow
//!
//! ```text
//! watcher handoff (handoff::Handoff) ─┐       CiProvider (gh CLI / local checks,
//!                                     ├──────  over a core CommandRunner;
//!                                     │        a Forge's MR pipeline)
//! provider::watch ────────────────────┘           │ PR head, latest attempt per
//!                                                 │ check, failed jobs' logs
//!   pr_head: where the fix goes (in place, a worktree at the PR head, or
//!   refused before any agent call); fix_loop::rerun: re-run once at the
//!   same commit (flaky / infrastructure)
//!                                                 ▼
//!            classify::classify_many ── most severe class wins, with evidence
//!                                                 ▼
//!            core cadence::decide (iteration × class × previous class)
//!                                                 ▼
//!   fix_loop::run_autofix: Gate confirm / silent apply / escalate (report);
//!      a confirmation nobody can answer now stops the run at its gate: the
//!      patch's commit kept on an engine branch, the gate in the state file
//!      (confirm: `approve`/`decline` from outside; the next run lands it)
//!      patch = the agent's write-set since a Vcs checkpoint, or the unified
//!      diff of its answer (patch::apply: strict, all-or-nothing), protected
//!      paths refused; always made and committed in a temporary git
//!      worktree at HEAD (fix_tree), landed by cherry-pick, refused naming
//!      the paths when the user's uncommitted work is in the way; the PR
//!      diff (capped) goes into the instruction; commit `fix(ci): auto-fix
//!      <class> failure (iter N)`, push (never forced), wait for the
//!      checks, next iteration
//!                                                 ▼
//!   state::StateFile (.moai/state/ci-autofix-<PR>.json, locked, atomic)
//!   report (append-only audit log, escalation report)
//! ```
//!
//! ## Public API
//!
//! - Running: [`run_autofix`] with an [`AutofixContext`] (agent, VCS, gate,
//!   [`CiProvider`], sink) and an [`AutofixConfig`] (`#[non_exhaustive]`:
//!   [`AutofixConfig::new`] and its `with_…` setters), ending in an
//!   [`AutofixOutcome`] or an [`AutofixError`]; what the run saved to its
//!   state folder's `trash/` before reverting it is said on stderr and in
//!   the audit log.
//! - Choosing what to fix: [`plan_run`] ([`RunPlan`], [`RunSource`]), the
//!   watcher [`Handoff`], [`watch`].
//! - The CI: [`GithubProvider`] and [`LocalProvider`] over a core
//!   `CommandRunner`; [`ForgeProvider`] over a core `Forge` (GitLab merge
//!   requests' pipelines, through `orchestrator-adapters`' `GitlabForge`).
//! - The parts, usable alone: [`classify`](mod@classify) (log → class with evidence),
//!   [`patch`] (unified diffs: extract, parse, apply strictly),
//!   [`state`] and [`report`] (the files under `.moai/`).
//! - Confirmation gates outside a run: [`confirm::waiting`],
//!   [`confirm::answer`] ([`GateDecision`], [`AnsweredBy`]).
//!
//! ## Invariants
//! - No process is spawned here: `gh` and check commands go through
//!   `orchestrator_core::command::CommandRunner`.
//! - Semantic and unknown failures are never patched; iteration 1 always asks.
//! - With `allow_dirty`, the agent never runs in the user's tree, and a file
//!   that was dirty or untracked there is never written or committed.
//! - No code path can force-push or amend (a test scans the sources);
//!   pushes are fast-forwards of the PR's own branch, and never carry
//!   local commits the PR head does not have.
//! - Infrastructure and flaky failures are never patched; logs are quoted
//!   to the agent as untrusted data and change none of its grants.
pub mod classify;
pub mod confirm;
mod context;
pub mod fix_loop;
mod fix_tree;
pub mod handoff;
pub mod patch;
pub mod plan;
mod pr_head;
pub mod provider;
pub mod report;
pub mod state;
mod trash;

pub use classify::{ClassificationReport, Evidence, classify, classify_many};
pub use fix_loop::{AutofixConfig, AutofixContext, AutofixError, AutofixOutcome};
pub use handoff::{FailedCheck, Handoff, HandoffError, HandoffFileError};
pub use patch::{Patch, PatchError};
pub use plan::{PlanError, Polling, RunPlan, RunSource, plan_run};
pub use provider::{
    CheckCounts, CheckLog, CheckRun, CiProvider, ForgeProvider, GithubConfig, GithubProvider,
    LocalConfig, LocalProvider, PrHead, ProviderError, RerunOutcome, WatchOutcome, watch,
};
pub use state::{AnsweredBy, ConfirmGate, GateAnswer, GateDecision, Target};
pub use trash::run_autofix;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
