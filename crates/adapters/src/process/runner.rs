//! [`ProcessRunner`]: [`run`] as the core's [`CommandRunner`].

use std::time::Duration;

use orchestrator_core::command::{CommandError, CommandOutput, CommandRunner, CommandSpec};

use super::exec::run;
use super::output::ProcessError;
use super::spec::{DEFAULT_GRACE, ProcessSpec};

/// The [`CommandRunner`] over [`run`]: what flows use to drive tools
/// (`gh`, configured checks) without spawning processes themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRunner {
    /// Grace period between SIGTERM and SIGKILL on timeout.
    pub grace: Duration,
}

impl Default for ProcessRunner {
    fn default() -> Self {
        Self {
            grace: DEFAULT_GRACE,
        }
    }
}

impl ProcessRunner {
    /// The spec [`run`] executes for a core [`CommandSpec`].
    pub fn process_spec(&self, spec: &CommandSpec) -> ProcessSpec {
        let mut out = ProcessSpec::new(&spec.program)
            .args(&spec.args)
            .cwd(&spec.cwd)
            .time_limit(spec.time_limit)
            .grace(self.grace)
            .output_limit(spec.output_limit);
        for (k, v) in &spec.env {
            out = out.env(k, v);
        }
        if let Some(input) = &spec.stdin {
            out = out.stdin(input.clone());
        }
        out
    }
}

#[async_trait::async_trait]
impl CommandRunner for ProcessRunner {
    async fn run(&self, spec: CommandSpec) -> Result<CommandOutput, CommandError> {
        let output = run(&self.process_spec(&spec))
            .await
            .map_err(|err| match err {
                ProcessError::Spawn { command, source } => CommandError::Spawn {
                    command,
                    message: source.to_string(),
                },
                other => CommandError::Io {
                    command: spec.display(),
                    message: other.to_string(),
                },
            })?;
        Ok(CommandOutput {
            exit_code: output.code(),
            stdout: output.stdout_text(),
            stderr: output.stderr_text(),
            timed_out: output.timed_out,
            truncated: output.stdout_dropped > 0 || output.stderr_dropped > 0,
            duration_ms: u64::try_from(output.duration.as_millis()).unwrap_or(u64::MAX),
        })
    }
}
