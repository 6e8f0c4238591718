//! `[tests]` (the project's test command) and the knobs of each flow:
//! `[review_fix]`, `[planex]`, `[ci_autofix]`.

use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::command::{CommandLine, CommandValue};
use super::{ConfigError, is_false};

/// `[tests]`: how to run the project's tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TestsSection {
    /// The test command: an argv array, or a string (split into words, or run
    /// by `sh -c` when `shell = true`).
    pub command: CommandValue,
    /// Run `command` (a string) through `sh -c`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub shell: bool,
    /// Time limit of one test run in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// JUnit XML report the command writes, relative to the repository, for
    /// counts and failing test names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub junit_report: Option<PathBuf>,
}

impl TestsSection {
    /// A section running `argv` directly.
    pub fn argv(argv: Vec<String>) -> Self {
        Self {
            command: CommandValue::Argv(argv),
            shell: false,
            timeout_secs: None,
            junit_report: None,
        }
    }

    /// The command to run.
    pub fn command_line(&self) -> Result<CommandLine, ConfigError> {
        self.command.resolve(self.shell, "[tests] command")
    }

    /// [`TestsSection::timeout_secs`] as a duration.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout_secs.map(Duration::from_secs)
    }
}

/// `[review_fix]`: knobs of the review-fix flow (unset: the flow's default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ReviewFixSection {
    /// Findings per planning batch (seed default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<NonZeroUsize>,
    /// Planning agents at once (seed default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<NonZeroUsize>,
    /// Fix attempts per finding (seed default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<NonZeroU32>,
    /// The findings command re-run after each pass (an argv array, or a
    /// string split into words; write `sh -c '…'` for a pipeline): its
    /// output feeds the next pass (see `--relint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relint: Option<CommandValue>,
    /// Passes in all when `relint` is set (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relint_passes: Option<NonZeroU32>,
}

impl ReviewFixSection {
    /// The re-lint command, when one is set.
    pub fn relint_command(&self) -> Option<Result<CommandLine, ConfigError>> {
        self.relint
            .as_ref()
            .map(|v| v.resolve(false, "[review_fix] relint"))
    }
}

/// `[planex]`: knobs of the lite-planex flow (unset: the flow's default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PlanexSection {
    /// Agents at once (seed default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<NonZeroUsize>,
    /// Scheduling mode (default `waves`, the seed's behaviour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
}

/// How a DAG of tasks is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// Wave by wave, with a barrier after each.
    Waves,
    /// A task starts as soon as its dependencies are done (critical path
    /// first).
    Eager,
}

/// `[ci_autofix]`: knobs of the CI auto-fix flow (unset: the flow's default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CiAutofixSection {
    /// Fix iterations per pull request before escalating (seed default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<NonZeroU32>,
}
