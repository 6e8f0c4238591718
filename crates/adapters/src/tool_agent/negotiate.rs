//! What the server accepts, found out rather than assumed, and the text
//! protocol for servers without function calling.
//!
//! Two choices are negotiated, each at most one step at a time and kept for
//! the life of the agent (one orchestrator run):
//!
//! - the structured-answer format: `response_format` `json_schema`, then
//!   `{"type": "json_object", "schema": …}`, then the schema in the prompt
//!   only. A server's refusal (a 400/422 or a 5xx whose body names
//!   `response_format`, `json_schema` or `json_object`) moves to the next
//!   one; it is never retried as transient;
//! - tool calls: native `tools`/`tool_choice`, then the [text
//!   protocol](parse_text_reply). A refusal of `tools` (a 400/422/5xx whose
//!   body names `tool` or `function`) moves to the text protocol, and so does
//!   a model that answers a native request with a well-formed text action.
//!
//! Every move is logged (`tracing`, target `orchestrator_adapters::tool_agent`)
//! and written to the attempt's transcript.

use std::sync::Mutex;

use orchestrator_core::agent::{AgentError, Usage, snippet};
use reqwest::StatusCode;
use serde::Serialize;
use serde_json::{Value, json};

use crate::config::ToolCallMode;
use crate::openai::error_text;

/// How a structured answer is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FormatLevel {
    /// `{"type": "json_schema", "json_schema": {...}}`.
    JsonSchema,
    /// `{"type": "json_object", "schema": ...}` (llama.cpp, vLLM, Ollama
    /// constrain to the schema; others to any JSON object).
    JsonObject,
    /// No `response_format`: the schema is in the prompt, the answer is
    /// validated by us.
    Prompt,
}

impl FormatLevel {
    /// The next format to try after a refusal.
    pub fn next(self) -> Option<FormatLevel> {
        match self {
            FormatLevel::JsonSchema => Some(FormatLevel::JsonObject),
            FormatLevel::JsonObject => Some(FormatLevel::Prompt),
            FormatLevel::Prompt => None,
        }
    }

    /// The `response_format` value for `schema`, if any.
    pub fn response_format(self, schema: &Value) -> Option<Value> {
        match self {
            FormatLevel::JsonSchema => Some(json!({"type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": false}})),
            FormatLevel::JsonObject => Some(json!({"type": "json_object", "schema": schema})),
            FormatLevel::Prompt => None,
        }
    }
}

/// How tools are offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// Native function calling.
    Native,
    /// The text protocol.
    Text,
}

/// The choices negotiated so far, shared by every request of the agent.
#[derive(Debug)]
pub struct Negotiated {
    state: Mutex<(FormatLevel, ToolMode)>,
}

