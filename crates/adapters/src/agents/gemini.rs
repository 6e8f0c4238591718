//! The `gemini -p … -o json` dialect.
//!
//! Gemini CLI prints one JSON object: `response` (the answer), `stats`
//! (`models.<name>.tokens.{prompt,candidates}`, `models.<name>.api.totalRequests`,
//! …) and, when the run failed, `error` (`type`, `message`, `code`). Its exit
//! codes name the failure (see [`exit_code_error`]). On failure its error
//! object is written to stderr, pretty-printed: it is found there (the
//! first JSON object), else the end of stderr is reported. An API error
//! with status 401 or 403, whatever the exit code, is an authentication
//! error ([`AgentError::Unavailable`], not retried).

use orchestrator_core::agent::{AgentError, AgentResponse, Usage, extract_json, snippet};
use serde_json::Value;

use super::raw::{RawOutput, authentication_error};

/// The answer and the raw statistics Gemini reported.
#[derive(Debug, Clone, PartialEq)]
pub struct GeminiOutput {
    /// The mapped answer.
    pub response: AgentResponse,
    /// `stats` as printed, for callers that want more than the usage.
    pub stats: Option<Value>,
}

/// What to set when the endpoint refuses gemini's credentials.
const AUTH_HINT: &str = "set GEMINI_API_KEY (or the credentials of the auth method selected in \
     ~/.gemini/settings.json, `security.auth.selectedType`)";

/// The typed error for a Gemini CLI exit code, or `None` for codes without a
/// documented meaning: 41 authentication, 44 sandbox, 52 configuration and
/// 55 untrusted workspace are [`AgentError::Unavailable`] (a retry cannot
/// help), 53 (turn limit) is [`AgentError::Budget`], 130 is
/// [`AgentError::Cancelled`], and 42 (input) and 54 (tool execution) are
/// [`AgentError::Failed`].
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
    let unavailable = |what: &str| AgentError::Unavailable {
        message: with(what),
    };
    Some(match code {
        41 => authentication_error("gemini", &with("exit 41"), AUTH_HINT),
        44 => unavailable("gemini could not start its sandbox (exit 44)"),
        52 => unavailable("gemini configuration error (exit 52)"),
        55 => unavailable(
            "gemini refused to run in an untrusted folder (exit 55; pass --skip-trust or set GEMINI_CLI_TRUST_WORKSPACE=true)",
        ),
        42 => failed("gemini rejected the input (exit 42)"),
        53 => AgentError::Budget {
            message: with("gemini exceeded its turn limit (exit 53)"),
        },
        54 => failed("gemini tool execution failed (exit 54)"),
        130 => AgentError::Cancelled,
        _ => return None,
    })
}

/// The `error` object of gemini's JSON output, as one line of text, and its
/// numeric `code` (an HTTP status for API errors).
fn error_detail(object: &Value) -> Option<(String, Option<i64>)> {
    let e = object.get("error").filter(|e| !e.is_null())?;
    let message = e.get("message").and_then(Value::as_str).unwrap_or_default();
    let text = match e.get("type").and_then(Value::as_str) {
        Some(kind) if !message.is_empty() => format!("{kind}: {message}"),
        Some(kind) => kind.to_owned(),
        None if !message.is_empty() => message.to_owned(),
        None => e.to_string(),
    };
    Some((text, e.get("code").and_then(Value::as_i64)))
}

/// Whether an error is the endpoint refusing the credentials.
fn is_auth_failure(detail: &str, status: Option<i64>) -> bool {
    matches!(status, Some(401 | 403))
        || detail.contains("API key not valid")
        || detail.contains("UNAUTHENTICATED")
        || detail.contains("PERMISSION_DENIED")
}

