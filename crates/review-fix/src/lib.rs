//! # orchestrator-review-fix
//!
//! The review-fix flow: findings → batches → parallel plans → verified fix
//! commits, with isolation, rollback and resume. It follows the review-cycle
//! fix phases (discovery and batching, parallel planning, stage execution,
//! completion) and keeps their session files.
//!
//! ## Data flow
//!
//! ```text
//!  --fix inputs ──► input::load_inputs (format by content, confined to the
//!                   repository, de-duplicated, ids with repository-relative
//!                   paths, in each tool's fix order)     ── findings.json
//!        │
//!        ▼
//!  core batching (the builtin agent: plan::batches_in_fix_order, per file
//!  in fix order) ──► plan::plan_batches (≤ max_parallel agents, validated,
//!                    one retry, deterministic fallback)  ── partial-plan-N.json
//!        │
//!        ▼
//!  plan::aggregate (G1..Gn, shared stages, no shared files) ── fix-plan.json
//!        │
//!        ▼
//!  stages::run_stages: per stage, groups in worktrees (parallel) or the main
//!  tree (serial); per finding analyse → fix → tests → restore/retry → commit;
//!  worktree commits landed by cherry-pick        ── fix-progress-N.json
//!    --verify batch|auto: fixes committed untested in worktrees, then
//!    landing::land_batch tests "landed + next k" trial trees with the core
//!    Verifier; passing commits land, a dropped fix goes back to the agent
//!                                                  ── verify-state.json
//!        │
//!        ▼
//!  completion ──► fix-summary.md, fix-history.json, active-fix-session.json removed,
//!                 each finding's outcome in the findings ledger (.review/ledger.json,
//!                 read at discovery to leave out what is done with)
//! ```
//!
//! Before discovery, [`run`] (and [`relint::run_with_relint`]) claims the
//! repository's folders in the engine's cache (worktrees, the slots' Cargo
//! target folders) for the run and prunes the cache under
//! [`ReviewFixConfig::cache_max_size`] (`orchestrator_core::state::cache`).
//!
//! The entry point is [`run`]: a [`ReviewFixConfig`] (the CLI's flags) and
//! [`Services`] (agent, VCS, test runner factory, gate, event sink) in, a
//! [`RunReport`] whose [`Outcome`] maps to the exit code out.
//!
//! ## Public API
//!
//! - Running: [`run`], [`relint::run_with_relint`] (passes until nothing new;
//!   a fix deferred for overlapping an earlier one is tried by the next),
//!   [`lock_repository`]; [`ReviewFixConfig`] (`#[non_exhaustive]`: build it
//!   from `Default` with its `with_…` setters), [`Services`], [`RunReport`],
//!   [`Outcome`], [`ReviewFixError`].
//! - Reading inputs: [`input`] (`read_findings`, `load_inputs`,
//!   [`infer_test_command`]).
//! - Planning: [`plan`] (the partial-plan schema, `plan_batches`,
//!   `aggregate`, the deterministic fallback).
//! - The session files, versioned and documented in `FORMATS.md`: [`files`]
//!   (their types), [`session`] (their paths), [`ledger`]
//!   (`edit-history.json`), [`summary`] (`fix-summary.md`).
//! - Across runs: [`findings_ledger`] (`.review/ledger.json`: each finding
//!   by a fingerprint that survives moves, with its history; a new session
//!   leaves out what it says is fixed, declined, not fixable by the agent
//!   or failed, and the completion records each finding's outcome).
//! - Pull/merge requests: [`forge`] (`run_on_request`: the open review
//!   threads as findings, fixes made in a worktree at the request's head,
//!   delivered by push with "Fixed in abc1234." replies or as one review of
//!   committable suggestions; [`forge::RoutedAgent`]).
//! - Everything else is internal: the phases of a run (`phases`: settings,
//!   discovery, planning, approval; `execution`; `complete`), `open` (new or
//!   resumed sessions), `stages`, `exec` and `landing`.
//!
//! ## Invariants
//! - Commits land only on the checked-out branch of the repository, one per
//!   fixed finding, each with exactly the fix's write-set.
//! - A file dirty or untracked before the run is never modified, restored or
//!   committed; rollback restores exactly a fix's write-set.
//! - Every state file is written atomically at every step; a run killed at
//!   any instant resumes (`resume`) without committing anything twice.
//! - Only commits whose tree passed the tests land on the checked-out
//!   branch; with deterministic tests `batch` and `auto` land exactly the
//!   commits `each` lands, in the same order.

mod complete;
mod config;
pub mod error;
mod exec;
mod execution;
pub mod files;
pub mod findings_ledger;
pub mod forge;
pub mod input;
mod landing;
pub mod ledger;
mod open;
mod phases;
pub mod plan;
pub mod relint;
mod report;
pub mod session;
mod stages;
pub mod summary;
mod sync;
mod trash;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orchestrator_core::agent::Agent;
use orchestrator_core::batching::{BatchConfig, batch_findings};
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::finding::Finding;
use orchestrator_core::gate::{Answer, Gate, GateOption, Question};
use orchestrator_core::state::{read_json, read_json_if_exists, write_atomic, write_json_atomic};
use orchestrator_core::test_runner::TestRunner;
use orchestrator_core::text::counted;
use orchestrator_core::vcs::{CommitId, CommitInfo, Vcs};

use complete::*;
pub use config::*;
pub use error::ReviewFixError;
pub use exec::commit_message;
use execution::*;
pub use files::*;
pub use input::{InferredTestCommand, infer_test_command};
use open::*;
pub use orchestrator_core::verify::VerifyMode;
use phases::*;
pub use plan::PlannerMode;
pub use report::*;
use sync::lock;

