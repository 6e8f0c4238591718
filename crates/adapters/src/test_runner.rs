//! [`CommandTestRunner`]: runs any test command as a [`TestRunner`].
//!
//! The command is an argv (no shell) or, only when asked for with
//! [`CommandTestRunner::shell`], a `sh -c` string. `{pattern}` in an argument
//! is replaced by the request's selection pattern. The child runs through
//! [`crate::process::run`] (own process group, bounded output, SIGTERM →
//! grace → SIGKILL on timeout).
//!
//! Pass or fail comes from the exit status. Counts and failing test names come
//! from a JUnit XML report when one is configured and was written by this run,
//! otherwise from the summary lines of the runners [`summary`] recognises
//! (cargo test, cargo nextest, pytest, go test, node --test). A run that
//! exits 0 while its report or summary counts failing tests is reported as
//! failed: a pipeline that lost the exit status must not turn red into green.

pub mod junit;
pub mod summary;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use orchestrator_core::command::{CommandError, CommandRunner, CommandSpec};
use orchestrator_core::test_runner::{
    TestOutcome, TestReport, TestRequest, TestRunner, TestRunnerError,
};

use crate::process::{self, ProcessSpec};

/// The placeholder replaced by the request's pattern.
pub const PATTERN_PLACEHOLDER: &str = "{pattern}";

/// Environment variable that also carries the pattern (empty when none).
pub const PATTERN_ENV: &str = "ORCHESTRATOR_TEST_PATTERN";

/// How the test command is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestCommand {
    /// Program and arguments, run without a shell. An argument that is
    /// exactly `{pattern}` is left out when the request has no pattern;
    /// elsewhere `{pattern}` becomes the pattern or the empty string.
    Argv(Vec<String>),
    /// A string run with `sh -c`. `{pattern}` is replaced by the pattern
    /// quoted for the shell (`''` when none), so a pattern cannot inject
    /// commands.
    Shell(String),
}

/// Runs a configured test command; see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandTestRunner {
    command: TestCommand,
    env: Vec<(String, String)>,
    time_limit: Option<Duration>,
    grace: Duration,
    junit_xml: Option<PathBuf>,
    output_limit: usize,
}

/// The bytes of combined output kept in a report's log.
pub const DEFAULT_LOG_LIMIT: usize = 1024 * 1024;

impl CommandTestRunner {
    /// A runner for an argv command, e.g. `["cargo", "test", "{pattern}"]`.
    pub fn argv<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::new(TestCommand::Argv(
            argv.into_iter().map(Into::into).collect(),
        ))
    }

    /// A runner for a shell command string, run with `sh -c`.
    pub fn shell(script: impl Into<String>) -> Self {
        Self::new(TestCommand::Shell(script.into()))
    }

    /// A runner for the given command with defaults: no env, no time limit of
    /// its own, a 2 s grace period, no JUnit report, a 1 MiB log per stream.
    pub fn new(command: TestCommand) -> Self {
        Self {
            command,
            env: Vec::new(),
            time_limit: None,
            grace: process::DEFAULT_GRACE,
            junit_xml: None,
            output_limit: DEFAULT_LOG_LIMIT,
        }
    }

    /// Builder: set an environment variable for the command.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Builder: the time limit used when a request carries none.
    pub fn time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// Builder: the grace period between SIGTERM and SIGKILL.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Builder: read counts and failing tests from this JUnit XML file
    /// (relative paths are relative to the request's working directory).
    /// A file older than the run is ignored.
    pub fn junit_xml(mut self, path: impl Into<PathBuf>) -> Self {
        self.junit_xml = Some(path.into());
        self
    }

    /// Builder: bytes of stdout and of stderr kept (the tail).
    pub fn output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes;
        self
    }

    /// The configured command.
    pub fn command(&self) -> &TestCommand {
        &self.command
    }

    /// The argv that runs for `pattern`.
    pub fn argv_for(&self, pattern: Option<&str>) -> Result<Vec<String>, TestRunnerError> {
        match &self.command {
            TestCommand::Argv(argv) => {
                let out: Vec<String> = argv
                    .iter()
                    .filter(|a| pattern.is_some() || a.as_str() != PATTERN_PLACEHOLDER)
                    .map(|a| a.replace(PATTERN_PLACEHOLDER, pattern.unwrap_or("")))
                    .collect();
                if out.first().is_none_or(|p| p.is_empty()) {
                    return Err(TestRunnerError::Config(
                        "the test command is empty (no program given)".into(),
                    ));
                }
                Ok(out)
            }
            TestCommand::Shell(script) => {
                if script.trim().is_empty() {
                    return Err(TestRunnerError::Config(
                        "the test shell command is empty".into(),
                    ));
                }
                let quoted = shell_quote(pattern.unwrap_or(""));
                Ok(vec![
                    "sh".into(),
                    "-c".into(),
                    script.replace(PATTERN_PLACEHOLDER, &quoted),
                ])
            }
        }
    }
}

