//! An append-only NDJSON board shared by many writers (`discoveries.ndjson`).
//!
//! Agents and the engine append one JSON object per line, often at the same
//! time, and sometimes with a plain `echo … >> discoveries.ndjson` that a kill
//! can cut short. So the board is written and read defensively:
//!
//! - [`NdjsonBoard::append`] serializes the whole line (with its `\n`) into one
//!   buffer and hands it to a single `write` on a file opened in append mode,
//!   then fsyncs. The kernel appends each such write at the end of the file as
//!   one piece, so lines from concurrent writers — threads or processes —
//!   never interleave. If the file does not end in a newline (someone else's
//!   write was cut short), the new line starts with one, so the damage stays
//!   confined to that one line. Our own appenders (threads and processes)
//!   take a short exclusive lock around check-and-write, so that check never
//!   sees another appender's write half-done; writers that do not lock (an
//!   agent's `echo >>`) still cannot split our lines.
//! - [`NdjsonBoard::read`] parses what it can and reports every line it skips
//!   — empty, malformed or truncated — with its 1-based line number, so the
//!   caller can warn "skipped 2 malformed lines in discoveries.ndjson (lines 3, 7)"
//!   instead of failing the whole run on one bad line.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StateError;

/// An append-only file of JSON lines.
#[derive(Debug)]
pub struct NdjsonBoard {
    path: PathBuf,
    file: File,
    /// Serializes appends through this handle; the OS file lock serializes
    /// handles (an OS lock is shared by everything using the same handle).
    appending: Mutex<()>,
}

/// Why a line of an NDJSON file was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// The line is empty or only whitespace.
    Empty,
    /// The line ends before its JSON value does (a cut-short write).
    Truncated,
    /// The line is not JSON, or not JSON of the expected shape.
    Malformed,
}

/// A line [`NdjsonBoard::read`] could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    /// 1-based line number.
    pub line: u64,
    /// Why it was skipped.
    pub reason: SkipReason,
    /// What is wrong with it, e.g. "EOF while parsing an object (column 14)".
    pub message: String,
}

impl fmt::Display for SkippedLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// The result of reading an NDJSON file: the entries that parsed, and the
/// lines that did not.
#[derive(Debug, Clone, PartialEq)]
pub struct NdjsonRead<T> {
    /// The file that was read.
    pub path: PathBuf,
    /// Parsed entries, in file order.
    pub entries: Vec<T>,
    /// Skipped lines, in file order.
    pub skipped: Vec<SkippedLine>,
}

impl<T> NdjsonRead<T> {
    /// A one-line warning about the skipped lines, or `None` when none were:
    /// `skipped 2 malformed lines in <file> (lines 3, 7)`.
    pub fn warning(&self) -> Option<String> {
        let (first, rest) = self.skipped.split_first()?;
        let lines = rest.iter().fold(first.line.to_string(), |acc, s| {
            format!("{acc}, {}", s.line)
        });
        Some(if rest.is_empty() {
            format!(
                "skipped 1 malformed line in {} (line {lines})",
                self.path.display()
            )
        } else {
            format!(
                "skipped {} malformed lines in {} (lines {lines})",
                self.skipped.len(),
                self.path.display()
            )
        })
    }

    /// One message per skipped line: `<file> line 3: <what is wrong>`.
    pub fn details(&self) -> Vec<String> {
        self.skipped
            .iter()
            .map(|s| format!("{} {s}", self.path.display()))
            .collect()
    }
}

