//! Running child processes safely: own process group, bounded output, time
//! limit with SIGTERM → grace → SIGKILL to the whole group, and no leftovers.
//!
//! Every adapter that spawns a program (test commands, agent CLIs) goes
//! through [`run`]. The child is started in a new process group whose id is
//! its pid, so that signals reach everything it started (a `cargo test` and
//! its test binaries, an agent CLI and the shell commands it runs).
//!
//! Guarantees:
//! - stdout and stderr are read concurrently, each into a buffer that keeps
//!   only the last [`ProcessSpec::output_limit`] bytes and counts the bytes it
//!   dropped, so a child that prints without end cannot exhaust memory;
//! - on timeout the group receives SIGTERM, then SIGKILL after the grace
//!   period; the child is always reaped;
//! - when the leader exits, whatever it left running in its group is killed,
//!   so background processes cannot hold the pipes open or outlive the call;
//! - when the future returned by [`run`] is dropped before it completes, a
//!   guard sends SIGKILL to the whole group (tokio's `kill_on_drop` alone
//!   would reach only the leader);
//! - on Linux, a descendant that left the group (`setsid`, a daemonising
//!   `nohup … &` in a new session) is found and killed too: every child gets
//!   a unique tag in [`TREE_ENV`], which its descendants inherit, and each
//!   group kill also kills every process whose environment carries the tag
//!   (the "process tree killer" cookie; only a descendant that clears its
//!   environment escapes it). On a time-out they get the group's SIGTERM
//!   too; when the leader exits they are killed at once, like the group. A
//!   daemon meant to outlive the call (a build server a test starts: sccache,
//!   a Gradle or Bazel daemon, watchman) must be started with [`TREE_ENV`]
//!   unset, or it is restarted by every call.
//!
//! [`ProcessRunner`] exposes [`run`] as the core's `CommandRunner` trait.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use orchestrator_core::command::{CommandError, CommandOutput, CommandRunner, CommandSpec};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// The environment variable that tags a child's process tree: a
/// `:`-separated list of tags, one per nested [`run`] (a tag is appended, so
/// a process started by a child that itself uses [`run`] carries both).
pub const TREE_ENV: &str = "ORCHESTRATOR_PROCESS_TREE";

/// Counter making each [`run`]'s tag unique within this process.
static TREE_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A new tag: this process's pid, a sequence number and the time, so that
/// it is unique across processes and restarts.
fn new_tree_tag() -> String {
    let seq = TREE_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("orch{}x{seq}x{nanos}", std::process::id())
}

/// Whether an environment block (`KEY=VALUE\0…`, as in `/proc/PID/environ`)
/// holds `tag` in its [`TREE_ENV`] entry.
fn environ_has_tag(environ: &[u8], tag: &str) -> bool {
    let prefix = format!("{TREE_ENV}=");
    environ
        .split(|b| *b == 0)
        .filter_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .any(|value| value.split(|b| *b == b':').any(|t| t == tag.as_bytes()))
}

/// Sends `signal` to every process (but this one) whose environment carries
/// `tag`; returns how many were signalled. Linux only (reads `/proc`);
/// elsewhere nothing is found.
fn kill_tagged(tag: &str, signal: Signal) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let me = std::process::id();
    let mut killed = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Unreadable (another user's, or gone): not ours.
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ_has_tag(&environ, tag) {
            continue;
        }
        let Ok(raw) = i32::try_from(pid) else {
            continue;
        };
        if nix::sys::signal::kill(Pid::from_raw(raw), signal).is_ok() {
            killed += 1;
        }
    }
    killed
}

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

/// A byte buffer that keeps only the last `limit` bytes pushed into it.
///
/// Memory stays below `2 × limit` plus one chunk: the front is cut whenever
/// the buffer doubles past the limit, so the amortised cost per byte is O(1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TailBuffer {
    limit: usize,
    buf: Vec<u8>,
    dropped: u64,
}

