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

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use orchestrator_core::agent::{
    Agent, AgentError, AgentRequest, AgentResponse, Usage, extract_json, snippet,
};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde::{Deserialize, Serialize};

use crate::config::OpenAiSection;

/// The environment variable the API key is read from unless configured
/// otherwise.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// The base URL used when none is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The system prompt used when none is configured.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a careful software engineer working on a code repository. \
     Follow the instruction exactly and answer concisely.";

/// An API key. Its `Debug` output is redacted and it has no `Display`, so it
/// cannot end up in a log line or an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, for the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Settings of an [`OpenAiAgent`].
///
/// Build one with [`OpenAiConfig::new`] and adjust the public fields, or from
/// the `[agent.openai]` section of `orchestrator.toml` with
/// [`OpenAiConfig::from_section`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OpenAiConfig {
    /// Base URL of the API, up to and including the version path
    /// (`https://api.openai.com/v1`, `http://localhost:11434/v1`).
    pub base_url: String,
    /// Model name sent with every request.
    pub model: String,
    /// An explicit API key; takes precedence over `api_key_env`.
    pub api_key: Option<ApiKey>,
    /// Environment variable to read the key from when `api_key` is `None`
    /// (default [`DEFAULT_API_KEY_ENV`]); `None` reads no variable. A missing
    /// or empty variable means "no key", which is fine for local servers.
    pub api_key_env: Option<String>,
    /// Sampling temperature; the server's default when `None`.
    pub temperature: Option<f32>,
    /// Maximum completion tokens (`max_tokens`); the server's default when
    /// `None`.
    pub max_tokens: Option<u32>,
    /// Time limit of one HTTP attempt (the request's own time limit bounds
    /// the whole call).
    pub request_timeout: Duration,
    /// Retries after the first attempt on 429, 5xx and connection errors.
    pub max_retries: u32,
    /// First backoff delay; doubles with each retry.
    pub initial_backoff: Duration,
    /// Cap on a computed backoff delay.
    pub max_backoff: Duration,
    /// Longest `Retry-After` the agent agrees to wait; a server asking for
    /// more ends the call with its error.
    pub max_retry_after: Duration,
    /// System prompt; [`DEFAULT_SYSTEM_PROMPT`] when `None`. The request's
    /// role is appended to it.
    pub system_prompt: Option<String>,
    /// A reasoning model (gpt-5, the o-series): the token cap is sent as
    /// `max_completion_tokens` instead of `max_tokens`, and no
    /// `temperature` is sent (those models answer HTTP 400 to either).
    pub reasoning_model: bool,
}

impl OpenAiConfig {
    /// Settings for `model` at `base_url`, with the defaults: key from
    /// `OPENAI_API_KEY`, 600 s per attempt, 3 retries, backoff from 500 ms
    /// capped at 30 s, `Retry-After` honoured up to 120 s.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            api_key_env: Some(DEFAULT_API_KEY_ENV.to_owned()),
            temperature: None,
            max_tokens: None,
            request_timeout: Duration::from_secs(600),
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
            system_prompt: None,
            reasoning_model: false,
        }
    }

    /// Settings from the `[agent.openai]` section of `orchestrator.toml`;
    /// what the section leaves out keeps its default (base URL
    /// [`DEFAULT_BASE_URL`]). A section without a model is an error.
    pub fn from_section(section: &OpenAiSection) -> Result<Self, OpenAiError> {
        let model = section.model.clone().ok_or(OpenAiError::MissingModel)?;
        let base_url = section
            .base_url
            .clone()
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        let mut config = Self::new(base_url, model);
        if let Some(env) = &section.api_key_env {
            config.api_key_env = Some(env.clone());
        }
        if let Some(secs) = section.timeout_secs {
            config.request_timeout = Duration::from_secs(secs);
        }
        if let Some(retries) = section.max_retries {
            config.max_retries = retries;
        }
        config.temperature = section.temperature;
        config.max_tokens = section.max_tokens;
        config.system_prompt = section.system_prompt.clone();
        config.reasoning_model = section.reasoning_model.unwrap_or(false);
        Ok(config)
    }

    /// Builder: use this key instead of the environment.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(key));
        self
    }

    /// Builder: read the key from `var` (`None`: read no variable).
    pub fn with_api_key_env(mut self, var: Option<&str>) -> Self {
        self.api_key_env = var.map(str::to_owned);
        self
    }

    /// Builder: retries after the first attempt.
    pub fn with_max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Builder: backoff start and cap.
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// Builder: per-attempt time limit.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Builder: system prompt.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Builder: treat the model as a reasoning model
    /// ([`OpenAiConfig::reasoning_model`]).
    pub fn with_reasoning_model(mut self, reasoning: bool) -> Self {
        self.reasoning_model = reasoning;
        self
    }

    /// The sampling and length fields every chat request carries:
    /// `(temperature, max_tokens, max_completion_tokens)`, following
    /// [`OpenAiConfig::reasoning_model`].
    pub(crate) fn sampling(&self) -> (Option<f32>, Option<u32>, Option<u32>) {
        if self.reasoning_model {
            (None, None, self.max_tokens)
        } else {
            (self.temperature, self.max_tokens, None)
        }
    }
}

