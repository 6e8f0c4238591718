//! The real `codex`, `claude` and `gemini` CLIs (pinned versions, installed
//! by `.ci/run` under `target/agent-clis`), driven through our
//! `ProcessAgent` presets against a scripted model server on 127.0.0.1. The
//! CLI under test is the real one; only the model's answers are scripted.
//! A missing binary fails the test with the install command.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use orchestrator_adapters::agents::ProcessAgent;
use orchestrator_adapters::test_support::cli;
use orchestrator_adapters::test_support::model_server::{ModelServer, Protocol, Turn};
use orchestrator_core::agent::{Agent, AgentError, AgentExt, AgentRequest, Role};
use serde_json::{Value, json};

/// Our time limit for one real-CLI call.
const LIMIT: Duration = Duration::from_secs(60);

/// A folder for one CLI run: an isolated home and a working directory.
struct Sandbox {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Sandbox {
    /// Both folders live outside `/tmp`, in `test_support::sandbox_base`:
    /// codex's bubblewrap sandbox mounts a fresh `/tmp`, which would hide
    /// its own helper (`codex-linux-sandbox`, linked under `CODEX_HOME`).
    fn new() -> Self {
        let base = orchestrator_adapters::test_support::sandbox_base("real-cli-tests");
        std::fs::create_dir_all(&base).unwrap();
        Self {
            home: tempfile::tempdir_in(&base).unwrap(),
            work: tempfile::tempdir_in(&base).unwrap(),
        }
    }

    fn work(&self) -> &Path {
        self.work.path()
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.work().join(file)).unwrap()
    }
}

fn request(sandbox: &Sandbox, role: Role, instruction: &str) -> AgentRequest {
    AgentRequest::new("T1", role, instruction, sandbox.work()).with_time_limit(LIMIT)
}

/// The codex preset pointed at `server` (a `mock` model provider, no
/// retries of its own) with an isolated `CODEX_HOME`.
fn codex(server: &ModelServer, sandbox: &Sandbox) -> ProcessAgent {
    let mut agent = ProcessAgent::codex()
        .program(cli("codex"))
        .env("CODEX_HOME", sandbox.home.path())
        .env("HOME", sandbox.home.path())
        .env("MOCK_KEY", "test-key")
        .arg("--skip-git-repo-check");
    for config in [
        "model_provider=mock".to_owned(),
        "model_providers.mock.name=\"mock\"".to_owned(),
        format!("model_providers.mock.base_url=\"{}/v1\"", server.url()),
        "model_providers.mock.env_key=\"MOCK_KEY\"".to_owned(),
        "model_providers.mock.wire_api=\"responses\"".to_owned(),
        "model_providers.mock.request_max_retries=0".to_owned(),
        "model_providers.mock.stream_max_retries=0".to_owned(),
    ] {
        agent = agent.arg("-c").arg(config);
    }
    agent.arg("-m").arg("gpt-5")
}

fn elapsed(started: Instant, what: &str) {
    eprintln!("{what}: {:.1}s", started.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_runs_a_scripted_command_that_edits_the_tree() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.work().join("hello.txt"), "hello wrold\n").unwrap();
    let server = ModelServer::start(
        Protocol::OpenAiResponses,
        vec![
            Turn::tool(
                "exec_command",
                json!({"cmd": "sed -i s/wrold/world/ hello.txt"}),
            ),
            Turn::text("Fixed the typo in hello.txt."),
        ],
    )
    .await;
    let started = Instant::now();
    let response = codex(&server, &sandbox)
        .run(request(&sandbox, Role::Fix, "Fix the typo in hello.txt."))
        .await
        .unwrap();
    elapsed(started, "codex edit");

    let main = server.main_requests();
    assert_eq!(main.len(), 2, "{main:#?}");
    let outputs: Vec<&Value> = main[1].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .collect();
    assert_eq!(outputs.len(), 1, "{:#}", main[1].body["input"]);
    assert_eq!(outputs[0]["call_id"], "call_1");
    assert_eq!(
        sandbox.read("hello.txt"),
        "hello world\n",
        "{:#}",
        outputs[0]
    );
    assert_eq!(response.text, "Fixed the typo in hello.txt.");
}

