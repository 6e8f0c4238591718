//! `orchestrator mcp` driven by MCP clients nobody here wrote: the official
//! Python SDK (`mcp`, installed by `.ci/run` into `target/mcp-venv`) through
//! `tests/mcp/client.py`, and the real Claude Code CLI as an agent host whose
//! scripted model calls our `review_fix` tool.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use orchestrator_adapters::test_support::cli;
use orchestrator_adapters::test_support::model_server::{ModelServer, Protocol, Turn};
use serde_json::{Value, json};

const ORCHESTRATOR: &str = env!("CARGO_BIN_EXE_orchestrator");

/// The Python with the `mcp` SDK: `$ORCH_MCP_PYTHON`, else the venv
/// `.ci/run` makes. Missing, the test fails with the install command.
fn python() -> PathBuf {
    let python = std::env::var_os("ORCH_MCP_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-venv/bin/python"),
        PathBuf::from,
    );
    assert!(
        python.is_file(),
        "no Python with the MCP SDK at {}: from the workspace root run\n    bash scripts/install-test-deps.sh\n(or point ORCH_MCP_PYTHON at a python that has `mcp`)",
        python.display()
    );
    python
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A lite-planex tasks.csv of pending rows `(id, title, directive, deps)`.
fn tasks_csv(rows: &[(&str, &str, &str, &str)]) -> String {
    let mut csv = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave,status,findings,files_modified,tests_passed,acceptance_met,error\n".to_owned();
    for (id, title, directive, deps) in rows {
        csv.push_str(&format!(
            "{id},{title},Do {title},,,,,{directive},{deps},,,pending,,,,,\n"
        ));
    }
    csv
}

/// A git repository with a misspelt `greet.txt`, a check that wants it
/// spelt right, and an rdjson finding whose suggestion fixes it.
fn repo(base: &Path) -> PathBuf {
    let repo = base.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let repo = std::fs::canonicalize(repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "test@example.com"]);
    git(&repo, &["config", "user.name", "Test"]);
    std::fs::write(repo.join("greet.txt"), "hello wrold\n").unwrap();
    std::fs::write(
        repo.join("check.sh"),
        "#!/bin/sh\ngrep -q 'hello world' greet.txt && echo 'greeting ok'\n",
    )
    .unwrap();
    let finding = json!({
        "source": {"name": "spell"},
        "diagnostics": [{
            "message": "misspelt word",
            "location": {"path": "greet.txt", "range": {"start": {"line": 1, "column": 7}, "end": {"line": 1, "column": 12}}},
            "code": {"value": "typo"},
            "suggestions": [{"range": {"start": {"line": 1, "column": 7}, "end": {"line": 1, "column": 12}}, "text": "world"}]
        }]
    });
    std::fs::write(repo.join("findings.rdjson"), finding.to_string()).unwrap();
    std::fs::write(
        repo.join("tasks.csv"),
        tasks_csv(&[
            ("T1", "Base", "", ""),
            ("T2", "Walls", "", "T1"),
            ("T3", "Roof", "", "T2"),
            ("T4", "Paint", "", "T2"),
        ]),
    )
    .unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    repo
}

/// Runs the Python client on `plan` against `orchestrator mcp --repo repo`.
/// Two tasks, V2 after V1, each writing a file of its own.
const TWO_TASKS: [(&str, &str, &str, &str); 2] = [
    ("V1", "First", "echo one > one.txt", ""),
    ("V2", "Second", "echo two > two.txt", "V1"),
];

/// [`repo`] with the tasks file `name` (`rows` as in [`tasks_csv`])
/// committed.
fn repo_with_tasks(base: &Path, name: &str, rows: &[(&str, &str, &str, &str)]) -> PathBuf {
    let repo = repo(base);
    std::fs::write(repo.join(name), tasks_csv(rows)).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "tasks"]);
    repo
}

fn client(repo: &Path, plan: &Value) -> Value {
    client_over(repo, plan, None, false)
}

