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
use orchestrator_core::verify::verify_pass_whole;

use crate::exec::{
    Progress, Shared, WorktreeRun, land_stage, landed_commits, run_group_alone, run_in_worktrees,
    run_in_worktrees_at,
};
use crate::files::{ExecutionMode, PlanGroup, ProgressStatus, QueuedFix, TimelineStage};
use crate::sync::lock;
use crate::{Isolation, landing};

/// Runs every stage of the plan in order.
pub(crate) async fn run_stages(shared: Arc<Shared>, progress: &HashMap<String, Progress>) {
    // A batch verification an interrupted run left: finish it first (every
    // earlier stage is done, since stages run in order).
    if let Some(state) = landing::load_state(&shared) {
        landing::verify_stage(&shared, state, progress, &[]).await;
    }
    crate::exec::settle_unattemptable(&shared, progress);
    let skip = if shared.batch {
        run_pass_whole(&shared, progress).await
    } else {
        0
    };
    for stage in shared.plan.timeline.iter().skip(skip).cloned() {
        let done = lock(&shared.active).stages_completed.contains(&stage.stage);
        let open = open_groups(&shared, &stage, progress);
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

/// A stage's groups with a finding not completed yet.
fn open_groups(
    shared: &Shared,
    stage: &TimelineStage,
    progress: &HashMap<String, Progress>,
) -> Vec<PlanGroup> {
    stage
        .groups
        .iter()
        .filter_map(|g| shared.plan.group(g).cloned())
        .filter(|g| {
            progress.get(&g.group_id).is_some_and(|p| {
                p.snapshot()
                    .findings
                    .iter()
                    .any(|f| f.status != ProgressStatus::Completed)
            })
        })
        .collect()
}

/// The low failure-rate rule ([`verify_pass_whole`], see
/// `orchestrator_core::verify` for the expected runs): when the estimate
/// says fixes rarely fail, every stage's groups commit their fixes untested,
/// each stage in worktrees on top of the previous stages' fixes, and the
/// whole pass is verified as one queue at its end — the tip tested once
/// when every fix passes, bisected only on a failure. Returns how many
/// stages it ran (`0`: the rule does not hold, or the plan has one stage,
/// or an earlier run of this session completed a stage: the stages are
/// verified one by one as before).
async fn run_pass_whole(shared: &Arc<Shared>, progress: &HashMap<String, Progress>) -> usize {
    let timeline = &shared.plan.timeline;
    let started = !lock(&shared.active).stages_completed.is_empty();
    if timeline.len() < 2 || started || shared.config.isolation != Isolation::Worktree {
        return 0;
    }
    let stages: Vec<(u32, Vec<PlanGroup>)> = timeline
        .iter()
        .map(|s| (s.stage, open_groups(shared, s, progress)))
        .collect();
    let fixes = stages
        .iter()
        .flat_map(|(_, groups)| groups)
        .map(|g| g.findings.len())
        .sum();
    if !verify_pass_whole(fixes, landing::pass_estimate(shared)) {
        return 0;
    }
    let Ok(mut base) = shared.vcs.head().await else {
        return 0;
    };
    let landed = landed_commits(shared).await;
    let mut state = landing::new_state(shared, stages[0].0, Vec::new());
    let mut groups_run = Vec::new();
    let mut ran = 0;
    for (index, (stage, groups)) in stages.iter().enumerate() {
        shared.sink.emit(&Event::WaveStarted {
            wave: *stage,
            jobs: groups.iter().map(|g| g.group_id.clone()).collect(),
        });
        let runs = run_in_worktrees_at(shared, groups, progress, &landed, &base).await;
        let queue = landing::queue_of(shared, &runs, progress);
        let single_tip = single_run_tip(&runs);
        state.stage = *stage;
        state.queue.extend(queue.iter().cloned());
        // The worktrees went back to the pool as their groups ended; the
        // commits stay readable by id, and a resume verifies what the
        // stages so far made.
        landing::save_state(shared, &state);
        groups_run.extend(landing::groups_of(&runs));
        ran = index + 1;
        if ran == stages.len() || shared.halted().is_some() {
            break;
        }
        let tip = if queue.is_empty() {
            Some(base.clone())
        } else if single_tip.is_some() {
            single_tip
        } else {
            untested_tip(shared, &queue, &base).await
        };
        match tip {
            Some(tip) => base = tip,
            None => break,
        }
    }
    landing::verify_stage(shared, state, progress, &groups_run).await;
    shared.update_active(|a| {
        for (stage, _) in &stages[..ran] {
            if !a.stages_completed.contains(stage) {
                a.stages_completed.push(*stage);
            }
        }
    });
    ran
}

/// The tip of a stage whose fixes were all made in one worktree: that
/// worktree's head (`None` when several runs, or none, made commits).
fn single_run_tip(runs: &[WorktreeRun]) -> Option<CommitId> {
    let mut tip = None;
    for run in runs {
        let Some(made) = &run.made else {
            continue;
        };
        let head = made.tip.clone()?;
        if head != run.base {
            if tip.is_some() {
                return None;
            }
            tip = Some(head);
        }
    }
    tip
}

/// The tip of a stage's untested fixes made in several worktrees: its
/// queued commits, in stage order, picked on top of `base` in a worktree of
/// the pool, for the next stage to start from. `None` when they do not
/// stack (the stages left are then verified one by one, after the ones run
/// so far).
async fn untested_tip(shared: &Shared, queue: &[QueuedFix], base: &CommitId) -> Option<CommitId> {
    let lease = shared.pool.acquire(base).await.ok()?;
    let commits: Vec<CommitId> = queue
        .iter()
        .filter_map(|q| q.commit.as_ref())
        .map(|c| CommitId(c.clone()))
        .collect();
    let stacked = lease
        .vcs
        .cherry_pick_series(&commits)
        .await
        .is_ok_and(|applied| applied.len() == commits.len());
    let tip = if stacked {
        lease.vcs.head().await.ok()
    } else {
        None
    };
    shared.pool.release(lease);
    tip
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
    let Some((_, runs)) = run_in_worktrees(shared, groups, progress, landed).await else {
        return;
    };
    landing::land_batch(shared, stage, runs, progress).await;
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
    let Some((_, runs)) = run_in_worktrees(shared, groups, progress, landed).await else {
        return;
    };
    let committing = runs
        .iter()
        .filter(|run| run.made.as_ref().is_some_and(|m| !m.commits.is_empty()))
        .count();
    if committing > 1 {
        landing::land_batch(shared, stage, runs, progress).await;
    } else {
        land_stage(shared, runs, progress).await;
    }
}
