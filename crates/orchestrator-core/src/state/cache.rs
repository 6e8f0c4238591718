//! Where the flows put their temporary worktrees: outside the repository,
//! under a per-repository cache folder.
//!
//! A worktree inside the repository (under `.review/`, say) has the user's
//! working tree as a parent folder, and tools that look for their
//! configuration in parent folders (`.cargo/config.toml`, `.eslintrc`,
//! `pyproject.toml`, …) would find the user's uncommitted files there: a
//! fix's test run would not test what lands. So every flow puts its
//! worktrees in [`worktree_root`], which is outside any repository.
//!
//! The cache holds one folder per repository and kind ([`CacheKind`]):
//! every test run's temporary repository and every checkout a user ever ran
//! on gets its own, so nothing would ever remove them on its own. A run
//! therefore [claims](CacheLease::claim) its repository's folders — a
//! marker naming the repository and the time it was last used, and a shared
//! lock held while the run uses them — and [`prune`] drops the folders
//! whose repository is gone, then evicts the least recently used target
//! folders while `<cache>/targets` is over its cap.

mod lease;
mod prune;
mod upkeep;

use std::path::{Path, PathBuf};

use crate::finding::digest_hex;

pub use lease::{
    CacheLease, CacheMarker, LOCK_FILE, MARKER_FILE, MARKER_VERSION, SIZE_FILE, folder_in_use,
    read_marker,
};
pub use prune::{
    CacheFolder, Clean, FolderSize, Owner, PrunePolicy, PruneReport, Removal, RemovalReason,
    UNMARKED_GRACE, clean, list, plan_prune, prune,
};
pub use upkeep::{DEFAULT_MAX_SIZE, Upkeep, claim_and_prune, describe_removal};

/// The two kinds of per-repository cache folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CacheKind {
    /// `<cache>/targets/<key>`: worktree slots' Cargo target folders, big,
    /// rebuilt on demand; evicted under the size cap.
    Targets,
    /// `<cache>/worktrees/<key>`: the flows' worktrees and folder
    /// snapshots; a paused session may still need them, so they are
    /// removed only when their repository is gone.
    Worktrees,
}

impl CacheKind {
    /// Both kinds, targets first.
    pub const ALL: [CacheKind; 2] = [CacheKind::Targets, CacheKind::Worktrees];

    /// The folder name under the cache folder (`targets`, `worktrees`).
    pub fn dir_name(self) -> &'static str {
        match self {
            CacheKind::Targets => "targets",
            CacheKind::Worktrees => "worktrees",
        }
    }

    /// `<cache>/<dir_name>`.
    pub fn root_in(self, cache: &Path) -> PathBuf {
        cache.join(self.dir_name())
    }
}

/// The folder of `kind` for `repo` under the cache folder `cache`.
pub fn repo_folder(cache: &Path, kind: CacheKind, repo: &Path) -> PathBuf {
    kind.root_in(cache).join(repo_key(repo))
}

/// The cache folder: `$ORCHESTRATOR_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/orchestrator`, else `~/.cache/orchestrator`, else the
/// system's temporary folder `orchestrator-cache`.
pub fn cache_dir() -> PathBuf {
    let from = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = from("ORCHESTRATOR_CACHE_DIR") {
        return dir;
    }
    if let Some(dir) = from("XDG_CACHE_HOME").filter(|d| d.is_absolute()) {
        return dir.join("orchestrator");
    }
    if let Some(home) = from("HOME") {
        return home.join(".cache").join("orchestrator");
    }
    std::env::temp_dir().join("orchestrator-cache")
}

/// The folder for `repo`'s worktrees: `<cache>/worktrees/<name>-<digest of
/// the canonical path>`, so two checkouts of one project never share one.
pub fn worktree_root(repo: &Path) -> PathBuf {
    repo_folder(&cache_dir(), CacheKind::Worktrees, repo)
}

/// The folder for `repo`'s build caches (a worktree slot's Cargo target
/// folder): `<cache>/targets/<name>-<digest of the canonical path>`. Kept
/// across runs, so a slot's build is warm from the second run on; safe to
/// delete at any time.
pub fn build_cache_root(repo: &Path) -> PathBuf {
    repo_folder(&cache_dir(), CacheKind::Targets, repo)
}

/// `<name>-<digest>` of `repo`'s canonical path: the name of its folders.
pub fn repo_key(repo: &Path) -> String {
    let canonical = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let name: String = canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".to_owned())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let digest = digest_hex(&[canonical.to_string_lossy().as_bytes()]);
    format!("{name}-{}", &digest[..digest.len().min(12)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_checkout_has_its_own_folder_outside_it() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let (ra, rb) = (worktree_root(a.path()), worktree_root(b.path()));
        assert_ne!(ra, rb);
        assert_eq!(ra, worktree_root(a.path()), "stable");
        assert!(!ra.starts_with(a.path().canonicalize().unwrap()));
        assert!(ra.starts_with(cache_dir()));
    }
}
