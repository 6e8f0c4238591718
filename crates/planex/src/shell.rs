//! [`ShellTaskAgent`]: runs each task's `execution_directives` as a shell line.
//!
//! With it planex is a dependency-aware parallel task runner that needs no
//! LLM: a person writes a tasks.csv whose `execution_directives` are shell
//! commands, and `run` executes them in dependency order.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse};
use orchestrator_core::command::{CommandError, CommandRunner, CommandSpec};
use serde_json::json;

use crate::protocol::{PlanexContext, TASK_FINDINGS_MAX};

/// The environment variable holding the task's `prev_context`.
pub const PREV_CONTEXT_ENV: &str = "ORCH_PREV_CONTEXT";
/// The environment variable holding the task's id.
pub const TASK_ID_ENV: &str = "ORCH_TASK_ID";
/// The environment variable holding the session folder.
pub const SESSION_DIR_ENV: &str = "ORCH_SESSION_DIR";
/// The one criterion the shell agent reports on.
pub const EXIT_STATUS_CRITERION: &str = "exit status 0";

/// An [`Agent`] that executes a task row's `execution_directives` with
/// `sh -c` ([`CommandSpec::shell`]) in the request's working directory (the
/// repository).
///
/// Contract:
/// - the request's [`context`](AgentRequest::context) must be a
///   [`PlanexContext::Task`]; anything else is [`AgentError::Unsupported`];
/// - the command gets `ORCH_PREV_CONTEXT` (the row's `prev_context`),
///   `ORCH_TASK_ID` and `ORCH_SESSION_DIR` in its environment, and the
///   request's time limit;
/// - exit status 0 answers a completed report whose `findings` are the tail
///   of standard output (at most 500 characters) and whose only criterion is
///   `exit status 0` — the exit status is the only thing checked;
/// - a non-zero exit is [`AgentError::Failed`] with the exit code and the
///   tail of standard error (or output); a time-out is
///   [`AgentError::Timeout`]; a command that cannot start is
///   [`AgentError::Unavailable`];
/// - empty `execution_directives` complete at once with a note (an umbrella
///   task that only groups dependencies).
///
/// Use it with [`ExecutionPolicy::shell`](crate::ExecutionPolicy::shell):
/// one attempt per round, one round, the agent's status as the only
/// criterion.
#[derive(Clone)]
pub struct ShellTaskAgent {
    runner: Arc<dyn CommandRunner>,
}

impl fmt::Debug for ShellTaskAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShellTaskAgent")
            .field("runner", &self.runner)
            .finish()
    }
}

impl ShellTaskAgent {
    /// A shell agent running commands through `runner`.
    pub fn new(runner: Arc<dyn CommandRunner>) -> Self {
        Self { runner }
    }
}

#[async_trait]
impl Agent for ShellTaskAgent {
    fn name(&self) -> &str {
        "shell"
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let context: PlanexContext =
            serde_json::from_value(request.context.clone()).map_err(|e| {
                AgentError::Unsupported {
                    reason: format!(
                        "the shell agent runs planex task rows only; request `{}` has no task context ({e})",
                        request.id
                    ),
                }
            })?;
        let PlanexContext::Task {
            row, session_dir, ..
        } = context
        else {
            return Err(AgentError::Unsupported {
                reason: format!(
                    "the shell agent runs planex task rows only; request `{}` is not a task",
                    request.id
                ),
            });
        };
        let script = row.execution_directives.trim();
        if script.is_empty() {
            return Ok(report(
                &row.id,
                "nothing to run (empty execution_directives)",
            ));
        }
        let mut spec = CommandSpec::shell(script, request.workdir.clone());
        spec.env = request.env.clone();
        let mut spec = spec
            .with_env(PREV_CONTEXT_ENV, row.prev_context.clone())
            .with_env(TASK_ID_ENV, row.id.clone())
            .with_env(SESSION_DIR_ENV, session_dir);
        if let Some(limit) = request.time_limit {
            spec = spec.with_time_limit(limit);
        }
        let output = self.runner.run(spec).await.map_err(|e| match e {
            CommandError::Spawn { .. } => AgentError::Unavailable {
                message: e.to_string(),
            },
            other => AgentError::Failed {
                message: other.to_string(),
                exit_code: None,
            },
        })?;
        if output.timed_out {
            return Err(AgentError::Timeout {
                seconds: request
                    .time_limit
                    .map_or(output.duration_ms as f64 / 1000.0, |l| l.as_secs_f64()),
            });
        }
        if output.exit_code != Some(0) {
            let status = output.exit_code.map_or_else(
                || "killed by a signal".to_owned(),
                |c| format!("exited with status {c}"),
            );
            let tail = if output.stderr.trim().is_empty() {
                &output.stdout
            } else {
                &output.stderr
            };
            let tail = tail_chars(tail, TASK_FINDINGS_MAX);
            let message = if tail.is_empty() {
                format!("`{script}` {status}")
            } else {
                format!("`{script}` {status}: {tail}")
            };
            return Err(AgentError::Failed {
                message,
                exit_code: output.exit_code,
            });
        }
        Ok(report(
            &row.id,
            &tail_chars(&output.stdout, TASK_FINDINGS_MAX),
        ))
    }
}

