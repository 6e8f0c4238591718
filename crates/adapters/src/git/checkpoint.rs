//! Checkpoints: taking one (HEAD and the dirty files' digests), listing
//! what changed since, and restoring the work tree to it.

use std::collections::BTreeSet;

use orchestrator_core::{Checkpoint, CommitId, Vcs, VcsError};

use super::{GitVcs, parse};

impl GitVcs {
    /// [`Vcs::checkpoint`]: HEAD and the digests of the dirty files.
    pub(super) async fn take_checkpoint(&self) -> Result<Checkpoint, VcsError> {
        let (status, head) = self.status_and_head().await?;
        let dirty = self.digests(&status.dirty_paths()).await?;
        Ok(Checkpoint::new(head, dirty))
    }

    /// [`Vcs::changed_since`]: the files changed since `checkpoint`, failing
    /// when a file dirty at the checkpoint was touched.
    pub(super) async fn changed_since_checkpoint(
        &self,
        checkpoint: &Checkpoint,
    ) -> Result<Vec<String>, VcsError> {
        let (changed, touched) = self.compare(checkpoint).await?;
        if !touched.is_empty() {
            return Err(VcsError::TouchedDirty { paths: touched });
        }
        Ok(changed)
    }

    /// [`Vcs::restore`]: puts the files changed since `checkpoint` back,
    /// deleting the untracked ones created since (each saved to the trash
    /// first, when there is one).
    pub(super) async fn restore_checkpoint(
        &self,
        checkpoint: &Checkpoint,
    ) -> Result<Vec<String>, VcsError> {
        let _guard = self.write_lock.lock().await;
        let head = self.head().await?;
        if head != checkpoint.head {
            return Err(VcsError::Other(format!(
                "cannot restore: HEAD moved from {} to {} since the checkpoint",
                checkpoint.head.short(),
                head.short()
            )));
        }
        // Fails with TouchedDirty before anything is changed.
        let changed = self.changed_since(checkpoint).await?;
        let (nested, files): (Vec<String>, Vec<String>) =
            changed.into_iter().partition(|p| p.ends_with('/'));
        for dir in &nested {
            tracing::warn!(path = %dir, "not removing a nested repository created since the checkpoint");
        }
        if files.is_empty() {
            return Ok(files);
        }
        // Their bytes go to the session's trash before any is changed; a
        // restore that fails then names where they are.
        self.save_before_restore(&files, checkpoint)?;
        self.put_back(&head, files).await.map_err(|e| match self.trash.get() {
            Some(trash) => VcsError::Other(format!(
                "{e} (what it was restoring was saved first: orchestrator trash list {}, in {})",
                trash.session(),
                trash.dir().display()
            )),
            None => e,
        })
    }

    /// The rest of a restore to `head`: untracked `files` deleted, the
    /// others put back from `head`.
    pub(super) async fn put_back(
        &self,
        head: &CommitId,
        files: Vec<String>,
    ) -> Result<Vec<String>, VcsError> {
        let in_head: BTreeSet<String> = parse::nul_list(
            &self
                .run_paths(
                    "ls-tree",
                    &["-r", "-z", "--name-only", "--full-tree", &head.0],
                    &files,
                )
                .await?,
        )?
        .into_iter()
        .collect();
        let in_index: BTreeSet<String> = parse::nul_list(
            &self
                .run_paths("ls-files", &["-z", "--cached"], &files)
                .await?,
        )?
        .into_iter()
        .collect();
        let (known, untracked): (Vec<String>, Vec<String>) = files
            .iter()
            .cloned()
            .partition(|p| in_head.contains(p) || in_index.contains(p));
        // Files created since the checkpoint and never added: delete them.
        for path in &untracked {
            let full = self.root.join(path);
            match tokio::fs::remove_file(&full).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(VcsError::Other(format!(
                        "failed to remove {} (created since the checkpoint): {e}",
                        full.display()
                    )));
                }
            }
        }
        // Everything git knows: back to the checkpoint's HEAD, index and
        // work tree; files absent from HEAD are removed (no-overlay mode).
        if !known.is_empty() {
            let source = format!("--source={}", head.0);
            self.run_paths("restore", &[&source, "--staged", "--worktree"], &known)
                .await?;
        }
        Ok(files)
    }

    /// The files changed since `checkpoint` (sorted) and the pre-dirty files
    /// whose content changed.
    pub(super) async fn compare(
        &self,
        checkpoint: &Checkpoint,
    ) -> Result<(Vec<String>, Vec<String>), VcsError> {
        let (status, head) = self.status_and_head().await?;
        *self
            .untracked_seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = status.untracked.clone();
        let mut candidates: BTreeSet<String> = status.dirty_paths().into_iter().collect();
        if head != checkpoint.head {
            let base = self.resolve_commit(&checkpoint.head).await?;
            candidates.extend(self.diff_names(&[&base]).await?);
        }
        let changed = candidates
            .into_iter()
            .filter(|p| !checkpoint.dirty.contains_key(p))
            .collect();
        let now = self.digests(checkpoint.dirty.keys()).await?;
        let touched = checkpoint
            .dirty
            .iter()
            .filter(|(path, then)| now.get(*path) != Some(*then))
            .map(|(path, _)| path.clone())
            .collect();
        Ok((changed, touched))
    }
}
