//! Groups in worktrees of the run's pool (outside the repository,
//! provisioned once per slot; never the user's tree, where the user may be
//! working), and a stage's verified fixes landed by cherry-pick — never
//! over the user's uncommitted work. The order of stages, and
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

/// After a group's time limit: fail what is left (its in-flight fix is in
/// its worktree, which the pool replaces rather than reuses).
pub(super) async fn time_out_group(
    shared: &Shared,
    group: &PlanGroup,
    progress: &Progress,
    limit: Duration,
) {
    shared.forget_in_flight(|f| f.group_id == group.group_id);
    let msg = format!("group time limit of {}s exceeded", limit.as_secs());
    fail_open(shared, progress, "timeout", &msg);
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

/// The result of a group run in a worktree, waiting to land. The
/// worktree itself went back to the pool when the group ended (its
/// commits stay readable by id), so a stage of many groups needs no more
/// worktrees than run at once.
pub(crate) struct WorktreeRun {
    pub(crate) group: PlanGroup,
    /// What the group made, `None` when it could not have a worktree.
    pub(crate) made: Option<Made>,
    /// The commit the worktree started at: its commits since are the
    /// group's fixes.
    pub(crate) base: CommitId,
}

/// What a group made in its worktree, read when the group ended.
pub(crate) struct Made {
    /// The worktree's HEAD then (the base when it committed nothing;
    /// `None` when it could not be read).
    pub(crate) tip: Option<CommitId>,
    /// Its commits since the base, oldest first, each with the finding its
    /// message names ([`Shared::worktree_commits`]).
    pub(crate) commits: Vec<(orchestrator_core::vcs::CommitInfo, Option<String>)>,
}

/// Runs each group in a worktree of the run's pool from HEAD (at most
/// `max_parallel_groups` at once); the runs come back in group order. When
/// HEAD cannot be read the groups fail and `None` is returned.
pub(crate) async fn run_in_worktrees(
    shared: &Arc<Shared>,
    groups: &[PlanGroup],
    progress: &HashMap<String, Progress>,
    landed: &HashMap<String, CommitId>,
) -> Option<(CommitId, Vec<WorktreeRun>)> {
    let base = match shared.vcs.head().await {
        Ok(h) => h,
        Err(e) => {
            let message = format!("HEAD could not be read: {e}");
            for g in groups {
                if let Some(p) = progress.get(&g.group_id) {
                    fail_open(shared, p, "vcs_error", &message);
                }
            }
            return None;
        }
    };
    let runs = run_in_worktrees_at(shared, groups, progress, landed, &base).await;
    Some((base, runs))
}

/// Runs each group in a worktree of the run's pool from `base` (at most
/// `max_parallel_groups` at once); the runs come back in group order.
pub(crate) async fn run_in_worktrees_at(
    shared: &Arc<Shared>,
    groups: &[PlanGroup],
    progress: &HashMap<String, Progress>,
    landed: &HashMap<String, CommitId>,
    base: &CommitId,
) -> Vec<WorktreeRun> {
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
    runs.into_iter().map(|(_, r)| r).collect()
}

/// Takes a worktree of the pool at `base` and runs the group in it. The
/// agent never works in the user's tree, where the user may be working: a
/// worktree that cannot be made (or set up) fails the group's findings
/// with why, before any agent call.
pub(super) async fn run_in_worktree(
    shared: &Shared,
    group: &PlanGroup,
    progress: &Progress,
    base: &CommitId,
    landed: &HashMap<String, CommitId>,
) -> WorktreeRun {
    let mut out = WorktreeRun {
        group: group.clone(),
        made: None,
        base: base.clone(),
    };
    let lease = match shared.pool.acquire(base).await {
        Ok(lease) => lease,
        Err(e) => {
            fail_group_setup(shared, group, progress, &e);
            return out;
        }
    };
    let tree = Tree {
        vcs: Arc::clone(&lease.vcs),
        env: lease_env(shared, &lease).await,
        defer: shared.batch,
        land_each: false,
    };
    let limit = shared.config.group_time_limit;
    if tokio::time::timeout(limit, run_group(shared, group, &tree, progress, landed))
        .await
        .is_err()
    {
        time_out_group(shared, group, progress, limit).await;
    }
    let wt = lease.vcs.as_ref();
    out.made = Some(Made {
        tip: wt.head().await.ok(),
        commits: shared.worktree_commits(group, wt, base).await,
    });
    shared.pool.release(lease);
    out
}

/// Runs a group that has the branch to itself (a serial stage, or serial
/// isolation) in a worktree of the pool at the tip, landing each verified
/// fix as soon as it is committed there ([`Tree::land_each`]), so a kill
/// loses no verified fix and the user's tree only ever receives landings.
pub(crate) async fn run_group_alone(
    shared: &Shared,
    group: &PlanGroup,
    progress: &Progress,
    landed: &HashMap<String, CommitId>,
) {
    let base = match shared.vcs.head().await {
        Ok(h) => h,
        Err(e) => {
            fail_open(
                shared,
                progress,
                "vcs_error",
                &format!("HEAD could not be read: {e}"),
            );
            return;
        }
    };
    let lease = match shared.pool.acquire(&base).await {
        Ok(lease) => lease,
        Err(e) => {
            fail_group_setup(shared, group, progress, &e);
            return;
        }
    };
    let tree = Tree {
        vcs: Arc::clone(&lease.vcs),
        env: lease_env(shared, &lease).await,
        defer: false,
        land_each: true,
    };
    let limit = shared.config.group_time_limit;
    if tokio::time::timeout(limit, run_group(shared, group, &tree, progress, landed))
        .await
        .is_err()
    {
        time_out_group(shared, group, progress, limit).await;
    }
    shared.pool.release(lease);
}

/// The test environment of a pool worktree: its slot's Cargo target
/// folder (seeded from the main tree's on first use, see
/// [`seed::seed_slot`]) and what its provisioner gives.
pub(crate) async fn lease_env(shared: &Shared, lease: &Lease) -> TreeEnv {
    let cargo_target_dir = shared.cargo.then(|| shared.paths.target_dir(lease.slot));
    if let Some(slot_target) = &cargo_target_dir {
        seed_target(shared, slot_target).await;
    }
    TreeEnv {
        root: lease.path().to_path_buf(),
        worktree_slot: Some(lease.slot),
        cargo_target_dir,
        env: lease.env.clone(),
    }
}

/// Seeds a slot's Cargo target folder that does not exist yet; a seed that
/// fails is warned about and the slot builds cold.
async fn seed_target(shared: &Shared, slot_target: &Path) {
    if slot_target.exists() {
        return;
    }
    let repo = shared.vcs.root().to_path_buf();
    let main_target = shared.config.cargo_seed.clone().unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| repo.join("target"), |dir| repo.join(dir))
    });
    let slot = slot_target.to_path_buf();
    let seeded = tokio::task::spawn_blocking(move || seed::seed_slot(&repo, &main_target, &slot))
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|r| r);
    if let Err(e) = seeded {
        shared.sink.emit(&Event::Warning {
            message: format!(
                "failed to seed the worktree's Cargo target folder {}: {e}; it builds from scratch",
                slot_target.display()
            ),
        });
    }
}

