//! The request: the chat-completions URL, the system and user messages,
//! and the JSON body of one call.

use orchestrator_core::agent::AgentRequest;
use serde::Serialize;

use super::config::OpenAiError;
use super::{DEFAULT_SYSTEM_PROMPT, OpenAiAgent};

impl OpenAiAgent {
    /// The chat request for `request`.
    pub(super) fn body<'a>(&'a self, request: &'a AgentRequest) -> ChatRequest<'a> {
        let (temperature, max_tokens, max_completion_tokens) = self.config.sampling();
        ChatRequest {
            model: &self.config.model,
            messages: vec![
                Message {
                    role: "system",
                    content: system_message(self.config.system_prompt.as_deref(), request),
                },
                Message {
                    role: "user",
                    content: user_message(request),
                },
            ],
            temperature,
            max_tokens,
            max_completion_tokens,
            response_format: request.schema.as_ref().map(|schema| ResponseFormat {
                kind: "json_schema",
                json_schema: JsonSchemaFormat {
                    name: "answer",
                    schema,
                    strict: false,
                },
            }),
            stream: false,
        }
    }
}

#[derive(Serialize)]
pub(super) struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat<'a>>,
    stream: bool,
}

#[derive(Serialize)]
struct Message {
    role: &'static str,
    content: String,
}

#[derive(Serialize)]
struct ResponseFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    json_schema: JsonSchemaFormat<'a>,
}

#[derive(Serialize)]
struct JsonSchemaFormat<'a> {
    name: &'static str,
    schema: &'a serde_json::Value,
    strict: bool,
}

/// The chat-completions URL below `base_url` (http or https only).
pub(super) fn chat_endpoint(base_url: &str) -> Result<reqwest::Url, OpenAiError> {
    let invalid = |message: String| OpenAiError::InvalidBaseUrl {
        url: base_url.to_owned(),
        message,
    };
    let url = reqwest::Url::parse(&format!(
        "{}/chat/completions",
        base_url.trim().trim_end_matches('/')
    ))
    .map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "scheme {:?} is not http or https",
            url.scheme()
        )));
    }
    Ok(url)
}

fn system_message(prompt: Option<&str>, request: &AgentRequest) -> String {
    let mut text = prompt
        .unwrap_or(DEFAULT_SYSTEM_PROMPT)
        .trim_end()
        .to_owned();
    text.push_str(&format!(
        "\n\nYour role in this task: {}.",
        request.role.as_str()
    ));
    if let Some(schema) = &request.schema {
        text.push_str(
            "\nAnswer with a single JSON value and nothing else; it must satisfy this JSON schema:\n",
        );
        text.push_str(&schema.to_string());
    }
    text
}

pub(crate) fn user_message(request: &AgentRequest) -> String {
    let mut text = request.instruction.clone();
    if !request.context.is_null() {
        let context = serde_json::to_string_pretty(&request.context)
            .unwrap_or_else(|_| request.context.to_string());
        text.push_str("\n\nContext:\n```json\n");
        text.push_str(&context);
        text.push_str("\n```");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::agent::Role;
    use serde_json::json;

    #[test]
    fn messages_carry_role_instruction_and_context() {
        let request = AgentRequest::new("F1", Role::Fix, "Fix the bug.", "/repo")
            .with_context(json!({"file": "src/lib.rs", "line": 3}))
            .with_schema(json!({"type": "object"}));
        let system = system_message(Some("Be brief."), &request);
        assert_eq!(
            system,
            "Be brief.\n\nYour role in this task: fix.\nAnswer with a single JSON value and \
             nothing else; it must satisfy this JSON schema:\n{\"type\":\"object\"}"
        );
        assert_eq!(
            user_message(&request),
            "Fix the bug.\n\nContext:\n```json\n{\n  \"file\": \"src/lib.rs\",\n  \"line\": 3\n}\n```"
        );
        let plain = AgentRequest::new("E1", Role::Explore, "Look around.", "/repo");
        assert_eq!(user_message(&plain), "Look around.");
        assert!(system_message(None, &plain).starts_with(DEFAULT_SYSTEM_PROMPT));
    }

    #[test]
    fn base_urls_are_checked_and_joined() {
        assert_eq!(
            chat_endpoint("http://127.0.0.1:8080/v1/").unwrap().as_str(),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert!(matches!(
            chat_endpoint("ftp://example.invalid/v1"),
            Err(OpenAiError::InvalidBaseUrl { .. })
        ));
        assert!(matches!(
            chat_endpoint("not a url"),
            Err(OpenAiError::InvalidBaseUrl { .. })
        ));
    }
}
