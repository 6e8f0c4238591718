//! Groups in the main tree or in worktrees of the run's pool (outside the
//! repository, provisioned once per slot), and a stage's verified fixes
//! landed by cherry-pick. The order of stages, and
//! which landing a stage gets, is `crate::stages`'.

use super::*;

/// Runs one group in one tree; returns when every finding is completed.
pub(crate) async fn run_group(
    shared: &Shared,
    group: &PlanGroup,
    tree: &Tree,
    progress: &Progress,
    landed: &HashMap<String, CommitId>,
) {
    let gid = group.group_id.clone();
    shared.sink.emit(&Event::JobStarted {
        id: gid.clone(),
        title: Some(group.group_name.clone()),
    });
    progress.update(|p| {
        p.status = ProgressStatus::InProgress;
        p.assigned_agent = Some(shared.agent.name().to_owned());
        if p.started_at.is_none() {
            p.started_at = Some(now());
        }
    });
    for fid in &group.findings {
        let done = progress
            .snapshot()
            .findings
            .iter()
            .any(|f| &f.finding_id == fid && f.status == ProgressStatus::Completed);
        if done {
            continue;
        }
        let Some(finding) = shared.findings.get(fid) else {
            progress.finding(fid, |f| {
                f.status = ProgressStatus::Completed;
                f.result = Some(FixResult::Failed);
                f.error_message = Some("the finding is missing from findings.json".to_owned());
            });
            continue;
        };
        if let Some(commit) = landed.get(&commit_message(finding)) {
            // Committed by an earlier run whose progress write was lost.
            progress.finding(fid, |f| {
                f.status = ProgressStatus::Completed;
                f.result = Some(FixResult::Fixed);
                f.commit_hash = Some(commit.to_string());
                f.test_passed = Some(true);
                f.completed_at.get_or_insert_with(now);
            });
            continue;
        }
        fix_one(shared, group, tree, progress, finding, FixStart::default()).await;
    }
    if tree.defer {
        // The group's fixes wait for verification at landing.
        progress.update(|p| {
            p.phase = "verifying".to_owned();
            p.current_finding = None;
            p.flow_control = FlowControl::default();
        });
        return;
    }
    if shared.halted().is_some() {
        // Stopped at a run limit: the group's pending findings wait for
        // --resume.
        let snapshot = progress.snapshot();
        if snapshot
            .findings
            .iter()
            .any(|f| f.status != ProgressStatus::Completed)
        {
            shared.sink.emit(&Event::JobFinished {
                id: gid,
                status: JobStatus::Skipped,
                detail: Some(format!(
                    "{} fixed, the rest waits for --resume",
                    snapshot.summary.fixed
                )),
            });
            return;
        }
    }
    finish_group(shared, group, progress);
}

/// Commits on the checked-out branch since the session's base, by message.
pub(crate) async fn landed_commits(shared: &Shared) -> HashMap<String, CommitId> {
    let base = lock(&shared.active).base_head.clone();
    match shared.vcs.log_since(&CommitId(base)).await {
        Ok(log) => log
            .into_iter()
            .map(|c| (c.message.trim().to_owned(), c.id))
            .collect(),
        Err(e) => {
            shared.warn(format!("failed to read the branch log: {e}"));
            HashMap::new()
        }
    }
}

/// Runs one group in the main tree under the group time limit.
pub(crate) async fn run_group_in_main(
    shared: &Shared,
    group: &PlanGroup,
    progress: &Progress,
    landed: &HashMap<String, CommitId>,
) {
    let tree = Tree {
        vcs: Arc::clone(&shared.vcs),
        env: TreeEnv {
            root: shared.vcs.root().to_path_buf(),
            worktree_slot: None,
            cargo_target_dir: None,
            env: BTreeMap::new(),
        },
        is_main: true,
        defer: false,
    };
    let limit = shared.config.group_time_limit;
    if tokio::time::timeout(limit, run_group(shared, group, &tree, progress, landed))
        .await
        .is_err()
    {
        time_out_group(shared, group, progress, limit).await;
    }
}

/// After a group's time limit: restore its in-flight fix in the main tree
/// and fail what is left.
pub(super) async fn time_out_group(
    shared: &Shared,
    group: &PlanGroup,
    progress: &Progress,
    limit: Duration,
) {
    let root = shared.vcs.root().to_path_buf();
    let in_flight: Vec<InFlight> = lock(&shared.active).in_flight.clone();
    for f in in_flight.iter().filter(|f| f.group_id == group.group_id) {
        if f.tree == root
            && let Err(e) = shared.vcs.restore(&f.checkpoint).await
        {
            shared.warn(format!(
                "failed to roll back {} after the time limit: {e}",
                f.finding_id
            ));
        }
    }
    shared.update_active(|a| a.in_flight.retain(|f| f.group_id != group.group_id));
    let msg = format!("group time limit of {}s exceeded", limit.as_secs());
    let open: Vec<String> = progress
        .snapshot()
        .findings
        .iter()
        .filter(|f| f.status != ProgressStatus::Completed)
        .map(|f| f.finding_id.clone())
        .collect();
    for id in open {
        progress.error(&id, "timeout", &msg);
        finish_failed(shared, progress, &id, msg.clone());
    }
    progress.update(|p| {
        p.status = ProgressStatus::Failed;
        p.phase = "done".to_owned();
    });
    shared.sink.emit(&Event::JobFinished {
        id: group.group_id.clone(),
        status: JobStatus::TimedOut,
        detail: Some(msg),
    });
}