impl Negotiated {
    /// Starts at `json_schema` and the configured tool mode.
    pub fn new(tools: ToolCallMode) -> Self {
        let mode = match tools {
            ToolCallMode::Native => ToolMode::Native,
            ToolCallMode::Text => ToolMode::Text,
        };
        Self {
            state: Mutex::new((FormatLevel::JsonSchema, mode)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (FormatLevel, ToolMode)> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The current format.
    pub fn format(&self) -> FormatLevel {
        self.lock().0
    }

    /// The current tool mode.
    pub fn tools(&self) -> ToolMode {
        self.lock().1
    }

    /// After `refused` was refused: the format to use now, or `None` when
    /// there is nothing left to fall back to. A refusal of a format another
    /// request already moved away from does not move again.
    pub fn refuse_format(&self, refused: FormatLevel) -> Option<FormatLevel> {
        let mut state = self.lock();
        if state.0 != refused {
            return Some(state.0);
        }
        let next = refused.next()?;
        state.0 = next;
        tracing::info!(from = ?refused, to = ?next, "the server refused a response format; using the next one for the rest of the run");
        Some(next)
    }

    /// Native tool calls do not work with this server: use the text
    /// protocol for the rest of the run.
    pub fn use_text_protocol(&self, why: &str) {
        let mut state = self.lock();
        if state.1 == ToolMode::Native {
            state.1 = ToolMode::Text;
            tracing::info!(
                reason = why,
                "native tool calls unavailable; using the text protocol for the rest of the run"
            );
        }
    }
}

/// Whether an error answer refuses native tool calls.
pub fn names_tools(status: StatusCode, body: &str) -> bool {
    (status == StatusCode::BAD_REQUEST
        || status == StatusCode::UNPROCESSABLE_ENTITY
        || status.is_server_error())
        && ["tool", "function"].iter().any(|w| body.contains(w))
}

/// One tool call the model made.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The call's id (native), for the `tool` message answering it.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments (`Err` with the parse error when they were not JSON).
    pub args: Result<Value, String>,
}

/// A chat completion, as the loop needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The assistant message to echo back in the conversation: its role,
    /// content and tool calls (`id`, `type`, `function` only), without the
    /// extra fields some servers add (`annotations`, `reasoning_content`),
    /// which others refuse in a request.
    pub message: Value,
    /// Its text.
    pub content: String,
    /// Its native tool calls.
    pub calls: Vec<Call>,
    /// Token counts, when reported.
    pub usage: Option<Usage>,
}

/// Parses a chat-completions answer body.
pub fn parse_reply(body: &str) -> Result<Reply, AgentError> {
    let value: Value = serde_json::from_str(body).map_err(|e| AgentError::Garbage {
        message: format!("chat completion is not valid JSON: {e}"),
        snippet: snippet(body),
    })?;
    let Some(message) = value.pointer("/choices/0/message").cloned() else {
        if let Some(error) = value.get("error") {
            return Err(AgentError::Failed {
                message: format!("server reported an error: {}", error_text(error)),
                exit_code: None,
            });
        }
        return Err(AgentError::Garbage {
            message: "chat completion has no choices[0].message".into(),
            snippet: snippet(body),
        });
    };
    if let Some(refusal) = message.get("refusal").and_then(Value::as_str)
        && !refusal.is_empty()
    {
        return Err(AgentError::Failed {
            message: format!("model refused: {refusal}"),
            exit_code: None,
        });
    }
    let content = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let calls = tool_calls(&message);
    let usage = value.get("usage").map(|u| Usage {
        input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: u
            .get("completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        cost_usd: 0.0,
        turns: 1,
    });
    let echo = echo_message(&message, &calls);
    Ok(Reply {
        message: echo,
        content,
        calls,
        usage,
    })
}

/// The message's tool calls, each with its id (made up when missing), name
/// and arguments (an error saying why when they are not a JSON object).
fn tool_calls(message: &Value) -> Vec<Call> {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(i, call)| {
                    let function = call.get("function").unwrap_or(&Value::Null);
                    let args = match function.get("arguments") {
                        Some(Value::String(text)) if text.trim().is_empty() => Ok(json!({})),
                        Some(Value::String(text)) => serde_json::from_str(text)
                            .map_err(|e| format!("the arguments are not valid JSON: {e}")),
                        Some(Value::Object(map)) => Ok(Value::Object(map.clone())),
                        None | Some(Value::Null) => Ok(json!({})),
                        Some(other) => Err(format!("the arguments are not an object: {other}")),
                    };
                    Call {
                        id: call
                            .get("id")
                            .and_then(Value::as_str)
                            .map_or_else(|| format!("call_{i}"), str::to_owned),
                        name: function
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        args,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The assistant message as it goes back to the server in the next
/// request: its content, and its tool calls with our ids and the arguments
/// as a string, as the API takes them.
fn echo_message(message: &Value, calls: &[Call]) -> Value {
    let mut echo = json!({"role": "assistant", "content": message.get("content").cloned().unwrap_or(Value::Null)});
    if let Some(raw) = message.get("tool_calls").and_then(Value::as_array)
        && !raw.is_empty()
    {
        let clean: Vec<Value> = raw
            .iter()
            .enumerate()
            .map(|(i, call)| {
                let function = call.get("function").unwrap_or(&Value::Null);
                let arguments = match function.get("arguments") {
                    Some(Value::String(text)) => Value::String(text.clone()),
                    Some(other) => Value::String(other.to_string()),
                    None => Value::String("{}".into()),
                };
                json!({"id": calls.get(i).map(|c: &Call| c.id.clone()),
                    "type": "function",
                    "function": {"name": function.get("name").cloned().unwrap_or(Value::Null),
                        "arguments": arguments}})
            })
            .collect();
        echo["tool_calls"] = Value::Array(clean);
    }
    echo
}

/// A reply under the text protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum TextReply {
    /// One action: call `tool` with `args`.
    Action {
        /// The tool.
        tool: String,
        /// Its arguments.
        args: Value,
    },
    /// No action: the final answer.
    Final(String),
    /// An action block that breaks the protocol; the message says how.
    Malformed(String),
}

/// The fence that opens an action.
const FENCE: &str = "```action";

/// Parses a reply under the text protocol, strictly: at most one
/// ```` ```action ```` block, closed, holding exactly
/// `{"tool": "<name>", "args": {…}}`; no block means the final answer.
pub fn parse_text_reply(text: &str) -> TextReply {
    let opens: Vec<usize> = text.match_indices(FENCE).map(|(i, _)| i).collect();
    let Some(&open) = opens.first() else {
        return TextReply::Final(text.to_owned());
    };
    if opens.len() > 1 {
        return TextReply::Malformed(format!(
            "{} action blocks in one reply; send exactly one",
            opens.len()
        ));
    }
    let after = &text[open + FENCE.len()..];
    let Some(body_start) = after.find('\n') else {
        return TextReply::Malformed("the action block has no body".into());
    };
    if !after[..body_start].trim().is_empty() {
        return TextReply::Malformed("put nothing after ```action on its line".into());
    }
    let body = &after[body_start + 1..];
    let Some(close) = body.find("```") else {
        return TextReply::Malformed("the action block is not closed with ```".into());
    };
    let value: Value = match serde_json::from_str(body[..close].trim()) {
        Ok(v) => v,
        Err(e) => return TextReply::Malformed(format!("the action is not valid JSON: {e}")),
    };
    let Some(object) = value.as_object() else {
        return TextReply::Malformed("the action must be a JSON object".into());
    };
    if let Some(extra) = object.keys().find(|k| *k != "tool" && *k != "args") {
        return TextReply::Malformed(format!(
            "unexpected key {extra:?}: the action has only \"tool\" and \"args\""
        ));
    }
    let Some(tool) = object.get("tool").and_then(Value::as_str) else {
        return TextReply::Malformed("the action needs \"tool\": a tool name".into());
    };
    let args = match object.get("args") {
        Some(Value::Object(map)) => Value::Object(map.clone()),
        None => json!({}),
        Some(_) => return TextReply::Malformed("\"args\" must be a JSON object".into()),
    };
    TextReply::Action {
        tool: tool.to_owned(),
        args,
    }
}

/// The system-prompt section that explains the text protocol and the tools.
pub fn text_protocol_prompt(definitions: &[Value]) -> String {
    let mut text = String::from(
        "\n\nCall tools with this text protocol. To call a tool, reply with exactly one fenced block and nothing after it:\n\
         ```action\n{\"tool\": \"read_file\", \"args\": {\"path\": \"src/lib.rs\"}}\n```\n\
         The result comes back in the next message. One action per reply. To finish, reply without an action block.\n\nTools:",
    );
    for def in definitions {
        let function = def.get("function").unwrap_or(&Value::Null);
        let name = function.get("name").and_then(Value::as_str).unwrap_or("");
        let description = function
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let args = function
            .pointer("/parameters/properties")
            .map(Value::to_string)
            .unwrap_or_default();
        text.push_str(&format!("\n- {name}: {description} Arguments: {args}"));
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn text_replies_are_parsed_strictly() {
        let check = |text: &str, expected: TextReply| assert_eq!(parse_text_reply(text), expected);
        check(
            "Let me look.\n```action\n{\"tool\": \"read_file\", \"args\": {\"path\": \"a\"}}\n```",
            TextReply::Action {
                tool: "read_file".into(),
                args: json!({"path": "a"}),
            },
        );
        check("All done.", TextReply::Final("All done.".into()));
        check(
            "```json\n{\"tool\": \"x\"}\n```",
            TextReply::Final("```json\n{\"tool\": \"x\"}\n```".into()),
        );
        let malformed = |text: &str, fragment: &str| match parse_text_reply(text) {
            TextReply::Malformed(m) => assert!(m.contains(fragment), "{text}: {m}"),
            other => panic!("{text}: {other:?}"),
        };
        malformed(
            "```action\n{\"tool\": \"a\"}\n```\n```action\n{}\n```",
            "2 action blocks",
        );
        malformed("```action\n{\"tool\": \"a\"", "not closed");
        malformed("```action\nread_file a\n```", "not valid JSON");
        malformed("```action\n[1]\n```", "JSON object");
        malformed(
            "```action\n{\"tool\": \"a\", \"path\": \"b\"}\n```",
            "unexpected key",
        );
        malformed("```action\n{\"args\": {}}\n```", "needs \"tool\"");
        malformed(
            "```action\n{\"tool\": \"a\", \"args\": 1}\n```",
            "must be a JSON object",
        );
    }

    #[test]
    fn formats_step_down_once_per_refusal() {
        let n = Negotiated::new(ToolCallMode::Native);
        assert_eq!(n.format(), FormatLevel::JsonSchema);
        assert_eq!(
            n.refuse_format(FormatLevel::JsonSchema),
            Some(FormatLevel::JsonObject)
        );
        // A second, concurrent refusal of json_schema does not skip a level.
        assert_eq!(
            n.refuse_format(FormatLevel::JsonSchema),
            Some(FormatLevel::JsonObject)
        );
        assert_eq!(
            n.refuse_format(FormatLevel::JsonObject),
            Some(FormatLevel::Prompt)
        );
        assert_eq!(n.refuse_format(FormatLevel::Prompt), None);
        assert_eq!(n.tools(), ToolMode::Native);
        n.use_text_protocol("test");
        assert_eq!(n.tools(), ToolMode::Text);
    }

    #[test]
    fn replies_carry_calls_usage_and_errors() {
        let reply = parse_reply(
            r#"{"choices":[{"message":{"role":"assistant","content":null,"annotations":[],"reasoning_content":"hm","tool_calls":[
                {"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}},
                {"id":"c2","type":"function","function":{"name":"run","arguments":"{oops"}}]}}],
                "usage":{"prompt_tokens":7,"completion_tokens":3}}"#,
        )
        .unwrap();
        assert_eq!(reply.content, "");
        assert_eq!(reply.calls.len(), 2);
        assert_eq!(
            reply.message,
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "run", "arguments": "{oops"}}]})
        );
        assert_eq!(reply.calls[0].args, Ok(json!({"path": "a"})));
        assert!(reply.calls[1].args.is_err());
        assert_eq!(reply.usage.unwrap().input_tokens, 7);
        assert!(matches!(
            parse_reply(r#"{"error":{"message":"overloaded"}}"#),
            Err(AgentError::Failed { message, .. }) if message.contains("overloaded")
        ));
        assert!(matches!(
            parse_reply("nope"),
            Err(AgentError::Garbage { .. })
        ));
    }
}
