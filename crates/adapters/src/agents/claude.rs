//! The `claude -p --output-format json` dialect.
//!
//! Claude Code prints one JSON object when the run ends:
//! `{"type":"result","subtype":"success","is_error":false,"result":"…",
//! "session_id":"…","total_cost_usd":0.01,"num_turns":2,
//! "usage":{"input_tokens":…,"output_tokens":…},"structured_output":{…}}`.
//! With `--verbose` it prints an array of messages whose last `result`
//! element is that object; both are accepted. `is_error: true` or a subtype
//! other than `success` (`error_max_turns`, `error_during_execution`, …) is a
//! failure: an `api_error_status` of 401 or 403 (or "Not logged in", "Invalid
//! API key") is an authentication error ([`AgentError::Unavailable`], not
//! retried), `error_max_turns` and `error_max_budget_usd` are
//! [`AgentError::Budget`] ([`AgentError::CallLimit`] when the request set
//! the dollar limit passed as `--max-budget-usd`, see [`call_limit`]), and the rest [`AgentError::Failed`] naming the API
//! status and the tool calls in `permission_denials`. Unknown fields are
//! ignored.

use orchestrator_core::agent::{AgentError, AgentResponse, ItemLimits, Usage, snippet};
use serde::Deserialize;

use super::raw::{RawOutput, authentication_error};

/// The answer and what else Claude reported.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudeOutput {
    /// The mapped answer.
    pub response: AgentResponse,
    /// The session id, to resume the conversation (`claude --resume`).
    pub session_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ResultMessage {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    is_error: bool,
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    total_cost_usd: Option<f64>,
    #[serde(default)]
    num_turns: Option<u32>,
    #[serde(default)]
    usage: Option<ClaudeUsage>,
    #[serde(default)]
    structured_output: Option<serde_json::Value>,
    #[serde(default)]
    errors: Vec<serde_json::Value>,
    #[serde(default)]
    api_error_status: Option<u16>,
    #[serde(default)]
    api_error_type: Option<String>,
    #[serde(default)]
    permission_denials: Vec<serde_json::Value>,
}

/// What to set when the endpoint refuses claude's credentials.
const AUTH_HINT: &str = "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN for a gateway), \
     or log in with `claude /login`";

impl ResultMessage {
    /// Whether the failure is the endpoint refusing the credentials (or no
    /// credentials at all).
    fn is_auth_failure(&self, detail: &str) -> bool {
        matches!(self.api_error_status, Some(401 | 403))
            || matches!(
                self.api_error_type.as_deref(),
                Some("authentication_error" | "permission_error")
            )
            || detail.contains("Not logged in")
            || detail.contains("Invalid API key")
    }

    /// The denied tool calls, as `Tool(input)` texts.
    fn denials(&self) -> Vec<String> {
        self.permission_denials
            .iter()
            .map(|d| {
                let tool = d.get("tool_name").and_then(|t| t.as_str()).unwrap_or("?");
                match d.get("tool_input") {
                    Some(input) => format!("{tool}({input})"),
                    None => tool.to_owned(),
                }
            })
            .collect()
    }
}

