//! [`RawOutput`]: what an agent CLI's child process left (exit status,
//! stdout, stderr), as the dialect parsers ([`super::claude`],
//! [`super::codex`], [`super::gemini`]) read it, and the failure messages
//! built from it. Below both the parsers and [`super::ProcessAgent`], which
//! runs the child and hands its output down to them.

use orchestrator_core::agent::{AgentError, snippet};

use crate::process::ProcessOutput;

/// What the child left, as the dialect parsers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawOutput {
    /// Exit status code, `None` when killed by a signal.
    pub code: Option<i32>,
    /// stdout as text.
    pub stdout: String,
    /// stderr as text.
    pub stderr: String,
}

impl RawOutput {
    /// The output of a finished child process.
    pub(crate) fn from_process(out: &ProcessOutput) -> Self {
        Self {
            code: out.code(),
            stdout: out.stdout_text(),
            stderr: out.stderr_text(),
        }
    }

    /// A message for a failed run: the end of stderr, else the start of
    /// stdout, else the exit status.
    pub fn failure_message(&self, tool: &str) -> String {
        const MAX: usize = 1000;
        let stderr = self.stderr.trim();
        let detail = if !stderr.is_empty() {
            let start = stderr.char_indices().rev().nth(MAX).map_or(0, |(i, _)| i);
            stderr[start..].to_owned()
        } else if !self.stdout.trim().is_empty() {
            snippet(self.stdout.trim())
        } else {
            "no output".to_owned()
        };
        match self.code {
            Some(code) => format!("`{tool}` exited with status {code}: {detail}"),
            None => format!("`{tool}` was killed by a signal: {detail}"),
        }
    }

    /// An [`AgentError::Failed`] from [`Self::failure_message`].
    pub fn failed(&self, tool: &str) -> AgentError {
        AgentError::Failed {
            message: self.failure_message(tool),
            exit_code: self.code,
        }
    }
}

/// The non-retried error for an agent CLI whose endpoint refused its
/// credentials: names the agent, says "authentication", what the CLI
/// reported, and what to set (`hint`).
pub fn authentication_error(agent: &str, detail: &str, hint: &str) -> AgentError {
    AgentError::Unavailable {
        message: format!("{agent} authentication failed: {}; {hint}", detail.trim()),
    }
}
