//! Worktrees that have what the project needs, reused across a run's items.
//!
//! A git worktree holds only what git tracks. A JavaScript project's
//! `node_modules/`, a Python project's `.venv/`, an `.env` file or a
//! generated header are ignored, so a fresh worktree lacks them and every
//! `npm test` or `pytest` in it fails for a reason that has nothing to do
//! with the change under test. Two pieces close that gap:
//!
//! - a [`Provisioner`] gives a new worktree what the project needs before
//!   an agent or a test runs in it (the real one, in
//!   `orchestrator-adapters`, copies or links ignored folders from the main
//!   tree and runs the project's setup commands), and names the environment
//!   commands run there get ([`Provisioner::env`]);
//! - a [`WorktreePool`] keeps one worktree per slot for a run: a slot is
//!   made and provisioned once, then moved to each new item's base with
//!   [`Vcs::worktree_move`] (ignored files — provided dependencies, a warm
//!   build folder — stay), so setup costs once per slot, not once per item.
//!
//! ```text
//!  acquire(base) ──► an idle slot? ── yes ─► worktree_move(base) ─► Lease
//!        │                 │ no (or its reset refused)
//!        │                 ▼
//!        │     record (path, branch) ─► worktree_add ─► provision ─► Lease
//!        │                                   │ setup failed
//!        │                                   ▼
//!        │     the slot is removed; this and every later acquire of the
//!        │     run fail with the setup's output (an item's error, not an
//!        │     agent's failure)
//!        ▼
//!  release(lease) ─► idle again          close() ─► every slot removed
//! ```
//!
//! The pool decides nothing about what a flow does in a worktree; flows
//! acquire, work, and release (or [`WorktreePool::discard`] a lease whose
//! tree may hold something that should not be reused).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::event::{Event, EventSink};
use crate::vcs::{CommitId, Vcs, VcsError};

/// How a path was provided in a worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvideHow {
    /// Copy-on-write clones of the main tree's files (reflinks): free, and a
    /// write in the worktree never reaches the main tree.
    Reflinked,
    /// Hard links to the engine's own snapshot of the main tree's copy (the
    /// snapshot is made once and refreshed when the original changes), so
    /// the user's own files are never shared with a worktree.
    LinkedSnapshot,
    /// Plain copies.
    Copied,
}

impl ProvideHow {
    /// Words for the run's output.
    pub fn describe(self) -> &'static str {
        match self {
            ProvideHow::Reflinked => "copy-on-write clones of yours",
            ProvideHow::LinkedSnapshot => "hard links to the engine's snapshot of yours",
            ProvideHow::Copied => "copies of yours",
        }
    }
}

/// One path a [`Provisioner`] provided in a worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvidedPath {
    /// The path, relative to the repository root (`node_modules`).
    pub path: String,
    /// How it was provided.
    pub how: ProvideHow,
    /// Files it holds.
    pub files: u64,
    /// Whether it was detected (a known ecosystem's dependency folder)
    /// rather than configured.
    pub detected: bool,
}

/// One setup command run in a new worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupRun {
    /// The command as configured.
    pub command: String,
    /// How long it took.
    pub duration_ms: u64,
}

/// What a [`Provisioner`] did for one worktree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provisioned {
    /// Paths provided from the main tree.
    pub provided: Vec<ProvidedPath>,
    /// Setup commands run, in order.
    pub setup: Vec<SetupRun>,
    /// Wall time of the whole provisioning.
    pub duration_ms: u64,
}

impl Provisioned {
    /// One line for the run's output: what each worktree gets and how, or
    /// `None` when it gets nothing.
    pub fn describe(&self) -> Option<String> {
        let mut parts: Vec<String> = self
            .provided
            .iter()
            .map(|p| {
                format!(
                    "{}/ ({}{}, {} files)",
                    p.path.trim_end_matches('/'),
                    if p.detected { "detected; " } else { "" },
                    p.how.describe(),
                    p.files
                )
            })
            .collect();
        parts.extend(self.setup.iter().map(|s| format!("setup `{}`", s.command)));
        (!parts.is_empty()).then(|| format!("each worktree gets {}", parts.join(", ")))
    }
}

/// Why a worktree could not be provisioned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProvisionError {
    /// A setup command failed.
    #[error("worktree setup `{command}` {outcome}{}", output_note(output))]
    Setup {
        /// The command.
        command: String,
        /// How it ended (`exited with status 1`, `timed out after 600s`).
        outcome: String,
        /// The end of its output.
        output: String,
    },
    /// A path could not be provided.
    #[error("could not provide {path} in the worktree: {message}")]
    Provide {
        /// The path, relative to the repository.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The configuration names something that cannot be provided.
    #[error("[worktree] {0}")]
    Config(String),
}

fn output_note(output: &str) -> String {
    if output.trim().is_empty() {
        String::new()
    } else {
        format!(":\n{}", output.trim_end())
    }
}

/// Gives a new worktree what the project needs.
///
/// Contract: [`Provisioner::provision`] is called once per new worktree,
/// before any agent or test runs in it, with the main tree's root and the
/// worktree's; it never writes into the main tree. A failure leaves the
/// worktree to be removed by the caller.
#[async_trait]
pub trait Provisioner: Send + Sync + fmt::Debug {
    /// Prepares the worktree at `worktree`, made from the repository whose
    /// working tree is `main`.
    async fn provision(&self, main: &Path, worktree: &Path) -> Result<Provisioned, ProvisionError>;

    /// The environment commands run in `worktree` get on top of the
    /// engine's own (a build cache, a virtualenv's `bin/` on `PATH`).
    /// Default: nothing.
    fn env(&self, worktree: &Path) -> BTreeMap<String, String> {
        let _ = worktree;
        BTreeMap::new()
    }
}

#[async_trait]
impl<P: Provisioner + ?Sized> Provisioner for Arc<P> {
    async fn provision(&self, main: &Path, worktree: &Path) -> Result<Provisioned, ProvisionError> {
        (**self).provision(main, worktree).await
    }
    fn env(&self, worktree: &Path) -> BTreeMap<String, String> {
        (**self).env(worktree)
    }
}

#[async_trait]
impl<P: Provisioner + ?Sized> Provisioner for Box<P> {
    async fn provision(&self, main: &Path, worktree: &Path) -> Result<Provisioned, ProvisionError> {
        (**self).provision(main, worktree).await
    }
    fn env(&self, worktree: &Path) -> BTreeMap<String, String> {
        (**self).env(worktree)
    }
}

mod journal;
mod pool;

pub use journal::*;
pub use pool::*;

#[cfg(test)]
mod tests;

/// Deletes the folder of a worktree the engine made, whatever it holds,
/// after [`Vcs::salvage_worktree`] saved what git would lose into the
/// trash (with `reason`). A salvage that fails leaves the folder as it is
/// (the error says why); a missing folder is `NotFound`, as
/// `remove_dir_all` says it.
pub async fn delete_worktree_dir(vcs: &dyn Vcs, path: &Path, reason: &str) -> std::io::Result<()> {
    if let Err(e) = vcs.salvage_worktree(path, reason).await {
        return Err(std::io::Error::other(format!(
            "its files could not be saved to trash first, so it is left as it is: {e}"
        )));
    }
    std::fs::remove_dir_all(path)
}

/// The reason a trash entry gives for a worktree removal: `removal of
/// worktree slot-1` and what `why` adds.
pub fn removal_reason(path: &Path, why: &str) -> String {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    format!("removal of worktree {name}{why}")
}
