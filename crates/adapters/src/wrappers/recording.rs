//! [`Recording`] writes a JSONL transcript of every call; [`Replay`] answers
//! from one.
//!
//! Transcript format (version [`TRANSCRIPT_VERSION`]): one JSON object per
//! line, in the order calls finished:
//!
//! ```json
//! {"version":1,"agent":"claude","request":{…AgentRequest…},"outcome":{"response":{…AgentResponse…}}}
//! {"version":1,"agent":"claude","request":{…},"outcome":{"error":{"kind":"timeout","seconds":30.0}}}
//! ```

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use orchestrator_core::{Agent, AgentError, AgentRequest, AgentResponse};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

/// The transcript format version written by [`Recording`].
pub const TRANSCRIPT_VERSION: u32 = 1;

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    /// Format version ([`TRANSCRIPT_VERSION`]).
    pub version: u32,
    /// The recorded agent's name.
    pub agent: String,
    /// The request as sent.
    pub request: AgentRequest,
    /// What the agent answered.
    pub outcome: TranscriptOutcome,
}

/// The outcome of a recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TranscriptOutcome {
    /// The agent answered.
    Response(AgentResponse),
    /// The agent failed.
    Error(AgentError),
}

impl TranscriptOutcome {
    fn into_result(self) -> Result<AgentResponse, AgentError> {
        match self {
            TranscriptOutcome::Response(response) => Ok(response),
            TranscriptOutcome::Error(error) => Err(error),
        }
    }
}

/// Why a transcript could not be opened or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TranscriptError {
    /// The file could not be opened, read or written.
    #[error("failed to {action} transcript {}: {source}", path.display())]
    Io {
        /// What was attempted (`open`, `read`, `write`).
        action: &'static str,
        /// The transcript file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is not a transcript entry.
    #[error("transcript {}, line {line}: {message}", path.display())]
    Parse {
        /// The transcript file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What the parser said.
        message: String,
    },
    /// A line has a version this build does not read.
    #[error("transcript {}, line {line}: version {found} is not supported (expected {TRANSCRIPT_VERSION})", path.display())]
    Version {
        /// The transcript file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The version found.
        found: u32,
    },
}

/// An append-only JSONL file: each [`JsonlWriter::write`] adds one line and
/// flushes it, so a transcript is readable up to the last finished line even
/// when the process dies. A failed write is logged and kept for
/// [`JsonlWriter::take_write_error`], never raised: a transcript must not
/// change an agent's result. Shared by [`Recording`] and the tool agent's
/// per-attempt transcripts.
#[derive(Debug)]
pub struct JsonlWriter {
    path: PathBuf,
    file: tokio::sync::Mutex<tokio::fs::File>,
    write_error: Mutex<Option<String>>,
}

