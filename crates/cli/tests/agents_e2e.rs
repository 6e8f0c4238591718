//! The three flows end to end through the `orchestrator` binary with
//! `--agent openai`: the builtin tool agent against a scripted
//! OpenAI-compatible chat-completions server on 127.0.0.1. Only the model's
//! answers are scripted; the edits are made by the tool agent's own tools,
//! the tests are run by the engine (and by the agent, through the granted
//! commands), and the commits are real.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod flow_support;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use flow_support::transcript_files;
use orchestrator_adapters::test_support::model_server::{Exchange, ModelServer, Protocol, Turn};
use serde_json::{Value, json};

/// A git repository, and a cache folder beside it (which must stay free of
/// transcripts: they go to the flow's session folder).
struct Sandbox {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    cache: PathBuf,
}

impl Sandbox {
    fn new(files: &[(&str, &str)]) -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (repo, cache) = (root.join("repo"), root.join("cache"));
        std::fs::create_dir_all(&repo).unwrap();
        for (file, content) in files {
            let path = repo.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let sandbox = Sandbox {
            _dir: dir,
            repo,
            cache,
        };
        sandbox.git(&["init", "-q", "-b", "main"]);
        sandbox.git(&["config", "user.email", "test@example.com"]);
        sandbox.git(&["config", "user.name", "Test"]);
        sandbox.git(&["add", "-A"]);
        sandbox.git(&["commit", "-qm", "initial"]);
        sandbox
    }

    fn git(&self, args: &[&str]) -> String {
        let o = Command::new("git")
            .args(args)
            .current_dir(&self.repo)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", text(&o.stderr));
        text(&o.stdout)
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.repo.join(file)).unwrap()
    }

    /// Runs `orchestrator` in the repository, pointed at `server`.
    fn orchestrator(&self, server: &ModelServer, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_orchestrator"))
            .args(args)
            .current_dir(&self.repo)
            .env_remove("RUST_LOG")
            .env_remove("ORCHESTRATOR_AGENT")
            .env_remove("OPENAI_API_KEY")
            .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
            .env("OPENAI_MODEL", "scripted-model")
            .env("ORCHESTRATOR_CACHE_DIR", &self.cache)
            .env("COLUMNS", "100")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Every transcript line the tool agent wrote. Transcripts go to the
    /// flow's session folder in the repository, never to the cache.
    fn transcripts(&self) -> Vec<Value> {
        assert!(
            transcript_files(&self.cache).is_empty(),
            "a transcript outside the session folder"
        );
        let mut lines = Vec::new();
        for path in transcript_files(&self.repo) {
            let text = std::fs::read_to_string(path).unwrap();
            lines.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap()),
            );
        }
        lines
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// The turn at the conversation's step (its number of tool results), then
/// a final text answer.
fn step(turns: &[Turn], exchange: &Exchange, last: &str) -> Turn {
    turns
        .get(exchange.tool_results().len())
        .cloned()
        .unwrap_or_else(|| Turn::text(last))
}

/// Whether the request offers tools (a role that changes files).
fn with_tools(exchange: &Exchange) -> bool {
    exchange.body.get("tools").is_some()
}

fn edit(path: &str, old: &str, new: &str) -> Turn {
    Turn::tool(
        "edit",
        json!({"path": path, "old_text": old, "new_text": new}),
    )
}

fn run(argv: &[&str]) -> Turn {
    Turn::tool("run", json!({ "argv": argv }))
}