/// A group whose worktree could not be made or set up: each of its open
/// findings fails with why (no agent was asked), and the group is done.
fn fail_group_setup(shared: &Shared, group: &PlanGroup, progress: &Progress, error: &PoolError) {
    let (kind, message) = match error {
        PoolError::Setup(e) => (
            "worktree_setup",
            format!("its worktree could not be set up: {e}"),
        ),
        e => ("vcs_error", e.to_string()),
    };
    fail_open(shared, progress, kind, &message);
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
/// order, by cherry-pick. A group whose commits do not apply is run again,
/// once, in a worktree at the updated tip and landed from there; one that
/// conflicts again fails its unlanded findings with the paths named.
pub(crate) async fn land_stage(
    shared: &Arc<Shared>,
    runs: Vec<WorktreeRun>,
    progress: &HashMap<String, Progress>,
) {
    let rerun = land_runs(shared, runs, progress).await;
    for group in rerun {
        if shared.halted().is_some() {
            break;
        }
        let landed = landed_commits(shared).await;
        let Some((_, runs)) =
            run_in_worktrees(shared, std::slice::from_ref(&group), progress, &landed).await
        else {
            continue;
        };
        for again in land_runs(shared, runs, progress).await {
            if let Some(p) = progress.get(&again.group_id) {
                fail_open(
                    shared,
                    p,
                    "landing_conflict",
                    "its fix did not land on the branch even when made again on the updated tip",
                );
            }
        }
    }
}

/// Lands each run's commits in order; returns the groups whose commits
/// conflicted (their unlanded findings back to pending). A landing the
/// user's uncommitted work is in the way of changes nothing and stops the
/// run for the user ([`Shared::halt_for_human`]); its findings wait for
/// `--resume`.
async fn land_runs(
    shared: &Shared,
    runs: Vec<WorktreeRun>,
    progress: &HashMap<String, Progress>,
) -> Vec<PlanGroup> {
    let mut rerun: Vec<PlanGroup> = Vec::new();
    for mut run in runs {
        let Some(p) = progress.get(&run.group.group_id) else {
            continue;
        };
        let Some(made) = run.made.take() else {
            continue;
        };
        p.update(|p| p.phase = "landing".to_owned());
        let commits = made.commits;
        let mut landed_ids = BTreeSet::new();
        let mut stop = None;
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
                    stop = Some(Landing::Conflict(format!(
                        "landing conflicted in {}",
                        paths.join(", ")
                    )));
                    break;
                }
                Ok(CherryPick::Blocked { paths }) => {
                    stop = Some(Landing::Blocked(blocked_reason(fid.as_deref(), &paths)));
                    break;
                }
                Err(e) => {
                    stop = Some(Landing::Conflict(format!("landing failed: {e}")));
                    break;
                }
            }
        }
        match stop {
            None => p.update(|p| p.phase = "done".to_owned()),
            Some(Landing::Conflict(reason)) => {
                p.update(|p| {
                    p.errors.push(ProgressError {
                        finding_id: None,
                        error_type: "landing_conflict".to_owned(),
                        message: format!("{reason}; the group is run again on the updated branch"),
                        timestamp: now(),
                    })
                });
                reset_unlanded(p, &landed_ids);
                rerun.push(run.group.clone());
            }
            Some(Landing::Blocked(reason)) => {
                reset_unlanded(p, &landed_ids);
                shared.halt_for_human(reason);
            }
        }
    }
    rerun
}

/// Why a run's commits stopped landing.
enum Landing {
    /// They conflict with the branch (or git failed).
    Conflict(String),
    /// The user's uncommitted work is in the way.
    Blocked(String),
}

/// What the user is told when their uncommitted work is in the way of a
/// verified fix's landing.
pub(crate) fn blocked_reason(finding: Option<&str>, paths: &[String]) -> String {
    format!(
        "the verified fix{} is not landed: your uncommitted changes to {} are in the way (nothing of them was touched); commit, stash or unstage them, then run again with --resume",
        finding.map(|f| format!(" of {f}")).unwrap_or_default(),
        paths.join(", ")
    )
}

/// Fails every finding of a group that is not completed with `message`.
pub(crate) fn fail_open(shared: &Shared, p: &Progress, kind: &str, message: &str) {
    let open: Vec<String> = p
        .snapshot()
        .findings
        .iter()
        .filter(|f| f.status != ProgressStatus::Completed)
        .map(|f| f.finding_id.clone())
        .collect();
    for id in open {
        p.error(&id, kind, message);
        finish_failed(shared, p, &id, message.to_owned());
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
