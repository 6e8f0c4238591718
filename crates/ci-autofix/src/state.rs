//! The loop's state file, `.moai/state/ci-autofix-<PR>.json`, and its lock.
//!
//! Fields are the seed's (`pr_number, iteration, max_iterations,
//! last_classification, last_subclass, last_action, started_at, history[]`)
//! plus a `version` and, in local mode, the `branch`. The file is written
//! atomically after every step, so a crash leaves the last complete state.
//!
//! - A run holds an OS lock (`.moai/state/.locks/ci-autofix-<key>/.lock`)
//!   for its whole life: a second run on the same PR is refused while the
//!   first is alive, and a crashed run never leaves a stale lock.
//! - A state file left by an earlier run (crash, escalation) is resumed — its
//!   iteration counter survives, so re-running cannot reset the cap — unless
//!   it started more than 24 hours ago ([`STALE_AFTER`]), in which case it is
//!   replaced by a fresh one (the seed's crash recovery).
//! - The file is removed when the checks turn green.
//! - A run stopped at its confirmation gate keeps the gate in the file
//!   (`gate`, [`ConfirmGate`]): the kept patch's commit and what the person
//!   decides on, written in the same atomic write. A state with a pending
//!   gate is never replaced as stale: it waits for a person.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use orchestrator_core::forge::ForgeKind;
use orchestrator_core::state::{SessionLock, StateError, read_json_if_exists, write_json_atomic};
use serde::{Deserialize, Serialize};

mod gate;
pub use gate::*;

/// Version of the state file format written by this crate.
pub const STATE_VERSION: u32 = 1;

/// A state file older than this may be replaced by a new run.
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The engine-owned folder (excluded from git, never committed).
pub const MOAI_DIR: &str = ".moai";

/// What the loop works on: a pull request, or a local branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Target {
    /// A change request on a forge: a GitHub pull request or a GitLab
    /// merge request.
    Pr {
        /// Its number (GitLab's `iid`).
        number: u64,
        /// Its head branch.
        branch: String,
        /// Which forge it is on (absent from state files of GitHub runs,
        /// and of versions before GitLab).
        #[serde(default = "github", skip_serializing_if = "is_github")]
        forge: ForgeKind,
    },
    /// The local branch, checks run locally.
    Local {
        /// The branch name (`HEAD` when detached).
        branch: String,
    },
}

impl Target {
    /// The key used in file names: `785` or `local-feat-x`.
    pub fn key(&self) -> String {
        match self {
            Target::Pr { number, .. } => number.to_string(),
            Target::Local { branch } => format!("local-{}", slug(branch)),
        }
    }

    /// The branch.
    pub fn branch(&self) -> &str {
        match self {
            Target::Pr { branch, .. } | Target::Local { branch } => branch,
        }
    }

    /// The PR number, in GitHub mode.
    pub fn pr_number(&self) -> Option<u64> {
        match self {
            Target::Pr { number, .. } => Some(*number),
            Target::Local { .. } => None,
        }
    }

    /// A short human label: `PR #785`, `MR !12` or `branch feat/x (local)`.
    pub fn label(&self) -> String {
        match self {
            Target::Pr { number, forge, .. } => forge.request_label(*number),
            Target::Local { branch } => format!("branch {branch} (local)"),
        }
    }
}

fn github() -> ForgeKind {
    ForgeKind::Github
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde passes a reference"
)]
fn is_github(kind: &ForgeKind) -> bool {
    *kind == ForgeKind::Github
}

/// A file-name-safe form of a branch name.
pub fn slug(branch: &str) -> String {
    let s: String = branch
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches(|c| c == '-' || c == '.').to_owned();
    if s.is_empty() { "head".to_owned() } else { s }
}

