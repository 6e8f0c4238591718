//! `OpenAiAgent` against a local wiremock server on 127.0.0.1.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use orchestrator_adapters::openai::{OpenAiAgent, OpenAiConfig};
use orchestrator_core::agent::{Agent, AgentError, AgentExt, AgentRequest, Role, Usage};
use serde_json::{Value, json};
use wiremock::matchers::{bearer_token, body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const CHAT: &str = "/v1/chat/completions";

/// Settings for the test server: no key from the environment, fast backoff.
fn config(server: &MockServer) -> OpenAiConfig {
    OpenAiConfig::new(format!("{}/v1", server.uri()), "test-model")
        .with_api_key_env(None)
        .with_backoff(Duration::from_millis(10), Duration::from_millis(50))
}

fn agent(config: OpenAiConfig) -> OpenAiAgent {
    OpenAiAgent::new(config).unwrap()
}

fn request() -> AgentRequest {
    AgentRequest::new("T1", Role::Execute, "Say the magic word.", "/tmp")
        .with_time_limit(Duration::from_secs(20))
}

fn completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    })
}

fn ok(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(completion(content))
}

async fn requests(server: &MockServer) -> Vec<wiremock::Request> {
    server.received_requests().await.unwrap_or_default()
}

#[tokio::test]
async fn success_maps_content_and_usage_and_sends_the_prompt() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("xyzzy"))
        .expect(1)
        .mount(&server)
        .await;
    let agent = agent(config(&server).with_system_prompt("Be terse."));
    let req = request().with_context(json!({"file": "src/lib.rs"}));
    let resp = agent.run(req).await.unwrap();
    assert_eq!(resp.text, "xyzzy");
    assert_eq!(resp.structured, None);
    assert_eq!(
        resp.usage,
        Some(Usage {
            input_tokens: 12,
            output_tokens: 3,
            cost_usd: 0.0,
            turns: 1
        })
    );
    let sent: Value = requests(&server).await[0].body_json().unwrap();
    assert_eq!(
        sent,
        json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "Be terse.\n\nYour role in this task: execute."},
                {"role": "user", "content": "Say the magic word.\n\nContext:\n```json\n{\n  \"file\": \"src/lib.rs\"\n}\n```"}
            ],
            "stream": false
        })
    );
}

#[tokio::test]
async fn temperature_and_max_tokens_are_sent_when_configured() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .and(body_partial_json(
            json!({"temperature": 0.5, "max_tokens": 256}),
        ))
        .respond_with(ok("tuned"))
        .expect(1)
        .mount(&server)
        .await;
    let mut config = config(&server);
    config.temperature = Some(0.5);
    config.max_tokens = Some(256);
    assert_eq!(agent(config).run(request()).await.unwrap().text, "tuned");
}

#[tokio::test]
async fn schema_request_sends_response_format_and_parses_the_answer() {
    let server = MockServer::start().await;
    let schema = json!({
        "type": "object",
        "required": ["id", "status"],
        "properties": {"status": {"type": "string", "enum": ["completed", "failed"]}}
    });
    Mock::given(method("POST"))
        .and(path(CHAT))
        .and(body_partial_json(json!({
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": false}
            }
        })))
        .respond_with(ok(r#"{"id": "T1", "status": "completed"}"#))
        .expect(2)
        .mount(&server)
        .await;
    let agent = agent(config(&server));
    let resp = agent
        .run(request().with_schema(schema.clone()))
        .await
        .unwrap();
    let expected = json!({"id": "T1", "status": "completed"});
    assert_eq!(resp.structured.as_ref(), Some(&expected));
    let validated = agent
        .run_validated(request().with_schema(schema))
        .await
        .unwrap();
    assert_eq!(validated.structured, Some(expected));
}

#[tokio::test]
async fn fenced_json_from_a_server_ignoring_response_format_is_accepted() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("Here it is:\n```json\n{\"ok\": true}\n```"))
        .mount(&server)
        .await;
    let resp = agent(config(&server))
        .run(request().with_schema(json!({"type": "object"})))
        .await
        .unwrap();
    assert_eq!(resp.structured, Some(json!({"ok": true})));
}