impl TailBuffer {
    /// An empty buffer keeping at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            buf: Vec::new(),
            dropped: 0,
        }
    }

    /// Appends bytes, dropping from the front when over the bound.
    pub fn push(&mut self, bytes: &[u8]) {
        if bytes.len() >= self.limit {
            self.dropped += (self.buf.len() + bytes.len() - self.limit) as u64;
            self.buf.clear();
            self.buf
                .extend_from_slice(&bytes[bytes.len() - self.limit..]);
            return;
        }
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > self.limit.saturating_mul(2).max(8192) {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.buf.len() > self.limit {
            let cut = self.buf.len() - self.limit;
            self.buf.drain(..cut);
            self.dropped += cut as u64;
        }
    }

    /// Bytes currently held (may exceed the bound until [`Self::finish`]).
    pub fn held(&self) -> usize {
        self.buf.len()
    }

    /// The kept tail and the number of bytes dropped from the front.
    pub fn finish(mut self) -> (Vec<u8>, u64) {
        self.trim();
        (self.buf, self.dropped)
    }
}

/// Kills the child's process group (and the processes carrying its tree
/// tag) when dropped, unless disarmed.
struct GroupGuard {
    pgid: Option<Pid>,
    tag: String,
}

impl GroupGuard {
    fn signal(&self, signal: Signal) {
        if signal == Signal::SIGTERM && self.pgid.is_some() {
            // Those that left the group get the same warning as the group.
            kill_tagged(&self.tag, Signal::SIGTERM);
        }
        if signal == Signal::SIGKILL && self.pgid.is_some() {
            // Those that left the group: a few sweeps, since one being
            // killed may have been forking.
            for _ in 0..3 {
                let n = kill_tagged(&self.tag, Signal::SIGKILL);
                if n == 0 {
                    break;
                }
                tracing::debug!(killed = n, "killed processes that had left the group");
            }
        }
        if let Some(pgid) = self.pgid {
            // ESRCH (group already gone) is the expected case once everything
            // exited; nothing else can usefully be done with an error here.
            if let Err(err) = killpg(pgid, signal)
                && err != nix::errno::Errno::ESRCH
            {
                tracing::debug!(%pgid, ?signal, %err, "killpg failed");
            }
        }
    }

    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
    }
}

/// One output stream being read into a bounded buffer, and optionally
/// handed on line by line as it arrives.
struct Stream<R> {
    reader: Option<R>,
    tail: TailBuffer,
    chunk: Vec<u8>,
    tap: Option<LineTap>,
}

/// Sends each complete line of a stream (without its new line, lossily
/// decoded) as soon as it is read; a line longer than [`MAX_TAPPED_LINE`]
/// is sent cut at that length.
struct LineTap {
    sender: tokio::sync::mpsc::UnboundedSender<String>,
    partial: Vec<u8>,
}

/// The longest line [`run_streaming`] hands on whole.
pub const MAX_TAPPED_LINE: usize = 1024 * 1024;

impl LineTap {
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.flush();
            } else if self.partial.len() < MAX_TAPPED_LINE {
                self.partial.push(b);
            }
        }
    }

    fn flush(&mut self) {
        let line = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        // The receiver may have stopped listening; the run goes on.
        let _ = self.sender.send(line);
    }

    fn finish(&mut self) {
        if !self.partial.is_empty() {
            self.flush();
        }
    }
}

impl<R: AsyncRead + Unpin> Stream<R> {
    fn new(reader: Option<R>, limit: usize) -> Self {
        Self {
            reader,
            tail: TailBuffer::new(limit),
            chunk: vec![0; 64 * 1024],
            tap: None,
        }
    }

    fn open(&self) -> bool {
        self.reader.is_some()
    }

    /// Reads one chunk; pending forever once closed (guarded in `select!`).
    async fn read_chunk(&mut self) -> io::Result<usize> {
        match self.reader.as_mut() {
            Some(r) => r.read(&mut self.chunk).await,
            None => std::future::pending().await,
        }
    }

