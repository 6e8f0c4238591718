//! Typed events: how flows report progress.
//!
//! Every flow emits [`Event`]s to an [`EventSink`]. Reporters consume them: the
//! CLI renders progress bars or JSON lines, embedders forward them to chat,
//! snapshot tests compare them. Events carry no timestamps, so that the same
//! run gives the same stream.

use std::fmt;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Final status of a job (task, finding, group, iteration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Finished successfully.
    Completed,
    /// Finished unsuccessfully.
    Failed,
    /// Not run because a dependency failed or was skipped.
    Skipped,
    /// Exceeded its time limit.
    TimedOut,
    /// Stopped by cancellation.
    Cancelled,
}

impl JobStatus {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Skipped => "skipped",
            JobStatus::TimedOut => "timed_out",
            JobStatus::Cancelled => "cancelled",
        }
    }
}

/// Something that happened in a flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A phase of a flow began.
    PhaseStarted {
        /// The flow (`planex`, `review-fix`, `ci-autofix`, …).
        flow: String,
        /// The phase name.
        phase: String,
    },
    /// A phase ended.
    PhaseFinished {
        /// The flow.
        flow: String,
        /// The phase name.
        phase: String,
    },
    /// A wave or stage of jobs began.
    WaveStarted {
        /// 1-based wave number.
        wave: u32,
        /// Jobs in it.
        jobs: Vec<String>,
    },
    /// A job began.
    JobStarted {
        /// Job id.
        id: String,
        /// Human title, when there is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// A job ended.
    JobFinished {
        /// Job id.
        id: String,
        /// How it ended.
        status: JobStatus,
        /// A short explanation (error, skip reason, summary).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// An attempt at a job failed and may be retried.
    AttemptFailed {
        /// Job id.
        id: String,
        /// Retry round (1-based).
        round: u32,
        /// Attempt within the round (1-based).
        attempt: u32,
        /// Why it failed.
        error: String,
    },
    /// A gate asked a question.
    GateAsked {
        /// Question id.
        question: String,
        /// The prompt.
        prompt: String,
    },
    /// A gate was answered (`None` label: deferred).
    GateAnswered {
        /// Question id.
        question: String,
        /// The chosen option's label, `None` when deferred.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        choice: Option<String>,
    },
    /// Tests ran.
    TestsRan {
        /// The job the run verified, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// Whether they passed.
        passed: bool,
        /// Failing test names, when known.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failing: Vec<String>,
    },
    /// A commit was made.
    CommitMade {
        /// The job it belongs to.
        id: String,
        /// The commit id.
        commit: String,
        /// First line of the message.
        summary: String,
    },
    /// A human is needed; the flow stops resumably.
    Escalated {
        /// The job, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// Why.
        reason: String,
    },
    /// Something the run says once for the user to know, not a problem
    /// (what each worktree is given, say).
    Notice {
        /// The message.
        message: String,
    },
    /// A problem that did not stop the flow.
    Warning {
        /// The message.
        message: String,
    },
    /// The flow opened (created, or resumed) its session folder: from here
    /// on the run's state lives in `dir`. Reporters that keep a per-session
    /// log ([`crate::state::event_log::EventLog`]) start writing there.
    SessionOpened {
        /// The flow (`planex`, `review-fix`, `ci-autofix`).
        flow: String,
        /// The session id (its folder's name).
        session: String,
        /// The session folder.
        dir: std::path::PathBuf,
    },
    /// An agent call made for a job (a finding, a row, an iteration)
    /// ended: what it spent, and what the job has spent so far.
    AgentCall {
        /// The job id (`F2`, `T3`, `iter-1`).
        id: String,
        /// This call's spend (one call; its usage when the agent reported
        /// any).
        spend: crate::agent::AgentSpend,
        /// The job's spend over all its calls so far.
        total: crate::agent::AgentSpend,
    },
}

/// Receives events. Implementations must be cheap and never block for long:
/// they are called from inside flows.
pub trait EventSink: Send + Sync + fmt::Debug {
    /// Receives one event.
    fn emit(&self, event: &Event);
}

impl<S: EventSink + ?Sized> EventSink for Arc<S> {
    fn emit(&self, event: &Event) {
        (**self).emit(event)
    }
}

impl<S: EventSink + ?Sized> EventSink for Box<S> {
    fn emit(&self, event: &Event) {
        (**self).emit(event)
    }
}

/// Discards every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&self, _event: &Event) {}
}

/// Keeps every event in memory, in order. For tests and for embedders that
/// want the whole stream at the end.
#[derive(Debug, Default)]
pub struct CollectingSink {
    events: Mutex<Vec<Event>>,
}

impl CollectingSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the events received so far.
    pub fn events(&self) -> Vec<Event> {
        match self.events.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl EventSink for CollectingSink {
    fn emit(&self, event: &Event) {
        match self.events.lock() {
            Ok(mut g) => g.push(event.clone()),
            Err(poisoned) => poisoned.into_inner().push(event.clone()),
        }
    }
}

/// Feature `runtime`: events into a tokio channel.
#[cfg(feature = "runtime")]
impl EventSink for tokio::sync::mpsc::UnboundedSender<Event> {
    fn emit(&self, event: &Event) {
        // A closed receiver means nobody listens any more; that is not an error.
        let _ = self.send(event.clone());
    }
}

/// Sends each event to several sinks.
#[derive(Debug, Default)]
pub struct FanOut(pub Vec<Arc<dyn EventSink>>);

impl EventSink for FanOut {
    fn emit(&self, event: &Event) {
        for sink in &self.0 {
            sink.emit(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_as_tagged_json_lines() {
        let e = Event::JobFinished {
            id: "T1".into(),
            status: JobStatus::Skipped,
            detail: Some("Dependency failed or skipped".into()),
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"event":"job_finished","id":"T1","status":"skipped","detail":"Dependency failed or skipped"}"#
        );
    }

    #[test]
    fn collecting_sink_keeps_order() {
        let sink = CollectingSink::new();
        let fan = FanOut(vec![Arc::new(NullSink), Arc::new(CollectingSink::new())]);
        for i in 0..3 {
            let e = Event::Warning {
                message: i.to_string(),
            };
            sink.emit(&e);
            fan.emit(&e);
        }
        let msgs: Vec<_> = sink
            .events()
            .into_iter()
            .map(|e| match e {
                Event::Warning { message } => message,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(msgs, ["0", "1", "2"]);
    }
}
