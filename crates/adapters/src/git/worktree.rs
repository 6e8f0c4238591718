//! Worktrees: adding one on a new branch, moving a clean one to a new base
//! (for reuse), and removing it with its branch (also after a crash left
//! only part of it).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_core::{CommitId, Vcs, VcsError};

use super::run::os_args;
use super::{GitVcs, parse};

impl GitVcs {
    /// [`Vcs::worktree_add`]: a new worktree at `path` on a new branch
    /// `branch` from `base`, sharing this value's write lock.
    pub(super) async fn add_worktree(
        &self,
        path: &Path,
        branch: &str,
        base: &CommitId,
    ) -> Result<Arc<dyn Vcs>, VcsError> {
        self.check_branch(branch).await?;
        let base = self.commit_arg(base).await?;
        let path = self.worktree_path(path);
        {
            let _guard = self.write_lock.lock().await;
            let mut argv = os_args(["add", "-b", branch, "--"]);
            argv.push(path.clone().into_os_string());
            argv.push(base.into());
            self.run_ok("worktree", argv).await?;
        }
        let root = tokio::fs::canonicalize(&path).await.map_err(|e| {
            VcsError::Other(format!(
                "cannot resolve the new worktree {}: {e}",
                path.display()
            ))
        })?;
        Ok(Arc::new(self.engine_worktree(root)))
    }

    /// [`Vcs::worktree_move`]: moves a clean worktree on `branch` to
    /// `base` — the index and files by a two-way merge from its commit
    /// (`read-tree -m -u`: tracked files that differ are updated, ignored
    /// files stay, and git refuses rather than overwrite a change or an
    /// untracked file), then the branch, which HEAD stays on, by
    /// compare-and-swap. One `git status` after the move checks that the
    /// tree is clean at `base` on `branch`; anything else there (a change
    /// nobody committed, a file the new base no longer ignores) moves it
    /// back, and the move is refused. That status is all a new task's
    /// checkpoint needs (the contract of [`Vcs::worktree_move`]), so a move
    /// costs three processes and the checkpoint none.
    pub(super) async fn move_worktree(
        &self,
        path: &Path,
        branch: &str,
        base: &CommitId,
    ) -> Result<Arc<dyn Vcs>, VcsError> {
        // Beyond this, the branch is checked against the one HEAD is on
        // (git's own branch, so a valid name), or the move is refused.
        super::refs::refuse_option_like_branch(branch)?;
        let base = CommitId(self.commit_arg(base).await?);
        let path = self.worktree_path(path);
        let root = tokio::fs::canonicalize(&path).await.map_err(|e| {
            VcsError::Other(format!("cannot find the worktree {}: {e}", path.display()))
        })?;
        let main = tokio::fs::canonicalize(&self.root)
            .await
            .unwrap_or_else(|_| self.root.clone());
        if root == main {
            return Err(VcsError::Other(format!(
                "refusing to reset {}: it is the working tree itself, not a worktree made for the engine",
                root.display()
            )));
        }
        let worktree = self.engine_worktree(root);
        let old = worktree.commit_of_branch_at_head(branch, &path).await?;
        self.move_files_and_branch(&worktree, branch, &old, &base)
            .await?;
        if let Err(refused) = worktree.refuse_unless_clean_at(branch, &base, &path).await {
            // Back where it was: a refused move changes nothing.
            return Err(
                match self
                    .move_files_and_branch(&worktree, branch, &base, &old)
                    .await
                {
                    Ok(()) => refused,
                    Err(e) => VcsError::Other(format!(
                        "{refused}; moving it back to {} failed too: {e}",
                        old.short()
                    )),
                },
            );
        }
        Ok(Arc::new(worktree))
    }

    /// The commit of `branch`, which HEAD of this engine worktree (found
    /// at `path`) must be on: read from git's files, else from a `git
    /// status` that also refuses a tree that is not clean.
    async fn commit_of_branch_at_head(
        &self,
        branch: &str,
        path: &Path,
    ) -> Result<CommitId, VcsError> {
        if let Some((head, Some(on))) = super::head_files::head_and_branch_from_files(&self.root)
            && on == branch
        {
            return Ok(head);
        }
        self.refuse_unless_clean_on(branch, "reset", path)
            .await?
            .ok_or_else(|| {
                VcsError::Other(format!(
                    "refusing to reset worktree {}: its branch `{branch}` has no commit",
                    path.display()
                ))
            })
    }

    /// Moves `worktree`'s index and files from `from` to `to` (a two-way
    /// merge that refuses rather than overwrite anything that is not
    /// `from`'s), then its `branch` from `from` to `to`.
    async fn move_files_and_branch(
        &self,
        worktree: &GitVcs,
        branch: &str,
        from: &CommitId,
        to: &CommitId,
    ) -> Result<(), VcsError> {
        let _guard = self.write_lock.lock().await;
        worktree
            .run_ok(
                "read-tree",
                os_args(["-m", "-u", from.as_str(), to.as_str()]),
            )
            .await?;
        let reference = format!("refs/heads/{branch}");
        worktree
            .run_ok(
                "update-ref",
                os_args([&reference, to.as_str(), from.as_str()]),
            )
            .await?;
        Ok(())
    }

