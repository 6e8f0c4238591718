//! `[worktree]`: what each worktree a flow makes is given before an agent
//! or a test runs in it (see `crate::worktree_env`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How provided folders are shared with a worktree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LinkMode {
    /// Copy-on-write clones where the file system has them (btrfs, XFS,
    /// APFS), else hard links to the engine's own snapshot of the folder
    /// (copied once, refreshed when yours changes), never to your files.
    #[default]
    Auto,
    /// Plain copies into every worktree (slow for a large folder, shares
    /// nothing).
    Copy,
}

impl LinkMode {
    /// Whether this is the default, [`LinkMode::Auto`].
    pub fn is_auto(&self) -> bool {
        *self == LinkMode::Auto
    }
}

/// `[worktree]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WorktreeSection {
    /// Shell lines run (`sh -c`) once in each new worktree, in order, with
    /// [`WorktreeSection::env`] set (`npm ci`, `uv sync`). A failing one
    /// stops the items that needed the worktree, with its output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<String>,
    /// Ignored paths of the main tree (files or folders, relative to the
    /// repository) provided in each worktree: `.env`, `node_modules`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copy: Vec<String>,
    /// Environment for every command run in a worktree (setup, tests,
    /// checks, agents). `{repo}` in a value is the repository's root,
    /// `{worktree}` the worktree's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Provide the ignored dependency folders of known ecosystems found in
    /// the main tree (`node_modules/`, a virtualenv in `.venv/` or
    /// `venv/`). Default: on when neither `setup` nor `copy` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detect: Option<bool>,
    /// How provided folders are shared (default `auto`).
    #[serde(default, skip_serializing_if = "LinkMode::is_auto")]
    pub link: LinkMode,
    /// Time limit of each setup command in seconds (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_timeout_secs: Option<u64>,
}

impl WorktreeSection {
    /// Whether known dependency folders are detected and provided.
    pub fn detects(&self) -> bool {
        self.detect
            .unwrap_or(self.setup.is_empty() && self.copy.is_empty())
    }

    /// The time limit of one setup command.
    pub fn setup_timeout(&self) -> Duration {
        Duration::from_secs(self.setup_timeout_secs.unwrap_or(600))
    }

    /// Checks what serde cannot: `copy` paths stay inside the repository
    /// and are not engine folders; setup lines are not empty.
    pub fn check(&self) -> Result<(), String> {
        for (i, line) in self.setup.iter().enumerate() {
            if line.trim().is_empty() {
                return Err(format!("[worktree] setup[{i}] is empty"));
            }
        }
        for (i, path) in self.copy.iter().enumerate() {
            let trimmed = path.trim_end_matches('/');
            let bad = trimmed.is_empty()
                || trimmed.starts_with('/')
                || trimmed
                    .split('/')
                    .any(|c| c == ".." || c == "." || c.is_empty())
                || matches!(
                    trimmed.split('/').next(),
                    Some(".git" | ".review" | ".workflow" | ".moai")
                );
            if bad {
                return Err(format!(
                    "[worktree] copy[{i}] = {path:?}: expected a path relative to the repository, inside it, not .git or an engine folder"
                ));
            }
        }
        Ok(())
    }
}
