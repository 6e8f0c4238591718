//! `orchestrator planex "<requirement>" -y --agent codex|gemini|openai`, run as a
//! user runs it: the real binary, in a temporary git repository, with a fake
//! `codex` or `gemini` executable first on PATH. The fakes (under
//! `tests/fixtures/agents/`) speak each CLI's real output format — Codex's
//! JSONL events, Gemini's single JSON object — take the prompt where the real
//! CLI takes it (stdin for Codex, the `-p` argument for Gemini), pick their
//! answer by the prompt as the fake `claude` of `planex_cli.rs` does, and log
//! their arguments, one line per call.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use orchestrator_core::rows::{RowStatus, read_tasks_csv};
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

/// A directory holding the fake `name` (and the answers it sources), ready
/// to go first on PATH.
fn fake_bin(name: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents");
    let bin = tempfile::tempdir().unwrap();
    for file in [name, "answers.sh"] {
        let to = bin.path().join(file);
        std::fs::copy(fixtures.join(file), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `planex "Say hello to the world" -y --agent <agent>` in a fresh
/// repository with the fake `agent` first on PATH; checks that the flow
/// finished and every task completed; returns the fake's call log, one line
/// per call.
fn run_the_full_flow(agent: &str) -> Vec<String> {
    let repo = Repo::new();
    let bin = fake_bin(agent);
    let calls = bin.path().join("calls.txt");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .args(["planex", "Say hello to the world", "-y", "--agent", agent])
        .current_dir(&repo.path)
        .env_remove("RUST_LOG")
        .env_remove("ORCHESTRATOR_AGENT")
        .env("COLUMNS", "100")
        .env("PATH", path)
        .env("FAKE_AGENT_CALLS", &calls)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        stdout(&o),
        stderr(&o)
    );

    // The tasks ran, in dependency order, through the fake.
    let greetings = std::fs::read_to_string(repo.path.join("greetings.txt")).unwrap();
    assert_eq!(greetings, "T1\nT2\nT3\n");
    let out = stdout(&o);
    assert!(out.contains("- **Explore**: 1/1 angles"), "{out}");
    assert!(
        out.contains("- **Tasks**: 3/3 completed, 0 failed, 0 skipped"),
        "{out}"
    );

    let dir = repo.session();
    for file in ["explore.csv", "tasks.csv", "results.csv", "context.md"] {
        assert!(dir.join(file).is_file(), "{agent}: {file} missing");
    }
    let results = read_tasks_csv(dir.join("results.csv")).unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["T1", "T2", "T3"]);
    for row in &results {
        assert_eq!(row.status, RowStatus::Completed, "{agent}: {row:?}");
        // The findings come from the answer the fake printed, parsed out of
        // the CLI's own output format.
        assert_eq!(row.findings, format!("{} appended", row.id));
        assert_eq!(row.files_modified, ["greetings.txt"], "{agent}: {row:?}");
    }

    std::fs::read_to_string(&calls)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Six calls: the three planning agents read only (`read_only`), the three
/// executors may write (`writing`), and an executor comes last.
fn assert_planners_then_writers(calls: &[String], read_only: &str, writing: &str) {
    assert_eq!(calls.len(), 6, "{calls:#?}");
    for (argv, n) in [(read_only, 3), (writing, 3)] {
        assert_eq!(
            calls.iter().filter(|c| *c == argv).count(),
            n,
            "{argv}: {calls:#?}"
        );
    }
    assert_eq!(calls.last().map(String::as_str), Some(writing));
}

#[test]
fn the_full_flow_runs_end_to_end_with_a_codex_cli() {
    let calls = run_the_full_flow("codex");
    // Planner, explorer, task planner and three executors: each a real
    // `codex exec --json` with the prompt on stdin (`-`) and a schema file;
    // the executors may write to the workspace.
    assert_planners_then_writers(
        &calls,
        "exec --json --output-schema <schema> -",
        "exec --json --output-schema <schema> --sandbox workspace-write -",
    );
}

#[test]
fn the_full_flow_runs_end_to_end_with_a_gemini_cli() {
    let calls = run_the_full_flow("gemini");
    // Planner, explorer, task planner and three executors: each a real
    // `gemini --skip-trust -o json` with the prompt on stdin (the folders
    // we run in are not marked trusted); the executors may edit files.
    assert_planners_then_writers(
        &calls,
        "--skip-trust -o json",
        "--skip-trust -o json --approval-mode auto_edit",
    );
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
