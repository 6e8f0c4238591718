//! The per-session journal: every finished row, appended and fsynced at once.
//!
//! Rewriting a whole CSV after every finished row would be slow and would
//! still lose the row if the process died between the agent's answer and the
//! rename. Instead each finished row (explore or task), each pause for a
//! human and each reset (`retry_failed`) is appended to `journal.ndjson` in
//! the session folder as one fsynced JSON line ([`NdjsonBoard`]). The CSVs
//! are rewritten from the rows in memory — which hold every journalled
//! result — at the end of each wave, at the end of a phase and on resume;
//! this is a **checkpoint**. After a checkpoint the journal is replaced
//! (atomically) by the entries still needed: the pauses, whose milestone
//! state is not in any CSV.
//!
//! Recovery is therefore: read the CSVs, then replay the journal over them
//! ([`crate::session::SessionState::apply`]). Replay is idempotent (an entry
//! sets values, it does not add to them), so a crash between the CSV write
//! and the journal replacement loses nothing and duplicates nothing. A line
//! cut short by `kill -9` during its own append is skipped (the row it
//! described had not been reported finished yet) and reported as a warning.
//!
//! ## Format (version [`JOURNAL_VERSION`])
//!
//! ```text
//! {"v":1,"ts":"2026-02-28T02:00:00Z","kind":"explore","id":"E1","status":"completed","findings":"…","key_files":["a.rs"],"error":""}
//! {"v":1,"ts":"…","kind":"task","id":"T1","status":"failed","findings":"","files_modified":[],"tests_passed":null,"acceptance_met":"","error":"…"}
//! {"v":1,"ts":"…","kind":"paused","id":"T2","reason":"…","report_markdown":"…","state":{…MilestoneState…}}
//! {"v":1,"ts":"…","kind":"reset","ids":["T2","T3"]}
//! ```

use std::path::{Path, PathBuf};

use crate::rows::RowStatus;
use orchestrator_core::retry::MilestoneState;
use orchestrator_core::state::{NdjsonBoard, StateError, read_ndjson, write_atomic};
use serde::{Deserialize, Serialize};

/// Version of the journal line format.
pub const JOURNAL_VERSION: u32 = 1;

/// File name of the journal inside a session folder.
pub const JOURNAL_FILE: &str = "journal.ndjson";

/// The outputs of a finished explore row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExploreResult {
    /// Row id (`E1`).
    pub id: String,
    /// `completed` or `failed` (or `skipped`).
    pub status: RowStatus,
    /// What the exploration found.
    #[serde(default)]
    pub findings: String,
    /// Relevant files.
    #[serde(default)]
    pub key_files: Vec<String>,
    /// Error message if it failed.
    #[serde(default)]
    pub error: String,
}

/// The outputs of a finished task row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskResult {
    /// Row id (`T1`).
    pub id: String,
    /// `completed`, `failed` or `skipped`.
    pub status: RowStatus,
    /// Execution findings.
    #[serde(default)]
    pub findings: String,
    /// Files the task modified.
    #[serde(default)]
    pub files_modified: Vec<String>,
    /// Whether its tests passed, when reported.
    #[serde(default)]
    pub tests_passed: Option<bool>,
    /// Which acceptance criteria were met.
    #[serde(default)]
    pub acceptance_met: String,
    /// Error message if it failed or was skipped.
    #[serde(default)]
    pub error: String,
    /// What the engine's verification found (verified runs only, see
    /// [`crate::verify`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<crate::verify::Verified>,
}

/// A task stopped for a human: its milestone state, to resume from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausedTask {
    /// Row id.
    pub id: String,
    /// Why a human is needed.
    pub reason: String,
    /// The intervention report (markdown).
    #[serde(default)]
    pub report_markdown: String,
    /// What the retry executor needs to resume the task.
    pub state: MilestoneState,
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JournalEntry {
    /// An explore row finished.
    Explore(ExploreResult),
    /// A task row finished (or was skipped).
    Task(TaskResult),
    /// A task paused for a human.
    Paused(PausedTask),
    /// These task rows were reset to `pending` (retry of failed and skipped rows).
    Reset {
        /// The ids reset.
        ids: Vec<String>,
    },
}

/// One line of the journal: the entry with its format version and time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalLine {
    /// Format version ([`JOURNAL_VERSION`]).
    pub v: u32,
    /// When the entry was written (RFC 3339, UTC).
    pub ts: String,
    /// The entry.
    #[serde(flatten)]
    pub entry: JournalEntry,
}

/// What reading a journal gave: its entries, and a warning about skipped
/// lines, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalRead {
    /// The entries, in order.
    pub entries: Vec<JournalEntry>,
    /// `skipped 1 malformed line in …/journal.ndjson (line 7)`, when lines were skipped.
    pub warning: Option<String>,
}

/// The journal of one session, open for appending.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    board: NdjsonBoard,
}

