//! `orchestrator planex "<requirement>" -y --agent openai`, run as a user
//! runs it: the real binary, in a temporary git repository, against an
//! OpenAI-compatible endpoint on 127.0.0.1. (The CLI agents run for real in
//! `real_cli_flows.rs`; the fakes that used to stand in for them here are
//! gone.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use orchestrator_planex::rows::{RowStatus, read_tasks_csv};
use orchestrator_planex::session::list_sessions;

/// A temporary git repository (canonical path).
struct Repo {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        for args in [
            &["init", "-q"][..],
            &["config", "user.email", "test@example.com"][..],
            &["config", "user.name", "Test"][..],
        ] {
            let status = Command::new("git")
                .args(args)
                .current_dir(&path)
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        }
        Repo { _dir: dir, path }
    }

    /// The only session folder.
    fn session(&self) -> PathBuf {
        let mut sessions = list_sessions(&self.path).unwrap();
        assert_eq!(sessions.len(), 1, "{sessions:?}");
        sessions.pop().unwrap().dir
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Answers planex's chat-completion requests the way the fake CLIs do, by
/// the prompt in the user message. An HTTP agent cannot edit files, so the
/// executor only reports.
struct PlanexAnswers;

impl wiremock::Respond for PlanexAnswers {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        let prompt: String = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let answer = if prompt.contains("PURPOSE: Analyze requirement complexity") {
            serde_json::json!({"type": "feature", "complexity": "Low", "angles": [
                {"id": "E1", "angle": "architecture", "description": "Where greetings live", "focus": "root"}]})
        } else if prompt.contains("## EXPLORATION ASSIGNMENT") {
            serde_json::json!({"id": "E1", "status": "completed", "findings": "Greetings go to greetings.txt",
                "key_files": ["greetings.txt"], "error": ""})
        } else if prompt.contains("PURPOSE: Based on exploration findings, decompose requirement") {
            let task = |id: &str, deps: Vec<&str>| {
                serde_json::json!({"id": id, "title": id,
                "description": format!("Report {id}"), "test": "none", "acceptance_criteria": format!("{id} done"),
                "scope": "", "hints": "", "execution_directives": "", "deps": deps, "context_from": ["E1"]})
            };
            serde_json::json!({"tasks": [task("T1", vec![]), task("T2", vec!["T1"]), task("T3", vec!["T1"])]})
        } else if let Some(id) = prompt.lines().find_map(|l| l.strip_prefix("**Task ID**: ")) {
            serde_json::json!({"id": id, "status": "completed", "findings": format!("{id} reported"),
                "files_modified": [], "tests_passed": true, "acceptance_met": format!("{id} done"), "error": "",
                "criteria": [{"criterion": format!("{id} done"), "status": "PASS", "explanation": "reported"}]})
        } else {
            return wiremock::ResponseTemplate::new(400)
                .set_body_json(serde_json::json!({"error": {"message": "unexpected prompt"}}));
        };
        wiremock::ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "local-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": answer.to_string()}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_flow_runs_end_to_end_with_an_openai_compatible_server() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(PlanexAnswers)
        .mount(&server)
        .await;
    let repo = Repo::new();
    let base = format!("{}/v1", server.uri());
    let cwd = repo.path.clone();
    let o = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_orchestrator"))
            .args([
                "planex",
                "Say hello to the world",
                "-y",
                "--agent",
                "openai",
            ])
            .current_dir(&cwd)
            .env_remove("RUST_LOG")
            .env_remove("ORCHESTRATOR_AGENT")
            .env_remove("OPENAI_API_KEY")
            .env("OPENAI_BASE_URL", base)
            .env("OPENAI_MODEL", "local-model")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        stdout(&o),
        stderr(&o)
    );
    let results = read_tasks_csv(repo.session().join("results.csv")).unwrap();
    assert_eq!(results.len(), 3);
    for row in &results {
        assert_eq!(row.status, RowStatus::Completed, "{row:?}");
        assert_eq!(row.findings, format!("{} reported", row.id));
    }
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        requests.len(),
        6,
        "planner, explorer, task planner, three executors"
    );
    assert!(
        requests
            .iter()
            .all(|r| !r.headers.contains_key("authorization")),
        "no key configured, none sent"
    );
}
