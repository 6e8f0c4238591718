//! What a run leaves: how the child ended ([`ExitKind`]), its output
//! ([`ProcessOutput`]), and why a run failed ([`ProcessError`]).

use std::fmt;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;

/// How a child process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// It exited with this status code.
    Code(i32),
    /// It was killed by this signal number.
    Signal(i32),
}

impl fmt::Display for ExitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitKind::Code(c) => write!(f, "exit status {c}"),
            ExitKind::Signal(s) => match Signal::try_from(*s) {
                Ok(sig) => write!(f, "signal {s} ({})", sig.as_str()),
                Err(_) => write!(f, "signal {s}"),
            },
        }
    }
}

impl From<ExitStatus> for ExitKind {
    fn from(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => ExitKind::Code(code),
            (None, Some(sig)) => ExitKind::Signal(sig),
            // Neither code nor signal happens only for stopped/continued
            // statuses, which `wait` does not report; treat as a failure.
            (None, None) => ExitKind::Code(-1),
        }
    }
}

/// What a finished child left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOutput {
    /// The command line, for messages.
    pub command: String,
    /// How the child ended.
    pub exit: ExitKind,
    /// The tail of stdout (at most the spec's output bound).
    pub stdout: Vec<u8>,
    /// The tail of stderr (at most the spec's output bound).
    pub stderr: Vec<u8>,
    /// Bytes of stdout that were dropped from the front to respect the bound.
    pub stdout_dropped: u64,
    /// Bytes of stderr that were dropped from the front to respect the bound.
    pub stderr_dropped: u64,
    /// Whether the time limit was exceeded (the group was then signalled).
    pub timed_out: bool,
    /// Wall time from spawn to reap.
    pub duration: Duration,
}

impl ProcessOutput {
    /// The exit status code, when the child exited rather than being killed.
    pub fn code(&self) -> Option<i32> {
        match self.exit {
            ExitKind::Code(c) => Some(c),
            ExitKind::Signal(_) => None,
        }
    }

    /// The signal that killed the child, if one did.
    pub fn signal(&self) -> Option<i32> {
        match self.exit {
            ExitKind::Signal(s) => Some(s),
            ExitKind::Code(_) => None,
        }
    }

    /// Whether the child exited with status 0 within its time limit.
    pub fn success(&self) -> bool {
        !self.timed_out && self.exit == ExitKind::Code(0)
    }

    /// stdout as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// Turns a timeout or a non-zero exit into an error that carries the
    /// command, the status and the end of stderr.
    pub fn check(self) -> Result<ProcessOutput, ProcessError> {
        if self.timed_out {
            return Err(ProcessError::TimedOut {
                command: self.command.clone(),
                seconds: self.duration.as_secs_f64(),
                stderr: stderr_tail(&self.stderr),
            });
        }
        if self.exit != ExitKind::Code(0) {
            return Err(ProcessError::Failed {
                command: self.command.clone(),
                status: self.exit,
                stderr: stderr_tail(&self.stderr),
            });
        }
        Ok(self)
    }
}

/// The last 2000 bytes of stderr as trimmed text, for error messages.
fn stderr_tail(stderr: &[u8]) -> String {
    const MAX: usize = 2000;
    let start = stderr.len().saturating_sub(MAX);
    String::from_utf8_lossy(&stderr[start..]).trim().to_owned()
}

/// Why a child process could not be run, or (through
/// [`ProcessOutput::check`]) why it failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// The program could not be started (not found, not executable, bad
    /// working directory).
    #[error("failed to start `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Waiting for the child or reading its output failed.
    #[error("failed while running `{command}`: {source}")]
    Io {
        /// The command line.
        command: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The child exited unsuccessfully.
    #[error("`{command}` failed with {status}{}", with_colon(stderr))]
    Failed {
        /// The command line.
        command: String,
        /// How it ended.
        status: ExitKind,
        /// The end of its stderr.
        stderr: String,
    },
    /// The child exceeded its time limit and was killed.
    #[error("`{command}` timed out after {seconds:.1}s{}", with_colon(stderr))]
    TimedOut {
        /// The command line.
        command: String,
        /// Seconds from spawn until the child was reaped.
        seconds: f64,
        /// The end of its stderr.
        stderr: String,
    },
}

/// `": text"`, or nothing when `text` is empty.
fn with_colon(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

impl ProcessError {
    /// Whether the error means the program does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ProcessError::Spawn { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_kind_display_names_the_signal() {
        assert_eq!(ExitKind::Signal(9).to_string(), "signal 9 (SIGKILL)");
        assert_eq!(ExitKind::Code(3).to_string(), "exit status 3");
    }
}
