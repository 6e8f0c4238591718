//! Keeping the cache bounded: which folders there are ([`list`]), which to
//! remove ([`plan_prune`], pure), and removing them ([`prune`], [`clean`]).
//!
//! Rules, in order: a folder a run holds, or the current repository's, is
//! never removed; a folder whose repository is gone is removed (both kinds);
//! a folder without a marker is left alone for [`UNMARKED_GRACE`] (an older
//! version may be using it) and counts as gone after; then, while the
//! target folders together are over the cap, the least recently used
//! target folder is evicted. Worktree folders of existing repositories are
//! never evicted: a paused session may still need its worktree.
//!
//! Only direct child folders of `<cache>/targets` and `<cache>/worktrees`
//! are ever removed (never through a symbolic link), each first renamed to a
//! `.evicting-…` sibling while its lock is held, then deleted.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::lease::{
    EVICTING, SIZE_FILE, folder_in_use, read_marker, remove_locked, try_lock_exclusive,
};
use super::{CacheKind, repo_key};
use crate::state::{StateError, write_json_atomic};

/// How long a folder without a marker is left alone.
pub const UNMARKED_GRACE: Duration = Duration::from_secs(24 * 60 * 60);

/// Whose a cache folder is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The repository at `path` (from the marker, or for an unmarked
    /// worktree folder from a worktree's `.git` file); `exists` says whether
    /// it is still a git repository.
    Repo {
        /// The repository's path.
        path: PathBuf,
        /// Whether `path` still holds a git repository.
        exists: bool,
    },
    /// No marker and nothing that names a repository.
    Unknown,
}

/// One per-repository cache folder, as [`list`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheFolder {
    /// Which kind.
    pub kind: CacheKind,
    /// The folder.
    pub path: PathBuf,
    /// Its name, the repository key (see [`repo_key`]).
    pub key: String,
    /// Whose it is.
    pub owner: Owner,
    /// Whether it has a marker.
    pub marked: bool,
    /// When a run last used it (the marker's time, else the newest
    /// modification time of the folder and its entries).
    pub last_used: Timestamp,
    /// Bytes on disk (each file once).
    pub bytes: u64,
    /// Whether a run holds it now.
    pub in_use: bool,
}

impl CacheFolder {
    /// Whether the folder outlived its repository: its repository is gone,
    /// or it has no owner and has been unused for longer than `grace`.
    pub fn is_stale(&self, now: Timestamp, grace: Duration) -> bool {
        match &self.owner {
            Owner::Repo { exists, .. } => !exists,
            Owner::Unknown => !is_young(self.last_used, now, grace),
        }
    }

    /// Whether it has no marker and was used within `grace` of `now`: a
    /// run of an older version may be using it.
    pub fn is_young_unmarked(&self, now: Timestamp, grace: Duration) -> bool {
        !self.marked && is_young(self.last_used, now, grace)
    }
}

fn is_young(at: Timestamp, now: Timestamp, grace: Duration) -> bool {
    now.duration_since(at).unsigned_abs() < grace || at > now
}

/// The measured size of a folder, kept in its [`SIZE_FILE`]: valid while no
/// run has claimed the folder since `measured_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FolderSize {
    /// Bytes on disk.
    pub bytes: u64,
    /// When the measurement started (RFC 3339).
    pub measured_at: String,
}

/// What a prune may remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunePolicy {
    /// The cap on the target folders' total size, in bytes.
    pub max_size: u64,
    /// The key of the current run's repository, never removed.
    pub keep: Option<String>,
    /// Now.
    pub now: Timestamp,
    /// How long a folder without a marker is left alone.
    pub unmarked_grace: Duration,
}

impl PrunePolicy {
    /// The policy for a run on `repo` with the cap `max_size`.
    pub fn for_run(repo: &Path, max_size: u64) -> PrunePolicy {
        PrunePolicy {
            max_size,
            keep: Some(repo_key(repo)),
            now: Timestamp::now(),
            unmarked_grace: UNMARKED_GRACE,
        }
    }
}

