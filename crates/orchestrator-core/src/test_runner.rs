//! The [`TestRunner`] trait: run a project's tests and report the outcome.
//!
//! Flows verify every change by running tests through this trait. The real
//! adapter runs a command (`cargo test`, `pytest`, …) and reads its exit status
//! and, when it recognises them, summary lines or a JUnit report; fakes return
//! scripted reports.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Which tests to run, where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestRequest {
    /// Directory to run the tests in.
    pub workdir: PathBuf,
    /// A selection pattern (a review-fix group's `test_pattern`), substituted
    /// for `{pattern}` in the configured command; `None` runs everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Time limit for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<Duration>,
}

impl TestRequest {
    /// Runs every test in `workdir`, with no time limit.
    pub fn all(workdir: impl Into<PathBuf>) -> Self {
        Self {
            workdir: workdir.into(),
            pattern: None,
            time_limit: None,
        }
    }
}

/// How a test run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestOutcome {
    /// Every selected test passed.
    Passed,
    /// At least one test failed (or the command exited non-zero).
    Failed,
    /// The run exceeded its time limit and was killed.
    TimedOut,
}

/// The result of one test run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestReport {
    /// How the run ended.
    pub outcome: TestOutcome,
    /// Tests that passed, when known.
    #[serde(default)]
    pub passed: u32,
    /// Tests that failed, when known.
    #[serde(default)]
    pub failed: u32,
    /// Tests that were skipped or ignored, when known.
    #[serde(default)]
    pub skipped: u32,
    /// Names of failing tests, when known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing_tests: Vec<String>,
    /// Captured output (the tail, when it was long).
    #[serde(default)]
    pub log: String,
    /// Exit status of the test command, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Wall time of the run in milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
}

impl TestReport {
    /// A passing report with the given count.
    pub fn passing(passed: u32) -> Self {
        Self {
            outcome: TestOutcome::Passed,
            passed,
            failed: 0,
            skipped: 0,
            failing_tests: Vec::new(),
            log: String::new(),
            exit_code: Some(0),
            duration_ms: 0,
        }
    }

    /// A failing report naming the failing tests.
    pub fn failing(failing_tests: Vec<String>, log: impl Into<String>) -> Self {
        Self {
            outcome: TestOutcome::Failed,
            passed: 0,
            failed: failing_tests.len() as u32,
            skipped: 0,
            failing_tests,
            log: log.into(),
            exit_code: Some(1),
            duration_ms: 0,
        }
    }

    /// Whether the run passed.
    pub fn is_pass(&self) -> bool {
        self.outcome == TestOutcome::Passed
    }
}

/// Why a test run could not be performed at all (as opposed to tests failing,
/// which is a successful run with a failing [`TestReport`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TestRunnerError {
    /// The test command could not be started.
    #[error("failed to start test command `{command}`: {message}")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        message: String,
    },
    /// The configuration is unusable (no command, bad pattern, …).
    #[error("invalid test configuration: {0}")]
    Config(String),
    /// Anything else (I/O while capturing output, …).
    #[error("test run failed: {0}")]
    Other(String),
}

/// Runs tests. Object-safe: flows hold `Arc<dyn TestRunner>`.
///
/// Contract (checked by the conformance suite): failing tests are an
/// `Ok(report)` with [`TestOutcome::Failed`]; `Err` means the run could not
/// happen; a run never outlives its time limit by more than a short grace.
#[async_trait]
pub trait TestRunner: Send + Sync + fmt::Debug {
    /// Runs the selected tests.
    async fn run(&self, request: TestRequest) -> Result<TestReport, TestRunnerError>;
}

#[async_trait]
impl<T: TestRunner + ?Sized> TestRunner for Arc<T> {
    async fn run(&self, request: TestRequest) -> Result<TestReport, TestRunnerError> {
        (**self).run(request).await
    }
}

#[async_trait]
impl<T: TestRunner + ?Sized> TestRunner for Box<T> {
    async fn run(&self, request: TestRequest) -> Result<TestReport, TestRunnerError> {
        (**self).run(request).await
    }
}
