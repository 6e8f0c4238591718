//! Session layout: where a fix session lives, its file names, and the lock.
//!
//! A session lives in `{review-dir}/fixes/fix-{timestamp}/` when the first
//! input sits inside a `.review/` directory, otherwise in
//! `{repo}/.review/fixes/fix-{timestamp}/`. While a run holds the session it
//! holds an OS lock on the directory ([`SessionLock`], released by the kernel
//! when the process dies) and `active-fix-session.json` marks the session as
//! unfinished; a second run on the same session is refused.

use std::path::{Component, Path, PathBuf};

use orchestrator_core::state::{SessionLock, read_json_if_exists, write_json_atomic};

use crate::error::ReviewFixError;
use crate::files::{ACTIVE_SESSION_VERSION, ActiveSession};

/// `active-fix-session.json`.
pub const ACTIVE_FILE: &str = "active-fix-session.json";
/// `fix-plan.json`.
pub const PLAN_FILE: &str = "fix-plan.json";
/// `fix-summary.md`.
pub const SUMMARY_FILE: &str = "fix-summary.md";
/// `fix-history.json`.
pub const HISTORY_FILE: &str = "fix-history.json";
/// `verify-state.json` (ours): a batch verification in flight.
pub const VERIFY_STATE_FILE: &str = "verify-state.json";
/// `findings.json` (ours): the normalised findings.
pub const FINDINGS_FILE: &str = "findings.json";

/// The folder holding sessions for these inputs: `{review-dir}/fixes` when
/// the first input is inside a `.review` directory, else `{repo}/.review/fixes`.
pub fn fixes_root(repo: &Path, first_input: Option<&Path>) -> PathBuf {
    if let Some(input) = first_input {
        let mut acc = PathBuf::new();
        let mut review_dir = None;
        for comp in input.components() {
            acc.push(comp);
            if matches!(comp, Component::Normal(name) if name == ".review") {
                review_dir = Some(acc.clone());
            }
        }
        if let Some(dir) = review_dir {
            return dir.join("fixes");
        }
    }
    repo.join(".review").join("fixes")
}

/// The paths of one session's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPaths {
    /// The session directory.
    pub dir: PathBuf,
    /// Where the session's worktrees go.
    worktrees: PathBuf,
    /// Where worktree slots keep their Cargo target folders.
    targets: PathBuf,
}

impl SessionPaths {
    /// Paths inside `dir`, worktrees included (`dir/worktrees`): for reading
    /// a session's files. A session that runs uses [`SessionPaths::for_repo`].
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Self {
            worktrees: dir.join("worktrees"),
            targets: dir.join("targets"),
            dir,
        }
    }

    /// Paths of a session of `repo`: its files in `dir`, its worktrees
    /// outside the repository, in
    /// `orchestrator_core::state::worktree_root(repo)/<session id>`, so that
    /// no tool run in a worktree finds the user's uncommitted configuration
    /// in a parent folder.
    pub fn for_repo(dir: impl Into<PathBuf>, repo: &Path) -> Self {
        let mut paths = Self::new(dir);
        paths.worktrees = orchestrator_core::state::worktree_root(repo).join(paths.id());
        paths.targets = orchestrator_core::state::build_cache_root(repo);
        paths
    }
    /// The session id (the directory name).
    pub fn id(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
    /// `partial-plan-N.json`.
    pub fn partial_plan(&self, batch: u32) -> PathBuf {
        self.dir.join(format!("partial-plan-{batch}.json"))
    }
    /// `fix-progress-N.json`.
    pub fn progress(&self, n: usize) -> PathBuf {
        self.dir.join(format!("fix-progress-{n}.json"))
    }
    /// `fix-plan.json`.
    pub fn plan(&self) -> PathBuf {
        self.dir.join(PLAN_FILE)
    }
    /// `fix-summary.md`.
    pub fn summary(&self) -> PathBuf {
        self.dir.join(SUMMARY_FILE)
    }
    /// `fix-history.json`.
    pub fn history(&self) -> PathBuf {
        self.dir.join(HISTORY_FILE)
    }
    /// `active-fix-session.json`.
    pub fn active(&self) -> PathBuf {
        self.dir.join(ACTIVE_FILE)
    }
    /// `findings.json`.
    pub fn findings(&self) -> PathBuf {
        self.dir.join(FINDINGS_FILE)
    }
    /// `verify-state.json`: a stage's batch verification in flight.
    pub fn verify_state(&self) -> PathBuf {
        self.dir.join(VERIFY_STATE_FILE)
    }
    /// The folder holding the session's worktrees (see
    /// [`SessionPaths::for_repo`]).
    pub fn worktrees(&self) -> PathBuf {
        self.worktrees.clone()
    }
    /// Worktree of a group in a run.
    pub fn worktree(&self, run: u32, group_id: &str) -> PathBuf {
        self.worktrees().join(format!("r{run}-{group_id}"))
    }
    /// Cargo target directory of a worktree slot: kept across sessions in
    /// the repository's build cache (`build_cache_root`), so a slot builds
    /// warm from the second run on. One run per repository at a time, and
    /// one tree per slot at a time, share it.
    pub fn target_dir(&self, slot: usize) -> PathBuf {
        self.targets.join(format!("review-fix-slot-{slot}"))
    }
}

