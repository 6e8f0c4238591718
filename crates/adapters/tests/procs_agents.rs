//! ProcessAgent and its presets against fake `claude`, `codex` and `gemini`
//! executables (shell scripts on the child's PATH) that print real-shaped
//! output, fail, print garbage, hang, or leave grandchildren behind.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod procs_support;

use std::time::{Duration, Instant};

use orchestrator_adapters::agents::{Dialect, InstructionInput, ProcessAgent};
use orchestrator_core::agent::{Agent, AgentError, AgentExt, AgentRequest, Role, Usage};
use procs_support::{FakeCli, dies_within, fixture, is_alive, wait_for_pid};
use serde_json::json;

fn request(workdir: &std::path::Path) -> AgentRequest {
    AgentRequest::new(
        "T1",
        Role::Fix,
        "Fix the failing test in src/lib.rs.",
        workdir,
    )
    .with_time_limit(Duration::from_secs(20))
}

fn fix_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "required": ["fixed", "files"],
        "properties": {
            "fixed": {"type": "boolean"},
            "files": {"type": "array", "items": {"type": "string"}}
        }
    })
}

#[tokio::test]
async fn claude_success_maps_result_usage_and_passes_the_instruction_on_stdin() {
    let fake = FakeCli::new(&["claude"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake.printing(ProcessAgent::claude(), "claude_success.json", 0);
    let response = agent.run(request(work.path())).await.unwrap();

    assert_eq!(
        response.text,
        "I renamed `foo` to `bar` in src/lib.rs and the tests pass."
    );
    assert_eq!(
        response.usage,
        Some(Usage {
            // Uncached input plus cache writes and reads.
            input_tokens: 12 + 5234 + 18311,
            output_tokens: 187,
            cost_usd: 0.0421,
            turns: 3
        })
    );
    assert_eq!(response.structured, None);
    assert_eq!(
        fake.argv(),
        [
            "-p",
            "--output-format",
            "json",
            "--permission-mode",
            "acceptEdits"
        ]
    );
    assert_eq!(
        fake.recorded("stdin"),
        "Fix the failing test in src/lib.rs."
    );
    assert_eq!(
        std::fs::canonicalize(fake.recorded("cwd").trim()).unwrap(),
        std::fs::canonicalize(work.path()).unwrap()
    );
    assert_eq!(agent.name(), "claude");
}

#[tokio::test]
async fn claude_schema_request_passes_json_schema_and_returns_structured_output() {
    let fake = FakeCli::new(&["claude"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake.printing(ProcessAgent::claude(), "claude_schema.json", 0);
    let req = request(work.path()).with_schema(fix_schema());
    let response = agent.run_validated(req).await.unwrap();

    assert_eq!(
        response.structured,
        Some(json!({"fixed": true, "files": ["src/lib.rs"]}))
    );
    let argv = fake.argv();
    let at = argv.iter().position(|a| a == "--json-schema").unwrap();
    let passed: serde_json::Value = serde_json::from_str(&argv[at + 1]).unwrap();
    assert_eq!(passed, fix_schema());
    // The schema goes through the flag, not the prompt.
    assert!(!fake.recorded("stdin").contains("Answer format"));
}

#[tokio::test]
async fn claude_error_results_are_failures_with_the_reason() {
    let fake = FakeCli::new(&["claude"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake.printing(ProcessAgent::claude(), "claude_error_max_turns.json", 1);
    let err = agent.run(request(work.path())).await.unwrap_err();
    // A turn limit is a budget: the same request would hit it again.
    assert_eq!(
        err,
        AgentError::Budget {
            message: "claude stopped with error_max_turns: Reached maximum number of turns (10)"
                .into(),
        }
    );

    let agent = fake.printing(ProcessAgent::claude(), "claude_api_error.json", 1);
    let err = agent.run(request(work.path())).await.unwrap_err();
    let AgentError::Failed { message, .. } = err else {
        panic!("expected Failed, got {err:?}");
    };
    assert!(message.contains("invalid x-api-key"), "{message}");
}

#[tokio::test]
async fn garbage_output_is_a_typed_error_with_a_snippet() {
    let fake = FakeCli::new(&["claude", "codex", "gemini"]);
    let work = tempfile::tempdir().unwrap();
    for preset in [
        ProcessAgent::claude(),
        ProcessAgent::codex(),
        ProcessAgent::gemini(),
    ] {
        let name = preset.name().to_owned();
        let name = name.as_str();
        let err = fake
            .agent(preset, "garbage")
            .run(request(work.path()))
            .await
            .unwrap_err();
        match err {
            AgentError::Garbage { snippet, message } => {
                assert!(snippet.contains("Service Unavailable"), "{name}: {snippet}");
                assert!(message.contains(name), "{name}: {message}");
            }
            other => panic!("{name}: expected Garbage, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_non_zero_exit_without_output_reports_stderr_and_status() {
    let fake = FakeCli::new(&["claude", "codex"]);
    let work = tempfile::tempdir().unwrap();
    for preset in [ProcessAgent::claude(), ProcessAgent::codex()] {
        let err = fake
            .agent(preset, "stderr")
            .run(request(work.path()))
            .await
            .unwrap_err();
        let AgentError::Failed { message, exit_code } = err else {
            panic!("expected Failed, got {err:?}");
        };
        assert_eq!(exit_code, Some(3));
        assert!(
            message.contains("exited with status 3")
                && message.contains("the model service refused the request"),
            "{message}"
        );
    }
}

#[tokio::test]
async fn codex_success_reads_events_files_and_usage() {
    let fake = FakeCli::new(&["codex"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake.printing(ProcessAgent::codex(), "codex_success.jsonl", 0);
    let response = agent.run(request(work.path())).await.unwrap();

    assert_eq!(
        response.text,
        "Fixed the off-by-one in `src/lib.rs` and added `src/new_module.rs`."
    );
    assert_eq!(response.files_changed, ["src/lib.rs", "src/new_module.rs"]);
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 24763,
            output_tokens: 122,
            cost_usd: 0.0,
            turns: 1
        })
    );
    assert_eq!(
        fake.argv(),
        ["exec", "--json", "--sandbox", "workspace-write", "-"]
    );
    assert_eq!(
        fake.recorded("stdin"),
        "Fix the failing test in src/lib.rs."
    );
}

#[tokio::test]
async fn codex_schema_is_written_to_a_temp_file_that_is_removed_afterwards() {
    let fake = FakeCli::new(&["codex"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake.printing(ProcessAgent::codex(), "codex_schema.jsonl", 0);
    let req =
        AgentRequest::new("P1", Role::Plan, "Plan it.", work.path()).with_schema(fix_schema());
    let response = agent.run_validated(req).await.unwrap();

    assert_eq!(
        response.structured,
        Some(json!({"fixed": true, "files": ["src/lib.rs"]}))
    );
    let copied: serde_json::Value = serde_json::from_str(&fake.recorded("schema.json")).unwrap();
    // The strict form codex's `--output-schema` needs (both properties were
    // already required).
    let mut strict = fix_schema();
    strict["additionalProperties"] = json!(false);
    strict["required"] = json!(["files", "fixed"]);
    assert_eq!(copied, strict);
    let path = fake.recorded("schema.path");
    assert!(!std::path::Path::new(path.trim()).exists());
    // A planning role gets no write sandbox.
    assert!(!fake.argv().contains(&"workspace-write".to_owned()));
}

#[tokio::test]
async fn codex_turn_failed_is_a_failure_with_the_message() {
    let fake = FakeCli::new(&["codex"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake.printing(ProcessAgent::codex(), "codex_turn_failed.jsonl", 1);
    let err = agent.run(request(work.path())).await.unwrap_err();
    assert_eq!(
        err,
        AgentError::Failed {
            message: "codex failed: stream disconnected before completion: Your input exceeds the context window of this model.".into(),
            exit_code: Some(1),
        }
    );
}

#[tokio::test]
async fn gemini_success_sums_model_stats() {
    let fake = FakeCli::new(&["gemini"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake.printing(ProcessAgent::gemini(), "gemini_success.json", 0);
    let req = AgentRequest::new("E1", Role::Explore, "Why does parse_row fail?", work.path());
    let response = agent.run(req).await.unwrap();

    assert_eq!(
        response.text,
        "The function `parse_row` failed on empty lines; I added a guard and a test."
    );
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 24939 + 8965,
            output_tokens: 30,
            cost_usd: 0.0,
            turns: 3
        })
    );
    assert_eq!(fake.argv(), ["--skip-trust", "-o", "json"]);
    assert_eq!(fake.recorded("stdin"), "Why does parse_row fail?");
}

#[tokio::test]
async fn gemini_schema_goes_into_the_prompt_and_the_answer_is_validated() {
    let fake = FakeCli::new(&["gemini"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake.printing(ProcessAgent::gemini(), "gemini_schema.json", 0);
    let req = request(work.path()).with_schema(fix_schema());
    let response = agent.run_validated(req).await.unwrap();
    assert_eq!(
        response.structured,
        Some(json!({"fixed": true, "files": ["src/lib.rs"]}))
    );
    let argv = fake.argv().join("\n");
    let stdin = fake.recorded("stdin");
    assert!(stdin.contains("## Answer format"), "{stdin}");
    assert!(argv.contains("--approval-mode\nauto_edit"), "{argv}");
}

#[tokio::test]
async fn gemini_exit_codes_map_to_typed_errors() {
    let fake = FakeCli::new(&["gemini"]);
    let work = tempfile::tempdir().unwrap();
    let run = |agent: ProcessAgent| {
        let req = request(work.path());
        async move { agent.run(req).await.unwrap_err() }
    };

    let err = run(fake.printing(ProcessAgent::gemini(), "gemini_auth_error.json", 41)).await;
    assert_eq!(
        err,
        AgentError::Unavailable {
            message: "gemini authentication failed: exit 41: FatalAuthenticationError: Failed to login. Message: Request had invalid authentication credentials.; set GEMINI_API_KEY (or the credentials of the auth method selected in ~/.gemini/settings.json, `security.auth.selectedType`)".into()
        }
    );
    let err = run(fake.printing(ProcessAgent::gemini(), "gemini_turn_limit.json", 53)).await;
    assert!(
        // A turn limit is a budget: retrying the same request hits it again.
        matches!(&err, AgentError::Budget { message } if message.starts_with("gemini exceeded its turn limit (exit 53): FatalTurnLimitedError")),
        "{err:?}"
    );

    // Codes without a JSON body: the message comes from stderr.
    type Expect = fn(&AgentError) -> bool;
    let table: [(i32, Expect); 5] = [
        (
            42,
            |e| matches!(e, AgentError::Failed { message, exit_code: Some(42) } if message.contains("rejected the input")),
        ),
        (
            52,
            |e| matches!(e, AgentError::Unavailable { message } if message.contains("configuration error")),
        ),
        (
            54,
            |e| matches!(e, AgentError::Failed { message, exit_code: Some(54) } if message.contains("tool execution failed")),
        ),
        (130, |e| *e == AgentError::Cancelled),
        (
            1,
            |e| matches!(e, AgentError::Failed { message, exit_code: Some(1) } if message.contains("the model service refused")),
        ),
    ];
    for (code, expected) in table {
        let agent = fake
            .agent(ProcessAgent::gemini(), "stderr")
            .env("FAKE_EXIT", code.to_string());
        let err = run(agent).await;
        assert!(expected(&err), "exit {code}: {err:?}");
    }
}

#[tokio::test]
async fn a_missing_executable_is_unavailable() {
    let work = tempfile::tempdir().unwrap();
    let agent = ProcessAgent::claude().program("orchestrator-no-such-claude-binary");
    let err = agent.run(request(work.path())).await.unwrap_err();
    assert_eq!(
        err,
        AgentError::Unavailable {
            message:
                "executable `orchestrator-no-such-claude-binary` not found (looked up on PATH)"
                    .into()
        }
    );
}

#[tokio::test]
async fn the_executable_can_be_given_as_a_path() {
    let fake = FakeCli::new(&["my-claude"]);
    let work = tempfile::tempdir().unwrap();
    let agent = ProcessAgent::claude()
        .program(fake.bin().join("my-claude"))
        .env("FAKE_DIR", fake.record())
        .env("FAKE_MODE", "fixture")
        .env("FAKE_FIXTURE", fixture("claude_success.json"));
    assert!(agent.run(request(work.path())).await.is_ok());
}

#[tokio::test]
async fn timeout_kills_the_whole_group_including_grandchildren() {
    let fake = FakeCli::new(&["codex"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake
        .agent(ProcessAgent::codex(), "grandchild")
        .grace(Duration::from_millis(500));
    let req = request(work.path()).with_time_limit(Duration::from_millis(800));
    let started = Instant::now();
    let task = tokio::spawn(async move { agent.run(req).await });

    let record = fake.record();
    let grandchild = tokio::task::spawn_blocking(move || {
        wait_for_pid(&record.join("grandchild.pid"), Duration::from_secs(10))
    })
    .await
    .unwrap();
    let leader = wait_for_pid(&fake.record().join("leader.pid"), Duration::from_secs(1));
    assert!(
        is_alive(grandchild),
        "the grandchild should run before the timeout"
    );

    let err = task.await.unwrap().unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err, AgentError::Timeout { seconds: 0.8 });
    // SIGTERM ends both at once: no need to wait for the grace period.
    assert!(
        elapsed < Duration::from_millis(800 + 500 + 1000),
        "{elapsed:?}"
    );
    assert!(
        dies_within(leader, Duration::from_secs(2)),
        "leader {leader} survived"
    );
    assert!(
        dies_within(grandchild, Duration::from_secs(2)),
        "grandchild {grandchild} survived"
    );
}

#[tokio::test]
async fn processes_that_ignore_sigterm_are_killed_after_the_grace_period() {
    let fake = FakeCli::new(&["claude"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake
        .agent(ProcessAgent::claude(), "stubborn")
        .grace(Duration::from_millis(400));
    let req = request(work.path()).with_time_limit(Duration::from_millis(500));
    let started = Instant::now();
    let err = agent.run(req).await.unwrap_err();
    let elapsed = started.elapsed();

    assert_eq!(err, AgentError::Timeout { seconds: 0.5 });
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
    let grandchild = wait_for_pid(
        &fake.record().join("grandchild.pid"),
        Duration::from_secs(1),
    );
    let leader = wait_for_pid(&fake.record().join("leader.pid"), Duration::from_secs(1));
    assert!(dies_within(leader, Duration::from_secs(2)));
    assert!(dies_within(grandchild, Duration::from_secs(2)));
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let fake = FakeCli::new(&["gemini"]);
    let work = tempfile::tempdir().unwrap();
    let agent = fake.agent(ProcessAgent::gemini(), "grandchild");
    let req = request(work.path()).with_time_limit(Duration::from_secs(600));
    let task = tokio::spawn(async move { agent.run(req).await });

    let record = fake.record();
    let grandchild = tokio::task::spawn_blocking(move || {
        wait_for_pid(&record.join("grandchild.pid"), Duration::from_secs(10))
    })
    .await
    .unwrap();
    let leader = wait_for_pid(&fake.record().join("leader.pid"), Duration::from_secs(1));
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert!(
        dies_within(leader, Duration::from_secs(2)),
        "leader survived the drop"
    );
    assert!(
        dies_within(grandchild, Duration::from_secs(2)),
        "grandchild survived the drop"
    );
}

#[tokio::test]
async fn generic_agent_with_instruction_argument_and_text_output() {
    let work = tempfile::tempdir().unwrap();
    let agent = ProcessAgent::new(
        "echo-agent",
        "sh",
        [
            "-c",
            r#"printf 'got: %s\n' "$1"; pwd"#,
            "sh",
            "{instruction}",
        ],
    )
    .instruction_input(InstructionInput::Argument);
    let req = AgentRequest::new("X", Role::Diagnose, "it's $(broken) `here`", work.path());
    let response = agent.run(req).await.unwrap();
    let dir = std::fs::canonicalize(work.path()).unwrap();
    assert_eq!(
        response.text,
        format!("got: it's $(broken) `here`\n{}", dir.display())
    );
}

#[tokio::test]
async fn generic_json_agent_reads_stdin_and_rejects_garbage() {
    let work = tempfile::tempdir().unwrap();
    let agent = ProcessAgent::new(
        "json-agent",
        "sh",
        ["-c", r#"printf '{"echo": "%s"}' "$(cat)""#],
    )
    .dialect(Dialect::Json);
    let req = AgentRequest::new("X", Role::Plan, "hello", work.path());
    let response = agent.run(req).await.unwrap();
    assert_eq!(response.structured, Some(json!({"echo": "hello"})));

    let agent = ProcessAgent::new("json-agent", "sh", ["-c", "echo 'not json at all'"])
        .dialect(Dialect::Json);
    let req = AgentRequest::new("X", Role::Plan, "hello", work.path());
    let err = agent.run(req).await.unwrap_err();
    assert!(
        matches!(&err, AgentError::Garbage { snippet, .. } if snippet == "not json at all"),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_agent_serves_concurrent_requests() {
    let fake = FakeCli::new(&["claude"]);
    let work = tempfile::tempdir().unwrap();
    let agent =
        std::sync::Arc::new(fake.printing(ProcessAgent::claude(), "claude_success.json", 0));
    let runs = (0..4).map(|i| {
        let agent = agent.clone();
        let req = AgentRequest::new(format!("T{i}"), Role::Explore, "look", work.path());
        async move { agent.run(req).await }
    });
    for result in futures_join(runs).await {
        assert_eq!(result.unwrap().usage.map(|u| u.turns), Some(3));
    }
}

/// Joins futures on the current runtime without another dependency.
async fn futures_join<F, T>(futures: impl Iterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test]
async fn removed_variables_do_not_reach_the_command() {
    let work = tempfile::tempdir().unwrap();
    let agent = ProcessAgent::new("env-agent", "sh", ["-c", r#"echo "[${HOME-unset}]""#])
        .env_remove("HOME");
    let req = AgentRequest::new("X", Role::Explore, "look", work.path());
    assert_eq!(agent.run(req).await.unwrap().text, "[unset]");
}