/// Why a folder is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalReason {
    /// Its repository no longer exists (or it has no owner and is old).
    Stale,
    /// The target folders were over the cap and it was the least recently
    /// used.
    OverCap,
    /// A user asked for it (`orchestrator cache clean`).
    Asked,
}

/// A folder removed (or, in a plan, to remove).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The folder as it was found.
    pub folder: CacheFolder,
    /// Why.
    pub reason: RemovalReason,
}

/// What a prune or clean did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// The folders removed.
    pub removed: Vec<Removal>,
    /// Folders left alone that a user may wonder about: held by a run, or
    /// unmarked and recently used.
    pub skipped: Vec<(CacheFolder, String)>,
    /// The target folders' total before, in bytes.
    pub targets_before: u64,
    /// The target folders' total after, in bytes.
    pub targets_after: u64,
}

impl PruneReport {
    /// Bytes freed.
    pub fn freed(&self) -> u64 {
        self.removed.iter().map(|r| r.folder.bytes).sum()
    }
}

/// The folders to remove from `folders` under `policy`, in removal order:
/// the stale first, then the least recently used target folders while the
/// targets' total is over the cap. Never the kept repository's, one in use
/// or an unmarked one within its grace.
pub fn plan_prune(folders: &[CacheFolder], policy: &PrunePolicy) -> Vec<Removal> {
    let removable = |f: &CacheFolder| {
        !f.in_use
            && policy.keep.as_deref() != Some(f.key.as_str())
            && !f.is_young_unmarked(policy.now, policy.unmarked_grace)
    };
    let mut plan: Vec<Removal> = folders
        .iter()
        .filter(|f| removable(f) && f.is_stale(policy.now, policy.unmarked_grace))
        .map(|f| Removal {
            folder: f.clone(),
            reason: RemovalReason::Stale,
        })
        .collect();
    let gone: HashSet<&Path> = plan.iter().map(|r| r.folder.path.as_path()).collect();
    let mut targets: Vec<&CacheFolder> = folders
        .iter()
        .filter(|f| f.kind == CacheKind::Targets && !gone.contains(f.path.as_path()))
        .collect();
    let mut total: u64 = targets.iter().map(|f| f.bytes).sum();
    targets.sort_by_key(|f| (f.last_used, f.path.clone()));
    let mut evictions = Vec::new();
    for folder in targets.into_iter().filter(|f| removable(f)) {
        if total <= policy.max_size {
            break;
        }
        total = total.saturating_sub(folder.bytes);
        evictions.push(Removal {
            folder: folder.clone(),
            reason: RemovalReason::OverCap,
        });
    }
    plan.extend(evictions);
    plan
}

/// Every per-repository folder under the cache folder `cache`, targets
/// first, each kind by name. Measures the folders whose recorded size is
/// out of date (and records it when no run holds them); removes what an
/// interrupted removal left.
pub fn list(cache: &Path) -> Result<Vec<CacheFolder>, StateError> {
    let mut folders = Vec::new();
    for kind in CacheKind::ALL {
        let root = kind.root_in(cache);
        let entries = match fs::read_dir(&root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(StateError::io("read", &root, e)),
        };
        let mut found = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            // Never through a symbolic link, never a plain file.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if name.starts_with(EVICTING) {
                let _ = fs::remove_dir_all(entry.path());
            } else if !name.starts_with('.') {
                found.push(inspect(kind, entry.path(), name));
            }
        }
        found.sort_by(|a, b| a.key.cmp(&b.key));
        folders.extend(found);
    }
    Ok(folders)
}

