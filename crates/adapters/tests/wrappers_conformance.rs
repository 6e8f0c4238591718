//! Every wrapper passes the core `Agent` conformance suite, and the wrappers
//! compose.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_adapters::wrappers::{
    Budget, BudgetLimits, LoopGuard, Recording, Replay, RetryPolicy, WithRetry, WithTimeout,
    read_transcript,
};
use orchestrator_core::conformance::agent::{AgentHarness, run_suite};
use orchestrator_core::fakes::{FakeAgent, Reply};
use orchestrator_core::{Agent, AgentError, AgentRequest, AgentResponse, Role};

/// A backend that never answers: only a wrapper can end the call.
#[derive(Debug)]
struct Hung;

#[async_trait]
impl Agent for Hung {
    fn name(&self) -> &str {
        "hung"
    }
    async fn run(&self, _request: AgentRequest) -> Result<AgentResponse, AgentError> {
        std::future::pending().await
    }
}

/// Which wrapper the harness puts around the backend. Every backend is first
/// wrapped in `WithTimeout` (a truly hung backend needs it), then in the
/// wrapper under test.
#[derive(Debug, Clone, Copy)]
enum Wrap {
    Timeout,
    Retry,
    Budget,
    LoopGuard,
    Recording,
    Everything,
}

struct Harness {
    wrap: Wrap,
    dir: tempfile::TempDir,
}

impl Harness {
    fn new(wrap: Wrap) -> Self {
        Self {
            wrap,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    async fn wrap(&self, backend: Arc<dyn Agent>) -> Arc<dyn Agent> {
        let timed = WithTimeout::new(backend).with_limit(Duration::from_secs(60));
        let retry = RetryPolicy {
            max_attempts: 2,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(10),
            multiplier: 2.0,
        };
        let limits = BudgetLimits {
            max_turns: Some(1000),
            max_tokens: Some(1_000_000),
            max_cost_usd: Some(100.0),
            max_calls: None,
            max_wall: Some(Duration::from_secs(600)),
        };
        let transcript = self.dir.path().join(format!("{:?}.jsonl", self.wrap));
        match self.wrap {
            Wrap::Timeout => Arc::new(timed),
            Wrap::Retry => Arc::new(WithRetry::new(timed, retry)),
            Wrap::Budget => Arc::new(Budget::new(timed, limits)),
            Wrap::LoopGuard => Arc::new(LoopGuard::new(timed, 5)),
            Wrap::Recording => Arc::new(Recording::append(timed, transcript).await.unwrap()),
            Wrap::Everything => Arc::new(
                Recording::append(
                    LoopGuard::new(Budget::new(WithRetry::new(timed, retry), limits), 5),
                    transcript,
                )
                .await
                .unwrap(),
            ),
        }
    }
}

#[async_trait]
impl AgentHarness for Harness {
    async fn answering(&self, text: &str) -> Arc<dyn Agent> {
        self.wrap(Arc::new(
            FakeAgent::new("fake").otherwise(Reply::text(text)),
        ))
        .await
    }
    async fn answering_json(&self, value: &serde_json::Value) -> Arc<dyn Agent> {
        self.wrap(Arc::new(
            FakeAgent::new("fake").otherwise(Reply::json(value.clone())),
        ))
        .await
    }
    async fn failing(&self) -> Arc<dyn Agent> {
        self.wrap(Arc::new(
            FakeAgent::new("fake").otherwise(Reply::fail("backend exploded")),
        ))
        .await
    }
    async fn hanging(&self) -> Arc<dyn Agent> {
        self.wrap(Arc::new(Hung)).await
    }
    fn workdir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }
    fn grace(&self) -> Duration {
        Duration::from_secs(3)
    }
}

#[tokio::test]
async fn every_wrapper_passes_the_agent_conformance_suite() {
    for wrap in [
        Wrap::Timeout,
        Wrap::Retry,
        Wrap::Budget,
        Wrap::LoopGuard,
        Wrap::Recording,
        Wrap::Everything,
    ] {
        let harness = Harness::new(wrap);
        run_suite(&harness).await;
    }
}

#[tokio::test]
async fn every_wrapper_passes_on_whether_the_agent_changes_files() {
    for wrap in [
        Wrap::Timeout,
        Wrap::Retry,
        Wrap::Budget,
        Wrap::LoopGuard,
        Wrap::Recording,
        Wrap::Everything,
    ] {
        let harness = Harness::new(wrap);
        let chat = harness
            .wrap(Arc::new(FakeAgent::new("chat").answers_only()))
            .await;
        assert!(!chat.changes_files(), "{wrap:?}");
        let editor = harness.wrap(Arc::new(FakeAgent::new("editor"))).await;
        assert!(editor.changes_files(), "{wrap:?}");
    }
}

#[tokio::test]
async fn a_recorded_suite_run_replays_identically() {
    let harness = Harness::new(Wrap::Recording);
    run_suite(&harness).await;
    let path = harness.dir.path().join("Recording.jsonl");
    let entries = read_transcript(&path).await.unwrap();
    assert!(entries.len() >= 8, "{} entries", entries.len());
    assert!(entries.iter().any(|e| e.request.id == "hang"));

    let replay = Replay::from_file(&path).await.unwrap();
    for entry in &entries {
        let replayed = replay.run(entry.request.clone()).await;
        let recorded = match &entry.outcome {
            orchestrator_adapters::wrappers::TranscriptOutcome::Response(r) => Ok(r.clone()),
            orchestrator_adapters::wrappers::TranscriptOutcome::Error(e) => Err(e.clone()),
        };
        assert_eq!(replayed, recorded, "request {}", entry.request.id);
    }
    assert_eq!(replay.remaining(), 0);
}

#[tokio::test]
async fn a_loop_of_one_failure_is_stopped_through_the_whole_stack() {
    let harness = Harness::new(Wrap::Everything);
    let agent = harness.failing().await;
    let request = AgentRequest::new("F1", Role::Fix, "fix", harness.workdir());
    let mut results = Vec::new();
    for _ in 0..7 {
        results.push(agent.run(request.clone()).await);
    }
    // Each call is retried once (2 attempts) and fails the same way; the
    // loop guard (threshold 5) trips on the fifth call and stays tripped.
    for r in &results[..4] {
        assert!(matches!(r, Err(AgentError::Failed { .. })), "{r:?}");
    }
    for r in &results[4..] {
        assert_eq!(
            r,
            &Err(AgentError::LoopDetected {
                signature: "agent failed: backend exploded".into(),
                count: 5
            })
        );
    }
}
