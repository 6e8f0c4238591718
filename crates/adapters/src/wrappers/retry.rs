//! [`WithRetry`]: retries transient failures with exponential backoff.

use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::{Agent, AgentError, AgentRequest, AgentResponse};

/// How [`WithRetry`] retries.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (0 is treated as 1).
    pub max_attempts: u32,
    /// Delay before the first retry.
    pub initial_backoff: Duration,
    /// The largest delay between two attempts.
    pub max_backoff: Duration,
    /// Factor applied to the delay after each retry (values below 1 are
    /// treated as 1).
    pub multiplier: f64,
}

impl Default for RetryPolicy {
    /// Three attempts, 1 s then 2 s apart, never more than 30 s.
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            multiplier: 2.0,
        }
    }
}

impl RetryPolicy {
    /// The delay before retry number `retry` (1 for the first retry):
    /// `initial_backoff × multiplier^(retry − 1)`, capped at `max_backoff`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exponent = i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX);
        let factor = self.multiplier.max(1.0).powi(exponent);
        let secs = self.initial_backoff.as_secs_f64() * factor;
        Duration::try_from_secs_f64(secs)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }
}

/// Retries a request when the inner agent fails with a transient error
/// ([`AgentError::is_transient`]: timeouts and backend failures), up to
/// `max_attempts`, sleeping [`RetryPolicy::backoff`] in between. Other errors
/// (budget, loop detected, schema violations, unsupported) return at once;
/// the last error is returned when the attempts run out.
#[derive(Debug, Clone)]
pub struct WithRetry<A> {
    inner: A,
    policy: RetryPolicy,
}

impl<A> WithRetry<A> {
    /// Wraps `inner` with `policy`.
    pub fn new(inner: A, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }

    /// The wrapped agent.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

#[async_trait]
impl<A: Agent> Agent for WithRetry<A> {
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
        let max_attempts = self.policy.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            match self.inner.run(request.clone()).await {
                Ok(response) => return Ok(response),
                Err(error) if error.is_transient() && attempt < max_attempts => {
                    let delay = self.policy.backoff(attempt);
                    tracing::info!(
                        agent = self.inner.name(),
                        request = %request.id,
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        %error,
                        "retrying agent call"
                    );
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrappers::scripted::{Scripted, Step, request, transient};
    use proptest::prelude::*;

    fn policy(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(3),
            multiplier: 2.0,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried_with_capped_exponential_backoff() {
        let inner = Scripted::new([
            Step::err(transient("503")),
            Step::err(AgentError::Timeout { seconds: 1.0 }),
            Step::err(transient("503")),
            Step::ok("finally"),
        ]);
        let agent = WithRetry::new(inner, policy(5));
        assert_eq!(
            agent.run(request("r")).await,
            Ok(AgentResponse::text("finally"))
        );
        let times = agent.inner().call_times();
        let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(
            gaps,
            vec![
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(3)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_error_is_returned_after_max_attempts() {
        let inner = Scripted::new((0..5).map(|i| Step::err(transient(&format!("fail {i}")))));
        let agent = WithRetry::new(inner, policy(3));
        assert_eq!(agent.run(request("r")).await, Err(transient("fail 2")));
        assert_eq!(agent.inner().call_count(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_errors_are_not_retried() {
        for error in [
            AgentError::Budget {
                message: "spent".into(),
            },
            AgentError::SchemaViolation {
                violations: vec!["$.a: missing".into()],
            },
            AgentError::Unsupported {
                reason: "no suggestion".into(),
            },
        ] {
            let agent = WithRetry::new(Scripted::new([Step::err(error.clone())]), policy(5));
            assert_eq!(agent.run(request("r")).await, Err(error));
            assert_eq!(agent.inner().call_count(), 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn zero_attempts_means_one() {
        let agent = WithRetry::new(Scripted::new([Step::err(transient("x"))]), policy(0));
        assert_eq!(agent.run(request("r")).await, Err(transient("x")));
        assert_eq!(agent.inner().call_count(), 1);
    }

    #[test]
    fn backoff_handles_extreme_values() {
        let p = RetryPolicy {
            max_attempts: 100,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            multiplier: 10.0,
        };
        assert_eq!(p.backoff(u32::MAX), Duration::from_secs(60));
        let flat = RetryPolicy {
            multiplier: 0.1,
            ..p
        };
        assert_eq!(flat.backoff(5), Duration::from_secs(1));
    }

    proptest! {
        /// Backoff never decreases and never exceeds the cap.
        #[test]
        fn backoff_is_monotone_and_capped(
            initial_ms in 0u64..10_000,
            max_ms in 0u64..100_000,
            multiplier in 0.0f64..8.0,
            retry in 1u32..200,
        ) {
            let p = RetryPolicy {
                max_attempts: 10,
                initial_backoff: Duration::from_millis(initial_ms),
                max_backoff: Duration::from_millis(max_ms),
                multiplier,
            };
            let a = p.backoff(retry);
            let b = p.backoff(retry + 1);
            prop_assert!(a <= b, "{a:?} > {b:?}");
            prop_assert!(b <= p.max_backoff);
        }
    }
}
