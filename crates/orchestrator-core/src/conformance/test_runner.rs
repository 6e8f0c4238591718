//! The [`TestRunner`] conformance suite.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::must;
use crate::test_runner::{TestOutcome, TestRequest, TestRunner};

/// Builds test runners of the implementation under test.
#[async_trait]
pub trait TestRunnerHarness: Send + Sync {
    /// A runner whose tests pass.
    async fn passing(&self) -> Arc<dyn TestRunner>;
    /// A runner whose tests fail.
    async fn failing(&self) -> Arc<dyn TestRunner>;
    /// A runner whose tests never finish.
    async fn hanging(&self) -> Arc<dyn TestRunner>;
    /// The directory to run in.
    fn workdir(&self) -> PathBuf;
    /// Extra time allowed past the time limit.
    fn grace(&self) -> Duration {
        Duration::from_secs(5)
    }
}

/// Runs every check.
pub async fn run_suite(h: &dyn TestRunnerHarness) {
    let req = TestRequest::all(h.workdir());

    let pass = must(h.passing().await.run(req.clone()).await, "passing run");
    assert_eq!(
        pass.outcome,
        TestOutcome::Passed,
        "conformance: passing tests pass"
    );
    assert!(pass.is_pass());
    assert_eq!(pass.failed, 0, "conformance: a pass has no failures");

    let fail = must(
        h.failing().await.run(req.clone()).await,
        "failing tests are Ok(report), not Err",
    );
    assert_eq!(
        fail.outcome,
        TestOutcome::Failed,
        "conformance: failing tests fail"
    );
    assert!(!fail.is_pass());

    let mut with_pattern = req.clone();
    with_pattern.pattern = Some("some::pattern".into());
    let pass = must(
        h.passing().await.run(with_pattern).await,
        "run with a pattern",
    );
    assert!(
        pass.is_pass(),
        "conformance: a pattern does not break a passing run"
    );

    let limit = Duration::from_millis(300);
    let mut hang = req;
    hang.time_limit = Some(limit);
    let started = Instant::now();
    let report = must(h.hanging().await.run(hang).await, "hanging run");
    let took = started.elapsed();
    assert_eq!(
        report.outcome,
        TestOutcome::TimedOut,
        "conformance: a hung run times out"
    );
    assert!(
        took <= limit + h.grace(),
        "conformance: timed-out run took {took:?}"
    );
}
