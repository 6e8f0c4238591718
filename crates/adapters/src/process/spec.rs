//! What to run: [`ProcessSpec`] with its defaults, and the quoting of a
//! command line for messages.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Default grace period between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// Default per-stream output bound: the last 4 MiB of each stream are kept.
pub const DEFAULT_OUTPUT_LIMIT: usize = 4 * 1024 * 1024;

/// What to run and how. Built with [`ProcessSpec::new`] and the builder
/// methods; every field is public for callers that prefer struct syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    /// The program: a path, or a name looked up on `PATH` (the child's `PATH`
    /// when [`ProcessSpec::env`] sets one).
    pub program: OsString,
    /// The arguments, passed as they are (no shell).
    pub args: Vec<OsString>,
    /// Working directory; the caller's when `None`.
    pub cwd: Option<PathBuf>,
    /// Environment variables to set on top of the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// Environment variables to remove from the inherited environment.
    pub env_remove: Vec<OsString>,
    /// Bytes written to the child's stdin, which is then closed. `None` gives
    /// the child an empty stdin (`/dev/null`).
    pub stdin: Option<Vec<u8>>,
    /// Time limit for the whole run; none when `None`.
    pub time_limit: Option<Duration>,
    /// Time between SIGTERM and SIGKILL on timeout; also how long output is
    /// still drained after the leader exits.
    pub grace: Duration,
    /// Bytes kept per stream (the tail).
    pub output_limit: usize,
}

impl ProcessSpec {
    /// A spec for `program` with no arguments, the default grace period and
    /// output bound, and no time limit.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            env_remove: Vec::new(),
            stdin: None,
            time_limit: None,
            grace: DEFAULT_GRACE,
            output_limit: DEFAULT_OUTPUT_LIMIT,
        }
    }

    /// Builder: append one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Builder: append arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Builder: set the working directory.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Builder: set an environment variable for the child.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Builder: remove an inherited environment variable.
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env_remove.push(key.into());
        self
    }

    /// Builder: bytes for the child's stdin.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Builder: set or clear the time limit.
    pub fn time_limit(mut self, limit: Option<Duration>) -> Self {
        self.time_limit = limit;
        self
    }

    /// Builder: set the grace period between SIGTERM and SIGKILL.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Builder: set the per-stream output bound in bytes.
    pub fn output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes;
        self
    }

    /// The command line for messages: program and arguments joined by spaces,
    /// each quoted shell-style when it holds anything but plain characters.
    pub fn display(&self) -> String {
        display_command(&self.program, &self.args)
    }
}

/// Formats a command line for display (never for execution).
pub fn display_command(program: &OsString, args: &[OsString]) -> String {
    std::iter::once(program)
        .chain(args)
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `arg` quoted for a POSIX shell: as it is when it holds only characters
/// no shell treats specially, else in single quotes (a `'` inside becomes
/// `'\''`). For messages a user may copy into a terminal.
pub fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_only_when_needed() {
        let spec = ProcessSpec::new("sh").args(["-c", "echo 'hi' there", ""]);
        assert_eq!(spec.display(), r#"sh -c 'echo '\''hi'\'' there' ''"#);
    }
}
