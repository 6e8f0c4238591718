//! [`GitVcs`]: the core [`Vcs`] trait over the `git` command-line tool.
//!
//! Every invocation goes through one private function (`GitVcs::run`, in `run.rs`) that:
//! - passes arguments as an explicit argv (never a shell), with `--` before
//!   paths, and checks them with the argument guard (`guard.rs`), which refuses
//!   any force, forced refspec, amend or subcommand outside an allowlist;
//! - fixes the environment: `GIT_*` variables that redirect the repository or
//!   change output (`GIT_DIR`, `GIT_INDEX_FILE`, `GIT_CONFIG_PARAMETERS`,
//!   `GIT_EXTERNAL_DIFF`, …) are removed, prompts and pagers are off, and
//!   pathspecs are literal (`GIT_LITERAL_PATHSPECS=1`, so `*.rs` or
//!   `:(top)` in a file name mean nothing special);
//! - overrides the configuration that would change output formats
//!   (`core.quotepath=off`, colours, encodings, rerere, auto-gc).
//!
//! User configuration otherwise applies (identity, signing, hooks).
//!
//! Output is read from machine formats only (`-z` lists, `--porcelain`,
//! `cat-file --batch`), never from localised messages. Commit messages go to
//! `git commit -F -` on stdin with `--cleanup=verbatim`, so they are stored
//! byte for byte.
//!
//! The implementation is split by concern: `run.rs` starts git, `refs.rs`
//! checks commit ids and branch names, `head_files.rs` reads HEAD from the
//! repository's files when they are the plain case, `status.rs` reads
//! status and digests,
//! `checkpoint.rs` takes and restores checkpoints (`trash.rs` saving what
//! a restore or a worktree's deletion would lose into the session's trash
//! first), `commit.rs` commits and
//! reads history, `worktree.rs` adds and removes worktrees, `remote.rs`
//! fetches one ref, pushes one commit and reads remotes and bases.

mod checkpoint;
mod commit;
mod guard;
mod head_files;
mod land;
mod parse;
mod refs;
mod remote;
mod run;
mod status;
mod trash;
mod worktree;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_core::trash::{Trash, TrashEntry};
use orchestrator_core::vcs::{CherryPick, CommitInfo, FastForward, PushOutcome, Status};
use orchestrator_core::{Checkpoint, CommitId, Vcs, VcsError};
use tokio::sync::Mutex;

pub use run::{GitSpent, spent};
use run::{os_args, stderr_text};

/// Options for [`GitVcs::open_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitOptions {
    /// The `git` executable (looked up on `PATH` when it has no directory).
    pub program: PathBuf,
}

impl Default for GitOptions {
    fn default() -> Self {
        Self {
            program: PathBuf::from("git"),
        }
    }
}

/// A git working tree, driven through the `git` CLI.
///
/// Operations that write the index, refs or `info/exclude` are serialised by
/// a lock shared with the worktrees created from this value; reads run
/// concurrently.
#[derive(Debug, Clone)]
pub struct GitVcs {
    root: PathBuf,
    program: PathBuf,
    write_lock: Arc<Mutex<()>>,
    /// A worktree this adapter made for the engine (`worktree_add`,
    /// `worktree_move`): nothing of the user's is ever in it, so a
    /// cherry-pick there skips the checks for the user's work before it
    /// (git's own refusal is still checked after).
    engine_tree: bool,
    /// The session's trash, shared with the worktrees made from this
    /// value ([`Vcs::set_trash`]).
    trash: trash::SharedTrash,
    /// The untracked files the last write-set read of this tree listed: a
    /// hint for a commit of an engine worktree, which adds such files
    /// before it commits instead of after a refusal.
    untracked_seen: Arc<std::sync::Mutex<Vec<String>>>,
    /// What this checkout's last landing by fast-forward left: the commit
    /// it moved to and a fingerprint of the index git wrote, with nothing
    /// staged (checked before it). While HEAD and the index are both
    /// unchanged, nothing is staged still, and the next landing does not
    /// ask git (`GitVcs::fast_forward_locked`).
    landed: Arc<std::sync::Mutex<Option<LandedMark>>>,
}

