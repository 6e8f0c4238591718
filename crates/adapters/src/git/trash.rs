//! The session's trash in the git adapter: what a checkpoint restore is
//! about to put back or delete, and what a worktree's deletion would lose
//! (modified tracked files and untracked, non-ignored ones), is copied
//! there first (see `orchestrator_core::trash`).

use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use orchestrator_core::trash::{Trash, TrashEntry};
use orchestrator_core::{Checkpoint, Vcs, VcsError};

use super::GitVcs;

/// A trash shared by a [`GitVcs`] and the worktrees made from it, so one
/// given after they were made reaches them too.
#[derive(Debug, Clone, Default)]
pub(super) struct SharedTrash(Arc<RwLock<Option<Arc<Trash>>>>);

impl SharedTrash {
    pub(super) fn set(&self, trash: Option<Arc<Trash>>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = trash;
    }

    pub(super) fn get(&self) -> Option<Arc<Trash>> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl GitVcs {
    /// Saves `files` (relative to this tree's root) into the trash before
    /// a restore to `checkpoint` puts them back or deletes them; nothing
    /// without a trash. Each entry's reason names the checkpoint's own
    /// reason (whose attempt it was), the worktree and the commit gone
    /// back to. A file that cannot be saved stops the restore before it
    /// changes anything.
    pub(super) fn save_before_restore(
        &self,
        files: &[String],
        checkpoint: &Checkpoint,
    ) -> Result<(), VcsError> {
        let Some(trash) = self.trash.get() else {
            return Ok(());
        };
        let tree = self.root.file_name().map_or_else(
            || self.root.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let attempt = checkpoint
            .reason
            .as_ref()
            .map_or_else(|| "an attempt".to_owned(), |r| format!("an attempt at {r}"));
        let reason = format!(
            "rollback of {attempt} in worktree {tree} (back to {})",
            checkpoint.head.short()
        );
        for file in files {
            trash.put(&self.root, file, &reason).map_err(|e| {
                VcsError::Other(format!(
                    "cannot restore: {file} could not be saved to the trash first: {e}"
                ))
            })?;
        }
        Ok(())
    }

    /// [`Vcs::salvage_worktree`]: the dirty files of the worktree at
    /// `path`, by one `git status`, into the trash. A folder git cannot
    /// read (killed while `git worktree add` filled it) has every file
    /// saved but `.git`.
    pub(super) async fn salvage(
        &self,
        path: &Path,
        reason: &str,
    ) -> Result<Vec<TrashEntry>, VcsError> {
        let Some(trash) = self.trash.get() else {
            return Ok(Vec::new());
        };
        let path = self.worktree_path(path);
        let Ok(root) = tokio::fs::canonicalize(&path).await else {
            return Ok(Vec::new());
        };
        let worktree = self.engine_worktree(root);
        let (files, reason) = match worktree.status().await {
            Ok(status) => (status.dirty_paths(), reason.to_owned()),
            Err(e) => (
                every_file(&worktree.root),
                format!("{reason} (git could not read it: {e})"),
            ),
        };
        let mut saved = Vec::new();
        for file in &files {
            let entry = trash.put(&worktree.root, file, &reason).map_err(|e| {
                VcsError::Other(format!(
                    "{file} of worktree {} could not be saved to the trash: {e}",
                    path.display()
                ))
            })?;
            saved.extend(entry);
        }
        Ok(saved)
    }
}

/// Every file and symlink under `root` but `.git`, relative, `/`-separated.
fn every_file(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let full = entry.path();
            if dir == root && entry.file_name() == ".git" {
                continue;
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(full),
                Ok(_) => {
                    if let Ok(rel) = full.strip_prefix(root) {
                        found.push(rel.to_string_lossy().replace('\\', "/"));
                    }
                }
                Err(_) => {}
            }
        }
    }
    found.sort();
    found
}
