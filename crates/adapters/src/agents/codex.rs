//! The `codex exec --json` dialect: one JSON event per stdout line.
//!
//! Events read: `thread.started` (`thread_id`), `turn.completed` (`usage`
//! with `input_tokens`, `output_tokens`; one per turn), `turn.failed`
//! (`error.message`), `error` (`message`), and `item.completed` whose `item`
//! is an `agent_message` (`text`: the last one is the answer), a
//! `file_change` (`changes[].path`: the files changed) or a
//! `command_execution` (`command`, `exit_code`: logged). Other events, other
//! item types and unknown fields are ignored; lines that are not JSON are
//! skipped, but output with no event at all is garbage.

use std::path::Path;

use orchestrator_core::agent::{AgentError, AgentResponse, Usage, extract_json, snippet};
use serde_json::Value;

use super::process::RawOutput;

/// The answer and what else Codex reported.
#[derive(Debug, Clone, PartialEq)]
pub struct CodexOutput {
    /// The mapped answer.
    pub response: AgentResponse,
    /// The thread id, to resume (`codex exec resume <id>`).
    pub thread_id: Option<String>,
    /// Commands the agent ran, with their exit codes when known.
    pub commands: Vec<(String, Option<i64>)>,
}

/// Makes an absolute path relative to `workdir` when it lies inside it.
fn relative_to(path: &str, workdir: &Path) -> String {
    Path::new(path)
        .strip_prefix(workdir)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_owned())
}

fn message_of(v: &Value) -> String {
    v.get("message")
        .and_then(Value::as_str)
        .map_or_else(|| v.to_string(), str::to_owned)
}

/// Maps Codex's event stream. `structured`: parse the final message as JSON
/// (the request had a schema).
pub fn parse(raw: &RawOutput, workdir: &Path, structured: bool) -> Result<CodexOutput, AgentError> {
    let mut events = 0usize;
    let mut thread_id = None;
    let mut usage = Usage::default();
    let mut completed_turns = 0u32;
    let mut text: Option<String> = None;
    let mut files: Vec<String> = Vec::new();
    let mut commands = Vec::new();
    let mut failure: Option<String> = None;

    for line in raw.stdout.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        let Some(kind) = event.get("type").and_then(Value::as_str) else {
            continue;
        };
        events += 1;
        match kind {
            "thread.started" => {
                thread_id = event
                    .get("thread_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            "turn.completed" => {
                completed_turns += 1;
                failure = None;
                if let Some(u) = event.get("usage") {
                    let get = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                    usage.input_tokens += get("input_tokens");
                    usage.output_tokens += get("output_tokens");
                }
            }
            "turn.failed" => {
                failure = Some(
                    event
                        .get("error")
                        .map_or_else(|| "turn failed".to_owned(), message_of),
                );
            }
            "error" => failure = Some(message_of(&event)),
            "item.completed" => {
                let Some(item) = event.get("item") else {
                    continue;
                };
                match item.get("type").and_then(Value::as_str) {
                    Some("agent_message") => {
                        if let Some(t) = item.get("text").and_then(Value::as_str) {
                            text = Some(t.to_owned());
                        }
                    }
                    Some("file_change") => {
                        let changes = item.get("changes").and_then(Value::as_array);
                        for change in changes.into_iter().flatten() {
                            if let Some(path) = change.get("path").and_then(Value::as_str) {
                                let path = relative_to(path, workdir);
                                if !files.contains(&path) {
                                    files.push(path);
                                }
                            }
                        }
                    }
                    Some("command_execution") => {
                        let command = item
                            .get("command")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        let exit = item.get("exit_code").and_then(Value::as_i64);
                        tracing::debug!(%command, ?exit, "codex ran a command");
                        commands.push((command, exit));
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    if let Some(message) = failure {
        return Err(AgentError::Failed {
            message: format!("codex failed: {message}"),
            exit_code: raw.code,
        });
    }
    if events == 0 {
        if raw.code != Some(0) {
            return Err(raw.failed("codex"));
        }
        return Err(AgentError::Garbage {
            message: "expected JSONL events from `codex exec --json`".into(),
            snippet: snippet(raw.stdout.trim()),
        });
    }
    if raw.code != Some(0) {
        return Err(raw.failed("codex"));
    }
    if text.is_none() && completed_turns == 0 {
        return Err(AgentError::Garbage {
            message: "codex ended without a turn.completed event or an agent message".into(),
            snippet: snippet(raw.stdout.trim()),
        });
    }
    usage.turns = completed_turns;
    let text = text.unwrap_or_default();
    let structured_value = if structured {
        extract_json(&text)
    } else {
        None
    };
    tracing::debug!(?thread_id, "codex finished");
    Ok(CodexOutput {
        response: AgentResponse {
            text,
            structured: structured_value,
            files_changed: files,
            usage: Some(usage),
        },
        thread_id,
        commands,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(stdout: &str, code: i32) -> RawOutput {
        RawOutput {
            code: Some(code),
            stdout: stdout.to_owned(),
            stderr: String::new(),
        }
    }

    #[test]
    fn an_error_followed_by_a_completed_turn_is_a_success() {
        let stdout = concat!(
            "{\"type\":\"thread.started\",\"thread_id\":\"t1\"}\n",
            "{\"type\":\"error\",\"message\":\"Reconnecting... 1/5\"}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"agent_message\",\"text\":\"done\"}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":5,\"output_tokens\":2}}\n",
        );
        let out = parse(&raw(stdout, 0), Path::new("/w"), false).unwrap();
        assert_eq!(out.response.text, "done");
        assert_eq!(out.thread_id.as_deref(), Some("t1"));
        assert_eq!(
            out.response.usage.map(|u| (u.input_tokens, u.turns)),
            Some((5, 1))
        );
    }

    #[test]
    fn non_json_lines_and_unknown_events_are_skipped() {
        let stdout = concat!(
            "Reading prompt from stdin...\n",
            "{\"type\":\"some.future.event\",\"payload\":1}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"i\",\"type\":\"todo_list\",\"items\":[]}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"c\",\"type\":\"command_execution\",\"command\":\"ls\",\"exit_code\":0}}\n",
            "{\"type\":\"item.completed\",\"item\":{\"id\":\"f\",\"type\":\"file_change\",\"changes\":[{\"path\":\"/w/a.rs\",\"kind\":\"update\"},{\"path\":\"/elsewhere/b.rs\",\"kind\":\"add\"},{\"path\":\"/w/a.rs\",\"kind\":\"update\"}]}}\n",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}\n",
        );
        let out = parse(&raw(stdout, 0), Path::new("/w"), false).unwrap();
        assert_eq!(out.response.text, "");
        assert_eq!(out.response.files_changed, ["a.rs", "/elsewhere/b.rs"]);
        assert_eq!(out.commands, [("ls".to_owned(), Some(0))]);
    }

    #[test]
    fn events_without_a_turn_or_message_are_garbage() {
        let err = parse(
            &raw("{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n", 0),
            Path::new("/w"),
            false,
        )
        .unwrap_err();
        assert!(matches!(err, AgentError::Garbage { .. }), "{err:?}");
    }
}
