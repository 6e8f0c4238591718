//! Running git: the one place a `git` process is started
//! (`GitVcs::run`), with its fixed configuration and environment, and the
//! helpers that shape its arguments and error text.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::process::{ExitStatus, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use orchestrator_core::VcsError;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::{GitVcs, guard};

/// Configuration given to every invocation with `-c`, so that user settings
/// cannot change the formats this adapter parses.
const FIXED_CONFIG: &[&str] = &[
    "core.quotepath=off",
    "core.pager=cat",
    "color.ui=false",
    "column.ui=never",
    "i18n.commitEncoding=UTF-8",
    "i18n.logOutputEncoding=UTF-8",
    "log.showSignature=false",
    "rerere.enabled=false",
    "status.submoduleSummary=false",
    "advice.detachedHead=false",
    "gc.auto=0",
    "maintenance.auto=false",
    // Full ids wherever git prints one, so that `commit`'s summary line
    // names the commit it made (`parse::committed_id`).
    "core.abbrev=40",
];

/// Environment set for every invocation.
const FIXED_ENV: &[(&str, &str)] = &[
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_PAGER", "cat"),
    ("PAGER", "cat"),
    ("GIT_EDITOR", ":"),
    ("GIT_SEQUENCE_EDITOR", ":"),
    ("GIT_MERGE_AUTOEDIT", "no"),
    ("GIT_LITERAL_PATHSPECS", "1"),
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("GIT_ADVICE", "0"),
];

/// `GIT_*` variables passed through from the caller's environment (identity,
/// transport and configuration-file locations); every other `GIT_*` variable
/// is removed.
const KEPT_GIT_ENV: &[&str] = &[
    "GIT_ASKPASS",
    "GIT_AUTHOR_DATE",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_NAME",
    "GIT_COMMITTER_DATE",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_SYSTEM",
    "GIT_EXEC_PATH",
    "GIT_HTTP_USER_AGENT",
    "GIT_PROXY_COMMAND",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSH_VARIANT",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
];

/// Runs of a git command refused on a held lock before its refusal stands
/// (waits of 25, 50, … ms: 1.4 s in all).
const LOCK_RETRIES: u32 = 10;

/// Whether git refused because another process holds one of its lock files
/// (`fatal: Unable to create '…/index.lock': File exists.`).
fn held_lock(stderr: &[u8]) -> bool {
    let text = String::from_utf8_lossy(stderr);
    text.contains(".lock': File exists") || text.contains(".lock\": File exists")
}

/// Runs and wall time of git invocations in this process, per subcommand.
static SPENT: Mutex<BTreeMap<String, GitSpent>> = Mutex::new(BTreeMap::new());

/// What the git invocations of one subcommand cost, summed over the process
/// (see [`spent`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GitSpent {
    /// Processes started.
    pub runs: u64,
    /// Their wall time, start to exit, summed (concurrent runs overlap).
    pub time: Duration,
}

