//! Landing a commit on the user's checkout ([`Vcs::cherry_pick`] outside
//! an engine worktree) without ever leaving a cherry-pick in progress
//! there.
//!
//! A plain `git cherry-pick` merges, writes `CHERRY_PICK_HEAD`, then
//! commits. When the user's own git holds `index.lock` at the commit step
//! (the user staging a file at that instant), git stops with the pick in
//! progress; the only way back git offers is `cherry-pick --abort`, a
//! `reset --merge` that puts every *staged* file back to HEAD — the user's
//! staged work with it. While a pick is in progress the user's own
//! `git commit -- <path>` is refused too.
//!
//! So the user's checkout gets `cherry-pick --no-commit` (the change
//! merged into the index and work tree, no sequencer state), then a commit
//! of exactly the commit's paths with its message and author (`commit
//! --only -C`), which leaves anything else the user staged staged. When
//! the pick conflicts or the commit cannot be made, the commit's paths —
//! clean before the pick, or it would not have started — are put back to
//! HEAD, their content saved to the session's trash first.

use std::ffi::OsString;

use orchestrator_core::vcs::CherryPick;
use orchestrator_core::{Vcs, VcsError};

use super::run::os_args;
use super::{GitVcs, parse};

/// How many times a landing's commit is made again after the user moved
/// HEAD under it.
const REF_MOVED_RETRIES: u32 = 10;

/// Whether git refused a commit because HEAD moved after it was read.
fn head_moved(stderr: &[u8]) -> bool {
    let text = String::from_utf8_lossy(stderr);
    text.contains("cannot lock ref 'HEAD'") || text.contains("cannot lock ref 'refs/heads/")
}

impl GitVcs {
    /// Lands commit `id` (a full id) on HEAD of the user's checkout; the
    /// caller holds the write lock. Blocked when the user's work is in the
    /// way (nothing changed), a conflict when it does not apply (nothing
    /// changed), an error when git refused or the commit failed (nothing
    /// changed either).
    pub(super) async fn land_pick(&self, id: &str) -> Result<CherryPick, VcsError> {
        let parent = format!("{id}^");
        let blocked = self.in_the_way(&parent, id).await?;
        if !blocked.is_empty() {
            return Ok(CherryPick::Blocked { paths: blocked });
        }
        let paths = self.paths_between(&parent, id).await?;
        let out = self
            .run("cherry-pick", os_args(["--no-commit", id]), None)
            .await?;
        if !out.status.success() {
            let conflicted = self.unmerged_paths().await?;
            if conflicted.is_empty() {
                // git refused before changing anything (the user changed
                // a path between the check and the pick).
                let blocked = self.in_the_way(&parent, id).await?;
                if !blocked.is_empty() {
                    return Ok(CherryPick::Blocked { paths: blocked });
                }
                return Err(out.error());
            }
            self.undo_landing(id, &paths).await?;
            return Ok(CherryPick::Conflict { paths: conflicted });
        }
        match self.commit_as(id, &paths).await {
            Ok(()) => Ok(CherryPick::Applied {
                commit: self.head().await?,
            }),
            Err(e) => {
                self.undo_landing(id, &paths).await?;
                Err(e)
            }
        }
    }

    /// The paths commit `id` changes against `parent`.
    async fn paths_between(&self, parent: &str, id: &str) -> Result<Vec<String>, VcsError> {
        parse::nul_list(
            &self
                .run_ok(
                    "diff",
                    os_args([
                        "--name-only",
                        "-z",
                        "--no-renames",
                        "--no-ext-diff",
                        parent,
                        id,
                        "--",
                    ]),
                )
                .await?,
        )
    }

    /// The paths with unmerged entries in the index.
    pub(super) async fn unmerged_paths(&self) -> Result<Vec<String>, VcsError> {
        parse::nul_list(
            &self
                .run_ok(
                    "diff",
                    os_args(["--name-only", "-z", "--diff-filter=U", "--no-ext-diff"]),
                )
                .await?,
        )
    }

    /// Commits the work-tree content of exactly `paths` with commit `id`'s
    /// message (byte for byte) and author; the user's other staged files
    /// stay staged. No hooks: the fix's own commit ran them. The paths are
    /// added first: a git of the user's that read the index before the
    /// pick wrote it may have written its older copy back since.
    async fn commit_as(&self, id: &str, paths: &[String]) -> Result<(), VcsError> {
        self.run_paths("add", &["-A"], paths).await?;
        let mut argv = os_args([
            "--only",
            "--no-verify",
            "--cleanup=verbatim",
            "--quiet",
            "-C",
            id,
            "--",
        ]);
        argv.extend(paths.iter().map(OsString::from));
        let mut attempt = 0;
        loop {
            let out = self.run("commit", argv.clone(), None).await?;
            // The user committed between this commit's read of HEAD and
            // its update of it: git changed nothing; again on the new HEAD.
            if out.status.success() || attempt >= REF_MOVED_RETRIES || !head_moved(&out.stderr) {
                return out.into_ok().map(|_| ());
            }
            attempt += 1;
            tokio::time::sleep(std::time::Duration::from_millis(5 * u64::from(attempt))).await;
        }
    }

    /// Puts `paths` back to HEAD in the index and work tree after a
    /// landing of `id` that did not complete (a file HEAD and the index do
    /// not know is deleted), each file's content saved to the trash first
    /// (they held nothing of the user's when the landing began; whatever is
    /// there now is kept there).
    async fn undo_landing(&self, id: &str, paths: &[String]) -> Result<(), VcsError> {
        if paths.is_empty() {
            return Ok(());
        }
        if let Some(trash) = self.trash.get() {
            let short = id.get(..12).unwrap_or(id);
            let reason = format!("landing of {short} undone on the checked-out branch");
            for path in paths {
                if tokio::fs::symlink_metadata(self.root.join(path))
                    .await
                    .is_err()
                {
                    continue;
                }
                trash.put(&self.root, path, &reason).map_err(|e| {
                    VcsError::Other(format!(
                        "cannot undo the landing of {short}: {path} could not be saved to the trash first: {e}"
                    ))
                })?;
            }
        }
        let head = self.head().await?;
        self.put_back(&head, paths.to_vec()).await.map(|_| ())
    }
}