/// See [`GitVcs`]'s `landed`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LandedMark {
    head: CommitId,
    index: head_files::IndexFingerprint,
}

impl GitVcs {
    /// Opens the working tree whose root is `path`, checking that `git` runs
    /// and that `path` is the top of a work tree (not a subdirectory, not a
    /// bare repository).
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, VcsError> {
        Self::open_with(path, GitOptions::default()).await
    }

    /// [`GitVcs::open`] with explicit options.
    pub async fn open_with(path: impl AsRef<Path>, options: GitOptions) -> Result<Self, VcsError> {
        let path = path.as_ref();
        let root = tokio::fs::canonicalize(path).await.map_err(|e| {
            VcsError::Other(format!(
                "cannot open {} as a git work tree: {e}",
                path.display()
            ))
        })?;
        let vcs = Self {
            root,
            program: options.program,
            write_lock: Arc::new(Mutex::new(())),
            engine_tree: false,
            trash: trash::SharedTrash::default(),
            untracked_seen: Arc::default(),
            landed: Arc::default(),
        };
        let version = vcs
            .run("version", Vec::new(), None)
            .await
            .map_err(|e| match e {
                VcsError::Command { stderr, .. } => VcsError::Other(format!(
                    "git is not available: could not run `{}`: {stderr}",
                    vcs.program.display()
                )),
                other => other,
            })?;
        if !version.status.success() {
            return Err(version.error());
        }
        let out = vcs
            .run("rev-parse", os_args(["--show-toplevel"]), None)
            .await?;
        if !out.status.success() {
            return Err(VcsError::Other(format!(
                "{} is not a git work tree: {}",
                path.display(),
                stderr_text(&out.stderr)
            )));
        }
        let top = String::from_utf8_lossy(&out.stdout)
            .trim_end_matches('\n')
            .to_owned();
        let top = tokio::fs::canonicalize(&top).await.map_err(|e| {
            VcsError::Other(format!("cannot resolve the work tree root {top}: {e}"))
        })?;
        if top != vcs.root {
            return Err(VcsError::Other(format!(
                "{} is not the root of a git work tree (its root is {})",
                path.display(),
                top.display()
            )));
        }
        Ok(vcs)
    }

    /// The adapter of the engine worktree whose canonical root is `root`,
    /// sharing this value's git program, write lock and trash. Every value
    /// for a worktree the engine made is built here, so a field added to
    /// [`GitVcs`] is carried into all of them.
    fn engine_worktree(&self, root: PathBuf) -> GitVcs {
        GitVcs {
            root,
            program: self.program.clone(),
            write_lock: Arc::clone(&self.write_lock),
            engine_tree: true,
            trash: self.trash.clone(),
            untracked_seen: Arc::default(),
            landed: Arc::default(),
        }
    }
}

#[async_trait]
impl Vcs for GitVcs {
    fn root(&self) -> &Path {
        &self.root
    }

    async fn status(&self) -> Result<Status, VcsError> {
        self.status_of(None).await
    }

    async fn head(&self) -> Result<CommitId, VcsError> {
        if let Some(head) = head_files::head_from_files(&self.root) {
            return Ok(head);
        }
        let out = self
            .run_ok("rev-parse", os_args(["--verify", "HEAD^{commit}"]))
            .await?;
        Ok(CommitId(String::from_utf8_lossy(&out).trim().to_owned()))
    }