/// The end of `text`, at most `max` characters.
fn tail(text: &str, max: usize) -> &str {
    let start = text.char_indices().rev().nth(max).map_or(0, |(i, _)| i + 1);
    &text[start..]
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

/// The failure a successful-looking run reports in its `warnings`: gemini
/// exits 0 when it stops itself — its loop detection ("Loop detected,
/// stopping execution"), the session turn limit ("Maximum session turns
/// exceeded"), both [`AgentError::Budget`], not retried — or when a hook
/// stops the agent ("Agent execution stopped: …", [`AgentError::Failed`]).
/// The answer of such a run is whatever the model had said so far, not
/// the end of the work. Other warnings are only logged.
fn stopped_by_warning(object: &Value) -> Option<AgentError> {
    let warnings = object.get("warnings").and_then(Value::as_array)?;
    let mut stop = None;
    for warning in warnings.iter().filter_map(Value::as_str) {
        if warning.starts_with("Loop detected") || warning.starts_with("Maximum session turns") {
            stop.get_or_insert(AgentError::Budget {
                message: format!("gemini stopped itself: {warning}"),
            });
        } else if warning.starts_with("Agent execution stopped") {
            stop.get_or_insert(AgentError::Failed {
                message: format!("gemini: {warning}"),
                exit_code: Some(0),
            });
        } else {
            tracing::warn!(warning, "gemini warned");
        }
    }
    stop
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

    // Errors go to stderr as pretty-printed JSON; stdout may hold one too.
    let error = object
        .as_ref()
        .and_then(error_detail)
        .or_else(|| extract_json(&raw.stderr).as_ref().and_then(error_detail));

    if let Some(code) = raw.code
        && code != 0
    {
        let (detail, status) =
            error.unwrap_or_else(|| (tail(raw.stderr.trim(), 1000).trim().to_owned(), None));
        if code != 41 && is_auth_failure(&detail, status) {
            return Err(authentication_error(
                "gemini",
                &format!("exit {code}: {detail}"),
                AUTH_HINT,
            ));
        }
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
    if let Some((detail, status)) = error {
        if is_auth_failure(&detail, status) {
            return Err(authentication_error("gemini", &detail, AUTH_HINT));
        }
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
    if let Some(err) = stopped_by_warning(&object) {
        return Err(err);
    }
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
            session: object
                .get("session_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_gemini_stopped_itself_is_not_an_answer() {
        let out = |warnings: &str| {
            raw(
                &format!(
                    r#"{{"session_id": "s", "response": "I will read it again.", "warnings": [{warnings}]}}"#
                ),
                0,
            )
        };
        for (warning, budget) in [
            ("Loop detected, stopping execution", true),
            ("Maximum session turns exceeded", true),
            ("Agent execution stopped: the hook said no", false),
        ] {
            let err = parse(&out(&format!("\"{warning}\"")), false).unwrap_err();
            assert_eq!(matches!(err, AgentError::Budget { .. }), budget, "{err:?}");
            assert!(err.to_string().contains(warning), "{err}");
            assert!(!err.is_transient() || !budget, "{err:?}");
        }
        let fine = parse(&out("\"Retrying after a transient error\""), false).unwrap();
        assert_eq!(fine.response.text, "I will read it again.");
        assert_eq!(fine.response.session.as_deref(), Some("s"));
    }

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
    fn the_pretty_printed_error_on_stderr_is_the_message() {
        let failed = RawOutput {
            code: Some(1),
            stdout: String::new(),
            stderr: "Some warning\n{\n  \"error\": {\n    \"type\": \"Error\",\n    \"message\": \"model not found\",\n    \"code\": 404\n  }\n}\n".into(),
        };
        assert_eq!(
            parse(&failed, false).unwrap_err(),
            AgentError::Failed {
                message: "gemini failed (exit 1): Error: model not found".into(),
                exit_code: Some(1)
            }
        );
    }

    #[test]
    fn configuration_exits_are_not_transient_and_the_turn_limit_is_a_budget() {
        for code in [41, 44, 52, 55] {
            let err = exit_code_error(code, "x").unwrap();
            assert!(
                matches!(err, AgentError::Unavailable { .. }),
                "{code}: {err:?}"
            );
        }
        assert!(matches!(
            exit_code_error(53, ""),
            Some(AgentError::Budget { .. })
        ));
        assert!(
            exit_code_error(41, "")
                .unwrap()
                .to_string()
                .contains("authentication")
        );
    }

    #[test]
    fn undocumented_exit_codes_have_no_typed_error() {
        assert_eq!(exit_code_error(1, "x"), None);
        assert_eq!(exit_code_error(130, ""), Some(AgentError::Cancelled));
    }
}
