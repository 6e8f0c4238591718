//! `ToolAgent` against the scripted chat-completions server on 127.0.0.1:
//! real HTTP, real files, real processes (inside bubblewrap where it works).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use orchestrator_adapters::openai::OpenAiConfig;
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_adapters::test_support::model_server::{ModelServer, Protocol, Turn};
use orchestrator_adapters::tool_agent::negotiate::{FormatLevel, ToolMode};
use orchestrator_adapters::tool_agent::tools::Sandbox;
use orchestrator_adapters::tool_agent::{SandboxChoice, ToolAgent, ToolAgentConfig};
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, Role};
use orchestrator_core::finding::digest_hex;
use serde_json::{Value, json};

const KEY: &str = "sk-test-secret-4242";

/// The check script: passes when calc.txt says `value = 2`.
const CHECK: &str = "#!/bin/sh\nif grep -q '^value = 2$' calc.txt; then echo 'all checks ok'; else echo \"FAIL calc_value: $(cat calc.txt)\"; exit 1; fi\n";

struct Tree {
    _dir: tempfile::TempDir,
    outer: PathBuf,
    repo: PathBuf,
    transcripts: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let outer = dir.path().canonicalize().unwrap().join("outer");
        let repo = outer.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(repo.join("calc.txt"), "value = 1\n").unwrap();
        std::fs::write(repo.join("check.sh"), CHECK).unwrap();
        std::fs::write(outer.join("sibling.txt"), "keep me\n").unwrap();
        std::os::unix::fs::symlink(&outer, repo.join("link")).unwrap();
        let transcripts = dir.path().canonicalize().unwrap().join("transcripts");
        Tree {
            _dir: dir,
            outer,
            repo,
            transcripts,
        }
    }

    /// Digest of every file under `outer` (symlinks as their target path).
    fn digest(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.outer.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let kind = entry.file_type().unwrap();
                let key = path
                    .strip_prefix(&self.outer)
                    .unwrap()
                    .display()
                    .to_string();
                if kind.is_symlink() {
                    out.insert(
                        key,
                        std::fs::read_link(&path).unwrap().display().to_string(),
                    );
                } else if kind.is_dir() {
                    stack.push(path);
                } else {
                    out.insert(key, digest_hex(&[&std::fs::read(&path).unwrap()]));
                }
            }
        }
        out
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.repo.join(file)).unwrap()
    }
}

fn agent(server: &ModelServer, tree: &Tree, tweak: impl FnOnce(&mut ToolAgentConfig)) -> ToolAgent {
    let http = OpenAiConfig::new(format!("{}/v1", server.url()), "scripted-model")
        .with_api_key(KEY)
        .with_max_retries(3)
        .with_backoff(Duration::from_millis(10), Duration::from_millis(20));
    let mut config = ToolAgentConfig::default();
    config.fallback_transcript_dir = Some(tree.transcripts.clone());
    tweak(&mut config);
    ToolAgent::new(http, config, Arc::new(ProcessRunner::default())).unwrap()
}

fn fix_request(tree: &Tree, instruction: &str) -> AgentRequest {
    AgentRequest::new("F1", Role::Fix, instruction, &tree.repo)
        .with_time_limit(Duration::from_secs(60))
        .allow_command(["sh", "check.sh"])
}

/// The turn at the conversation's step (its number of tool results).
fn at_step(
    turns: Vec<Turn>,
) -> impl FnMut(&orchestrator_adapters::test_support::model_server::Exchange) -> Turn + Send + 'static
{
    move |exchange| {
        turns
            .get(exchange.tool_results().len())
            .cloned()
            .unwrap_or_else(|| Turn::Status(500, "script exhausted".into()))
    }
}

