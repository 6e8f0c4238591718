//! Running the formatters and fixers: one tool after another through a
//! core [`CommandRunner`], with the changed files found by content digests.

use orchestrator_core::agent::{AgentError, AgentRequest, AgentResponse};
use orchestrator_core::command::{CommandError, CommandRunner, CommandSpec};

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

/// Runs `tools` for `request` (in its working directory, within its time
/// limit) and answers with a one-line summary and the changed files.
pub(crate) async fn run_tools_for(
    runner: &dyn CommandRunner,
    request: &AgentRequest,
    tools: &[ToolRun],
    env: &std::collections::BTreeMap<String, String>,
    tolerate_failure: bool,
) -> Result<AgentResponse, AgentError> {
    let mut env = env.clone();
    env.extend(request.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let outcome = run_tools(
        runner,
        &request.workdir,
        tools,
        &env,
        request.time_limit,
        tolerate_failure,
    )
    .await?;
    let text = format!(
        "{}; {} file(s) changed{}",
        outcome.summary.join("; "),
        outcome.changed.len(),
        if outcome.changed.is_empty() {
            String::new()
        } else {
            format!(": {}", outcome.changed.join(", "))
        }
    );
    Ok(AgentResponse::text(text).with_files_changed(outcome.changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_lines_keeps_the_tail_without_blank_lines() {
        assert_eq!(last_lines("a\n\nb\nc\n", 2), "b\nc");
        assert_eq!(last_lines("", 3), "");
    }
}