/// The batch number a planning prompt names (`… of batch 1 (fix session …`).
fn batch_of(prompt: &str) -> u64 {
    let rest = &prompt[prompt.find("of batch ").unwrap() + "of batch ".len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The test suite of the review-fix repository: `calc.txt` must keep its
/// `value = ` line.
const CHECK: &str = "#!/bin/sh\nif ! grep -q '^value = ' calc.txt; then\n  echo 'FAIL calc_value: calc.txt lost its value line'\n  exit 1\nfi\necho 'all checks ok'\n";

const FINDINGS: &str = r#"{
  "session_id": "WFS-tool-agent",
  "findings": [
    {"id": "F1", "title": "Typo in the greeting", "severity": "low", "dimension": "quality",
     "file": "greet.txt", "line": 1, "description": "`wrold` should read `world`."},
    {"id": "F2", "title": "Wrong value", "severity": "medium", "dimension": "correctness",
     "file": "calc.txt", "line": 1, "description": "The value must be 2."}
  ]
}
"#;

/// review-fix with the tool agent: F1 is fixed with `edit` and checked with
/// the granted test command; F2's first edit breaks the tests and is rolled
/// back, its retry prompt carries the failing output, and the second edit
/// lands. The planner (an answer-only role) gets no tools.
#[test]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
fn review_fix_fixes_a_finding_and_rolls_back_a_breaking_one() {
    let sandbox = Sandbox::new(&[
        ("greet.txt", "hello wrold\n"),
        ("calc.txt", "value = 1\n"),
        ("check.sh", CHECK),
        ("findings.json", FINDINGS),
    ]);
    let conversations = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&conversations);
    let server = tokio_runtime().block_on(ModelServer::scripted(
        Protocol::OpenAiChat,
        move |exchange| {
            let prompt = exchange.user_text();
            if exchange.tool_results().is_empty() {
                seen.lock().unwrap().push(prompt.clone());
            }
            if prompt.contains("partial execution plan") && !with_tools(exchange) {
                let listed: Vec<&str> = ["F1", "F2"]
                    .into_iter()
                    .filter(|id| prompt.contains(&format!("\"{id}\"")))
                    .collect();
                return Turn::text(
                    json!({
                        "batch_id": batch_of(&prompt),
                        "groups": [{"group_id": "G1", "group_name": "text files", "findings": listed,
                            "fix_strategy": {"approach": "edit the text files in place"},
                            "risk_assessment": {"level": "low"}}],
                        "timeline": [{"stage": 1, "groups": ["G1"], "execution_mode": "serial"}]
                    })
                    .to_string(),
                );
            }
            if prompt.contains("Fix review finding F1") && with_tools(exchange) {
                let turns = [
                    Turn::tool("read_file", json!({"path": "greet.txt"})),
                    edit("greet.txt", "wrold", "world"),
                    run(&["sh", "check.sh"]),
                ];
                return step(&turns, exchange, "Fixed the typo.");
            }
            if prompt.contains("Fix review finding F2") && with_tools(exchange) {
                let turns = if prompt.contains("FAIL calc_value") {
                    [edit("calc.txt", "value = 1", "value = 2")]
                } else {
                    [edit("calc.txt", "value = 1", "VALUE = 1")]
                };
                return step(&turns, exchange, "Set the value.");
            }
            Turn::Status(500, format!("unscripted prompt: {prompt}"))
        },
    ));
    let started = Instant::now();
    let o = sandbox.orchestrator(
        &server,
        &[
            "review-fix",
            "--fix",
            "findings.json",
            "--agent",
            "openai",
            "--test-cmd",
            "sh check.sh",
            "--verify",
            "each",
            "--isolation",
            "serial",
            "--flaky-reruns",
            "0",
            "-y",
            "--json",
        ],
    );
    let wall = started.elapsed();
    let report = format!(
        "stdout:\n{}\nstderr:\n{}\nconversations: {:#?}",
        text(&o.stdout),
        text(&o.stderr),
        conversations.lock().unwrap()
    );
    assert_eq!(o.status.code(), Some(0), "{report}");
    assert_eq!(sandbox.read("greet.txt"), "hello world\n", "{report}");
    assert_eq!(sandbox.read("calc.txt"), "value = 2\n", "{report}");
    let log = sandbox.git(&["log", "--format=%s", "main~2..main"]);
    assert!(
        log.contains("[F1]") && log.contains("[F2]"),
        "{log}\n{report}"
    );
    assert_eq!(sandbox.git(&["rev-list", "--count", "main"]).trim(), "3");

    // The retry of F2 carried the failing test's output.
    let conversations = conversations.lock().unwrap().clone();
    let f2: Vec<&String> = conversations
        .iter()
        .filter(|p| p.contains("Fix review finding F2"))
        .collect();
    assert_eq!(f2.len(), 2, "{conversations:#?}");
    assert!(!f2[0].contains("FAIL calc_value"), "{}", f2[0]);
    assert!(f2[1].contains("FAIL calc_value"), "{}", f2[1]);

    // The granted test command ran through the agent's `run` tool.
    let requests = server.main_requests();
    assert!(
        requests
            .iter()
            .any(|r| r.body.to_string().contains("exit code 0\\nall checks ok")),
        "no tool result shows the test command's output\n{report}"
    );

    // One transcript per attempt (three fix attempts; the planner's calls
    // too), each ending with its outcome and numbers.
    let ends: Vec<Value> = sandbox
        .transcripts()
        .into_iter()
        .filter(|l| l["kind"] == "end")
        .collect();
    let fixes: Vec<&Value> = ends
        .iter()
        .filter(|e| {
            e["stats"]["tool_calls"]
                .as_object()
                .is_some_and(|m| !m.is_empty())
        })
        .collect();
    assert_eq!(fixes.len(), 3, "{ends:#?}");
    let (mut turns, mut tokens, mut calls) = (0, 0, std::collections::BTreeMap::new());
    let mut per_fix = Vec::new();
    for end in &fixes {
        per_fix.push(format!(
            "{} {} turns {} ms",
            end["stats"]["request_id"].as_str().unwrap(),
            end["stats"]["turns"],
            end["stats"]["wall_ms"]
        ));
        assert_eq!(end["stats"]["outcome"], "ok", "{end:#}");
        turns += end["stats"]["turns"].as_u64().unwrap();
        tokens += end["stats"]["input_tokens"].as_u64().unwrap()
            + end["stats"]["output_tokens"].as_u64().unwrap();
        for (tool, n) in end["stats"]["tool_calls"].as_object().unwrap() {
            *calls.entry(tool.clone()).or_insert(0) += n.as_u64().unwrap();
        }
    }
    eprintln!(
        "review-fix with the tool agent: {} fix attempts ({}), {turns} agent turns, {tokens} tokens, tool calls {calls:?}, {:.2} s wall for the whole run",
        fixes.len(),
        per_fix.join(", "),
        wall.as_secs_f64(),
    );
    assert_eq!(turns, 8, "F1: 4 turns, F2: 2 + 2");
    assert_eq!(
        calls,
        std::collections::BTreeMap::from([
            ("edit".to_owned(), 3),
            ("read_file".to_owned(), 1),
            ("run".to_owned(), 1)
        ])
    );
}

