//! The [`Vcs`] trait: the version-control operations flows need, and no more.
//!
//! The API is shaped so that the engine cannot destroy work it did not create:
//! there is no reset, no checkout of a directory, no amend and no force push —
//! not as a flag, not as a method. Rollback is [`Vcs::restore`] of a
//! [`Checkpoint`]: it puts back exactly the files changed since the checkpoint
//! (changed files restored, created files removed, deleted files brought back)
//! and refuses to touch a file that was already dirty when the checkpoint was
//! taken. Paths are repository-relative with `/` separators.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

mod forward;
mod path;

pub use path::check_relative_path;

/// A commit id (a full hash for git).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CommitId(pub String);

impl CommitId {
    /// Borrow the id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 7 characters, for display.
    pub fn short(&self) -> &str {
        let end = self
            .0
            .char_indices()
            .nth(7)
            .map_or(self.0.len(), |(i, _)| i);
        &self.0[..end]
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// The working tree's state relative to HEAD.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Tracked files whose working-tree content differs from HEAD (including
    /// deleted ones) or that are staged.
    pub modified: Vec<String>,
    /// Files that are not tracked and not ignored.
    pub untracked: Vec<String>,
}

impl Status {
    /// Whether the tree has no modified and no untracked files.
    pub fn is_clean(&self) -> bool {
        self.modified.is_empty() && self.untracked.is_empty()
    }

    /// Every dirty path (modified and untracked), sorted.
    pub fn dirty_paths(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .modified
            .iter()
            .chain(self.untracked.iter())
            .cloned()
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

/// A content digest of one working-tree file at checkpoint time; `None`
/// means the file did not exist.
pub type ContentDigest = Option<String>;

/// A point to roll back to. Taken before an agent changes files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// HEAD when the checkpoint was taken.
    pub head: CommitId,
    /// Files that were dirty at the checkpoint, with a digest of their content
    /// then. Restore never touches them; a change to one is an error.
    pub dirty: BTreeMap<String, ContentDigest>,
    /// What the checkpoint was taken for, in words (`finding F3 (unused
    /// import)`), set by the flow with [`Checkpoint::with_reason`]: a
    /// [`Vcs::restore`] to it names this in each path it saves to the
    /// trash, so a trash entry says whose rollback saved it. `None`: an
    /// attempt nobody named. Absent from state written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Checkpoint {
    /// A checkpoint at `head` with the `dirty` files' digests, for no
    /// named reason.
    pub fn new(head: CommitId, dirty: BTreeMap<String, ContentDigest>) -> Self {
        Self {
            head,
            dirty,
            reason: None,
        }
    }

    /// This checkpoint, taken for `reason` (see [`Checkpoint::reason`]).
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }
}

/// The result of applying one commit onto the current branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum CherryPick {
    /// Applied; the new commit.
    Applied {
        /// The commit created on the current branch.
        commit: CommitId,
    },
    /// The commit does not apply; nothing was changed (the attempt was aborted).
    Conflict {
        /// Files that conflicted.
        paths: Vec<String>,
    },
    /// Uncommitted work in this tree stands in the way — a path the commit
    /// changes is modified there, or changes are staged — so nothing was
    /// changed: the work is the user's, and landing over it could lose or
    /// commit it.
    Blocked {
        /// The paths in the way (the commit's modified paths, then the
        /// staged ones).
        paths: Vec<String>,
    },
}

/// The result of moving the current branch forward to a descendant of its
/// tip ([`Vcs::fast_forward`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum FastForward {
    /// The branch, the index and the tracked files are at the target.
    Moved,
    /// Not done, nothing changed: the branch is not where the caller said
    /// (the user committed meanwhile), the target does not descend from
    /// it, or the repository cannot. Land commit by commit instead.
    NotPossible,
    /// Uncommitted work in this tree stands in the way, as for
    /// [`CherryPick::Blocked`]; nothing changed.
    Blocked {
        /// The paths in the way.
        paths: Vec<String>,
    },
}

/// The result of a push. There is no force variant: a rejected push is
/// reported, never overridden.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum PushOutcome {
    /// The remote accepted the push.
    Pushed,
    /// The remote refused it (non-fast-forward, protected branch, hook).
    Rejected {
        /// The remote's reason.
        reason: String,
    },
}

/// One commit, as compared by crash-resume tests: message and tree, since
/// hashes carry timestamps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInfo {
    /// The commit id.
    pub id: CommitId,
    /// The full message.
    pub message: String,
    /// The tree id (content address of the whole snapshot).
    pub tree: String,
}

