//! The HTTP exchange: one attempt at the chat-completions endpoint, and the
//! retry loop around it (transient failures, `Retry-After`, backoff with
//! jitter, the call's deadline).

use std::time::{Duration, Instant, SystemTime};

use orchestrator_core::agent::AgentError;
use reqwest::StatusCode;
use serde::Serialize;

use super::OpenAiAgent;
use super::response::server_message;
use super::retry::{backoff_delay, retry_after};

impl OpenAiAgent {
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
