//! One request to GitLab's REST API v4, and the retries its rate limits
//! ask for.

use std::time::Duration;

use orchestrator_core::forge::ForgeError;
use serde_json::Value;

use super::{GitlabForge, GitlabToken, error_message};

/// How many times a rate-limited (`429`) request is sent again.
const RATE_LIMIT_RETRIES: u32 = 4;

/// The longest a request may spend waiting on rate limits, in all.
const RATE_LIMIT_BUDGET: Duration = Duration::from_secs(120);

/// Why one attempt got no answer to use.
pub(super) enum Refused {
    /// `429`: over a rate limit; `wait` is how long the forge asked for
    /// (`None` when its `Retry-After` is missing or unreadable).
    RateLimited {
        error: ForgeError,
        wait: Option<Duration>,
    },
    /// Anything else: not retried.
    Other(ForgeError),
}

impl GitlabForge {
    /// One request; the body on success, an explained error otherwise. A
    /// `429` (GitLab's rate limits) is retried after the `Retry-After` it
    /// names, or a backoff when it names none, at most
    /// [`RATE_LIMIT_RETRIES`] times and [`RATE_LIMIT_BUDGET`] in all; a 429
    /// is answered before the request is processed, so retrying a write is
    /// safe.
    pub(super) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(reqwest::header::HeaderMap, String), ForgeError> {
        let started = std::time::Instant::now();
        let mut retries = 0;
        loop {
            let (mut error, wait) = match self.send_once(method.clone(), path, body).await {
                Ok(answer) => return Ok(answer),
                Err(Refused::Other(error)) => return Err(error),
                Err(Refused::RateLimited { error, wait }) => (error, wait),
            };
            let wait = wait.unwrap_or_else(|| {
                crate::openai::backoff_delay(
                    Duration::from_secs(1),
                    Duration::from_secs(30),
                    retries,
                    0.5,
                )
            });
            if retries >= RATE_LIMIT_RETRIES || started.elapsed() + wait > RATE_LIMIT_BUDGET {
                if let ForgeError::Http { message, .. } = &mut error {
                    message.push_str(&format!(
                        " (rate limited: gave up after {retries} retries in {} s; \
                         the next wait asked for was {} s)",
                        started.elapsed().as_secs(),
                        wait.as_secs()
                    ));
                }
                return Err(error);
            }
            retries += 1;
            tracing::info!(%error, ?wait, retries, "gitlab rate limit: waiting");
            tokio::time::sleep(wait).await;
        }
    }

    /// One attempt of [`GitlabForge::send`].
    async fn send_once(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(reqwest::header::HeaderMap, String), Refused> {
        let url = format!("{}{path}", self.location.api_base());
        let (name, value) = self.token.header();
        let mut request = self
            .client
            .request(method.clone(), &url)
            .header(name, value);
        if let Some(body) = body {
            request = request.json(body);
        }
        let what = format!("{method} {url}");
        let transport = |e: reqwest::Error| {
            Refused::Other(ForgeError::Transport {
                what: what.clone(),
                message: e.to_string(),
            })
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.map_err(transport)?;
        if status.is_success() {
            return Ok((headers, text));
        }
        let mut message = error_message(&text);
        if status == reqwest::StatusCode::NOT_FOUND && matches!(self.token, GitlabToken::Job(_)) {
            message.push_str(
                " (a CI job token may not read merge requests, pipelines or discussions: \
                 set GITLAB_TOKEN to an access token with the `api` scope)",
            );
        } else if status == reqwest::StatusCode::UNAUTHORIZED {
            message.push_str(" (check GITLAB_TOKEN)");
        }
        let error = ForgeError::Http {
            method: method.to_string(),
            url,
            status: status.as_u16(),
            message,
        };
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            let wait = headers
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| crate::openai::parse_retry_after(v, std::time::SystemTime::now()));
            return Err(Refused::RateLimited { error, wait });
        }
        Err(Refused::Other(error))
    }
}