impl NdjsonBoard {
    /// Opens (creating it if needed) the board at `path` for appending.
    /// The directory must exist.
    pub fn open(path: impl AsRef<Path>) -> Result<NdjsonBoard, StateError> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| StateError::io("open for appending", &path, e))?;
        Ok(NdjsonBoard {
            path,
            file,
            appending: Mutex::new(()),
        })
    }

    /// The board's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `value` as one line of compact JSON, with a single write, then
    /// fsyncs.
    pub fn append<T: Serialize + ?Sized>(&self, value: &T) -> Result<(), StateError> {
        let json = serde_json::to_vec(value).map_err(|e| StateError::Serialize {
            path: self.path.clone(),
            what: "an NDJSON entry",
            message: e.to_string(),
        })?;
        let _guard = self
            .appending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.file
            .lock()
            .map_err(|e| StateError::io("lock for appending", &self.path, e))?;
        let result = self.append_locked(&json);
        // Closing the handle would release the lock too; an unlock error is harmless.
        let _ = self.file.unlock();
        result
    }

    fn append_locked(&self, json: &[u8]) -> Result<(), StateError> {
        let mut line = Vec::with_capacity(json.len() + 2);
        if self.last_line_unterminated()? {
            line.push(b'\n');
        }
        line.extend_from_slice(json);
        line.push(b'\n');
        // One write call: for a regular file in append mode the kernel writes
        // the whole buffer at the end of the file in one piece.
        (&self.file)
            .write_all(&line)
            .map_err(|e| StateError::io("append to", &self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| StateError::io("fsync", &self.path, e))
    }

    /// Reads every entry of the board; see [`read_ndjson`].
    pub fn read<T: DeserializeOwned>(&self) -> Result<NdjsonRead<T>, StateError> {
        read_ndjson(&self.path)
    }

    /// True when the file is non-empty and its last byte is not `\n`.
    fn last_line_unterminated(&self) -> Result<bool, StateError> {
        let err = |e| StateError::io("read the end of", &self.path, e);
        let mut reader = File::open(&self.path).map_err(err)?;
        let len = reader.metadata().map_err(err)?.len();
        if len == 0 {
            return Ok(false);
        }
        let mut last = [0u8; 1];
        reader.seek(SeekFrom::Start(len - 1)).map_err(err)?;
        reader.read_exact(&mut last).map_err(err)?;
        Ok(last[0] != b'\n')
    }
}