/// One finished iteration, as kept in `history[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// 1-based iteration.
    pub iteration: u32,
    /// `mechanical`, `semantic`, `unknown`, `infrastructure` or `flaky`.
    pub classification: String,
    /// `trivial`, `non-trivial` or `none`.
    pub sub_class: String,
    /// What was done (`applied`, `applied (silent)`, `escalated`, …).
    pub action: String,
    /// The fix commit, when one was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_sha: Option<String>,
    /// Why the loop escalated, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_reason: Option<String>,
    /// The failed checks of this iteration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// Problems that did not stop the iteration (e.g. the PR diff could not
    /// be fetched).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// When the iteration ended (RFC 3339).
    pub finished_at: String,
    /// What the agent spent in the iteration, when it keeps count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_spend: Option<orchestrator_core::agent::AgentSpend>,
    /// The re-run of the failed checks at the same commit, when one was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<RerunRecord>,
}

/// What re-running the failed checks at the same commit cost and showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunRecord {
    /// Why: `flaky?` (a test failure, before its first fix) or
    /// `infrastructure`.
    pub reason: String,
    /// How many check runs were started again.
    pub runs: u32,
    /// Wall time from the first re-run request to the last result, seconds.
    pub wall_secs: f64,
    /// The checks that passed on the re-run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed: Vec<String>,
    /// The checks that failed again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_again: Vec<String>,
    /// The tests the failed logs named, when they named any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<String>,
}

/// The state file's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutofixState {
    /// Format version ([`STATE_VERSION`]); files without it are version 1.
    #[serde(default = "default_version")]
    pub version: u32,
    /// The PR (`null` in local mode).
    pub pr_number: Option<u64>,
    /// The forge of `pr_number` (absent: GitHub).
    #[serde(default = "github", skip_serializing_if = "is_github")]
    pub forge: ForgeKind,
    /// The branch (an addition to the seed's fields).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub branch: String,
    /// The iteration in progress (1-based).
    pub iteration: u32,
    /// The cap.
    pub max_iterations: u32,
    /// The last classification (`""` before the first).
    pub last_classification: String,
    /// The last sub-class (`""` before the first).
    pub last_subclass: String,
    /// The last cadence action (`""` before the first).
    pub last_action: String,
    /// When this state was created (RFC 3339, UTC).
    pub started_at: String,
    /// Finished iterations.
    pub history: Vec<HistoryEntry>,
    /// The confirmation gate the run stopped at, while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<ConfirmGate>,
}

fn default_version() -> u32 {
    STATE_VERSION
}

impl AutofixState {
    /// A fresh state at iteration 1.
    pub fn new(target: &Target, max_iterations: u32, now: Timestamp) -> Self {
        Self {
            version: STATE_VERSION,
            pr_number: target.pr_number(),
            forge: match target {
                Target::Pr { forge, .. } => *forge,
                Target::Local { .. } => ForgeKind::Github,
            },
            branch: target.branch().to_owned(),
            iteration: 1,
            max_iterations,
            last_classification: String::new(),
            last_subclass: String::new(),
            last_action: String::new(),
            started_at: now.to_string(),
            history: Vec::new(),
            gate: None,
        }
    }

    /// Whether the state started more than [`STALE_AFTER`] before `now`
    /// (an unreadable `started_at` counts as stale).
    pub fn is_stale(&self, now: Timestamp) -> bool {
        match self.started_at.parse::<Timestamp>() {
            Ok(t) => now.duration_since(t).unsigned_abs() > STALE_AFTER,
            Err(_) => true,
        }
    }
}

/// Why the state could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateFileError {
    /// Another run holds the lock for this target.
    #[error("another ci-autofix run is already working on {target}: {source}")]
    Busy {
        /// The target label.
        target: String,
        /// The lock error (names the holder).
        #[source]
        source: Box<StateError>,
    },
    /// Reading, writing or locking failed.
    #[error(transparent)]
    State(Box<StateError>),
}

impl From<StateError> for StateFileError {
    fn from(e: StateError) -> Self {
        StateFileError::State(Box::new(e))
    }
}