/// [`client`], connected to the server listening at `url` when given
/// (streamable HTTP), else to one it starts on stdio; `modern`: the SDK's
/// high-level `mcp.Client` in its default mode (protocol 2026-07-28),
/// else a `ClientSession` with the initialize handshake.
fn client_over(repo: &Path, plan: &Value, url: Option<&str>, modern: bool) -> Value {
    let plan_file = repo.parent().unwrap().join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    let out = Command::new(python())
        .arg(script)
        .args(modern.then_some("--modern"))
        .arg(ORCHESTRATOR)
        .arg(repo)
        .arg(&plan_file)
        .args(url)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the MCP client failed:\n{stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)))
}

fn orchestrator_json(repo: &Path, args: &[&str]) -> Value {
    let out = Command::new(ORCHESTRATOR)
        .args(args)
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_python_mcp_client_lists_the_tools_and_calls_the_inspectors() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    std::fs::write(dir.path().join("outside.csv"), "id,title\n").unwrap();
    let out = client(
        &repo,
        &json!([
            {"tool": "waves", "arguments": {"path": "tasks.csv"}, "repeat": 20},
            {"tool": "ci_autofix_classify", "arguments": {"log": "error[E0425]: cannot find value `x` in this scope"}},
            {"tool": "ci_autofix_classify", "arguments": {"path": "check.sh"}},
            {"tool": "batch", "arguments": {"path": "findings.rdjson"}},
            {"tool": "waves", "arguments": {"path": "../outside.csv"}},
            {"tool": "review_fix", "arguments": {"path": "findings.rdjson"}},
            {"tool": "ci_autofix_classify", "arguments": {}},
            {"tool": "planex_status", "arguments": {}}
        ]),
    );
    assert_eq!(out["server"], "orchestrator");
    let mut names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "batch",
            "ci_autofix_classify",
            "ci_autofix_local",
            "planex_plan",
            "planex_run",
            "planex_status",
            "review_fix",
            "waves"
        ]
    );
    for tool in out["tools"].as_array().unwrap() {
        assert_eq!(tool["input_schema"]["type"], "object", "{tool:#}");
        assert_eq!(
            tool["output_schema"]["properties"]["outcome"]["type"], "string",
            "{tool:#}"
        );
        eprintln!(
            "{}: input schema {} bytes, output schema {} bytes",
            tool["name"], tool["input_schema_bytes"], tool["output_schema_bytes"]
        );
    }
    let calls = out["calls"].as_array().unwrap();
    // waves: the same answer as `orchestrator waves --json`.
    assert_eq!(calls[0]["is_error"], false, "{:#}", calls[0]);
    assert_eq!(
        calls[0]["structured"]["result"],
        orchestrator_json(&repo, &["waves", "tasks.csv", "--json"])
    );
    assert_eq!(calls[0]["structured"]["outcome"], "success");
    eprintln!(
        "waves round trip, median of 20: {:.1} ms",
        calls[0]["median_ms"].as_f64().unwrap()
    );
    // classify: by text and by file.
    assert_eq!(
        calls[1]["structured"]["result"]["classification"],
        "mechanical"
    );
    assert_eq!(calls[1]["structured"]["result"]["sub_class"], "non-trivial");
    assert_eq!(calls[2]["is_error"], false, "{:#}", calls[2]);
    assert!(calls[2]["structured"]["result"]["classification"].is_string());
    // batch: one batch holding the finding.
    assert_eq!(
        calls[3]["structured"]["result"],
        orchestrator_json(&repo, &["batch", "findings.rdjson", "--json"])
    );
    // Refusals: a path outside the repository, a flow without approval,
    // a classify with neither input.
    assert_eq!(calls[4]["is_error"], true);
    assert!(
        calls[4]["text"]
            .as_str()
            .unwrap()
            .contains("outside the repository"),
        "{:#}",
        calls[4]
    );
    assert_eq!(calls[5]["is_error"], true);
    assert!(calls[5]["text"].as_str().unwrap().contains("yes: true"));
    assert_eq!(calls[6]["is_error"], true);
    assert!(calls[6]["text"].as_str().unwrap().contains("exactly one"));
    // No planex session yet: the status says so, naming the folder.
    assert_eq!(calls[7]["is_error"], true);
    assert!(
        calls[7]["text"]
            .as_str()
            .unwrap()
            .contains("no planex session in"),
        "{:#}",
        calls[7]
    );
    // Nothing was changed by any of it.
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
}

