//! Asking an agent for a structured answer: the answer validated against the
//! request's schema ([`AgentExt::run_validated`]), a time limit the caller
//! enforces itself (plus an optional grace, for agents that do not honour
//! the limit they are given), and a bounded number of attempts where a
//! rejected answer is asked again with the reasons appended to the
//! instruction.
//!
//! The adapters' `WithTimeout` wrapper does the same for one call, but core
//! cannot depend on the adapters and the flows must not trust an embedder's
//! agent to stop on time, so the limit lives here too.
//!
//! - [`run_within`]: one validated call, ended at its limit
//!   ([`AgentError::Timeout`]). For callers whose retries are someone else's
//!   (the retry executor).
//! - [`ask`]: the loop. The caller's `check` turns an answer into its value or
//!   into the problems to feed back; the caller's `on_failure` sees every
//!   failed attempt (to report it) and says whether to ask again, with or
//!   without feedback, or stop. The last failure is returned.
//!
//! Feature `runtime` (the time limit needs tokio).

use std::time::Duration;

use crate::agent::{Agent, AgentError, AgentExt, AgentRequest, AgentResponse};

/// Runs `request` through [`AgentExt::run_validated`] and ends it when
/// `limit` passes, with [`AgentError::Timeout`] naming the limit.
pub async fn run_within(
    agent: &dyn Agent,
    request: AgentRequest,
    limit: Duration,
) -> Result<AgentResponse, AgentError> {
    match tokio::time::timeout(limit, agent.run_validated(request)).await {
        Err(_) => Err(AgentError::Timeout {
            seconds: limit.as_secs_f64(),
        }),
        Ok(result) => result,
    }
}

/// How [`ask`] asks: the time limit of one attempt and the grace over it,
/// how many attempts at most, and the sentence that closes a retry's
/// feedback.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AskPolicy {
    /// The agent's time limit for one attempt (what the request tells it).
    pub time_limit: Duration,
    /// Waited beyond `time_limit` before the attempt is ended, for agents
    /// that do not stop on their own.
    pub grace: Duration,
    /// Attempts at most (at least one is made).
    pub attempts: u32,
    /// Appended after the feedback of a retry, e.g. "Answer again with
    /// corrected JSON."
    pub retry_note: String,
}

impl AskPolicy {
    /// `attempts` attempts of `time_limit` each, no grace, and a retry note
    /// asking for corrected JSON.
    pub fn new(time_limit: Duration, attempts: u32) -> Self {
        Self {
            time_limit,
            grace: Duration::ZERO,
            attempts,
            retry_note: "Answer again with corrected JSON.".to_owned(),
        }
    }

    /// Waits `grace` beyond the time limit before ending an attempt.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The sentence that closes a retry's feedback.
    pub fn with_retry_note(mut self, note: impl Into<String>) -> Self {
        self.retry_note = note.into();
        self
    }
}

/// Why an attempt of [`ask`] failed. Exhaustive on purpose: an attempt
/// either ran out of time, or the agent failed, or the caller rejected the
/// answer, and callers render each differently.
#[derive(Debug, Clone)]
pub enum AskFailure {
    /// No answer within the time limit plus grace.
    TimedOut {
        /// The time limit (without the grace).
        limit: Duration,
    },
    /// The agent failed, or its answer broke the request's schema.
    Agent(AgentError),
    /// The caller's `check` rejected the answer, with these problems.
    Rejected(Vec<String>),
}

/// What [`ask`] does after a failed attempt (when attempts remain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextAttempt {
    /// Ask again with this feedback appended to the instruction.
    WithFeedback(String),
    /// Ask again with the original instruction.
    Again,
    /// Give up now; [`ask`] returns this failure.
    Stop,
}

/// Asks `agent` until `check` accepts an answer, at most
/// `policy.attempts` times. Every failed attempt (1-based) goes to
/// `on_failure`, which decides what happens next; after the last attempt, or
/// a [`NextAttempt::Stop`], the last failure is returned.
///
/// A retry with feedback asks with the instruction followed by
/// "Your previous answer was rejected: {feedback}" and
/// [`AskPolicy::retry_note`].
pub async fn ask<T>(
    agent: &dyn Agent,
    request: AgentRequest,
    policy: &AskPolicy,
    mut check: impl FnMut(AgentResponse) -> Result<T, Vec<String>>,
    mut on_failure: impl FnMut(u32, &AskFailure) -> NextAttempt,
) -> Result<T, AskFailure> {
    let mut feedback: Option<String> = None;
    let mut attempt = 1;
    loop {
        let mut req = request.clone();
        if let Some(f) = &feedback {
            req.instruction = format!(
                "{}\n\nYour previous answer was rejected: {f}\n{}",
                req.instruction, policy.retry_note
            );
        }
        let limit = policy.time_limit + policy.grace;
        let failure = match tokio::time::timeout(limit, agent.run_validated(req)).await {
            Err(_) => AskFailure::TimedOut {
                limit: policy.time_limit,
            },
            Ok(Err(e)) => AskFailure::Agent(e),
            Ok(Ok(response)) => match check(response) {
                Ok(value) => return Ok(value),
                Err(problems) => AskFailure::Rejected(problems),
            },
        };
        let next = on_failure(attempt, &failure);
        if attempt >= policy.attempts.max(1) {
            return Err(failure);
        }
        feedback = match next {
            NextAttempt::WithFeedback(f) => Some(f),
            NextAttempt::Again => None,
            NextAttempt::Stop => return Err(failure),
        };
        attempt += 1;
    }
}

#[cfg(test)]
mod tests;
