//! The `gemini -p … -o json` dialect.
//!
//! Gemini CLI prints one JSON object: `response` (the answer), `stats`
//! (`models.<name>.tokens.{prompt,candidates}`, `models.<name>.api.totalRequests`,
//! …) and, when the run failed, `error` (`type`, `message`, `code`). Its exit
//! codes name the failure: 41 authentication, 42 bad input, 52 configuration,
//! 53 turn limit, 54 tool execution, 130 interrupted. Authentication and
//! configuration failures make the agent [`AgentError::Unavailable`] (a retry
//! will not help), an interruption is [`AgentError::Cancelled`], and the rest
//! are [`AgentError::Failed`] with a message that names the cause.

use orchestrator_core::agent::{AgentError, AgentResponse, Usage, extract_json, snippet};
use serde_json::Value;

use super::process::RawOutput;

/// The answer and the raw statistics Gemini reported.
#[derive(Debug, Clone, PartialEq)]
pub struct GeminiOutput {
    /// The mapped answer.
    pub response: AgentResponse,
    /// `stats` as printed, for callers that want more than the usage.
    pub stats: Option<Value>,
}

/// The typed error for a Gemini CLI exit code, or `None` for codes without a
/// documented meaning.
pub fn exit_code_error(code: i32, detail: &str) -> Option<AgentError> {
    let with = |what: &str| {
        if detail.is_empty() {
            what.to_owned()
        } else {
            format!("{what}: {detail}")
        }
    };
    let failed = |what: &str| AgentError::Failed {
        message: with(what),
        exit_code: Some(code),
    };
    Some(match code {
        41 => AgentError::Unavailable {
            message: with("gemini authentication failed (exit 41)"),
        },
        52 => AgentError::Unavailable {
            message: with("gemini configuration error (exit 52)"),
        },
        42 => failed("gemini rejected the input (exit 42)"),
        53 => failed("gemini exceeded its turn limit (exit 53)"),
        54 => failed("gemini tool execution failed (exit 54)"),
        130 => AgentError::Cancelled,
        _ => return None,
    })
}

fn usage_from_stats(stats: &Value) -> Usage {
    let mut usage = Usage::default();
    let models = stats.get("models").and_then(Value::as_object);
    for model in models.into_iter().flat_map(|m| m.values()) {
        let tokens = |k: &str| {
            model
                .get("tokens")
                .and_then(|t| t.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        usage.input_tokens += tokens("prompt");
        usage.output_tokens += tokens("candidates");
        let requests = model
            .get("api")
            .and_then(|a| a.get("totalRequests"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        usage.turns += u32::try_from(requests).unwrap_or(u32::MAX);
    }
    usage
}

/// Maps Gemini's output. `structured`: parse the response as JSON (the
/// request had a schema).
pub fn parse(raw: &RawOutput, structured: bool) -> Result<GeminiOutput, AgentError> {
    let trimmed = raw.stdout.trim();
    // Warnings may precede the object; fall back to the first JSON object.
    let object = serde_json::from_str::<Value>(trimmed)
        .ok()
        .or_else(|| extract_json(trimmed))
        .filter(|v| v.get("response").is_some() || v.get("error").is_some());

    let error_detail = object
        .as_ref()
        .and_then(|o| o.get("error"))
        .filter(|e| !e.is_null())
        .map(|e| {
            let message = e.get("message").and_then(Value::as_str).unwrap_or_default();
            match e.get("type").and_then(Value::as_str) {
                Some(kind) if !message.is_empty() => format!("{kind}: {message}"),
                Some(kind) => kind.to_owned(),
                None if !message.is_empty() => message.to_owned(),
                None => e.to_string(),
            }
        });

    if let Some(code) = raw.code
        && code != 0
    {
        let detail = error_detail.clone().unwrap_or_else(|| {
            let stderr = raw.stderr.trim();
            stderr.lines().last().unwrap_or_default().to_owned()
        });
        return Err(
            exit_code_error(code, &detail).unwrap_or_else(|| AgentError::Failed {
                message: format!("gemini failed (exit {code}): {detail}"),
                exit_code: Some(code),
            }),
        );
    }
    if raw.code.is_none() {
        return Err(raw.failed("gemini"));
    }
    if let Some(detail) = error_detail {
        return Err(AgentError::Failed {
            message: format!("gemini failed: {detail}"),
            exit_code: raw.code,
        });
    }
    let Some(object) = object else {
        return Err(AgentError::Garbage {
            message: "expected the JSON object of `gemini -o json`".into(),
            snippet: snippet(trimmed),
        });
    };
    let Some(text) = object.get("response").and_then(Value::as_str) else {
        return Err(AgentError::Garbage {
            message: "the `response` field of gemini's output is not a string".into(),
            snippet: snippet(trimmed),
        });
    };
    let stats = object.get("stats").cloned();
    let usage = stats.as_ref().map(usage_from_stats);
    Ok(GeminiOutput {
        response: AgentResponse {
            text: text.to_owned(),
            structured: if structured { extract_json(text) } else { None },
            files_changed: Vec::new(),
            usage,
        },
        stats,
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
    fn output_after_a_notice_line_is_found() {
        let stdout = "Loaded cached credentials.\n{\"response\": \"hi\", \"stats\": {}}\n";
        let out = parse(&raw(stdout, 0), false).unwrap();
        assert_eq!(out.response.text, "hi");
        assert_eq!(out.response.usage, Some(Usage::default()));
    }

    #[test]
    fn an_error_object_with_status_zero_is_a_failure() {
        let stdout = r#"{"response": null, "error": {"type": "ApiError", "message": "quota exceeded", "code": 429}}"#;
        let err = parse(&raw(stdout, 0), false).unwrap_err();
        assert_eq!(
            err,
            AgentError::Failed {
                message: "gemini failed: ApiError: quota exceeded".into(),
                exit_code: Some(0)
            }
        );
    }

    #[test]
    fn a_non_string_response_is_garbage() {
        let err = parse(&raw(r#"{"response": 42}"#, 0), false).unwrap_err();
        assert!(matches!(err, AgentError::Garbage { .. }), "{err:?}");
    }

    #[test]
    fn undocumented_exit_codes_have_no_typed_error() {
        assert_eq!(exit_code_error(1, "x"), None);
        assert_eq!(exit_code_error(130, ""), Some(AgentError::Cancelled));
    }
}
