//! Session folders: `<repo>/.workflow/.lite-plan/{session-id}/`.
//!
//! A session folder holds the seed's files — `explore.csv`, `tasks.csv`,
//! `results.csv`, `discoveries.ndjson`, `context.md`, and while a wave runs
//! its temporary `explore-wave-{N}.csv` / `task-wave-{N}.csv` — plus three of
//! ours:
//!
//! - `session.json` ([`SessionMeta`], versioned): the requirement, when and
//!   how the session was created, where it stopped, and which plans were
//!   approved at their gate ([`Approvals`]: a plan nobody approved is never
//!   run by a resume alone). Sessions created by the seed itself have none;
//!   they are read with defaults (nothing approved).
//! - `journal.ndjson` (see [`crate::journal`]): every finished row, fsynced,
//!   so that a `kill -9` at any instant loses nothing finished.
//! - `.lock` ([`SessionLock`]): held for the whole run; a second engine on the
//!   same session is refused with the holder's pid.
//!
//! The CLI adds `events.ndjson`, the run's events as they happened
//! (`orchestrator_core::state::event_log`), for watchers; the flow itself
//! never reads it. [`read_state`] reads a session without its lock.
//!
//! ## Session ids
//!
//! `wpp-{YYYYMMDD}-{slug}`, exactly as the seed builds them: the date is
//! taken in **UTC+8** (the seed's `getUtc8ISOString`, kept so that ids match
//! sessions the seed created), and the slug is the requirement lowercased,
//! every run of characters other than `a-z`, `0-9` and CJK ideographs
//! (U+4E00–U+9FA5) replaced by one `-`, cut to 40 characters ([`slug`]).
//! Where the seed would reuse an existing folder for the same requirement on
//! the same day, we append `-2`, `-3`, … instead of overwriting it.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use jiff::tz::{Offset, TimeZone};
use orchestrator_core::state::{SessionLock, StateError, read_json_if_exists, write_json_atomic};
use serde::{Deserialize, Serialize};

use crate::GatePoint;
use crate::error::PlanexError;
use crate::journal::{Journal, JournalEntry, PausedTask, read_journal};
use crate::rows::{
    ExploreRow, RowStatus, TaskRow, read_explore_csv, read_tasks_csv, write_explore_csv,
    write_tasks_csv,
};

mod approvals;
pub use approvals::*;

/// Sessions live in this folder under the repository.
pub const SESSIONS_DIR: &str = ".workflow/.lite-plan";
/// The exploration plan and results.
pub const EXPLORE_CSV: &str = "explore.csv";
/// The task plan and results.
pub const TASKS_CSV: &str = "tasks.csv";
/// The final copy of `tasks.csv` (phase 5).
pub const RESULTS_CSV: &str = "results.csv";
/// The shared discovery board.
pub const DISCOVERIES: &str = "discoveries.ndjson";
/// The human-readable report (phase 5).
pub const CONTEXT_MD: &str = "context.md";
/// Our session metadata.
pub const META_FILE: &str = "session.json";

/// Version of the [`SessionMeta`] format.
pub const META_VERSION: u32 = 1;

/// Hours east of UTC of the time zone session dates (and the report's
/// `Completed` time) are written in: UTC+8, as in the seed.
pub const SESSION_UTC_OFFSET_HOURS: i8 = 8;

/// The session time zone (UTC+8, see [`SESSION_UTC_OFFSET_HOURS`]).
pub fn session_time_zone() -> TimeZone {
    TimeZone::fixed(Offset::constant(SESSION_UTC_OFFSET_HOURS))
}

/// `now` in the session time zone, RFC 3339 with offset:
/// `2026-02-28T10:00:00+08:00`.
pub fn session_timestamp(now: Timestamp) -> String {
    now.to_zoned(session_time_zone())
        .strftime("%Y-%m-%dT%H:%M:%S%:z")
        .to_string()
}

/// The seed's slug of a requirement (see the [module docs](self)).
pub fn slug(requirement: &str) -> String {
    let mut out = String::new();
    let mut in_separator = false;
    for c in requirement.trim().to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || ('\u{4e00}'..='\u{9fa5}').contains(&c) {
            out.push(c);
            in_separator = false;
        } else if !in_separator {
            out.push('-');
            in_separator = true;
        }
    }
    out.chars().take(40).collect()
}

/// The session id for `requirement` created at `now`:
/// `wpp-{YYYYMMDD}-{slug}`, the date in UTC+8. A requirement with no letter
/// or digit gets the slug `session`.
pub fn session_id(requirement: &str, now: Timestamp) -> String {
    let date = now
        .to_zoned(session_time_zone())
        .strftime("%Y%m%d")
        .to_string();
    let mut s = slug(requirement);
    if s.chars().all(|c| c == '-') {
        s = "session".to_owned();
    }
    format!("wpp-{date}-{s}")
}

