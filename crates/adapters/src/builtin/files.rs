//! Files under a working directory: safe path resolution and content
//! digests to tell which files a tool changed.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use orchestrator_core::finding::digest_hex;

/// Resolves `relative` (as a finding spells it) to an existing file inside
/// `workdir`. Refuses empty, absolute and `..` paths, and paths that leave
/// the working directory through a symlink. Returns the canonical path, or a
/// message saying why not.
pub fn resolve_in_workdir(workdir: &Path, relative: &str) -> Result<PathBuf, String> {
    if relative.trim().is_empty() {
        return Err("the path is empty".to_owned());
    }
    let rel = Path::new(relative);
    let mut clean = PathBuf::new();
    for component in rel.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("the path contains `..`".to_owned()),
            Component::RootDir | Component::Prefix(_) => {
                return Err("the path is absolute".to_owned());
            }
        }
    }
    let root = workdir.canonicalize().map_err(|e| {
        format!(
            "cannot resolve the working directory {}: {e}",
            workdir.display()
        )
    })?;
    let target = root
        .join(&clean)
        .canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", clean.display()))?;
    if !target.starts_with(&root) {
        return Err(format!(
            "it resolves to {}, outside the working directory (a symlink leaves it)",
            target.display()
        ));
    }
    if !target.is_file() {
        return Err("it is not a regular file".to_owned());
    }
    Ok(target)
}

/// Directories never descended into when digesting a tree: VCS metadata,
/// build output, dependency folders and engine-owned folders.
const SKIPPED_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".jj",
    "target",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".review",
    ".workflow",
    ".moai",
];

/// Digests of every file under a directory, keyed by `/`-separated relative
/// path. Comparing two snapshots tells which files a tool changed, created or
/// removed, without needing a VCS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkdirSnapshot {
    digests: BTreeMap<String, String>,
}

impl WorkdirSnapshot {
    /// Reads every file under `root` (skipping the folders listed in
    /// `SKIPPED_DIRS` and symlinks). Unreadable entries are skipped.
    pub fn take(root: &Path) -> WorkdirSnapshot {
        let mut digests = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    let name = entry.file_name();
                    if !SKIPPED_DIRS.iter().any(|s| name == *s) {
                        stack.push(path);
                    }
                } else if kind.is_file()
                    && let Ok(bytes) = std::fs::read(&path)
                    && let Ok(rel) = path.strip_prefix(root)
                {
                    let key = rel
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy())
                        .collect::<Vec<_>>()
                        .join("/");
                    digests.insert(key, digest_hex(&[&bytes]));
                }
            }
        }
        WorkdirSnapshot { digests }
    }

    /// Files whose content differs between `self` (before) and `after`,
    /// including files created or removed, sorted.
    pub fn changed_since(&self, after: &WorkdirSnapshot) -> Vec<String> {
        let mut changed: Vec<String> = after
            .digests
            .iter()
            .filter(|(path, digest)| self.digests.get(*path) != Some(digest))
            .map(|(path, _)| path.clone())
            .collect();
        changed.extend(
            self.digests
                .keys()
                .filter(|p| !after.digests.contains_key(*p))
                .cloned(),
        );
        changed.sort();
        changed
    }

    /// How many files the snapshot holds.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether the snapshot holds no file.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }
}

/// Takes a snapshot on the blocking pool.
pub(crate) async fn snapshot(root: &Path) -> WorkdirSnapshot {
    let root = root.to_path_buf();
    tokio::task::spawn_blocking(move || WorkdirSnapshot::take(&root))
        .await
        .unwrap_or_default()
}