/// Why an [`OpenAiAgent`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenAiError {
    /// The base URL does not parse or is not http(s).
    #[error("invalid openai base url {url:?}: {message}")]
    InvalidBaseUrl {
        /// The configured URL.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// No model was configured.
    #[error("no model configured for the openai agent (set [agent.openai] model or OPENAI_MODEL)")]
    MissingModel,
    /// The HTTP client could not be set up.
    #[error("failed to build the http client: {0}")]
    Client(#[source] reqwest::Error),
}

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

    fn body<'a>(&'a self, request: &'a AgentRequest) -> ChatRequest<'a> {
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

    /// Posts `body` to the chat-completions endpoint, retrying transient
    /// failures (429, 5xx, connection errors, an attempt's timeout) with
    /// backoff and `Retry-After` until `deadline`, and returns the body of
    /// the successful answer. An error answer for which `refused(status,
    /// body)` holds is neither retried nor classified: it comes back as
    /// [`SendError::Refused`] for the caller to negotiate (another response
    /// format, no native tools).
    pub(crate) async fn send(
        &self,
        body: &(dyn ErasedBody + Sync),
        deadline: Option<Instant>,
        refused: &(dyn Fn(StatusCode, &str) -> bool + Sync),
    ) -> Result<String, SendError> {
        let mut retry = 0u32;
        loop {
            let (error, retry_after) = match self.attempt(body, refused).await {
                Ok(text) => return Ok(text),
                Err(Attempt::Fatal(error)) => return Err(SendError::Agent(error)),
                Err(Attempt::Refused { status, message }) => {
                    return Err(SendError::Refused { status, message });
                }
                Err(Attempt::Transient { error, retry_after }) => (error, retry_after),
            };
            if retry >= self.config.max_retries {
                return Err(SendError::Agent(with_note(
                    error,
                    &format!("gave up after {} attempt(s)", retry + 1),
                )));
            }
            let wait = match retry_after {
                Some(wait) if wait > self.config.max_retry_after => {
                    return Err(SendError::Agent(with_note(
                        error,
                        &format!(
                            "server asked to wait {:.1}s, more than the {:.1}s allowed",
                            wait.as_secs_f64(),
                            self.config.max_retry_after.as_secs_f64()
                        ),
                    )));
                }
                Some(wait) => wait,
                None => backoff_delay(
                    self.config.initial_backoff,
                    self.config.max_backoff,
                    retry,
                    self.jitter.next_fraction(),
                ),
            };
            if let Some(deadline) = deadline
                && Instant::now() + wait >= deadline
            {
                return Err(SendError::Agent(with_note(
                    error,
                    &format!(
                        "a retry in {:.1}s would overrun the time limit",
                        wait.as_secs_f64()
                    ),
                )));
            }
            tracing::warn!(
                endpoint = %self.endpoint,
                retry = retry + 1,
                wait_ms = wait.as_millis() as u64,
                error = %error,
                "retrying chat completion"
            );
            tokio::time::sleep(wait).await;
            retry += 1;
        }
    }

    /// One HTTP attempt.
    async fn attempt(
        &self,
        body: &(dyn ErasedBody + Sync),
        refused: &(dyn Fn(StatusCode, &str) -> bool + Sync),
    ) -> Result<String, Attempt> {
        let json = body.to_json().map_err(|e| {
            Attempt::Fatal(AgentError::Failed {
                message: format!("failed to encode the chat request: {e}"),
                exit_code: None,
            })
        })?;
        let mut builder = self
            .client
            .post(self.endpoint.clone())
            .timeout(self.config.request_timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(json);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key.expose());
        }
        let response = builder.send().await.map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        let retry_after = retry_after(response.headers(), SystemTime::now());
        let text = response
            .text()
            .await
            .map_err(|e| self.transport_error(&e))?;
        if status.is_success() {
            return Ok(text);
        }
        if refused(status, &text) {
            return Err(Attempt::Refused {
                status: status.as_u16(),
                message: server_message(&text),
            });
        }
        let error = AgentError::Failed {
            message: format!(
                "{} answered {status}: {}",
                self.endpoint,
                server_message(&text)
            ),
            exit_code: None,
        };
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            Err(Attempt::Transient { error, retry_after })
        } else {
            Err(Attempt::Fatal(error))
        }
    }

    fn transport_error(&self, error: &reqwest::Error) -> Attempt {
        let error = if error.is_timeout() {
            AgentError::Timeout {
                seconds: self.config.request_timeout.as_secs_f64(),
            }
        } else {
            AgentError::Failed {
                message: format!(
                    "request to {} failed: {}",
                    self.endpoint,
                    error_chain(error)
                ),
                exit_code: None,
            }
        };
        Attempt::Transient {
            error,
            retry_after: None,
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

/// A request body, encoded on demand (object-safe, so one `send` serves
/// every body type).
pub(crate) trait ErasedBody {
    /// The body as JSON bytes.
    fn to_json(&self) -> serde_json::Result<Vec<u8>>;
}

impl<T: Serialize> ErasedBody for T {
    fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec(self)
    }
}

/// Why [`OpenAiAgent::send`] failed.
#[derive(Debug)]
pub(crate) enum SendError {
    /// The server refused the request in the way the caller's predicate
    /// recognises; not retried.
    Refused {
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// Any other failure, already classified.
    Agent(AgentError),
}

/// Whether an error answer refuses the `response_format`: a 400 or a 5xx
/// whose body names it (llama-cpp-python answers 500 "Input should be
/// 'text' or 'json_object'" to a `json_schema` format).
pub(crate) fn names_response_format(status: StatusCode, body: &str) -> bool {
    (status == StatusCode::BAD_REQUEST
        || status == StatusCode::UNPROCESSABLE_ENTITY
        || status.is_server_error())
        && ["response_format", "json_schema", "json_object"]
            .iter()
            .any(|name| body.contains(name))
}

/// The outcome of a failed attempt.
enum Attempt {
    /// Do not retry.
    Fatal(AgentError),
    /// The caller's predicate recognised a refusal; do not retry.
    Refused { status: u16, message: String },
    /// Retry, after `retry_after` when the server said so.
    Transient {
        error: AgentError,
        retry_after: Option<Duration>,
    },
}

/// What a successful completion carried.
#[derive(Debug)]
struct Completion {
    content: String,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

#[derive(Serialize)]
struct ChatRequest<'a> {
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

fn chat_endpoint(base_url: &str) -> Result<reqwest::Url, OpenAiError> {
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

fn parse_completion(body: &str) -> Result<Completion, AgentError> {
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
fn parse_structured(completion: &Completion) -> Result<serde_json::Value, AgentError> {
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

/// Appends `note` to the message of `error` when it has one.
fn with_note(error: AgentError, note: &str) -> AgentError {
    match error {
        AgentError::Failed { message, exit_code } => AgentError::Failed {
            message: format!("{message} ({note})"),
            exit_code,
        },
        other => other,
    }
}

/// `error` and its sources, joined: reqwest's own message is terse
/// ("error sending request"), the cause ("connection refused") is below it.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The wait a response asks for: `retry-after-ms` (milliseconds), else
/// `Retry-After` (seconds, or an HTTP date relative to `now`).
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, now))
}

/// Parses a `Retry-After` value: delay seconds (fractions tolerated) or an
/// HTTP date (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), which gives the
/// time left until then (zero when it has passed).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = parse_http_date(value)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs_f64();
    Some(Duration::from_secs_f64((at as f64 - now).max(0.0)))
}

/// Seconds since the Unix epoch of an IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`); the obsolete RFC 850 and asctime forms
/// are not accepted.
fn parse_http_date(value: &str) -> Option<i64> {
    let (_weekday, rest) = value.split_once(", ")?;
    let mut parts = rest.split(' ');
    let day: u32 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut clock = parts.next()?.split(':');
    let hour: i64 = clock.next()?.parse().ok()?;
    let minute: i64 = clock.next()?.parse().ok()?;
    let second: i64 = clock.next()?.parse().ok()?;
    if parts.next()? != "GMT" || parts.next().is_some() || clock.next().is_some() {
        return None;
    }
    if !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (Howard
/// Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The delay before retry number `retry` (0-based): `initial · 2^retry`,
/// capped at `max`, of which the upper half is scaled by `fraction` ∈ [0, 1)
/// ("equal jitter": never less than half the nominal delay, so retries
/// spread out without collapsing to zero).
pub fn backoff_delay(initial: Duration, max: Duration, retry: u32, fraction: f64) -> Duration {
    let nominal = initial
        .checked_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(max)
        .min(max);
    let half = nominal / 2;
    half + half.mul_f64(fraction.clamp(0.0, 1.0))
}

/// A tiny lock-free PRNG (SplitMix64) for backoff jitter: statistical
/// quality is plenty for spreading retries, and it needs no dependency.
struct Jitter(AtomicU64);

impl Jitter {
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    fn seeded() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        // Agents built in the same nanosecond still get different streams.
        static INSTANCES: AtomicU64 = AtomicU64::new(0);
        let instance = INSTANCES.fetch_add(1, Ordering::Relaxed);
        Self(AtomicU64::new(
            nanos ^ instance.wrapping_mul(Self::GAMMA).rotate_left(17),
        ))
    }

    fn next_u64(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(Self::GAMMA, Ordering::Relaxed)
            .wrapping_add(Self::GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in [0, 1).
    fn next_fraction(&self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::agent::Role;
    use serde_json::json;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = at(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        let check = |value: &str, expected: Option<Duration>| {
            assert_eq!(parse_retry_after(value, now), expected, "{value:?}");
        };
        check("0", Some(Duration::ZERO));
        check(" 7 ", Some(Duration::from_secs(7)));
        check("1.5", Some(Duration::from_millis(1500)));
        check("-1", None);
        check("soon", None);
        check("Sun, 06 Nov 1994 08:49:37 GMT", Some(Duration::ZERO));
        check(
            "Sun, 06 Nov 1994 08:50:07 GMT",
            Some(Duration::from_secs(30)),
        );
        check("Sun, 06 Nov 1994 08:00:00 GMT", Some(Duration::ZERO));
        check("Sun, 06 Nov 1994 08:49:37 PST", None);
        check("Sunday, 06-Nov-94 08:49:37 GMT", None);
    }

    #[test]
    fn http_dates_match_known_epochs() {
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2000 12:00:00 GMT"),
            Some(951_825_600)
        );
        assert_eq!(
            parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(1_445_412_480)
        );
        assert_eq!(parse_http_date("Wed, 21 Foo 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn days_from_civil_counts_every_day_once() {
        // Walking day by day from 1900 to 2100, the count goes up by one.
        let mut expected = days_from_civil(1900, 1, 1);
        for year in 1900..2100 {
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
            for month in 1..=12u32 {
                let len = match month {
                    2 if leap => 29,
                    2 => 28,
                    4 | 6 | 9 | 11 => 30,
                    _ => 31,
                };
                for day in 1..=len {
                    assert_eq!(days_from_civil(year, month, day), expected);
                    expected += 1;
                }
            }
        }
    }

    #[test]
    fn backoff_doubles_is_capped_and_keeps_half() {
        let initial = Duration::from_millis(500);
        let max = Duration::from_secs(30);
        assert_eq!(
            backoff_delay(initial, max, 0, 0.0),
            Duration::from_millis(250)
        );
        assert_eq!(
            backoff_delay(initial, max, 2, 0.0),
            Duration::from_millis(1000)
        );
        assert_eq!(backoff_delay(initial, max, 20, 0.0), max / 2);
        let top = backoff_delay(initial, max, u32::MAX, 0.999);
        assert!(top > max.mul_f64(0.99) && top <= max, "{top:?}");
        // Invariant over many jitter draws and retries: half ≤ delay ≤ nominal ≤ cap.
        let jitter = Jitter::seeded();
        for retry in 0..64 {
            let nominal = backoff_delay(initial, max, retry, 1.0);
            assert!(nominal <= max);
            for _ in 0..200 {
                let d = backoff_delay(initial, max, retry, jitter.next_fraction());
                assert!(d >= nominal / 2 && d <= nominal, "retry {retry}: {d:?}");
            }
        }
    }

    #[test]
    fn jitter_fractions_are_in_range_and_spread() {
        let jitter = Jitter(AtomicU64::new(42));
        let draws: Vec<f64> = (0..10_000).map(|_| jitter.next_fraction()).collect();
        assert!(draws.iter().all(|f| (0.0..1.0).contains(f)));
        let low = draws.iter().filter(|f| **f < 0.5).count();
        assert!((4_500..5_500).contains(&low), "{low} of 10000 below 0.5");
    }

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