    /// [`GitVcs::refuse_unless_clean_on`] a moved worktree, which must also
    /// be at `base`.
    async fn refuse_unless_clean_at(
        &self,
        branch: &str,
        base: &CommitId,
        path: &Path,
    ) -> Result<(), VcsError> {
        let head = self.refuse_unless_clean_on(branch, "reset", path).await?;
        if head.as_ref() != Some(base) {
            return Err(VcsError::Other(format!(
                "refusing to reset worktree {}: it is at {}, not at {} after the move",
                path.display(),
                head.map_or("no commit".to_owned(), |h| h.short().to_owned()),
                base.short()
            )));
        }
        Ok(())
    }

    /// Refuses to `verb` (reset, remove) this engine worktree, found at
    /// `path`, unless it is clean and on `branch`: anything else there is
    /// not what the engine left, so it is not the engine's to change.
    /// Returns its HEAD commit (`None` on a branch with no commit). One
    /// `git status` reads all three.
    async fn refuse_unless_clean_on(
        &self,
        branch: &str,
        verb: &str,
        path: &Path,
    ) -> Result<Option<CommitId>, VcsError> {
        let parse::BranchStatus {
            head,
            branch: on,
            status,
        } = self.branch_status().await?;
        if !status.is_clean() {
            return Err(VcsError::Other(format!(
                "refusing to {verb} worktree {}: it has uncommitted changes ({})",
                path.display(),
                status.dirty_paths().join(", ")
            )));
        }
        if on.as_deref() != Some(branch) {
            return Err(VcsError::Other(format!(
                "refusing to {verb} worktree {}: it is on {}, not on branch `{branch}`",
                path.display(),
                on.map_or("a detached HEAD".to_owned(), |b| format!("branch `{b}`"))
            )));
        }
        Ok(head.map(CommitId))
    }

    /// [`Vcs::worktree_remove`]: removes a clean worktree on `branch`, then
    /// the branch.
    pub(super) async fn remove_worktree(&self, path: &Path, branch: &str) -> Result<(), VcsError> {
        self.check_branch(branch).await?;
        let path = self.worktree_path(path);
        if tokio::fs::symlink_metadata(&path)
            .await
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            return self.forget_worktree(&path, branch).await;
        }
        let root = tokio::fs::canonicalize(&path).await.map_err(|e| {
            VcsError::Other(format!("cannot find the worktree {}: {e}", path.display()))
        })?;
        let worktree = self.engine_worktree(root);
        worktree
            .refuse_unless_clean_on(branch, "remove", &path)
            .await?;
        let _guard = self.write_lock.lock().await;
        let mut argv = os_args(["remove", "--"]);
        argv.push(worktree.root.clone().into_os_string());
        self.run_ok("worktree", argv).await?;
        // The branch was created by worktree_add for this worktree only; its
        // commits have been cherry-picked (new ids), so `-d` would refuse.
        self.run_ok("branch", os_args(["-D", "--", branch])).await?;
        Ok(())
    }

    /// [`Vcs::worktree_remove`] of a worktree whose directory is gone (a
    /// crash after `git worktree remove` but before `git branch -D`, or
    /// before `git worktree add` ran): drops git's record of the worktree,
    /// if it has one, and deletes the branch, if it exists.
    pub(super) async fn forget_worktree(&self, path: &Path, branch: &str) -> Result<(), VcsError> {
        // git lists a worktree by its real path; the directory is gone, so
        // resolve its parent.
        let wanted = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => tokio::fs::canonicalize(parent)
                .await
                .map_or_else(|_| path.to_owned(), |p| p.join(name)),
            _ => path.to_owned(),
        };
        let _guard = self.write_lock.lock().await;
        let listing = self
            .run_ok("worktree", os_args(["list", "--porcelain"]))
            .await?;
        let registered = String::from_utf8_lossy(&listing)
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .any(|p| Path::new(p) == wanted);
        if registered {
            let mut argv = os_args(["remove", "--"]);
            argv.push(wanted.into_os_string());
            self.run_ok("worktree", argv).await?;
        }
        let branch_exists = self
            .run(
                "rev-parse",
                os_args(["--verify", "--quiet", &format!("refs/heads/{branch}")]),
                None,
            )
            .await?
            .status
            .success();
        if branch_exists {
            self.run_ok("branch", os_args(["-D", "--", branch])).await?;
        }
        Ok(())
    }

    /// The path of a worktree given to `worktree_add`/`worktree_remove`:
    /// relative paths are taken from this work tree's root.
    pub(super) fn worktree_path(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.root.join(path)
        }
    }
}