/// Quotes `s` as one word for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[async_trait]
impl TestRunner for CommandTestRunner {
    async fn run(&self, request: TestRequest) -> Result<TestReport, TestRunnerError> {
        let argv = self.argv_for(request.pattern.as_deref())?;
        let mut spec = ProcessSpec::new(&argv[0])
            .args(&argv[1..])
            .cwd(&request.workdir)
            .env(PATTERN_ENV, request.pattern.clone().unwrap_or_default())
            .time_limit(request.time_limit.or(self.time_limit))
            .grace(self.grace)
            .output_limit(self.output_limit);
        for (k, v) in &self.env {
            spec = spec.env(k, v);
        }
        let started = SystemTime::now();
        let output = process::run(&spec).await.map_err(|err| match err {
            process::ProcessError::Spawn { command, source } => TestRunnerError::Spawn {
                command,
                message: source.to_string(),
            },
            other => TestRunnerError::Other(other.to_string()),
        })?;

        let log = combined_log(&output);
        let junit = self
            .junit_xml
            .as_ref()
            .map(|p| request.workdir.join(p))
            .and_then(|path| read_fresh_report(&path, started));
        Ok(report_of(
            log,
            junit,
            output.timed_out,
            output.code(),
            u64::try_from(output.duration.as_millis()).unwrap_or(u64::MAX),
        ))
    }
}

/// The report of a finished run: counts from the JUnit report or the
/// summary lines, pass only on exit 0 with no failing test counted.
fn report_of(
    log: String,
    junit: Option<summary::Summary>,
    timed_out: bool,
    code: Option<i32>,
    duration_ms: u64,
) -> TestReport {
    let parsed = junit.or_else(|| summary::parse(&log));
    let (passed, failed, skipped, failing_tests) = match parsed {
        Some(s) => (s.passed, s.failed, s.skipped, s.failing_tests),
        None => (0, 0, 0, Vec::new()),
    };
    let outcome = if timed_out {
        TestOutcome::TimedOut
    } else if code == Some(0) && failed == 0 {
        TestOutcome::Passed
    } else {
        TestOutcome::Failed
    };
    TestReport {
        outcome,
        passed,
        failed,
        skipped,
        failing_tests,
        log,
        exit_code: if timed_out { None } else { code },
        duration_ms,
    }
}

/// A [`CommandTestRunner`]'s command run through another
/// [`CommandRunner`] (a remote one, such as the Ray runner), its output
/// read exactly as the local runner reads it. A JUnit report is not read:
/// it was written where the command ran.
#[derive(Debug, Clone)]
pub struct RemoteTestRunner {
    tests: CommandTestRunner,
    runner: std::sync::Arc<dyn CommandRunner>,
}

impl RemoteTestRunner {
    /// `tests`' command, run by `runner`.
    pub fn new(tests: CommandTestRunner, runner: std::sync::Arc<dyn CommandRunner>) -> Self {
        Self { tests, runner }
    }
}