/// A fresh session id: `fix-{unix milliseconds}`, bumped past any existing
/// directory under `root`.
pub fn new_session_dir(root: &Path) -> PathBuf {
    let mut millis = jiff::Timestamp::now().as_millisecond();
    loop {
        let dir = root.join(format!("fix-{millis}"));
        if !dir.exists() {
            return dir;
        }
        millis += 1;
    }
}

/// Unfinished sessions under `root` (those with an
/// `active-fix-session.json`), newest first.
pub fn unfinished_sessions(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut found: Vec<(i64, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(ACTIVE_FILE).is_file())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_owned();
            let stamp = name.strip_prefix("fix-")?.parse::<i64>().ok()?;
            Some((stamp, p))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// How old a session folder without `active-fix-session.json` must be before
/// [`remove_abandoned_sessions`] takes it for abandoned: far longer than the
/// few system calls between creating a session folder and recording it.
pub const ABANDONED_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Removes the session folders under `root` that a run killed before it
/// recorded its session left behind: `fix-*` folders holding nothing but
/// `findings.json`, the lock file and temporary files of interrupted
/// writes, last modified more than `older_than` ago and locked by nobody.
/// No resume can pick such a folder up (there is no session to continue),
/// and nothing else would remove it. Returns the folders removed.
pub fn remove_abandoned_sessions(root: &Path, older_than: std::time::Duration) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for dir in entries.filter_map(Result::ok).map(|e| e.path()) {
        let is_session = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("fix-"));
        if !is_session || !dir.is_dir() {
            continue;
        }
        let old_enough = std::fs::metadata(&dir)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= older_than);
        if !old_enough || !holds_only_unstarted_files(&dir) {
            continue;
        }
        // Whoever holds the lock is at work in it; otherwise it is ours
        // until removed.
        let Ok(lock) = SessionLock::acquire(&dir) else {
            continue;
        };
        let gone = std::fs::remove_dir_all(&dir).is_ok();
        drop(lock);
        if gone {
            removed.push(dir);
        }
    }
    removed.sort();
    removed
}

/// Whether `dir` holds only what a session has before it is recorded.
fn holds_only_unstarted_files(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.filter_map(Result::ok).all(|e| {
        let name = e.file_name();
        let Some(name) = name.to_str() else {
            return false;
        };
        let file = e.file_type().is_ok_and(|t| t.is_file());
        file && (name == FINDINGS_FILE
            || name == SessionLock::FILE_NAME
            || (name.starts_with('.') && name.ends_with(".tmp")))
    })
}

/// Locks a session directory (creating it), refusing when another run holds it.
pub fn lock_session(dir: &Path) -> Result<SessionLock, ReviewFixError> {
    std::fs::create_dir_all(dir).map_err(|e| ReviewFixError::io("create", dir, e))?;
    SessionLock::acquire(dir).map_err(|source| ReviewFixError::Locked {
        dir: dir.to_path_buf(),
        source: Box::new(source),
    })
}