/// The task id a planex task prompt names (`**Task ID**: T1`).
fn task_of(prompt: &str) -> String {
    let rest = &prompt[prompt.find("**Task ID**: ").unwrap() + "**Task ID**: ".len()..];
    rest.split_whitespace().next().unwrap().to_owned()
}

/// The planex runs' requirement, approved as it goes, with the tool agent.
const PLANEX_RUN: [&str; 5] = [
    "planex",
    "Say howdy in hello.txt",
    "-y",
    "--agent",
    "openai",
];

/// The repository of the planex runs: its check wants `howdy` in
/// `hello.txt`.
fn planex_sandbox() -> Sandbox {
    Sandbox::new(&[(
        "check.sh",
        "#!/bin/sh\ngrep -q howdy hello.txt && echo 'all checks ok'\n",
    )])
}

/// The scripted model of the planex runs: one angle, its exploration,
/// three tasks in a chain (T1 creates `hello.txt`, T2 edits it and runs its
/// directive `sh check.sh`, T3 creates `bye.txt`).
fn planex_server() -> ModelServer {
    tokio_runtime().block_on(ModelServer::scripted(
        Protocol::OpenAiChat,
        move |exchange| {
            let prompt = exchange.user_text();
            let answer = |value: Value| Turn::text(value.to_string());
            if prompt.contains("PURPOSE: Analyze requirement complexity") {
                return answer(json!({"type": "feature", "complexity": "Low", "angles": [
                    {"id": "E1", "angle": "architecture", "description": "Where greetings live",
                     "focus": "files at the root"}]}));
            }
            if prompt.contains("## EXPLORATION ASSIGNMENT") {
                return answer(json!({"id": "E1", "status": "completed",
                    "findings": "Greetings go to hello.txt at the root",
                    "key_files": ["hello.txt"], "error": ""}));
            }
            if prompt.contains("PURPOSE: Based on exploration findings, decompose requirement") {
                return answer(json!({"tasks": [
                    {"id": "T1", "title": "Hello", "description": "Create hello.txt saying hello",
                     "test": "hello.txt exists", "acceptance_criteria": "hello.txt says hello",
                     "scope": "hello.txt", "hints": "", "execution_directives": "",
                     "deps": [], "context_from": ["E1"]},
                    {"id": "T2", "title": "Howdy", "description": "Say howdy instead",
                     "test": "sh check.sh", "acceptance_criteria": "hello.txt says howdy",
                     "scope": "hello.txt", "hints": "", "execution_directives": "sh check.sh",
                     "deps": ["T1"], "context_from": ["T1"]},
                    {"id": "T3", "title": "Bye", "description": "Create bye.txt saying bye",
                     "test": "bye.txt exists", "acceptance_criteria": "bye.txt says bye",
                     "scope": "bye.txt", "hints": "", "execution_directives": "",
                     "deps": ["T2"], "context_from": ["T2"]}]}));
            }
            if prompt.contains("## TASK ASSIGNMENT") && with_tools(exchange) {
                let id = task_of(&prompt);
                let turns = if id == "T1" {
                    vec![Turn::tool(
                        "write_file",
                        json!({"path": "hello.txt", "content": "hello\n"}),
                    )]
                } else if id == "T3" {
                    vec![Turn::tool(
                        "write_file",
                        json!({"path": "bye.txt", "content": "bye\n"}),
                    )]
                } else {
                    vec![edit("hello.txt", "hello", "howdy"), run(&["sh", "check.sh"])]
                };
                let acceptance = match id.as_str() {
                    "T1" => "hello.txt says hello",
                    "T2" => "hello.txt says howdy",
                    _ => "bye.txt says bye",
                };
                let report = json!({"id": id, "status": "completed", "findings": format!("{id} done"),
                    "files_modified": ["hello.txt"], "tests_passed": true,
                    "acceptance_met": "yes", "error": "",
                    "criteria": [{"criterion": acceptance, "status": "PASS", "explanation": "edited"}]});
                return step(&turns, exchange, &report.to_string());
            }
            Turn::Status(500, format!("unscripted prompt: {prompt}"))
        },
    ))
}

