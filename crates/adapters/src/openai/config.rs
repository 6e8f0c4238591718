//! The settings of an [`OpenAiAgent`](super::OpenAiAgent): [`OpenAiConfig`],
//! built by hand or from `[agent.openai]`, the redacted [`ApiKey`], and why
//! an agent could not be built ([`OpenAiError`]).

use std::fmt;
use std::time::Duration;

use crate::config::OpenAiSection;

use super::{DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL};
#[cfg(doc)]
use super::{DEFAULT_SYSTEM_PROMPT, OpenAiAgent};

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