    fn consume(&mut self, read: io::Result<usize>) {
        match read {
            Ok(0) => {
                self.reader = None;
                if let Some(tap) = &mut self.tap {
                    tap.finish();
                }
            }
            Ok(n) => {
                self.tail.push(&self.chunk[..n]);
                if let Some(tap) = &mut self.tap {
                    tap.push(&self.chunk[..n]);
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => {
                tracing::debug!(%err, "reading child output failed; closing the stream");
                self.reader = None;
            }
        }
    }
}

/// Runs a child process as described by `spec` and returns what it left.
///
/// A non-zero exit or a timeout is an `Ok` output (see
/// [`ProcessOutput::check`] to turn them into errors); `Err` means the child
/// could not be started or waited for.
pub async fn run(spec: &ProcessSpec) -> Result<ProcessOutput, ProcessError> {
    run_tapped(spec, None).await
}

/// Like [`run`], and each line the child writes to stdout is also sent to
/// `lines` as soon as it is complete (the last one at the end of the
/// stream even without a new line): for children that report progress as
/// they go, such as `orchestrator … --json`. The returned output still
/// holds the bounded tail of stdout.
pub async fn run_streaming(
    spec: &ProcessSpec,
    lines: tokio::sync::mpsc::UnboundedSender<String>,
) -> Result<ProcessOutput, ProcessError> {
    run_tapped(spec, Some(lines)).await
}

async fn run_tapped(
    spec: &ProcessSpec,
    lines: Option<tokio::sync::mpsc::UnboundedSender<String>>,
) -> Result<ProcessOutput, ProcessError> {
    let command = spec.display();
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    for key in &spec.env_remove {
        cmd.env_remove(key);
    }
    for (key, value) in &spec.env {
        cmd.env(key, value);
    }
    let tag = new_tree_tag();
    let inherited = spec
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == TREE_ENV)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os(TREE_ENV))
        .filter(|v| !v.is_empty());
    let mut tree = inherited.unwrap_or_default();
    if !tree.is_empty() {
        tree.push(":");
    }
    tree.push(&tag);
    cmd.env(TREE_ENV, tree);

    let started = Instant::now();
    // "Text file busy": the executable was just written and another thread's
    // fork still holds it open for writing until that child execs. It clears
    // within milliseconds; cargo and Go retry the same way.
    let mut busy_retries = 0u32;
    let mut child = loop {
        match cmd.spawn() {
            Ok(child) => break child,
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && busy_retries < 6 => {
                busy_retries += 1;
                tokio::time::sleep(Duration::from_millis(5 << busy_retries)).await;
            }
            Err(source) => {
                return Err(ProcessError::Spawn {
                    command: command.clone(),
                    source,
                });
            }
        }
    };
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let mut guard = GroupGuard { pgid, tag };

    let mut stdout = Stream::new(child.stdout.take(), spec.output_limit);
    stdout.tap = lines.map(|sender| LineTap {
        sender,
        partial: Vec::new(),
    });
    let mut stderr = Stream::new(child.stderr.take(), spec.output_limit);
    let stdin_pipe = child.stdin.take();
    let stdin_bytes = spec.stdin.clone().unwrap_or_default();
    let stdin_task = async move {
        if let Some(mut pipe) = stdin_pipe {
            // A child that exits without reading its input makes this fail
            // with EPIPE; that is its business, not an error of the run.
            if let Err(err) = pipe.write_all(&stdin_bytes).await {
                tracing::debug!(%err, "writing the child's stdin failed");
            }
            drop(pipe);
        }
    };
    tokio::pin!(stdin_task);
    let mut stdin_done = spec.stdin.is_none();

    let deadline = spec
        .time_limit
        .map(|limit| tokio::time::Instant::from_std(started) + limit);
    let mut timed_out = false;
    let mut kill_at: Option<tokio::time::Instant> = None;
    let mut exit: Option<ExitKind> = None;
    let mut drain_until: Option<tokio::time::Instant> = None;

    loop {
        if exit.is_some() && !stdout.open() && !stderr.open() {
            break;
        }
        tokio::select! {
            read = stdout.read_chunk(), if stdout.open() => stdout.consume(read),
            read = stderr.read_chunk(), if stderr.open() => stderr.consume(read),
            () = &mut stdin_task, if !stdin_done => stdin_done = true,
            status = child.wait(), if exit.is_none() => {
                let status = status.map_err(|source| ProcessError::Io {
                    command: command.clone(),
                    source,
                })?;
                exit = Some(status.into());
                // The leader is gone: whatever it left in its group goes too,
                // so that nothing outlives the call or holds the pipes open.
                guard.signal(Signal::SIGKILL);
                drain_until = Some(tokio::time::Instant::now() + spec.grace);
            }
            () = sleep_until_opt(deadline), if !timed_out && exit.is_none() => {
                timed_out = true;
                tracing::debug!(command = %command, "time limit exceeded; sending SIGTERM to the process group");
                guard.signal(Signal::SIGTERM);
                kill_at = Some(tokio::time::Instant::now() + spec.grace);
            }
            () = sleep_until_opt(kill_at), if exit.is_none() => {
                tracing::debug!(command = %command, "grace period over; sending SIGKILL to the process group");
                guard.signal(Signal::SIGKILL);
                kill_at = None;
            }
            () = sleep_until_opt(drain_until) => {
                // Something that escaped the group still holds a pipe open;
                // stop waiting for it and keep what was read.
                tracing::debug!(command = %command, "output still open after the child exited; giving up on it");
                break;
            }
        }
    }
    guard.disarm();