/// Why a VCS operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VcsError {
    /// The VCS command failed.
    #[error("`{command}` failed with {status}: {stderr}")]
    Command {
        /// The command line (arguments joined with spaces, for display only).
        command: String,
        /// The exit status, as text.
        status: String,
        /// The command's standard error, trimmed.
        stderr: String,
    },
    /// A change touched a file that was dirty before the checkpoint; nothing
    /// was restored.
    #[error("refusing to restore: {} changed, but they were already dirty before the checkpoint", paths.join(", "))]
    TouchedDirty {
        /// The pre-existing dirty files that changed.
        paths: Vec<String>,
    },
    /// A path leaves the repository or is otherwise not allowed.
    #[error("path `{path}` is not allowed: {reason}")]
    BadPath {
        /// The offending path.
        path: String,
        /// Why.
        reason: String,
    },
    /// Commit was asked with nothing to commit.
    #[error("nothing to commit in {}", paths.join(", "))]
    NothingToCommit {
        /// The paths given.
        paths: Vec<String>,
    },
    /// Anything else (I/O on the working tree, a missing commit, …).
    #[error("{0}")]
    Other(String),
}

/// Version control for one working tree. Object-safe: flows hold `Arc<dyn Vcs>`.
///
/// Contract (checked by the conformance suite in `conformance::vcs`):
/// - `status` lists modified and untracked files, never ignored or
///   engine-excluded ones;
/// - `restore` brings back exactly the files changed since the checkpoint and
///   leaves every file that was dirty at the checkpoint byte-identical;
/// - `commit` commits exactly the given paths, with the message passed as data
///   (quotes, `$(…)`, newlines and unicode survive unchanged);
/// - `push` never forces.
///
/// Required: the methods every flow needs (status, checkpoints, commits,
/// history). Optional, with a default that reports "not supported": `diff`,
/// `worktree_add`/`worktree_remove`/`worktree_move`, `push` and the remote
/// and base helpers (`push_commit`, `fetch_ref`, `remote_url`, `upstream`,
/// `diff_from`), so a new optional method
/// can be added without breaking an implementation outside this crate.
#[async_trait]
pub trait Vcs: Send + Sync + fmt::Debug {
    /// Root of the working tree.
    fn root(&self) -> &Path;

    /// The working tree's state.
    async fn status(&self) -> Result<Status, VcsError>;

    /// The current HEAD commit.
    async fn head(&self) -> Result<CommitId, VcsError>;

    /// The checked-out branch, `None` when HEAD is detached.
    async fn current_branch(&self) -> Result<Option<String>, VcsError>;

    /// Records HEAD and the dirty files, so that a later [`Vcs::restore`] can
    /// undo exactly what changed after this point.
    async fn checkpoint(&self) -> Result<Checkpoint, VcsError>;

    /// Files changed since the checkpoint (the write-set), sorted.
    /// Errors with [`VcsError::TouchedDirty`] when a pre-dirty file changed.
    async fn changed_since(&self, checkpoint: &Checkpoint) -> Result<Vec<String>, VcsError>;

    /// Undoes every change since the checkpoint; returns the paths restored.
    /// HEAD must not have moved since the checkpoint. With a trash
    /// ([`Vcs::set_trash`]) each path is saved there first, its entry's
    /// reason naming the checkpoint's [`Checkpoint::reason`].
    async fn restore(&self, checkpoint: &Checkpoint) -> Result<Vec<String>, VcsError>;

    /// Commits exactly `paths` (additions, changes and deletions) with
    /// `message`, on the current branch.
    async fn commit(&self, paths: &[String], message: &str) -> Result<CommitId, VcsError>;

    /// Commits reachable from HEAD but not from `base`, oldest first.
    async fn log_since(&self, base: &CommitId) -> Result<Vec<CommitInfo>, VcsError>;

    /// The changes from commit `from` to commit `to` as a unified diff: per
    /// changed file, sorted by path, `--- a/<path>` / `+++ b/<path>`
    /// headers (`/dev/null` for an added or deleted side) and `@@` hunks
    /// with three lines of context. Empty when the trees are equal. For
    /// showing a change (to an agent, in a report), not for applying it:
    /// binary files may be summarized.
    ///
    /// Default: unsupported (an error); flows show no diff then (ci-autofix
    /// warns and goes on).
    async fn diff(&self, from: &CommitId, to: &CommitId) -> Result<String, VcsError> {
        let _ = (from, to);
        Err(unsupported("diff"))
    }