impl JsonlWriter {
    /// Opens `path`: truncated, or appended to when `append`; created if
    /// needed.
    pub async fn open(path: impl Into<PathBuf>, append: bool) -> Result<Self, TranscriptError> {
        let path = path.into();
        let mut options = tokio::fs::OpenOptions::new();
        options.create(true);
        if append {
            options.append(true);
        } else {
            options.write(true).truncate(true);
        }
        let file = options
            .open(&path)
            .await
            .map_err(|source| TranscriptError::Io {
                action: "open",
                path: path.clone(),
                source,
            })?;
        Ok(Self {
            path,
            file: tokio::sync::Mutex::new(file),
            write_error: Mutex::new(None),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `value` as one line, after passing its JSON text through
    /// `redact` (the tool agent removes its API key there).
    pub async fn write_redacted<T: Serialize + ?Sized>(
        &self,
        value: &T,
        redact: impl Fn(String) -> String,
    ) {
        let written = match serde_json::to_string(value) {
            Ok(line) => {
                let mut line = redact(line).into_bytes();
                line.push(b'\n');
                self.write_line(&line).await.map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        if let Err(message) = written {
            let message = format!(
                "failed to write transcript {}: {message}",
                self.path.display()
            );
            tracing::warn!(%message);
            self.errors().get_or_insert(message);
        }
    }

    /// Appends `value` as one line.
    pub async fn write<T: Serialize + ?Sized>(&self, value: &T) {
        self.write_redacted(value, |line| line).await;
    }

    /// The first write error since the last call, if any.
    pub fn take_write_error(&self) -> Option<String> {
        self.errors().take()
    }

    fn errors(&self) -> MutexGuard<'_, Option<String>> {
        self.write_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    async fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        let mut file = self.file.lock().await;
        file.write_all(line).await?;
        file.flush().await
    }
}

/// Records every call through `inner` (request and response or error) as a
/// line of a JSONL transcript, and returns the inner result unchanged. A
/// failure to write the transcript does not change the result: it is logged
/// and kept for [`Recording::take_write_error`].
#[derive(Debug)]
pub struct Recording<A> {
    inner: A,
    writer: JsonlWriter,
}

impl<A> Recording<A> {
    /// Records into a new (or truncated) file at `path`.
    pub async fn create(inner: A, path: impl Into<PathBuf>) -> Result<Self, TranscriptError> {
        Ok(Self {
            inner,
            writer: JsonlWriter::open(path, false).await?,
        })
    }

    /// Records at the end of the file at `path`, creating it if needed.
    pub async fn append(inner: A, path: impl Into<PathBuf>) -> Result<Self, TranscriptError> {
        Ok(Self {
            inner,
            writer: JsonlWriter::open(path, true).await?,
        })
    }

    /// The wrapped agent.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The transcript file.
    pub fn path(&self) -> &Path {
        self.writer.path()
    }

    /// The first transcript write error since the last call, if any.
    pub fn take_write_error(&self) -> Option<String> {
        self.writer.take_write_error()
    }
}

#[async_trait]
impl<A: Agent> Agent for Recording<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn changes_files(&self) -> bool {
        self.inner.changes_files()
    }
    fn reports_exact_changes(&self) -> bool {
        self.inner.reports_exact_changes()
    }
    fn declines(&self, finding: &orchestrator_core::finding::Finding) -> Option<String> {
        self.inner.declines(finding)
    }
    fn spent(&self) -> Option<orchestrator_core::agent::AgentSpent> {
        self.inner.spent()
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let result = self.inner.run(request.clone()).await;
        let entry = TranscriptEntry {
            version: TRANSCRIPT_VERSION,
            agent: self.inner.name().to_owned(),
            request,
            outcome: match &result {
                Ok(response) => TranscriptOutcome::Response(response.clone()),
                Err(error) => TranscriptOutcome::Error(error.clone()),
            },
        };
        self.writer.write(&entry).await;
        result
    }
}

/// Reads every entry of a transcript file (blank lines are skipped).
pub async fn read_transcript(
    path: impl AsRef<Path>,
) -> Result<Vec<TranscriptEntry>, TranscriptError> {
    let path = path.as_ref();
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|source| TranscriptError::Io {
            action: "read",
            path: path.to_owned(),
            source,
        })?;
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_no = index + 1;
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| TranscriptError::Parse {
                path: path.to_owned(),
                line: line_no,
                message: e.to_string(),
            })?;
        let found = value.get("version").and_then(serde_json::Value::as_u64);
        if found != Some(u64::from(TRANSCRIPT_VERSION)) {
            return Err(TranscriptError::Version {
                path: path.to_owned(),
                line: line_no,
                found: found.and_then(|v| u32::try_from(v).ok()).unwrap_or(0),
            });
        }
        entries.push(
            serde_json::from_value(value).map_err(|e| TranscriptError::Parse {
                path: path.to_owned(),
                line: line_no,
                message: e.to_string(),
            })?,
        );
    }
    Ok(entries)
}

/// Answers requests from a transcript: by request id, and for an id seen
/// several times, in recorded order. A request with no recorded answer left
/// gets [`AgentError::Unsupported`] (never a guess).
#[derive(Debug)]
pub struct Replay {
    answers: Mutex<HashMap<String, VecDeque<TranscriptOutcome>>>,
}

impl Replay {
    /// A replay of `entries`.
    pub fn from_entries(entries: impl IntoIterator<Item = TranscriptEntry>) -> Self {
        let mut answers: HashMap<String, VecDeque<TranscriptOutcome>> = HashMap::new();
        for entry in entries {
            answers
                .entry(entry.request.id)
                .or_default()
                .push_back(entry.outcome);
        }
        Self {
            answers: Mutex::new(answers),
        }
    }

    /// A replay of the transcript at `path`.
    pub async fn from_file(path: impl AsRef<Path>) -> Result<Self, TranscriptError> {
        Ok(Self::from_entries(read_transcript(path).await?))
    }