#[async_trait]
impl TestRunner for RemoteTestRunner {
    async fn run(&self, request: TestRequest) -> Result<TestReport, TestRunnerError> {
        let t = &self.tests;
        let argv = t.argv_for(request.pattern.as_deref())?;
        let mut spec = CommandSpec::new(&argv[0], argv[1..].iter().cloned(), &request.workdir)
            .with_env(PATTERN_ENV, request.pattern.clone().unwrap_or_default());
        spec.time_limit = request.time_limit.or(t.time_limit);
        spec.output_limit = t.output_limit;
        for (k, v) in &t.env {
            spec = spec.with_env(k, v);
        }
        let output = self.runner.run(spec).await.map_err(|err| match err {
            CommandError::Spawn { command, message } => TestRunnerError::Spawn { command, message },
            other => TestRunnerError::Other(other.to_string()),
        })?;
        let mut log = String::new();
        if output.truncated {
            log.push_str("[… the front of the output was dropped …]\n");
        }
        log.push_str(&output.combined());
        Ok(report_of(
            log,
            None,
            output.timed_out,
            output.exit_code,
            output.duration_ms,
        ))
    }
}

/// Reads and parses the JUnit report at `path` if it was written at or after
/// `started`; anything else (missing, stale, unparsable) yields `None` and a
/// debug log, so the summary lines are used instead.
fn read_fresh_report(path: &std::path::Path, started: SystemTime) -> Option<summary::Summary> {
    let meta = std::fs::metadata(path).ok()?;
    // Allow for coarse file-system timestamps.
    let slack = Duration::from_millis(1100);
    if let Ok(modified) = meta.modified()
        && modified + slack < started
    {
        tracing::debug!(path = %path.display(), "junit report predates the run; ignoring it");
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    match junit::parse(&text) {
        Ok(s) => Some(s),
        Err(err) => {
            tracing::debug!(path = %path.display(), %err, "junit report unreadable; using summary lines");
            None
        }
    }
}

/// stdout then stderr, each preceded by a note when its front was dropped.
fn combined_log(output: &process::ProcessOutput) -> String {
    let mut log = String::new();
    if output.stdout_dropped > 0 {
        log.push_str(&format!(
            "[… {} bytes of stdout dropped …]\n",
            output.stdout_dropped
        ));
    }
    log.push_str(&output.stdout_text());
    if !output.stderr.is_empty() || output.stderr_dropped > 0 {
        if !log.is_empty() && !log.ends_with('\n') {
            log.push('\n');
        }
        if output.stderr_dropped > 0 {
            log.push_str(&format!(
                "[… {} bytes of stderr dropped …]\n",
                output.stderr_dropped
            ));
        }
        log.push_str(&output.stderr_text());
    }
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_pattern_is_substituted_or_dropped() {
        let r = CommandTestRunner::argv(["cargo", "test", "{pattern}", "--", "--exact={pattern}"]);
        assert_eq!(
            r.argv_for(Some("a::b")).unwrap(),
            ["cargo", "test", "a::b", "--", "--exact=a::b"]
        );
        assert_eq!(
            r.argv_for(None).unwrap(),
            ["cargo", "test", "--", "--exact="]
        );
    }

    #[test]
    fn shell_pattern_is_quoted() {
        let r = CommandTestRunner::shell("pytest -k {pattern}");
        assert_eq!(
            r.argv_for(Some("x'; rm -rf /; '")).unwrap()[2],
            r#"pytest -k 'x'\''; rm -rf /; '\'''"#
        );
        assert_eq!(r.argv_for(None).unwrap()[2], "pytest -k ''");
    }

    #[test]
    fn empty_commands_are_config_errors() {
        assert!(matches!(
            CommandTestRunner::argv(Vec::<String>::new()).argv_for(None),
            Err(TestRunnerError::Config(_))
        ));
        assert!(matches!(
            CommandTestRunner::argv(["{pattern}"]).argv_for(None),
            Err(TestRunnerError::Config(_))
        ));
        assert!(matches!(
            CommandTestRunner::shell("  ").argv_for(None),
            Err(TestRunnerError::Config(_))
        ));
    }
}
