//! A session's `events.ndjson`, folded as it grows: what the list and the
//! session page need from it, kept per file and brought up to date from
//! the offset read last, so a long log is read once.

use std::collections::BTreeMap;
use std::path::Path;

use orchestrator_core::event::{Event, JobStatus};
use orchestrator_core::state::event_log::{LogEntry, LogLine, RunState, read_from};
use serde::Serialize;

/// The most recent warnings, notices and actions kept for the page.
const NOTES_KEPT: usize = 200;

/// What the log says about a session.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Digest {
    /// Where the next read starts.
    #[serde(skip)]
    pub offset: u64,
    /// When the first line was written (Unix ms).
    pub first_ms: Option<i64>,
    /// When the last line was written (Unix ms).
    pub last_ms: Option<i64>,
    /// How the last run ended, unless a run started after it.
    pub run_end: Option<RunEnd>,
    /// Test runs seen.
    pub test_runs: u64,
    /// Per job: its timing, attempts, spend and commits.
    pub jobs: BTreeMap<String, JobDigest>,
    /// Total agent spend over all jobs (the last `total` of each).
    pub cost_usd: f64,
    /// Total tokens over all jobs.
    pub tokens: u64,
    /// Gate questions still unanswered, by id: the prompt.
    pub open_gates: BTreeMap<String, String>,
    /// The last warnings, notices, escalations and actions.
    pub notes: Vec<Note>,
    /// The lines that did not parse.
    pub skipped: u64,
}

/// How a run ended, as its log says.
#[derive(Debug, Clone, Serialize)]
pub struct RunEnd {
    /// The state.
    pub state: RunState,
    /// The exit code.
    pub exit_code: i32,
    /// Why, when it stopped.
    pub reason: Option<String>,
}

/// One job (task, finding, iteration) as the log saw it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JobDigest {
    /// Its title, when the start said.
    pub title: Option<String>,
    /// When it (last) started, Unix ms.
    pub started_ms: Option<i64>,
    /// When it (last) finished, Unix ms.
    pub finished_ms: Option<i64>,
    /// How it finished.
    pub status: Option<JobStatus>,
    /// The finish's detail (error, skip reason).
    pub detail: Option<String>,
    /// Failed attempts: `round.attempt` and the error (test output).
    pub failures: Vec<(String, String)>,
    /// Test runs for it: passed, failing names.
    pub tests: Vec<(bool, Vec<String>)>,
    /// Commits: id and summary.
    pub commits: Vec<(String, String)>,
    /// Agent calls.
    pub calls: u32,
    /// Spend so far, US dollars.
    pub cost_usd: f64,
    /// Tokens so far.
    pub tokens: u64,
}

/// A line of the log worth showing as it is.
#[derive(Debug, Clone, Serialize)]
pub struct Note {
    /// When, Unix ms.
    pub at_ms: i64,
    /// `warning`, `notice`, `escalated`, `gate`, `action`.
    pub kind: &'static str,
    /// The text.
    pub text: String,
}