/// The result of a group run in a worktree, waiting to land.
pub(crate) struct WorktreeRun {
    pub(crate) group: PlanGroup,
    /// The worktree's version control, `None` when the group could not
    /// have one.
    pub(crate) vcs: Option<Arc<dyn Vcs>>,
    /// The pool's worktree, given back once the run's commits are landed
    /// or queued.
    lease: Option<Lease>,
}

/// Runs each group in a worktree of the run's pool from HEAD (at most
/// `max_parallel_groups` at once); the runs come back in group order. When
/// HEAD cannot be read the groups run in the main tree and `None` is
/// returned.
pub(crate) async fn run_in_worktrees(
    shared: &Arc<Shared>,
    groups: &[PlanGroup],
    progress: &HashMap<String, Progress>,
    landed: &HashMap<String, CommitId>,
) -> Option<(CommitId, Vec<WorktreeRun>)> {
    let base = match shared.vcs.head().await {
        Ok(h) => h,
        Err(e) => {
            shared.warn(format!(
                "failed to read HEAD ({e}); running the stage's groups serially"
            ));
            for g in groups {
                if let Some(p) = progress.get(&g.group_id) {
                    run_group_in_main(shared, g, p, landed).await;
                }
            }
            return None;
        }
    };
    let limit = shared.config.max_parallel_groups.max(1);
    let semaphore = Arc::new(tokio::sync::Semaphore::new(limit));
    let landed = Arc::new(landed.clone());
    let mut set = tokio::task::JoinSet::new();
    for (index, group) in groups.iter().enumerate() {
        let Some(p) = progress.get(&group.group_id).cloned() else {
            continue;
        };
        let shared = Arc::clone(shared);
        let group = group.clone();
        let base = base.clone();
        let semaphore = Arc::clone(&semaphore);
        let landed = Arc::clone(&landed);
        set.spawn(async move {
            let _permit = semaphore.acquire_owned().await.ok();
            let run = run_in_worktree(&shared, &group, &p, &base, &landed).await;
            (index, run)
        });
    }
    let mut runs: Vec<(usize, WorktreeRun)> = Vec::new();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(r) => runs.push(r),
            Err(e) => shared.warn(format!("a group task stopped: {e}")),
        }
    }
    runs.sort_by_key(|(i, _)| *i);
    Some((base, runs.into_iter().map(|(_, r)| r).collect()))
}

/// Takes a worktree of the pool at `base` and runs the group in it. A
/// worktree that cannot be made leaves the group to run in the main tree;
/// one whose setup failed fails the group's findings with the setup's
/// output, before any agent call.
pub(super) async fn run_in_worktree(
    shared: &Shared,
    group: &PlanGroup,
    progress: &Progress,
    base: &CommitId,
    landed: &HashMap<String, CommitId>,
) -> WorktreeRun {
    let mut out = WorktreeRun {
        group: group.clone(),
        vcs: None,
        lease: None,
    };
    let lease = match shared.pool.acquire(base).await {
        Ok(lease) => lease,
        Err(PoolError::Setup(e)) => {
            fail_group_setup(shared, group, progress, &e.to_string());
            return out;
        }
        Err(e) => {
            shared.warn(format!(
                "{e} for {}; it will run in the main tree",
                group.group_id
            ));
            return out;
        }
    };
    let tree = Tree {
        vcs: Arc::clone(&lease.vcs),
        env: TreeEnv {
            root: lease.path().to_path_buf(),
            worktree_slot: Some(lease.slot),
            cargo_target_dir: shared.cargo.then(|| shared.paths.target_dir(lease.slot)),
            env: lease.env.clone(),
        },
        is_main: false,
        defer: shared.batch,
    };
    out.vcs = Some(Arc::clone(&lease.vcs));
    out.lease = Some(lease);
    let limit = shared.config.group_time_limit;
    if tokio::time::timeout(limit, run_group(shared, group, &tree, progress, landed))
        .await
        .is_err()
    {
        time_out_group(shared, group, progress, limit).await;
    }
    out
}

