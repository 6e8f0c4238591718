//! [`Vcs`] for `Arc<V>` and `Box<V>`: every method forwarded, so that a
//! shared or boxed implementation keeps its own overrides of the provided
//! methods.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use super::*;

macro_rules! forward_vcs {
    ($ty:ty) => {
        #[async_trait]
        impl<V: Vcs + ?Sized> Vcs for $ty {
            fn root(&self) -> &Path {
                (**self).root()
            }
            async fn status(&self) -> Result<Status, VcsError> {
                (**self).status().await
            }
            async fn head(&self) -> Result<CommitId, VcsError> {
                (**self).head().await
            }
            async fn current_branch(&self) -> Result<Option<String>, VcsError> {
                (**self).current_branch().await
            }
            async fn checkpoint(&self) -> Result<Checkpoint, VcsError> {
                (**self).checkpoint().await
            }
            async fn changed_since(&self, c: &Checkpoint) -> Result<Vec<String>, VcsError> {
                (**self).changed_since(c).await
            }
            async fn restore(&self, c: &Checkpoint) -> Result<Vec<String>, VcsError> {
                (**self).restore(c).await
            }
            async fn commit(&self, paths: &[String], message: &str) -> Result<CommitId, VcsError> {
                (**self).commit(paths, message).await
            }
            async fn log_since(&self, base: &CommitId) -> Result<Vec<CommitInfo>, VcsError> {
                (**self).log_since(base).await
            }
            async fn diff(&self, from: &CommitId, to: &CommitId) -> Result<String, VcsError> {
                (**self).diff(from, to).await
            }
            async fn worktree_add(
                &self,
                path: &Path,
                branch: &str,
                base: &CommitId,
            ) -> Result<Arc<dyn Vcs>, VcsError> {
                (**self).worktree_add(path, branch, base).await
            }
            async fn worktree_remove(&self, path: &Path, branch: &str) -> Result<(), VcsError> {
                (**self).worktree_remove(path, branch).await
            }
            async fn worktree_move(
                &self,
                path: &Path,
                branch: &str,
                base: &CommitId,
            ) -> Result<Arc<dyn Vcs>, VcsError> {
                (**self).worktree_move(path, branch, base).await
            }
            async fn cherry_pick(&self, commit: &CommitId) -> Result<CherryPick, VcsError> {
                (**self).cherry_pick(commit).await
            }
            async fn cherry_pick_series(
                &self,
                commits: &[CommitId],
            ) -> Result<Vec<CommitId>, VcsError> {
                (**self).cherry_pick_series(commits).await
            }
            fn set_trash(&self, trash: Option<Arc<crate::trash::Trash>>) -> bool {
                (**self).set_trash(trash)
            }
            fn trash(&self) -> Option<Arc<crate::trash::Trash>> {
                (**self).trash()
            }
            async fn salvage_worktree(
                &self,
                path: &Path,
                reason: &str,
            ) -> Result<Vec<crate::trash::TrashEntry>, VcsError> {
                (**self).salvage_worktree(path, reason).await
            }
            async fn fast_forward(
                &self,
                onto: &CommitId,
                to: &CommitId,
            ) -> Result<FastForward, VcsError> {
                (**self).fast_forward(onto, to).await
            }
            async fn push(&self, remote: &str, branch: &str) -> Result<PushOutcome, VcsError> {
                (**self).push(remote, branch).await
            }
            async fn push_commit(
                &self,
                remote: &str,
                commit: &CommitId,
                branch: &str,
            ) -> Result<PushOutcome, VcsError> {
                (**self).push_commit(remote, commit, branch).await
            }
            async fn fetch_ref(&self, remote: &str, refname: &str) -> Result<CommitId, VcsError> {
                (**self).fetch_ref(remote, refname).await
            }
            async fn remote_url(&self, name: &str) -> Result<String, VcsError> {
                (**self).remote_url(name).await
            }
            async fn upstream(&self) -> Result<Option<String>, VcsError> {
                (**self).upstream().await
            }
            async fn diff_from(&self, base: &str) -> Result<String, VcsError> {
                (**self).diff_from(base).await
            }
            async fn is_ancestor(&self, c: &CommitId, of: &CommitId) -> Result<bool, VcsError> {
                (**self).is_ancestor(c, of).await
            }
            async fn exclude(&self, pattern: &str) -> Result<(), VcsError> {
                (**self).exclude(pattern).await
            }
        }
    };
}

forward_vcs!(Arc<V>);
forward_vcs!(Box<V>);
