//! The [`TestRunner`] trait: run a project's tests and report the outcome.
//!
//! Flows verify every change by running tests through this trait. The real
//! adapter runs a command (`cargo test`, `pytest`, …) and reads its exit status
//! and, when it recognises them, summary lines or a JUnit report; fakes return
//! scripted reports.

use std::collections::BTreeSet;
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

/// The tests that already fail before any change — a red base — and the
/// rule a change is judged by then: **no test fails that passed at the
/// base**. A broken or flaky test the repository carries is neither blamed
/// on a change nor hidden (it stays listed).
///
/// A base that fails without naming its failing tests (a check script, a
/// runner whose output is not read) forgives nothing: a change must make
/// the command pass, as with a green base.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// The tests failing at the base; empty for a green base.
    pub failing_tests: BTreeSet<String>,
    /// How the base failed when it named no failing test (`exited with
    /// status 1`); a change is then held to a passing run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unnamed_failure: Option<String>,
}

/// Why a run on the untouched base cannot serve as a baseline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BaselineError {
    /// The project does not build at the base (its output shows a compile
    /// or collection error), or the run timed out: every change's run
    /// would fail the same way.
    #[error("the tests cannot run before any change: {how}{}", log_note(log))]
    Broken {
        /// What was seen (`the build fails (exited with status 101)`,
        /// `the run timed out`).
        how: String,
        /// The end of its output.
        log: String,
    },
}

fn log_note(log: &str) -> String {
    let log = log.trim();
    if log.is_empty() {
        String::new()
    } else {
        format!("\n{log}")
    }
}

/// Lines that show a build or collection failure rather than failing
/// tests, in the output of the runners the engine reads: rustc, go,
/// pytest's collection, TypeScript, Node's module loader.
const BUILD_FAILURE_MARKERS: [&str; 8] = [
    "error: could not compile `",
    "[build failed]",
    "errors during collection",
    "ERROR collecting ",
    "error TS",
    "SyntaxError: ",
    "Error: Cannot find module ",
    "ModuleNotFoundError: ",
];

impl Baseline {
    /// The baseline a run on the untouched base gives: green; red with its
    /// failing tests named; red without names (held to a passing run); or
    /// an error when the project does not build there or the run timed
    /// out (then nothing could tell a change's failure from the base's).
    pub fn of(report: &TestReport) -> Result<Baseline, BaselineError> {
        if report.is_pass() {
            return Ok(Baseline::default());
        }
        let how = match (report.outcome, report.exit_code) {
            (TestOutcome::TimedOut, _) => "timed out".to_owned(),
            (_, Some(code)) => format!("exited with status {code}"),
            (_, None) => "was killed by a signal".to_owned(),
        };
        let tail = || {
            let lines: Vec<&str> = report.log.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        };
        if report.outcome == TestOutcome::TimedOut {
            return Err(BaselineError::Broken {
                how: "the run timed out".to_owned(),
                log: tail(),
            });
        }
        if report.failing_tests.is_empty()
            && BUILD_FAILURE_MARKERS.iter().any(|m| report.log.contains(m))
        {
            return Err(BaselineError::Broken {
                how: format!("the project does not build ({how})"),
                log: tail(),
            });
        }
        let named = !report.failing_tests.is_empty()
            && report.failed as usize <= report.failing_tests.len();
        Ok(if named {
            Baseline {
                failing_tests: report.failing_tests.iter().cloned().collect(),
                unnamed_failure: None,
            }
        } else {
            Baseline {
                failing_tests: report.failing_tests.iter().cloned().collect(),
                unnamed_failure: Some(how),
            }
        })
    }

    /// Whether every test passed at the base.
    pub fn is_green(&self) -> bool {
        self.failing_tests.is_empty() && self.unnamed_failure.is_none()
    }

    /// `report` judged against the base: a failed run whose failures are
    /// all named and all failed at the base counts as passed (its outcome
    /// becomes [`TestOutcome::Passed`], its failing tests stay listed and
    /// its log starts with a line naming them); anything else — a new
    /// failure, an unnamed one, a time limit, any failure when the base's
    /// was unnamed — is returned unchanged.
    pub fn judge(&self, mut report: TestReport) -> TestReport {
        let only_known = self.unnamed_failure.is_none()
            && report.outcome == TestOutcome::Failed
            && !report.failing_tests.is_empty()
            && report.failed as usize <= report.failing_tests.len()
            && report
                .failing_tests
                .iter()
                .all(|t| self.failing_tests.contains(t));
        if only_known {
            report.outcome = TestOutcome::Passed;
            report.log = format!(
                "no new failure: {} also failed before any change\n{}",
                report.failing_tests.join(", "),
                report.log
            );
        }
        report
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn report(failing: &[&str]) -> TestReport {
        if failing.is_empty() {
            TestReport::passing(3)
        } else {
            TestReport::failing(failing.iter().map(|s| (*s).to_owned()).collect(), "log")
        }
    }

    #[test]
    fn a_red_base_is_named_and_a_build_failure_is_not_a_baseline() {
        let base = Baseline::of(&report(&["root_only"])).unwrap();
        assert_eq!(base.failing_tests, BTreeSet::from(["root_only".to_owned()]));
        assert!(Baseline::of(&report(&[])).unwrap().is_green());
        let mut broken = TestReport::failing(
            Vec::new(),
            "error[E0425]: cannot find value `x`\nerror: could not compile `demo` (lib test) due to 1 previous error\n",
        );
        broken.exit_code = Some(101);
        assert_eq!(
            Baseline::of(&broken).unwrap_err().to_string(),
            "the tests cannot run before any change: the project does not build (exited with status 101)\nerror[E0425]: cannot find value `x`\nerror: could not compile `demo` (lib test) due to 1 previous error"
        );
        // A check that fails until the fix names nothing: held to a pass.
        let check = TestReport::failing(Vec::new(), "greeting missing\n");
        let base = Baseline::of(&check).unwrap();
        assert_eq!(
            base.unnamed_failure.as_deref(),
            Some("exited with status 1")
        );
        assert!(!base.is_green());
        assert!(!base.judge(check).is_pass());
        assert!(base.judge(TestReport::passing(1)).is_pass());
    }

    #[test]
    fn only_failures_the_base_had_are_forgiven() {
        let base = Baseline::of(&report(&["a", "b"])).unwrap();
        let same = base.judge(report(&["a"]));
        assert!(same.is_pass());
        assert!(
            same.log
                .starts_with("no new failure: a also failed before any change")
        );
        assert!(!base.judge(report(&["a", "c"])).is_pass());
        let mut unnamed = report(&["a"]);
        unnamed.failed = 2;
        assert!(!base.judge(unnamed).is_pass(), "an unnamed failure is new");
        let mut slow = report(&["a"]);
        slow.outcome = TestOutcome::TimedOut;
        assert!(!base.judge(slow).is_pass());
        assert!(!Baseline::default().judge(report(&["a"])).is_pass());
    }

    proptest! {
        /// A test that passed at the base and fails now is never forgiven;
        /// a run failing only in base failures always is.
        #[test]
        fn judging_never_hides_a_new_failure(
            base in proptest::collection::btree_set("[a-e]", 0..4),
            now in proptest::collection::btree_set("[a-h]", 1..5),
        ) {
            let baseline = Baseline {
                failing_tests: base.iter().cloned().collect(),
                unnamed_failure: None,
            };
            let names: Vec<&str> = now.iter().map(String::as_str).collect();
            let judged = baseline.judge(report(&names));
            let new = now.iter().any(|t| !base.contains(t));
            prop_assert_eq!(judged.is_pass(), !new);
        }
    }
}
