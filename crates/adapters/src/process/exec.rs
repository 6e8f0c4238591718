//! The run itself: spawning the child in its own process group with its
//! tree tag, feeding stdin, reading both streams, enforcing the time limit
//! (SIGTERM, grace, SIGKILL) and reaping the child.

use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::capture::{LineTap, Stream};
use super::output::{ExitKind, ProcessError, ProcessOutput};
use super::spec::ProcessSpec;
use super::tree::{GroupGuard, TREE_ENV, new_tree_tag};

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

/// [`run`] and [`run_streaming`]: starts the child in its own group,
/// supervises it to its end and collects what it wrote.
async fn run_tapped(
    spec: &ProcessSpec,
    lines: Option<tokio::sync::mpsc::UnboundedSender<String>>,
) -> Result<ProcessOutput, ProcessError> {
    let command = spec.display();
    let tag = new_tree_tag();
    let mut cmd = command_for(spec, &tag);
    let started = Instant::now();
    let mut child = spawn_retrying(&mut cmd, &command).await?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let mut stdout = Stream::new(child.stdout.take(), spec.output_limit);
    stdout.tap = lines.map(|sender| LineTap {
        sender,
        partial: Vec::new(),
    });
    let stdin = feed_stdin(child.stdin.take(), spec.stdin.clone().unwrap_or_default());
    let mut running = Running {
        stderr: Stream::new(child.stderr.take(), spec.output_limit),
        stdout,
        child,
        guard: GroupGuard { pgid, tag },
    };
    let (exit, timed_out) = running.supervise(stdin, spec, &command, started).await?;
    running.guard.disarm();

    let (stdout, stdout_dropped) = running.stdout.tail.finish();
    let (stderr, stderr_dropped) = running.stderr.tail.finish();
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

/// Writes the child's input and closes its stdin (no pipe: nothing to do).
async fn feed_stdin(pipe: Option<ChildStdin>, bytes: Vec<u8>) {
    if let Some(mut pipe) = pipe {
        // A child that exits without reading its input makes this fail
        // with EPIPE; that is its business, not an error of the run.
        if let Err(err) = pipe.write_all(&bytes).await {
            tracing::debug!(%err, "writing the child's stdin failed");
        }
        drop(pipe);
    }
}

/// A started child: the process, its group, and its two output streams.
struct Running {
    child: Child,
    guard: GroupGuard,
    stdout: Stream<ChildStdout>,
    stderr: Stream<ChildStderr>,
}

impl Running {
    /// Runs the child to its end: reads both streams, feeds its input,
    /// waits for it and enforces the time limit (SIGTERM to the group, then
    /// SIGKILL after the grace). Once the leader exits, what it left in its
    /// group is killed and the pipes are drained for at most the grace.
    /// Returns how it exited (`None`: given up on) and whether it timed out.
    async fn supervise(
        &mut self,
        stdin: impl std::future::Future<Output = ()>,
        spec: &ProcessSpec,
        command: &str,
        started: Instant,
    ) -> Result<(Option<ExitKind>, bool), ProcessError> {
        let Running {
            child,
            guard,
            stdout,
            stderr,
        } = self;
        tokio::pin!(stdin);
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
                () = &mut stdin, if !stdin_done => stdin_done = true,
                status = child.wait(), if exit.is_none() => {
                    let status = status.map_err(|source| ProcessError::Io {
                        command: command.to_owned(),
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
        Ok((exit, timed_out))
    }
}

/// The command for `spec`: its program, arguments and environment, in a
/// process group of its own, with the tree tag `tag` appended to the one it
/// inherits (so every process it starts can be found).
fn command_for(spec: &ProcessSpec, tag: &str) -> Command {
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
    tree.push(tag);
    cmd.env(TREE_ENV, tree);
    cmd
}

/// Starts `cmd`, retrying a few times while its executable is busy.
async fn spawn_retrying(cmd: &mut Command, command: &str) -> Result<Child, ProcessError> {
    // "Text file busy": the executable was just written and another thread's
    // fork still holds it open for writing until that child execs. It clears
    // within milliseconds; cargo and Go retry the same way.
    let mut busy_retries = 0u32;
    loop {
        match cmd.spawn() {
            Ok(child) => return Ok(child),
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && busy_retries < 6 => {
                busy_retries += 1;
                tokio::time::sleep(Duration::from_millis(5 << busy_retries)).await;
            }
            Err(source) => {
                return Err(ProcessError::Spawn {
                    command: command.to_owned(),
                    source,
                });
            }
        }
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
}
