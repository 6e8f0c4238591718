//! Commits and history: committing exactly a set of paths, diffs and logs
//! between commits, cherry-picks and pushes.

use std::ffi::OsString;
use std::path::{Component, Path};

use orchestrator_core::vcs::{
    CherryPick, CommitInfo, FastForward, PushOutcome, check_relative_path,
};
use orchestrator_core::{CommitId, Vcs, VcsError};

use super::run::{PATH_CHUNK, os_args};
use super::{GitVcs, parse};

impl GitVcs {
    /// [`Vcs::commit`]: commits the work-tree content of exactly `paths`
    /// with `message`, stored byte for byte.
    pub(super) async fn commit_paths(
        &self,
        paths: &[String],
        message: &str,
    ) -> Result<CommitId, VcsError> {
        let mut normalized = Vec::with_capacity(paths.len());
        for path in paths {
            check_relative_path(path)?;
            let path = normalize(path);
            if path.is_empty() {
                return Err(VcsError::BadPath {
                    path: path.clone(),
                    reason: "it names the repository root".into(),
                });
            }
            let full = self.root.join(&path);
            if let Ok(meta) = tokio::fs::symlink_metadata(&full).await
                && meta.is_dir()
            {
                return Err(VcsError::BadPath {
                    path,
                    reason: "it is a directory; commit takes file paths".into(),
                });
            }
            normalized.push(path);
        }
        if normalized.is_empty() {
            return Err(VcsError::NothingToCommit { paths: Vec::new() });
        }
        let _guard = self.write_lock.lock().await;
        if self.engine_tree
            && let Some(commit) = self.commit_named_paths(&normalized, message).await?
        {
            return Ok(commit);
        }
        let dirty = self.status_of(Some(&normalized)).await?.dirty_paths();
        if dirty.is_empty() {
            return Err(VcsError::NothingToCommit {
                paths: paths.to_vec(),
            });
        }
        self.run_paths("add", &["-A"], &dirty).await?;
        // `--only` commits the work-tree content of exactly these paths and
        // leaves anything else that was staged staged, not committed.
        let mut argv = os_args(["--only", "--cleanup=verbatim", "--no-edit", "-F", "-", "--"]);
        argv.extend(dirty.iter().map(OsString::from));
        let out = self
            .run("commit", argv, Some(message.as_bytes().to_vec()))
            .await?
            .into_ok()?;
        self.made_commit(&out).await
    }

    /// [`GitVcs::commit_paths`] in an engine worktree, whose caller names
    /// the files its fix changed: a `commit --only` of exactly `paths` with
    /// no status first, which takes tracked files' work-tree content
    /// (deletions included) as it is; an `add` of the paths first when one
    /// of them was untracked at the last write-set read, or when the commit
    /// is refused (a new file git does not know yet), and the commit again.
    /// One process (two for a new file) where the careful way takes three
    /// or four. `None` when git refused (nothing changed, a path it cannot
    /// add), having committed nothing: the careful way then finds the
    /// changed paths and says why.
    async fn commit_named_paths(
        &self,
        paths: &[String],
        message: &str,
    ) -> Result<Option<CommitId>, VcsError> {
        if paths.len() > PATH_CHUNK {
            return Ok(None);
        }
        let named = || paths.iter().map(OsString::from);
        let commit = || {
            let mut argv = os_args(["--only", "--cleanup=verbatim", "--no-edit", "-F", "-", "--"]);
            argv.extend(named());
            self.run("commit", argv, Some(message.as_bytes().to_vec()))
        };
        let add = || {
            let mut argv = os_args(["-A", "--"]);
            argv.extend(named());
            self.run("add", argv, None)
        };
        let new_file = {
            let seen = self
                .untracked_seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            paths.iter().any(|p| seen.contains(p))
        };
        let mut out = if new_file {
            None
        } else {
            Some(commit().await?).filter(|out| out.status.success())
        };
        if out.is_none() {
            if !add().await?.status.success() {
                return Ok(None);
            }
            out = Some(commit().await?).filter(|out| out.status.success());
        }
        let Some(out) = out else {
            return Ok(None);
        };
        self.made_commit(&out.stdout).await.map(Some)
    }

