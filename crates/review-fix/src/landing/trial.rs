//! Trial trees: a temporary worktree at the branch tip with the candidates
//! cherry-picked on top, built up or restarted as the verifier asks, and a
//! passing trial's commits landed on the checked-out branch.

use super::*;

/// Lands one verified commit of the trial tree on the checked-out branch
/// (unless a commit with its message is there already) and records it.
/// `false` when it did not land because the user's uncommitted work is in
/// the way: nothing was changed, the run is halted for the user
/// ([`Shared::halt_for_human`]) and the fix stays decided in the
/// verification state, for `--resume` to land.
pub(super) async fn land(
    shared: &Shared,
    finding: &str,
    commit: &CommitId,
    progress: &HashMap<String, Progress>,
    on_branch: &mut HashMap<String, CommitId>,
) -> bool {
    let Some(f) = shared.findings.get(finding) else {
        return true;
    };
    let Some(p) = shared
        .plan
        .groups
        .iter()
        .find(|g| g.findings.iter().any(|x| x == finding))
        .and_then(|g| progress.get(&g.group_id))
    else {
        return true;
    };
    let message = commit_message(f);
    let landed = match on_branch.get(&message) {
        Some(c) => Ok(c.clone()),
        None => match shared.vcs.cherry_pick(commit).await {
            Ok(CherryPick::Applied { commit: landed }) => {
                shared.sink.emit(&Event::CommitMade {
                    id: finding.to_owned(),
                    commit: landed.to_string(),
                    summary: message.clone(),
                });
                on_branch.insert(message, landed.clone());
                Ok(landed)
            }
            Ok(CherryPick::Conflict { paths }) => {
                Err(format!("landing conflicted in {}", paths.join(", ")))
            }
            Ok(CherryPick::Blocked { paths }) => {
                shared.halt_for_human(blocked_reason(Some(finding), &paths));
                return false;
            }
            Err(e) => Err(format!("landing failed: {e}")),
        },
    };
    match landed {
        Ok(c) => {
            p.update(|p| {
                if let Some(entry) = p.finding_mut(finding) {
                    entry.status = ProgressStatus::Completed;
                    entry.result = Some(FixResult::Fixed);
                    entry.commit_hash = Some(c.to_string());
                    entry.test_passed = Some(true);
                    entry.completed_at = Some(now());
                    entry.error_message = None;
                }
            });
            shared.sink.emit(&Event::JobFinished {
                id: finding.to_owned(),
                status: JobStatus::Completed,
                detail: Some(format!("committed {}", c.short())),
            });
        }
        Err(message) => {
            p.error(finding, "landing_conflict", &message);
            finish_failed(shared, p, finding, message);
        }
    }
    true
}

/// Lands the next `n` decided fixes with one fast-forward of the branch to
/// the trial tree's commit of the last of them, when the trial tree is
/// built on the branch's tip as it is (nothing was cherry-picked onto the
/// branch since, and the user did not commit). Returns how many landed:
/// `n`, or 0 when the fixes are to land one cherry-pick each (the branch
/// moved, one of them is on it already, or the user's work is in the way:
/// the picks then stop at exactly the fix it blocks, as always).
pub(super) async fn land_fast_forward(
    shared: &Shared,
    trial: &mut Option<TrialTree>,
    queue: &[QueuedFix],
    n: usize,
    progress: &HashMap<String, Progress>,
    on_branch: &mut HashMap<String, CommitId>,
) -> usize {
    let Some(t) = trial.as_mut() else {
        return 0;
    };
    let (Some(onto), Some((_, to))) = (t.base.clone(), t.built.get(n.wrapping_sub(1))) else {
        return 0;
    };
    let fits = t.built.iter().zip(queue).take(n).all(|((fid, _), q)| {
        *fid == q.finding_id
            && shared
                .findings
                .get(fid)
                .is_some_and(|f| !on_branch.contains_key(&commit_message(f)))
    });
    if n < 1 || queue.len() < n || !fits {
        return 0;
    }
    match shared.vcs.fast_forward(&onto, to).await {
        Ok(FastForward::Moved) => {}
        Ok(FastForward::NotPossible | FastForward::Blocked { .. }) | Err(_) => return 0,
    }
    for (fid, commit) in t.built.drain(..n).collect::<Vec<_>>() {
        if let Some(f) = shared.findings.get(&fid) {
            let message = commit_message(f);
            shared.sink.emit(&Event::CommitMade {
                id: fid.clone(),
                commit: commit.to_string(),
                summary: message.clone(),
            });
            on_branch.insert(message, commit.clone());
        }
        land(shared, &fid, &commit, progress, on_branch).await;
        t.base = Some(commit);
    }
    n
}

