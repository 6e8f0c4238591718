//! [`LocalCommandRunner`]: a minimal [`CommandRunner`] for the builtin
//! agents.
//!
//! It runs the program directly (no shell), kills the child when the time
//! limit expires (`kill_on_drop`), and keeps the tail of each stream up to
//! the spec's bound. It does not put the child in its own process group, so
//! grandchildren may outlive a timeout: the formatters and fixers it runs
//! rarely fork, and the agents accept any runner, so the adapters'
//! process-group runner replaces it by construction.

use std::process::Stdio;
use std::time::Instant;

use async_trait::async_trait;
use orchestrator_core::agent::AgentError;
use orchestrator_core::command::{CommandError, CommandOutput, CommandRunner, CommandSpec};
use tokio::io::AsyncWriteExt;

/// Runs commands with `tokio::process`, a timeout and bounded capture.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalCommandRunner;

/// Keeps the last `limit` bytes of `bytes` (on a character boundary) as text.
fn tail(bytes: &[u8], limit: usize) -> (String, bool) {
    let text = String::from_utf8_lossy(bytes);
    if text.len() <= limit {
        return (text.into_owned(), false);
    }
    let mut start = text.len() - limit;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    (text[start..].to_owned(), true)
}

#[async_trait]
impl CommandRunner for LocalCommandRunner {
    async fn run(&self, spec: CommandSpec) -> Result<CommandOutput, CommandError> {
        let command_line = spec.display();
        let started = Instant::now();
        let mut command = tokio::process::Command::new(&spec.program);
        command
            .args(&spec.args)
            .current_dir(&spec.cwd)
            .envs(&spec.env)
            .stdin(if spec.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| CommandError::Spawn {
            command: command_line.clone(),
            message: e.to_string(),
        })?;
        if let (Some(input), Some(mut stdin)) = (spec.stdin.as_ref(), child.stdin.take()) {
            // A child that exits without reading its input is not an error.
            let _ = stdin.write_all(input).await;
        }
        let wait = child.wait_with_output();
        let finished = match spec.time_limit {
            Some(limit) => tokio::time::timeout(limit, wait).await.ok(),
            None => Some(wait.await),
        };
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let Some(result) = finished else {
            // The future owning the child was dropped: kill_on_drop killed it.
            return Ok(CommandOutput {
                exit_code: None,
                timed_out: true,
                duration_ms,
                ..CommandOutput::default()
            });
        };
        let output = result.map_err(|e| CommandError::Io {
            command: command_line,
            message: e.to_string(),
        })?;
        let (stdout, cut_out) = tail(&output.stdout, spec.output_limit);
        let (stderr, cut_err) = tail(&output.stderr, spec.output_limit);
        Ok(CommandOutput {
            exit_code: output.status.code(),
            stdout,
            stderr,
            timed_out: false,
            truncated: cut_out || cut_err,
            duration_ms,
        })
    }
}

/// One tool invocation of a builtin agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolRun {
    /// Short name for messages (`cargo fmt`).
    pub name: &'static str,
    /// Program.
    pub program: &'static str,
    /// Arguments.
    pub args: &'static [&'static str],
}

/// How a tool run ended, as the agents report it.
pub(crate) struct ToolsOutcome {
    /// Files changed under the working directory (relative, sorted).
    pub changed: Vec<String>,
    /// One line per tool: its command and how it ended.
    pub summary: Vec<String>,
}

/// Default time limit for one tool when the request has none.
pub(crate) const DEFAULT_TOOL_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Runs `tools` in order in `workdir` and reports the files they changed
/// (by content digests before and after). A tool that cannot start is
/// [`AgentError::Unavailable`]; a timeout is [`AgentError::Timeout`]; a
/// non-zero exit is [`AgentError::Failed`] unless `nonzero_ok_if_changed`
/// and the tools changed something (a fixer that fixed part and reports the
/// rest).
pub(crate) async fn run_tools(
    runner: &dyn CommandRunner,
    workdir: &std::path::Path,
    tools: &[ToolRun],
    env: &std::collections::BTreeMap<String, String>,
    time_limit: Option<std::time::Duration>,
    nonzero_ok_if_changed: bool,
) -> Result<ToolsOutcome, AgentError> {
    let limit = time_limit.unwrap_or(DEFAULT_TOOL_LIMIT);
    let before = super::files::snapshot(workdir).await;
    let mut summary = Vec::new();
    let mut failure: Option<AgentError> = None;
    for tool in tools {
        let mut spec = CommandSpec::new(tool.program, tool.args.iter().copied(), workdir)
            .with_time_limit(limit);
        spec.env
            .extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        let line = spec.display();
        let output = match runner.run(spec).await {
            Ok(o) => o,
            Err(CommandError::Spawn { message, .. }) => {
                return Err(AgentError::Unavailable {
                    message: format!(
                        "{} is not available: failed to start `{line}`: {message}",
                        tool.name
                    ),
                });
            }
            Err(e) => {
                return Err(AgentError::Failed {
                    message: e.to_string(),
                    exit_code: None,
                });
            }
        };
        if output.timed_out {
            return Err(AgentError::Timeout {
                seconds: limit.as_secs_f64(),
            });
        }
        let log = output.combined();
        if !output.success() {
            let lowered = log.to_ascii_lowercase();
            if lowered.contains("is not installed") || lowered.contains("no such command") {
                return Err(AgentError::Unavailable {
                    message: format!(
                        "{} is not available: `{line}` said: {}",
                        tool.name,
                        last_lines(&log, 5)
                    ),
                });
            }
            summary.push(format!(
                "`{line}` exited with status {:?}",
                output.exit_code
            ));
            failure.get_or_insert(AgentError::Failed {
                message: format!(
                    "`{line}` exited with status {}: {}",
                    output
                        .exit_code
                        .map_or_else(|| "signal".to_owned(), |c| c.to_string()),
                    last_lines(&log, 20)
                ),
                exit_code: output.exit_code,
            });
        } else {
            summary.push(format!("`{line}` succeeded"));
        }
    }
    let after = super::files::snapshot(workdir).await;
    let changed = before.changed_since(&after);
    match failure {
        Some(e) if !nonzero_ok_if_changed || changed.is_empty() => Err(e),
        _ => Ok(ToolsOutcome { changed, summary }),
    }
}

/// The last `n` non-empty lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_end_on_a_char_boundary() {
        assert_eq!(tail(b"hello", 10), ("hello".to_owned(), false));
        assert_eq!(tail(b"hello", 3), ("llo".to_owned(), true));
        let (t, cut) = tail("aé".as_bytes(), 1);
        assert!(cut);
        assert_eq!(t, "");
    }
}
