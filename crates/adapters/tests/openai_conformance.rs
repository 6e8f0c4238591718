//! `OpenAiAgent` and the tool agent (`ToolAgent`, here on the tool loop's
//! role, `Execute`) pass the core `Agent` conformance suite against local
//! wiremock servers.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_adapters::openai::{OpenAiAgent, OpenAiConfig};
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_adapters::tool_agent::{ToolAgent, ToolAgentConfig};
use orchestrator_core::agent::Agent;
use orchestrator_core::conformance::agent::{AgentHarness, run_suite};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Starts one server per agent and keeps it alive as long as the harness.
struct Harness {
    servers: Mutex<Vec<MockServer>>,
    /// `max_retries` of the failing agent (its server always answers 500).
    failing_retries: u32,
    /// Build the tool agent instead of the plain one.
    tools: bool,
    /// The tool agent's working directory.
    workdir: tempfile::TempDir,
}

impl Harness {
    fn new(failing_retries: u32) -> Self {
        Self {
            servers: Mutex::new(Vec::new()),
            failing_retries,
            tools: false,
            workdir: tempfile::tempdir().unwrap(),
        }
    }

    fn tool_agent(failing_retries: u32) -> Self {
        Self {
            tools: true,
            ..Self::new(failing_retries)
        }
    }

    async fn agent(&self, response: ResponseTemplate, max_retries: u32) -> Arc<dyn Agent> {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(response)
            .mount(&server)
            .await;
        let config = OpenAiConfig::new(format!("{}/v1", server.uri()), "conformance")
            .with_api_key_env(None)
            .with_max_retries(max_retries)
            .with_backoff(Duration::from_millis(10), Duration::from_millis(20));
        self.servers.lock().unwrap().push(server);
        if self.tools {
            let agent = ToolAgent::new(
                config,
                ToolAgentConfig::default(),
                Arc::new(ProcessRunner::default()),
            )
            .unwrap();
            return Arc::new(agent);
        }
        Arc::new(OpenAiAgent::new(config).unwrap())
    }
}

fn answer(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}
    }))
}

#[async_trait]
impl AgentHarness for Harness {
    async fn answering(&self, text: &str) -> Arc<dyn Agent> {
        self.agent(answer(text), 0).await
    }

    async fn answering_json(&self, value: &serde_json::Value) -> Arc<dyn Agent> {
        self.agent(answer(&value.to_string()), 0).await
    }

    async fn failing(&self) -> Arc<dyn Agent> {
        let response = ResponseTemplate::new(500)
            .set_body_json(json!({"error": {"message": "internal error"}}));
        self.agent(response, self.failing_retries).await
    }

    async fn hanging(&self) -> Arc<dyn Agent> {
        self.agent(answer("never").set_delay(Duration::from_secs(120)), 0)
            .await
    }

    fn workdir(&self) -> PathBuf {
        if self.tools {
            return self.workdir.path().to_path_buf();
        }
        std::env::temp_dir()
    }

    fn grace(&self) -> Duration {
        Duration::from_secs(2)
    }
}

#[tokio::test]
async fn openai_agent_conforms_with_one_retry() {
    run_suite(&Harness::new(1)).await;
}

#[tokio::test]
async fn openai_agent_conforms_without_retries() {
    run_suite(&Harness::new(0)).await;
}

#[tokio::test]
async fn tool_agent_conforms_with_one_retry() {
    run_suite(&Harness::tool_agent(1)).await;
}

#[tokio::test]
async fn tool_agent_conforms_without_retries() {
    run_suite(&Harness::tool_agent(0)).await;
}
