//! `orchestrator review-fix` run as a user runs it: the real binary on
//! temporary git copies of `examples/quickstart/`, a real `cargo test`, and
//! agents that are real programs — a fake `claude` on `PATH` that prints what
//! `claude -p --output-format json` prints, and an OpenAI-compatible server
//! on 127.0.0.1.
//!
//! The quickstart has seven machine-applicable clippy findings; six are good
//! and one (`len_zero` in `src/ring.rs`) breaks the `ring_labels` test.
//! Each test has its own `CARGO_TARGET_DIR` (warm across the run's test
//! runs in the main tree; worktrees get their own from the library).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod quickstart_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use orchestrator_adapters::test_support::git;
use quickstart_support::{Dated, quickstart, quickstart_repo};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The six good fixes, in the order the deterministic plan commits them.
/// In the order the builtin agent applies them: a file's fixes top to
/// bottom (none of them overlap; see `ParseOutcome::fix_order`).
const GOOD_FIXES: [&str; 6] = [
    "fix(quality): redundant field names in struct initialization [clippy::redundant_field_names@src/lib.rs:19:15]",
    "fix(quality): redundant field names in struct initialization [clippy::redundant_field_names@src/lib.rs:19:27]",
    "fix(quality): length comparison to zero [clippy::len_zero@src/lib.rs:24:8]",
    "fix(quality): unneeded `return` statement [clippy::needless_return@src/lib.rs:28:5]",
    "fix(quality): manual `RangeInclusive::contains` implementation [clippy::manual_range_contains@src/lib.rs:33:5]",
    "fix(quality): unneeded `return` statement [clippy::needless_return@src/lib.rs:57:5]",
];

const BREAKING: &str = "clippy::len_zero@src/ring.rs:42:12";

/// A temporary git copy of the quickstart crate, its clippy JSON beside it
/// (outside the repository), and a Cargo target directory for the test.
struct Fixture {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    clippy: PathBuf,
    target: PathBuf,
    base: String,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let repo = quickstart_repo(tmp.path(), Dated::Now);
    let clippy = tmp.path().join("clippy.json");
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let target = tmp.path().join("target");
    Fixture {
        tmp,
        repo,
        clippy,
        target,
        base,
    }
}

impl Fixture {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
        cmd.env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
            .arg("review-fix")
            .args(args)
            .current_dir(&self.repo)
            .env("CARGO_TARGET_DIR", &self.target)
            .env("ORCHESTRATOR_CACHE_DIR", self.tmp.path().join("cache"))
            .env("RUST_BACKTRACE", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("RUST_LOG")
            .env_remove("ORCHESTRATOR_AGENT")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_MODEL");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn clippy(&self) -> &str {
        self.clippy.to_str().unwrap()
    }

    /// Subjects of the commits since the fixture's commit, oldest first.
    fn commits(&self) -> Vec<String> {
        git(
            &self.repo,
            &[
                "log",
                "--reverse",
                "--format=%s",
                &format!("{}..HEAD", self.base),
            ],
        )
        .lines()
        .map(str::to_owned)
        .collect()
    }