    let (stdout, stdout_dropped) = stdout.tail.finish();
    let (stderr, stderr_dropped) = stderr.tail.finish();
    Ok(ProcessOutput {
        command,
        exit: exit.unwrap_or(ExitKind::Code(-1)),
        stdout,
        stderr,
        stdout_dropped,
        stderr_dropped,
        timed_out,
        duration: started.elapsed(),
    })
}

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

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[tokio::test]
    async fn stdout_lines_are_handed_on_while_the_child_still_runs() {
        let dir = tempfile::tempdir().unwrap();
        let spec = ProcessSpec::new("sh")
            .args([
                "-c",
                "echo one; echo err >&2; while [ ! -f go ]; do sleep 0.02; done; printf 'two'",
            ])
            .cwd(dir.path())
            .time_limit(Some(Duration::from_secs(30)));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let run = tokio::spawn(async move { run_streaming(&spec, tx).await });
        assert_eq!(rx.recv().await.as_deref(), Some("one"));
        // The child waits for `go`: the line came while it ran.
        assert!(!run.is_finished());
        std::fs::write(dir.path().join("go"), "").unwrap();
        let output = run.await.unwrap().unwrap();
        assert!(output.success(), "{output:?}");
        // The last line has no new line: sent at the end of the stream.
        assert_eq!(rx.recv().await.as_deref(), Some("two"));
        assert_eq!(rx.recv().await, None);
        assert_eq!(output.stdout_text(), "one\ntwo");
        assert_eq!(output.stderr_text(), "err\n");
    }

    #[test]
    fn tail_buffer_keeps_the_end() {
        let mut t = TailBuffer::new(4);
        t.push(b"abc");
        t.push(b"def");
        t.push(b"g");
        assert_eq!(t.finish(), (b"defg".to_vec(), 3));
    }

    #[test]
    fn tail_buffer_with_zero_limit_keeps_nothing() {
        let mut t = TailBuffer::new(0);
        t.push(b"abc");
        assert_eq!(t.finish(), (Vec::new(), 3));
    }

    #[test]
    fn tree_tags_match_whole_entries_only() {
        let env = b"A=1\0ORCHESTRATOR_PROCESS_TREE=orch1x2x3:orch9x8x7\0B=orch5x5x5\0";
        assert!(environ_has_tag(env, "orch1x2x3"));
        assert!(environ_has_tag(env, "orch9x8x7"));
        assert!(!environ_has_tag(env, "orch1x2"), "a prefix is not the tag");
        assert!(
            !environ_has_tag(env, "orch5x5x5"),
            "only the tree variable counts"
        );
        assert!(!environ_has_tag(b"", "orch1x2x3"));
        assert_ne!(new_tree_tag(), new_tree_tag());
    }

    #[test]
    fn display_quotes_only_when_needed() {
        let spec = ProcessSpec::new("sh").args(["-c", "echo 'hi' there", ""]);
        assert_eq!(spec.display(), r#"sh -c 'echo '\''hi'\'' there' ''"#);
    }

    #[test]
    fn exit_kind_display_names_the_signal() {
        assert_eq!(ExitKind::Signal(9).to_string(), "signal 9 (SIGKILL)");
        assert_eq!(ExitKind::Code(3).to_string(), "exit status 3");
    }

    proptest! {
        #[test]
        fn tail_buffer_equals_suffix_of_concatenation(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..50), 0..40),
            limit in 0usize..120,
        ) {
            let mut t = TailBuffer::new(limit);
            let mut all = Vec::new();
            for c in &chunks {
                t.push(c);
                all.extend_from_slice(c);
                prop_assert!(t.held() <= limit.saturating_mul(2).max(8192) + 50);
            }
            let (kept, dropped) = t.finish();
            let start = all.len().saturating_sub(limit);
            prop_assert_eq!(&kept[..], &all[start..]);
            prop_assert_eq!(dropped, start as u64);
        }
    }
}
