//! Batch verification at landing, merge-queue style (`--verify batch|auto`).
//!
//! The groups of a stage commit their fixes untested in worktrees (a fix
//! still has to apply, and its write-set is still checked). Landing then
//! decides which fixes reach the checked-out branch with the core
//! [`Verifier`]: every test run is "the fixes landed so far plus the next
//! `k` undecided ones", so a fix is only ever tested on top of exactly the
//! fixes `each` would have landed below it.
//!
//! ## Trees
//!
//! A trial tree is a temporary worktree (`worktrees/r{run}-verify`, its own
//! branch) started at the branch tip — the last good state — with the
//! candidates cherry-picked on top, one commit each. A passing trial's
//! commits reach the checked-out branch in order: with one fast-forward to
//! the trial's commit of the last decided fix when the branch is still the
//! trial's base (`Vcs::fast_forward`: same ids, one git merge for the whole
//! run of fixes, the same checks for the user's work), else cherry-picked
//! one by one, which stops at exactly the fix the user's work blocks. Only
//! commits known good ever reach it, and nothing is reset or forced. A
//! trial that needs fewer candidates than the worktree holds starts a new
//! worktree at the tip (the old one is removed).
//!
//! ## Drops and the retry loop
//!
//! When the verifier drops a fix (a failing run whose tree is "landed +
//! that fix", confirmed by `flaky_reruns` re-runs), the fix goes back into
//! the retry loop with the failing output: it is made again on the tip by
//! the agent (an attempt), at the same place in the queue, and the
//! verification goes on with a new segment (a new verifier over the rest of
//! the queue, its failure-rate prior carrying the session's decisions). The
//! later fixes are re-applied on the last good state by cherry-pick; one
//! that no longer applies is made again by the agent at its place. So the
//! landed sequence is the one `each` lands, given deterministic tests.
//!
//! ## Resume
//!
//! `verify-state.json` holds the queue, the segment's configuration and
//! every recorded outcome, written before anything acts on them; a resumed
//! run rebuilds the verifier with `Verifier::resume` and lands what it had
//! decided but not landed yet (a commit already on the branch, found by its
//! message, is never landed twice).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use orchestrator_core::event::{Event, JobStatus};
use orchestrator_core::state::{read_json_if_exists, write_json_atomic};
use orchestrator_core::vcs::{CherryPick, CommitId, FastForward, Vcs};
use orchestrator_core::verify::{RunOutcome, Step, Verifier, VerifyConfig, VerifyMode};

use crate::TreeEnv;
use crate::exec::{
    FixStart, FlakyFailure, Progress, Shared, Tree, WorktreeRun, blocked_reason, commit_message,
    describe_failure_as, finish_failed, finish_group, first_line, fix_one, landed_commits,
    record_flaky, run_tests, short_failure,
};
use crate::files::{
    FixResult, KnownFailure, ProgressStatus, ProgressVerification, QueuedFix, VERIFY_STATE_VERSION,
    VerifyState, now,
};

mod trial;
use trial::*;

mod decisions;
use decisions::*;

mod segment;
use segment::*;

/// The failure-rate prior of fixes that apply a linter's machine-applicable
/// suggestions (the builtin agent): one failure in a hundred fixes, where
/// other agents' fixes start at the core default of one in ten. The tools'
/// own `--fix` applies them without testing at all; none of the registry
/// crates' fixes in `perf-report review-fix-registry` and the clippy
/// differential has failed a test.
pub(crate) const MACHINE_APPLICABLE_PRIOR: (f64, f64) = (1.0, 99.0);

/// The verifier configuration of a new segment: the session's mode and
/// re-runs, with the failure-rate prior (the agent's: see
/// [`MACHINE_APPLICABLE_PRIOR`]) moved by the decisions so far.
pub(crate) fn segment_config(shared: &Shared) -> VerifyConfig {
    let (failures, passes) = shared.decided();
    let mut config = VerifyConfig::new(shared.config.verify);
    if shared.applies_exact_suggestions() {
        (config.prior_failures, config.prior_passes) = MACHINE_APPLICABLE_PRIOR;
    }
    if config.mode == VerifyMode::Each {
        // Only reached when a resumed session asks for `each`: keep batching
        // the verification in flight with the session's evidence.
        config.mode = VerifyMode::Auto;
    }
    config.flaky_reruns = shared.config.flaky_reruns;
    config.prior_failures += f64::from(failures);
    config.prior_passes += f64::from(passes);
    config
}