fn transcript_lines(tree: &Tree) -> Vec<Value> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(&tree.transcripts).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        assert!(
            !text.contains(KEY),
            "the key leaked into {}",
            entry.path().display()
        );
        lines.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_edits_runs_the_tests_sees_a_failure_and_fixes_it() {
    let tree = Tree::new();
    let server = ModelServer::scripted(
        Protocol::OpenAiChat,
        at_step(vec![
            Turn::tool("read_file", json!({"path": "calc.txt"})),
            Turn::tool(
                "edit",
                json!({"path": "calc.txt", "old_text": "value = 1", "new_text": "value = 3"}),
            ),
            Turn::tool("run", json!({"argv": ["sh", "check.sh"]})),
            Turn::tool(
                "edit",
                json!({"path": "calc.txt", "old_text": "value = 3", "new_text": "value = 2"}),
            ),
            Turn::tool("run", json!({"argv": ["sh", "check.sh"]})),
            Turn::text("{\"status\": \"fixed\"}"),
        ]),
    )
    .await;
    let agent = agent(&server, &tree, |_| {});
    let request = fix_request(&tree, "Make calc.txt say value = 2.").with_schema(json!({
        "type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}));
    let response = agent.run(request).await.unwrap();

    assert_eq!(tree.read("calc.txt"), "value = 2\n");
    assert_eq!(response.files_changed, ["calc.txt"]);
    assert_eq!(response.structured, Some(json!({"status": "fixed"})));
    let usage = response.usage.unwrap();
    assert_eq!(
        (usage.turns, usage.input_tokens, usage.output_tokens),
        (6, 1200, 240)
    );

    // What the model saw: the file, the failing run, then the passing one.
    let last = server.main_requests().pop().unwrap().body;
    let tool_messages: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(tool_messages.len(), 5, "{tool_messages:#?}");
    assert_eq!(tool_messages[0], "value = 1\n");
    assert!(
        tool_messages[2].starts_with("exit code 1\n"),
        "{}",
        tool_messages[2]
    );
    assert!(
        tool_messages[2].contains("FAIL calc_value: value = 3"),
        "{}",
        tool_messages[2]
    );
    assert_eq!(tool_messages[4], "exit code 0\nall checks ok\n");
    // Every request offered the tools natively, without a key in the body.
    for request in server.main_requests() {
        assert_eq!(request.body["tool_choice"], "auto");
        assert_eq!(request.body["tools"].as_array().unwrap().len(), 6);
    }

    let stats = agent.stats();
    assert_eq!(stats.len(), 1);
    let s = &stats[0];
    assert_eq!(
        s.tool_calls,
        BTreeMap::from([
            ("edit".into(), 2),
            ("read_file".into(), 1),
            ("run".into(), 2)
        ])
    );
    assert_eq!(
        (s.tool_errors, s.refusals, s.outcome.as_str()),
        (1, 0, "ok")
    );
    let kinds: Vec<String> = transcript_lines(&tree)
        .iter()
        .map(|l| l["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("start"));
    assert_eq!(kinds.last().map(String::as_str), Some("end"));
    assert_eq!(kinds.iter().filter(|k| *k == "request").count(), 6);
    assert_eq!(kinds.iter().filter(|k| *k == "tool").count(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapes_are_refused_and_nothing_outside_is_touched() {
    let tree = Tree::new();
    let before = tree.digest();
    let passwd = std::fs::read("/etc/passwd").ok();
    let server = ModelServer::scripted(
        Protocol::OpenAiChat,
        at_step(vec![
            Turn::tool("read_file", json!({"path": "../../etc/passwd"})),
            Turn::tool("read_file", json!({"path": "/etc/passwd"})),
            Turn::tool("write_file", json!({"path": "../sibling.txt", "content": "owned"})),
            Turn::tool("write_file", json!({"path": "link/sibling.txt", "content": "owned"})),
            Turn::tool("read_file", json!({"path": "link/sibling.txt"})),
            Turn::tool("edit", json!({"path": ".git/config", "old_text": "[core]", "new_text": "[core]\n\thooksPath = /tmp"})),
            Turn::tool("write_file", json!({"path": ".workflow/state.json", "content": "{}"})),
            Turn::tool("run", json!({"argv": ["rm", "-rf", ".."]})),
            Turn::tool("run", json!({"argv": ["sh", "-c", "echo owned > ../sibling.txt"]})),
            Turn::tool("list_files", json!({})),
            Turn::text("I could not do anything."),
        ]),
    )
    .await;
    let agent = agent(&server, &tree, |_| {});
    let response = agent.run(fix_request(&tree, "Escape.")).await.unwrap();

    assert_eq!(
        tree.digest(),
        before,
        "the tree and its parent are untouched"
    );
    assert_eq!(std::fs::read("/etc/passwd").ok(), passwd);
    assert!(
        response.files_changed.is_empty(),
        "{:?}",
        response.files_changed
    );
    let stats = &agent.stats()[0];
    assert_eq!(stats.refusals, 9, "{stats:?}");
    let results = {
        let last = server.main_requests().pop().unwrap().body;
        last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    for (i, fragment) in [
        "climbs out",
        "outside the working directory",
        "climbs out",
        "through a symlink",
        "through a symlink",
        ".git/ belongs to git",
        ".workflow/ belongs to git or the engine",
        "command `rm -rf ..` is not allowed (allowed: `sh check.sh`)",
        "command `sh -c echo owned > ../sibling.txt` is not allowed",
    ]
    .iter()
    .enumerate()
    {
        assert!(
            results[i].starts_with("error: refused") || results[i].starts_with("error: command"),
            "{i}: {}",
            results[i]
        );
        assert!(results[i].contains(fragment), "{i}: {}", results[i]);
    }
    // list_files shows the tree without .git/ and without following the link.
    assert_eq!(results[9], "calc.txt\ncheck.sh");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_failing_call_three_times_stops_the_attempt() {
    let tree = Tree::new();
    let server = ModelServer::always(
        Protocol::OpenAiChat,
        Turn::tool(
            "edit",
            json!({"path": "calc.txt", "old_text": "value = 9", "new_text": "value = 2"}),
        ),
    )
    .await;
    let agent = agent(&server, &tree, |_| {});
    let error = agent.run(fix_request(&tree, "Fix it.")).await.unwrap_err();
    match &error {
        AgentError::LoopDetected { signature, count } => {
            assert_eq!(*count, 3);
            assert!(
                signature.contains("old_text does not occur in calc.txt"),
                "{signature}"
            );
            assert!(signature.contains("(transcript: "), "{signature}");
        }
        other => panic!("{other:?}"),
    }
    assert!(error.is_final());
    assert_eq!(server.main_requests().len(), 3);
    assert_eq!(tree.read("calc.txt"), "value = 1\n");
    assert_eq!(agent.stats()[0].outcome, "loop_detected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_limit_is_a_final_budget_error() {
    let tree = Tree::new();
    let server =
        ModelServer::always(Protocol::OpenAiChat, Turn::tool("list_files", json!({}))).await;
    let agent = agent(&server, &tree, |c| c.max_turns = 4);
    let error = agent
        .run(fix_request(&tree, "Look around forever."))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AgentError::Budget { message } if message.contains("its 4 turns")),
        "{error:?}"
    );
    assert!(error.is_final());
    assert_eq!(server.main_requests().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requests_own_token_limit_stops_the_loop_before_the_request_past_it() {
    let tree = Tree::new();
    let server =
        ModelServer::always(Protocol::OpenAiChat, Turn::tool("list_files", json!({}))).await;
    let agent = agent(&server, &tree, |_| {});
    let request = fix_request(&tree, "Look around forever.").with_spend_limits(
        orchestrator_core::agent::ItemLimits::new(None, Some(500), None),
    );
    let error = agent.run(request).await.unwrap_err();
    let requests = server.main_requests().len();
    match &error {
        AgentError::CallLimit { message } => assert!(
            message.contains(&format!(
                "in {requests} turns, reaching the call's limit of 500"
            )),
            "{message}"
        ),
        other => panic!("expected the call's own limit, got {other:?}"),
    }
    assert!(error.is_final());
    // Each scripted answer reports 240 tokens: 240 and 480 are below the
    // limit, so a third request is made; 720 is past it, so no fourth.
    assert_eq!(requests, 3);
    assert_eq!(agent.stats()[0].outcome, "call_limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flows_session_folder_gets_the_transcript_and_the_error_names_it() {
    let tree = Tree::new();
    let session = tree.outer.join("session");
    let server =
        ModelServer::always(Protocol::OpenAiChat, Turn::tool("list_files", json!({}))).await;
    let agent = agent(&server, &tree, |c| c.max_turns = 2);
    let error = agent
        .run(fix_request(&tree, "Look around forever.").with_artifacts_dir(&session))
        .await
        .unwrap_err();
    let files: Vec<PathBuf> = std::fs::read_dir(session.join("transcripts"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        error
            .to_string()
            .contains(&format!("(transcript: {})", files[0].display())),
        "{error}"
    );
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(!text.contains(KEY));
    let end: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(end["kind"], "end", "{end}");
    // The fallback folder got nothing.
    assert!(!tree.transcripts.exists());

    // A folder the user chose takes every transcript, the session's too.
    let chosen = tree.outer.join("chosen");
    let agent = self::agent(&server, &tree, |c| {
        c.max_turns = 2;
        c.transcript_dir = Some(chosen.clone());
    });
    agent
        .run(fix_request(&tree, "Look around forever.").with_artifacts_dir(&session))
        .await
        .unwrap_err();
    assert_eq!(std::fs::read_dir(&chosen).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_dir(session.join("transcripts"))
            .unwrap()
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_json_schema_moves_to_json_object_for_the_rest_of_the_run() {
    let tree = Tree::new();
    let server = ModelServer::scripted(Protocol::OpenAiChat, |exchange| {
        match exchange.body["response_format"]["type"].as_str() {
            // What llama-cpp-python answers to a json_schema format.
            Some("json_schema") => Turn::Status(
                500,
                "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  Input should be 'text' or 'json_object'".into(),
            ),
            Some("json_object") => Turn::text("{\"angles\": [\"api\"]}"),
            _ => Turn::Status(400, "expected a response_format".into()),
        }
    })
    .await;
    let agent = agent(&server, &tree, |_| {});
    let schema = json!({"type": "object", "required": ["angles"],
        "properties": {"angles": {"type": "array", "items": {"type": "string"}}}});
    let plan = |id: &str| {
        AgentRequest::new(id, Role::Plan, "Plan the angles.", &tree.repo)
            .with_schema(schema.clone())
    };
    let first = agent.run(plan("P1")).await.unwrap();
    assert_eq!(first.structured, Some(json!({"angles": ["api"]})));
    let second = agent.run(plan("P2")).await.unwrap();
    assert_eq!(second.structured, Some(json!({"angles": ["api"]})));
    let formats: Vec<Value> = server
        .main_requests()
        .iter()
        .map(|r| r.body["response_format"]["type"].clone())
        .collect();
    // Refused once, not retried as transient, and not tried again.
    assert_eq!(
        formats,
        [
            json!("json_schema"),
            json!("json_object"),
            json!("json_object")
        ]
    );
    let second_body = &server.main_requests()[1].body;
    assert_eq!(second_body["response_format"]["schema"], schema);
    assert!(
        second_body.get("tools").is_none(),
        "an answer-only role gets no tools"
    );
    assert_eq!(agent.negotiated().0, FormatLevel::JsonObject);
    let negotiation = transcript_lines(&tree)
        .into_iter()
        .find(|l| l["kind"] == "negotiation")
        .unwrap();
    assert_eq!(negotiation["from"], "json_schema");
    assert_eq!(negotiation["to"], "json_object");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tools_gets_the_text_protocol() {
    let tree = Tree::new();
    let script = [
        Turn::text(
            "I will write it.\n```action\n{\"tool\": \"write_file\", \"args\": {\"path\": \"notes/hello.txt\", \"content\": \"hello\\n\"}}\n```",
        ),
        Turn::text(
            "```action\n{\"tool\": \"run\", \"args\": {\"argv\": [\"sh\", \"check.sh\"]}}\n```\n```action\n{}\n```",
        ),
        Turn::text(
            "```action\n{\"tool\": \"read_file\", \"args\": {\"path\": \"notes/hello.txt\"}}\n```",
        ),
        Turn::text("Done: notes/hello.txt says hello."),
    ];
    let server = ModelServer::scripted(Protocol::OpenAiChat, move |exchange| {
        if exchange.body.get("tools").is_some() {
            return Turn::Status(400, "this model does not support tools".into());
        }
        script
            .get(exchange.tool_results().len())
            .cloned()
            .unwrap_or_else(|| Turn::Status(500, "script exhausted".into()))
    })
    .await;
    let agent = agent(&server, &tree, |_| {});
    let response = agent
        .run(fix_request(&tree, "Write notes/hello.txt."))
        .await
        .unwrap();
    assert_eq!(tree.read("notes/hello.txt"), "hello\n");
    assert_eq!(response.files_changed, ["notes/hello.txt"]);
    assert_eq!(response.text, "Done: notes/hello.txt says hello.");
    assert_eq!(agent.negotiated().1, ToolMode::Text);
    let requests = server.main_requests();
    assert!(requests[0].body.get("tools").is_some());
    assert!(requests[1..].iter().all(|r| r.body.get("tools").is_none()));
    let system = requests[1].body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("```action"), "{system}");
    // The reply with two actions was a protocol error the model was told about.
    let last = &requests.last().unwrap().body["messages"];
    let protocol_error = last
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["content"]
                .as_str()
                .unwrap_or("")
                .starts_with("Protocol error:")
        })
        .unwrap();
    assert!(
        protocol_error["content"]
            .as_str()
            .unwrap()
            .contains("2 action blocks")
    );
    let stats = &agent.stats()[0];
    assert_eq!(
        stats.tool_calls,
        BTreeMap::from([("read_file".into(), 1), ("write_file".into(), 1)])
    );
    // A second attempt on the same agent starts with the text protocol.
    let before = server.main_requests().len();
    let _ = agent.run(fix_request(&tree, "Again.")).await;
    assert!(server.main_requests()[before].body.get("tools").is_none());
}

#[test]
fn the_tree_digest_sees_changes() {
    // The escape test relies on `Tree::digest` noticing a change outside.
    let tree = Tree::new();
    let before = tree.digest();
    std::fs::write(tree.outer.join("sibling.txt"), "changed\n").unwrap();
    assert_ne!(tree.digest(), before);
    assert!(Path::new(&tree.repo).join("link").is_symlink());
}

/// A granted command that tries to write outside the tree and to reach the
/// network (the model server itself, on 127.0.0.1).
const PROBE: &str = "echo owned > ../sibling.txt && echo outside=written || echo outside=refused\n\
     (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && echo net=open || echo net=closed\n\
     echo inside > inside.txt && echo inside=written\n\
     echo \"key=[$CARGO_PKG_NAME]\"\n";

async fn probe_run(sandbox: SandboxChoice) -> (String, Tree, Sandbox) {
    let tree = Tree::new();
    std::fs::write(tree.repo.join("probe.sh"), PROBE).unwrap();
    let server = ModelServer::scripted(Protocol::OpenAiChat, |_| Turn::text("unused")).await;
    let port = server.url().rsplit(':').next().unwrap().to_owned();
    let mut turns = vec![
        Turn::tool("run", json!({"argv": ["bash", "probe.sh", port]})),
        Turn::text("probed"),
    ]
    .into_iter();
    let server2 = ModelServer::scripted(Protocol::OpenAiChat, move |_| {
        turns
            .next()
            .unwrap_or_else(|| Turn::Status(500, "done".into()))
    })
    .await;
    // The key's variable (here one cargo sets for every test) is emptied
    // for the commands.
    assert_eq!(
        std::env::var("CARGO_PKG_NAME").as_deref(),
        Ok("orchestrator-adapters")
    );
    let http = OpenAiConfig::new(format!("{}/v1", server2.url()), "scripted-model")
        .with_api_key_env(Some("CARGO_PKG_NAME"));
    let mut config = ToolAgentConfig::default();
    config.sandbox = sandbox;
    let agent = ToolAgent::new(http, config, Arc::new(ProcessRunner::default())).unwrap();
    let chosen = agent.sandbox().await;
    let request = AgentRequest::new("S1", Role::Fix, "Probe.", &tree.repo)
        .with_time_limit(Duration::from_secs(60))
        .allow_command(["bash", "probe.sh"]);
    agent.run(request).await.unwrap();
    let last = server2.main_requests().pop().unwrap().body;
    let output = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    (output, tree, chosen)
}

/// With bubblewrap (`.ci/run` installs the `bubblewrap` package), a granted
/// command can write the working directory and nothing else, and has no
/// network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_commands_run_in_bubblewrap_without_network_or_outside_writes() {
    let (output, tree, chosen) = probe_run(SandboxChoice::Auto).await;
    assert!(
        matches!(chosen, Sandbox::Bwrap(_)),
        "bwrap is not on PATH or cannot start a sandbox here ({chosen:?}): install the `bubblewrap` package"
    );
    // The write outside either fails (read-only) or lands in the sandbox's
    // private /tmp (the test tree lives under /tmp): the real file is intact.
    assert!(output.contains("net=closed"), "{output}");
    assert!(output.contains("key=[]"), "{output}");
    assert!(output.contains("inside=written"), "{output}");
    assert_eq!(
        std::fs::read_to_string(tree.outer.join("sibling.txt")).unwrap(),
        "keep me\n"
    );
    assert_eq!(tree.read("inside.txt"), "inside\n");
}

/// Without the sandbox the same command reaches out: the allow-list is
/// the only guard, which is why bubblewrap is used where it works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_sandbox_only_the_allow_list_guards_commands() {
    let (output, tree, chosen) = probe_run(SandboxChoice::Off).await;
    assert_eq!(chosen, Sandbox::None);
    assert!(output.contains("outside=written"), "{output}");
    assert!(output.contains("net=open"), "{output}");
    assert!(
        output.contains("key=[]"),
        "the key's variable is emptied either way: {output}"
    );
    assert_eq!(
        std::fs::read_to_string(tree.outer.join("sibling.txt")).unwrap(),
        "owned\n"
    );
}

/// A hung model is cut off at the request's time limit, and the attempt's
/// transcript still ends with its outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_model_times_out_with_a_finished_transcript() {
    let tree = Tree::new();
    let server =
        ModelServer::always(Protocol::OpenAiChat, Turn::Hang(Duration::from_secs(30))).await;
    let agent = agent(&server, &tree, |_| {});
    let request = fix_request(&tree, "Wait.").with_time_limit(Duration::from_millis(300));
    let error = agent.run(request).await.unwrap_err();
    assert!(matches!(error, AgentError::Timeout { .. }), "{error:?}");
    let end = transcript_lines(&tree)
        .into_iter()
        .find(|l| l["kind"] == "end")
        .unwrap();
    assert_eq!(end["outcome"]["error"]["kind"], "timeout");
    assert_eq!(agent.stats()[0].outcome, "timeout");
}

/// The configured wall time is a budget: spent, the attempt ends with a
/// final error before asking the model again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wall_time_limit_is_a_final_budget_error() {
    let tree = Tree::new();
    let server =
        ModelServer::always(Protocol::OpenAiChat, Turn::tool("list_files", json!({}))).await;
    let agent = agent(&server, &tree, |c| c.max_wall = Some(Duration::ZERO));
    let error = agent.run(fix_request(&tree, "Hurry.")).await.unwrap_err();
    assert!(
        matches!(&error, AgentError::Budget { message } if message.contains("wall time")),
        "{error:?}"
    );
    assert!(error.is_final());
    assert!(server.main_requests().is_empty());
}

/// A server that accepts `tools` but whose model answers with a text action
/// (llama.cpp's default chat format does): the action is carried out and
/// the rest of the run uses the text protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_answering_in_text_actions_moves_the_run_to_the_text_protocol() {
    let tree = Tree::new();
    let server = ModelServer::scripted(
        Protocol::OpenAiChat,
        at_step(vec![
            Turn::text(
                "```action\n{\"tool\": \"edit\", \"args\": {\"path\": \"calc.txt\", \"old_text\": \"1\", \"new_text\": \"2\"}}\n```",
            ),
            Turn::text("Done."),
        ]),
    )
    .await;
    let agent = agent(&server, &tree, |_| {});
    let response = agent.run(fix_request(&tree, "Set 2.")).await.unwrap();
    assert_eq!(tree.read("calc.txt"), "value = 2\n");
    assert_eq!(response.files_changed, ["calc.txt"]);
    let requests = server.main_requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].body.get("tools").is_some());
    assert!(requests[1].body.get("tools").is_none());
    assert_eq!(agent.negotiated().1, ToolMode::Text);
}