/// How a session was started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionSource {
    /// The whole flow, from a requirement.
    Plan,
    /// `run <tasks.csv>`: phases 4–5 over a person-written tasks.csv.
    Run {
        /// The tasks.csv that was copied in.
        tasks_csv: String,
    },
    /// A folder created by the seed itself (no `session.json`).
    Seed,
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Running, or interrupted by a crash.
    #[default]
    Active,
    /// Stopped at a gate (Modify, deferred, escalation): resumable.
    Stopped,
    /// Cancelled at a gate.
    Cancelled,
    /// Phase 5 finished.
    Finished,
}

/// `session.json`: what the CSVs do not say about a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// Format version ([`META_VERSION`]).
    pub version: u32,
    /// The session id (its folder name).
    pub id: String,
    /// The requirement (for `run`: `run <file>`).
    pub requirement: String,
    /// When the session was created (RFC 3339, UTC).
    pub created_at: String,
    /// How it was started.
    pub source: SessionSource,
    /// Where it stands.
    #[serde(default)]
    pub status: SessionStatus,
    /// Why it stopped, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Which plans were approved at their gate, and when. Absent in
    /// sessions written before approvals were recorded and in seed-made
    /// folders: those plans count as not approved, so `--continue` asks the
    /// gate again (or takes `-y` as the approval).
    #[serde(default, skip_serializing_if = "Approvals::is_empty")]
    pub approvals: Approvals,
}

/// Where a resumed session picks up (the seed's rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumePhase {
    /// `tasks.csv` exists: execution (phase 4).
    Execute,
    /// Only `explore.csv` exists: exploration (phase 2).
    Explore,
    /// Neither exists: nothing to resume.
    Nothing,
}

/// A session found on disk, for listings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Its metadata (synthesized for folders the seed created).
    pub meta: SessionMeta,
    /// Where `--continue` would pick up.
    pub resume_phase: ResumePhase,
}

/// The sessions directory of `repo`.
pub fn sessions_dir(repo: &Path) -> PathBuf {
    repo.join(SESSIONS_DIR)
}

/// Every session folder under `repo`, oldest first (by creation time, then id).
pub fn list_sessions(repo: &Path) -> Result<Vec<SessionInfo>, PlanexError> {
    let dir = sessions_dir(repo);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(PlanexError::io("list sessions in", &dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| PlanexError::io("list sessions in", &dir, e))?;
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let Some(id) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        let meta = load_meta(&path, &id)?;
        out.push(SessionInfo {
            resume_phase: resume_phase(&path),
            id,
            dir: path,
            meta,
        });
    }
    out.sort_by(|a, b| {
        a.meta
            .created_at
            .cmp(&b.meta.created_at)
            .then_with(|| a.id.cmp(&b.id))
    });
    Ok(out)
}

fn resume_phase(dir: &Path) -> ResumePhase {
    if dir.join(TASKS_CSV).is_file() {
        ResumePhase::Execute
    } else if dir.join(EXPLORE_CSV).is_file() {
        ResumePhase::Explore
    } else {
        ResumePhase::Nothing
    }
}

/// Reads `session.json`, or synthesizes metadata for a seed-made folder (its
/// creation time from the folder's modification time).
fn load_meta(dir: &Path, id: &str) -> Result<SessionMeta, PlanexError> {
    if let Some(meta) = read_json_if_exists::<SessionMeta>(dir.join(META_FILE))? {
        return Ok(meta);
    }
    let created_at = fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| Timestamp::try_from(t).ok())
        .map(|t| t.to_string())
        .unwrap_or_default();
    Ok(SessionMeta {
        version: META_VERSION,
        id: id.to_owned(),
        requirement: String::new(),
        created_at,
        source: SessionSource::Seed,
        status: SessionStatus::Active,
        stop_reason: None,
        approvals: Approvals::default(),
    })
}

