//! What an interrupted run left: its worktrees removed (whatever they
//! hold: a fix's work there was not landed and is redone; what git would
//! lose is saved to the session's trash first, and the resume says so). The user's tree
//! is never rolled back.

use orchestrator_core::worktree::{delete_worktree_dir, removal_reason};

use super::*;

/// Folders earlier versions symlinked from the main tree into a worktree:
/// their links are removed before an interrupted run's worktree is, so
/// nothing of the user's is deleted through them.
const LEGACY_LINKED_DIRS: [&str; 3] = ["node_modules", ".venv", "vendor"];

/// On resume: remove the worktrees an interrupted run left; in-flight
/// fixes were in them.
pub(crate) async fn recover(shared: &Shared) {
    let (in_flight, worktrees) = {
        let active = lock(&shared.active);
        (active.in_flight.clone(), active.worktrees.clone())
    };
    let root = shared.vcs.root().to_path_buf();
    for f in in_flight.iter().filter(|f| f.tree == root) {
        // An older version fixed in the working tree itself: its half-done
        // change cannot be told from edits the user made since, so nothing
        // is rolled back (the tree check named what is uncommitted).
        shared.warn(format!(
            "the fix of {} was interrupted in the working tree; nothing was rolled back (your edits since cannot be told from its change): review `git status`",
            f.finding_id
        ));
    }
    // Worktrees are recorded before they are made and forgotten after they
    // are removed, so a record may stand for a whole worktree, a dirty one
    // (killed mid-fix), a branch without its folder (killed while git made
    // or removed it), or nothing at all.
    let folders = [shared.paths.worktrees(), shared.pool.dir().to_path_buf()];
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
        // Only a folder the engine made: directly inside the session's
        // worktrees folder or the pool's (a record naming anything else is
        // not deleted).
        if removed.is_err()
            && folders.iter().any(|f| path.parent() == Some(f.as_path()))
            && path.file_name().is_some()
        {
            // Killed mid-fix (uncommitted changes) or while git filled it.
            // Nothing in an interrupted run's worktree is kept (its landed
            // fixes are on the branch, the others are redone): its folder
            // goes, and removing the worktree then forgets the rest.
            let reason = removal_reason(path, " left by a crash");
            match delete_worktree_dir(shared.vcs.as_ref(), path, &reason).await {
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
    if let Some(trash) = shared.vcs.trash() {
        let saved = trash.report();
        if !saved.is_empty() {
            shared.warn(format!(
                "the resume removed worktrees an interrupted run left, and saved their uncommitted files first.\n{}",
                saved.trim_end()
            ));
        }
    }
}