/// Reads a verification in flight (left by an interrupted run).
pub(crate) fn load_state(shared: &Shared) -> Option<VerifyState> {
    match read_json_if_exists::<VerifyState>(shared.paths.verify_state()) {
        Ok(Some(state)) if state.version == VERIFY_STATE_VERSION => Some(state),
        Ok(Some(state)) => {
            shared.warn(format!(
                "{} has version {}, expected {VERIFY_STATE_VERSION}; its fixes are made again",
                shared.paths.verify_state().display(),
                state.version
            ));
            None
        }
        Ok(None) => None,
        Err(e) => {
            shared.warn(format!(
                "failed to read the verification in flight ({e}); its fixes are made again"
            ));
            None
        }
    }
}

/// The failure-rate estimate a new segment starts from: the prior and the
/// session's decisions (the Beta posterior mean the verifier starts with).
pub(crate) fn pass_estimate(shared: &Shared) -> f64 {
    let c = segment_config(shared);
    c.prior_failures / (c.prior_failures + c.prior_passes)
}

pub(crate) fn save_state(shared: &Shared, state: &VerifyState) {
    if let Err(e) = write_json_atomic(shared.paths.verify_state(), state) {
        shared.warn(format!("failed to write the verification state: {e}"));
    }
}

fn remove_state(shared: &Shared) {
    let path = shared.paths.verify_state();
    if let Err(e) = std::fs::remove_file(&path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        shared.warn(format!("failed to remove {}: {e}", path.display()));
    }
}

/// Collects the untested fix commits of a stage's worktree runs (in stage
/// order; each run's commits since its own base, read when its group
/// ended and its worktree went back to the pool) and verifies the commits
/// at landing. (A group whose worktree could not
/// be made has failed already.) A whole pass verified at once gives every
/// stage's runs, each stage's on top of the ones before.
pub(crate) async fn land_batch(
    shared: &Shared,
    stage: u32,
    runs: Vec<WorktreeRun>,
    progress: &HashMap<String, Progress>,
) {
    let queue = queue_of(shared, &runs, progress);
    let state = new_state(shared, stage, queue);
    save_state(shared, &state);
    let groups = groups_of(&runs);
    verify_stage(shared, state, progress, &groups).await;
}

/// The untested fix commits of worktree runs, in run order (each run's
/// commits since its own base), as verification queue entries.
pub(crate) fn queue_of(
    shared: &Shared,
    runs: &[WorktreeRun],
    progress: &HashMap<String, Progress>,
) -> Vec<QueuedFix> {
    let mut queue = Vec::new();
    for run in runs {
        let Some(made) = &run.made else {
            continue;
        };
        let Some(p) = progress.get(&run.group.group_id) else {
            continue;
        };
        let snapshot = p.snapshot();
        for (c, fid) in &made.commits {
            let Some(fid) = fid.as_ref() else {
                continue;
            };
            let attempts = snapshot
                .findings
                .iter()
                .find(|f| &f.finding_id == fid)
                .map_or(1, |f| f.attempts);
            queue.push(QueuedFix {
                finding_id: fid.clone(),
                group_id: run.group.group_id.clone(),
                commit: Some(c.id.to_string()),
                digest: shared.digest_of(fid),
                attempts,
                failure: None,
                failed: Vec::new(),
            });
        }
    }
    queue
}

/// The groups of runs that had a worktree (to close after verification).
pub(crate) fn groups_of(runs: &[WorktreeRun]) -> Vec<String> {
    runs.iter()
        .filter(|r| r.made.is_some())
        .map(|r| r.group.group_id.clone())
        .collect()
}

/// A new verification of `queue` for `stage`, in its first segment.
pub(crate) fn new_state(shared: &Shared, stage: u32, queue: Vec<QueuedFix>) -> VerifyState {
    VerifyState {
        version: VERIFY_STATE_VERSION,
        stage,
        segment: 1,
        config: segment_config(shared),
        queue,
        outcomes: Vec::new(),
    }
}

