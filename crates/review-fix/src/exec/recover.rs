//! What an interrupted run left: in-flight fixes restored, worktrees
//! removed.

use super::*;

/// Folders earlier versions symlinked from the main tree into a worktree:
/// their links are removed before an interrupted run's worktree is, so
/// nothing of the user's is deleted through them.
const LEGACY_LINKED_DIRS: [&str; 3] = ["node_modules", ".venv", "vendor"];

/// On resume: restore in-flight fixes of the main tree and remove the
/// worktrees an interrupted run left.
pub(crate) async fn recover(shared: &Shared) {
    let (in_flight, worktrees) = {
        let active = lock(&shared.active);
        (active.in_flight.clone(), active.worktrees.clone())
    };
    let root = shared.vcs.root().to_path_buf();
    let head = shared.vcs.head().await.ok();
    for f in &in_flight {
        if f.tree != root {
            continue;
        }
        if head.as_ref() == Some(&f.checkpoint.head)
            && let Err(e) = shared.vcs.restore(&f.checkpoint).await
        {
            shared.warn(format!(
                "failed to restore the interrupted fix of {}: {e}",
                f.finding_id
            ));
        }
        // Otherwise the fix was committed before the interruption: the
        // branch log tells, and the tree is clean.
    }
    // Worktrees are recorded before they are made and forgotten after they
    // are removed, so a record may stand for a whole worktree, a dirty one
    // (killed mid-fix), a branch without its folder (killed while git made
    // or removed it), or nothing at all.
    let folder = shared.paths.worktrees();
    for WorktreeRecord { path, branch, .. } in &worktrees {
        for dir in LEGACY_LINKED_DIRS {
            let link = path.join(dir);
            if link
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                let _ = std::fs::remove_file(&link);
            }
        }
        let mut removed = shared.vcs.worktree_remove(path, branch).await;
        // Only a folder the session made: directly inside its worktrees
        // folder (a record naming anything else is not deleted).
        if removed.is_err() && path.parent() == Some(folder.as_path()) && path.file_name().is_some()
        {
            // Killed mid-fix (uncommitted changes) or while git filled it.
            // Nothing in an interrupted run's worktree is kept (its landed
            // fixes are on the branch, the others are redone): its folder
            // goes, and removing the worktree then forgets the rest.
            match std::fs::remove_dir_all(path) {
                Ok(()) => removed = shared.vcs.worktree_remove(path, branch).await,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => shared.warn(format!("failed to delete {}: {e}", path.display())),
            }
        }
        if let Err(e) = removed {
            shared.warn(format!(
                "an interrupted run left worktree {} that could not be removed: {e}",
                path.display()
            ));
        }
    }
    shared.update_active(|a| {
        a.in_flight.clear();
        a.worktrees.clear();
    });
}
