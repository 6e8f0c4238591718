//! Claiming a repository's cache folders: the marker that says whose they
//! are and when they were last used, and the shared lock a run holds while
//! it uses them.
//!
//! A run takes a *shared* lock on `<folder>/.orchestrator-cache.lock`, so
//! two runs on one repository may share its folders; a pruner takes the
//! *exclusive* lock without waiting, and skips the folder when it cannot
//! have it. The kernel drops the lock when its holder dies, so a crashed run
//! never pins a folder. An evicted folder is renamed away while the pruner
//! holds the lock; a run that was waiting for the lock then finds that its
//! lock file is no longer the one at the folder's path and claims a fresh
//! folder instead.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{CacheKind, cache_dir, repo_folder};
use crate::state::{StateError, write_json_atomic};

/// The marker in each claimed folder: [`CacheMarker`] as JSON.
pub const MARKER_FILE: &str = ".orchestrator-cache.json";
/// The lock file in each claimed folder (never deleted while the folder is).
pub const LOCK_FILE: &str = ".orchestrator-cache.lock";
/// The folder's measured size, written by a pruner (see `FolderSize`).
pub const SIZE_FILE: &str = ".orchestrator-cache-size.json";
/// The marker format this build writes and reads.
pub const MARKER_VERSION: u32 = 1;

/// Whose a cache folder is and when a run last used it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheMarker {
    /// Format version, [`MARKER_VERSION`].
    pub version: u32,
    /// The repository's canonical path.
    pub repo: PathBuf,
    /// When a run last claimed the folder (RFC 3339, UTC).
    pub last_used: String,
}

impl CacheMarker {
    /// [`CacheMarker::last_used`] as a time, when it parses.
    pub fn last_used_at(&self) -> Option<jiff::Timestamp> {
        self.last_used.parse().ok()
    }
}

/// The marker of the folder `dir`, when it has one this build reads.
pub fn read_marker(dir: &Path) -> Option<CacheMarker> {
    let bytes = fs::read(dir.join(MARKER_FILE)).ok()?;
    serde_json::from_slice::<CacheMarker>(&bytes)
        .ok()
        .filter(|m| m.version == MARKER_VERSION)
}

/// A run's claim on its repository's cache folders: both kinds exist, are
/// marked as the repository's and used now, and stay locked (shared) until
/// the lease is dropped.
#[derive(Debug)]
pub struct CacheLease {
    held: Vec<(PathBuf, File)>,
}

impl CacheLease {
    /// Claims `repo`'s folders in the cache folder ([`cache_dir`]).
    pub fn claim(repo: &Path) -> Result<CacheLease, StateError> {
        Self::claim_in(&cache_dir(), repo)
    }

    /// Claims `repo`'s folders under the cache folder `cache`.
    ///
    /// Waits while a pruner holds a folder's lock (a rename and a
    /// measurement at most), and claims a fresh folder when that pruner
    /// evicted it.
    pub fn claim_in(cache: &Path, repo: &Path) -> Result<CacheLease, StateError> {
        let canonical = repo
            .canonicalize()
            .map_err(|e| StateError::io("resolve the repository", repo, e))?;
        let mut held = Vec::new();
        for kind in CacheKind::ALL {
            let dir = repo_folder(cache, kind, &canonical);
            let file = lock_shared(&dir)?;
            let marker = CacheMarker {
                version: MARKER_VERSION,
                repo: canonical.clone(),
                last_used: jiff::Timestamp::now().to_string(),
            };
            write_json_atomic(dir.join(MARKER_FILE), &marker)?;
            held.push((dir, file));
        }
        Ok(CacheLease { held })
    }

    /// The folders held, targets first.
    pub fn folders(&self) -> impl Iterator<Item = &Path> {
        self.held.iter().map(|(dir, _)| dir.as_path())
    }
}

impl Drop for CacheLease {
    /// Releases the folders; one that holds nothing but our own files (the
    /// run made no worktree or build there) and that no other run holds is
    /// removed, as the flows removed their empty folders before.
    fn drop(&mut self) {
        for (dir, file) in self.held.drain(..) {
            drop(file);
            if !holds_only_our_files(&dir) {
                continue;
            }
            if let Some(lock) = lock_exclusive_soon(&dir)
                && holds_only_our_files(&dir)
            {
                let _ = remove_locked(&dir, lock);
            }
        }
    }
}

/// How many times a released lease tries for a folder's exclusive lock,
/// [`RELEASE_PAUSE`] apart: a pruner of another run probing the folder
/// ([`folder_in_use`]) holds it for an instant, and the folder would be
/// left behind for that instant's bad luck; another run holding it keeps
/// it for good, and the folder is rightly left.
const RELEASE_ATTEMPTS: u32 = 20;
/// The pause between those attempts.
const RELEASE_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

/// [`try_lock_exclusive`], tried again while something holds the lock, up
/// to [`RELEASE_ATTEMPTS`] times.
fn lock_exclusive_soon(dir: &Path) -> Option<File> {
    for attempt in 1..=RELEASE_ATTEMPTS {
        if let Some(lock) = try_lock_exclusive(dir) {
            return Some(lock);
        }
        if attempt < RELEASE_ATTEMPTS {
            std::thread::sleep(RELEASE_PAUSE);
        }
    }
    None
}

/// Whether `dir` holds nothing but the marker, the lock and the size file
/// (and what interrupted writes of them left).
fn holds_only_our_files(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(Result::ok).all(|e| {
            e.file_name()
                .to_string_lossy()
                .trim_start_matches('.')
                .starts_with("orchestrator-cache")
        })
    })
}