/// The open state file of one run, holding the lock until dropped.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    _lock: SessionLock,
}

/// How an existing state file was treated when opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// There was none: a fresh state.
    Fresh,
    /// An earlier run's state was resumed.
    Resumed,
    /// An earlier state older than 24 h was replaced.
    ReplacedStale,
}

impl StateFile {
    /// The state file path for `target` under the repository `root`.
    pub fn path_for(root: &Path, target: &Target) -> PathBuf {
        Self::path_for_key(root, &target.key())
    }

    /// Locks the target and loads (or creates) its state; see the module docs.
    pub fn open(
        root: &Path,
        target: &Target,
        max_iterations: u32,
        now: Timestamp,
    ) -> Result<(StateFile, AutofixState, Opened), StateFileError> {
        Self::lock(root, target)?.load(root, target, max_iterations, now)
    }

    /// Locks the target without reading or writing its state, so that a run
    /// can hold the target before it looks at the working tree (a second
    /// run must be told another run is at work, not that the first run's
    /// fix in progress is an uncommitted change of the user's).
    pub fn lock(root: &Path, target: &Target) -> Result<TargetLock, StateFileError> {
        Self::lock_key(root, &target.key(), &target.label())
    }

    /// The state file of the target whose [`Target::key`] is `key`.
    pub fn path_for_key(root: &Path, key: &str) -> PathBuf {
        root.join(MOAI_DIR)
            .join("state")
            .join(format!("ci-autofix-{key}.json"))
    }

    /// [`StateFile::lock`] by the target's key (`label` names it in errors).
    pub fn lock_key(root: &Path, key: &str, label: &str) -> Result<TargetLock, StateFileError> {
        let lock_dir = root
            .join(MOAI_DIR)
            .join("state")
            .join(".locks")
            .join(format!("ci-autofix-{key}"));
        std::fs::create_dir_all(&lock_dir).map_err(|source| StateError::Io {
            action: "create directory",
            path: lock_dir.clone(),
            source,
        })?;
        let lock = SessionLock::acquire(&lock_dir).map_err(|source| match source {
            StateError::Locked { .. } => StateFileError::Busy {
                target: label.to_owned(),
                source: Box::new(source),
            },
            other => StateFileError::from(other),
        })?;
        Ok(TargetLock(lock))
    }
}

/// A held lock on one target ([`StateFile::lock`]), not yet loaded.
#[derive(Debug)]
pub struct TargetLock(SessionLock);

impl TargetLock {
    /// The locked folder (`.moai/state/.locks/ci-autofix-<key>/`): the
    /// target's session folder, where its `events.ndjson` goes.
    pub fn dir(&self) -> &Path {
        self.0.dir()
    }

    /// The target's state under this lock, as it is (`None`: there is
    /// none); nothing is created or replaced.
    pub fn existing(
        self,
        root: &Path,
        key: &str,
    ) -> Result<Option<(StateFile, AutofixState)>, StateFileError> {
        let path = StateFile::path_for_key(root, key);
        let Some(state) = read_json_if_exists::<AutofixState>(&path)? else {
            return Ok(None);
        };
        Ok(Some((
            StateFile {
                path,
                _lock: self.0,
            },
            state,
        )))
    }

    /// Loads (or creates) the target's state under this lock; see the module
    /// docs.
    pub fn load(
        self,
        root: &Path,
        target: &Target,
        max_iterations: u32,
        now: Timestamp,
    ) -> Result<(StateFile, AutofixState, Opened), StateFileError> {
        let path = StateFile::path_for(root, target);
        let existing: Option<AutofixState> = read_json_if_exists(&path)?;
        let (mut state, opened) = match existing {
            None => (
                AutofixState::new(target, max_iterations, now),
                Opened::Fresh,
            ),
            Some(s) if s.gate.is_none() && s.is_stale(now) => (
                AutofixState::new(target, max_iterations, now),
                Opened::ReplacedStale,
            ),
            Some(s) => (s, Opened::Resumed),
        };
        state.max_iterations = max_iterations;
        let file = StateFile {
            path,
            _lock: self.0,
        };
        file.save(&state)?;
        Ok((file, state, opened))
    }
}

