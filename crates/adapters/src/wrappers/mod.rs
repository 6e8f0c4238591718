//! Wrappers that add cross-cutting behaviour to any [`Agent`], so that no
//! backend needs its own flags for it:
//!
//! - [`WithTimeout`]: the request's (or a fixed) time limit, enforced from
//!   outside → [`AgentError::Timeout`];
//! - [`WithRetry`]: exponential backoff with a cap, for transient errors only;
//! - [`Budget`]: turn, token and cost limits summed over calls →
//!   [`AgentError::Budget`] without calling the agent again;
//! - [`LoopGuard`]: stops when the same error signature (numbers, paths and
//!   hex ids normalised) repeats N times in a row → [`AgentError::LoopDetected`];
//! - [`Recording`] and [`Replay`]: JSONL transcripts of requests and outcomes,
//!   and an agent that answers from one, for replay tests.
//!
//! Wrappers compose: `WithRetry::new(WithTimeout::new(agent), policy)` gives
//! each attempt its own time limit; `WithTimeout::new(WithRetry::new(..))`
//! bounds all attempts together.
//!
//! [`Agent`]: orchestrator_core::Agent
//! [`AgentError::Timeout`]: orchestrator_core::AgentError::Timeout
//! [`AgentError::Budget`]: orchestrator_core::AgentError::Budget
//! [`AgentError::LoopDetected`]: orchestrator_core::AgentError::LoopDetected

mod budget;
mod loop_guard;
mod recording;
mod retry;
mod timeout;

pub use budget::{Budget, BudgetLimits, WALL_GRACE};
pub use loop_guard::{LoopGuard, error_signature};
pub use recording::{
    JsonlWriter, Recording, Replay, TRANSCRIPT_VERSION, TranscriptEntry, TranscriptError,
    TranscriptOutcome, read_transcript,
};
pub use retry::{RetryPolicy, WithRetry};
pub use timeout::WithTimeout;

#[cfg(test)]
pub(crate) mod scripted {
    //! A small scripted agent for the wrappers' unit tests.

    use std::collections::VecDeque;
    use std::sync::Mutex;
    use std::time::Duration;

    use async_trait::async_trait;
    use orchestrator_core::{Agent, AgentError, AgentRequest, AgentResponse};
    use tokio::time::Instant;

    /// One scripted answer: wait `delay`, then return `result`.
    #[derive(Debug, Clone)]
    pub(crate) struct Step {
        pub delay: Duration,
        pub result: Result<AgentResponse, AgentError>,
    }

    impl Step {
        pub fn ok(text: &str) -> Self {
            Self {
                delay: Duration::ZERO,
                result: Ok(AgentResponse::text(text)),
            }
        }
        pub fn err(error: AgentError) -> Self {
            Self {
                delay: Duration::ZERO,
                result: Err(error),
            }
        }
        pub fn after(mut self, delay: Duration) -> Self {
            self.delay = delay;
            self
        }
    }

    /// Answers from a script, in order, and records when it was called.
    #[derive(Debug, Default)]
    pub(crate) struct Scripted {
        script: Mutex<VecDeque<Step>>,
        calls: Mutex<Vec<(AgentRequest, Instant)>>,
    }

    impl Scripted {
        pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
            Self {
                script: Mutex::new(steps.into_iter().collect()),
                calls: Mutex::new(Vec::new()),
            }
        }
        pub fn call_count(&self) -> usize {
            self.calls.lock().unwrap().len()
        }
        pub fn call_times(&self) -> Vec<Instant> {
            self.calls.lock().unwrap().iter().map(|c| c.1).collect()
        }
        pub fn requests(&self) -> Vec<AgentRequest> {
            self.calls
                .lock()
                .unwrap()
                .iter()
                .map(|c| c.0.clone())
                .collect()
        }
    }

    /// A failure that [`AgentError::is_transient`] accepts.
    pub fn transient(message: &str) -> AgentError {
        AgentError::Failed {
            message: message.into(),
            exit_code: Some(1),
        }
    }

    pub fn request(id: &str) -> AgentRequest {
        AgentRequest::new(id, orchestrator_core::Role::Fix, "fix it", "/tmp")
    }

    #[async_trait]
    impl Agent for Scripted {
        fn name(&self) -> &str {
            "scripted"
        }
        async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
            self.calls
                .lock()
                .unwrap()
                .push((request.clone(), Instant::now()));
            let step = self.script.lock().unwrap().pop_front();
            let Some(step) = step else {
                return Err(AgentError::Unsupported {
                    reason: "script exhausted".into(),
                });
            };
            tokio::time::sleep(step.delay).await;
            step.result
        }
    }
}
