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
//!  completion ──► fix-summary.md, fix-history.json, active-fix-session.json removed
//! ```
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
//! - Pull/merge requests: [`forge`] (`run_on_request`: the open review
//!   threads as findings, fixes made in a worktree at the request's head,
//!   delivered by push with "Fixed in abc1234." replies or as one review of
//!   committable suggestions; [`forge::RoutedAgent`]).
//! - Everything else (`exec`, `landing`, `stages`, `open`, `complete`) is
//!   internal.
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
pub mod files;
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
    run_locked(config, services).await
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
    for folder in ENGINE_FOLDERS {
        vcs.exclude(folder)
            .await
            .map_err(|e| ReviewFixError::vcs(format!("excluding {folder}"), e))?;
    }
    let run_started = now();
    emit_phase(sink.as_ref(), "discovery", true);
    let first_input = config.inputs.first().map(|p| absolute(&repo, p));
    let root = session::fixes_root(&repo, first_input.as_deref());
    let opened = if config.resume {
        open_for_resume(&config, &services, &root).await?
    } else {
        open_new(&config, &services, &root).await?
    };
    let Opened {
        paths,
        lock: _lock,
        mut active,
        findings_file,
        mut notes,
    } = opened;
    sink.emit(&Event::SessionOpened {
        flow: FLOW.to_owned(),
        session: paths.id(),
        dir: paths.dir.clone(),
    });
    // A resumed session keeps what its plan was made for: where groups run
    // and how many run at once.
    let config = if config.resume {
        keep_session_layout(config, &active.options, &mut notes)
    } else {
        config
    };
    emit_phase(sink.as_ref(), "discovery", false);

    // Planning (skipped when a resumed session already has its plan).
    let findings: Vec<Finding> = findings_file.findings.clone();
    let plan = match read_json_if_exists::<FixPlan>(paths.plan())? {
        Some(plan) => plan,
        None => {
            let planning = Planning {
                config: &config,
                services: &services,
                sink: &sink,
                paths: &paths,
                repo: &repo,
            };
            planning.make_plan(&mut active, &findings).await?
        }
    };

    let done = |outcome: Outcome| Completion {
        outcome,
        run_started: run_started.clone(),
        notes: notes.clone(),
        spans: timeline.spans(),
        worktrees: None,
    };

    if config.dry_run {
        let c = done(Outcome::DryRun);
        return complete(
            &paths,
            &active,
            &plan,
            &findings_file,
            c,
            VerificationStats {
                mode: effective_mode(&config),
                ..VerificationStats::default()
            },
            &vcs,
            sink.as_ref(),
        )
        .await;
    }

    if matches!(
        active.phase,
        SessionPhase::Planning | SessionPhase::AwaitingApproval | SessionPhase::Discovery
    ) && let Some(stopped) =
        ask_approval(&services, sink.as_ref(), &paths, &mut active, &plan, &notes).await?
    {
        return Ok(stopped);
    }

    // Execution.
    active.phase = SessionPhase::Executing;
    active.last_update = now();
    session::write_active(&paths, &active)?;
    emit_phase(sink.as_ref(), "execution", true);
    let finding_map: HashMap<String, Finding> = findings
        .iter()
        .map(|f| (f.id.to_string(), f.clone()))
        .collect();
    let active = Arc::new(Mutex::new(active));
    let shared = Arc::new(exec::Shared {
        config: config.clone(),
        agent: Arc::clone(&services.agent),
        vcs: Arc::clone(&vcs),
        tests: Arc::clone(&services.tests),
        sink: Arc::clone(&sink),
        paths: paths.clone(),
        plan: plan.clone(),
        findings: finding_map.clone(),
        // Stable slot places (one review-fix run per repository at a
        // time): each slot's build folder stays warm from run to run.
        pool: orchestrator_core::worktree::WorktreePool::new(
            Arc::clone(&vcs),
            orchestrator_core::state::worktree_root(&repo).join("review-fix"),
            "review-fix/",
        )
        .with_reclaim(true)
        .with_provisioner(services.provisioner.clone())
        .with_sink(Arc::clone(&sink))
        .with_journal(Arc::new(exec::ActiveJournal {
            active: Arc::clone(&active),
            path: paths.active(),
            sink: Arc::clone(&sink),
        })),
        active,
        test_runs: AtomicU32::new(0),
        cargo: repo.join("Cargo.toml").is_file(),
        batch: config.verify != VerifyMode::Each && config.isolation == Isolation::Worktree,
        stats: Mutex::new(VerificationStats {
            mode: effective_mode(&config),
            ..VerificationStats::default()
        }),
        digests: Mutex::new(HashMap::new()),
        decided: Mutex::new((0, 0)),
        ledger: ledger::Ledger::open(&paths.dir)?,
        halted: Mutex::new(None),
        baseline: Mutex::new(orchestrator_core::test_runner::Baseline::default()),
    });
    exec::recover(&shared).await;
    if let Err(refusal) = exec::establish(&shared).await {
        shared.pool.close().await;
        return Err(match refusal {
            exec::BaseRefusal::Red(tests) => ReviewFixError::RedBase { tests },
            exec::BaseRefusal::Unjudgeable(message) | exec::BaseRefusal::Io(message) => {
                ReviewFixError::Base { message }
            }
        });
    }
    let landed = exec::landed_commits(&shared).await;
    let mut progress: HashMap<String, exec::Progress> = HashMap::new();
    for (i, g) in plan.groups.iter().enumerate() {
        let path = paths.progress(i + 1);
        let mut p: FixProgress = match read_json_if_exists(&path)? {
            Some(p) => p,
            None => exec::init_progress(g, i + 1, &finding_map),
        };
        prepare_for_run(&mut p, &finding_map, &landed);
        let handle = exec::Progress::new(path, p, Arc::clone(&sink));
        handle.update(|_| {});
        progress.insert(g.group_id.clone(), handle);
    }
    stages::run_stages(Arc::clone(&shared), &progress).await;
    shared.pool.close().await;
    emit_phase(sink.as_ref(), "execution", false);
    let active = lock(&shared.active).clone();
    let all: Vec<FixProgress> = plan
        .groups
        .iter()
        .filter_map(|g| progress.get(&g.group_id).map(exec::Progress::snapshot))
        .collect();
    let failed = all
        .iter()
        .flat_map(|p| p.findings.iter())
        .any(|f| f.result != Some(FixResult::Fixed));
    let outcome = if let Some(halted) = shared.halt_outcome() {
        halted
    } else if failed || !findings_file.rejected.is_empty() {
        Outcome::SomeFailed
    } else {
        Outcome::AllFixed
    };
    let mut verification = shared.with_stats(|s| *s);
    verification.test_runs = shared.test_runs.load(Ordering::SeqCst);
    let mut completion = done(outcome);
    completion.worktrees = Some(shared.pool.stats()).filter(|s| s.made > 0);
    complete(
        &paths,
        &active,
        &plan,
        &findings_file,
        completion,
        verification,
        &vcs,
        sink.as_ref(),
    )
    .await
}

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