#[test]
fn a_python_mcp_client_runs_review_fix_and_the_commit_lands() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let out = client(
        &repo,
        &json!([{"tool": "review_fix", "arguments": {
            "path": "findings.rdjson", "agent": "builtin", "test_cmd": "sh check.sh", "yes": true
        }, "progress": true}]),
    );
    let call = &out["calls"][0];
    assert_eq!(call["is_error"], false, "{call:#}");
    let result = &call["structured"];
    assert_eq!(result["outcome"], "success", "{call:#}");
    assert_eq!(result["result"]["counts"]["fixed"], 1, "{call:#}");
    assert_eq!(
        std::fs::read_to_string(repo.join("greet.txt")).unwrap(),
        "hello world\n"
    );
    let log = git(&repo, &["log", "--format=%s"]);
    assert!(log.starts_with("fix(quality): misspelt word"), "{log}");
    assert_eq!(
        result["result"]["commits"][0]["id"].as_str().unwrap(),
        git(&repo, &["rev-parse", "HEAD"]).trim()
    );
    // The session's summary is a resource the host can read; a file the
    // server does not list is not.
    let resources = out["resources"].as_array().unwrap();
    let summary = resources
        .iter()
        .find(|r| r["name"].as_str().unwrap().ends_with("fix-summary.md"))
        .unwrap_or_else(|| panic!("{resources:#?}"));
    assert_eq!(summary["mime_type"], "text/markdown");
    assert!(
        summary["text"].as_str().unwrap().contains("misspelt word"),
        "{summary:#}"
    );
    let refused = out["outside_resource"].as_str().unwrap();
    assert!(refused.contains("not one of this repository"), "{refused}");
    // The flow's events reached the client as progress notifications while
    // it ran, in order, the commit among them.
    let progress = call["progress"].as_array().unwrap();
    let steps: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{progress:#?}");
    assert!(
        progress
            .iter()
            .any(|p| p["message"].as_str().unwrap().contains("\"commit_made\"")),
        "{progress:#?}"
    );
}