#[derive(Debug, Default, Deserialize)]
struct ClaudeUsage {
    /// Input tokens not read from or written to the prompt cache.
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// Whether claude's output reports that the endpoint answered 429.
pub fn rate_limited(raw: &RawOutput) -> bool {
    find_result(&raw.stdout).is_some_and(|m| m.api_error_status == Some(429))
}

/// Finds the result message: the whole stdout as an object or an array, or
/// the last line that is a JSON object (if something printed before it).
fn find_result(stdout: &str) -> Option<ResultMessage> {
    let trimmed = stdout.trim();
    let value: serde_json::Value = serde_json::from_str(trimmed).ok().or_else(|| {
        trimmed
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
            .filter(serde_json::Value::is_object)
    })?;
    let value = match value {
        serde_json::Value::Array(items) => items
            .into_iter()
            .rev()
            .find(|m| m.get("type").and_then(|t| t.as_str()) == Some("result"))?,
        other => other,
    };
    let message: ResultMessage = serde_json::from_value(value).ok()?;
    // An object with none of the result fields is not a Claude result.
    let looks_right = message.kind.as_deref() == Some("result")
        || message.result.is_some()
        || message.subtype.is_some();
    looks_right.then_some(message)
}

/// `error`, as the request's own limit when it is claude's
/// `error_max_budget_usd` and the request set the dollar limit that claude
/// was given as `--max-budget-usd` ([`AgentError::CallLimit`]: only this
/// call is over); otherwise unchanged.
pub fn call_limit(error: AgentError, limits: &ItemLimits) -> AgentError {
    match error {
        AgentError::Budget { message }
            if limits.max_cost_usd.is_some() && message.contains("error_max_budget_usd") =>
        {
            AgentError::CallLimit {
                message: format!(
                    "claude stopped at the call's limit of ${:.4} ({message})",
                    limits.max_cost_usd.unwrap_or_default()
                ),
            }
        }
        other => other,
    }
}

/// The error of a result object that reports a failure (`is_error`, or a
/// subtype other than `success`): an authentication failure, a budget or
/// turn limit reached, or the failure with its detail and the tool calls
/// the permission settings denied.
fn reported_error(message: &ResultMessage, subtype: &str, raw: &RawOutput) -> AgentError {
    let mut detail = message.result.clone().unwrap_or_default();
    if detail.trim().is_empty() {
        detail = message
            .errors
            .iter()
            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join("; ");
    }
    if detail.trim().is_empty() {
        detail = raw.stderr.trim().to_owned();
    }
    let detail = detail.trim();
    if message.is_auth_failure(detail) {
        return authentication_error("claude", detail, AUTH_HINT);
    }
    let denials = message.denials();
    let denied = if denials.is_empty() {
        String::new()
    } else {
        format!(
            " (tool calls denied by the permission settings: {})",
            denials.join(", ")
        )
    };
    if matches!(subtype, "error_max_turns" | "error_max_budget_usd") {
        return AgentError::Budget {
            message: format!("claude stopped with {subtype}: {detail}{denied}"),
        };
    }
    let what = match message.api_error_status {
        Some(status) => format!("the API answered {status}"),
        None if message.is_error && subtype == "success" => "an error".to_owned(),
        None => subtype.to_owned(),
    };
    AgentError::Failed {
        message: format!("claude reported {what}: {detail}{denied}"),
        exit_code: raw.code,
    }
}

/// Maps Claude's output.
pub fn parse(raw: &RawOutput) -> Result<ClaudeOutput, AgentError> {
    let Some(message) = find_result(&raw.stdout) else {
        if raw.code != Some(0) {
            return Err(raw.failed("claude"));
        }
        return Err(AgentError::Garbage {
            message: "expected the JSON result object of `claude -p --output-format json`".into(),
            snippet: snippet(raw.stdout.trim()),
        });
    };
    let subtype = message.subtype.as_deref().unwrap_or("success");
    if message.is_error || subtype != "success" {
        return Err(reported_error(&message, subtype, raw));
    }
    if raw.code != Some(0) {
        // A success object with a failing exit status: trust the status.
        return Err(raw.failed("claude"));
    }
    if message.result.is_none() && message.structured_output.is_none() {
        // A success object that carries no answer at all is not an answer.
        return Err(AgentError::Garbage {
            message: "the result object has neither `result` nor `structured_output`".into(),
            snippet: snippet(raw.stdout.trim()),
        });
    }
    tracing::debug!(session_id = ?message.session_id, "claude finished");
    let usage = message.usage.unwrap_or_default();
    Ok(ClaudeOutput {
        response: AgentResponse {
            text: message.result.unwrap_or_default(),
            structured: message.structured_output,
            files_changed: Vec::new(),
            usage: Some(Usage {
                // The Messages API counts cached input apart; our usage is
                // every input token the model read.
                input_tokens: usage.input_tokens
                    + usage.cache_creation_input_tokens
                    + usage.cache_read_input_tokens,
                output_tokens: usage.output_tokens,
                cost_usd: message.total_cost_usd.unwrap_or(0.0),
                turns: message.num_turns.unwrap_or(0),
            }),
            session: message.session_id.clone(),
        },
        session_id: message.session_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_input_tokens_count_as_input() {
        let stdout = r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","num_turns":2,"total_cost_usd":0.5,"usage":{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":3000,"output_tokens":7}}"#;
        assert_eq!(
            parse(&raw(stdout, 0)).unwrap().response.usage,
            Some(Usage {
                input_tokens: 3210,
                output_tokens: 7,
                cost_usd: 0.5,
                turns: 2
            })
        );
    }

    #[test]
    fn a_budget_stop_is_the_calls_own_limit_only_when_the_request_set_one() {
        let stop = r#"{"type":"result","subtype":"error_max_budget_usd","is_error":true,"total_cost_usd":0.0016}"#;
        let err = parse(&raw(stop, 1)).unwrap_err();
        assert!(matches!(&err, AgentError::Budget { .. }), "{err:?}");
        assert_eq!(call_limit(err.clone(), &ItemLimits::default()), err);
        let limited = call_limit(err, &ItemLimits::new(Some(0.001), None, None));
        assert!(
            matches!(&limited, AgentError::CallLimit { message }
                if message.starts_with("claude stopped at the call's limit of $0.0010 (claude stopped with error_max_budget_usd")),
            "{limited:?}"
        );
        let turns = r#"{"type":"result","subtype":"error_max_turns","is_error":true}"#;
        let turns = call_limit(
            parse(&raw(turns, 1)).unwrap_err(),
            &ItemLimits::new(Some(0.001), None, None),
        );
        assert!(matches!(turns, AgentError::Budget { .. }), "{turns:?}");
    }

    #[test]
    fn api_errors_turn_limits_and_denials_get_their_class() {
        let auth = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"api_error_type":"authentication_error","result":"Invalid API key · Fix external API key"}"#;
        let err = parse(&raw(auth, 1)).unwrap_err();
        assert!(
            matches!(&err, AgentError::Unavailable { message } if message.starts_with("claude authentication failed: Invalid API key")),
            "{err:?}"
        );
        let login = r#"{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login"}"#;
        assert!(!parse(&raw(login, 1)).unwrap_err().is_transient());
        let turns = r#"{"type":"result","subtype":"error_max_turns","is_error":true,"permission_denials":[{"tool_name":"Bash","tool_input":{"command":"cargo test"}}]}"#;
        assert_eq!(
            parse(&raw(turns, 1)).unwrap_err(),
            AgentError::Budget {
                message: r#"claude stopped with error_max_turns:  (tool calls denied by the permission settings: Bash({"command":"cargo test"}))"#.into()
            }
        );
        let limited = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"Rate limited"}"#;
        assert_eq!(
            parse(&raw(limited, 1)).unwrap_err(),
            AgentError::Failed {
                message: "claude reported the API answered 429: Rate limited".into(),
                exit_code: Some(1)
            }
        );
    }

    fn raw(stdout: &str, code: i32) -> RawOutput {
        RawOutput {
            code: Some(code),
            stdout: stdout.to_owned(),
            stderr: String::new(),
        }
    }

    #[test]
    fn verbose_array_output_uses_the_last_result_message() {
        let stdout = r#"[{"type":"system","subtype":"init","session_id":"s1"},
            {"type":"assistant","message":{"content":[]}},
            {"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s1","num_turns":1,"new_field":{"x":1}}]"#;
        let out = parse(&raw(stdout, 0)).unwrap();
        assert_eq!(out.response.text, "done");
        assert_eq!(out.session_id.as_deref(), Some("s1"));
    }

    #[test]
    fn a_warning_line_before_the_object_is_skipped() {
        let stdout = "warning: update available\n{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"ok\"}\n";
        assert_eq!(parse(&raw(stdout, 0)).unwrap().response.text, "ok");
    }

    #[test]
    fn json_that_is_not_a_result_is_garbage() {
        let err = parse(&raw(r#"{"hello":"world"}"#, 0)).unwrap_err();
        assert!(
            matches!(err, AgentError::Garbage { ref snippet, .. } if snippet == r#"{"hello":"world"}"#),
            "{err:?}"
        );
    }

    #[test]
    fn a_success_object_with_a_failing_status_is_a_failure() {
        let stdout = r#"{"type":"result","subtype":"success","is_error":false,"result":"ok"}"#;
        let err = parse(&raw(stdout, 2)).unwrap_err();
        assert!(
            matches!(
                err,
                AgentError::Failed {
                    exit_code: Some(2),
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