#[tokio::test]
async fn garbage_content_for_a_schema_request_is_garbage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("I would rather not answer in JSON today."))
        .mount(&server)
        .await;
    let result = agent(config(&server))
        .run(request().with_schema(json!({"type": "object"})))
        .await;
    match result {
        Err(AgentError::Garbage { message, snippet }) => {
            assert!(message.contains("JSON"), "{message}");
            assert_eq!(snippet, "I would rather not answer in JSON today.");
        }
        other => panic!("expected Garbage, got {other:?}"),
    }
}

#[tokio::test]
async fn a_non_json_body_is_garbage_with_a_snippet() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>proxy page</html>"))
        .mount(&server)
        .await;
    match agent(config(&server)).run(request()).await {
        Err(AgentError::Garbage { snippet, .. }) => {
            assert_eq!(snippet, "<html>proxy page</html>");
        }
        other => panic!("expected Garbage, got {other:?}"),
    }
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_waited_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(json!({"error": {"message": "Rate limit reached"}})),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("after the wait"))
        .with_priority(2)
        .mount(&server)
        .await;
    let started = Instant::now();
    let resp = agent(config(&server)).run(request()).await.unwrap();
    let took = started.elapsed();
    assert_eq!(resp.text, "after the wait");
    // The backoff alone would be ≤ 50 ms: only Retry-After explains a second.
    assert!(took >= Duration::from_millis(950), "took {took:?}");
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn server_error_then_success_is_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(500).set_body_string("upstream exploded"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("second time lucky"))
        .with_priority(2)
        .mount(&server)
        .await;
    let resp = agent(config(&server)).run(request()).await.unwrap();
    assert_eq!(resp.text, "second time lucky");
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn persistent_server_errors_give_up_after_max_retries() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(
            ResponseTemplate::new(503).set_body_json(json!({"error": {"message": "overloaded"}})),
        )
        .mount(&server)
        .await;
    let result = agent(config(&server).with_max_retries(2))
        .run(request())
        .await;
    match result {
        Err(AgentError::Failed { message, .. }) => {
            assert!(message.contains("503"), "{message}");
            assert!(message.contains("overloaded"), "{message}");
            assert!(message.contains("gave up after 3 attempt(s)"), "{message}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    assert_eq!(requests(&server).await.len(), 3);
}

#[tokio::test]
async fn client_error_fails_at_once_with_the_server_message() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "error": {
                "message": "The model `nope` does not exist",
                "type": "invalid_request_error",
                "code": "model_not_found"
            }
        })))
        .mount(&server)
        .await;
    match agent(config(&server)).run(request()).await {
        Err(AgentError::Failed { message, exit_code }) => {
            assert!(message.contains("400 Bad Request"), "{message}");
            assert!(
                message.contains("The model `nope` does not exist"),
                "{message}"
            );
            assert_eq!(exit_code, None);
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    assert_eq!(requests(&server).await.len(), 1, "a 400 is not retried");
}

#[tokio::test]
async fn a_slow_server_hits_the_time_limit() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("too late").set_delay(Duration::from_secs(30)))
        .mount(&server)
        .await;
    let limit = Duration::from_millis(400);
    let started = Instant::now();
    let result = agent(config(&server))
        .run(request().with_time_limit(limit))
        .await;
    let took = started.elapsed();
    match result {
        Err(AgentError::Timeout { seconds }) => assert!((seconds - 0.4).abs() < 1e-9),
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(took < limit + Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn the_time_limit_covers_the_retries() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let config = config(&server)
        .with_max_retries(1_000)
        .with_backoff(Duration::from_millis(100), Duration::from_millis(100));
    let limit = Duration::from_millis(700);
    let started = Instant::now();
    let result = agent(config).run(request().with_time_limit(limit)).await;
    let took = started.elapsed();
    assert!(
        matches!(&result, Err(AgentError::Failed { message, .. }) if message.contains("overrun the time limit"))
            || matches!(result, Err(AgentError::Timeout { .. })),
        "{result:?}"
    );
    assert!(took < limit + Duration::from_secs(2), "took {took:?}");
    assert!(requests(&server).await.len() >= 2);
}

#[tokio::test]
async fn a_retry_after_beyond_the_time_limit_fails_fast() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "60"))
        .mount(&server)
        .await;
    let started = Instant::now();
    let result = agent(config(&server))
        .run(request().with_time_limit(Duration::from_secs(10)))
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    match result {
        Err(AgentError::Failed { message, .. }) => {
            assert!(message.contains("429"), "{message}");
            assert!(message.contains("overrun the time limit"), "{message}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_server_is_a_failure_after_retries() {
    // A port nothing listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"), "m")
        .with_api_key_env(None)
        .with_max_retries(1)
        .with_backoff(Duration::from_millis(10), Duration::from_millis(10));
    match agent(config).run(request()).await {
        Err(AgentError::Failed { message, .. }) => {
            assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
            assert!(message.contains("gave up after 2 attempt(s)"), "{message}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn authorization_is_sent_only_when_a_key_is_configured() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .and(bearer_token("sk-test-key"))
        .respond_with(ok("with key"))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("without key"))
        .with_priority(2)
        .mount(&server)
        .await;
    let keyed = agent(config(&server).with_api_key("sk-test-key"));
    assert!(keyed.has_api_key());
    assert!(!format!("{keyed:?}").contains("sk-test-key"));
    assert_eq!(keyed.run(request()).await.unwrap().text, "with key");

    let anonymous = agent(config(&server));
    assert!(!anonymous.has_api_key());
    assert_eq!(anonymous.run(request()).await.unwrap().text, "without key");

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2);
    assert!(sent[0].headers.contains_key("authorization"));
    assert!(!sent[1].headers.contains_key("authorization"));
}

#[tokio::test]
async fn a_refusal_is_a_failure() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}}]
        })))
        .mount(&server)
        .await;
    match agent(config(&server)).run(request()).await {
        Err(AgentError::Failed { message, .. }) => {
            assert_eq!(message, "model refused: I can't help with that.");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn retry_after_ms_is_honoured_too() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after-ms", "400"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("done"))
        .with_priority(2)
        .mount(&server)
        .await;
    let started = Instant::now();
    assert_eq!(
        agent(config(&server)).run(request()).await.unwrap().text,
        "done"
    );
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(380), "took {took:?}");
}

