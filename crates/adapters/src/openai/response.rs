//! The answer: a completion's content, usage and finish reason, the JSON of
//! a schema request, and the message in an error body.

use orchestrator_core::agent::{AgentError, Usage, extract_json, snippet};
use serde::Deserialize;

/// What a successful completion carried.
#[derive(Debug)]
pub(super) struct Completion {
    pub(super) content: String,
    finish_reason: Option<String>,
    pub(super) usage: Option<Usage>,
}

#[derive(Deserialize)]
struct WireCompletion {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// Parses a successful chat-completions body.
pub(super) fn parse_completion(body: &str) -> Result<Completion, AgentError> {
    let wire: WireCompletion = serde_json::from_str(body).map_err(|e| AgentError::Garbage {
        message: format!("chat completion is not valid JSON: {e}"),
        snippet: snippet(body),
    })?;
    if let Some(error) = &wire.error
        && wire.choices.is_empty()
    {
        return Err(AgentError::Failed {
            message: format!("server reported an error: {}", error_text(error)),
            exit_code: None,
        });
    }
    let Some(choice) = wire.choices.into_iter().next() else {
        return Err(AgentError::Garbage {
            message: "chat completion has no choices".into(),
            snippet: snippet(body),
        });
    };
    let message = choice.message.unwrap_or(WireMessage {
        content: None,
        refusal: None,
    });
    if let Some(refusal) = message.refusal.filter(|r| !r.is_empty()) {
        return Err(AgentError::Failed {
            message: format!("model refused: {refusal}"),
            exit_code: None,
        });
    }
    let Some(content) = message.content else {
        return Err(AgentError::Garbage {
            message: "chat completion message has no content".into(),
            snippet: snippet(body),
        });
    };
    Ok(Completion {
        content,
        finish_reason: choice.finish_reason,
        usage: wire.usage.map(|u| Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            cost_usd: 0.0,
            turns: 1,
        }),
    })
}

/// Parses the answer to a schema request: the whole content, or (for servers
/// that ignore `response_format` and wrap the JSON in prose or a fence) the
/// JSON found by [`extract_json`].
pub(super) fn parse_structured(completion: &Completion) -> Result<serde_json::Value, AgentError> {
    extract_json(&completion.content).ok_or_else(|| {
        let mut message = "expected a JSON answer to a schema request".to_owned();
        if let Some(reason) = completion.finish_reason.as_deref()
            && reason != "stop"
        {
            message.push_str(&format!(" (finish_reason {reason:?})"));
        }
        AgentError::Garbage {
            message,
            snippet: snippet(&completion.content),
        }
    })
}

/// The most useful message in an error body: OpenAI's `error.message`, a
/// bare `error` string, vLLM's `message`, FastAPI's `detail`, else the start
/// of the body.
pub(crate) fn server_message(body: &str) -> String {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
        let trimmed = body.trim();
        return if trimmed.is_empty() {
            "(empty body)".to_owned()
        } else {
            snippet(trimmed)
        };
    };
    for key in ["error", "message", "detail"] {
        if let Some(found) = value.get(key) {
            return error_text(found);
        }
    }
    snippet(body.trim())
}

pub(crate) fn error_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(map) => match map.get("message") {
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => snippet(&value.to_string()),
        },
        other => snippet(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_messages_are_found_in_common_error_shapes() {
        let check = |body: &str, expected: &str| assert_eq!(server_message(body), expected);
        check(
            r#"{"error":{"message":"Invalid model","type":"invalid_request_error"}}"#,
            "Invalid model",
        );
        check(r#"{"error":"model not found"}"#, "model not found");
        check(
            r#"{"object":"error","message":"bad temperature"}"#,
            "bad temperature",
        );
        check(r#"{"detail":"Not Found"}"#, "Not Found");
        check("<html>502</html>", "<html>502</html>");
        check("", "(empty body)");
    }

    #[test]
    fn completions_map_content_usage_and_errors() {
        let ok = parse_completion(
            r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],
                "usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
        )
        .unwrap();
        assert_eq!(ok.content, "hi");
        assert_eq!(
            ok.usage,
            Some(Usage {
                input_tokens: 5,
                output_tokens: 2,
                cost_usd: 0.0,
                turns: 1
            })
        );
        assert!(matches!(
            parse_completion(r#"{"choices":[]}"#),
            Err(AgentError::Garbage { .. })
        ));
        assert!(matches!(
            parse_completion(r#"{"choices":[{"message":{"content":null,"refusal":"no"}}]}"#),
            Err(AgentError::Failed { message, .. }) if message == "model refused: no"
        ));
        assert!(matches!(
            parse_completion(r#"{"error":{"message":"overloaded"}}"#),
            Err(AgentError::Failed { message, .. }) if message.contains("overloaded")
        ));
        assert!(matches!(
            parse_completion("not json"),
            Err(AgentError::Garbage { snippet, .. }) if snippet == "not json"
        ));
    }
}