/// A completed report with `findings`.
fn report(id: &str, findings: &str) -> AgentResponse {
    AgentResponse::structured(json!({
        "id": id,
        "status": "completed",
        "findings": findings,
        "files_modified": [],
        "tests_passed": true,
        "acceptance_met": EXIT_STATUS_CRITERION,
        "error": "",
        "criteria": [{"criterion": EXIT_STATUS_CRITERION, "status": "PASS", "explanation": "the command exited with status 0"}]
    }))
}

/// The last `max` characters of `text`, trimmed.
pub(crate) fn tail_chars(text: &str, max: usize) -> String {
    let text = text.trim();
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let skip = count - max;
    match text.char_indices().nth(skip) {
        Some((i, _)) => text[i..].to_owned(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use orchestrator_core::agent::Role;
    use orchestrator_core::command::CommandOutput;
    use orchestrator_core::fakes::ScriptedCommands;

    use super::*;
    use crate::protocol::{CONTEXT_VERSION, WireTaskRow};

    fn request(directives: &str) -> AgentRequest {
        let row = WireTaskRow {
            id: "T1".into(),
            execution_directives: directives.into(),
            prev_context: "[Task T0: x] done".into(),
            ..WireTaskRow::default()
        };
        AgentRequest::new("T1", Role::Execute, "do it", "/repo")
            .with_time_limit(Duration::from_secs(5))
            .with_context(
                serde_json::to_value(PlanexContext::Task {
                    version: CONTEXT_VERSION,
                    session_dir: "/repo/.workflow/.lite-plan/s".into(),
                    discoveries: "/repo/.workflow/.lite-plan/s/discoveries.ndjson".into(),
                    row,
                })
                .unwrap(),
            )
    }

    #[tokio::test]
    async fn exit_zero_completes_with_the_stdout_tail_and_env() {
        let runner = Arc::new(ScriptedCommands::new().on("make build", 0, "compiling\nbuilt ok\n"));
        let agent = ShellTaskAgent::new(runner.clone());
        let response = agent.run(request("make build")).await.unwrap();
        let report = response.structured.unwrap();
        assert_eq!(report["status"], "completed");
        assert_eq!(report["findings"], "compiling\nbuilt ok");
        let call = &runner.calls()[0];
        assert_eq!(call.args, ["-c", "make build"]);
        assert_eq!(call.cwd, std::path::Path::new("/repo"));
        assert_eq!(call.env[PREV_CONTEXT_ENV], "[Task T0: x] done");
        assert_eq!(call.env[TASK_ID_ENV], "T1");
        assert_eq!(call.time_limit, Some(Duration::from_secs(5)));
    }

    #[tokio::test]
    async fn failures_timeouts_and_missing_programs_are_errors() {
        let runner = Arc::new(
            ScriptedCommands::new()
                .on_output(
                    "false",
                    Ok(CommandOutput {
                        exit_code: Some(3),
                        stderr: "boom\n".into(),
                        ..CommandOutput::default()
                    }),
                )
                .on_output(
                    "sleep",
                    Ok(CommandOutput {
                        exit_code: None,
                        timed_out: true,
                        ..CommandOutput::default()
                    }),
                ),
        );
        let agent = ShellTaskAgent::new(runner);
        let err = agent.run(request("false")).await.unwrap_err();
        assert_eq!(
            err,
            AgentError::Failed {
                message: "`false` exited with status 3: boom".into(),
                exit_code: Some(3)
            }
        );
        let err = agent.run(request("sleep 9")).await.unwrap_err();
        assert_eq!(err, AgentError::Timeout { seconds: 5.0 });
        let err = agent.run(request("nothing-here")).await.unwrap_err();
        assert!(matches!(err, AgentError::Unavailable { .. }), "{err:?}");
        let ok = agent.run(request("  ")).await.unwrap();
        assert_eq!(
            ok.structured.unwrap()["findings"],
            "nothing to run (empty execution_directives)"
        );
    }

    #[tokio::test]
    async fn requests_without_a_task_context_are_unsupported() {
        let agent = ShellTaskAgent::new(Arc::new(ScriptedCommands::new()));
        let err = agent
            .run(AgentRequest::new("x", Role::Plan, "plan", "/"))
            .await
            .unwrap_err();
        assert!(matches!(err, AgentError::Unsupported { .. }));
    }

    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(tail_chars("abcdef", 3), "def");
        assert_eq!(tail_chars("  ab \n", 3), "ab");
    }
}