    /// How many recorded answers have not been used yet.
    pub fn remaining(&self) -> usize {
        self.lock().values().map(VecDeque::len).sum()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, VecDeque<TranscriptOutcome>>> {
        self.answers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl Agent for Replay {
    fn name(&self) -> &str {
        "replay"
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let next = self
            .lock()
            .get_mut(&request.id)
            .and_then(VecDeque::pop_front);
        match next {
            Some(outcome) => outcome.into_result(),
            None => Err(AgentError::Unsupported {
                reason: format!("no recorded answer left for request `{}`", request.id),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrappers::scripted::{Scripted, Step, request, transient};
    use orchestrator_core::Usage;
    use serde_json::json;

    fn rich_response() -> AgentResponse {
        let mut response =
            AgentResponse::structured(json!({"fixed": true, "note": "ünïcode \"q\"\n"}))
                .with_files_changed(vec!["src/a b.rs".into()]);
        response.usage = Some(Usage {
            input_tokens: 120,
            output_tokens: 30,
            cost_usd: 0.0123,
            turns: 2,
        });
        response
    }

    #[tokio::test]
    async fn record_then_replay_gives_the_same_answers_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("transcript.jsonl");
        let inner = Scripted::new([
            Step {
                delay: std::time::Duration::ZERO,
                result: Ok(rich_response()),
            },
            Step::err(transient("first try failed")),
            Step::ok("second try worked"),
        ]);
        let recording = Recording::create(inner, &path).await.unwrap();
        let requests = [
            request("F1").with_context(json!({"finding": 1})),
            request("F2"),
            request("F2"),
        ];
        let mut live = Vec::new();
        for r in &requests {
            live.push(recording.run(r.clone()).await);
        }
        assert_eq!(recording.take_write_error(), None);

        let entries = read_transcript(&path).await.unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].request, requests[0]);
        assert_eq!(entries[0].agent, "scripted");

        let replay = Replay::from_file(&path).await.unwrap();
        assert_eq!(replay.remaining(), 3);
        // Replayed out of the recorded interleaving: ids pick the queue.
        assert_eq!(replay.run(request("F2")).await, live[1]);
        assert_eq!(replay.run(request("F1")).await, live[0]);
        assert_eq!(replay.run(request("F2")).await, live[2]);
        assert_eq!(replay.remaining(), 0);
        assert!(matches!(
            replay.run(request("F2")).await,
            Err(AgentError::Unsupported { .. })
        ));
    }

    #[tokio::test]
    async fn append_keeps_earlier_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let first = Recording::create(Scripted::new([Step::ok("one")]), &path)
            .await
            .unwrap();
        first.run(request("a")).await.unwrap();
        let second = Recording::append(Scripted::new([Step::ok("two")]), &path)
            .await
            .unwrap();
        second.run(request("b")).await.unwrap();
        let ids: Vec<String> = read_transcript(&path)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.request.id)
            .collect();
        assert_eq!(ids, vec!["a", "b"]);
    }

    #[tokio::test]
    async fn bad_transcripts_are_reported_with_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl");
        std::fs::write(&path, "\n{not json}\n").unwrap();
        let err = read_transcript(&path).await.unwrap_err();
        assert!(
            matches!(err, TranscriptError::Parse { line: 2, .. }),
            "{err}"
        );

        std::fs::write(&path, "{\"version\": 9}\n").unwrap();
        let err = read_transcript(&path).await.unwrap_err();
        assert!(
            err.to_string()
                .ends_with("line 1: version 9 is not supported (expected 1)"),
            "{err}"
        );
        let err = read_transcript(dir.path().join("missing.jsonl"))
            .await
            .unwrap_err();
        assert!(
            err.to_string().starts_with("failed to read transcript"),
            "{err}"
        );
    }

    #[test]
    fn transcript_lines_have_a_stable_shape() {
        let entry = TranscriptEntry {
            version: TRANSCRIPT_VERSION,
            agent: "claude".into(),
            request: request("T1").with_time_limit(std::time::Duration::from_secs(30)),
            outcome: TranscriptOutcome::Response(rich_response()),
        };
        let error = TranscriptEntry {
            outcome: TranscriptOutcome::Error(AgentError::Timeout { seconds: 30.0 }),
            ..entry.clone()
        };
        insta::assert_snapshot!(format!(
            "{}\n{}",
            serde_json::to_string(&entry).unwrap(),
            serde_json::to_string(&error).unwrap()
        ));
    }
}
