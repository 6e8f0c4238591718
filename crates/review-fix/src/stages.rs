//! Stages in order: the layer above execution (`exec`: groups, fixes,
//! tests, landing one verified fix at a time) and batch verification at
//! landing (`landing`). It decides, per stage, whether the groups run at
//! once or one after another (always in worktrees of the run's pool) and
//! which of the two lands their commits; the two layers below never call
//! each other's way up.

use std::collections::HashMap;
use std::sync::Arc;

use orchestrator_core::event::Event;
use orchestrator_core::vcs::CommitId;

use crate::exec::{
    Progress, Shared, land_stage, landed_commits, run_group_alone, run_in_worktrees,
};
use crate::files::{ExecutionMode, PlanGroup, ProgressStatus};
use crate::sync::lock;
use crate::{Isolation, landing};

/// Runs every stage of the plan in order.
pub(crate) async fn run_stages(shared: Arc<Shared>, progress: &HashMap<String, Progress>) {
    // A batch verification an interrupted run left: finish it first (every
    // earlier stage is done, since stages run in order).
    if let Some(state) = landing::load_state(&shared) {
        landing::verify_stage(&shared, state, progress, &[]).await;
    }
    for stage in shared.plan.timeline.clone() {
        let done = lock(&shared.active).stages_completed.contains(&stage.stage);
        let groups: Vec<PlanGroup> = stage
            .groups
            .iter()
            .filter_map(|g| shared.plan.group(g).cloned())
            .collect();
        let open: Vec<PlanGroup> = groups
            .into_iter()
            .filter(|g| {
                progress.get(&g.group_id).is_some_and(|p| {
                    p.snapshot()
                        .findings
                        .iter()
                        .any(|f| f.status != ProgressStatus::Completed)
                })
            })
            .collect();
        if done && open.is_empty() {
            continue;
        }
        shared.sink.emit(&Event::WaveStarted {
            wave: stage.stage,
            jobs: stage.groups.clone(),
        });
        let landed = landed_commits(&shared).await;
        let parallel = stage.execution_mode == ExecutionMode::Parallel
            && shared.config.isolation == Isolation::Worktree
            && open.len() > 1;
        if shared.batch {
            if parallel {
                run_batch_stage(&shared, stage.stage, &open, progress, &landed).await;
            } else {
                // Groups that share files: one after another, each on the
                // tip the previous one's verified fixes reached.
                for group in &open {
                    run_batch_stage(
                        &shared,
                        stage.stage,
                        std::slice::from_ref(group),
                        progress,
                        &landed,
                    )
                    .await;
                }
            }
        } else if parallel {
            run_parallel_stage(&shared, stage.stage, &open, progress, &landed).await;
        } else {
            // One group at a time, each in a worktree at the tip the
            // previous one's fixes reached (never in the user's tree),
            // each verified fix landed as it passes.
            for group in &open {
                if shared.halted().is_some() {
                    break;
                }
                if let Some(p) = progress.get(&group.group_id) {
                    run_group_alone(&shared, group, p, &landed).await;
                }
            }
        }
        shared.update_active(|a| {
            if !a.stages_completed.contains(&stage.stage) {
                a.stages_completed.push(stage.stage);
            }
        });
    }
}

/// Batch verification: the groups commit their fixes untested in worktrees
/// (concurrently), then the stage's commits are verified at landing.
async fn run_batch_stage(
    shared: &Arc<Shared>,
    stage: u32,
    groups: &[PlanGroup],
    progress: &HashMap<String, Progress>,
    landed: &HashMap<String, CommitId>,
) {
    let Some((base, runs)) = run_in_worktrees(shared, groups, progress, landed).await else {
        return;
    };
    landing::land_batch(shared, stage, runs, &base, progress).await;
}

/// A parallel stage verified one fix at a time: each group in its own
/// worktree and branch (at most `max_parallel_groups` at once), every fix
/// tested there, then landed in stage order.
///
/// Each group's fixes passed on its own tree, but two groups' fixes were
/// never tested together: when more than one group made commits, the
/// combination is verified at landing like a batch stage (tested at the
/// tip, bisected on failure, a dropped fix made again on the tip through
/// the retry loop), so that only tested trees land.
async fn run_parallel_stage(
    shared: &Arc<Shared>,
    stage: u32,
    groups: &[PlanGroup],
    progress: &HashMap<String, Progress>,
    landed: &HashMap<String, CommitId>,
) {
    let Some((base, runs)) = run_in_worktrees(shared, groups, progress, landed).await else {
        return;
    };
    let mut committing = 0;
    for run in &runs {
        if let Some(wt) = &run.vcs
            && !shared
                .worktree_commits(&run.group, wt.as_ref(), &base)
                .await
                .is_empty()
        {
            committing += 1;
        }
    }
    if committing > 1 {
        landing::land_batch(shared, stage, runs, &base, progress).await;
    } else {
        land_stage(shared, runs, &base, progress).await;
    }
}