/// Reads the NDJSON file at `path` without opening it for writing.
///
/// A missing file reads as an empty board. Lines that are empty, cut short or
/// do not parse as `T` are skipped and listed in [`NdjsonRead::skipped`]; only
/// an I/O error fails the read.
pub fn read_ndjson<T: DeserializeOwned>(
    path: impl AsRef<Path>,
) -> Result<NdjsonRead<T>, StateError> {
    let path = path.as_ref();
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(StateError::io("read", path, e)),
    };
    let mut out = NdjsonRead {
        path: path.to_path_buf(),
        entries: Vec::new(),
        skipped: Vec::new(),
    };
    // A final "\n" ends the last line; it does not start an empty one.
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    if bytes.is_empty() {
        return Ok(out);
    }
    for (index, raw) in body.split(|&b| b == b'\n').enumerate() {
        let line = index as u64 + 1;
        if raw.iter().all(u8::is_ascii_whitespace) {
            out.skipped.push(SkippedLine {
                line,
                reason: SkipReason::Empty,
                message: "empty line".to_owned(),
            });
            continue;
        }
        match serde_json::from_slice::<T>(raw) {
            Ok(entry) => out.entries.push(entry),
            Err(e) => {
                let reason = if e.is_eof() {
                    SkipReason::Truncated
                } else {
                    SkipReason::Malformed
                };
                let full = e.to_string();
                let suffix = format!(" at line {} column {}", e.line(), e.column());
                let what = full.strip_suffix(&suffix).unwrap_or(&full);
                let message = match reason {
                    SkipReason::Truncated => format!("truncated line: {what}"),
                    _ => format!("{what} (column {})", e.column()),
                };
                out.skipped.push(SkippedLine {
                    line,
                    reason,
                    message,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Entry {
        worker: u32,
        seq: u32,
        payload: String,
    }

    #[test]
    fn appended_values_read_back_one_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("discoveries.ndjson");
        let board = NdjsonBoard::open(&path).unwrap();
        board
            .append(&json!({"a": "line\nbreak", "b": [1, 2]}))
            .unwrap();
        board.append(&json!("plain")).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "{\"a\":\"line\\nbreak\",\"b\":[1,2]}\n\"plain\"\n"
        );
        let read = board.read::<Value>().unwrap();
        assert_eq!(
            read.entries,
            [json!({"a": "line\nbreak", "b": [1, 2]}), json!("plain")]
        );
        assert!(read.skipped.is_empty());
        assert_eq!(read.warning(), None);
    }

    #[test]
    fn missing_file_reads_as_empty_board() {
        let dir = tempfile::tempdir().unwrap();
        let read = read_ndjson::<Value>(dir.path().join("absent.ndjson")).unwrap();
        assert!(read.entries.is_empty() && read.skipped.is_empty());
    }

    #[test]
    fn open_in_missing_directory_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone").join("d.ndjson");
        let err = NdjsonBoard::open(&path).unwrap_err();
        assert_eq!(err.path(), path);
        assert!(
            err.to_string().starts_with("failed to open for appending "),
            "{err}"
        );
    }

    #[test]
    fn malformed_ndjson_line_is_reported_with_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("discoveries.ndjson");
        fs::write(
            &path,
            concat!(
                "{\"worker\":1,\"seq\":0,\"payload\":\"ok\"}\n",
                "{not json}\n",
                "\n",
                "{\"worker\":1,\"seq\":\"one\",\"payload\":\"wrong type\"}\n",
                "  \r\n",
                "{\"worker\":2,\"seq\":0,\"payload\":\"ok too\"}\r\n",
                "{\"worker\":3,\"seq\":0,\"pay",
            ),
        )
        .unwrap();
        let read = read_ndjson::<Entry>(&path).unwrap();
        assert_eq!(
            read.entries.iter().map(|e| e.worker).collect::<Vec<_>>(),
            [1, 2]
        );
        let summary: Vec<(u64, SkipReason)> =
            read.skipped.iter().map(|s| (s.line, s.reason)).collect();
        assert_eq!(
            summary,
            [
                (2, SkipReason::Malformed),
                (3, SkipReason::Empty),
                (4, SkipReason::Malformed),
                (5, SkipReason::Empty),
                (7, SkipReason::Truncated),
            ]
        );
        assert_eq!(
            read.warning().unwrap(),
            format!(
                "skipped 5 malformed lines in {} (lines 2, 3, 4, 5, 7)",
                path.display()
            )
        );
        let details = read.details();
        let file = path.display();
        assert_eq!(
            details[0],
            format!("{file} line 2: key must be a string (column 2)")
        );
        assert_eq!(details[1], format!("{file} line 3: empty line"));
        assert!(
            details[2].starts_with(&format!(
                "{file} line 4: invalid type: string \"one\", expected u32"
            )),
            "{}",
            details[2]
        );
        assert_eq!(
            details[4],
            format!("{file} line 7: truncated line: EOF while parsing a string")
        );
    }

    #[test]
    fn single_skipped_line_warning_is_singular() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.ndjson");
        fs::write(&path, "1\nnope\n2\n").unwrap();
        let read = read_ndjson::<u32>(&path).unwrap();
        assert_eq!(read.entries, [1, 2]);
        assert_eq!(
            read.warning().unwrap(),
            format!("skipped 1 malformed line in {} (line 2)", path.display())
        );
    }

    #[test]
    fn append_after_truncated_line_starts_a_fresh_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.ndjson");
        fs::write(&path, "{\"ts\":\"2026-01-01\",\"wor").unwrap();
        let board = NdjsonBoard::open(&path).unwrap();
        board.append(&json!({"ok": true})).unwrap();
        let read = board.read::<Value>().unwrap();
        assert_eq!(read.entries, [json!({"ok": true})]);
        assert_eq!(read.skipped.len(), 1);
        assert_eq!(
            (read.skipped[0].line, read.skipped[0].reason),
            (1, SkipReason::Truncated)
        );
    }

    #[test]
    fn concurrent_appenders_never_interleave_lines() {
        const THREADS: u32 = 8;
        const PER_THREAD: u32 = 100;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("discoveries.ndjson");
        let shared = Arc::new(NdjsonBoard::open(&path).unwrap());
        let handles: Vec<_> = (0..THREADS)
            .map(|worker| {
                let shared = Arc::clone(&shared);
                let path = path.clone();
                std::thread::spawn(move || {
                    // Half the threads share one handle, half open their own.
                    let own = NdjsonBoard::open(&path).unwrap();
                    let board = if worker % 2 == 0 { &*shared } else { &own };
                    for seq in 0..PER_THREAD {
                        // Sizes up to ~20 KB, well past PIPE_BUF, so a split write would show.
                        let size = ((worker * 7919 + seq * 104_729) % 20_000) as usize;
                        let c = char::from(b'a' + (worker % 26) as u8);
                        let payload: String = std::iter::repeat_n(c, size).collect();
                        board
                            .append(&Entry {
                                worker,
                                seq,
                                payload,
                            })
                            .unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let read = read_ndjson::<Entry>(&path).unwrap();
        assert_eq!(read.skipped, [], "no line may be torn or interleaved");
        assert_eq!(read.entries.len(), (THREADS * PER_THREAD) as usize);
        for worker in 0..THREADS {
            let seqs: Vec<u32> = read
                .entries
                .iter()
                .filter(|e| e.worker == worker)
                .map(|e| e.seq)
                .collect();
            assert_eq!(
                seqs,
                (0..PER_THREAD).collect::<Vec<_>>(),
                "worker {worker} in order"
            );
        }
        for e in &read.entries {
            let c = char::from(b'a' + (e.worker % 26) as u8);
            assert!(
                e.payload.chars().all(|p| p == c),
                "payload of worker {} mixed",
                e.worker
            );
        }
    }
}