/// planex with the tool agent: the angles, the exploration and the task
/// plan are plain completions; T1 creates `hello.txt` with `write_file`, T2
/// edits it and runs its granted directive `sh check.sh`, T3 creates
/// `bye.txt`.
#[test]
fn planex_executes_tasks_that_write_files_in_scope() {
    let sandbox = planex_sandbox();
    let server = planex_server();
    let o = sandbox.orchestrator(&server, &PLANEX_RUN);
    let report = format!("stdout:\n{}\nstderr:\n{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{report}");
    assert_eq!(sandbox.read("hello.txt"), "howdy\n", "{report}");
    let out = text(&o.stdout);
    assert!(
        out.contains("- **Tasks**: 3/3 completed, 0 failed, 0 skipped"),
        "{out}"
    );
    let sessions = orchestrator_planex::session::list_sessions(&sandbox.repo).unwrap();
    let results =
        orchestrator_planex::rows::read_tasks_csv(sessions[0].dir.join("results.csv")).unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["T1", "T2", "T3"]);
    assert_eq!(sandbox.read("bye.txt"), "bye\n");
    assert!(
        server
            .main_requests()
            .iter()
            .any(|r| r.body.to_string().contains("all checks ok")),
        "no tool result shows the directive's output\n{report}"
    );
    // Only the execute role was offered tools.
    let with: Vec<bool> = server
        .main_requests()
        .iter()
        .filter(|r| {
            r.body["messages"][0]["content"]
                .to_string()
                .contains("role in this task: plan")
                || r.body["messages"][0]["content"]
                    .to_string()
                    .contains("role in this task: explore")
        })
        .map(|r| r.body.get("tools").is_some())
        .collect();
    assert!(!with.is_empty() && with.iter().all(|t| !t), "{with:?}");
    // Every call's transcript is in the planex session folder.
    let files = transcript_files(&sandbox.repo.join(".workflow"));
    assert!(!files.is_empty(), "no transcript under .workflow\n{report}");
    assert_eq!(files.len(), transcript_files(&sandbox.repo).len());
    assert!(sandbox.transcripts().iter().any(|l| l["kind"] == "end"));
}

