//! State files: how the engine persists what it has done so far.
//!
//! Every flow keeps its progress in plain files inside an engine-owned folder
//! (`.workflow/.lite-plan/{session}/`, `.review/fixes/{session}/`, …) so that
//! a run can be resumed after a crash, a reboot or a `kill -9` at any instant.
//! This module holds the few primitives those files are built from:
//!
//! - [`atomic`]: replace a file atomically (temp file in the same directory,
//!   fsync, rename, fsync the directory) and read JSON back with errors that
//!   name the file, line and column;
//! - [`ndjson`]: an append-only NDJSON board (`discoveries.ndjson`) that many
//!   writers share, read back tolerantly with every skipped line reported;
//! - [`lock`]: one session, one engine — an OS file lock released by the
//!   kernel when its holder dies;
//! - [`csv_table`]: CSV files read into a header + rows table with every
//!   error naming the file and line, and written with every cell quoted;
//! - [`event_log`]: a session's `events.ndjson`, the run's events with
//!   their times, its end and what people did to it, for watchers in other
//!   processes;
//! - [`cache`]: the per-repository cache folders outside the repository
//!   (worktrees, build caches), claimed by the runs that use them and
//!   pruned when their repository is gone or the cache is over its cap.
//!
//! All of them report failures as a [`StateError`] that names the path (and the
//! line and column where there is one), so a message printed to the user says
//! which file to open and where to look.

pub mod atomic;
pub mod cache;
pub mod csv_table;
pub mod event_log;
pub mod lock;
pub mod ndjson;
#[cfg(test)]
mod reexec;

use std::io;
use std::path::{Path, PathBuf};

pub use atomic::{
    is_temp_file_for, read_json, read_json_if_exists, remove_stale_temp_files,
    remove_stale_temp_files_in, stale_temp_files, write_atomic, write_json_atomic,
};
pub use cache::{CacheKind, CacheLease, build_cache_root, cache_dir, repo_key, worktree_root};
pub use csv_table::{CsvRecord, CsvTable, read_csv, to_csv_bytes, write_csv_atomic};
pub use lock::{LockHolder, SessionLock};
pub use ndjson::{NdjsonBoard, NdjsonRead, SkipReason, SkippedLine, read_ndjson};

/// Why a state file could not be read, written or locked.
///
/// Every variant names the file (or directory) involved; parse errors also
/// name the line (1-based) and, for JSON, the column.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// An I/O operation on a state file failed.
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        /// What was being done: "read", "create temporary file for", "rename into place", …
        action: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A JSON state file does not parse (or does not have the expected shape).
    #[error("invalid JSON in file {} line {line} column {column}: {message}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error (0 when serde_json could not tell).
        line: usize,
        /// 1-based column of the error (0 at the start of a line).
        column: usize,
        /// What serde_json said, without its own location suffix.
        message: String,
    },
    /// A value could not be serialized for writing.
    #[error("failed to serialize {what} for {}: {message}", path.display())]
    Serialize {
        /// The file the value was meant for.
        path: PathBuf,
        /// What was being serialized ("JSON", "an NDJSON entry", "CSV").
        what: &'static str,
        /// What the serializer said.
        message: String,
    },
    /// Another process (or another handle in this one) holds the session lock.
    #[error(
        "state directory {} is locked by {}; wait for it to finish or stop it first",
        dir.display(),
        describe_holder(*pid, started_at.as_deref())
    )]
    Locked {
        /// The locked directory.
        dir: PathBuf,
        /// The holder's process id, when the lock file says.
        pid: Option<u32>,
        /// When the holder took the lock, when the lock file says.
        started_at: Option<String>,
    },
    /// A CSV row has a different number of fields than the header.
    #[error(
        "CSV file {} line {line}: expected {expected} fields (as in the header), found {found}",
        path.display()
    )]
    CsvRaggedRow {
        /// The file.
        path: PathBuf,
        /// 1-based line on which the record starts.
        line: u64,
        /// Number of header fields.
        expected: u64,
        /// Number of fields in this record.
        found: u64,
    },
    /// A CSV record is not valid UTF-8.
    #[error("CSV file {} line {line}: invalid UTF-8 in field {field}", path.display())]
    CsvInvalidUtf8 {
        /// The file.
        path: PathBuf,
        /// 1-based line on which the record starts.
        line: u64,
        /// 1-based index of the offending field.
        field: usize,
    },
    /// A quoted CSV field is never closed, or is closed and then followed by
    /// stray text: a quote inside a cell was not written as `""`.
    #[error("CSV file {} line {line}: unbalanced quote: {detail}", path.display())]
    CsvUnbalancedQuote {
        /// The file.
        path: PathBuf,
        /// 1-based line on which the broken quoted field starts.
        line: u64,
        /// What is wrong with it.
        detail: String,
    },
    /// A CSV cell is over [`crate::limits::MAX_CSV_CELL_BYTES`].
    #[error(
        "CSV file {} line {line} {}: the cell {}",
        path.display(),
        describe_cell(*field, column.as_deref()),
        crate::limits::over_limit(*size, *limit)
    )]
    CsvCellTooLarge {
        /// The file.
        path: PathBuf,
        /// 1-based line on which the record starts (1 for the header).
        line: u64,
        /// 1-based index of the cell in its record.
        field: usize,
        /// The cell's column name (shortened with
        /// [`crate::limits::excerpt`]), for a data record.
        column: Option<String>,
        /// The cell's size in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// Any other CSV problem (duplicate header, a row of the wrong width on write, …).
    #[error("CSV file {}{}: {message}", path.display(), describe_line(*line))]
    Csv {
        /// The file.
        path: PathBuf,
        /// 1-based line, when the problem has one.
        line: Option<u64>,
        /// What is wrong.
        message: String,
    },
    /// A CSV file lacks a column the reader requires.
    #[error("CSV file {} has no `{column}` column (header line 1)", path.display())]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// The missing column.
        column: String,
    },
    /// A CSV cell holds a value its column does not allow.
    #[error(
        "CSV file {} line {line} column `{column}`: invalid value {value:?}, expected {expected}",
        path.display()
    )]
    InvalidValue {
        /// The file.
        path: PathBuf,
        /// 1-based line on which the record starts.
        line: u64,
        /// The column name.
        column: String,
        /// The offending cell.
        value: String,
        /// The values the column accepts.
        expected: String,
    },
}