#[tokio::test]
async fn a_retry_after_beyond_the_allowed_wait_is_not_slept() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(503).insert_header("retry-after", "3600"))
        .mount(&server)
        .await;
    let started = Instant::now();
    let no_limit = AgentRequest::new("T1", Role::Plan, "Plan.", "/tmp");
    match agent(config(&server)).run(no_limit).await {
        Err(AgentError::Failed { message, .. }) => {
            assert!(
                message.contains("server asked to wait 3600.0s, more than the 120.0s allowed"),
                "{message}"
            );
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn a_server_error_refusing_the_response_format_is_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({"detail":
            "1 validation error: response_format.type: Input should be 'text' or 'json_object'"})))
        .mount(&server)
        .await;
    let agent = agent(config(&server).with_max_retries(3));
    let err = agent
        .run(request().with_schema(json!({"type": "object"})))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::Failed { message, .. } if message.contains("json_object")),
        "{err:?}"
    );
    assert_eq!(
        requests(&server).await.len(),
        1,
        "a format refusal is not transient"
    );
}

#[tokio::test]
async fn a_reasoning_model_gets_max_completion_tokens_and_no_temperature() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(CHAT))
        .respond_with(ok("done"))
        .mount(&server)
        .await;
    let mut config = config(&server).with_reasoning_model(true);
    config.temperature = Some(0.2);
    config.max_tokens = Some(256);
    agent(config).run(request()).await.unwrap();
    let body: Value = serde_json::from_slice(&requests(&server).await[0].body).unwrap();
    assert_eq!(body["max_completion_tokens"], 256);
    assert!(body.get("max_tokens").is_none(), "{body}");
    assert!(body.get("temperature").is_none(), "{body}");
}