/// Reads `active-fix-session.json`, checking its version.
pub fn read_active(paths: &SessionPaths) -> Result<Option<ActiveSession>, ReviewFixError> {
    let path = paths.active();
    let value: Option<serde_json::Value> = read_json_if_exists(&path)?;
    let Some(value) = value else {
        return Ok(None);
    };
    // A version that is not a number (or none) is left to the typed read
    // below, whose error names the line and column.
    if let Some(version) = value.get("version").and_then(serde_json::Value::as_u64)
        && version != u64::from(ACTIVE_SESSION_VERSION)
    {
        return Err(ReviewFixError::Version {
            path,
            found: u32::try_from(version).unwrap_or(u32::MAX),
            expected: ACTIVE_SESSION_VERSION,
        });
    }
    Ok(Some(orchestrator_core::state::read_json(&path)?))
}

/// Writes `active-fix-session.json` atomically.
pub fn write_active(paths: &SessionPaths, active: &ActiveSession) -> Result<(), ReviewFixError> {
    Ok(write_json_atomic(paths.active(), active)?)
}

/// The test command recorded in the unfinished session that `--resume`
/// would continue (the newest under the fixes root of `repo`, or of the
/// first `--fix` input's review folder); `None` when there is no such
/// session or it recorded none.
pub fn recorded_test_command(repo: &Path, first_input: Option<&Path>) -> Option<Vec<String>> {
    let root = repo
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(repo);
    let fixes = fixes_root(root, first_input);
    let dir = unfinished_sessions(&fixes).into_iter().next()?;
    let active = read_active(&SessionPaths::new(dir)).ok()??;
    active.options.test_command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixes_root_follows_the_review_dir() {
        let repo = Path::new("/repo");
        assert_eq!(
            fixes_root(repo, Some(Path::new("/w/WFS-1/.review/fix-export-1.json"))),
            PathBuf::from("/w/WFS-1/.review/fixes")
        );
        assert_eq!(
            fixes_root(repo, Some(Path::new("/w/WFS-1/.review"))),
            PathBuf::from("/w/WFS-1/.review/fixes")
        );
        assert_eq!(
            fixes_root(repo, Some(Path::new("/tmp/clippy.json"))),
            PathBuf::from("/repo/.review/fixes")
        );
        assert_eq!(fixes_root(repo, None), PathBuf::from("/repo/.review/fixes"));
    }

    #[test]
    fn unfinished_sessions_are_listed_newest_first() {
        let root = tempfile::tempdir().unwrap();
        for (name, active) in [
            ("fix-10", true),
            ("fix-30", false),
            ("fix-20", true),
            ("other", true),
        ] {
            let d = root.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            if active {
                std::fs::write(d.join(ACTIVE_FILE), "{}").unwrap();
            }
        }
        let names: Vec<_> = unfinished_sessions(root.path())
            .into_iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["fix-20", "fix-10"]);
    }

    #[test]
    fn only_unrecorded_unlocked_old_session_folders_are_abandoned() {
        use std::time::Duration;
        let root = tempfile::tempdir().unwrap();
        let make = |name: &str, files: &[&str]| {
            let d = root.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            for f in files {
                std::fs::write(d.join(f), "{}").unwrap();
            }
            d
        };
        // Killed before the session was recorded: removed.
        make(
            "fix-1",
            &[FINDINGS_FILE, ".lock", ".findings.json.x1y2.tmp"],
        );
        make("fix-2", &[]);
        // Recorded, finished, or not ours: kept.
        make("fix-3", &[FINDINGS_FILE, ACTIVE_FILE]);
        make("fix-4", &[FINDINGS_FILE, SUMMARY_FILE, HISTORY_FILE]);
        make("fix-5", &[FINDINGS_FILE, "notes.txt"]);
        make("other", &[FINDINGS_FILE]);
        // Held by a live run: kept.
        let held = make("fix-6", &[FINDINGS_FILE]);
        let _lock = lock_session(&held).unwrap();

        // Too young to be taken for abandoned.
        assert!(remove_abandoned_sessions(root.path(), Duration::from_secs(3600)).is_empty());

        let removed: Vec<String> = remove_abandoned_sessions(root.path(), Duration::ZERO)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(removed, ["fix-1", "fix-2"]);
        let mut left: Vec<String> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["fix-3", "fix-4", "fix-5", "fix-6", "other"]);
    }

    #[test]
    fn a_second_lock_on_a_session_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("fix-1");
        let _held = lock_session(&dir).unwrap();
        let err = lock_session(&dir).unwrap_err();
        assert!(matches!(err, ReviewFixError::Locked { .. }), "{err}");
        assert!(err.to_string().contains("is in use"), "{err}");
    }
}
