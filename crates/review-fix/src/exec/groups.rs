//! Groups in the main tree or in worktrees outside the repository, and a
//! stage's verified fixes landed by cherry-pick. The order of stages, and
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
    pub(crate) vcs: Option<Arc<dyn Vcs>>,
    path: PathBuf,
    branch: String,
    linked: Vec<PathBuf>,
}

/// Runs each group in its own worktree and branch from HEAD (at most
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
    let slots = Arc::new(Mutex::new((0..limit).rev().collect::<Vec<usize>>()));
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
        let slots = Arc::clone(&slots);
        let semaphore = Arc::clone(&semaphore);
        let landed = Arc::clone(&landed);
        set.spawn(async move {
            let _permit = semaphore.acquire_owned().await.ok();
            let slot = lock(&slots).pop().unwrap_or(0);
            let run = run_in_worktree(&shared, &group, &p, &base, slot, &landed).await;
            lock(&slots).push(slot);
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

/// Creates the group's worktree and runs the group in it.
pub(super) async fn run_in_worktree(
    shared: &Shared,
    group: &PlanGroup,
    progress: &Progress,
    base: &CommitId,
    slot: usize,
    landed: &HashMap<String, CommitId>,
) -> WorktreeRun {
    let run = lock(&shared.active).run;
    let mut path = shared.paths.worktree(run, &group.group_id);
    let mut n = 1;
    while path.exists() {
        n += 1;
        path = shared
            .paths
            .worktree(run, &format!("{}-{n}", group.group_id));
    }
    let branch = format!(
        "review-fix/{}/{}",
        shared.paths.id(),
        path.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let mut out = WorktreeRun {
        group: group.clone(),
        vcs: None,
        path: path.clone(),
        branch: branch.clone(),
        linked: Vec::new(),
    };
    // Recorded before it is made: a kill while git makes it (which can leave
    // the branch without the folder) leaves a record for the resume.
    shared.update_active(|a| {
        a.worktrees.push(WorktreeRecord {
            group_id: group.group_id.clone(),
            path: path.clone(),
            branch: branch.clone(),
        })
    });
    let vcs = match shared.vcs.worktree_add(&path, &branch, base).await {
        Ok(v) => v,
        Err(e) => {
            // git may have made the branch before failing: undo what it
            // left, and keep the record for a resume when that fails too.
            if shared.vcs.worktree_remove(&path, &branch).await.is_ok() {
                shared.update_active(|a| a.worktrees.retain(|w| w.path != path));
            }
            shared.warn(format!(
                "failed to create a worktree for {} ({e}); it will run in the main tree",
                group.group_id
            ));
            return out;
        }
    };
    out.linked = link_dependency_dirs(shared, &path).await;
    let tree = Tree {
        vcs: Arc::clone(&vcs),
        env: TreeEnv {
            root: path.clone(),
            worktree_slot: Some(slot),
            cargo_target_dir: shared.cargo.then(|| shared.paths.target_dir(slot)),
        },
        is_main: false,
        defer: shared.batch,
    };
    out.vcs = Some(vcs);
    let limit = shared.config.group_time_limit;
    if tokio::time::timeout(limit, run_group(shared, group, &tree, progress, landed))
        .await
        .is_err()
    {
        time_out_group(shared, group, progress, limit).await;
    }
    out
}

/// Links the main tree's ignored dependency folders into a worktree.
pub(crate) async fn link_dependency_dirs(shared: &Shared, worktree: &Path) -> Vec<PathBuf> {
    let root = shared.vcs.root().to_path_buf();
    let untracked: BTreeSet<String> = shared
        .vcs
        .status()
        .await
        .map(|s| s.untracked.into_iter().collect())
        .unwrap_or_default();
    let mut linked = Vec::new();
    for dir in LINKED_DEPENDENCY_DIRS {
        let source = root.join(dir);
        let target = worktree.join(dir);
        let is_untracked = untracked
            .iter()
            .any(|u| u == dir || u.starts_with(&format!("{dir}/")));
        if source.is_dir() && !target.exists() && !is_untracked {
            #[cfg(unix)]
            let made = std::os::unix::fs::symlink(&source, &target);
            #[cfg(not(unix))]
            let made: std::io::Result<()> = Err(std::io::Error::other("symlinks need unix"));
            match made {
                Ok(()) => linked.push(target),
                Err(e) => shared.warn(format!(
                    "failed to link {} into {}: {e}",
                    source.display(),
                    worktree.display()
                )),
            }
        }
    }
    linked
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
    for run in runs {
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
        remove_worktree(shared, &run).await;
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

/// Removes a group's worktree and branch (after unlinking dependency folders).
pub(crate) async fn remove_worktree(shared: &Shared, run: &WorktreeRun) {
    for link in &run.linked {
        let _ = std::fs::remove_file(link);
    }
    match shared.vcs.worktree_remove(&run.path, &run.branch).await {
        Ok(()) => shared.update_active(|a| a.worktrees.retain(|w| w.path != run.path)),
        Err(e) => shared.warn(format!(
            "failed to remove worktree {}: {e}; remove it by hand",
            run.path.display()
        )),
    }
}