/// Reads one folder: its owner, last use, size and whether it is held.
/// Writes only the size file of a marked folder.
fn inspect(kind: CacheKind, path: PathBuf, key: String) -> CacheFolder {
    let measured_from = Timestamp::now();
    let in_use = folder_in_use(&path);
    let marker = read_marker(&path);
    let last_used = marker
        .as_ref()
        .and_then(|m| m.last_used_at())
        .unwrap_or_else(|| newest_mtime(&path));
    let owner = match &marker {
        Some(m) => Owner::Repo {
            exists: is_git_repo(&m.repo),
            path: m.repo.clone(),
        },
        None if kind == CacheKind::Worktrees => worktree_owner(&path),
        None => Owner::Unknown,
    };
    let recorded = fs::read(path.join(SIZE_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<FolderSize>(&b).ok())
        .filter(|s| {
            s.measured_at
                .parse::<Timestamp>()
                .is_ok_and(|at| at > last_used)
        });
    let bytes = match recorded {
        Some(size) if !in_use => size.bytes,
        _ => {
            let bytes = disk_usage(&path);
            // Nothing is written into a folder no run of ours claimed.
            if !in_use && marker.is_some() {
                let size = FolderSize {
                    bytes,
                    measured_at: measured_from.to_string(),
                };
                // Only an optimisation: a folder we cannot write is measured again.
                let _ = write_json_atomic(path.join(SIZE_FILE), &size);
            }
            bytes
        }
    };
    CacheFolder {
        kind,
        path,
        key,
        owner,
        marked: marker.is_some(),
        last_used,
        bytes,
        in_use,
    }
}

/// Whether `path` is (still) a git working tree.
fn is_git_repo(path: &Path) -> bool {
    path.join(".git").exists()
}

/// The repository of an unmarked worktree folder: the first worktree's
/// `.git` file (`gitdir: <repo>/.git/worktrees/<name>`) up to two levels
/// down.
fn worktree_owner(dir: &Path) -> Owner {
    let children = |d: &Path| -> Vec<PathBuf> {
        fs::read_dir(d)
            .map(|e| e.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let candidates = children(dir)
        .into_iter()
        .flat_map(|c| std::iter::once(c.clone()).chain(children(&c)));
    for candidate in candidates {
        let Ok(text) = fs::read_to_string(candidate.join(".git")) else {
            continue;
        };
        let Some(gitdir) = text.trim().strip_prefix("gitdir:") else {
            continue;
        };
        let gitdir = Path::new(gitdir.trim());
        if let Some(repo) = gitdir.ancestors().find(|a| a.ends_with(".git")) {
            let repo = repo.parent().unwrap_or(repo).to_path_buf();
            return Owner::Repo {
                exists: is_git_repo(&repo),
                path: repo,
            };
        }
    }
    Owner::Unknown
}

/// The newest modification time of the direct entries of `dir` (what a
/// run of an older version touched last), else the epoch. The folder's own
/// time and our files are left out: writing the size file changes them.
fn newest_mtime(dir: &Path) -> Timestamp {
    let ours = |name: &std::ffi::OsStr| {
        name.to_string_lossy()
            .trim_start_matches('.')
            .starts_with("orchestrator-cache")
    };
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| !ours(&e.file_name()))
                .filter_map(|e| e.metadata().ok()?.modified().ok())
                .filter_map(|t| Timestamp::try_from(t).ok())
                .max()
        })
        .ok()
        .flatten()
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Bytes on disk under `dir`, each hard-linked file once, never following
/// a symbolic link.
fn disk_usage(dir: &Path) -> u64 {
    let mut seen = HashSet::new();
    walkdir::WalkDir::new(dir)
        .follow_links(false)
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(|m| first_link(m, &mut seen))
        .map(|m| on_disk(&m))
        .sum()
}

#[cfg(unix)]
fn first_link(m: &fs::Metadata, seen: &mut HashSet<(u64, u64)>) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    m.nlink() < 2 || m.is_dir() || seen.insert((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn first_link(_m: &fs::Metadata, _seen: &mut HashSet<(u64, u64)>) -> bool {
    true
}

#[cfg(unix)]
fn on_disk(m: &fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    m.blocks().saturating_mul(512)
}

#[cfg(not(unix))]
fn on_disk(m: &fs::Metadata) -> u64 {
    m.len()
}

/// Lists the cache folder, removes what [`plan_prune`] chooses under
/// `policy`, and reports. A folder a run claimed since it was listed is
/// left alone.
pub fn prune(cache: &Path, policy: &PrunePolicy) -> Result<PruneReport, StateError> {
    let folders = list(cache)?;
    let plan = plan_prune(&folders, policy);
    let mut report = execute(cache, &folders, plan)?;
    for folder in &folders {
        if folder.is_young_unmarked(policy.now, policy.unmarked_grace)
            && policy.keep.as_deref() != Some(folder.key.as_str())
        {
            report.skipped.push((
                folder.clone(),
                "no marker and used within a day: an older version may be using it".to_owned(),
            ));
        }
    }
    Ok(report)
}

/// What `orchestrator cache clean` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clean {
    /// Every target folder, and the worktree folders whose repository is
    /// gone.
    All,
    /// Only the folders whose repository is gone.
    Stale,
    /// `repo`'s target folder (and its worktree folder when it is gone).
    Repo(PathBuf),
}

/// Removes the folders `what` selects that no run holds (and no unmarked
/// one within its grace); the others are reported as skipped.
pub fn clean(cache: &Path, what: &Clean) -> Result<PruneReport, StateError> {
    let now = Timestamp::now();
    let folders = list(cache)?;
    let wanted_key = match what {
        Clean::Repo(repo) => Some(repo_key(repo)),
        _ => None,
    };
    let mut plan = Vec::new();
    let mut skipped = Vec::new();
    for folder in &folders {
        let stale = folder.is_stale(now, UNMARKED_GRACE);
        let selected = match what {
            Clean::Stale => stale,
            Clean::All => folder.kind == CacheKind::Targets || stale,
            Clean::Repo(repo) => {
                let ours = wanted_key.as_deref() == Some(folder.key.as_str())
                    || matches!(&folder.owner, Owner::Repo { path, .. } if path == repo);
                ours && (folder.kind == CacheKind::Targets || stale)
            }
        };
        if !selected {
            continue;
        }
        if folder.in_use {
            skipped.push((folder.clone(), "in use by a running flow".to_owned()));
        } else if folder.is_young_unmarked(now, UNMARKED_GRACE) {
            skipped.push((
                folder.clone(),
                "no marker and used within a day: an older version may be using it".to_owned(),
            ));
        } else {
            plan.push(Removal {
                folder: folder.clone(),
                reason: if stale {
                    RemovalReason::Stale
                } else {
                    RemovalReason::Asked
                },
            });
        }
    }
    let mut report = execute(cache, &folders, plan)?;
    report.skipped.extend(skipped);
    Ok(report)
}

/// Removes the planned folders, each only if it can be locked and was not
/// claimed since it was listed.
fn execute(
    cache: &Path,
    folders: &[CacheFolder],
    plan: Vec<Removal>,
) -> Result<PruneReport, StateError> {
    let targets = |fs: &[CacheFolder]| {
        fs.iter()
            .filter(|f| f.kind == CacheKind::Targets)
            .map(|f| f.bytes)
            .sum::<u64>()
    };
    let mut report = PruneReport {
        targets_before: targets(folders),
        ..PruneReport::default()
    };
    for removal in plan {
        if remove_folder(cache, &removal.folder)? {
            report.removed.push(removal);
        } else {
            report.skipped.push((
                removal.folder,
                "claimed by a run while the cache was pruned".to_owned(),
            ));
        }
    }
    let removed_targets: u64 = report
        .removed
        .iter()
        .filter(|r| r.folder.kind == CacheKind::Targets)
        .map(|r| r.folder.bytes)
        .sum();
    report.targets_after = report.targets_before.saturating_sub(removed_targets);
    Ok(report)
}

/// Removes one listed folder: locks it (or gives up: `Ok(false)`), checks
/// that no run claimed it since, renames it aside and deletes it.
fn remove_folder(cache: &Path, folder: &CacheFolder) -> Result<bool, StateError> {
    let root = folder.kind.root_in(cache);
    // Never anything but a direct child of the kind's folder.
    if folder.path.parent() != Some(root.as_path()) || folder.key.starts_with('.') {
        return Ok(false);
    }
    let Some(lock) = try_lock_exclusive(&folder.path) else {
        return Ok(false);
    };
    let claimed_since = read_marker(&folder.path)
        .and_then(|m| m.last_used_at())
        .is_some_and(|at| at > folder.last_used);
    if claimed_since {
        return Ok(false);
    }
    remove_locked(&folder.path, lock)?;
    Ok(true)
}

#[cfg(test)]
mod tests;