/// Every git invocation this process made so far through [`GitVcs`], per
/// subcommand (`status`, `commit`, …): what `perf-report` splits a flow's
/// wall time by. Differences of two readings measure a stretch of work.
pub fn spent() -> BTreeMap<String, GitSpent> {
    SPENT.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

fn record(subcommand: &str, time: Duration) {
    let mut spent = SPENT.lock().unwrap_or_else(PoisonError::into_inner);
    let entry = spent.entry(subcommand.to_owned()).or_default();
    entry.runs += 1;
    entry.time += time;
}

/// How many paths one command line carries at most (argv size limits).
pub(super) const PATH_CHUNK: usize = 512;

/// The outcome of one git invocation.
pub(super) struct GitOutput {
    pub(super) status: ExitStatus,
    pub(super) stdout: Vec<u8>,
    pub(super) stderr: Vec<u8>,
    command: String,
}

impl GitOutput {
    /// The error of a failed invocation: its command line, status and stderr.
    pub(super) fn error(&self) -> VcsError {
        VcsError::Command {
            command: self.command.clone(),
            status: self.status.to_string(),
            stderr: stderr_text(&self.stderr),
        }
    }

    /// Stdout on success, the invocation's error otherwise.
    pub(super) fn into_ok(self) -> Result<Vec<u8>, VcsError> {
        if self.status.success() {
            Ok(self.stdout)
        } else {
            Err(self.error())
        }
    }
}

impl GitVcs {
    /// Runs `git <subcommand> <args>` in the work tree root. The only place a
    /// git process is started: the argument guard runs first.
    ///
    /// A command git refused because another git process held a lock
    /// (`index.lock`, a ref's `.lock`: the user's own git, an editor's) is
    /// run again a few times, after a short wait each: git takes its locks
    /// before it changes anything, so the refused command did nothing.
    /// (Not so a plain `git cherry-pick`, which merges before its commit
    /// step takes the lock: it runs only in engine worktrees, where no
    /// other git works; see `land.rs` for the user's checkout.)
    pub(super) async fn run(
        &self,
        subcommand: &str,
        args: Vec<OsString>,
        stdin: Option<Vec<u8>>,
    ) -> Result<GitOutput, VcsError> {
        self.run_env(subcommand, args, stdin, &[]).await
    }

    /// [`GitVcs::run`] with `env` set for git besides the fixed environment
    /// (a landing's commit takes its author from the commit it lands).
    pub(super) async fn run_env(
        &self,
        subcommand: &str,
        args: Vec<OsString>,
        stdin: Option<Vec<u8>>,
        env: &[(&str, &str)],
    ) -> Result<GitOutput, VcsError> {
        guard::check_args(subcommand, &args)?;
        let mut waited = 0;
        loop {
            let out = self.run_once(subcommand, &args, stdin.clone(), env).await?;
            if out.status.success() || waited >= LOCK_RETRIES || !held_lock(&out.stderr) {
                return Ok(out);
            }
            waited += 1;
            tokio::time::sleep(std::time::Duration::from_millis(25 * u64::from(waited))).await;
        }
    }

    /// One run of `git <subcommand> <args>` (see [`GitVcs::run`]).
    async fn run_once(
        &self,
        subcommand: &str,
        args: &[OsString],
        stdin: Option<Vec<u8>>,
        env: &[(&str, &str)],
    ) -> Result<GitOutput, VcsError> {
        let command_text = display_command(subcommand, args);
        let started = Instant::now();
        let mut cmd = Command::new(&self.program);
        cmd.current_dir(&self.root).arg("--no-pager");
        for config in FIXED_CONFIG {
            cmd.arg("-c").arg(config);
        }
        cmd.arg(subcommand).args(args);
        for (key, _) in std::env::vars_os() {
            let name = key.to_string_lossy();
            if name.starts_with("GIT_") && !KEPT_GIT_ENV.contains(&name.as_ref()) {
                cmd.env_remove(&key);
            }
        }
        cmd.envs(FIXED_ENV.iter().copied())
            .envs(env.iter().copied())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| VcsError::Command {
            command: command_text.clone(),
            status: "not started".into(),
            stderr: format!("failed to start `{}`: {e}", self.program.display()),
        })?;
        let writer = child.stdin.take();
        let feed = async move {
            if let (Some(mut pipe), Some(data)) = (writer, stdin) {
                // A write error means git exited early; its status says why.
                let _ = pipe.write_all(&data).await;
                let _ = pipe.shutdown().await;
            }
        };
        let (output, ()) = tokio::join!(child.wait_with_output(), feed);
        let output = output.map_err(|e| VcsError::Command {
            command: command_text.clone(),
            status: "unknown".into(),
            stderr: format!("failed to wait for git: {e}"),
        })?;
        record(subcommand, started.elapsed());
        tracing::debug!(command = %command_text, status = %output.status, "git");
        Ok(GitOutput {
            status: output.status,
            stdout: output.stdout,
            stderr: output.stderr,
            command: command_text,
        })
    }

    /// [`GitVcs::run`], failing on a non-zero exit; returns stdout.
    pub(super) async fn run_ok(
        &self,
        subcommand: &str,
        args: Vec<OsString>,
    ) -> Result<Vec<u8>, VcsError> {
        self.run(subcommand, args, None).await?.into_ok()
    }

    /// Runs `git <subcommand> <args> -- <paths>` over chunks of `paths`,
    /// concatenating stdout.
    pub(super) async fn run_paths(
        &self,
        subcommand: &str,
        args: &[&str],
        paths: &[String],
    ) -> Result<Vec<u8>, VcsError> {
        let mut stdout = Vec::new();
        for chunk in paths.chunks(PATH_CHUNK) {
            let mut argv = os_args(args.iter().copied());
            argv.push("--".into());
            argv.extend(chunk.iter().map(OsString::from));
            stdout.extend(self.run_ok(subcommand, argv).await?);
        }
        Ok(stdout)
    }
}

/// Arguments as `OsString`s.
pub(super) fn os_args<I, S>(items: I) -> Vec<OsString>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    items.into_iter().map(|s| s.as_ref().to_owned()).collect()
}

/// The command line for error messages (display only, never executed).
fn display_command(subcommand: &str, args: &[OsString]) -> String {
    const MAX: usize = 400;
    let mut text = format!("git {subcommand}");
    for arg in args {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
        if text.len() > MAX {
            let cut = (0..=MAX)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            text.truncate(cut);
            text.push('…');
            break;
        }
    }
    text
}

/// Standard error as trimmed text, keeping the tail of very long output.
pub(super) fn stderr_text(stderr: &[u8]) -> String {
    const MAX: usize = 4000;
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if text.len() <= MAX {
        return text.to_owned();
    }
    let start = (text.len() - MAX..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_command_is_bounded() {
        let args: Vec<OsString> = (0..1000).map(|i| OsString::from(format!("p{i}"))).collect();
        let text = display_command("add", &args);
        assert!(text.starts_with("git add p0 p1"));
        assert!(text.chars().count() <= 402);
    }

    #[test]
    fn stderr_keeps_the_tail() {
        let long = format!("{}END", "é".repeat(5000));
        let text = stderr_text(long.as_bytes());
        assert!(text.ends_with("END"));
        assert!(text.starts_with('…'));
    }
}