    /// The one session directory under `.review/fixes/`.
    fn session_dir(&self) -> PathBuf {
        let dirs: Vec<PathBuf> = std::fs::read_dir(self.repo.join(".review/fixes"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs.into_iter().next().unwrap()
    }

    /// Run-specific values in `text` replaced: the session id, paths, commit
    /// ids and the wall time.
    fn redact(&self, text: &str) -> String {
        let session = self.session_dir();
        let id = session.file_name().unwrap().to_str().unwrap().to_owned();
        let mut out = text.replace(&id, "fix-<session>");
        let real = self.tmp.path().canonicalize().unwrap();
        out = out
            .replace(real.to_str().unwrap(), "<tmp>")
            .replace(self.tmp.path().to_str().unwrap(), "<tmp>");
        let ids = git(
            &self.repo,
            &[
                "log",
                "--reverse",
                "--format=%h",
                "--abbrev=7",
                &format!("{}..HEAD", self.base),
            ],
        );
        for (i, c) in ids.lines().enumerate() {
            out = out.replace(c, &format!("<c{}>", i + 1));
        }
        out.lines()
            .map(|l| match l.find("wall time ") {
                Some(at) => format!("{}wall time <s>", &l[..at]),
                None => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_documents_the_contract() {
    let o = Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
        .args(["review-fix", "--help"])
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    insta::assert_snapshot!("review_fix_help", stdout(&o));
}

#[test]
fn builtin_commits_each_good_fix_rolls_back_the_breaking_one_and_leaves_user_files_alone() {
    let fx = fixture();
    // The user's own work: an untracked file and a modified tracked file.
    std::fs::write(fx.repo.join("notes.txt"), "my notes\n").unwrap();
    let readme = format!(
        "{}\nlocal edit\n",
        std::fs::read_to_string(fx.repo.join("README.md")).unwrap()
    );
    std::fs::write(fx.repo.join("README.md"), &readme).unwrap();

    let o = fx.run(&["--fix", fx.clippy(), "--allow-dirty", "-y"]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("test command `cargo test --no-fail-fast` (inferred: Cargo.toml found)"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // One commit per good fix, `fix(<dimension>): <title> [<id>]`, on main,
    // each touching exactly the fixed file.
    assert_eq!(fx.commits(), GOOD_FIXES);
    assert_eq!(git(&fx.repo, &["branch", "--show-current"]).trim(), "main");
    let ids = git(
        &fx.repo,
        &["log", "--format=%H", &format!("{}..HEAD", fx.base)],
    );
    for id in ids.lines() {
        let files = git(&fx.repo, &["show", "--format=", "--name-only", id]);
        assert_eq!(files, "src/lib.rs\n", "{id}");
    }
    // The breaking suggestion was rolled back and reported failed.
    let ring = std::fs::read_to_string(fx.repo.join("src/ring.rs")).unwrap();
    assert_eq!(
        ring,
        std::fs::read_to_string(quickstart().join("src/ring.rs")).unwrap()
    );
    assert!(
        out.contains(&format!(
            "{BREAKING} failed after 2 attempts: attempt 2 repeats attempt 1"
        )),
        "{out}"
    );
    // The user's files are byte-identical, nothing else is left over.
    assert_eq!(
        std::fs::read_to_string(fx.repo.join("notes.txt")).unwrap(),
        "my notes\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.repo.join("README.md")).unwrap(),
        readme
    );
    assert_eq!(
        git(&fx.repo, &["status", "--porcelain"]),
        " M README.md\n?? notes.txt\n"
    );
    assert_eq!(git(&fx.repo, &["worktree", "list"]).lines().count(), 1);
    // The summary names fix-summary.md, which exists.
    let summary = fx.session_dir().join("fix-summary.md");
    assert!(summary.is_file());
    assert!(
        out.contains(&format!("summary: {}", summary.display())) || out.contains("/fix-summary.md"),
        "{out}"
    );
    insta::assert_snapshot!("builtin_summary", fx.redact(&out));
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let fx = fixture();
    let lib = std::fs::read(fx.repo.join("src/lib.rs")).unwrap();
    // No -y: a dry run asks nothing.
    let o = fx.run(&["--fix", fx.clippy(), "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "stderr:\n{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("Plan fix-"), "{out}");
    assert!(fx.commits().is_empty());
    assert_eq!(git(&fx.repo, &["status", "--porcelain"]), "");
    assert_eq!(std::fs::read(fx.repo.join("src/lib.rs")).unwrap(), lib);
    assert!(fx.session_dir().join("fix-plan.json").is_file());
    assert!(!fx.session_dir().join("active-fix-session.json").exists());
    insta::assert_snapshot!("dry_run_plan", fx.redact(&out));
}

#[test]
fn without_yes_and_without_a_terminal_the_plan_waits_for_a_human() {
    let fx = fixture();
    let o = fx
        .command(&["--fix", fx.clippy()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "stderr:\n{}", stderr(&o));
    assert!(stdout(&o).contains("waiting for a human"), "{}", stdout(&o));
    assert!(fx.commits().is_empty());
    // The session stays resumable, and --resume -y finishes it.
    assert!(fx.session_dir().join("active-fix-session.json").is_file());
    let o = fx.run(&["--resume", "-y"]);
    assert_eq!(o.status.code(), Some(1), "stderr:\n{}", stderr(&o));
    assert_eq!(fx.commits().len(), 6);
}

#[test]
fn a_second_concurrent_run_on_the_same_repository_is_refused() {
    let fx = fixture();
    // The first run plans with an agent that takes its time.
    let mut first = fx
        .command(&["--fix", fx.clippy(), "-y", "--agent", "command:sleep 60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until it is planning: its session exists and is marked active.
    let planning = || {
        std::fs::read_dir(fx.repo.join(".review/fixes"))
            .into_iter()
            .flatten()
            .any(|e| {
                std::fs::read_to_string(e.unwrap().path().join("active-fix-session.json"))
                    .is_ok_and(|t| t.contains("\"planning\""))
            })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !planning() {
        assert!(
            Instant::now() < deadline,
            "the first run never started planning"
        );
        assert!(first.try_wait().unwrap().is_none(), "the first run ended");
        std::thread::sleep(Duration::from_millis(20));
    }

    let second = fx.run(&["--fix", fx.clippy(), "-y"]);
    assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    let err = stderr(&second);
    assert!(
        err.contains("another review-fix run is in progress"),
        "{err}"
    );
    assert!(err.contains(&format!("pid {}", first.id())), "{err}");

    // Ctrl-C stops the first run resumably (exit 3), killing its agent.
    let status = Command::new("kill")
        .args(["-INT", &first.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("--resume"), "{}", stderr(&out));
    assert!(fx.commits().is_empty());
    // Only the first run made a session, and it resumes to the end.
    assert!(fx.session_dir().join("active-fix-session.json").is_file());
    let o = fx.run(&["--resume", "-y", "--agent", "builtin"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(fx.commits(), GOOD_FIXES);
    assert!(!fx.session_dir().join("active-fix-session.json").exists());
}

#[test]
fn a_truncated_findings_file_is_exit_2_naming_the_file_and_line() {
    let fx = fixture();
    let export =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/data/review-findings.json");
    let text = std::fs::read_to_string(export).unwrap();
    let cut = fx.tmp.path().join("findings.json");
    std::fs::write(&cut, &text[..700]).unwrap();
    let o = fx.run(&["--fix", cut.to_str().unwrap(), "-y"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(cut.to_str().unwrap()), "{err}");
    assert!(err.contains("line 18"), "{err}");
    assert!(fx.commits().is_empty());

    // A clippy stream cut in the middle of its last line: the readable
    // lines are fixed, the cut line is rejected by file and line (exit 1).
    let clippy = std::fs::read_to_string(&fx.clippy).unwrap();
    let first_line_end = clippy.find('\n').unwrap() + 1;
    let cut = fx.tmp.path().join("clippy-cut.json");
    std::fs::write(&cut, &clippy[..first_line_end + 100]).unwrap();
    let o = fx.run(&["--fix", cut.to_str().unwrap(), "-y"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("{}:2 rejected", cut.display())),
        "{}",
        stdout(&o)
    );
}

#[test]
fn missing_inputs_and_no_test_command_are_usage_errors() {
    let fx = fixture();
    let o = fx.run(&["-y"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--fix"), "{}", stderr(&o));

    let empty = tempfile::tempdir().unwrap();
    git(empty.path(), &["init", "-q"]);
    let o = fx.run(&[
        "--fix",
        fx.clippy(),
        "--repo",
        empty.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no test command"), "{}", stderr(&o));
}

/// Inputs are checked in the order a user reads them: a missing findings
/// file is reported as such even where no test command can be found, and a
/// dry run, which runs no tests, needs none.
#[test]
fn the_findings_are_checked_before_the_test_command_and_a_dry_run_needs_none() {
    let fx = fixture();
    // A repository that implies no test command.
    git(&fx.repo, &["rm", "-q", "Cargo.toml", "Cargo.lock"]);
    git(&fx.repo, &["commit", "-q", "-m", "no cargo"]);
    let nope = fx.tmp.path().join("nope.json");
    for extra in [&["--dry-run"][..], &["-y"][..]] {
        let mut args = vec!["--fix", nope.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = fx.run(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&nope.display().to_string()),
            "{extra:?}: {err}"
        );
        assert!(!err.contains("no test command"), "{extra:?}: {err}");
    }

    let o = fx.run(&["--fix", fx.clippy(), "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "stderr:\n{}", stderr(&o));
    assert!(stdout(&o).starts_with("Plan fix-"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("no test command (a dry run runs no tests)"),
        "{}",
        stderr(&o)
    );
    assert!(fx.session_dir().join("fix-plan.json").is_file());
    assert_eq!(git(&fx.repo, &["status", "--porcelain"]), "");

    // Without --dry-run the missing test command is still a usage error.
    let o = fx.run(&["--fix", fx.clippy(), "-y"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no test command"), "{}", stderr(&o));
}

/// An OpenAI-compatible chat-completions server: a valid partial plan (all
/// findings of the batch in one group) for planning requests, prose for fix
/// requests.
struct ChatServer;

fn plan_for(user: &str) -> String {
    let start = user.rfind("```json\n").unwrap() + "```json\n".len();
    let end = start + user[start..].find("\n```").unwrap();
    let context: Value = serde_json::from_str(&user[start..end]).unwrap();
    let ids: Vec<&str> = context["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    json!({
        "batch_id": context["batch_id"],
        "groups": [{
            "group_id": "G1",
            "group_name": "the whole batch",
            "findings": ids,
            "fix_strategy": {"approach": "apply the suggested changes", "complexity": "low", "test_pattern": ""},
            "risk_assessment": {"level": "low", "concerns": [], "mitigation": "tests after each fix"}
        }],
        "timeline": [{"stage": 1, "groups": ["G1"], "execution_mode": "serial", "depends_on": []}]
    })
    .to_string()
}

impl Respond for ChatServer {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let user = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned();
        let planning = body.get("response_format").is_some_and(|f| !f.is_null());
        let content = if planning {
            plan_for(&user)
        } else {
            "I cannot edit files. In src/lib.rs, replace `return text;` with `text`.".to_owned()
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": "local-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_agent_plans_but_cannot_edit_so_nothing_is_fixed_or_committed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ChatServer)
        .mount(&server)
        .await;
    let fx = fixture();
    let url = format!("{}/v1", server.uri());
    let mut cmd = fx.command(&["--fix", fx.clippy(), "--agent", "openai", "-y"]);
    cmd.env("OPENAI_BASE_URL", &url)
        .env("OPENAI_MODEL", "local-test");
    let o = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.contains("findings: 7 (0 fixed, 7 failed, 0 rejected)"),
        "{out}"
    );
    assert!(out.contains("the agent changed no file"), "{out}");
    assert!(fx.commits().is_empty());
    assert_eq!(git(&fx.repo, &["status", "--porcelain"]), "");

    // The plans were the server's, validated and used as they were.
    let dir = fx.session_dir();
    for n in [1, 2] {
        let partial: Value = serde_json::from_slice(
            &std::fs::read(dir.join(format!("partial-plan-{n}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(partial["metadata"]["planner"], "openai", "{partial:#}");
        assert!(
            partial["metadata"].get("fallback_reason").is_none(),
            "{partial:#}"
        );
    }
    let requests = server.received_requests().await.unwrap();
    assert!(requests.len() >= 2 + 7, "{} requests", requests.len());
}

/// A JavaScript project whose test command needs the ignored
/// `node_modules/`: the fixes of two files run in parallel groups, each in
/// a worktree, which gets the dependency folder without configuration
/// (before worktree environments, every fix there failed its tests).
#[test]
fn parallel_groups_of_a_js_project_test_with_its_ignored_node_modules() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::create_dir_all(repo.join("node_modules/dep")).unwrap();
    std::fs::write(repo.join(".gitignore"), "node_modules/\n").unwrap();
    std::fs::write(repo.join("package.json"), "{\"name\": \"demo\"}\n").unwrap();
    std::fs::write(repo.join("src/a.js"), "var a = 1;\nmodule.exports = a;\n").unwrap();
    std::fs::write(repo.join("src/b.js"), "var b = 2;\nmodule.exports = b;\n").unwrap();
    std::fs::write(
        repo.join("node_modules/dep/index.js"),
        "module.exports = 42;\n",
    )
    .unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "test@example.invalid"]);
    git(&repo, &["config", "user.name", "Test"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "js project"]);
    let diagnostic = |file: &str| {
        format!(
            "{{\"message\": \"Unexpected var, use let or const instead.\", \"location\": {{\"path\": \"src/{file}\", \"range\": {{\"start\": {{\"line\": 1, \"column\": 1}}, \"end\": {{\"line\": 1, \"column\": 4}}}}}}, \"severity\": \"ERROR\", \"code\": {{\"value\": \"no-var\"}}, \"suggestions\": [{{\"range\": {{\"start\": {{\"line\": 1, \"column\": 1}}, \"end\": {{\"line\": 1, \"column\": 4}}}}, \"text\": \"const\"}}], \"source\": {{\"name\": \"eslint\"}}}}\n"
        )
    };
    let findings = tmp.path().join("eslint.rdjsonl");
    std::fs::write(&findings, diagnostic("a.js") + &diagnostic("b.js")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
        .env_remove("ORCHESTRATOR_AGENT")
        .current_dir(&repo)
        .args([
            "review-fix",
            "--fix",
            findings.to_str().unwrap(),
            "--agent",
            "builtin",
            "--verify",
            "each",
            "--test-cmd",
            "node -e \"require('dep'); require('./src/a.js'); require('./src/b.js')\"",
            "-y",
        ])
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("note: each worktree gets node_modules/ (detected;"),
        "{err}"
    );
    let subjects = git(&repo, &["log", "--format=%s", "-2"]);
    assert!(
        subjects.contains("src/a.js") && subjects.contains("src/b.js"),
        "{subjects}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/a.js")).unwrap(),
        "const a = 1;\nmodule.exports = a;\n"
    );
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 1);
}

/// A crate whose tests are already red (one test fails before any fix, as
/// a registry crate's root-only test does in a container): the base is
/// tested once, the failing test is named at once and in the summary, and
/// the fixes that break nothing new land — the same six as on a green
/// base — while the one that breaks `ring_labels` is still caught.
/// `--require-green-base` refuses before any fix.
#[test]
fn a_red_base_is_named_and_the_fixes_that_break_nothing_new_land() {
    let fx = fixture();
    std::fs::create_dir_all(fx.repo.join("tests")).unwrap();
    std::fs::write(
        fx.repo.join("tests/environment.rs"),
        "#[test]\nfn needs_a_network_share() {\n    assert!(std::path::Path::new(\"/nonexistent/share\").exists());\n}\n",
    )
    .unwrap();
    git(&fx.repo, &["add", "-A"]);
    git(&fx.repo, &["commit", "-q", "-m", "a test that fails here"]);
    let base = git(&fx.repo, &["rev-parse", "HEAD"]).trim().to_owned();

    let o = fx.run(&["--fix", fx.clippy(), "--require-green-base", "-y"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the tests fail before any fix (1 test: needs_a_network_share)"),
        "{err}"
    );
    assert_eq!(
        git(&fx.repo, &["rev-parse", "HEAD"]).trim(),
        base,
        "nothing landed"
    );

    let o = fx.run(&["--fix", fx.clippy(), "-y", "--resume"]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains(
            "warning: the tests already fail before any fix: needs_a_network_share (1 test)"
        ),
        "{err}"
    );
    let landed: Vec<String> = git(
        &fx.repo,
        &["log", "--reverse", "--format=%s", &format!("{base}..HEAD")],
    )
    .lines()
    .map(str::to_owned)
    .collect();
    assert_eq!(landed, GOOD_FIXES, "the fixes land as on a green base");
    assert!(
        out.contains(&format!("{BREAKING} failed after 2 attempts")),
        "{out}"
    );
    let summary = std::fs::read_to_string(fx.session_dir().join("fix-summary.md")).unwrap();
    assert!(
        summary.contains("- Failing before any fix: needs_a_network_share (1 test; no fix was blamed for them, each was judged by no new failure)"),
        "{summary}"
    );
    // One run at the base, then the counts of a green base (the same as
    // the quickstart's: 6 batched runs with the breaking fix's re-run).
    assert!(
        out.contains("test runs: 7 (`cargo test --no-fail-fast`"),
        "{out}"
    );
    // The base's result is kept for a resume.
    let kept: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fx.session_dir().join("baseline.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        kept["failing_tests"],
        serde_json::json!(["needs_a_network_share"])
    );
}
