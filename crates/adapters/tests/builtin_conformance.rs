//! The builtin (no-LLM) agents pass the core contract-only `Agent`
//! conformance suite (`conformance::agent_contract`) with real components:
//! the clippy fixture crate copied into temporary directories, real
//! `cargo fmt` and `cargo clippy --fix` through the real `ProcessRunner`, and
//! a `cargo` on a private PATH that sleeps for the time-limit checks.
//!
//! The free-text `Agent` suite does not apply to them: they cannot be
//! scripted to say a given text, they answer with what their tool did.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod builtin_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use builtin_support::{cargo, fix_request, fixture_crate, fixtures};
use orchestrator_adapters::builtin::{CiFixAgent, FormatterAgent, LinterFixAgent, SuggestionAgent};
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_core::agent::{Agent, AgentRequest, Role};
use orchestrator_core::command::{CommandError, CommandOutput, CommandRunner, CommandSpec};
use orchestrator_core::conformance::agent_contract::{Case, ContractHarness, SlowCase, run_suite};
use orchestrator_core::finding::Finding;
use orchestrator_findings::formats;
use serde_json::json;

/// A generous limit for the real tools in the successful requests (a cold
/// clippy build on a busy machine), far above what they take.
const TOOL_LIMIT: Duration = Duration::from_secs(300);

/// Fresh copies of one template directory, kept alive with the harness.
struct Workdirs {
    template: tempfile::TempDir,
    copies: Mutex<Vec<tempfile::TempDir>>,
}

impl Workdirs {
    /// The clippy fixture crate — badly formatted and full of
    /// machine-applicable lints, so every builtin agent has work in it —
    /// with a lock file, so the only changes are the agents' own.
    fn fixture_crate() -> Self {
        let template = fixture_crate();
        let (ok, _, stderr) = cargo(template.path(), &["generate-lockfile", "--offline"]);
        assert!(ok, "{stderr}");
        Self::from(template)
    }

    /// A directory holding `files`.
    fn with_files(files: &[(&str, &str)]) -> Self {
        let template = tempfile::tempdir().unwrap();
        for (name, content) in files {
            let path = template.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        Self::from(template)
    }

    fn from(template: tempfile::TempDir) -> Self {
        Self {
            template,
            copies: Mutex::new(Vec::new()),
        }
    }

    /// A new copy of the template.
    fn fresh(&self) -> PathBuf {
        let copy = tempfile::tempdir().unwrap();
        copy_tree(self.template.path(), copy.path());
        let path = copy.path().to_path_buf();
        self.copies.lock().unwrap().push(copy);
        path
    }
}

/// Copies the files under `from` into `to` (no `target` folder).
fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "target" {
                std::fs::create_dir_all(&dst).unwrap();
                copy_tree(&src, &dst);
            }
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A private `bin` folder whose `cargo` sleeps for a minute: the tool a
/// slow request runs, so the time limit must cut it off.
struct SleepyCargo {
    bin: tempfile::TempDir,
}

impl SleepyCargo {
    fn new() -> Self {
        let bin = tempfile::tempdir().unwrap();
        let cargo = bin.path().join("cargo");
        std::fs::write(&cargo, "#!/bin/sh\nexec sleep 60\n").unwrap();
        std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { bin }
    }

