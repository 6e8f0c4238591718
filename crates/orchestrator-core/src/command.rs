//! The [`CommandRunner`] trait: run one external command and capture it.
//!
//! Flows that must drive a tool (`gh` for ci-autofix, configured check
//! commands, a task's shell directive) describe the command as data
//! ([`CommandSpec`]) and hand it to a runner. The real runner in
//! `orchestrator-adapters` runs the child in its own process group with a
//! time limit and bounded capture; `fakes::ScriptedCommands` (feature `test-support`) answers
//! from a script. Arguments are always an argv — a shell is used only when
//! the spec's program is a shell, chosen explicitly by the caller.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Default bound on captured output per stream: 1 MiB (the tail is kept).
pub const DEFAULT_OUTPUT_LIMIT: usize = 1 << 20;

/// A command to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandSpec {
    /// The program (looked up on `PATH` when it has no `/`).
    pub program: String,
    /// Its arguments, passed as-is (no shell interpretation).
    pub args: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Bytes written to standard input, which is then closed. `None` gives
    /// the child an empty standard input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<Vec<u8>>,
    /// Time limit; on expiry the whole process group is terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<Duration>,
    /// Bytes kept per stream (the tail).
    pub output_limit: usize,
}

impl CommandSpec {
    /// `program args…` in `cwd`, no stdin, no time limit, default output bound.
    pub fn new<I, S>(program: impl Into<String>, args: I, cwd: impl Into<PathBuf>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            cwd: cwd.into(),
            env: BTreeMap::new(),
            stdin: None,
            time_limit: None,
            output_limit: DEFAULT_OUTPUT_LIMIT,
        }
    }

    /// `sh -c <script>` in `cwd`: for commands a person wrote as a shell line
    /// (a task's `execution_directives`, a configured check).
    pub fn shell(script: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        Self::new("sh", ["-c".to_string(), script.into()], cwd)
    }

    /// Builder: set the time limit.
    pub fn with_time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// Builder: add an environment variable.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Builder: feed `input` on standard input.
    pub fn with_stdin(mut self, input: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(input.into());
        self
    }

    /// The command line for messages (arguments joined with spaces; for
    /// display only, never executed).
    pub fn display(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What a finished command produced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandOutput {
    /// Exit code; `None` when the child was killed by a signal.
    pub exit_code: Option<i32>,
    /// Standard output (lossy UTF-8; the tail when truncated).
    pub stdout: String,
    /// Standard error (lossy UTF-8; the tail when truncated).
    pub stderr: String,
    /// Whether the time limit expired and the group was killed.
    pub timed_out: bool,
    /// Whether output beyond the bound was dropped.
    pub truncated: bool,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
}

impl CommandOutput {
    /// Exit code 0 and not timed out.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// Standard output followed by standard error, for logs.
    pub fn combined(&self) -> String {
        match (self.stdout.is_empty(), self.stderr.is_empty()) {
            (_, true) => self.stdout.clone(),
            (true, false) => self.stderr.clone(),
            (false, false) => format!("{}\n{}", self.stdout.trim_end_matches('\n'), self.stderr),
        }
    }
}

/// Why a command could not be run at all (a non-zero exit is not an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The program could not be started.
    #[error("failed to start `{command}`: {message}")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        message: String,
    },
    /// Starting or waiting failed in another way.
    #[error("failed to run `{command}`: {message}")]
    Io {
        /// The command line.
        command: String,
        /// What went wrong.
        message: String,
    },
}

/// Runs commands. Object-safe: flows hold `Arc<dyn CommandRunner>`.
///
/// Contract (checked by `conformance::command`): a non-zero exit is
/// `Ok(output)`; a missing program is `Err(Spawn)`; a run never outlives its
/// time limit by more than a short grace, and nothing it started survives it.
#[async_trait]
pub trait CommandRunner: Send + Sync + fmt::Debug {
    /// Runs the command to completion (or to its time limit).
    async fn run(&self, spec: CommandSpec) -> Result<CommandOutput, CommandError>;
}

#[async_trait]
impl<R: CommandRunner + ?Sized> CommandRunner for Arc<R> {
    async fn run(&self, spec: CommandSpec) -> Result<CommandOutput, CommandError> {
        (**self).run(spec).await
    }
}

#[async_trait]
impl<R: CommandRunner + ?Sized> CommandRunner for Box<R> {
    async fn run(&self, spec: CommandSpec) -> Result<CommandOutput, CommandError> {
        (**self).run(spec).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_spec_and_display() {
        let s = CommandSpec::shell("echo hi", "/tmp").with_env("A", "1");
        assert_eq!(s.program, "sh");
        assert_eq!(s.args, ["-c", "echo hi"]);
        assert_eq!(s.display(), "sh -c echo hi");
        assert_eq!(s.env.get("A").map(String::as_str), Some("1"));
    }

    #[test]
    fn combined_output() {
        let o = CommandOutput {
            exit_code: Some(1),
            stdout: "out\n".into(),
            stderr: "err\n".into(),
            ..Default::default()
        };
        assert_eq!(o.combined(), "out\nerr\n");
        assert!(!o.success());
    }
}