impl Digest {
    /// Reads what was appended to `path` since the last call and folds it
    /// in. A file that shrank (replaced) is read again from the start.
    pub fn update(&mut self, path: &Path) {
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            *self = Digest::default();
        }
        if len == self.offset {
            return;
        }
        let Ok(tail) = read_from(path, self.offset) else {
            return;
        };
        self.offset = tail.next_offset;
        self.skipped += tail.skipped.len() as u64;
        for line in &tail.lines {
            self.fold(line);
        }
    }

    fn fold(&mut self, line: &LogLine) {
        self.first_ms.get_or_insert(line.at_ms);
        self.last_ms = Some(line.at_ms);
        match &line.entry {
            LogEntry::Event { event } => self.event(line.at_ms, event),
            LogEntry::RunFinished {
                exit_code,
                state,
                reason,
            } => {
                self.run_end = Some(RunEnd {
                    state: *state,
                    exit_code: *exit_code,
                    reason: reason.clone(),
                });
                self.open_gates.clear();
            }
            LogEntry::Action {
                origin,
                action,
                detail,
            } => self.note(
                line.at_ms,
                "action",
                format!("{action} from {origin}: {detail}"),
            ),
            _ => {}
        }
    }

    fn event(&mut self, at: i64, event: &Event) {
        match event {
            Event::SessionOpened { .. } => self.run_opened(at),
            Event::GateAsked { question, prompt } => {
                self.open_gates.insert(question.clone(), prompt.clone());
                self.note(at, "gate", prompt.clone());
            }
            Event::GateAnswered { question, choice } => {
                self.open_gates.remove(question);
                let answer = choice.as_deref().unwrap_or("deferred");
                self.note(at, "gate", format!("{question}: {answer}"));
            }
            Event::Escalated { id, reason } => {
                let who = id.as_deref().map(|i| format!("{i}: ")).unwrap_or_default();
                self.note(at, "escalated", format!("{who}{reason}"));
            }
            Event::Warning { message } => self.note(at, "warning", message.clone()),
            Event::Notice { message } => self.note(at, "notice", message.clone()),
            _ => self.job_event(at, event),
        }
    }

    /// A new run: what the last one left running was abandoned.
    fn run_opened(&mut self, at: i64) {
        self.run_end = None;
        for job in self.jobs.values_mut() {
            if job.started_ms.is_some() && job.status.is_none() {
                job.finished_ms = Some(at);
                job.status = Some(JobStatus::Cancelled);
            }
        }
    }

    /// An event about jobs: one's start or end, a failed attempt, a commit,
    /// the agent's spend, or a test run (of the jobs it names).
    fn job_event(&mut self, at: i64, event: &Event) {
        match event {
            Event::JobStarted { id, title } => {
                let job = self.jobs.entry(id.clone()).or_default();
                job.started_ms = Some(at);
                job.finished_ms = None;
                job.status = None;
                if title.is_some() {
                    job.title.clone_from(title);
                }
            }
            Event::JobFinished { id, status, detail } => {
                let job = self.jobs.entry(id.clone()).or_default();
                job.finished_ms = Some(at);
                job.status = Some(*status);
                job.detail.clone_from(detail);
            }
            Event::AttemptFailed {
                id,
                round,
                attempt,
                error,
            } => {
                let job = self.jobs.entry(id.clone()).or_default();
                job.failures
                    .push((format!("{round}.{attempt}"), error.clone()));
            }
            Event::TestsRan {
                id,
                passed,
                failing,
            } => {
                self.test_runs += 1;
                if let Some(id) = id {
                    // A batch run names its candidates joined by `+`.
                    for one in id.split('+') {
                        let job = self.jobs.entry(one.to_owned()).or_default();
                        job.tests.push((*passed, failing.clone()));
                    }
                }
            }
            Event::CommitMade {
                id,
                commit,
                summary,
            } => {
                let job = self.jobs.entry(id.clone()).or_default();
                job.commits.push((commit.clone(), summary.clone()));
            }
            Event::AgentCall { id, total, .. } => {
                let job = self.jobs.entry(id.clone()).or_default();
                self.cost_usd += total.cost_usd - job.cost_usd;
                self.tokens = (self.tokens + total.tokens()).saturating_sub(job.tokens);
                job.calls = total.calls;
                job.cost_usd = total.cost_usd;
                job.tokens = total.tokens();
            }
            _ => {}
        }
    }

    fn note(&mut self, at_ms: i64, kind: &'static str, text: String) {
        if self.notes.len() == NOTES_KEPT {
            self.notes.remove(0);
        }
        self.notes.push(Note { at_ms, kind, text });
    }

    /// Every commit the session recorded, with its job.
    pub fn commits(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.jobs.iter().flat_map(|(id, job)| {
            job.commits
                .iter()
                .map(move |(sha, summary)| (id.as_str(), sha.as_str(), summary.as_str()))
        })
    }
}
