//! The [`Agent`] conformance suite.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::json;

use super::must;
use crate::agent::{Agent, AgentError, AgentExt, AgentRequest, Role};

/// Builds agents of the implementation under test.
#[async_trait]
pub trait AgentHarness: Send + Sync {
    /// An agent whose answer text contains `text` (for any request).
    async fn answering(&self, text: &str) -> Arc<dyn Agent>;
    /// An agent whose answer is the JSON `value` (as structured output or as
    /// JSON text).
    async fn answering_json(&self, value: &serde_json::Value) -> Arc<dyn Agent>;
    /// An agent whose backend fails.
    async fn failing(&self) -> Arc<dyn Agent>;
    /// An agent whose backend never answers.
    async fn hanging(&self) -> Arc<dyn Agent>;
    /// A working directory requests can use.
    fn workdir(&self) -> PathBuf;
    /// Extra time allowed past a request's time limit (process teardown).
    fn grace(&self) -> Duration {
        Duration::from_secs(5)
    }
}

fn request(h: &dyn AgentHarness, id: &str) -> AgentRequest {
    AgentRequest::new(id, Role::Execute, "Say the magic word.", h.workdir())
        .with_time_limit(Duration::from_secs(30))
}

/// Runs every check.
pub async fn run_suite(h: &dyn AgentHarness) {
    answers_with_text(h).await;
    structured_answers_are_validated(h).await;
    failures_are_errors(h).await;
    time_limit_is_enforced(h).await;
    concurrent_calls_succeed(h).await;
}

/// A plain answer comes back as text.
pub async fn answers_with_text(h: &dyn AgentHarness) {
    let agent = h.answering("xyzzy").await;
    assert!(!agent.name().is_empty(), "conformance: an agent has a name");
    let resp = must(agent.run(request(h, "text")).await, "plain request");
    assert!(
        resp.text.contains("xyzzy"),
        "conformance: answer text {:?} should contain the scripted text",
        resp.text
    );
}

/// With a schema, a matching answer is parsed and a mismatching one rejected.
pub async fn structured_answers_are_validated(h: &dyn AgentHarness) {
    let value = json!({"id": "T1", "status": "completed", "findings": "ok"});
    let agent = h.answering_json(&value).await;
    let schema = json!({
        "type": "object",
        "required": ["id", "status", "findings"],
        "properties": {"status": {"type": "string", "enum": ["completed", "failed"]}}
    });
    let resp = must(
        agent
            .run_validated(request(h, "json").with_schema(schema))
            .await,
        "request with a matching schema",
    );
    assert_eq!(
        resp.structured,
        Some(value),
        "conformance: structured answer is the agent's JSON"
    );
    let strict = json!({"type": "object", "required": ["missing_field"]});
    match agent
        .run_validated(request(h, "json-bad").with_schema(strict))
        .await
    {
        Err(AgentError::SchemaViolation { violations }) => assert!(
            violations.iter().any(|v| v.contains("missing_field")),
            "conformance: violation names the field: {violations:?}"
        ),
        other => panic!("conformance: schema mismatch must be SchemaViolation, got {other:?}"),
    }
}

/// A failing backend gives `Err`, never `Ok` with an error in the text.
pub async fn failures_are_errors(h: &dyn AgentHarness) {
    let agent = h.failing().await;
    let result = agent.run(request(h, "fail")).await;
    assert!(
        result.is_err(),
        "conformance: a failing backend must give Err, got {result:?}"
    );
}

/// A hung backend is cut off at the time limit.
pub async fn time_limit_is_enforced(h: &dyn AgentHarness) {
    let agent = h.hanging().await;
    let limit = Duration::from_millis(300);
    let started = Instant::now();
    let result = agent.run(request(h, "hang").with_time_limit(limit)).await;
    let took = started.elapsed();
    assert!(
        matches!(result, Err(AgentError::Timeout { .. })),
        "conformance: a hung agent must time out, got {result:?}"
    );
    assert!(
        took <= limit + h.grace(),
        "conformance: timeout took {took:?}, limit {limit:?} + grace {:?}",
        h.grace()
    );
}

/// One agent serves several requests at once.
pub async fn concurrent_calls_succeed(h: &dyn AgentHarness) {
    let agent = h.answering("together").await;
    let calls = (0..4).map(|i| {
        let agent = Arc::clone(&agent);
        let req = request(h, &format!("c{i}"));
        async move { agent.run(req).await }
    });
    for (i, result) in futures_join_all(calls).await.into_iter().enumerate() {
        let resp = must(result, &format!("concurrent call {i}"));
        assert!(resp.text.contains("together"));
    }
}

/// Joins futures concurrently on the current task (no extra dependency).
async fn futures_join_all<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    for f in futs {
        set.push(Box::pin(f));
    }
    let mut out: Vec<Option<F::Output>> = (0..set.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in set.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => out[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}