    /// Creates a worktree at `path` on a new branch `branch` starting at
    /// `base`, and returns a `Vcs` for it.
    ///
    /// Default: unsupported (an error); review-fix then runs the groups one
    /// after another in the main tree, ci-autofix refuses a dirty tree.
    async fn worktree_add(
        &self,
        path: &Path,
        branch: &str,
        base: &CommitId,
    ) -> Result<Arc<dyn Vcs>, VcsError> {
        let _ = (path, branch, base);
        Err(unsupported("worktree_add"))
    }

    /// Removes a worktree created by [`Vcs::worktree_add`] and deletes its
    /// branch. Refuses when the worktree has uncommitted changes. When the
    /// worktree's directory is already gone (a crash part-way through a
    /// removal, or before the worktree was made), forgets whatever is left —
    /// the worktree's registration, the branch — and succeeds, so removing
    /// is safe to repeat.
    ///
    /// `branch` is deleted even when it holds commits merged nowhere (a
    /// worktree's branch is scratch: its commits were landed by cherry-pick
    /// or are redone), unless it is checked out somewhere. Pass only the
    /// branch [`Vcs::worktree_add`] made for `path`.
    ///
    /// Default: unsupported (an error), which is right for a `Vcs` that
    /// keeps the default `worktree_add`: it never made a worktree.
    async fn worktree_remove(&self, path: &Path, branch: &str) -> Result<(), VcsError> {
        let _ = (path, branch);
        Err(unsupported("worktree_remove"))
    }

    /// Moves a worktree made by [`Vcs::worktree_add`] at `path`, still on
    /// its `branch` and with no uncommitted change, to `base`: the branch
    /// is set to `base` and the tracked files follow, while ignored files
    /// (provided dependencies, a build folder) stay. Returns a `Vcs` for
    /// the worktree. Refuses, changing nothing, when the worktree has a
    /// change or an untracked file, is on another branch, or is this
    /// working tree itself.
    ///
    /// On success the moved worktree is clean at `base`: no change and no
    /// untracked file (an implementation checks this after the move, and
    /// refuses otherwise), so its checkpoint is
    /// `Checkpoint::new(base, no dirty files)` without a read.
    ///
    /// Default: unsupported (an error); a [`crate::worktree::WorktreePool`]
    /// then removes the worktree and makes a new one.
    async fn worktree_move(
        &self,
        path: &Path,
        branch: &str,
        base: &CommitId,
    ) -> Result<Arc<dyn Vcs>, VcsError> {
        let _ = (path, branch, base);
        Err(unsupported("worktree_move"))
    }

    /// Gives this working tree, and every worktree made from it (before or
    /// after), `trash`: from then on a [`Vcs::restore`] copies each path
    /// it is about to restore or delete there first, and
    /// [`Vcs::salvage_worktree`] saves a worktree's uncommitted files.
    /// `None` takes it away. Returns whether this `Vcs` keeps a trash.
    ///
    /// Default: no trash (`false`); reverts happen as before.
    fn set_trash(&self, trash: Option<Arc<crate::trash::Trash>>) -> bool {
        let _ = trash;
        false
    }

    /// The trash [`Vcs::set_trash`] gave, if any.
    fn trash(&self) -> Option<Arc<crate::trash::Trash>> {
        None
    }

    /// Before a worktree folder at `path` is deleted whatever it holds:
    /// copies what git would lose — modified tracked files and untracked,
    /// non-ignored ones — into the trash, each with `reason`, and returns
    /// the entries (none for a clean worktree, a missing folder, or no
    /// trash).
    ///
    /// Default: nothing saved.
    async fn salvage_worktree(
        &self,
        path: &Path,
        reason: &str,
    ) -> Result<Vec<crate::trash::TrashEntry>, VcsError> {
        let _ = (path, reason);
        Ok(Vec::new())
    }

    /// Applies `commit` onto the current branch as a new commit. Never
    /// touches uncommitted work: when a path the commit changes is
    /// modified in the working tree, or anything is staged, it answers
    /// [`CherryPick::Blocked`] and changes nothing.
    async fn cherry_pick(&self, commit: &CommitId) -> Result<CherryPick, VcsError>;

    /// Applies `commits` in order onto the current branch, as
    /// [`Vcs::cherry_pick`] would one by one, and stops at the first that
    /// does not apply ([`CherryPick::Conflict`], [`CherryPick::Blocked`] or
    /// an error), leaving the tree at the last one applied. Returns the new
    /// commits of those applied, in order: a prefix of `commits`' length.
    /// The caller learns why the next one stopped by picking it alone.
    ///
    /// Default: [`Vcs::cherry_pick`] in a loop. An adapter may apply a
    /// series at once where nothing of the user's can be in the way.
    async fn cherry_pick_series(&self, commits: &[CommitId]) -> Result<Vec<CommitId>, VcsError> {
        Ok(cherry_pick_one_by_one(self, commits).await)
    }