/// The session `--continue` would open: the one named `id`, or the newest
/// resumable one (skipping cancelled sessions and folders with nothing to
/// resume); not locked.
pub fn find_session(repo: &Path, id: Option<&str>) -> Result<SessionInfo, PlanexError> {
    let root = sessions_dir(repo);
    let sessions = list_sessions(repo)?;
    let found = || sessions.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
    let info = match id {
        Some(id) => {
            if id.is_empty() || id.contains(['/', '\\']) || id == "." || id == ".." {
                return Err(PlanexError::InvalidSessionId { id: id.to_owned() });
            }
            sessions
                .iter()
                .find(|s| s.id == id)
                .ok_or_else(|| PlanexError::SessionNotFound {
                    id: id.to_owned(),
                    dir: root.clone(),
                    found: found(),
                })?
        }
        None => sessions
            .iter()
            .rev()
            .find(|s| {
                s.meta.status != SessionStatus::Cancelled && s.resume_phase != ResumePhase::Nothing
            })
            .ok_or_else(|| PlanexError::NoSession {
                dir: root.clone(),
                found: found(),
            })?,
    };
    if info.resume_phase == ResumePhase::Nothing {
        return Err(PlanexError::NothingToResume {
            dir: info.dir.clone(),
        });
    }
    Ok(info.clone())
}

/// An open, locked session.
#[derive(Debug)]
pub struct Session {
    dir: PathBuf,
    meta: SessionMeta,
    journal: Journal,
    _lock: SessionLock,
}