    /// A PATH that finds the sleepy `cargo` first.
    fn path_var(&self) -> String {
        format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}

/// The real [`ProcessRunner`], with a PATH that finds the sleepy `cargo`
/// first: for agents that take a runner but no environment (`CiFixAgent`).
#[derive(Debug)]
struct SleepyPath {
    path: String,
}

#[async_trait]
impl CommandRunner for SleepyPath {
    async fn run(&self, spec: CommandSpec) -> Result<CommandOutput, CommandError> {
        ProcessRunner::default()
            .run(spec.with_env("PATH", self.path.clone()))
            .await
    }
}

/// The clippy findings of the fixture crate.
fn clippy_findings() -> Vec<Finding> {
    let text = std::fs::read_to_string(fixtures().join("clippy.json")).unwrap();
    formats::detect_and_parse(&text, "clippy.json")
        .unwrap()
        .findings
}

fn by_category(category: &str) -> Finding {
    clippy_findings()
        .into_iter()
        .find(|f| f.category.as_deref() == Some(category))
        .unwrap_or_else(|| panic!("no {category} finding in clippy.json"))
}

/// A fix request for a failed check whose output was `log`.
fn check_request(id: &str, workdir: &Path, context: serde_json::Value) -> AgentRequest {
    AgentRequest::new(id, Role::Fix, "fix the failing check", workdir)
        .with_time_limit(TOOL_LIMIT)
        .with_context(context)
}

/// `SuggestionAgent`: applies a clippy suggestion to the fixture crate.
struct SuggestionHarness {
    crates: Workdirs,
}

#[async_trait]
impl ContractHarness for SuggestionHarness {
    async fn agent(&self) -> Arc<dyn Agent> {
        Arc::new(SuggestionAgent::new())
    }
    async fn workdir(&self) -> PathBuf {
        self.crates.fresh()
    }
    fn ok_request(&self, workdir: &Path) -> AgentRequest {
        fix_request(workdir, &by_category("clippy::manual_range_contains"))
    }
    async fn failing(&self) -> Case {
        let finding = by_category("clippy::too_many_arguments");
        let id = finding.id.to_string();
        Case::new(
            Arc::new(SuggestionAgent::new()),
            fix_request(&self.crates.fresh(), &finding),
        )
        .mentioning(id)
        .mentioning("not fixable by this agent")
    }
    async fn slow(&self) -> SlowCase {
        SlowCase::NotApplicable(
            "SuggestionAgent edits files in memory and renames them into place: no process, \
             no network, nothing to wait for, so no request can outlast a time limit",
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suggestion_agent_passes_the_contract_suite() {
    run_suite(&SuggestionHarness {
        crates: Workdirs::fixture_crate(),
    })
    .await;
}

/// `FormatterAgent`: real `cargo fmt` on the fixture crate.
struct FormatterHarness {
    crates: Workdirs,
    /// A crate rustfmt cannot parse.
    broken: Workdirs,
    sleepy: SleepyCargo,
}

const BROKEN_CARGO_TOML: &str =
    "[package]\nname = \"broken\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";

const FMT_LOG: &str = "Diff in src/lib.rs at line 5:\n-use std::fmt::{\n-    Debug,\n";

#[async_trait]
impl ContractHarness for FormatterHarness {
    async fn agent(&self) -> Arc<dyn Agent> {
        Arc::new(FormatterAgent::default())
    }
    async fn workdir(&self) -> PathBuf {
        self.crates.fresh()
    }
    fn ok_request(&self, workdir: &Path) -> AgentRequest {
        check_request("fmt", workdir, json!({ "log": FMT_LOG }))
    }
    /// A crate rustfmt cannot parse: `cargo fmt` fails, and the error
    /// carries its complaint about the file.
    async fn failing(&self) -> Case {
        let dir = self.broken.fresh();
        Case::new(
            Arc::new(FormatterAgent::default()),
            check_request("fmt", &dir, json!({ "log": FMT_LOG })),
        )
        .mentioning("`cargo fmt --all` exited with status 1")
        .mentioning("src/lib.rs")
    }
    async fn slow(&self) -> SlowCase {
        SlowCase::Slow(Case::new(
            Arc::new(FormatterAgent::default().with_env("PATH", self.sleepy.path_var())),
            check_request("fmt", &self.crates.fresh(), json!({ "log": FMT_LOG })),
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn formatter_agent_passes_the_contract_suite() {
    run_suite(&FormatterHarness {
        crates: Workdirs::fixture_crate(),
        broken: Workdirs::with_files(&[
            ("Cargo.toml", BROKEN_CARGO_TOML),
            ("src/lib.rs", "pub fn broken( -> i32 {\n"),
        ]),
        sleepy: SleepyCargo::new(),
    })
    .await;
}

/// `LinterFixAgent`: real `cargo clippy --fix` on the fixture crate, every
/// call sharing one target directory.
struct LinterHarness {
    crates: Workdirs,
    target: tempfile::TempDir,
    sleepy: SleepyCargo,
    go: Workdirs,
}

const CLIPPY_LOG: &str = "warning: manual `Range::contains` implementation\n  = note: clippy";

#[async_trait]
impl ContractHarness for LinterHarness {
    async fn agent(&self) -> Arc<dyn Agent> {
        Arc::new(
            LinterFixAgent::default()
                .with_env("CARGO_TARGET_DIR", self.target.path().display().to_string()),
        )
    }
    async fn workdir(&self) -> PathBuf {
        self.crates.fresh()
    }
    fn ok_request(&self, workdir: &Path) -> AgentRequest {
        check_request("clippy", workdir, json!({ "log": CLIPPY_LOG }))
    }
    /// A Go project failing `go vet`: no fixer of its own, so the agent
    /// declines and names the directory.
    async fn failing(&self) -> Case {
        let dir = self.go.fresh();
        let display = dir.display().to_string();
        Case::new(
            self.agent().await,
            check_request(
                "vet",
                &dir,
                json!({ "log": "go vet: main.go:3: unreachable code" }),
            ),
        )
        .mentioning(display)
        .mentioning("escalate")
    }
    async fn slow(&self) -> SlowCase {
        SlowCase::Slow(Case::new(
            Arc::new(LinterFixAgent::default().with_env("PATH", self.sleepy.path_var())),
            check_request("clippy", &self.crates.fresh(), json!({ "log": CLIPPY_LOG })),
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linter_fix_agent_passes_the_contract_suite() {
    run_suite(&LinterHarness {
        crates: Workdirs::fixture_crate(),
        target: tempfile::tempdir().unwrap(),
        sleepy: SleepyCargo::new(),
        go: Workdirs::with_files(&[("go.mod", "module x\n"), ("main.go", "package main\n")]),
    })
    .await;
}

/// `CiFixAgent` dispatching a mechanical failure of one sub-class to its
/// real tool (`trivial` → `cargo fmt`, `non-trivial` → `cargo clippy --fix`);
/// a semantic failure is declined.
struct CiHarness {
    sub_class: &'static str,
    crates: Workdirs,
    sleepy: SleepyCargo,
}

impl CiHarness {
    fn new(sub_class: &'static str) -> Self {
        Self {
            sub_class,
            crates: Workdirs::fixture_crate(),
            sleepy: SleepyCargo::new(),
        }
    }

    /// The flow's context for a mechanical failure of this sub-class.
    fn mechanical(&self) -> serde_json::Value {
        let log = match self.sub_class {
            "trivial" => FMT_LOG,
            _ => CLIPPY_LOG,
        };
        json!({"classification": "mechanical", "sub_class": self.sub_class, "log": log})
    }
}

#[async_trait]
impl ContractHarness for CiHarness {
    async fn agent(&self) -> Arc<dyn Agent> {
        Arc::new(CiFixAgent::new(Arc::new(ProcessRunner::default())))
    }
    async fn workdir(&self) -> PathBuf {
        self.crates.fresh()
    }
    fn ok_request(&self, workdir: &Path) -> AgentRequest {
        check_request("ci", workdir, self.mechanical())
    }
    async fn failing(&self) -> Case {
        let context = json!({
            "classification": "semantic",
            "sub_class": "none",
            "log": "test tests::it_works ... FAILED"
        });
        Case::new(
            self.agent().await,
            check_request("ci", &self.crates.fresh(), context),
        )
        .mentioning("got classification `semantic`")
    }
    async fn slow(&self) -> SlowCase {
        let runner = SleepyPath {
            path: self.sleepy.path_var(),
        };
        SlowCase::Slow(Case::new(
            Arc::new(CiFixAgent::new(Arc::new(runner))),
            check_request("ci", &self.crates.fresh(), self.mechanical()),
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ci_fix_agent_passes_the_contract_suite_with_the_formatter() {
    run_suite(&CiHarness::new("trivial")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ci_fix_agent_passes_the_contract_suite_with_the_linter_fixer() {
    run_suite(&CiHarness::new("non-trivial")).await;
}
