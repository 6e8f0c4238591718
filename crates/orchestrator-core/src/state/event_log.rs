//! `events.ndjson`: a session's own record of its event stream, for
//! watchers in other processes (`orchestrator serve`).
//!
//! A run in another process is visible only through its files, and the
//! flows' state files say where a session stands, not what happened when.
//! [`EventLog`] is an [`EventSink`] the CLI installs for every flow run: it
//! holds the events until the flow says which session folder it opened
//! ([`Event::SessionOpened`]), then appends every event to
//! `<session>/events.ndjson` as one fsynced line ([`NdjsonBoard`]), with the
//! time it was seen and the writing process. The run's end
//! ([`EventLog::finish`]) and what a person did from elsewhere
//! ([`append_action`]: an approval, a cancel, with where it came from) go
//! into the same file, so the file is the session's log.
//!
//! One line (format version [`EVENT_LOG_VERSION`]):
//!
//! ```json
//! {"v":1,"at_ms":1767225600123,"pid":4242,"kind":"event","event":{"event":"job_started","id":"T1"}}
//! {"v":1,"at_ms":1767225600456,"pid":4242,"kind":"run_finished","exit_code":3,"state":"waiting","reason":"stopped at the execution plan gate"}
//! {"v":1,"at_ms":1767225601000,"pid":5151,"kind":"action","origin":"dashboard 127.0.0.1:50412","action":"approve","detail":"execution plan approved"}
//! ```
//!
//! Only appended to; a watcher reads it from a byte offset on
//! ([`read_from`]), taking complete lines only, so it never sees half a
//! line.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use super::{NdjsonBoard, StateError};
use crate::event::{Event, EventSink};

/// The file name, inside a session folder.
pub const EVENTS_FILE: &str = "events.ndjson";

/// The format version written in each line's `v`.
pub const EVENT_LOG_VERSION: u32 = 1;

/// Events kept in memory before the flow names its session folder; more
/// are dropped (a flow opens its session before its first job).
const BUFFER_LIMIT: usize = 4096;

/// One line of `events.ndjson`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    /// Format version ([`EVENT_LOG_VERSION`]).
    pub v: u32,
    /// When it was written (Unix milliseconds).
    pub at_ms: i64,
    /// The process that wrote it.
    pub pid: u32,
    /// What it records.
    #[serde(flatten)]
    pub entry: LogEntry,
}

/// What a [`LogLine`] records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum LogEntry {
    /// An event of the run.
    Event {
        /// The event, as `--json` prints it.
        event: Event,
    },
    /// The run ended (written once, by the process that ran it).
    RunFinished {
        /// Its exit code (0, 1, 2, 3).
        exit_code: i32,
        /// Where the session stands.
        state: RunState,
        /// Why it stopped, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Something a person did to the session from outside the run.
    Action {
        /// Where it came from (`dashboard 127.0.0.1:50412`).
        origin: String,
        /// What (`approve`, `cancel`, `continue`).
        action: String,
        /// What it did, for people.
        detail: String,
    },
}

/// Where a session stands after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Everything it set out to do was done.
    Done,
    /// It ran, and some items failed.
    Failed,
    /// It stopped for a person: a gate, an escalation (resumable).
    Waiting,
    /// It stopped at a run limit (resumable with a higher one).
    Limit,
    /// It was interrupted (Ctrl-C, a cancel) and can be resumed.
    Interrupted,
    /// It could not run (bad input, an error).
    Error,
}

impl RunState {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Done => "done",
            RunState::Failed => "failed",
            RunState::Waiting => "waiting",
            RunState::Limit => "limit",
            RunState::Interrupted => "interrupted",
            RunState::Error => "error",
        }
    }
}

/// The current time in Unix milliseconds.
pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

fn line(entry: LogEntry) -> LogLine {
    LogLine {
        v: EVENT_LOG_VERSION,
        at_ms: now_ms(),
        pid: std::process::id(),
        entry,
    }
}

/// An [`EventSink`] that writes a run's events into its session's
/// `events.ndjson` (see the [module docs](self)).
///
/// Writing never fails the run: the first error is kept
/// ([`EventLog::error`]) and later events are dropped.
#[derive(Debug, Default)]
pub struct EventLog {
    state: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    /// Events seen before the session folder was named.
    pending: Vec<LogLine>,
    /// The open log, once named.
    board: Option<NdjsonBoard>,
    /// The first write error.
    error: Option<String>,
}

impl EventLog {
    /// A log that waits for the flow's [`Event::SessionOpened`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The log file being written, once the session is known.
    pub fn path(&self) -> Option<PathBuf> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.board.as_ref().map(|b| b.path().to_path_buf())
    }

    /// The first error met writing the log, if any.
    pub fn error(&self) -> Option<String> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.error.clone()
    }

    /// Records the run's end (nothing when no session was opened).
    pub fn finish(&self, exit_code: i32, state: RunState, reason: Option<String>) {
        self.write(line(LogEntry::RunFinished {
            exit_code,
            state,
            reason,
        }));
    }

    fn write(&self, entry: LogLine) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let LogState {
            pending,
            board,
            error,
        } = &mut *state;
        if error.is_some() {
            return;
        }
        match board {
            Some(board) => {
                if let Err(e) = board.append(&entry) {
                    *error = Some(e.to_string());
                }
            }
            None if pending.len() < BUFFER_LIMIT => pending.push(entry),
            None => {}
        }
    }

    /// Opens `dir`'s log and writes what waited; a later session (a
    /// re-lint pass) takes over from the earlier one.
    fn open(&self, dir: &Path) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.error.is_some() {
            return;
        }
        match NdjsonBoard::open(dir.join(EVENTS_FILE)) {
            Ok(board) => {
                for waiting in std::mem::take(&mut state.pending) {
                    if let Err(e) = board.append(&waiting) {
                        state.error = Some(e.to_string());
                        return;
                    }
                }
                state.board = Some(board);
            }
            Err(e) => state.error = Some(e.to_string()),
        }
    }
}