/// planex stops resumably at a run limit: with `--max-agent-calls 4` the
/// angles, the exploration, the plan and T1 take the four calls, T2's call
/// is refused, the run stops with exit 3 naming the limit and how to go
/// on, and `--continue` with a higher limit runs T2 and T3 to the end.
#[test]
fn planex_stops_at_a_run_limit_and_continues() {
    let sandbox = planex_sandbox();
    let server = planex_server();
    let o = sandbox.orchestrator(
        &server,
        &[&PLANEX_RUN[..], &["--max-agent-calls", "4"]].concat(),
    );
    let report = format!("stdout:\n{}\nstderr:\n{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(3), "{report}");
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(all.contains("the run's limit is reached ("), "{report}");
    assert!(all.contains("Stopped at the run's limit ("), "{report}");
    assert!(all.contains("orchestrator planex --continue"), "{report}");
    assert_eq!(sandbox.read("hello.txt"), "hello\n", "{report}");
    let sessions = orchestrator_planex::session::list_sessions(&sandbox.repo).unwrap();
    let rows =
        orchestrator_planex::rows::read_tasks_csv(sessions[0].dir.join("tasks.csv")).unwrap();
    let statuses: Vec<String> = rows
        .iter()
        .map(|r| format!("{}={:?}", r.id, r.status))
        .collect();
    assert_eq!(
        statuses,
        ["T1=Completed", "T2=Pending", "T3=Pending"],
        "{report}"
    );

    let o = sandbox.orchestrator(
        &server,
        &[
            "planex",
            "--continue",
            "-y",
            "--agent",
            "openai",
            "--max-agent-calls",
            "10",
        ],
    );
    let report = format!("stdout:\n{}\nstderr:\n{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{report}");
    assert_eq!(sandbox.read("hello.txt"), "howdy\n", "{report}");
    assert_eq!(sandbox.read("bye.txt"), "bye\n", "{report}");
}

/// A local check that fails like clippy's `needless_return` while
/// `src/lib.rs` has its `return`.
const LINT: &str = "#!/bin/sh\nif grep -q 'return 1;' src/lib.rs; then\n  echo 'error: unneeded `return` statement'\n  echo ' --> src/lib.rs:2:5'\n  echo '  = help: for further information visit https://rust-lang.github.io/rust-clippy/master/index.html#needless_return'\n  echo '  = note: `-D clippy::needless-return` implied by `-D warnings`'\n  echo 'error: could not compile `demo` (lib) due to 1 previous error'\n  exit 1\nfi\necho 'lint clean'\n";

/// ci-autofix `--local` with the tool agent: the failing check's log goes
/// to the agent, `edit` fixes the tree, the granted check runs green inside
/// the agent and again in the engine, and the fix is one new commit.
#[test]
fn ci_autofix_patches_a_failing_check() {
    let sandbox = Sandbox::new(&[
        ("lint.sh", LINT),
        ("src/lib.rs", "pub fn one() -> i32 {\n    return 1;\n}\n"),
    ]);
    let before = sandbox.git(&["rev-parse", "HEAD"]);
    let server = tokio_runtime().block_on(ModelServer::scripted(
        Protocol::OpenAiChat,
        move |exchange| {
            let prompt = exchange.user_text();
            if prompt.contains("## CI Auto-Fix Context")
                && prompt.contains("needless_return")
                && with_tools(exchange)
            {
                let turns = [
                    Turn::tool("search", json!({"pattern": "return 1;"})),
                    edit("src/lib.rs", "return 1;", "1"),
                    run(&["sh", "lint.sh"]),
                ];
                return step(&turns, exchange, "Removed the needless return.");
            }
            Turn::Status(500, format!("unscripted prompt: {prompt}"))
        },
    ));
    let o = sandbox.orchestrator(
        &server,
        &[
            "ci-autofix",
            "--local",
            "--check",
            "sh lint.sh",
            "--agent",
            "openai",
            "-y",
        ],
    );
    let report = format!("stdout:\n{}\nstderr:\n{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{report}");
    assert_eq!(
        sandbox.read("src/lib.rs"),
        "pub fn one() -> i32 {\n    1\n}\n",
        "{report}"
    );
    let after = sandbox.git(&["rev-list", "--count", &format!("{}..HEAD", before.trim())]);
    assert_eq!(after.trim(), "1", "one fix commit\n{report}");
    assert_eq!(sandbox.git(&["status", "--porcelain"]), "", "{report}");
    let requests = server.main_requests();
    let bodies: Vec<String> = requests.iter().map(|r| r.body.to_string()).collect();
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("src/lib.rs:2:     return 1;")),
        "the search result came back\n{report}"
    );
    assert!(
        bodies.iter().any(|b| b.contains("lint clean")),
        "no tool result shows the granted check's output\n{report}"
    );
    // The patch attempt's transcript is beside the audit log.
    let files = transcript_files(&sandbox.repo.join(".moai/reports"));
    assert!(
        !files.is_empty(),
        "no transcript under .moai/reports\n{report}"
    );
    assert!(sandbox.transcripts().iter().any(|l| l["kind"] == "end"));
    // The audit log gives what the iteration's one call spent: every model
    // answer of its tool loop was 200 + 40 tokens.
    let audit = std::fs::read_dir(sandbox.repo.join(".moai/reports/ci-autofix"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .expect("an audit log");
    let line = audit
        .lines()
        .find(|l| l.starts_with("- **agent_spend**: 1 call, "))
        .unwrap_or_else(|| panic!("no spend line:\n{audit}"));
    let tokens: u64 = line["- **agent_spend**: 1 call, ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let answers = requests
        .iter()
        .filter(|r| r.body.to_string().contains("role in this task: fix"))
        .count() as u64;
    assert!(answers > 0, "{report}");
    assert_eq!(tokens, 240 * answers, "{audit}");
}

/// A model that writes nothing and claims success does not get a fix
/// committed: the tool agent reports the files it really changed (none),
/// and review-fix fails the finding.
#[test]
fn a_fix_that_changes_nothing_is_not_committed() {
    let sandbox = Sandbox::new(&[
        ("greet.txt", "hello wrold\n"),
        ("calc.txt", "value = 1\n"),
        ("check.sh", CHECK),
        ("findings.json", FINDINGS),
    ]);
    let server = tokio_runtime().block_on(ModelServer::always(
        Protocol::OpenAiChat,
        Turn::text("All fixed, trust me."),
    ));
    let head = sandbox.git(&["rev-parse", "HEAD"]);
    let o = sandbox.orchestrator(
        &server,
        &[
            "review-fix",
            "--fix",
            "findings.json",
            "--agent",
            "openai",
            "--test-cmd",
            "sh check.sh",
            "--isolation",
            "serial",
            "--max-iterations",
            "1",
            "-y",
        ],
    );
    let report = format!("stdout:\n{}\nstderr:\n{}", text(&o.stdout), text(&o.stderr));
    assert_ne!(o.status.code(), Some(0), "{report}");
    let out = text(&o.stdout);
    assert!(
        out.contains("findings: 2 (0 fixed, 2 failed, 0 rejected)"),
        "{report}"
    );
    assert_eq!(
        out.matches("the agent changed no file").count(),
        2,
        "{report}"
    );
    assert_eq!(sandbox.git(&["rev-parse", "HEAD"]), head, "{report}");
    assert_eq!(sandbox.read("greet.txt"), "hello wrold\n");
    // Each failed attempt left its transcript in the session folder.
    let files = transcript_files(&sandbox.repo.join(".review"));
    assert!(!files.is_empty(), "no transcript under .review\n{report}");
}

/// `[prices]` turns the server's token counts into dollars and
/// `--max-cost-usd` stops the run's agent calls there: once the calls have
/// spent the limit, no further call starts, the run stops with exit 3 and
/// nothing committed, the findings not done stay pending, and `--resume`
/// with a higher limit takes them up again.
#[test]
fn the_cost_limit_stops_agent_calls_at_the_priced_spend() {
    let sandbox = Sandbox::new(&[
        ("greet.txt", "hello wrold\n"),
        ("calc.txt", "value = 1\n"),
        ("check.sh", CHECK),
        ("findings.json", FINDINGS),
        // 200 prompt and 40 completion tokens per answer: $0.40 each.
        (
            "orchestrator.toml",
            "version = 1\n\n[prices.\"scripted-model\"]\ninput_usd_per_mtok = 1000.0\noutput_usd_per_mtok = 5000.0\n",
        ),
    ]);
    let server = tokio_runtime().block_on(ModelServer::always(
        Protocol::OpenAiChat,
        Turn::text("All fixed, trust me."),
    ));
    let head = sandbox.git(&["rev-parse", "HEAD"]);
    let fix_requests = |server: &ModelServer, title: &str| {
        server
            .main_requests()
            .iter()
            .map(|r| r.body.to_string())
            .filter(|b| b.contains("role in this task: fix") && b.contains(title))
            .count()
    };
    let args = |limit: &'static str, resume: bool| {
        let mut args = vec![
            "review-fix",
            "--fix",
            "findings.json",
            "--agent",
            "openai",
            "--test-cmd",
            "sh check.sh",
            "--isolation",
            "serial",
            "--max-cost-usd",
            limit,
            "-y",
        ];
        if resume {
            args.push("--resume");
        }
        args
    };
    let o = sandbox.orchestrator(&server, &args("0.5", false));
    let report = format!("stdout:\n{}\nstderr:\n{}", text(&o.stdout), text(&o.stderr));
    // Exit 3: stopped at a limit, resumable.
    assert_eq!(o.status.code(), Some(3), "{report}");
    // The planner's answers were refused (no JSON): failed calls, counted as
    // calls but carrying no usage. F2's attempts then cost $0.40 each; a
    // call starts while the spend is below the limit, so the first two
    // start ($0.00, $0.40) and the third is refused at $0.80, which stops
    // the run: F1 never reached the server.
    assert_eq!(fix_requests(&server, "Wrong value"), 2, "{report}");
    assert_eq!(fix_requests(&server, "Typo in the greeting"), 0, "{report}");
    let out = text(&o.stdout);
    let all = format!("{out}{}", text(&o.stderr));
    assert!(
        all.contains("the run's limit is reached ($0.8000 of $0.5000 spent)"),
        "{report}"
    );
    assert!(all.contains("stopped at the run's limit"), "{report}");
    assert!(all.contains("continue with --resume"), "{report}");
    assert_eq!(sandbox.git(&["rev-parse", "HEAD"]), head, "{report}");
    assert_eq!(sandbox.read("greet.txt"), "hello wrold\n");
    assert_eq!(sandbox.read("calc.txt"), "value = 1\n");

    // Resumed with room to spend: both findings are tried (and fail, as the
    // model still edits nothing), so the run ends with exit 1, not 3.
    let o = sandbox.orchestrator(&server, &args("100", true));
    let report = format!("stdout:\n{}\nstderr:\n{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{report}");
    assert!(
        fix_requests(&server, "Typo in the greeting") >= 1,
        "{report}"
    );
    assert!(fix_requests(&server, "Wrong value") > 2, "{report}");
    assert!(
        text(&o.stdout).contains("findings: 2 (0 fixed, 2 failed, 0 rejected)"),
        "{report}"
    );
    assert_eq!(sandbox.git(&["rev-parse", "HEAD"]), head, "{report}");
}

/// A limit that is not a positive number is refused before anything runs,
/// naming the flag.
#[test]
fn a_bad_limit_is_a_usage_error_naming_the_flag() {
    let sandbox = Sandbox::new(&[("findings.json", FINDINGS)]);
    let server = tokio_runtime().block_on(ModelServer::always(
        Protocol::OpenAiChat,
        Turn::text("unused"),
    ));
    let o = sandbox.orchestrator(
        &server,
        &[
            "review-fix",
            "--fix",
            "findings.json",
            "--agent",
            "openai",
            "--max-agent-calls",
            "0",
            "-y",
        ],
    );
    let report = format!("stdout:\n{}\nstderr:\n{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(2), "{report}");
    assert!(
        text(&o.stderr).contains(
            "--max-agent-calls: budget.max_agent_calls: expected a positive number of calls, got 0"
        ),
        "{report}"
    );
    assert!(server.main_requests().is_empty());
}
