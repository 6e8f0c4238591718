//! FormatterAgent and LinterFixAgent: real cargo fmt and cargo clippy --fix
//! on temporary crates, tool choice from repository files and logs, and the
//! error paths through a scripted runner.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod builtin_support;

use std::path::Path;
use std::sync::Arc;

use builtin_support::{cargo, fixture_crate, read};
use orchestrator_adapters::builtin::{
    Formatter, FormatterAgent, LinterFix, LinterFixAgent, choose_formatters, choose_linter_fix,
};
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, Role};
use orchestrator_core::command::CommandOutput;
use orchestrator_core::fakes::ScriptedCommands;

fn request(dir: &Path, log: &str) -> AgentRequest {
    AgentRequest::new("check", Role::Fix, "fix the failing check", dir)
        .with_context(serde_json::json!({ "log": log }))
}

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

/// A table row: the repository's files, the failing log, the expected tools.
type Case<T> = (Vec<(&'static str, &'static str)>, &'static str, Vec<T>);

const CARGO_TOML: &str =
    "[package]\nname = \"fmt-fixture\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";

#[tokio::test]
async fn cargo_fmt_fixes_a_badly_formatted_crate_and_reports_the_file() {
    let dir = project(&[
        ("Cargo.toml", CARGO_TOML),
        (
            "src/lib.rs",
            "mod tidy;\npub fn  add( a:i32,b :i32)->i32{a+b}\n",
        ),
        (
            "src/tidy.rs",
            "/// Already formatted.\npub fn one() -> i32 {\n    1\n}\n",
        ),
        ("notes.txt", "not code\n"),
    ]);
    let (ok, _, _) = cargo(dir.path(), &["fmt", "--check"]);
    assert!(!ok, "the fixture must start badly formatted");
    let log = "Diff in /repo/src/lib.rs at line 1:\n-pub fn  add( a:i32,b :i32)->i32{a+b}\n";
    let resp = FormatterAgent::default()
        .run(request(dir.path(), log))
        .await
        .unwrap();
    assert_eq!(resp.files_changed, ["src/lib.rs"]);
    assert!(
        resp.text.contains("`cargo fmt --all` succeeded"),
        "{}",
        resp.text
    );
    let (ok, stdout, stderr) = cargo(dir.path(), &["fmt", "--check"]);
    assert!(ok, "{stdout}{stderr}");
    assert!(read(dir.path(), "src/lib.rs").contains("pub fn add(a: i32, b: i32) -> i32 {"));
}

#[test]
fn formatter_choice_follows_the_repository_and_the_log() {
    let cases: Vec<Case<Formatter>> = vec![
        (vec![("Cargo.toml", "")], "", vec![Formatter::CargoFmt]),
        (vec![("go.mod", "module x\n")], "", vec![Formatter::Gofmt]),
        (
            vec![("go.mod", "module x\n")],
            "goimports -l found: main.go",
            vec![Formatter::Goimports],
        ),
        (
            vec![("pyproject.toml", "[project]\n")],
            "",
            vec![Formatter::Black],
        ),
        (
            vec![("pyproject.toml", "[tool.ruff]\nline-length = 100\n")],
            "",
            vec![Formatter::RuffFormat],
        ),
        (
            vec![("setup.cfg", "[isort]\nprofile = black\n")],
            "",
            vec![Formatter::Isort],
        ),
        (
            vec![("pyproject.toml", "[tool.black]\n[tool.ruff]\n")],
            "would reformat src/app.py\nOh no! 1 file would be reformatted.",
            vec![Formatter::Black],
        ),
        (
            vec![("pyproject.toml", "")],
            "$ ruff format --check .\nWould reformat: app.py",
            vec![Formatter::RuffFormat],
        ),
        (
            vec![("pyproject.toml", "")],
            "ERROR: /src/app.py Imports are incorrectly sorted and/or formatted.",
            vec![Formatter::Isort],
        ),
        (vec![("package.json", "{}")], "", vec![Formatter::Prettier]),
        (
            vec![("package.json", "{}"), ("Cargo.toml", "")],
            "[warn] Code style issues found in 2 files. Run Prettier with --write to fix.",
            vec![Formatter::Prettier],
        ),
        // A log naming a formatter whose project is absent falls back to the
        // repository's own.
        (
            vec![("Cargo.toml", "")],
            "black would reformat",
            vec![Formatter::CargoFmt],
        ),
        (vec![("README.md", "")], "rustfmt", vec![]),
    ];
    for (files, log, expected) in cases {
        let dir = project(&files);
        assert_eq!(
            choose_formatters(dir.path(), log),
            expected,
            "{files:?} / {log:?}"
        );
    }
}

#[tokio::test]
async fn a_missing_formatter_is_unavailable() {
    let dir = project(&[("pyproject.toml", "[tool.black]\n"), ("app.py", "x=1\n")]);
    let empty_path = tempfile::tempdir().unwrap();
    let agent = FormatterAgent::default().with_env("PATH", empty_path.path().display().to_string());
    match agent.run(request(dir.path(), "")).await {
        Err(AgentError::Unavailable { message }) => {
            assert!(
                message.starts_with("black is not available: failed to start `black .`"),
                "{message}"
            );
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(read(dir.path(), "app.py"), "x=1\n");
}

#[tokio::test]
async fn no_project_means_no_formatter() {
    let dir = project(&[("README.md", "hello\n")]);
    match FormatterAgent::default().run(request(dir.path(), "")).await {
        Err(AgentError::Unsupported { reason }) => {
            assert!(reason.contains("no formatter applies"), "{reason}")
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[tokio::test]
async fn a_failing_formatter_is_a_failure_with_its_output() {
    let dir = project(&[("go.mod", "module x\n")]);
    let runner = Arc::new(ScriptedCommands::new().on_output(
        "gofmt -w .",
        Ok(CommandOutput {
            exit_code: Some(2),
            stderr: "main.go:3:1: expected declaration, found 'IDENT' x\n".into(),
            ..CommandOutput::default()
        }),
    ));
    let agent = FormatterAgent::new(runner.clone());
    match agent.run(request(dir.path(), "")).await {
        Err(AgentError::Failed { message, exit_code }) => {
            assert_eq!(exit_code, Some(2));
            assert_eq!(
                message,
                "`gofmt -w .` exited with status 2: main.go:3:1: expected declaration, found 'IDENT' x"
            );
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    let calls = runner.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].cwd, dir.path());
    assert!(calls[0].time_limit.is_some());
}

#[tokio::test]
async fn a_timed_out_formatter_is_a_timeout() {
    let dir = project(&[("package.json", "{}")]);
    let runner = Arc::new(ScriptedCommands::new().on_output(
        "prettier",
        Ok(CommandOutput {
            exit_code: None,
            timed_out: true,
            ..CommandOutput::default()
        }),
    ));
    let req = request(dir.path(), "").with_time_limit(std::time::Duration::from_secs(3));
    match FormatterAgent::new(runner).run(req).await {
        Err(AgentError::Timeout { seconds }) => assert_eq!(seconds, 3.0),
        other => panic!("expected Timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn clippy_fix_fixes_the_fixture_crate() {
    let dir = fixture_crate();
    let target = dir.path().join("target");
    let agent =
        LinterFixAgent::default().with_env("CARGO_TARGET_DIR", target.display().to_string());
    // A lock file up front, so the only change is the fixer's.
    let (ok, _, stderr) = cargo(dir.path(), &["generate-lockfile", "--offline"]);
    assert!(ok, "{stderr}");
    let before = read(dir.path(), "src/lib.rs");
    let resp = agent
        .run(request(
            dir.path(),
            "warning: unneeded `return` statement\n  = note: clippy",
        ))
        .await
        .unwrap();
    assert_eq!(resp.files_changed, ["src/lib.rs"], "{}", resp.text);
    let after = read(dir.path(), "src/lib.rs");
    assert_ne!(before, after);
    assert!(after.contains("(0..10).contains(&n)"), "{after}");
    let (ok, _, stderr) = cargo(dir.path(), &["build", "--quiet"]);
    assert!(ok, "{stderr}");
}

#[test]
fn linter_fix_choice_follows_the_repository_and_the_log() {
    let cases: Vec<Case<LinterFix>> = vec![
        (vec![("Cargo.toml", "")], "", vec![LinterFix::ClippyFix]),
        (
            vec![("pyproject.toml", "[tool.ruff]\n")],
            "",
            vec![LinterFix::RuffFix],
        ),
        (
            vec![("pyproject.toml", "")],
            "app.py:1:1: F401 [*] `os` imported but unused\nruff",
            vec![LinterFix::RuffFix],
        ),
        (
            vec![("pyproject.toml", "")],
            "app.py:1:1: E501 line too long (flake8)",
            vec![],
        ),
        (
            vec![("package.json", "{\"devDependencies\": {\"eslint\": \"9\"}}")],
            "",
            vec![LinterFix::EslintFix],
        ),
        (
            vec![("package.json", "{}"), ("eslint.config.js", "")],
            "",
            vec![LinterFix::EslintFix],
        ),
        (vec![("package.json", "{}")], "", vec![]),
        (
            vec![("go.mod", "module x\n")],
            "golangci-lint: errcheck",
            vec![],
        ),
        (
            vec![
                ("Cargo.toml", ""),
                ("package.json", "{}"),
                ("eslint.config.js", ""),
            ],
            "error  'x' is assigned a value but never used  no-unused-vars\n✖ 1 problem (eslint)",
            vec![LinterFix::EslintFix],
        ),
    ];
    for (files, log, expected) in cases {
        let dir = project(&files);
        assert_eq!(
            choose_linter_fix(dir.path(), log),
            expected,
            "{files:?} / {log:?}"
        );
    }
}

#[tokio::test]
async fn no_fixer_means_escalate() {
    let dir = project(&[("go.mod", "module x\n")]);
    match LinterFixAgent::default()
        .run(request(dir.path(), "go vet: x"))
        .await
    {
        Err(AgentError::Unsupported { reason }) => {
            assert!(
                reason.contains("no linter with its own fixer") && reason.contains("escalate"),
                "{reason}"
            )
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

/// A runner that edits a file, as a fixer would, then exits 1.
#[derive(Debug)]
struct PartialFixer;

#[async_trait::async_trait]
impl orchestrator_core::command::CommandRunner for PartialFixer {
    async fn run(
        &self,
        spec: orchestrator_core::command::CommandSpec,
    ) -> Result<CommandOutput, orchestrator_core::command::CommandError> {
        std::fs::write(spec.cwd.join("app.py"), "x = 1\n").unwrap();
        Ok(CommandOutput {
            exit_code: Some(1),
            stdout: "Found 2 errors (1 fixed, 1 remaining).".into(),
            ..CommandOutput::default()
        })
    }
}

#[tokio::test]
async fn a_fixer_exiting_nonzero_fails_unless_it_changed_files() {
    let files = [
        ("pyproject.toml", "[tool.ruff]\n"),
        ("app.py", "import os\nx = 1\n"),
    ];
    let dir = project(&files);
    let runner = Arc::new(ScriptedCommands::new().on(
        "ruff check --fix .",
        1,
        "Found 2 errors (0 fixed, 2 remaining).",
    ));
    match LinterFixAgent::new(runner)
        .run(request(dir.path(), ""))
        .await
    {
        Err(AgentError::Failed { exit_code, message }) => {
            assert_eq!(exit_code, Some(1));
            assert!(message.contains("2 remaining"), "{message}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    let resp = LinterFixAgent::new(Arc::new(PartialFixer))
        .run(request(dir.path(), ""))
        .await
        .unwrap();
    assert_eq!(resp.files_changed, ["app.py"]);
    assert!(
        resp.text.contains("exited with status Some(1)"),
        "{}",
        resp.text
    );
}
