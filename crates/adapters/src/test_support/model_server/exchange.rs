//! [`Exchange`]: a main request as a script function sees it, and how its
//! conversation is read in each wire protocol (the prompts, the tool
//! results of the current turn).

use serde_json::Value;

use super::Protocol;

/// A main request as a script function sees it ([`ModelServer::scripted`](super::ModelServer::scripted)).
#[derive(Debug, Clone)]
pub struct Exchange {
    pub(super) protocol: Protocol,
    /// The path with its query.
    pub path: String,
    /// The body as JSON.
    pub body: Value,
}

impl Exchange {
    /// The conversation so far: Responses `input`, Anthropic `messages`,
    /// Gemini `contents`, chat completions `messages`.
    fn conversation(&self) -> &[Value] {
        let key = match self.protocol {
            Protocol::OpenAiResponses => "input",
            Protocol::Anthropic => "messages",
            Protocol::Gemini => "contents",
            Protocol::OpenAiChat => "messages",
        };
        self.body
            .get(key)
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// The parts of a conversation item: Responses and Anthropic `content`
    /// blocks, Gemini `parts`.
    fn parts(item: &Value) -> &[Value] {
        item.get("content")
            .or_else(|| item.get("parts"))
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
    }

    /// The texts of a user prompt item, or `None` for any other item (the
    /// model's turns, tool calls, and user items that carry tool results,
    /// including the tool agent's text-protocol results).
    fn prompt_of(&self, item: &Value) -> Option<Vec<String>> {
        if item.get("role").and_then(Value::as_str) != Some("user") {
            return None;
        }
        if self.protocol == Protocol::OpenAiChat && is_text_tool_result(item) {
            return None;
        }
        match item.get("content").or_else(|| item.get("parts")) {
            Some(Value::String(text)) => Some(vec![text.clone()]),
            Some(Value::Array(parts)) => {
                let is_result = |part: &Value| {
                    matches!(
                        part.get("type").and_then(Value::as_str),
                        Some("tool_result" | "function_call_output")
                    ) || part.get("functionResponse").is_some()
                };
                if parts.iter().any(is_result) {
                    return None;
                }
                Some(
                    parts
                        .iter()
                        .filter_map(|part| part.get("text").and_then(Value::as_str))
                        .map(str::to_owned)
                        .collect(),
                )
            }
            _ => None,
        }
    }

    /// Every text the user side sent (the prompt the CLI built, with any
    /// context it adds), joined by new lines; tool results are left out. A
    /// resumed session's request carries the earlier prompts too.
    pub fn user_text(&self) -> String {
        self.conversation()
            .iter()
            .filter_map(|item| self.prompt_of(item))
            .flatten()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The user prompts of the conversation, one entry per prompt item, in
    /// order: more than one when the CLI resumed an earlier session (or
    /// adds its own context as a separate item first).
    pub fn prompts(&self) -> Vec<String> {
        self.conversation()
            .iter()
            .filter_map(|item| self.prompt_of(item))
            .map(|texts| texts.join("\n"))
            .collect()
    }

    /// The results of the tool calls the model made since the last user
    /// prompt, as text, in order (Responses `function_call_output`,
    /// Anthropic `tool_result`, Gemini `functionResponse`, chat `tool`
    /// messages and text-protocol results): their count is the step the
    /// current turn is at. A resumed session's earlier turns do not count.
    pub fn tool_results(&self) -> Vec<String> {
        let conversation = self.conversation();
        let start = conversation
            .iter()
            .rposition(|item| self.prompt_of(item).is_some())
            .map_or(0, |i| i + 1);
        let mut out = Vec::new();
        for item in &conversation[start..] {
            if item.get("type").and_then(Value::as_str) == Some("function_call_output") {
                out.push(text_of(item.get("output")));
            }
            if self.protocol == Protocol::OpenAiChat {
                if item.get("role").and_then(Value::as_str) == Some("tool")
                    || is_text_tool_result(item)
                {
                    out.push(text_of(item.get("content")));
                }
                continue;
            }
            for part in Self::parts(item) {
                if part.get("type").and_then(Value::as_str) == Some("tool_result") {
                    out.push(text_of(part.get("content")));
                } else if let Some(response) = part.get("functionResponse") {
                    out.push(text_of(response.get("response")));
                }
            }
        }
        out
    }
}

/// Whether a chat message is a tool result under the tool agent's text
/// protocol (a user message starting `Result of ` or `Protocol error:`).
fn is_text_tool_result(item: &Value) -> bool {
    item.get("role").and_then(Value::as_str) == Some("user")
        && item
            .get("content")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with("Result of ") || t.starts_with("Protocol error:"))
}

/// A JSON value as text: a string as itself, text blocks joined, anything
/// else as JSON.
fn text_of(value: Option<&Value>) -> String {
    match value {
        None => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| {
                b.get("text")
                    .and_then(Value::as_str)
                    .map_or_else(|| b.to_string(), str::to_owned)
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}