/// Prefix of a folder being removed.
pub(super) const EVICTING: &str = ".evicting-";

/// Removes the folder `dir`, whose exclusive `lock` the caller holds: renames
/// it to a `.evicting-…` sibling (so that a run waiting for the lock claims
/// a fresh folder), releases the lock, deletes the renamed folder.
pub(super) fn remove_locked(dir: &Path, lock: File) -> Result<(), StateError> {
    let (Some(root), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Ok(());
    };
    let aside = root.join(format!(
        "{EVICTING}{}-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond()
    ));
    fs::rename(dir, &aside).map_err(|e| StateError::io("rename", dir, e))?;
    drop(lock);
    fs::remove_dir_all(&aside).map_err(|e| StateError::io("remove", &aside, e))
}

/// Creates `dir` and takes a shared lock on its lock file, again on a fresh
/// folder if a pruner renamed this one away while we waited.
fn lock_shared(dir: &Path) -> Result<File, StateError> {
    const ATTEMPTS: u32 = 8;
    let path = dir.join(LOCK_FILE);
    for _ in 0..ATTEMPTS {
        fs::create_dir_all(dir).map_err(|e| StateError::io("create", dir, e))?;
        let file = open_lock(&path)?;
        file.lock_shared()
            .map_err(|e| StateError::io("lock", &path, e))?;
        if is_same_file(&file, &path) {
            return Ok(file);
        }
    }
    Err(StateError::io(
        "lock",
        &path,
        io::Error::other(format!(
            "the folder was removed under us {ATTEMPTS} times in a row"
        )),
    ))
}

fn open_lock(path: &Path) -> Result<File, StateError> {
    // No truncation: the file may belong to a live holder.
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| StateError::io("open lock file", path, e))
}

/// Takes the exclusive lock of the folder `dir` without waiting: `None`
/// when a run (or another pruner) holds it, or it cannot be taken.
pub(super) fn try_lock_exclusive(dir: &Path) -> Option<File> {
    let path = dir.join(LOCK_FILE);
    let file = open_lock(&path).ok()?;
    match file.try_lock() {
        Ok(()) => Some(file),
        Err(TryLockError::WouldBlock | TryLockError::Error(_)) => None,
    }
}

/// Whether a run holds the folder `dir` (a lock that cannot be taken counts
/// as held). Writes nothing: a folder without a lock file is held by none.
pub fn folder_in_use(dir: &Path) -> bool {
    let path = dir.join(LOCK_FILE);
    match OpenOptions::new().read(true).write(true).open(&path) {
        Ok(file) => !matches!(file.try_lock(), Ok(())),
        Err(e) => e.kind() != io::ErrorKind::NotFound,
    }
}

/// Whether the open `file` is still the file at `path`.
#[cfg(unix)]
fn is_same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Elsewhere a folder with an open file cannot be renamed, so it is.
#[cfg(not(unix))]
fn is_same_file(_file: &File, path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_marks_both_folders_and_holds_them_until_dropped() {
        let cache = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        let lease = CacheLease::claim_in(cache.path(), repo.path()).unwrap();
        let folders: Vec<PathBuf> = lease.folders().map(Path::to_path_buf).collect();
        assert_eq!(folders.len(), 2);
        for dir in &folders {
            let marker = read_marker(dir).unwrap();
            assert_eq!(marker.repo, repo.path().canonicalize().unwrap());
            assert!(marker.last_used_at().is_some());
            assert!(folder_in_use(dir), "{}", dir.display());
        }
        // A second run of the same repository shares them.
        let second = CacheLease::claim_in(cache.path(), repo.path()).unwrap();
        drop(lease);
        assert!(folders.iter().all(|d| folder_in_use(d)));
        // Released, the folders go: the runs left nothing in them.
        drop(second);
        assert!(folders.iter().all(|d| !d.exists()));

        // A folder with a run's work in it stays, unlocked.
        let lease = CacheLease::claim_in(cache.path(), repo.path()).unwrap();
        let targets = lease.folders().next().unwrap().to_path_buf();
        fs::create_dir_all(targets.join("review-fix-slot-0")).unwrap();
        drop(lease);
        assert!(targets.join("review-fix-slot-0").is_dir());
        assert!(read_marker(&targets).is_some());
        assert!(!folder_in_use(&targets));
        assert!(!folders[1].exists());
    }

    /// Another run's pruner probing the folder at the instant a lease is
    /// released (holding its lock for that instant) does not leave the
    /// empty folder behind.
    #[test]
    fn a_release_during_a_pruners_probe_still_removes_the_empty_folders() {
        let cache = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        let lease = CacheLease::claim_in(cache.path(), repo.path()).unwrap();
        let folders: Vec<PathBuf> = lease.folders().map(Path::to_path_buf).collect();
        // The probe: a hold on the first folder's lock when the lease goes.
        let probe = open_lock(&folders[0].join(LOCK_FILE)).unwrap();
        probe.lock_shared().unwrap();
        let dropper = std::thread::spawn(move || drop(lease));
        std::thread::sleep(RELEASE_PAUSE / 5);
        drop(probe);
        dropper.join().unwrap();
        assert!(
            folders.iter().all(|d| !d.exists()),
            "left: {:?}",
            folders.iter().filter(|d| d.exists()).collect::<Vec<_>>()
        );
    }
}