/// A group whose worktree's setup failed: each of its open findings fails
/// with the setup's output (no agent was asked), and the group is done.
fn fail_group_setup(shared: &Shared, group: &PlanGroup, progress: &Progress, error: &str) {
    let message = format!("its worktree could not be set up: {error}");
    let open: Vec<String> = progress
        .snapshot()
        .findings
        .iter()
        .filter(|f| f.status != ProgressStatus::Completed)
        .map(|f| f.finding_id.clone())
        .collect();
    for id in open {
        progress.error(&id, "worktree_setup", &message);
        finish_failed(shared, progress, &id, message.clone());
    }
    progress.update(|p| {
        p.status = ProgressStatus::Failed;
        p.phase = "done".to_owned();
    });
    shared.sink.emit(&Event::JobFinished {
        id: group.group_id.clone(),
        status: JobStatus::Failed,
        detail: Some(message),
    });
}

/// Writes the pool's worktrees into the active-session file as they are
/// made and removed, so a resume after a kill removes what is left.
#[derive(Debug)]
pub(crate) struct ActiveJournal {
    pub(crate) active: Arc<Mutex<ActiveSession>>,
    pub(crate) path: PathBuf,
    pub(crate) sink: Arc<dyn EventSink>,
}

impl ActiveJournal {
    fn update(&self, f: impl FnOnce(&mut ActiveSession)) {
        let result = {
            let mut active = lock(&self.active);
            f(&mut active);
            active.last_update = now();
            write_json_atomic(&self.path, &*active)
        };
        if let Err(e) = result {
            self.sink.emit(&Event::Warning {
                message: format!("failed to write the active-session file: {e}"),
            });
        }
    }
}

impl PoolJournal for ActiveJournal {
    fn making(&self, slot: &SlotRecord) {
        self.update(|a| {
            a.worktrees.push(WorktreeRecord {
                group_id: "pool".to_owned(),
                path: slot.path.clone(),
                branch: slot.branch.clone(),
            })
        });
    }

    fn removed(&self, slot: &SlotRecord) {
        self.update(|a| a.worktrees.retain(|w| w.path != slot.path));
    }
}

/// Lands a stage's worktree commits on the checked-out branch, in stage
/// order, by cherry-pick. A group whose commit does not apply (or whose
/// worktree could not be created) is re-run serially on the updated branch.
pub(crate) async fn land_stage(
    shared: &Shared,
    runs: Vec<WorktreeRun>,
    base: &CommitId,
    progress: &HashMap<String, Progress>,
) {
    let mut rerun: Vec<PlanGroup> = Vec::new();
    for mut run in runs {
        let Some(p) = progress.get(&run.group.group_id) else {
            continue;
        };
        let Some(wt) = run.vcs.clone() else {
            reset_unlanded(p, &BTreeSet::new());
            rerun.push(run.group.clone());
            continue;
        };
        p.update(|p| p.phase = "landing".to_owned());
        let commits = shared.worktree_commits(&run.group, wt.as_ref(), base).await;
        let mut landed_ids = BTreeSet::new();
        let mut conflict = None;
        for (c, fid) in commits {
            match shared.vcs.cherry_pick(&c.id).await {
                Ok(CherryPick::Applied { commit }) => {
                    if let Some(fid) = fid {
                        p.finding(&fid, |f| f.commit_hash = Some(commit.to_string()));
                        shared.sink.emit(&Event::CommitMade {
                            id: fid.clone(),
                            commit: commit.to_string(),
                            summary: c.message.trim().to_owned(),
                        });
                        landed_ids.insert(fid);
                    }
                }
                Ok(CherryPick::Conflict { paths }) => {
                    conflict = Some(format!("landing conflicted in {}", paths.join(", ")));
                    break;
                }
                Err(e) => {
                    conflict = Some(format!("landing failed: {e}"));
                    break;
                }
            }
        }
        if let Some(reason) = conflict {
            p.update(|p| {
                p.errors.push(ProgressError {
                    finding_id: None,
                    error_type: "landing_conflict".to_owned(),
                    message: format!("{reason}; the group is re-run on the updated branch"),
                    timestamp: now(),
                })
            });
            reset_unlanded(p, &landed_ids);
            rerun.push(run.group.clone());
        } else {
            p.update(|p| p.phase = "done".to_owned());
        }
        release_worktree(shared, &mut run);
    }
    if !rerun.is_empty() {
        let landed = landed_commits(shared).await;
        for g in &rerun {
            if let Some(p) = progress.get(&g.group_id) {
                run_group_in_main(shared, g, p, &landed).await;
            }
        }
    }
}

/// Fixed-in-worktree findings that did not land go back to pending.
pub(super) fn reset_unlanded(p: &Progress, landed: &BTreeSet<String>) {
    p.update(|p| {
        for f in &mut p.findings {
            if f.result == Some(FixResult::Fixed) && !landed.contains(&f.finding_id) {
                f.status = ProgressStatus::Pending;
                f.result = None;
                f.commit_hash = None;
                f.test_passed = None;
                f.completed_at = None;
            }
        }
        p.status = ProgressStatus::Pending;
    });
}

/// Gives a group's worktree back to the run's pool (its commits are
/// landed, or queued by id for batch verification).
pub(crate) fn release_worktree(shared: &Shared, run: &mut WorktreeRun) {
    if let Some(lease) = run.lease.take() {
        shared.pool.release(lease);
    }
}