/// The temporary worktree trial trees are built in.
struct TrialTree {
    vcs: Arc<dyn Vcs>,
    /// The pool's worktree it is built in.
    lease: orchestrator_core::worktree::Lease,
    env: TreeEnv,
    /// The branch tip the built commits sit on, while the branch has only
    /// moved by fast-forwards to them (`None` once a fix landed by
    /// cherry-pick: the branch then has its own ids).
    base: Option<CommitId>,
    /// It holds a fix that is no longer in the queue: start a new one.
    stale: bool,
    /// Commits on top of the last good state, one per queue position from
    /// the first undecided one on: `(finding, commit)`.
    built: Vec<(String, CommitId)>,
}

/// Why a tree could not be built.
enum BuildError {
    /// A fix could not be made again and was removed from the queue (it is
    /// recorded as failed); the segment starts over.
    Removed,
    /// No trial worktree could be created.
    NoTree(String),
}

/// What the verification of a stage did, for its closing event.
#[derive(Debug, Default)]
struct StageCount {
    runs: u32,
    reruns: u32,
    each_runs: u32,
    landed: u32,
    dropped: u32,
}

/// Verifies the queue of a stage (or resumes its verification) until every
/// fix is landed or failed. `groups`: the groups to close afterwards (the
/// queue's groups are added).
pub(crate) async fn verify_stage(
    shared: &Shared,
    state: VerifyState,
    progress: &HashMap<String, Progress>,
    groups: &[String],
) {
    let mut close: BTreeSet<String> = groups.iter().cloned().collect();
    close.extend(state.queue.iter().map(|q| q.group_id.clone()));
    let stage = state.stage;
    shared.sink.emit(&Event::JobStarted {
        id: format!("verify-stage-{stage}"),
        title: Some(format!(
            "Verify stage {stage} at landing: {} fixes ({})",
            state.queue.len(),
            state.config.mode
        )),
    });
    let runs_before = shared.test_runs();
    let mut run = StageRun {
        shared,
        progress,
        state,
        count: StageCount::default(),
        on_branch: landed_commits(shared).await,
        trial: None,
        short_failures: HashMap::new(),
    };
    loop {
        match run.segment().await {
            SegmentEnd::Restart => {}
            SegmentEnd::Done => break,
            SegmentEnd::Halted => {
                save_state(shared, &run.state);
                close_trial(shared, &mut run.trial).await;
                return;
            }
        }
    }
    close_trial(shared, &mut run.trial).await;
    remove_state(shared);
    run.count.runs = shared.test_runs() - runs_before;
    close_groups(shared, &run, &close);
    let count = &run.count;
    shared.sink.emit(&Event::JobFinished {
        id: format!("verify-stage-{stage}"),
        status: JobStatus::Completed,
        detail: Some(format!(
            "{} test runs for {} landed and {} dropped fixes (one by one: {}, saved {})",
            count.runs,
            count.landed,
            count.dropped,
            count.each_runs,
            i64::from(count.each_runs) - i64::from(count.runs)
        )),
    });
}

/// Closes the groups whose fixes were waiting for the stage's verification
/// (`close`, and those a killed run left waiting with every fix landed);
/// their progress files get the stage's figures.
fn close_groups(shared: &Shared, run: &StageRun<'_>, close: &BTreeSet<String>) {
    let count = &run.count;
    for group in &shared.plan.groups {
        let Some(p) = run.progress.get(&group.group_id) else {
            continue;
        };
        let snapshot = p.snapshot();
        let waiting = snapshot.phase == "verifying"
            && snapshot
                .findings
                .iter()
                .all(|f| f.status == ProgressStatus::Completed);
        if !close.contains(&group.group_id) && !waiting {
            continue;
        }
        let flaky = snapshot
            .errors
            .iter()
            .filter(|e| e.error_type == "flaky_test")
            .count() as u32;
        p.update(|p| {
            if crate::effective_mode(&shared.config) == VerifyMode::Each {
                // The group's own runs, one per fix, plus the runs that
                // tested the stage's combination at landing.
                let v = p
                    .verification
                    .get_or_insert(ProgressVerification::empty(VerifyMode::Each));
                v.test_runs += count.runs;
                v.reruns += count.reruns;
                v.each_runs += count.runs;
                v.flaky = flaky;
                return;
            }
            p.verification = Some(ProgressVerification {
                mode: run.state.config.mode,
                test_runs: count.runs,
                reruns: count.reruns,
                each_runs: count.each_runs,
                runs_saved: i64::from(count.each_runs) - i64::from(count.runs),
                flaky,
            });
        });
        finish_group(shared, group, p);
    }
}