impl StateFile {
    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the state atomically.
    pub fn save(&self, state: &AutofixState) -> Result<(), StateError> {
        write_json_atomic(&self.path, state)
    }

    /// Removes the state file (the checks are green); keeps the lock until drop.
    pub fn remove(&self) -> Result<(), StateError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StateError::Io {
                action: "remove",
                path: self.path.clone(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn pr() -> Target {
        Target::Pr {
            number: 785,
            branch: "feat/x".into(),
            forge: orchestrator_core::forge::ForgeKind::Github,
        }
    }

    #[test]
    fn fresh_state_has_the_seed_fields() {
        let s = AutofixState::new(&pr(), 3, ts("2026-05-07T10:00:00Z"));
        insta::assert_json_snapshot!(s, @r#"
        {
          "version": 1,
          "pr_number": 785,
          "branch": "feat/x",
          "iteration": 1,
          "max_iterations": 3,
          "last_classification": "",
          "last_subclass": "",
          "last_action": "",
          "started_at": "2026-05-07T10:00:00Z",
          "history": []
        }
        "#);
        // The seed's own file (no version, no branch) reads.
        let seed: AutofixState = serde_json::from_str(
            r#"{"pr_number": 785, "iteration": 1, "max_iterations": 3, "last_classification": "",
                "last_subclass": "", "last_action": "", "started_at": "2026-05-07T10:00:00Z", "history": []}"#,
        )
        .unwrap();
        assert_eq!(seed.version, 1);
    }

    #[test]
    fn second_run_is_refused_while_the_first_holds_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let now = ts("2026-05-07T10:00:00Z");
        let (first, _, opened) = StateFile::open(dir.path(), &pr(), 3, now).unwrap();
        assert_eq!(opened, Opened::Fresh);
        assert!(first.path().ends_with(".moai/state/ci-autofix-785.json"));
        let err = StateFile::open(dir.path(), &pr(), 3, now).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("another ci-autofix run is already working on PR #785"),
            "{err}"
        );
        // Another PR is independent.
        let other = Target::Pr {
            number: 786,
            branch: "b".into(),
            forge: orchestrator_core::forge::ForgeKind::Github,
        };
        assert!(StateFile::open(dir.path(), &other, 3, now).is_ok());
        drop(first);
        let (_again, _, opened) = StateFile::open(dir.path(), &pr(), 3, now).unwrap();
        assert_eq!(opened, Opened::Resumed);
    }

    #[test]
    fn an_earlier_state_is_resumed_unless_stale() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = ts("2026-05-07T10:00:00Z");
        {
            let (file, mut state, _) = StateFile::open(dir.path(), &pr(), 3, t0).unwrap();
            state.iteration = 3;
            file.save(&state).unwrap();
        }
        let (file, state, opened) =
            StateFile::open(dir.path(), &pr(), 3, ts("2026-05-08T09:00:00Z")).unwrap();
        assert_eq!((opened, state.iteration), (Opened::Resumed, 3));
        drop(file);
        let (file, state, opened) =
            StateFile::open(dir.path(), &pr(), 3, ts("2026-05-08T10:00:01Z")).unwrap();
        assert_eq!((opened, state.iteration), (Opened::ReplacedStale, 1));
        assert_eq!(state.started_at, "2026-05-08T10:00:01Z");
        file.remove().unwrap();
        assert!(!file.path().exists());
        file.remove().unwrap();
    }

    #[test]
    fn local_keys_are_file_name_safe() {
        let t = Target::Local {
            branch: "feat/ünï code".into(),
        };
        assert_eq!(t.key(), "local-feat--n--code");
        assert_eq!(slug("///"), "head");
        assert_eq!(pr().key(), "785");
    }
}