impl EventSink for EventLog {
    fn emit(&self, event: &Event) {
        if let Event::SessionOpened { dir, .. } = event {
            self.open(dir);
        }
        self.write(line(LogEntry::Event {
            event: event.clone(),
        }));
    }
}

/// Appends what a person did (`action`, from `origin`) to the log in the
/// session folder `dir`.
pub fn append_action(
    dir: &Path,
    origin: &str,
    action: &str,
    detail: &str,
) -> Result<(), StateError> {
    NdjsonBoard::open(dir.join(EVENTS_FILE))?.append(&line(LogEntry::Action {
        origin: origin.to_owned(),
        action: action.to_owned(),
        detail: detail.to_owned(),
    }))
}

/// What [`read_from`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogTail {
    /// The complete lines that parsed, in order.
    pub lines: Vec<LogLine>,
    /// Lines that did not parse (1-based within this read, with the error).
    pub skipped: Vec<String>,
    /// The offset after the last complete line: where the next read starts.
    pub next_offset: u64,
}

/// Reads the complete lines of the log at `path` from byte `offset` on (a
/// line still being written is left for the next read). A missing file
/// reads as empty; an offset past the end (the file was replaced) starts
/// again from 0.
pub fn read_from(path: &Path, offset: u64) -> Result<LogTail, StateError> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(LogTail::default());
        }
        Err(e) => return Err(StateError::io("open", path, e)),
    };
    let len = file
        .metadata()
        .map_err(|e| StateError::io("read the size of", path, e))?
        .len();
    let offset = if offset > len { 0 } else { offset };
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| StateError::io("seek in", path, e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| StateError::io("read", path, e))?;
    let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut tail = LogTail {
        next_offset: offset + complete as u64,
        ..LogTail::default()
    };
    for (n, raw) in bytes[..complete].split(|b| *b == b'\n').enumerate() {
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<LogLine>(raw) {
            Ok(l) => tail.lines.push(l),
            Err(e) => tail.skipped.push(format!("line {}: {e}", n + 1)),
        }
    }
    Ok(tail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::JobStatus;

    fn events(tail: &LogTail) -> Vec<Event> {
        tail.lines
            .iter()
            .filter_map(|l| match &l.entry {
                LogEntry::Event { event } => Some(event.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn events_before_the_session_wait_and_everything_lands_in_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::new();
        let started = Event::PhaseStarted {
            flow: "planex".into(),
            phase: "execute".into(),
        };
        log.emit(&started);
        assert!(log.path().is_none());
        let opened = Event::SessionOpened {
            flow: "planex".into(),
            session: "wpp-1".into(),
            dir: dir.path().to_path_buf(),
        };
        log.emit(&opened);
        let done = Event::JobFinished {
            id: "T1".into(),
            status: JobStatus::Completed,
            detail: None,
        };
        log.emit(&done);
        log.finish(0, RunState::Done, None);
        append_action(
            dir.path(),
            "dashboard 127.0.0.1:1",
            "cancel",
            "SIGINT to pid 1",
        )
        .unwrap();

        let tail = read_from(&dir.path().join(EVENTS_FILE), 0).unwrap();
        assert_eq!(events(&tail), [started, opened, done]);
        assert!(tail.skipped.is_empty());
        assert_eq!(tail.lines.len(), 5);
        assert!(
            tail.lines
                .iter()
                .all(|l| l.v == EVENT_LOG_VERSION && l.at_ms > 0)
        );
        assert_eq!(
            tail.lines[3].entry,
            LogEntry::RunFinished {
                exit_code: 0,
                state: RunState::Done,
                reason: None
            }
        );
        assert!(
            matches!(&tail.lines[4].entry, LogEntry::Action { origin, .. } if origin.starts_with("dashboard"))
        );
        assert_eq!(log.error(), None);
    }

    #[test]
    fn a_reader_takes_only_complete_lines_and_goes_on_from_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        let first = serde_json::to_string(&line(LogEntry::Event {
            event: Event::Notice {
                message: "a".into(),
            },
        }))
        .unwrap();
        std::fs::write(&path, format!("{first}\nnot json\n{{\"v\":1,\"at")).unwrap();
        let tail = read_from(&path, 0).unwrap();
        assert_eq!(tail.lines.len(), 1);
        assert_eq!(tail.skipped.len(), 1, "{:?}", tail.skipped);
        assert!(tail.skipped[0].starts_with("line 2:"));
        // The half-written last line waits for the next read.
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(tail.next_offset, text.rfind('\n').unwrap() as u64 + 1);
        let again = read_from(&path, tail.next_offset).unwrap();
        assert!(again.lines.is_empty() && again.skipped.is_empty());
        assert_eq!(again.next_offset, tail.next_offset);
        // A missing file is empty; an offset past the end starts over.
        assert_eq!(
            read_from(&dir.path().join("none"), 9).unwrap(),
            LogTail::default()
        );
        assert_eq!(read_from(&path, 1 << 40).unwrap().lines.len(), 1);
    }

    #[test]
    fn a_folder_that_cannot_be_written_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::new();
        log.emit(&Event::SessionOpened {
            flow: "review-fix".into(),
            session: "fix-1".into(),
            dir: dir.path().join("missing"),
        });
        log.emit(&Event::Notice {
            message: "x".into(),
        });
        log.finish(1, RunState::Failed, None);
        let error = log.error().unwrap();
        assert!(error.contains("missing"), "{error}");
    }
}