/// The flow name in events.
pub const FLOW: &str = "review-fix";

/// The id of the plan-approval gate question.
pub const PLAN_QUESTION_ID: &str = "review-fix.plan";

/// Engine-owned folders excluded from version control.
pub const ENGINE_FOLDERS: [&str; 3] = [".review/", ".workflow/", ".moai/"];

/// The verify mode a configuration runs with: `batch` and `auto` need
/// worktrees, so serial isolation verifies each fix on its own.
pub fn effective_mode(config: &ReviewFixConfig) -> VerifyMode {
    if config.isolation == Isolation::Serial {
        VerifyMode::Each
    } else {
        config.verify
    }
}

fn emit_phase(sink: &dyn EventSink, phase: &str, started: bool) {
    let (flow, phase) = (FLOW.to_owned(), phase.to_owned());
    sink.emit(&if started {
        Event::PhaseStarted { flow, phase }
    } else {
        Event::PhaseFinished { flow, phase }
    });
}

/// Runs (or resumes) a review-fix session. See the crate docs.
///
/// One run per repository at a time: the repository lock
/// ([`lock_repository`]) is held for the whole run, and a second run on the
/// same repository — whatever review folder it uses — fails with
/// [`ReviewFixError::RepoBusy`] before it changes anything.
pub async fn run(config: ReviewFixConfig, services: Services) -> Result<RunReport, ReviewFixError> {
    let _lock = lock_repository(services.vcs.root())?;
    let _cache = upkeep_cache(&config, &services);
    run_locked(config, services).await
}

/// Claims the repository's cache folders for the run (held until the lease
/// is dropped) and prunes the cache under [`ReviewFixConfig::cache_max_size`]
/// (see `orchestrator_core::state::cache`): what it removed is a notice,
/// what went wrong a warning; neither stops the run.
pub(crate) fn upkeep_cache(
    config: &ReviewFixConfig,
    services: &Services,
) -> Option<orchestrator_core::state::CacheLease> {
    let repo = services.vcs.root();
    if !repo.is_dir() {
        return None;
    }
    let upkeep = orchestrator_core::state::cache::claim_and_prune(repo, config.cache_max_size);
    if let Some(message) = upkeep.notice {
        services.sink.emit(&Event::Notice { message });
    }
    for message in upkeep.warnings {
        services.sink.emit(&Event::Warning { message });
    }
    upkeep.lease
}

/// Takes the repository-wide lock of review-fix runs
/// (`{repo}/.review/.lock`, an OS file lock the kernel releases when the
/// process dies, so a killed run leaves nothing stale). [`run`] and
/// [`relint::run_with_relint`] take it themselves; it is public for callers
/// that must keep other runs out around their own work.
pub fn lock_repository(
    repo: &Path,
) -> Result<orchestrator_core::state::SessionLock, ReviewFixError> {
    let dir = repo.join(".review");
    std::fs::create_dir_all(&dir).map_err(|e| ReviewFixError::io("create", &dir, e))?;
    orchestrator_core::state::SessionLock::acquire(&dir).map_err(|e| ReviewFixError::RepoBusy {
        repo: repo.to_path_buf(),
        source: Box::new(e),
    })
}

/// [`run`], with the repository lock already held by the caller.
pub(crate) async fn run_locked(
    config: ReviewFixConfig,
    services: Services,
) -> Result<RunReport, ReviewFixError> {
    check_config(&config, &services)?;
    let vcs = Arc::clone(&services.vcs);
    // Every event passes the timeline recorder, which times the findings
    // for the report's picture (`timeline.svg`).
    let timeline = Arc::new(orchestrator_core::timeline::TimelineRecorder::new(
        Arc::clone(&services.sink),
    ));
    let sink: Arc<dyn EventSink> = timeline.clone();
    let repo = vcs.root().to_path_buf();
    exclude_engine_folders(vcs.as_ref()).await?;
    let run_started = now();
    let (config, opened) = discover(config, &services, &sink, &repo).await?;
    let Opened {
        paths,
        lock: _lock,
        mut active,
        findings_file,
        notes,
    } = opened;
    trash::install(vcs.as_ref(), &paths.dir);
    let planning = Planning {
        config: &config,
        services: &services,
        sink: &sink,
        paths: &paths,
        repo: &repo,
    };
    let plan = planning
        .plan_unless_planned(&mut active, &findings_file.findings)
        .await?;
    let executed = if config.dry_run {
        Executed::dry_run(active, &config)
    } else {
        if matches!(
            active.phase,
            SessionPhase::Planning | SessionPhase::AwaitingApproval | SessionPhase::Discovery
        ) && let Some(stopped) =
            ask_approval(&services, sink.as_ref(), &paths, &mut active, &plan, &notes).await?
        {
            return Ok(stopped);
        }
        let execution = Execution {
            config: &config,
            services: &services,
            sink: &sink,
            paths: &paths,
            repo: &repo,
            plan: &plan,
            findings_file: &findings_file,
        };
        execution.execute(active).await?
    };
    let completion = Completion {
        agent: services.agent.name().to_owned(),
        sarif_out: config.sarif_out.clone(),
        outcome: executed.outcome,
        run_started,
        notes,
        spans: timeline.spans(),
        worktrees: executed.worktrees,
    };
    complete(
        &paths,
        &executed.active,
        &plan,
        &findings_file,
        completion,
        executed.verification,
        &vcs,
        sink.as_ref(),
    )
    .await
}

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