    /// The commit a successful `git commit` made: read from its summary
    /// line, or from HEAD when the line does not name it in full.
    pub(super) async fn made_commit(&self, stdout: &[u8]) -> Result<CommitId, VcsError> {
        match parse::committed_id(stdout) {
            Some(id) => Ok(CommitId(id)),
            None => self.head().await,
        }
    }

    /// [`Vcs::diff`]: the unified diff between two commits.
    pub(super) async fn diff_commits(
        &self,
        from: &CommitId,
        to: &CommitId,
    ) -> Result<String, VcsError> {
        let from = self.resolve_commit(from).await?;
        let to = self.resolve_commit(to).await?;
        let out = self
            .run_ok(
                "diff",
                os_args([
                    "--no-color",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-renames",
                    "-U3",
                    &from,
                    &to,
                    "--",
                ]),
            )
            .await?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// [`Vcs::log_since`]: the commits after `base` up to HEAD, oldest first.
    pub(super) async fn commits_since(&self, base: &CommitId) -> Result<Vec<CommitInfo>, VcsError> {
        let base = self.resolve_commit(base).await?;
        let ids = self
            .run_ok("rev-list", os_args(["--reverse", &format!("{base}..HEAD")]))
            .await?;
        if ids.iter().all(u8::is_ascii_whitespace) {
            return Ok(Vec::new());
        }
        let out = self
            .run("cat-file", os_args(["--batch"]), Some(ids))
            .await?
            .into_ok()?;
        parse::cat_file_batch(&out)?
            .into_iter()
            .map(|object| {
                let (tree, message) = parse::commit_object(&object.content)?;
                Ok(CommitInfo {
                    id: CommitId(object.id),
                    message,
                    tree,
                })
            })
            .collect()
    }

    /// [`Vcs::cherry_pick`]: applies `commit` on HEAD, aborting on a
    /// conflict (in an engine worktree; the user's checkout lands it
    /// without a pick in progress, see `land.rs`).
    pub(super) async fn cherry_pick_commit(
        &self,
        commit: &CommitId,
    ) -> Result<CherryPick, VcsError> {
        // A wrong full id makes the pick fail (the user's checkout: its
        // first read of the commit) before anything changes.
        let id = self.commit_arg(commit).await?;
        let _guard = self.write_lock.lock().await;
        if !self.engine_tree {
            // Never a pick left in progress in the user's checkout: see
            // `land.rs`.
            return self.land_pick(&id).await;
        }
        // An engine worktree holds nothing of the user's: no check first
        // (four git processes per pick); a refusal is still checked below.
        let out = self
            .run("cherry-pick", os_args([id.as_str()]), None)
            .await?;
        if out.status.success() {
            return Ok(CherryPick::Applied {
                commit: self.head().await?,
            });
        }
        let in_progress = self
            .run(
                "rev-parse",
                os_args(["--verify", "--quiet", "CHERRY_PICK_HEAD"]),
                None,
            )
            .await?
            .status
            .success();
        if !in_progress {
            // git refused before starting (a change in the way): nothing
            // was changed.
            let blocked = self.in_the_way(&format!("{id}^"), &id).await?;
            if !blocked.is_empty() {
                return Ok(CherryPick::Blocked { paths: blocked });
            }
            return Err(out.error());
        }
        let conflicted = self.unmerged_paths().await?;
        self.run_ok("cherry-pick", os_args(["--abort"])).await?;
        if conflicted.is_empty() {
            // Stopped without conflicts (the change is already applied and
            // the commit would be empty): aborted, reported as a failure.
            return Err(out.error());
        }
        Ok(CherryPick::Conflict { paths: conflicted })
    }

    /// [`Vcs::cherry_pick_series`]: in an engine worktree, a series of full
    /// ids is applied by one `git cherry-pick` and the new commits read back
    /// with one `rev-list` (three processes for the series instead of two
    /// or three per commit). When the series stops part-way it is aborted
    /// (back where it started) and picked again one by one, which stops at
    /// the same commit with the usual answer. Elsewhere (the user's
    /// checkout lands each commit on its own, see `land.rs`), one by one.
    pub(super) async fn cherry_pick_commits(
        &self,
        commits: &[CommitId],
    ) -> Result<Vec<CommitId>, VcsError> {
        let at_once = self.engine_tree
            && commits.len() > 1
            && commits.iter().all(|c| parse::full_object_id(c.as_str()));
        if at_once && let Some(applied) = self.pick_series_at_once(commits).await? {
            return Ok(applied);
        }
        Ok(orchestrator_core::vcs::cherry_pick_one_by_one(self, commits).await)
    }

    /// One `git cherry-pick` of the whole series: the new commits, or
    /// `None` when it stopped (aborted; nothing of it is left).
    async fn pick_series_at_once(
        &self,
        commits: &[CommitId],
    ) -> Result<Option<Vec<CommitId>>, VcsError> {
        let _guard = self.write_lock.lock().await;
        let start = self.head().await?;
        let out = self
            .run(
                "cherry-pick",
                commits.iter().map(|c| c.as_str().into()).collect(),
                None,
            )
            .await?;
        if !out.status.success() {
            // Back to `start`, the series' picks so far included. git may
            // have stopped with a pick in progress or before a pick started
            // (the sequence still open); `--abort` undoes either, and fails
            // harmlessly when nothing was started.
            self.run("cherry-pick", os_args(["--abort"]), None).await?;
            let head = self.head().await?;
            if head != start {
                return Err(VcsError::Other(format!(
                    "a cherry-pick series stopped and was not undone: HEAD is {}, not {}",
                    head.short(),
                    start.short()
                )));
            }
            return Ok(None);
        }
        let ids = self
            .run_ok(
                "rev-list",
                os_args(["--reverse", &format!("{start}..HEAD")]),
            )
            .await?;
        let applied: Vec<CommitId> = String::from_utf8_lossy(&ids)
            .split_whitespace()
            .map(|id| CommitId(id.to_owned()))
            .collect();
        if applied.len() != commits.len() {
            return Err(VcsError::Other(format!(
                "cherry-picked {} commits, but {} are on top of {}",
                commits.len(),
                applied.len(),
                start.short()
            )));
        }
        Ok(Some(applied))
    }

    /// [`Vcs::fast_forward`]: `git merge --ff-only` from `onto` to `to`,
    /// after the checks a cherry-pick makes, over the whole range.
    pub(super) async fn fast_forward_to(
        &self,
        onto: &CommitId,
        to: &CommitId,
    ) -> Result<FastForward, VcsError> {
        let _guard = self.write_lock.lock().await;
        self.fast_forward_locked(onto, to).await
    }

    /// [`GitVcs::fast_forward_to`] for a caller that holds the write lock.
    ///
    /// Git checks the range's paths itself: `merge --ff-only` refuses,
    /// before it writes anything, to overwrite a modified file, an
    /// untracked one, or (`--no-overwrite-ignore`) an ignored one where the
    /// range adds a file. Only what git allows and this engine does not is
    /// checked first: a branch that is not at `onto`, and anything staged
    /// (not asked of git while HEAD and the index are what the last landing
    /// left). A refusal is then explained by [`GitVcs::in_the_way`], which
    /// names the paths. One or two processes where reading the range and
    /// the status first took four.
    pub(super) async fn fast_forward_locked(
        &self,
        onto: &CommitId,
        to: &CommitId,
    ) -> Result<FastForward, VcsError> {
        if self.head().await.ok().as_ref() != Some(onto) {
            return Ok(FastForward::NotPossible);
        }
        if !self.nothing_staged_since_landing(onto)
            && !self.diff_names(&["--cached"]).await?.is_empty()
        {
            return self.blocked_or_not_possible(onto, to).await;
        }
        // `--no-autostash`: a `merge.autoStash` setting would stash the
        // user's work and apply it again afterwards.
        let out = self
            .run(
                "merge",
                os_args([
                    "--ff-only",
                    "--no-autostash",
                    "--no-overwrite-ignore",
                    "--quiet",
                    to.as_str(),
                ]),
                None,
            )
            .await?;
        if out.status.success() {
            self.mark_landed(to);
            return Ok(FastForward::Moved);
        }
        // Refused before it began, it changed nothing; failed at the branch
        // update (the user committed meanwhile), it left the files it wrote.
        self.undo_partial_fast_forward(to).await?;
        self.blocked_or_not_possible(onto, to).await
    }

    /// Whether nothing is staged, known without git: HEAD is still `head`,
    /// where the last landing moved it, and the index is still the one git
    /// wrote then (nothing was staged before that landing, and a
    /// fast-forward stages nothing).
    fn nothing_staged_since_landing(&self, head: &CommitId) -> bool {
        let mark = self
            .landed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        mark.is_some_and(|m| {
            m.head == *head
                && super::head_files::index_fingerprint(&self.root).as_ref() == Some(&m.index)
        })
    }

    /// Remembers the index a landing to `to` left (see
    /// [`GitVcs::nothing_staged_since_landing`]). A user who staged a file
    /// in the instant between the check for staged work and git's
    /// fast-forward has it kept staged by git, untouched; the next landing
    /// then goes ahead too, as that one did, until the index changes.
    fn mark_landed(&self, to: &CommitId) {
        let mark =
            super::head_files::index_fingerprint(&self.root).map(|index| super::LandedMark {
                head: to.clone(),
                index,
            });
        *self
            .landed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = mark;
    }

    /// Why the range from `onto` to `to` does not land: the user's work in
    /// its way ([`GitVcs::in_the_way`]), else not a fast-forward.
    async fn blocked_or_not_possible(
        &self,
        onto: &CommitId,
        to: &CommitId,
    ) -> Result<FastForward, VcsError> {
        let blocked = self.in_the_way(onto.as_str(), to.as_str()).await?;
        if blocked.is_empty() {
            Ok(FastForward::NotPossible)
        } else {
            Ok(FastForward::Blocked { paths: blocked })
        }
    }

    /// What stands in the way of landing the commits from `parent` to
    /// `id`: the paths they change that are modified in the working tree or
    /// the index, then every staged path (git refuses to pick over a dirty
    /// index, and a pick must never be mixed with the user's staged work),
    /// then the ignored files where they add one. Sorted, without
    /// duplicates.
    pub(super) async fn in_the_way(&self, parent: &str, id: &str) -> Result<Vec<String>, VcsError> {
        // What the commits change, and which of those they add, at once.
        let changes = self.changes_between(parent, id).await?;
        let touched: Vec<String> = changes.iter().map(|(_, p)| p.clone()).collect();
        let dirty = self.dirty_among(&touched).await?;
        self.blocked_by(changes, dirty).await
    }

    /// Which of `paths` hold the user's work (modified, staged or
    /// untracked); no git for none.
    async fn dirty_among(&self, paths: &[String]) -> Result<Vec<String>, VcsError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.status_of(Some(paths)).await?.dirty_paths())
    }

    /// [`GitVcs::in_the_way`] once the range's `changes` and the `dirty`
    /// paths among them are known.
    async fn blocked_by(
        &self,
        changes: Vec<(u8, String)>,
        dirty: Vec<String>,
    ) -> Result<Vec<String>, VcsError> {
        let mut blocked = dirty;
        blocked.extend(self.diff_names(&["--cached"]).await?);
        // A file the commit adds where the user has an ignored one: git
        // would overwrite it without a word (ignored files are
        // "expendable" to it); they are not to us.
        let added = changes
            .into_iter()
            .filter_map(|(letter, path)| (letter == b'A').then_some(path));
        for path in added {
            if tokio::fs::symlink_metadata(self.root.join(&path))
                .await
                .is_ok()
            {
                blocked.push(path);
            }
        }
        blocked.sort();
        blocked.dedup();
        Ok(blocked)
    }

    /// [`Vcs::push`]: pushes `branch` to the same branch of `remote`, never
    /// forced.
    pub(super) async fn push_branch(
        &self,
        remote: &str,
        branch: &str,
    ) -> Result<PushOutcome, VcsError> {
        if remote.is_empty() || remote.starts_with(['-', '+']) || remote.contains(['\0', '\n']) {
            return Err(VcsError::Other(format!("`{remote}` is not a valid remote")));
        }
        self.check_branch(branch).await?;
        let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
        let out = self
            .run("push", os_args(["--porcelain", remote, &refspec]), None)
            .await?;
        let rejected = parse::push_rejections(&out.stdout);
        if !rejected.is_empty() {
            return Ok(PushOutcome::Rejected {
                reason: rejected.join("; "),
            });
        }
        if !out.status.success() {
            return Err(out.error());
        }
        Ok(PushOutcome::Pushed)
    }
}

/// Lexically normalises a checked relative path: drops `.` components and
/// resolves `..` (which [`check_relative_path`] keeps inside the root).
fn normalize(path: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_drops_dots() {
        assert_eq!(normalize("./a/./b/../c.rs"), "a/c.rs");
        assert_eq!(normalize("a b/ü.rs"), "a b/ü.rs");
    }
}