impl Journal {
    /// Opens (creating it if needed) the journal in `session_dir`.
    pub fn open(session_dir: &Path) -> Result<Journal, StateError> {
        let path = session_dir.join(JOURNAL_FILE);
        let board = NdjsonBoard::open(&path)?;
        Ok(Journal { path, board })
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry` and fsyncs: once this returns, the entry survives a crash.
    pub fn append(&self, entry: JournalEntry) -> Result<(), StateError> {
        self.board.append(&JournalLine {
            v: JOURNAL_VERSION,
            ts: jiff::Timestamp::now().to_string(),
            entry,
        })
    }

    /// Reads every entry; lines that do not parse (or have another version)
    /// are skipped and reported in the warning.
    pub fn read(&self) -> Result<JournalRead, StateError> {
        read_journal(&self.path)
    }

    /// Replaces the journal, atomically, with `keep` (the entries the CSVs do
    /// not hold), then reopens it for appending.
    pub fn replace(&mut self, keep: &[JournalEntry]) -> Result<(), StateError> {
        let mut bytes = Vec::new();
        for entry in keep {
            let line = JournalLine {
                v: JOURNAL_VERSION,
                ts: jiff::Timestamp::now().to_string(),
                entry: entry.clone(),
            };
            let json = serde_json::to_vec(&line).map_err(|e| StateError::Serialize {
                path: self.path.clone(),
                what: "a journal entry",
                message: e.to_string(),
            })?;
            bytes.extend_from_slice(&json);
            bytes.push(b'\n');
        }
        write_atomic(&self.path, &bytes)?;
        // The old handle points at the replaced file: appends must go to the new one.
        self.board = NdjsonBoard::open(&self.path)?;
        Ok(())
    }
}

/// Reads the journal at `path` (a missing file is an empty journal).
pub fn read_journal(path: &Path) -> Result<JournalRead, StateError> {
    let read = read_ndjson::<JournalLine>(path)?;
    let mut warning = read.warning();
    let mut entries = Vec::with_capacity(read.entries.len());
    let mut other_versions = 0usize;
    for line in read.entries {
        if line.v == JOURNAL_VERSION {
            entries.push(line.entry);
        } else {
            other_versions += 1;
        }
    }
    if other_versions > 0 {
        let msg = format!(
            "ignored {other_versions} journal entries of an unknown format version in {} (expected version {JOURNAL_VERSION})",
            path.display()
        );
        warning = Some(match warning {
            Some(w) => format!("{w}; {msg}"),
            None => msg,
        });
    }
    Ok(JournalRead { entries, warning })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, status: RowStatus) -> JournalEntry {
        JournalEntry::Task(TaskResult {
            id: id.into(),
            status,
            findings: "f".into(),
            files_modified: vec!["a.rs".into()],
            tests_passed: Some(true),
            acceptance_met: "all".into(),
            error: String::new(),
            verified: None,
        })
    }

    #[test]
    fn lines_are_flat_tagged_objects() {
        let line = JournalLine {
            v: 1,
            ts: "2026-01-01T00:00:00Z".into(),
            entry: JournalEntry::Reset {
                ids: vec!["T1".into()],
            },
        };
        let text = serde_json::to_string(&line).unwrap();
        assert_eq!(
            text,
            r#"{"v":1,"ts":"2026-01-01T00:00:00Z","kind":"reset","ids":["T1"]}"#
        );
        let back: JournalLine = serde_json::from_str(&text).unwrap();
        assert_eq!(back, line);
    }

    #[test]
    fn append_read_replace_and_append_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path()).unwrap();
        j.append(task("T1", RowStatus::Completed)).unwrap();
        j.append(task("T2", RowStatus::Failed)).unwrap();
        assert_eq!(
            j.read().unwrap().entries,
            vec![
                task("T1", RowStatus::Completed),
                task("T2", RowStatus::Failed)
            ]
        );
        let keep = JournalEntry::Paused(PausedTask {
            id: "T3".into(),
            reason: "round limit".into(),
            report_markdown: "# r".into(),
            state: MilestoneState::new("T3"),
        });
        j.replace(std::slice::from_ref(&keep)).unwrap();
        j.append(task("T4", RowStatus::Completed)).unwrap();
        let read = j.read().unwrap();
        assert_eq!(read.entries, vec![keep, task("T4", RowStatus::Completed)]);
        assert_eq!(read.warning, None);
    }

    #[test]
    fn a_torn_last_line_and_a_future_version_are_skipped_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        j.append(task("T1", RowStatus::Completed)).unwrap();
        let mut text = std::fs::read_to_string(j.path()).unwrap();
        text.push_str(r#"{"v":2,"ts":"x","kind":"reset","ids":[]}"#);
        text.push('\n');
        text.push_str(r#"{"v":1,"ts":"x","kind":"task","id":"T2","sta"#);
        std::fs::write(j.path(), text).unwrap();
        let read = read_journal(j.path()).unwrap();
        assert_eq!(read.entries, vec![task("T1", RowStatus::Completed)]);
        let warning = read.warning.unwrap();
        assert!(warning.contains("skipped 1 malformed line"), "{warning}");
        assert!(warning.contains("line 3"), "{warning}");
        assert!(warning.contains("unknown format version"), "{warning}");
    }
}
