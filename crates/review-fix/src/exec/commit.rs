//! The end of a finding's attempts: its write-set committed and recorded
//! (progress and events), or the finding left pending when the run stopped
//! at its limit.

use super::*;

/// A finding the run stopped at (a run limit): back to pending, its tree
/// already restored, so `--resume` starts it afresh.
pub(super) fn leave_pending(shared: &Shared, progress: &Progress, id: &str) {
    shared.forget_in_flight(|f| f.finding_id == id);
    progress.finding(id, |f| {
        f.status = ProgressStatus::Pending;
        f.result = None;
        f.test_passed = None;
        f.commit_hash = None;
    });
    progress.update(|p| {
        p.current_finding = None;
        p.flow_control = FlowControl::default();
    });
    shared.sink.emit(&Event::JobFinished {
        id: id.to_owned(),
        status: JobStatus::Skipped,
        detail: Some("not started: the run stopped at its limit".to_owned()),
    });
}

/// Lands a fix committed in a worktree on the checked-out branch at once
/// (see [`Tree::land_each`]): the landed commit, or why not. A landing the
/// user's uncommitted work is in the way of changes nothing and stops the
/// run for the user.
async fn land_now(
    shared: &Shared,
    id: &str,
    commit: &CommitId,
    message: &str,
) -> Result<CommitId, String> {
    match shared.vcs.cherry_pick(commit).await {
        Ok(CherryPick::Applied { commit }) => {
            shared.sink.emit(&Event::CommitMade {
                id: id.to_owned(),
                commit: commit.to_string(),
                summary: message.to_owned(),
            });
            Ok(commit)
        }
        Ok(CherryPick::Blocked { paths }) => {
            let reason = blocked_reason(Some(id), &paths);
            shared.halt_for_human(reason.clone());
            Err(reason)
        }
        Ok(CherryPick::Conflict { paths }) => Err(format!(
            "the verified fix does not land on the branch: it conflicts in {} with what was committed there since",
            paths.join(", ")
        )),
        Err(e) => Err(format!("the verified fix could not be landed: {e}")),
    }
}

/// Commits exactly the write-set.
pub(super) async fn commit_fix(
    shared: &Shared,
    tree: &Tree,
    progress: &Progress,
    finding: &Finding,
    write_set: &[String],
    checkpoint: &Checkpoint,
) -> Result<CommitId, String> {
    let id = finding.id.to_string();
    progress.step(
        "commit_changes",
        "committing",
        "Creating git commit for successful fix",
    );
    let message = commit_message(finding);
    match tree.vcs.commit(write_set, &message).await {
        Ok(commit) if tree.defer => {
            progress.end_step("completed");
            // Committed untested: the finding waits for verification.
            progress.finding(&id, |f| {
                f.commit_hash = Some(commit.to_string());
                f.error_message = None;
            });
            progress.update(|p| {
                p.current_finding = None;
                p.flow_control = FlowControl::default();
            });
            Ok(commit)
        }
        Ok(commit) => {
            progress.end_step("completed");
            let commit = if tree.land_each {
                match land_now(shared, &id, &commit, &message).await {
                    Ok(landed) => landed,
                    Err(reason) => return Err(reason),
                }
            } else {
                commit
            };
            progress.finding(&id, |f| {
                f.status = ProgressStatus::Completed;
                f.result = Some(FixResult::Fixed);
                f.commit_hash = Some(commit.to_string());
                f.test_passed = Some(true);
                f.completed_at = Some(now());
                f.error_message = None;
            });
            progress.update(|p| {
                p.current_finding = None;
                p.flow_control = FlowControl::default();
            });
            shared.sink.emit(&Event::JobFinished {
                id,
                status: JobStatus::Completed,
                detail: Some(format!("committed {}", commit.short())),
            });
            Ok(commit)
        }
        Err(e) => {
            progress.end_step("failed");
            let mut msg = format!("failed to commit the fix: {e}");
            if let Err(undo) = tree.vcs.restore(checkpoint).await {
                // The tree keeps a change nobody accounted for: stop (the
                // worktree is the engine's; the pool replaces it).
                msg.push_str(&format!(
                    "; and its change could not be rolled back in {}: {undo}",
                    tree.env.root.display()
                ));
                shared.halt_for_human(format!(
                    "{msg}; the run stops, --resume starts the fix again"
                ));
            }
            progress.error(&id, "vcs_error", &msg);
            Err(msg)
        }
    }
}
