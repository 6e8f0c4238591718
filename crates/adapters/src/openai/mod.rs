//! [`OpenAiAgent`]: an [`Agent`] over any OpenAI-compatible chat-completions
//! endpoint (OpenAI, Ollama, vLLM, the llama.cpp server, …).
//!
//! One request becomes one `POST {base_url}/chat/completions`: a system
//! message (the configured prompt plus the request's role) and a user message
//! (the instruction, plus the request's `context` as a fenced JSON block).
//! When the request carries a schema, the call asks for a `json_schema`
//! response format and parses the answer into
//! [`AgentResponse::structured`]; validating it against the schema is left to
//! [`AgentExt::run_validated`](orchestrator_core::agent::AgentExt::run_validated),
//! like for every other backend.
//!
//! Transient failures (HTTP 429, 5xx, connection errors, a per-attempt
//! timeout) are retried with exponential backoff and jitter, honouring the
//! server's `Retry-After` (`retry-after-ms` too, as OpenAI sends it). The
//! request's time limit bounds the whole call, retries included: when it runs
//! out the call ends with [`AgentError::Timeout`]; when the server asks for a
//! wait that would overrun it, the call ends at once with the server's error
//! rather than sleeping into a certain timeout.
//!
//! The API key never appears in logs, errors or `Debug` output.
//!
//! The agent itself is here; its settings ([`OpenAiConfig`]) are in
//! `config`, the request body in `request`, the answer's parsing in
//! `response`, the HTTP exchange with its retries in `http` (its delays in
//! `retry`, with HTTP dates read by `httpdate`, and `jitter`).

use std::fmt;
use std::time::Instant;

use async_trait::async_trait;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse};

mod config;
mod http;
mod jitter;
mod request;
mod response;
mod retry;

pub use config::{ApiKey, OpenAiConfig, OpenAiError};
pub(crate) use http::{SendError, names_response_format};
pub(crate) use request::user_message;
pub(crate) use response::error_text;
pub use retry::{backoff_delay, parse_retry_after};

use jitter::Jitter;
use request::{ChatRequest, chat_endpoint};
use response::{Completion, parse_completion, parse_structured};

/// The environment variable the API key is read from unless configured
/// otherwise.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// The base URL used when none is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The system prompt used when none is configured.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a careful software engineer working on a code repository. \
     Follow the instruction exactly and answer concisely.";

/// An [`Agent`] that talks to an OpenAI-compatible chat-completions API.
pub struct OpenAiAgent {
    config: OpenAiConfig,
    api_key: Option<ApiKey>,
    endpoint: reqwest::Url,
    client: reqwest::Client,
    jitter: Jitter,
}

impl fmt::Debug for OpenAiAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiAgent")
            .field("endpoint", &self.endpoint.as_str())
            .field("model", &self.config.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_retries", &self.config.max_retries)
            .field("request_timeout", &self.config.request_timeout)
            .finish_non_exhaustive()
    }
}

impl OpenAiAgent {
    /// Builds the agent: checks the base URL, resolves the API key (explicit,
    /// else the configured environment variable, else none) and sets up the
    /// HTTP client.
    pub fn new(config: OpenAiConfig) -> Result<Self, OpenAiError> {
        let env_key = config
            .api_key_env
            .as_deref()
            .and_then(|var| std::env::var(var).ok());
        Self::with_env_key(config, env_key)
    }

    fn with_env_key(config: OpenAiConfig, env_key: Option<String>) -> Result<Self, OpenAiError> {
        if config.model.trim().is_empty() {
            return Err(OpenAiError::MissingModel);
        }
        let endpoint = chat_endpoint(&config.base_url)?;
        let api_key = config.api_key.clone().or_else(|| {
            env_key
                .map(|k| k.trim().to_owned())
                .filter(|k| !k.is_empty())
                .map(ApiKey::new)
        });
        let client = reqwest::Client::builder()
            .user_agent(concat!("orchestrator/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(OpenAiError::Client)?;
        Ok(Self {
            config,
            api_key,
            endpoint,
            client,
            jitter: Jitter::seeded(),
        })
    }

    /// The settings the agent was built with.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// Whether an API key was found (the key itself is never exposed here).
    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// The API key, for redacting it from transcripts.
    pub(crate) fn api_key(&self) -> Option<&ApiKey> {
        self.api_key.as_ref()
    }

    /// The chat-completions URL requests go to.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// Sends `body`, retrying transient failures, until `deadline`, and
    /// parses the completion. A server's refusal of the `response_format`
    /// is not transient: it fails at once.
    async fn complete(
        &self,
        body: &ChatRequest<'_>,
        deadline: Option<Instant>,
    ) -> Result<Completion, AgentError> {
        match self.send(body, deadline, &names_response_format).await {
            Ok(text) => parse_completion(&text),
            Err(SendError::Agent(error)) => Err(error),
            Err(SendError::Refused { status, message }) => Err(AgentError::Failed {
                message: format!("{} answered {status}: {message}", self.endpoint),
                exit_code: None,
            }),
        }
    }
}

#[async_trait]
impl Agent for OpenAiAgent {
    fn name(&self) -> &str {
        "openai"
    }

    /// A plain completion: it answers, it changes no file. The
    /// [`ToolAgent`](crate::tool_agent::ToolAgent) is the one that edits.
    fn changes_files(&self) -> bool {
        false
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        let body = self.body(&request);
        let started = Instant::now();
        let completion = match request.time_limit {
            Some(limit) => {
                match tokio::time::timeout(limit, self.complete(&body, Some(started + limit))).await
                {
                    Ok(result) => result?,
                    Err(_) => {
                        return Err(AgentError::Timeout {
                            seconds: limit.as_secs_f64(),
                        });
                    }
                }
            }
            None => self.complete(&body, None).await?,
        };
        tracing::debug!(
            endpoint = %self.endpoint,
            model = %self.config.model,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "chat completion finished"
        );
        let structured = match &request.schema {
            Some(_) => Some(parse_structured(&completion)?),
            None => None,
        };
        Ok(AgentResponse {
            text: completion.content,
            structured,
            files_changed: Vec::new(),
            usage: completion.usage,
            session: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_the_key() {
        let config = OpenAiConfig::new("http://127.0.0.1:1/v1", "m").with_api_key("sk-secret-123");
        assert!(!format!("{config:?}").contains("sk-secret-123"));
        let agent = OpenAiAgent::with_env_key(config, None).unwrap();
        let debug = format!("{agent:?}");
        assert!(!debug.contains("sk-secret-123"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
        let from_env = OpenAiAgent::with_env_key(
            OpenAiConfig::new("http://127.0.0.1:1/v1", "m"),
            Some("  sk-env ".into()),
        )
        .unwrap();
        assert_eq!(
            from_env.api_key.as_ref().map(ApiKey::expose),
            Some("sk-env")
        );
        let blank = OpenAiAgent::with_env_key(
            OpenAiConfig::new("http://127.0.0.1:1/v1", "m"),
            Some("  ".into()),
        )
        .unwrap();
        assert!(!blank.has_api_key());
    }
}