    /// Moves the current branch from `onto` (its tip, as the caller last
    /// saw it) to `to`, a descendant, as a fast-forward: the commits between
    /// land as they are, with their ids. Never touches uncommitted work: a
    /// path the commits change that is modified here, anything staged, or
    /// an ignored file where they add one answers [`FastForward::Blocked`]
    /// and changes nothing, as [`Vcs::cherry_pick`] does.
    ///
    /// Default: [`FastForward::NotPossible`] (the caller cherry-picks).
    async fn fast_forward(&self, onto: &CommitId, to: &CommitId) -> Result<FastForward, VcsError> {
        let _ = (onto, to);
        Ok(FastForward::NotPossible)
    }

    /// Pushes `branch` to `remote` as a fast-forward. There is no way to force.
    ///
    /// Default: unsupported (an error); only ci-autofix's PR mode pushes.
    async fn push(&self, remote: &str, branch: &str) -> Result<PushOutcome, VcsError> {
        let _ = (remote, branch);
        Err(unsupported("push"))
    }

    /// Pushes `commit` to `branch` of `remote` (a remote's name or URL) as a
    /// fast-forward, whatever is checked out here. There is no way to force.
    ///
    /// Default: unsupported (an error); ci-autofix pushes a pull request's
    /// fix to the PR's head branch with it.
    async fn push_commit(
        &self,
        remote: &str,
        commit: &CommitId,
        branch: &str,
    ) -> Result<PushOutcome, VcsError> {
        let _ = (remote, commit, branch);
        Err(unsupported("push_commit"))
    }

    /// Fetches one ref (`refs/pull/7/head`) from `remote` without updating
    /// any local ref, and returns the commit it names.
    ///
    /// Default: unsupported (an error).
    async fn fetch_ref(&self, remote: &str, refname: &str) -> Result<CommitId, VcsError> {
        let _ = (remote, refname);
        Err(unsupported("fetch_ref"))
    }

    /// The URL of remote `name`.
    ///
    /// Default: unsupported (an error).
    async fn remote_url(&self, name: &str) -> Result<String, VcsError> {
        let _ = name;
        Err(unsupported("remote_url"))
    }

    /// The checked-out branch's upstream (`origin/main`), `None` when it has
    /// none (or HEAD is detached).
    ///
    /// Default: unsupported (an error).
    async fn upstream(&self) -> Result<Option<String>, VcsError> {
        Err(unsupported("upstream"))
    }

    /// The working change since the branch left `base`: the tracked files'
    /// diff (committed and uncommitted) against the merge base of `base`
    /// and HEAD, in the format of [`Vcs::diff`].
    ///
    /// Default: unsupported (an error).
    async fn diff_from(&self, base: &str) -> Result<String, VcsError> {
        let _ = base;
        Err(unsupported("diff_from"))
    }

    /// Whether `commit` is `of` or one of its ancestors (`false` for a
    /// commit the repository does not have).
    ///
    /// Default: unsupported (an error).
    async fn is_ancestor(&self, commit: &CommitId, of: &CommitId) -> Result<bool, VcsError> {
        let _ = (commit, of);
        Err(unsupported("is_ancestor"))
    }

    /// Makes sure `pattern` (an engine-owned folder such as `.review/`) is
    /// ignored locally (`.git/info/exclude` for git), so it never counts as
    /// dirty and is never committed.
    async fn exclude(&self, pattern: &str) -> Result<(), VcsError>;
}

/// [`Vcs::cherry_pick_series`] one commit at a time: [`Vcs::cherry_pick`]
/// until the first that does not apply; the new commits of those applied.
pub async fn cherry_pick_one_by_one<V: Vcs + ?Sized>(
    vcs: &V,
    commits: &[CommitId],
) -> Vec<CommitId> {
    let mut applied = Vec::with_capacity(commits.len());
    for commit in commits {
        match vcs.cherry_pick(commit).await {
            Ok(CherryPick::Applied { commit }) => applied.push(commit),
            Ok(CherryPick::Conflict { .. } | CherryPick::Blocked { .. }) | Err(_) => break,
        }
    }
    applied
}

/// The error of an optional [`Vcs`] method an implementation left out.
fn unsupported(operation: &str) -> VcsError {
    VcsError::Other(format!(
        "{operation} is not supported by this version control"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_commit_id() {
        assert_eq!(CommitId("0123456789abcdef".into()).short(), "0123456");
        assert_eq!(CommitId("abc".into()).short(), "abc");
    }
}