/// Makes the trial tree hold exactly the queue positions `from..to` on top
/// of the last good state (the branch tip).
pub(super) async fn ensure_built(
    shared: &Shared,
    trial: &mut Option<TrialTree>,
    state: &mut VerifyState,
    from: usize,
    to: usize,
    progress: &HashMap<String, Progress>,
) -> Result<(), BuildError> {
    let want = to.saturating_sub(from);
    if trial
        .as_ref()
        .is_some_and(|t| t.stale || t.built.len() > want)
    {
        close_trial(shared, trial).await;
    }
    if trial.is_none() {
        *trial = Some(open_trial(shared).await.map_err(BuildError::NoTree)?);
    }
    let Some(t) = trial.as_mut() else {
        return Err(BuildError::NoTree("no trial tree".to_owned()));
    };
    // Where a series of picks stopped: that fix is picked alone, to learn
    // why, rather than in a series again.
    let mut stopped = None;
    while t.built.len() < want {
        let position = from + t.built.len();
        if stopped != Some(position) {
            let applied = pick_series(t, &state.queue, position, from + want).await;
            if applied > 0 {
                stopped = Some(position + applied);
                continue;
            }
        }
        let Some(item) = state.queue.get(position).cloned() else {
            break;
        };
        let picked = match &item.commit {
            Some(c) => match t.vcs.cherry_pick(&CommitId(c.clone())).await {
                Ok(CherryPick::Applied { commit }) => Some(commit),
                // The trial tree is the engine's: nothing of the user's is
                // ever in the way there.
                Ok(CherryPick::Conflict { .. } | CherryPick::Blocked { .. }) | Err(_) => None,
            },
            None => None,
        };
        if let Some(commit) = picked {
            t.built.push((item.finding_id.clone(), commit));
            continue;
        }
        // Made again by the agent on this tree: after a drop with the
        // failing output, or because it no longer applies.
        remake(shared, t, state, position, &item, progress).await?;
    }
    Ok(())
}

/// Picks the queued commits from `position` up to `to` (or the first fix
/// with no commit) onto the trial tree as one series; how many applied. A
/// series of one is left to the caller's single pick.
async fn pick_series(t: &mut TrialTree, queue: &[QueuedFix], position: usize, to: usize) -> usize {
    let run: Vec<(String, CommitId)> = queue
        .get(position..to.min(queue.len()))
        .unwrap_or_default()
        .iter()
        .map_while(|item| {
            let commit = item.commit.as_ref()?;
            Some((item.finding_id.clone(), CommitId(commit.clone())))
        })
        .collect();
    if run.len() < 2 {
        return 0;
    }
    let ids: Vec<CommitId> = run.iter().map(|(_, c)| c.clone()).collect();
    let Ok(applied) = t.vcs.cherry_pick_series(&ids).await else {
        return 0;
    };
    let n = applied.len();
    t.built
        .extend(run.into_iter().map(|(finding, _)| finding).zip(applied));
    n
}

/// Makes the fix at queue `position` again with the agent on the trial
/// tree and puts its new commit on top. A fix that cannot be made is
/// removed from the queue (recorded as failed): [`BuildError::Removed`].
async fn remake(
    shared: &Shared,
    t: &mut TrialTree,
    state: &mut VerifyState,
    position: usize,
    item: &QueuedFix,
    progress: &HashMap<String, Progress>,
) -> Result<(), BuildError> {
    let start = match &item.failure {
        Some(failure) => FixStart {
            attempts: item.attempts,
            failure: Some(failure.clone()),
            known: item.failed.clone(),
        },
        None => FixStart {
            attempts: 0,
            failure: None,
            known: item.failed.clone(),
        },
    };
    let group = shared.plan.group(&item.group_id).cloned();
    let finding = shared.findings.get(&item.finding_id).cloned();
    let p = progress.get(&item.group_id);
    let (Some(group), Some(finding), Some(p)) = (group, finding, p) else {
        state.queue.remove(position);
        return Err(BuildError::Removed);
    };
    let tree = Tree {
        vcs: Arc::clone(&t.vcs),
        env: t.env.clone(),
        defer: true,
        land_each: false,
    };
    match fix_one(shared, &group, &tree, p, &finding, start).await {
        Some(committed) => {
            let entry = &mut state.queue[position];
            entry.commit = Some(committed.commit.to_string());
            entry.digest = committed.digest;
            entry.attempts = committed.attempts;
            entry.failure = None;
            t.built.push((item.finding_id.clone(), committed.commit));
            save_state(shared, state);
        }
        None => {
            // Recorded as failed by fix_one.
            state.queue.remove(position);
            return Err(BuildError::Removed);
        }
    }
    Ok(())
}

/// Takes a worktree of the run's pool at the branch tip for trial trees.
pub(super) async fn open_trial(shared: &Shared) -> Result<TrialTree, String> {
    let head = shared
        .vcs
        .head()
        .await
        .map_err(|e| format!("failed to read HEAD: {e}"))?;
    let lease = shared
        .pool
        .acquire(&head)
        .await
        .map_err(|e| format!("the verification worktree: {e}"))?;
    // The slot's Cargo target directory is the slot's own: no other tree
    // uses it while the lease is held.
    let env = crate::exec::lease_env(shared, &lease).await;
    Ok(TrialTree {
        vcs: Arc::clone(&lease.vcs),
        lease,
        env,
        base: Some(head),
        stale: false,
        built: Vec::new(),
    })
}

/// Gives the trial worktree, if any, back to the pool. One left with a
/// change (a build that wrote into tracked files) is replaced by the pool
/// when next taken.
pub(super) async fn close_trial(shared: &Shared, trial: &mut Option<TrialTree>) {
    if let Some(t) = trial.take() {
        shared.pool.release(t.lease);
    }
}