impl Session {
    /// Creates a new session folder for `requirement` under `repo` and locks it.
    ///
    /// Also makes sure `.workflow/` is listed in `.git/info/exclude` when
    /// `repo` is a git work tree, so that session files never count as dirty.
    pub fn create(
        repo: &Path,
        requirement: &str,
        source: SessionSource,
        now: Timestamp,
    ) -> Result<Session, PlanexError> {
        let root = sessions_dir(repo);
        fs::create_dir_all(&root).map_err(|e| PlanexError::io("create", &root, e))?;
        exclude_from_git(repo)?;
        let base = session_id(requirement, now);
        let mut n = 1u32;
        let (id, dir) = loop {
            let id = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let dir = root.join(&id);
            match fs::create_dir(&dir) {
                Ok(()) => break (id, dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                Err(e) => return Err(PlanexError::io("create", &dir, e)),
            }
        };
        let lock = SessionLock::acquire(&dir)?;
        let meta = SessionMeta {
            version: META_VERSION,
            id,
            requirement: requirement.trim().to_owned(),
            created_at: now.to_string(),
            source,
            status: SessionStatus::Active,
            stop_reason: None,
            approvals: Approvals::default(),
        };
        write_json_atomic(dir.join(META_FILE), &meta)?;
        // The seed's rule: the board exists from the start and is never recreated.
        orchestrator_core::state::NdjsonBoard::open(dir.join(DISCOVERIES))?;
        let journal = Journal::open(&dir)?;
        Ok(Session {
            dir,
            meta,
            journal,
            _lock: lock,
        })
    }

    /// Opens the session named `id`, or the newest resumable one (skipping
    /// cancelled sessions and folders with nothing to resume), and locks it.
    pub fn open(repo: &Path, id: Option<&str>) -> Result<Session, PlanexError> {
        let info = find_session(repo, id)?;
        let lock = SessionLock::acquire(&info.dir)?;
        let journal = Journal::open(&info.dir)?;
        Ok(Session {
            dir: info.dir,
            meta: info.meta,
            journal,
            _lock: lock,
        })
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// The session folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The metadata.
    pub fn meta(&self) -> &SessionMeta {
        &self.meta
    }

    /// `explore.csv`.
    pub fn explore_csv(&self) -> PathBuf {
        self.dir.join(EXPLORE_CSV)
    }

    /// `tasks.csv`.
    pub fn tasks_csv(&self) -> PathBuf {
        self.dir.join(TASKS_CSV)
    }

    /// `results.csv`.
    pub fn results_csv(&self) -> PathBuf {
        self.dir.join(RESULTS_CSV)
    }

    /// `context.md`.
    pub fn context_md(&self) -> PathBuf {
        self.dir.join(CONTEXT_MD)
    }

    /// `discoveries.ndjson`.
    pub fn discoveries(&self) -> PathBuf {
        self.dir.join(DISCOVERIES)
    }

    /// The temporary CSV of explore wave `wave`.
    pub fn explore_wave_csv(&self, wave: u32) -> PathBuf {
        self.dir.join(format!("explore-wave-{wave}.csv"))
    }

    /// The temporary CSV of task wave `wave`.
    pub fn task_wave_csv(&self, wave: u32) -> PathBuf {
        self.dir.join(format!("task-wave-{wave}.csv"))
    }

    /// Where `--continue` picks this session up.
    pub fn resume_phase(&self) -> ResumePhase {
        resume_phase(&self.dir)
    }

    /// Updates and saves the metadata.
    pub fn set_status(
        &mut self,
        status: SessionStatus,
        reason: Option<String>,
    ) -> Result<(), PlanexError> {
        self.meta.status = status;
        self.meta.stop_reason = reason;
        write_json_atomic(self.dir.join(META_FILE), &self.meta)?;
        Ok(())
    }

    /// The approval of the plan at `gate`, if it was given.
    pub fn approval(&self, gate: GatePoint) -> Option<&Approval> {
        self.meta.approvals.get(gate)
    }

    /// Records (atomically, in `session.json`) that the plan at `gate` was
    /// approved at `now`.
    pub fn approve(
        &mut self,
        gate: GatePoint,
        by: ApprovedBy,
        now: Timestamp,
    ) -> Result<(), PlanexError> {
        *self.meta.approvals.slot(gate) = Some(Approval {
            at: now.to_string(),
            by,
        });
        write_json_atomic(self.dir.join(META_FILE), &self.meta)?;
        Ok(())
    }

    /// Forgets the approval of the plan at `gate` (its file is about to be
    /// edited or replaced).
    pub fn revoke(&mut self, gate: GatePoint) -> Result<(), PlanexError> {
        if self.meta.approvals.slot(gate).take().is_some() {
            write_json_atomic(self.dir.join(META_FILE), &self.meta)?;
        }
        Ok(())
    }

    /// Reads both CSVs (those that exist) and replays the journal over them.
    /// Returns the state and a warning about skipped journal lines, if any.
    pub fn load(&self) -> Result<(SessionState, Option<String>), PlanexError> {
        read_state(&self.dir)
    }

    /// Appends a finished row (or pause, or reset) to the journal, fsynced.
    pub fn record(&self, entry: JournalEntry) -> Result<(), PlanexError> {
        self.journal.append(entry)?;
        Ok(())
    }

    /// Writes the CSVs from `state` (atomically) and then shrinks the journal
    /// to the pauses, which no CSV holds.
    pub fn checkpoint(&mut self, state: &SessionState) -> Result<(), PlanexError> {
        if let Some(rows) = &state.explore {
            write_explore_csv(self.explore_csv(), rows)?;
        }
        if let Some(rows) = &state.tasks {
            write_tasks_csv(self.tasks_csv(), rows)?;
        }
        let keep: Vec<JournalEntry> = state
            .paused
            .values()
            .cloned()
            .map(JournalEntry::Paused)
            .collect();
        self.journal.replace(&keep)?;
        Ok(())
    }

    /// Removes a temporary wave CSV (missing is fine).
    pub fn remove_file(&self, path: &Path) -> Result<(), PlanexError> {
        match fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(PlanexError::io("remove", path, e)),
        }
    }
}

/// What the session in `dir` holds (both CSVs with the journal replayed
/// over them, and a warning about skipped journal lines), read without
/// taking its lock: for watchers (`orchestrator serve`, the MCP status
/// tool) while a run may be writing. Each file is replaced atomically and
/// the journal only appended to, so a read sees a consistent step of each.
pub fn read_state(dir: &Path) -> Result<(SessionState, Option<String>), PlanexError> {
    let explore = read_if_exists(&dir.join(EXPLORE_CSV), |p| read_explore_csv(p))?;
    let tasks = read_if_exists(&dir.join(TASKS_CSV), |p| read_tasks_csv(p))?;
    let mut state = SessionState {
        explore,
        tasks,
        ..SessionState::default()
    };
    let journal = read_journal(&dir.join(crate::journal::JOURNAL_FILE))?;
    for entry in &journal.entries {
        state.apply(entry);
    }
    Ok((state, journal.warning))
}

fn read_if_exists<T>(
    path: &Path,
    read: impl Fn(&Path) -> Result<T, StateError>,
) -> Result<Option<T>, PlanexError> {
    if path.is_file() {
        Ok(Some(read(path)?))
    } else {
        Ok(None)
    }
}

/// Adds `/.workflow/` to `<repo>/.git/info/exclude` when `repo` has a `.git`
/// directory and the line is not there yet.
fn exclude_from_git(repo: &Path) -> Result<(), PlanexError> {
    const LINE: &str = "/.workflow/";
    let git = repo.join(".git");
    if !git.is_dir() {
        return Ok(());
    }
    let info = git.join("info");
    fs::create_dir_all(&info).map_err(|e| PlanexError::io("create", &info, e))?;
    let path = info.join("exclude");
    let existing = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(PlanexError::io("read", &path, e)),
    };
    if existing.lines().any(|l| {
        let l = l.trim();
        l == LINE || l == ".workflow/" || l == ".workflow" || l == "/.workflow"
    }) {
        return Ok(());
    }
    let mut file = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|e| PlanexError::io("open", &path, e))?;
    let sep = if existing.is_empty() || existing.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    writeln!(file, "{sep}{LINE}").map_err(|e| PlanexError::io("append to", &path, e))
}

#[cfg(test)]
mod tests;