    async fn current_branch(&self) -> Result<Option<String>, VcsError> {
        let out = self
            .run("symbolic-ref", os_args(["--quiet", "HEAD"]), None)
            .await?;
        if !out.status.success() {
            // Exit 1 with --quiet: HEAD is detached.
            if out.status.code() == Some(1) {
                return Ok(None);
            }
            return Err(out.error());
        }
        let full = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok(Some(
            full.strip_prefix("refs/heads/")
                .map_or(full.clone(), str::to_owned),
        ))
    }

    async fn checkpoint(&self) -> Result<Checkpoint, VcsError> {
        self.take_checkpoint().await
    }

    async fn changed_since(&self, checkpoint: &Checkpoint) -> Result<Vec<String>, VcsError> {
        self.changed_since_checkpoint(checkpoint).await
    }

    async fn restore(&self, checkpoint: &Checkpoint) -> Result<Vec<String>, VcsError> {
        self.restore_checkpoint(checkpoint).await
    }

    async fn commit(&self, paths: &[String], message: &str) -> Result<CommitId, VcsError> {
        self.commit_paths(paths, message).await
    }

    async fn diff(&self, from: &CommitId, to: &CommitId) -> Result<String, VcsError> {
        self.diff_commits(from, to).await
    }

    async fn log_since(&self, base: &CommitId) -> Result<Vec<CommitInfo>, VcsError> {
        self.commits_since(base).await
    }

    async fn worktree_add(
        &self,
        path: &Path,
        branch: &str,
        base: &CommitId,
    ) -> Result<Arc<dyn Vcs>, VcsError> {
        self.add_worktree(path, branch, base).await
    }

    async fn worktree_remove(&self, path: &Path, branch: &str) -> Result<(), VcsError> {
        self.remove_worktree(path, branch).await
    }

    async fn worktree_move(
        &self,
        path: &Path,
        branch: &str,
        base: &CommitId,
    ) -> Result<Arc<dyn Vcs>, VcsError> {
        self.move_worktree(path, branch, base).await
    }

    async fn cherry_pick(&self, commit: &CommitId) -> Result<CherryPick, VcsError> {
        self.cherry_pick_commit(commit).await
    }

    async fn cherry_pick_series(&self, commits: &[CommitId]) -> Result<Vec<CommitId>, VcsError> {
        self.cherry_pick_commits(commits).await
    }

    fn set_trash(&self, trash: Option<Arc<Trash>>) -> bool {
        self.trash.set(trash);
        true
    }

    fn trash(&self) -> Option<Arc<Trash>> {
        self.trash.get()
    }

    async fn salvage_worktree(
        &self,
        path: &Path,
        reason: &str,
    ) -> Result<Vec<TrashEntry>, VcsError> {
        self.salvage(path, reason).await
    }

    async fn fast_forward(&self, onto: &CommitId, to: &CommitId) -> Result<FastForward, VcsError> {
        self.fast_forward_to(onto, to).await
    }

    async fn push(&self, remote: &str, branch: &str) -> Result<PushOutcome, VcsError> {
        self.push_branch(remote, branch).await
    }

    async fn push_commit(
        &self,
        remote: &str,
        commit: &CommitId,
        branch: &str,
    ) -> Result<PushOutcome, VcsError> {
        self.push_commit_to(remote, commit, branch).await
    }

    async fn fetch_ref(&self, remote: &str, refname: &str) -> Result<CommitId, VcsError> {
        self.fetch_one(remote, refname).await
    }

    async fn remote_url(&self, name: &str) -> Result<String, VcsError> {
        self.url_of(name).await
    }

    async fn upstream(&self) -> Result<Option<String>, VcsError> {
        self.upstream_of_head().await
    }

    async fn diff_from(&self, base: &str) -> Result<String, VcsError> {
        self.diff_since_base(base).await
    }

    async fn is_ancestor(&self, commit: &CommitId, of: &CommitId) -> Result<bool, VcsError> {
        self.ancestor_of(commit, of).await
    }

    async fn exclude(&self, pattern: &str) -> Result<(), VcsError> {
        self.add_exclude(pattern).await
    }
}
