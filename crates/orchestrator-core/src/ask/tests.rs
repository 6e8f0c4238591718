use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::agent::Role;
use crate::fakes::{FakeAgent, Reply};

fn request() -> AgentRequest {
    AgentRequest::new("q", Role::Plan, "plan it", PathBuf::from("."))
}

fn number(response: AgentResponse) -> Result<i64, Vec<String>> {
    match response.structured.as_ref().and_then(Value::as_i64) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(vec!["not a positive number".to_owned()]),
    }
}

#[tokio::test]
async fn a_rejected_answer_is_asked_again_with_the_problems_and_the_note() {
    let agent = FakeAgent::new("a")
        .on("q", Reply::json(json!(-1)))
        .on("q", Reply::json(json!(7)));
    let policy = AskPolicy::new(Duration::from_secs(5), 2).with_retry_note("Try again.");
    let mut seen = Vec::new();
    let got = ask(&agent, request(), &policy, number, |attempt, failure| {
        seen.push((attempt, format!("{failure:?}")));
        match failure {
            AskFailure::Rejected(p) => NextAttempt::WithFeedback(p.join("; ")),
            _ => NextAttempt::Stop,
        }
    })
    .await;
    assert_eq!(got.ok(), Some(7));
    assert_eq!(
        seen,
        [(1, "Rejected([\"not a positive number\"])".to_owned())]
    );
    let calls = agent.calls();
    assert_eq!(calls[0].instruction, "plan it");
    assert_eq!(
        calls[1].instruction,
        "plan it\n\nYour previous answer was rejected: not a positive number\nTry again."
    );
}

#[tokio::test]
async fn after_the_last_attempt_the_last_failure_is_returned() {
    let agent = FakeAgent::new("a")
        .on("q", Reply::fail("boom"))
        .on("q", Reply::json(json!(0)));
    let policy = AskPolicy::new(Duration::from_secs(5), 2);
    let mut attempts = Vec::new();
    let got = ask(&agent, request(), &policy, number, |attempt, _| {
        attempts.push(attempt);
        NextAttempt::Again
    })
    .await;
    assert!(
        matches!(&got, Err(AskFailure::Rejected(p)) if p == &["not a positive number"]),
        "{got:?}"
    );
    assert_eq!(attempts, [1, 2]);
    // `Again` keeps the original instruction.
    assert_eq!(agent.calls()[1].instruction, "plan it");
}

#[tokio::test]
async fn stop_ends_at_once_with_that_failure() {
    let agent = FakeAgent::new("a").on("q", Reply::fail("boom"));
    let policy = AskPolicy::new(Duration::from_secs(5), 3);
    let got = ask(&agent, request(), &policy, number, |_, _| NextAttempt::Stop).await;
    assert!(
        matches!(&got, Err(AskFailure::Agent(AgentError::Failed { message, .. })) if message == "boom"),
        "{got:?}"
    );
    assert_eq!(agent.calls_for("q"), 1);
}

#[tokio::test(start_paused = true)]
async fn an_agent_that_ignores_its_limit_is_ended_after_the_grace() {
    // The request carries no limit, so the fake hangs for an hour.
    let agent = FakeAgent::new("a").on("q", Reply::Hang);
    let policy = AskPolicy::new(Duration::from_secs(10), 1).with_grace(Duration::from_secs(5));
    let started = tokio::time::Instant::now();
    let got = ask(&agent, request(), &policy, number, |_, _| {
        NextAttempt::Again
    })
    .await;
    assert!(
        matches!(got, Err(AskFailure::TimedOut { limit }) if limit == Duration::from_secs(10)),
        "{got:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(15));
}

#[tokio::test(start_paused = true)]
async fn run_within_ends_a_call_at_its_limit_with_a_timeout_error() {
    let agent = FakeAgent::new("a").on("q", Reply::Hang);
    let got = run_within(&agent, request(), Duration::from_secs(3)).await;
    assert!(
        matches!(got, Err(AgentError::Timeout { seconds }) if seconds == 3.0),
        "{got:?}"
    );
}