impl StateError {
    /// The file or directory this error is about.
    pub fn path(&self) -> &Path {
        match self {
            StateError::Io { path, .. }
            | StateError::Json { path, .. }
            | StateError::Serialize { path, .. }
            | StateError::CsvRaggedRow { path, .. }
            | StateError::CsvInvalidUtf8 { path, .. }
            | StateError::CsvUnbalancedQuote { path, .. }
            | StateError::CsvCellTooLarge { path, .. }
            | StateError::Csv { path, .. }
            | StateError::MissingColumn { path, .. }
            | StateError::InvalidValue { path, .. } => path,
            StateError::Locked { dir, .. } => dir,
        }
    }

    /// True when the error is an I/O error saying the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, StateError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    pub(crate) fn io(action: &'static str, path: &Path, source: io::Error) -> Self {
        StateError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

fn describe_holder(pid: Option<u32>, started_at: Option<&str>) -> String {
    match (pid, started_at) {
        (Some(pid), Some(at)) => format!("pid {pid} (started {at})"),
        (Some(pid), None) => format!("pid {pid}"),
        (None, Some(at)) => format!("another process (started {at})"),
        (None, None) => "another process (holder unknown)".to_owned(),
    }
}

fn describe_line(line: Option<u64>) -> String {
    line.map(|l| format!(" line {l}")).unwrap_or_default()
}

/// "column `description`" when the column has a name, else "field 3".
fn describe_cell(field: usize, column: Option<&str>) -> String {
    match column {
        Some(name) => format!("column `{name}`"),
        None => format!("field {field}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locked_message_names_directory_pid_and_start() {
        let e = StateError::Locked {
            dir: PathBuf::from("/tmp/s"),
            pid: Some(42),
            started_at: Some("2026-01-01T00:00:00Z".into()),
        };
        assert_eq!(
            e.to_string(),
            "state directory /tmp/s is locked by pid 42 (started 2026-01-01T00:00:00Z); \
             wait for it to finish or stop it first"
        );
        let unknown = StateError::Locked {
            dir: PathBuf::from("/tmp/s"),
            pid: None,
            started_at: None,
        };
        assert!(
            unknown
                .to_string()
                .contains("another process (holder unknown)")
        );
    }

    #[test]
    fn generic_csv_error_mentions_line_only_when_known() {
        let with = StateError::Csv {
            path: "a.csv".into(),
            line: Some(3),
            message: "boom".into(),
        };
        let without = StateError::Csv {
            path: "a.csv".into(),
            line: None,
            message: "boom".into(),
        };
        assert_eq!(with.to_string(), "CSV file a.csv line 3: boom");
        assert_eq!(without.to_string(), "CSV file a.csv: boom");
    }

    #[test]
    fn not_found_is_recognised_and_path_is_reported() {
        let e = StateError::io(
            "read",
            Path::new("x.json"),
            io::Error::from(io::ErrorKind::NotFound),
        );
        assert!(e.is_not_found());
        assert_eq!(e.path(), Path::new("x.json"));
        let other = StateError::io(
            "read",
            Path::new("x.json"),
            io::Error::other("disk on fire"),
        );
        assert!(!other.is_not_found());
        assert_eq!(other.to_string(), "failed to read x.json: disk on fire");
    }
}