/// A schema in our usual, non-strict style: an optional property, objects
/// not closed.
fn report_schema() -> Value {
    json!({
        "type": "object",
        "required": ["fixed", "files"],
        "properties": {
            "fixed": {"type": "boolean"},
            "files": {"type": "array", "items": {"type": "string"}},
            "note": {"type": "string"}
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_sends_the_schema_in_strict_form_and_the_answer_fits_the_original() {
    let sandbox = Sandbox::new();
    let server = ModelServer::start(
        Protocol::OpenAiResponses,
        vec![Turn::text(
            json!({"fixed": true, "files": ["src/lib.rs"], "note": null}).to_string(),
        )],
    )
    .await;
    let started = Instant::now();
    let response = codex(&server, &sandbox)
        .run_validated(
            request(&sandbox, Role::Plan, "Report what you fixed.").with_schema(report_schema()),
        )
        .await
        .unwrap();
    elapsed(started, "codex schema");

    let main = server.main_requests();
    assert_eq!(main.len(), 1, "{main:#?}");
    let format = &main[0].body["text"]["format"];
    assert_eq!(format["type"], "json_schema", "{format:#}");
    assert_eq!(format["strict"], true, "{format:#}");
    assert_eq!(
        format["schema"],
        json!({
            "type": "object",
            "required": ["files", "fixed", "note"],
            "additionalProperties": false,
            "properties": {
                "fixed": {"type": "boolean"},
                "files": {"type": "array", "items": {"type": "string"}},
                "note": {"type": ["string", "null"]}
            }
        })
    );
    assert_eq!(
        response.structured,
        Some(json!({"fixed": true, "files": ["src/lib.rs"]}))
    );
}

/// The error of an agent whose endpoint answers 401: not retried, naming the
/// agent and saying "authentication".
fn assert_authentication_error(err: &AgentError, agent: &str) {
    assert!(
        matches!(err, AgentError::Unavailable { .. }),
        "expected a non-retried error, got {err:?}"
    );
    assert!(!err.is_transient(), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(agent), "{message}");
    assert!(message.contains("authentication"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_unauthorized_is_an_authentication_error() {
    let sandbox = Sandbox::new();
    let server = ModelServer::always(
        Protocol::OpenAiResponses,
        Turn::Status(401, "Incorrect API key provided".into()),
    )
    .await;
    let started = Instant::now();
    let err = codex(&server, &sandbox)
        .run(request(&sandbox, Role::Fix, "Fix it."))
        .await
        .unwrap_err();
    elapsed(started, "codex 401");
    assert!(started.elapsed() < LIMIT, "{err:?}");
    eprintln!("{err}");
    assert_authentication_error(&err, "codex");
    assert_eq!(server.main_requests().len(), 1, "{:#?}", server.requests());
}

/// The gemini preset pointed at `server` with an isolated home whose
/// settings select API-key authentication. The working directory is not
/// marked trusted: the preset must cope with that.
fn gemini(server: &ModelServer, sandbox: &Sandbox) -> ProcessAgent {
    let settings = sandbox.home.path().join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
    )
    .unwrap();
    ProcessAgent::gemini()
        .program(cli("gemini"))
        .env("HOME", sandbox.home.path())
        .env("GEMINI_API_KEY", "test-key")
        .env("GOOGLE_GEMINI_BASE_URL", server.url())
        .env_remove("GEMINI_CLI_TRUST_WORKSPACE")
}

/// A gemini run whose model asks to run `command` through the shell tool
/// for a Fix request granting `grant`.
async fn gemini_shell(
    command: &str,
    grant: &[&str],
) -> (
    Sandbox,
    ModelServer,
    Result<orchestrator_core::AgentResponse, AgentError>,
) {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.work().join("hello.txt"), "hello wrold\n").unwrap();
    let server = ModelServer::start(
        Protocol::Gemini,
        vec![
            Turn::tool(
                "run_shell_command",
                json!({"command": command, "description": "Fix the typo"}),
            ),
            Turn::text("Done."),
        ],
    )
    .await;
    let started = Instant::now();
    let mut req = request(&sandbox, Role::Fix, "Fix the typo in hello.txt.");
    if !grant.is_empty() {
        req = req.allow_command(grant.iter().copied());
    }
    let result = gemini(&server, &sandbox).run(req).await;
    elapsed(started, "gemini shell");
    (sandbox, server, result)
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_runs_a_granted_command_and_is_denied_an_ungranted_one() {
    let (sandbox, server, result) = gemini_shell("sed -i s/wrold/world/ hello.txt", &["sed"]).await;
    let main = server.main_requests();
    result.unwrap_or_else(|err| panic!("{err}\nrequests: {main:#?}"));
    assert_eq!(sandbox.read("hello.txt"), "hello world\n");

    let (sandbox, server, _) =
        gemini_shell("sed -i s/wrold/world/ hello.txt", &["cargo", "test"]).await;
    assert_eq!(
        sandbox.read("hello.txt"),
        "hello wrold\n",
        "an ungranted command ran"
    );
    let main = server.main_requests();
    assert!(main.len() >= 2, "{main:#?}");
    let answer = main[1].body["contents"].to_string();
    assert!(answer.contains("functionResponse"), "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_writes_a_file_in_an_untrusted_folder() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.work().join("hello.txt"), "hello wrold\n").unwrap();
    let server = ModelServer::start(
        Protocol::Gemini,
        vec![
            Turn::tool(
                "write_file",
                json!({"file_path": "hello.txt", "content": "hello world\n"}),
            ),
            Turn::text("Fixed the typo in hello.txt."),
        ],
    )
    .await;
    let started = Instant::now();
    let response = gemini(&server, &sandbox)
        .run(request(&sandbox, Role::Fix, "Fix the typo in hello.txt."))
        .await;
    elapsed(started, "gemini edit");
    let main = server.main_requests();
    let response = response.unwrap_or_else(|err| panic!("{err}\nrequests: {main:#?}"));

    assert_eq!(sandbox.read("hello.txt"), "hello world\n");
    assert_eq!(response.text, "Fixed the typo in hello.txt.");
    // `-o json` names no files; flows derive the write-set from the tree.
    assert_eq!(response.files_changed, Vec::<String>::new());
    assert_eq!(main.len(), 2, "{main:#?}");
    let sent = main[1].body.to_string();
    assert!(sent.contains("functionResponse"), "{sent}");
    // The trust fix kept the approval mode: write_file ran without a prompt,
    // and the routing call went to the flash-lite model first.
    let all = server.requests();
    assert!(
        all[0].path.contains("flash-lite") && !all[0].main,
        "{:?}",
        all.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    // The prompt reached the model (on stdin, not as an argument).
    assert!(
        main[0]
            .body
            .to_string()
            .contains("Fix the typo in hello.txt."),
        "{:#}",
        main[0].body
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_unauthorized_is_an_authentication_error() {
    let sandbox = Sandbox::new();
    let server = ModelServer::always(
        Protocol::Gemini,
        Turn::Status(
            401,
            "API key not valid. Please pass a valid API key.".into(),
        ),
    )
    .await;
    let started = Instant::now();
    let result = gemini(&server, &sandbox)
        .run(request(&sandbox, Role::Fix, "Fix it."))
        .await;
    elapsed(started, "gemini 401");
    let err = result.unwrap_err();
    assert!(started.elapsed() < LIMIT, "{err:?}");
    eprintln!("{err}");
    assert_authentication_error(&err, "gemini");
    assert_eq!(server.main_requests().len(), 1, "{:#?}", server.requests());
}

/// The claude preset pointed at `server` with an isolated home. `grants`:
/// extra `--allowedTools` values.
fn claude(server: &ModelServer, sandbox: &Sandbox, grants: &[&str]) -> ProcessAgent {
    let mut agent = ProcessAgent::claude()
        .program(cli("claude"))
        .env("HOME", sandbox.home.path())
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env_remove("ANTHROPIC_AUTH_TOKEN");
    for grant in grants {
        agent = agent.arg("--allowedTools").arg(*grant);
    }
    agent
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_runs_a_granted_bash_command_that_edits_the_tree() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.work().join("hello.txt"), "hello wrold\n").unwrap();
    let server = ModelServer::start(
        Protocol::Anthropic,
        vec![
            Turn::tool(
                "Bash",
                json!({"command": "sed -i s/wrold/world/ hello.txt", "description": "Fix the typo"}),
            ),
            Turn::text("Fixed the typo in hello.txt."),
        ],
    )
    .await;
    let started = Instant::now();
    let result = claude(&server, &sandbox, &[])
        .run(request(&sandbox, Role::Fix, "Fix the typo in hello.txt.").allow_command(["sed"]))
        .await;
    elapsed(started, "claude edit");
    let main = server.main_requests();
    let response = result.unwrap_or_else(|err| panic!("{err}\nrequests: {main:#?}"));

    assert_eq!(sandbox.read("hello.txt"), "hello world\n");
    assert_eq!(response.text, "Fixed the typo in hello.txt.");
    assert_eq!(main.len(), 2, "{main:#?}");
    let sent = main[1].body["messages"].to_string();
    assert!(
        sent.contains("tool_result") && sent.contains("toolu_1"),
        "{sent}"
    );
    let usage = response.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (400, 80));
    assert!(usage.cost_usd > 0.0, "{usage:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_prefers_structured_output_for_a_json_schema() {
    let sandbox = Sandbox::new();
    let answer = json!({"fixed": true, "files": ["src/lib.rs"]});
    let server = ModelServer::start(
        Protocol::Anthropic,
        vec![
            Turn::tool("StructuredOutput", answer.clone()),
            Turn::text("Done."),
        ],
    )
    .await;
    let started = Instant::now();
    let result = claude(&server, &sandbox, &[])
        .run_validated(
            request(&sandbox, Role::Plan, "Report what you fixed.").with_schema(report_schema()),
        )
        .await;
    elapsed(started, "claude schema");
    let main = server.main_requests();
    let response = result.unwrap_or_else(|err| panic!("{err}\nrequests: {main:#?}"));
    assert_eq!(response.structured, Some(answer));
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_unauthorized_is_an_authentication_error() {
    let sandbox = Sandbox::new();
    let server = ModelServer::always(
        Protocol::Anthropic,
        Turn::Status(401, "invalid x-api-key".into()),
    )
    .await;
    let started = Instant::now();
    let result = claude(&server, &sandbox, &[])
        .run(request(&sandbox, Role::Fix, "Fix it."))
        .await;
    elapsed(started, "claude 401");
    let err = result.unwrap_err();
    eprintln!("{err}");
    assert!(
        started.elapsed() < LIMIT + Duration::from_secs(10),
        "{err:?}"
    );
    assert_authentication_error(&err, "claude");
    // One attempt: claude's own retries are off, and ours skip this class.
    assert_eq!(server.main_requests().len(), 1, "{:#?}", server.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_edits_a_file_with_its_edit_tool_under_the_fix_preset() {
    let sandbox = Sandbox::new();
    let file = sandbox.work().join("hello.txt");
    std::fs::write(&file, "hello wrold\n").unwrap();
    let path = file.to_string_lossy().into_owned();
    // Claude Code refuses to edit a file it has not read: Read, then Edit.
    let server = ModelServer::start(
        Protocol::Anthropic,
        vec![
            Turn::tool("Read", json!({"file_path": path})),
            Turn::tool(
                "Edit",
                json!({"file_path": path, "old_string": "wrold", "new_string": "world"}),
            ),
            Turn::text("Fixed the typo in hello.txt."),
        ],
    )
    .await;
    let started = Instant::now();
    // No grants: `--permission-mode acceptEdits` of the fix role suffices.
    let result = claude(&server, &sandbox, &[])
        .run(request(&sandbox, Role::Fix, "Fix the typo in hello.txt."))
        .await;
    elapsed(started, "claude Edit");
    let main = server.main_requests();
    let response = result.unwrap_or_else(|err| panic!("{err}\nrequests: {main:#?}"));

    assert_eq!(sandbox.read("hello.txt"), "hello world\n", "{main:#?}");
    assert_eq!(response.text, "Fixed the typo in hello.txt.");
    assert_eq!(main.len(), 3, "{main:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_takes_a_prompt_larger_than_an_argument_may_be() {
    let sandbox = Sandbox::new();
    let server = ModelServer::start(Protocol::Gemini, vec![Turn::text("Read it all.")]).await;
    // Linux limits one argument to 128 KiB (MAX_ARG_STRLEN): a CI log this
    // long in argv fails with E2BIG before gemini starts.
    let log = "error[E0308]: mismatched types\n".repeat(8 * 1024);
    let instruction = format!("Fix the build.\n{log}END-OF-LOG-MARKER");
    assert!(instruction.len() > 200 * 1024);
    let started = Instant::now();
    let response = gemini(&server, &sandbox)
        .run(request(&sandbox, Role::Explore, &instruction))
        .await
        .unwrap();
    elapsed(started, "gemini long prompt");
    assert_eq!(response.text, "Read it all.");
    let main = server.main_requests();
    assert_eq!(main.len(), 1, "{} requests", main.len());
    assert!(main[0].body.to_string().contains("END-OF-LOG-MARKER"));
}

/// The tests above fail, not skip, without the CLIs: the lookup panics with
/// the install command.
#[test]
#[should_panic(expected = "npm install --no-audit --no-fund --prefix target/agent-clis")]
fn a_missing_cli_fails_with_the_install_command() {
    cli("no-such-agent-cli");
}

/// Whether any process has its working directory in `dir` (the agent CLI
/// and whatever it started run there).
fn process_running_in(dir: &Path) -> bool {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(&dir))
    })
}

/// Runs `agent` against an endpoint that never answers, with a 10 s limit
/// (gemini alone needs about 4 s to start on a loaded machine): a Timeout
/// in time, and no process left in the working directory. Once the CLI's
/// request is waiting on the endpoint, a process is seen there, so its
/// absence afterwards means something.
async fn assert_hang_is_stopped(agent: ProcessAgent, server: &ModelServer, sandbox: &Sandbox) {
    let limit = Duration::from_secs(10);
    let started = Instant::now();
    let agent = agent.grace(Duration::from_secs(1));
    let (result, running_while_waiting) = tokio::join!(
        agent.run(request(sandbox, Role::Fix, "Fix it.").with_time_limit(limit)),
        async {
            while server.main_requests().is_empty() && started.elapsed() < limit {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            !server.main_requests().is_empty() && process_running_in(sandbox.work())
        }
    );
    let err = result.unwrap_err();
    elapsed(started, &format!("{} hang", agent.name()));
    assert!(
        running_while_waiting,
        "{} was not seen waiting on the endpoint: {:#?}",
        agent.name(),
        server.requests()
    );
    assert!(matches!(err, AgentError::Timeout { .. }), "{err:?}");
    assert!(
        started.elapsed() < limit + Duration::from_secs(5),
        "{err:?}"
    );
    assert!(
        !process_running_in(sandbox.work()),
        "a process was left behind"
    );
}

fn hung() -> Turn {
    Turn::Hang(Duration::from_secs(120))
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_on_a_hung_endpoint_is_stopped_at_our_time_limit_with_no_process_left() {
    let sandbox = Sandbox::new();
    let server = ModelServer::always(Protocol::OpenAiResponses, hung()).await;
    assert_hang_is_stopped(codex(&server, &sandbox), &server, &sandbox).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_on_a_hung_endpoint_is_stopped_at_our_time_limit_with_no_process_left() {
    let sandbox = Sandbox::new();
    let server = ModelServer::always(Protocol::Gemini, hung()).await;
    assert_hang_is_stopped(gemini(&server, &sandbox), &server, &sandbox).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_on_a_hung_endpoint_is_stopped_at_our_time_limit_with_no_process_left() {
    let sandbox = Sandbox::new();
    let server = ModelServer::always(Protocol::Anthropic, hung()).await;
    assert_hang_is_stopped(claude(&server, &sandbox, &[]), &server, &sandbox).await;
}

/// A sandbox with `hello.txt`, and an Anthropic endpoint whose model asks
/// claude to read it forever (it never stops calling tools).
async fn claude_reading_forever() -> (Sandbox, ModelServer) {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.work().join("hello.txt"), "hello\n").unwrap();
    let path = sandbox
        .work()
        .join("hello.txt")
        .to_string_lossy()
        .into_owned();
    let server = ModelServer::always(
        Protocol::Anthropic,
        Turn::tool("Read", json!({"file_path": path})),
    )
    .await;
    (sandbox, server)
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_at_its_turn_limit_is_a_budget_failure() {
    let (sandbox, server) = claude_reading_forever().await;
    let result = claude(&server, &sandbox, &[])
        .arg("--max-turns")
        .arg("2")
        .run(request(&sandbox, Role::Fix, "Read hello.txt forever."))
        .await;
    let main = server.main_requests();
    match result {
        Err(AgentError::Budget { message }) => {
            assert!(message.contains("error_max_turns"), "{message}");
        }
        other => panic!("expected a budget failure, got {other:?}\nrequests: {main:#?}"),
    }
    assert!(
        !AgentError::Budget {
            message: String::new()
        }
        .is_transient()
    );
    assert_eq!(main.len(), 2, "two turns, then claude stops: {main:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_stops_at_the_requests_own_dollar_limit() {
    let (sandbox, server) = claude_reading_forever().await;
    // One scripted turn costs claude more than this: it stops after it
    // (`--max-budget-usd`), where `--max-turns` would let it go on.
    let request = request(&sandbox, Role::Fix, "Read hello.txt forever.").with_spend_limits(
        orchestrator_core::agent::ItemLimits::new(Some(0.001), None, None),
    );
    let result = claude(&server, &sandbox, &[])
        .arg("--max-turns")
        .arg("5")
        .run(request)
        .await;
    let main = server.main_requests();
    match &result {
        Err(AgentError::CallLimit { message }) => {
            assert!(
                message.starts_with("claude stopped at the call's limit of $0.0010"),
                "{message}"
            );
            assert!(message.contains("error_max_budget_usd"), "{message}");
        }
        other => panic!("expected the call's own limit, got {other:?}\nrequests: {main:#?}"),
    }
    assert!(result.unwrap_err().is_final());
    assert_eq!(main.len(), 1, "one turn, then claude stops: {main:#?}");
}

/// A gemini run whose model asks for the same file forever, with the
/// user's `settings` (None: the sandbox's own): the budget failure it ends
/// in, its message.
async fn gemini_reading_forever(settings: Option<&str>) -> String {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.work().join("hello.txt"), "hello\n").unwrap();
    let server = ModelServer::always(
        Protocol::Gemini,
        Turn::tool("read_file", json!({"file_path": "hello.txt"})),
    )
    .await;
    let agent = gemini(&server, &sandbox);
    if let Some(settings) = settings {
        std::fs::write(sandbox.home.path().join(".gemini/settings.json"), settings).unwrap();
    }
    let started = Instant::now();
    let result = agent
        .run(request(&sandbox, Role::Fix, "Read hello.txt forever."))
        .await;
    elapsed(started, "gemini reading forever");
    match result {
        Err(AgentError::Budget { message }) => {
            assert!(message.contains("gemini"), "{message}");
            message
        }
        other => panic!(
            "expected a budget failure, got {other:?}\nrequests: {}",
            server.main_requests().len()
        ),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_at_its_session_turn_limit_is_a_budget_failure() {
    // The user's own setting: at most two turns per session.
    gemini_reading_forever(Some(
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"model":{"maxSessionTurns":2}}"#,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_stopping_a_loop_of_its_own_is_a_budget_failure() {
    // Without a turn limit, gemini's own loop detection stops the run, and
    // gemini exits 0 with a warning.
    let message = gemini_reading_forever(None).await;
    assert!(message.contains("Loop detected"), "{message}");
}

/// Two calls of `agent` in one working directory, the second resuming the
/// session the first answered with: the second conversation the server
/// receives carries the first one (its prompt and answer), and its
/// answer keeps the session id. Then a call that asks to resume a session
/// the CLI does not have still answers, in a new session.
async fn assert_resumes_its_session(
    protocol: Protocol,
    agent: impl Fn(&ModelServer, &Sandbox) -> ProcessAgent,
) {
    let sandbox = Sandbox::new();
    let server = ModelServer::start(
        protocol,
        vec![
            Turn::text("FIRST-ANSWER: the test fails because calc returns 41."),
            Turn::text("SECOND-ANSWER"),
            Turn::text("THIRD-ANSWER"),
        ],
    )
    .await;
    let agent = agent(&server, &sandbox);
    let started = Instant::now();
    let first = agent
        .run(request(&sandbox, Role::Fix, "FIRST-PROMPT: fix calc."))
        .await
        .unwrap_or_else(|err| panic!("{err}\nrequests: {:#?}", server.main_requests()));
    let session = first
        .session
        .clone()
        .unwrap_or_else(|| panic!("no session in {first:?}"));
    let second = agent
        .run(
            request(&sandbox, Role::Fix, "SECOND-PROMPT: the tests still fail.").resuming(&session),
        )
        .await
        .unwrap_or_else(|err| panic!("{err}\nrequests: {:#?}", server.main_requests()));
    elapsed(started, &format!("{} resume", agent.name()));
    assert_eq!(second.text, "SECOND-ANSWER");
    assert_eq!(second.session.as_deref(), Some(session.as_str()));
    let main = server.main_requests();
    assert_eq!(main.len(), 2, "{main:#?}");
    let resumed = main[1].body.to_string();
    for part in ["FIRST-PROMPT", "FIRST-ANSWER", "SECOND-PROMPT"] {
        assert!(resumed.contains(part), "{part} missing from {resumed}");
    }
    assert!(!main[0].body.to_string().contains("SECOND-PROMPT"));

    let fresh = agent
        .run(
            request(&sandbox, Role::Fix, "THIRD-PROMPT")
                .resuming("3f1c2a4e-0000-4000-8000-000000000000"),
        )
        .await
        .unwrap_or_else(|err| panic!("{err}\nrequests: {:#?}", server.main_requests()));
    assert_eq!(fresh.text, "THIRD-ANSWER");
    let main = server.main_requests();
    assert_eq!(main.len(), 3, "{main:#?}");
    let third = main[2].body.to_string();
    assert!(
        third.contains("THIRD-PROMPT") && !third.contains("FIRST-PROMPT"),
        "{third}"
    );
    assert_ne!(fresh.session.as_deref(), Some(session.as_str()));
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_resumes_its_session() {
    assert_resumes_its_session(Protocol::Anthropic, |server, sandbox| {
        claude(server, sandbox, &[])
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_resumes_its_thread() {
    assert_resumes_its_session(Protocol::OpenAiResponses, codex).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_resumes_its_session() {
    assert_resumes_its_session(Protocol::Gemini, gemini).await;
}