#[test]
fn a_cancelled_planex_run_stops_its_flow_and_the_session_continues() {
    let dir = tempfile::tempdir().unwrap();
    // The shell agent runs each task's directive: T1 takes long enough to
    // be cancelled in flight.
    let repo = repo_with_tasks(
        dir.path(),
        "slow.csv",
        &[
            ("S1", "Slow", "sleep 8 && touch s1.done", ""),
            ("S2", "Next", "touch s2.done", "S1"),
        ],
    );
    let out = client(
        &repo,
        &json!([{"tool": "planex_run", "arguments": {"path": "slow.csv", "yes": true}, "cancel_after": 3}]),
    );
    let call = &out["calls"][0];
    assert_eq!(call["cancelled"], true, "{call:#}");
    // The flow is gone with its process group: no sleeping directive left.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let running = String::from_utf8_lossy(&ps.stdout).into_owned();
    assert!(
        !running.contains("sleep 8 && touch s1.done"),
        "the directive survived the cancel:\n{running}"
    );
    assert!(!repo.join("s1.done").exists());
    // The host sees where the session stands: both rows still pending.
    let status = |repo: &Path| {
        let out = client(repo, &json!([{"tool": "planex_status", "arguments": {}}]));
        let call = out["calls"][0].clone();
        assert_eq!(call["is_error"], false, "{call:#}");
        call["structured"]["result"].clone()
    };
    let before = status(&repo);
    assert_eq!(before["phase"], "tasks", "{before:#}");
    let rows: Vec<(&str, &str)> = before["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(rows, [("S1", "pending"), ("S2", "pending")], "{before:#}");
    // The session it left is continued by the CLI, and finishes.
    let cont = Command::new(ORCHESTRATOR)
        .args(["planex", "--continue", "-y", "--json"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert_eq!(
        cont.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&cont.stdout),
        String::from_utf8_lossy(&cont.stderr)
    );
    assert!(repo.join("s1.done").exists() && repo.join("s2.done").exists());
    // The same session, named, now shows both rows completed.
    let id = before["session"]["id"].as_str().unwrap();
    let out = client(
        &repo,
        &json!([{"tool": "planex_status", "arguments": {"session": id}}]),
    );
    let after = &out["calls"][0]["structured"]["result"];
    assert_eq!(after["counts"], json!({"completed": 2}), "{after:#}");
    assert_eq!(after["session"]["id"], id);
}

/// `planex_plan` explores and plans through a real HTTP agent (the
/// builtin tool agent against a scripted chat-completions server) and
/// stops before executing: the session's tasks come back, pending, and no
/// task was asked for or run.
#[test]
fn a_python_mcp_client_plans_a_requirement_without_executing_it() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(ModelServer::scripted(Protocol::OpenAiChat, |exchange| {
        let prompt = exchange.user_text();
        let answer = |value: Value| Turn::text(value.to_string());
        if prompt.contains("PURPOSE: Analyze requirement complexity") {
            return answer(json!({"type": "feature", "complexity": "Low", "angles": [
                {"id": "E1", "angle": "architecture", "description": "Where greetings live",
                 "focus": "files at the root"}]}));
        }
        if prompt.contains("## EXPLORATION ASSIGNMENT") {
            return answer(json!({"id": "E1", "status": "completed",
                "findings": "Greetings are in greet.txt", "key_files": ["greet.txt"], "error": ""}));
        }
        if prompt.contains("PURPOSE: Based on exploration findings, decompose requirement") {
            return answer(json!({"tasks": [
                {"id": "T1", "title": "Spell it", "description": "Fix the typo in greet.txt",
                 "test": "sh check.sh", "acceptance_criteria": "greet.txt says hello world",
                 "scope": "greet.txt", "hints": "", "execution_directives": "sh check.sh",
                 "deps": [], "context_from": ["E1"]},
                {"id": "T2", "title": "Bye", "description": "Create bye.txt",
                 "test": "bye.txt exists", "acceptance_criteria": "bye.txt says bye",
                 "scope": "bye.txt", "hints": "", "execution_directives": "",
                 "deps": ["T1"], "context_from": ["T1"]},
                {"id": "T3", "title": "Hi", "description": "Create hi.txt",
                 "test": "hi.txt exists", "acceptance_criteria": "hi.txt says hi",
                 "scope": "hi.txt", "hints": "", "execution_directives": "",
                 "deps": ["T1"], "context_from": []}]}));
        }
        Turn::Status(500, format!("unscripted prompt: {prompt}"))
    }));
    std::fs::write(
        repo.join("orchestrator.toml"),
        format!(
            "version = 1\n\n[agent]\nkind = \"openai\"\n\n[agent.openai]\nbase_url = \"{}/v1\"\nmodel = \"scripted-model\"\n",
            server.url()
        ),
    )
    .unwrap();
    git(&repo, &["add", "orchestrator.toml"]);
    git(&repo, &["commit", "-q", "-m", "agent settings"]);
    let out = client(
        &repo,
        &json!([
            {"tool": "planex_plan", "arguments": {"requirement": "Fix the greeting and say bye"}},
            {"tool": "planex_plan", "arguments": {"requirement": " "}}
        ]),
    );
    let call = &out["calls"][0];
    assert_eq!(call["is_error"], false, "{call:#}");
    let outcome = &call["structured"];
    assert_eq!(outcome["outcome"], "planned", "{outcome:#}");
    assert_eq!(outcome["exit_code"], 3);
    let plan = &outcome["result"]["plan"];
    assert_eq!(plan["phase"], "tasks", "{plan:#}");
    let rows: Vec<(&str, &str, u64)> = plan["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap(),
                r["status"].as_str().unwrap(),
                r["wave"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("T1", "pending", 1),
            ("T2", "pending", 2),
            ("T3", "pending", 2)
        ],
        "{plan:#}"
    );
    let session = Path::new(plan["session"]["dir"].as_str().unwrap());
    assert!(session.join("tasks.csv").is_file());
    // Nothing was executed: no task prompt reached the model, no file changed.
    assert!(
        server
            .main_requests()
            .iter()
            .all(|r| !r.body.to_string().contains("## TASK ASSIGNMENT")),
        "a task was asked for"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert!(!repo.join("bye.txt").exists());
    // An empty requirement is refused.
    assert_eq!(out["calls"][1]["is_error"], true);
    assert!(
        out["calls"][1]["text"]
            .as_str()
            .unwrap()
            .contains("requirement")
    );
}

#[test]
fn the_real_claude_code_calls_our_review_fix_tool() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(ModelServer::start(
        Protocol::Anthropic,
        vec![
            // Claude Code defers MCP tools: a model loads their schemas with
            // ToolSearch before calling them.
            Turn::tool(
                "ToolSearch",
                json!({"query": "select:mcp__orchestrator__review_fix"}),
            ),
            Turn::tool(
                "mcp__orchestrator__review_fix",
                json!({"path": "findings.rdjson", "agent": "builtin", "test_cmd": "sh check.sh", "yes": true}),
            ),
            Turn::text("review_fix fixed the finding."),
        ],
    ));
    let mcp_config = json!({"mcpServers": {"orchestrator": {
        "command": ORCHESTRATOR, "args": ["mcp", "--repo", repo]
    }}});
    let out = Command::new(cli("claude"))
        .args([
            "-p",
            "--output-format",
            "json",
            "--mcp-config",
            &mcp_config.to_string(),
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__orchestrator__review_fix",
            "--",
            "Fix the findings in findings.rdjson.",
        ])
        .current_dir(&repo)
        .env("HOME", &home)
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env_remove("CLAUDECODE")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let main = server.main_requests();
    let report = format!(
        "claude: {:?}\nstdout: {}\nstderr: {}\nrequests: {main:#?}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    // Our tool was offered to the model (loaded through ToolSearch), called,
    // and its result went back.
    assert_eq!(main.len(), 3, "{report}");
    assert!(
        main[0]
            .body
            .to_string()
            .contains("mcp__orchestrator__review_fix"),
        "{report}"
    );
    let result = main[2].body["messages"].to_string();
    assert!(
        result.contains("tool_result") && result.contains("all_fixed"),
        "{report}"
    );
    // The commit is there.
    assert_eq!(
        std::fs::read_to_string(repo.join("greet.txt")).unwrap(),
        "hello world\n"
    );
    assert!(
        git(&repo, &["log", "--format=%s"]).starts_with("fix(quality): misspelt word"),
        "{report}"
    );
}

/// `planex_run` verifies by default: each task's change is measured and
/// landed by the engine as its own commit; `no_commit: true` leaves the
/// changes in the tree.
#[test]
fn planex_run_lands_each_task_as_a_commit_unless_no_commit() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_tasks(dir.path(), "two.csv", &TWO_TASKS);
    let out = client(
        &repo,
        &json!([{"tool": "planex_run", "arguments": {"path": "two.csv", "yes": true}}]),
    );
    let call = &out["calls"][0];
    assert_eq!(call["is_error"], false, "{call:#}");
    assert_eq!(call["structured"]["outcome"], "success", "{call:#}");
    assert_eq!(
        git(&repo, &["log", "--format=%s", "-2"]),
        "feat(planex): Second [V2]\nfeat(planex): First [V1]\n"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");

    std::fs::write(
        repo.join("three.csv"),
        tasks_csv(&[("N1", "Third", "echo three > three.txt", "")]),
    )
    .unwrap();
    let out = client(
        &repo,
        &json!([{"tool": "planex_run", "arguments": {"path": "three.csv", "yes": true, "no_commit": true}}]),
    );
    let call = &out["calls"][0];
    assert_eq!(call["structured"]["outcome"], "success", "{call:#}");
    assert_eq!(
        git(&repo, &["log", "--format=%s", "-1"]),
        "feat(planex): Second [V2]\n",
        "nothing committed with no_commit"
    );
    assert_eq!(
        git(&repo, &["status", "--porcelain", "--", "three.txt"]),
        "?? three.txt\n"
    );
}

/// Where the client declared form elicitation, a call without `yes` asks
/// its user through an elicitation request (what runs, and one required
/// boolean `approve`): declined, cancelled or `approve: false` runs nothing
/// and says so; accepted, the flow runs. A client that cannot ask is
/// refused naming `yes: true` (`a_python_mcp_client_lists_the_tools…`).
#[test]
fn gates_ask_the_clients_user_by_elicitation() {
    for (modern, protocol) in [(false, "2025-11-25"), (true, "2026-07-28")] {
        gates_ask_by_elicitation_on(modern, protocol);
    }
}

/// One client's run of [`gates_ask_the_clients_user_by_elicitation`]:
/// `protocol` is what it negotiates (2026-07-28: the question comes as an
/// `InputRequiredResult`, the answer in the retried call).
fn gates_ask_by_elicitation_on(modern: bool, protocol: &str) {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_tasks(dir.path(), "two.csv", &TWO_TASKS);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let run = |answer: &str| json!({"tool": "planex_run", "arguments": {"path": "two.csv"}, "elicit": answer});
    let out = client_over(
        &repo,
        &json!([
            run("decline"),
            run("cancel"),
            run("accept_false"),
            run("accept")
        ]),
        None,
        modern,
    );
    assert_eq!(out["protocol_version"], protocol, "{out:#}");
    let calls = out["calls"].as_array().unwrap();
    for (call, why) in
        calls[..3]
            .iter()
            .zip(["the user declined", "the user cancelled", "approve: false"])
    {
        assert_eq!(call["is_error"], true, "{call:#}");
        let text = call["text"].as_str().unwrap();
        assert!(
            text.contains(why) && text.contains("nothing ran"),
            "{call:#}"
        );
    }
    for call in calls {
        let asked = call["elicited"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{call:#}");
        assert_eq!(asked[0]["mode"], "form");
        let message = asked[0]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Run the tasks of two.csv in ")
                && message.contains("lands as its own commit"),
            "{message}"
        );
        let schema = &asked[0]["schema"];
        assert_eq!(schema["required"], json!(["approve"]), "{schema:#}");
        assert_eq!(
            schema["properties"]["approve"]["type"], "boolean",
            "{schema:#}"
        );
    }
    let accepted = &calls[3];
    assert_eq!(accepted["is_error"], false, "{accepted:#}");
    assert_eq!(accepted["structured"]["outcome"], "success", "{accepted:#}");
    assert_eq!(
        git(
            &repo,
            &["log", "--format=%s", &format!("{}..HEAD", head.trim())]
        ),
        "feat(planex): Second [V2]\nfeat(planex): First [V1]\n"
    );
    // Only the accepted call made a session: the refused ones ran nothing.
    let sessions = std::fs::read_dir(repo.join(".workflow/.lite-plan"))
        .unwrap()
        .count();
    assert_eq!(sessions, 1);
}

/// `orchestrator mcp --listen 127.0.0.1:0` serves the same tools over
/// streamable HTTP (the URL on stderr): the Python SDK's HTTP client lists
/// them, calls `waves` 20 times (the round trip is reported) and runs a
/// planex session whose tasks land as commits, with progress. A
/// non-loopback address is refused.
#[test]
fn the_tools_are_served_over_streamable_http_on_loopback() {
    use std::io::BufRead as _;
    let refused = Command::new(ORCHESTRATOR)
        .args(["mcp", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("only a loopback address"),
        "{refused:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_tasks(
        dir.path(),
        "two.csv",
        &[
            ("H1", "First", "echo one > one.txt", ""),
            ("H2", "Second", "echo two > two.txt", "H1"),
        ],
    );
    let mut server = Command::new(ORCHESTRATOR)
        .args(["mcp", "--listen", "127.0.0.1:0", "--repo"])
        .arg(&repo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("orchestrator mcp: listening on ")
        .unwrap_or_else(|| panic!("no URL announced: {line:?}"))
        .to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let out = client_over(
        &repo,
        &json!([
            {"tool": "waves", "arguments": {"path": "two.csv"}, "repeat": 20},
            {"tool": "planex_run", "arguments": {"path": "two.csv", "yes": true}, "progress": true},
        ]),
        Some(&url),
        false,
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(out["tools"].as_array().unwrap().len(), 8, "{out:#}");
    let waves = &out["calls"][0];
    assert_eq!(waves["is_error"], false, "{waves:#}");
    assert_eq!(
        waves["structured"]["result"]["waves"],
        json!({"H1": 1, "H2": 2}),
        "{waves:#}"
    );
    eprintln!(
        "waves over streamable HTTP, round trip median of 20: {:.1} ms",
        waves["median_ms"].as_f64().unwrap()
    );
    let run = &out["calls"][1];
    assert_eq!(run["structured"]["outcome"], "success", "{run:#}");
    assert!(!run["progress"].as_array().unwrap().is_empty(), "{run:#}");
    assert_eq!(
        git(&repo, &["log", "--format=%s", "-2"]),
        "feat(planex): Second [H2]\nfeat(planex): First [H1]\n"
    );
}
