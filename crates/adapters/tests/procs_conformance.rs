//! The core conformance suites run against the real process adapters:
//! CommandTestRunner (`test_runner`), ProcessRunner (`command`), and
//! ProcessAgent (`agent`) — generic and each preset (claude, codex, gemini)
//! driven through the fake CLIs.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod procs_support;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_adapters::agents::{Dialect, ProcessAgent};
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_adapters::test_runner::CommandTestRunner;
use orchestrator_core::agent::Agent;
use orchestrator_core::conformance::agent::AgentHarness;
use orchestrator_core::conformance::test_runner::TestRunnerHarness;
use orchestrator_core::test_runner::TestRunner;
use procs_support::FakeCli;
use serde_json::{Value, json};

struct CommandTestRunnerHarness {
    work: tempfile::TempDir,
}

#[async_trait]
impl TestRunnerHarness for CommandTestRunnerHarness {
    async fn passing(&self) -> Arc<dyn TestRunner> {
        Arc::new(CommandTestRunner::shell(
            "echo 'running {pattern}'; echo '3 passed, 0 failed'",
        ))
    }
    async fn failing(&self) -> Arc<dyn TestRunner> {
        Arc::new(CommandTestRunner::argv([
            "sh",
            "-c",
            "echo '2 passed, 1 failed'; exit 1",
        ]))
    }
    async fn hanging(&self) -> Arc<dyn TestRunner> {
        Arc::new(
            CommandTestRunner::shell("sleep 1000 & sleep 1000").grace(Duration::from_millis(500)),
        )
    }
    fn workdir(&self) -> PathBuf {
        self.work.path().to_path_buf()
    }
}

#[tokio::test]
async fn command_test_runner_conforms() {
    let harness = CommandTestRunnerHarness {
        work: tempfile::tempdir().unwrap(),
    };
    orchestrator_core::conformance::test_runner::run_suite(&harness).await;
}

/// `ProcessRunner` passes the core `CommandRunner` conformance suite with
/// real processes.
#[tokio::test]
async fn process_runner_meets_the_command_contract() {
    orchestrator_core::conformance::command::run_suite(
        &ProcessRunner::default(),
        std::time::Duration::from_secs(5),
    )
    .await;
}

/// A generic ProcessAgent built from `sh` one-liners.
struct GenericAgentHarness {
    work: tempfile::TempDir,
}

#[async_trait]
impl AgentHarness for GenericAgentHarness {
    async fn answering(&self, text: &str) -> Arc<dyn Agent> {
        Arc::new(ProcessAgent::new(
            "generic",
            "sh",
            ["-c", r#"cat > /dev/null; printf '%s\n' "$0""#, text],
        ))
    }
    async fn answering_json(&self, value: &Value) -> Arc<dyn Agent> {
        Arc::new(
            ProcessAgent::new(
                "generic-json",
                "sh",
                [
                    "-c",
                    r#"cat > /dev/null; printf '%s' "$0""#,
                    &value.to_string(),
                ],
            )
            .dialect(Dialect::Json),
        )
    }
    async fn failing(&self) -> Arc<dyn Agent> {
        Arc::new(ProcessAgent::new(
            "generic",
            "sh",
            ["-c", "echo 'backend down' >&2; exit 1"],
        ))
    }
    async fn hanging(&self) -> Arc<dyn Agent> {
        Arc::new(
            ProcessAgent::new("generic", "sh", ["-c", "sleep 1000 & sleep 1000"])
                .grace(Duration::from_millis(500)),
        )
    }
    fn workdir(&self) -> PathBuf {
        self.work.path().to_path_buf()
    }
}

#[tokio::test]
async fn generic_process_agent_conforms() {
    let harness = GenericAgentHarness {
        work: tempfile::tempdir().unwrap(),
    };
    orchestrator_core::conformance::agent::run_suite(&harness).await;
}

/// How a preset's CLI prints a text or JSON answer.
type Render = fn(text: &str, json: Option<&Value>) -> String;

/// A preset run against its fake CLI, which prints output rendered per
/// request of the suite.
struct PresetHarness {
    fake: FakeCli,
    work: tempfile::TempDir,
    preset: fn() -> ProcessAgent,
    render: Render,
    fixtures: AtomicUsize,
}

impl PresetHarness {
    fn new(name: &str, preset: fn() -> ProcessAgent, render: Render) -> Self {
        Self {
            fake: FakeCli::new(&[name]),
            work: tempfile::tempdir().unwrap(),
            preset,
            render,
            fixtures: AtomicUsize::new(0),
        }
    }

    fn printing(&self, output: String) -> Arc<dyn Agent> {
        let n = self.fixtures.fetch_add(1, Ordering::Relaxed);
        let path = self.fake.root.path().join(format!("answer-{n}.out"));
        std::fs::write(&path, output).unwrap();
        Arc::new(
            self.fake
                .agent((self.preset)(), "fixture")
                .env("FAKE_FIXTURE", &path),
        )
    }
}

#[async_trait]
impl AgentHarness for PresetHarness {
    async fn answering(&self, text: &str) -> Arc<dyn Agent> {
        self.printing((self.render)(text, None))
    }
    async fn answering_json(&self, value: &Value) -> Arc<dyn Agent> {
        self.printing((self.render)(&value.to_string(), Some(value)))
    }
    async fn failing(&self) -> Arc<dyn Agent> {
        Arc::new(self.fake.agent((self.preset)(), "stderr"))
    }
    async fn hanging(&self) -> Arc<dyn Agent> {
        Arc::new(
            self.fake
                .agent((self.preset)(), "grandchild")
                .grace(Duration::from_millis(500)),
        )
    }
    fn workdir(&self) -> PathBuf {
        self.work.path().to_path_buf()
    }
}

#[tokio::test]
async fn claude_preset_conforms() {
    let harness = PresetHarness::new("claude", ProcessAgent::claude, |text, json| {
        let mut out = json!({
            "type": "result", "subtype": "success", "is_error": false,
            "result": text, "session_id": "s", "num_turns": 1, "total_cost_usd": 0.001,
            "usage": {"input_tokens": 3, "output_tokens": 4}
        });
        if let Some(value) = json {
            out["structured_output"] = value.clone();
        }
        out.to_string()
    });
    orchestrator_core::conformance::agent::run_suite(&harness).await;
}

#[tokio::test]
async fn codex_preset_conforms() {
    let harness = PresetHarness::new("codex", ProcessAgent::codex, |text, _| {
        [
            json!({"type": "thread.started", "thread_id": "t"}),
            json!({"type": "turn.started"}),
            json!({"type": "item.completed", "item": {"id": "i0", "type": "agent_message", "text": text}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 3, "output_tokens": 4}}),
        ]
        .iter()
        .map(|e| format!("{e}\n"))
        .collect()
    });
    orchestrator_core::conformance::agent::run_suite(&harness).await;
}

#[tokio::test]
async fn gemini_preset_conforms() {
    let harness = PresetHarness::new("gemini", ProcessAgent::gemini, |text, _| {
        json!({"response": text, "stats": {"models": {}}}).to_string()
    });
    orchestrator_core::conformance::agent::run_suite(&harness).await;
}
