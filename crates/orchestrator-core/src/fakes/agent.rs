//! [`FakeAgent`]: an agent whose answers are scripted per request id.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::lock;
use crate::agent::{Agent, AgentError, AgentRequest, AgentResponse};

/// One scripted reaction of a [`FakeAgent`].
#[derive(Debug, Clone)]
pub enum Reply {
    /// Answer with this response.
    Answer(AgentResponse),
    /// Write these files (path relative to the request's working directory,
    /// content; `None` deletes), then answer with the response. The response's
    /// `files_changed` is filled in with the paths.
    Edit {
        /// Files to write or delete.
        files: Vec<(String, Option<String>)>,
        /// The answer after editing.
        response: AgentResponse,
    },
    /// Fail with this error.
    Fail(AgentError),
    /// Never answer: wait until the request's time limit (or 1 hour) and then
    /// report a timeout, like a hung backend behind a timeout wrapper.
    Hang,
}

impl Reply {
    /// Plain text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Reply::Answer(AgentResponse::text(text))
    }

    /// Structured answer.
    pub fn json(value: serde_json::Value) -> Self {
        Reply::Answer(AgentResponse::structured(value))
    }

    /// Failure with a message.
    pub fn fail(message: impl Into<String>) -> Self {
        Reply::Fail(AgentError::Failed {
            message: message.into(),
            exit_code: None,
        })
    }
}

/// An [`Agent`] scripted per request id.
///
/// Each id has a queue of replies: every call pops the next one, and the last
/// reply repeats once the queue is down to one. Calls for an id with no script
/// get the fallback reply, or [`AgentError::Unsupported`] when there is none.
/// Every request is recorded, so tests can check what the flow asked.
#[derive(Debug)]
pub struct FakeAgent {
    name: String,
    scripts: Mutex<HashMap<String, VecDeque<Reply>>>,
    fallback: Option<Reply>,
    calls: Mutex<Vec<AgentRequest>>,
    answers_only: bool,
}

impl FakeAgent {
    /// An agent with no scripts.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            scripts: Mutex::new(HashMap::new()),
            fallback: None,
            calls: Mutex::new(Vec::new()),
            answers_only: false,
        }
    }

    /// Builder: the agent says it cannot change files
    /// ([`Agent::changes_files`] is `false`), like a plain chat completion.
    pub fn answers_only(mut self) -> Self {
        self.answers_only = true;
        self
    }

    /// Builder: queue `reply` for requests with id `id`.
    pub fn on(self, id: impl Into<String>, reply: Reply) -> Self {
        lock(&self.scripts)
            .entry(id.into())
            .or_default()
            .push_back(reply);
        self
    }

    /// Builder: the reply for ids with no script.
    pub fn otherwise(mut self, reply: Reply) -> Self {
        self.fallback = Some(reply);
        self
    }

    /// Every request received, in order.
    pub fn calls(&self) -> Vec<AgentRequest> {
        lock(&self.calls).clone()
    }

    /// How many requests with id `id` were received.
    pub fn calls_for(&self, id: &str) -> usize {
        lock(&self.calls).iter().filter(|r| r.id == id).count()
    }

    fn next_reply(&self, id: &str) -> Option<Reply> {
        let mut scripts = lock(&self.scripts);
        match scripts.get_mut(id) {
            Some(queue) if queue.len() > 1 => queue.pop_front(),
            Some(queue) => queue.front().cloned(),
            None => self.fallback.clone(),
        }
    }
}

fn write_files(workdir: &Path, files: &[(String, Option<String>)]) -> Result<(), AgentError> {
    for (rel, content) in files {
        let path = workdir.join(rel);
        let result = match content {
            Some(text) => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| AgentError::Failed {
                        message: format!("fake agent failed to create {}: {e}", parent.display()),
                        exit_code: None,
                    })?;
                }
                std::fs::write(&path, text)
            }
            None => std::fs::remove_file(&path),
        };
        result.map_err(|e| AgentError::Failed {
            message: format!("fake agent failed to edit {}: {e}", path.display()),
            exit_code: None,
        })?;
    }
    Ok(())
}

#[async_trait]
impl Agent for FakeAgent {
    fn name(&self) -> &str {
        &self.name
    }

    fn changes_files(&self) -> bool {
        !self.answers_only
    }

    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        lock(&self.calls).push(request.clone());
        let reply = self
            .next_reply(&request.id)
            .ok_or_else(|| AgentError::Unsupported {
                reason: format!(
                    "fake agent `{}` has no script for `{}`",
                    self.name, request.id
                ),
            })?;
        match reply {
            Reply::Answer(response) => Ok(response),
            Reply::Edit {
                files,
                mut response,
            } => {
                write_files(&request.workdir, &files)?;
                response.files_changed = files.into_iter().map(|(p, _)| p).collect();
                Ok(response)
            }
            Reply::Fail(error) => Err(error),
            Reply::Hang => {
                let limit = request.time_limit.unwrap_or(Duration::from_secs(3600));
                tokio::time::sleep(limit).await;
                Err(AgentError::Timeout {
                    seconds: limit.as_secs_f64(),
                })
            }
        }
    }
}
