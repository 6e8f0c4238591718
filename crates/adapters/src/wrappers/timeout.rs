//! [`WithTimeout`]: a time limit enforced from outside the agent.

use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::{Agent, AgentError, AgentRequest, AgentResponse};

/// Enforces the request's time limit, or a fixed one, around any agent: when
/// the limit (plus an optional grace) passes, the inner call is dropped and
/// [`AgentError::Timeout`] is returned. Dropping the call is what cancels it,
/// so inner agents must clean up on drop (process agents kill their process
/// group). The inner agent receives the request with `time_limit` set to the
/// effective limit, so one that enforces limits itself stops in time.
#[derive(Debug, Clone)]
pub struct WithTimeout<A> {
    inner: A,
    limit: Option<Duration>,
    grace: Duration,
}

impl<A> WithTimeout<A> {
    /// Enforces each request's own `time_limit`; a request without one runs
    /// unbounded unless [`WithTimeout::with_limit`] sets a cap.
    pub fn new(inner: A) -> Self {
        Self {
            inner,
            limit: None,
            grace: Duration::ZERO,
        }
    }

    /// Caps every call at `limit`: the effective limit is the smaller of the
    /// request's and this one.
    pub fn with_limit(mut self, limit: Duration) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Waits `grace` past the limit before abandoning the call, so that an
    /// inner agent that enforces the limit itself can report first.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The wrapped agent.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The limit that applies to `request`, if any.
    pub fn effective_limit(&self, request: &AgentRequest) -> Option<Duration> {
        match (request.time_limit, self.limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[async_trait]
impl<A: Agent> Agent for WithTimeout<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn changes_files(&self) -> bool {
        self.inner.changes_files()
    }
    fn reports_exact_changes(&self) -> bool {
        self.inner.reports_exact_changes()
    }
    fn spent(&self) -> Option<orchestrator_core::agent::AgentSpent> {
        self.inner.spent()
    }

    async fn run(&self, mut request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let Some(limit) = self.effective_limit(&request) else {
            return self.inner.run(request).await;
        };
        request.time_limit = Some(limit);
        match tokio::time::timeout(limit.saturating_add(self.grace), self.inner.run(request)).await
        {
            Ok(result) => result,
            Err(_) => Err(AgentError::Timeout {
                seconds: limit.as_secs_f64(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrappers::scripted::{Scripted, Step, request};
    use tokio::time::Instant;

    fn slow(secs: u64) -> Scripted {
        Scripted::new([Step::ok("done").after(Duration::from_secs(secs))])
    }

    #[tokio::test(start_paused = true)]
    async fn the_request_limit_is_enforced() {
        let agent = WithTimeout::new(slow(10));
        let start = Instant::now();
        let result = agent
            .run(request("r").with_time_limit(Duration::from_secs(3)))
            .await;
        assert_eq!(result, Err(AgentError::Timeout { seconds: 3.0 }));
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn the_fixed_limit_caps_the_request_limit() {
        let agent = WithTimeout::new(slow(10)).with_limit(Duration::from_secs(2));
        let result = agent
            .run(request("r").with_time_limit(Duration::from_secs(5)))
            .await;
        assert_eq!(result, Err(AgentError::Timeout { seconds: 2.0 }));
        // The inner agent was told the effective limit.
        assert_eq!(
            agent.inner().requests()[0].time_limit,
            Some(Duration::from_secs(2))
        );
        // No request limit: the fixed one applies.
        let agent = WithTimeout::new(slow(10)).with_limit(Duration::from_secs(4));
        assert_eq!(
            agent.run(request("r")).await,
            Err(AgentError::Timeout { seconds: 4.0 })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn calls_within_the_limit_and_grace_pass_through() {
        let agent = WithTimeout::new(slow(5)).with_grace(Duration::from_secs(1));
        let result = agent
            .run(request("r").with_time_limit(Duration::from_millis(4500)))
            .await;
        assert_eq!(result, Ok(AgentResponse::text("done")));
        // Without any limit the call is not bounded.
        let agent = WithTimeout::new(slow(1000));
        assert_eq!(
            agent.run(request("r")).await,
            Ok(AgentResponse::text("done"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn inner_errors_are_returned_unchanged() {
        let error = AgentError::Unavailable {
            message: "no binary".into(),
        };
        let agent = WithTimeout::new(Scripted::new([Step::err(error.clone())]))
            .with_limit(Duration::from_secs(1));
        assert_eq!(agent.run(request("r")).await, Err(error));
        assert_eq!(agent.name(), "scripted");
    }
}
