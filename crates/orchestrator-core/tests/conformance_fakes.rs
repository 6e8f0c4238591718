//! The fakes pass the same conformance suites as the real adapters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use orchestrator_core::conformance::{agent, agent_contract, gate, test_runner, vcs};
use orchestrator_core::fakes::{FakeAgent, FakeVcs, Reply, ScriptedGate, ScriptedTestRunner};
use orchestrator_core::gate::AutoYes;
use orchestrator_core::test_runner::{TestOutcome, TestReport};
use orchestrator_core::{Agent, AgentRequest, AgentResponse, Answer, Role, TestRunner, Vcs};

struct FakeAgents;

#[async_trait]
impl agent::AgentHarness for FakeAgents {
    async fn answering(&self, text: &str) -> Arc<dyn Agent> {
        Arc::new(FakeAgent::new("fake").otherwise(Reply::text(text)))
    }
    async fn answering_json(&self, value: &serde_json::Value) -> Arc<dyn Agent> {
        Arc::new(FakeAgent::new("fake").otherwise(Reply::json(value.clone())))
    }
    async fn failing(&self) -> Arc<dyn Agent> {
        Arc::new(FakeAgent::new("fake").otherwise(Reply::fail("backend exploded")))
    }
    async fn hanging(&self) -> Arc<dyn Agent> {
        Arc::new(FakeAgent::new("fake").otherwise(Reply::Hang))
    }
    fn workdir(&self) -> PathBuf {
        std::env::temp_dir()
    }
}

#[tokio::test]
async fn fake_agent_conforms() {
    agent::run_suite(&FakeAgents).await;
}

/// A FakeAgent scripted as a workdir fixer: it rewrites `src/lib.rs` for
/// request `fix`, declines every other id and hangs on `slow`.
struct FakeFixers {
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

impl FakeFixers {
    fn agent() -> Arc<dyn Agent> {
        Arc::new(
            FakeAgent::new("fake-fixer")
                .on(
                    "fix",
                    Reply::Edit {
                        files: vec![("src/lib.rs".into(), Some("pub fn fixed() {}\n".into()))],
                        response: AgentResponse::text("rewrote src/lib.rs"),
                    },
                )
                .on("slow", Reply::Hang),
        )
    }

    fn fresh(&self) -> PathBuf {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "pub fn broken( ) {}\n").unwrap();
        std::fs::write(dir.path().join("README.md"), "untouched\n").unwrap();
        let path = dir.path().to_path_buf();
        self.dirs.lock().unwrap().push(dir);
        path
    }
}

#[async_trait]
impl agent_contract::ContractHarness for FakeFixers {
    async fn agent(&self) -> Arc<dyn Agent> {
        Self::agent()
    }
    async fn workdir(&self) -> PathBuf {
        self.fresh()
    }
    fn ok_request(&self, workdir: &Path) -> AgentRequest {
        AgentRequest::new("fix", Role::Fix, "fix src/lib.rs", workdir)
    }
    async fn failing(&self) -> agent_contract::Case {
        let request = AgentRequest::new("unknown-finding", Role::Fix, "fix", self.fresh());
        agent_contract::Case::new(Self::agent(), request).mentioning("unknown-finding")
    }
    async fn slow(&self) -> agent_contract::SlowCase {
        let request = AgentRequest::new("slow", Role::Fix, "fix", self.fresh());
        agent_contract::SlowCase::Slow(agent_contract::Case::new(Self::agent(), request))
    }
}

#[tokio::test]
async fn fake_agent_passes_the_contract_suite() {
    agent_contract::run_suite(&FakeFixers {
        dirs: Mutex::new(Vec::new()),
    })
    .await;
}

struct FakeRunners;

#[async_trait]
impl test_runner::TestRunnerHarness for FakeRunners {
    async fn passing(&self) -> Arc<dyn TestRunner> {
        Arc::new(ScriptedTestRunner::always_passing())
    }
    async fn failing(&self) -> Arc<dyn TestRunner> {
        Arc::new(ScriptedTestRunner::new(vec![TestReport::failing(
            vec!["tests::it_works".into()],
            "assertion failed",
        )]))
    }
    async fn hanging(&self) -> Arc<dyn TestRunner> {
        let mut report = TestReport::failing(Vec::new(), "killed after the time limit");
        report.outcome = TestOutcome::TimedOut;
        Arc::new(ScriptedTestRunner::new(vec![report]))
    }
    fn workdir(&self) -> PathBuf {
        std::env::temp_dir()
    }
}

#[tokio::test]
async fn scripted_test_runner_conforms() {
    test_runner::run_suite(&FakeRunners).await;
}

struct FakeRepos;

#[async_trait]
impl vcs::VcsHarness for FakeRepos {
    async fn init(&self, dir: &Path, files: &[(&str, &str)]) -> Arc<dyn Vcs> {
        for (rel, content) in files {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        Arc::new(FakeVcs::init(dir).unwrap())
    }
}

#[tokio::test]
async fn fake_vcs_conforms() {
    vcs::run_suite(&FakeRepos).await;
}

#[tokio::test]
async fn gates_conform() {
    gate::run_suite(&AutoYes, true).await;
    let scripted = ScriptedGate::new(vec![Answer::chose(1), Answer::chose(0)]);
    gate::run_suite(scripted.as_ref(), false).await;
}

#[tokio::test]
async fn fake_vcs_push_is_fast_forward_only() {
    use orchestrator_core::vcs::PushOutcome;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    let v = FakeVcs::init(dir.path()).unwrap();
    let base = v.head().await.unwrap();
    assert_eq!(v.push("origin", "main").await.unwrap(), PushOutcome::Pushed);
    std::fs::write(dir.path().join("a.txt"), "b").unwrap();
    let mine = v.commit(&["a.txt".into()], "mine").await.unwrap();
    assert_eq!(v.push("origin", "main").await.unwrap(), PushOutcome::Pushed);
    assert_eq!(v.remote_branch("origin", "main"), Some(mine.clone()));
    // Someone else pushed a commit we do not have: our push is rejected.
    let wt_dir = tempfile::tempdir().unwrap();
    let other = v
        .worktree_add(&wt_dir.path().join("w"), "other", &base)
        .await
        .unwrap();
    std::fs::write(wt_dir.path().join("w/a.txt"), "theirs").unwrap();
    let theirs = other.commit(&["a.txt".into()], "theirs").await.unwrap();
    v.set_remote_branch("origin", "main", theirs.clone());
    assert!(matches!(
        v.push("origin", "main").await.unwrap(),
        PushOutcome::Rejected { .. }
    ));
    assert_eq!(v.remote_branch("origin", "main"), Some(theirs));
}

#[tokio::test]
async fn fake_agent_scripts_per_id_and_edits_files() {
    let dir = tempfile::tempdir().unwrap();
    let agent = FakeAgent::new("fake")
        .on("T1", Reply::fail("first try fails"))
        .on(
            "T1",
            Reply::Edit {
                files: vec![("src/x.rs".into(), Some("fn x() {}\n".into()))],
                response: orchestrator_core::AgentResponse::text("done"),
            },
        );
    let req = orchestrator_core::AgentRequest::new(
        "T1",
        orchestrator_core::Role::Fix,
        "fix it",
        dir.path(),
    );
    assert!(agent.run(req.clone()).await.is_err());
    let resp = agent.run(req.clone()).await.unwrap();
    assert_eq!(resp.files_changed, ["src/x.rs"]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/x.rs")).unwrap(),
        "fn x() {}\n"
    );
    // The last reply repeats; unscripted ids are unsupported.
    assert!(agent.run(req).await.is_ok());
    let other =
        orchestrator_core::AgentRequest::new("T9", orchestrator_core::Role::Fix, "?", dir.path());
    assert!(matches!(
        agent.run(other).await,
        Err(orchestrator_core::AgentError::Unsupported { .. })
    ));
    assert_eq!(agent.calls_for("T1"), 3);
}

#[tokio::test]
async fn scripted_commands_follow_the_runner_contract() {
    use orchestrator_core::command::{CommandError, CommandRunner, CommandSpec};
    use orchestrator_core::fakes::ScriptedCommands;
    let runner = ScriptedCommands::new().on("gh pr checks", 8, "[]").on(
        "gh pr checks",
        0,
        "[{\"bucket\":\"pass\"}]",
    );
    let spec = CommandSpec::new("gh", ["pr", "checks", "7", "--json", "bucket"], "/tmp");
    let first = runner.run(spec.clone()).await.unwrap();
    assert_eq!(
        first.exit_code,
        Some(8),
        "a failing command is Ok with its code"
    );
    let second = runner.run(spec.clone()).await.unwrap();
    assert!(second.success());
    assert!(
        runner.run(spec).await.unwrap().success(),
        "the last answer repeats"
    );
    let missing = runner.run(CommandSpec::new("cargo", ["fmt"], "/tmp")).await;
    assert!(matches!(missing, Err(CommandError::Spawn { .. })));
    assert_eq!(runner.calls().len(), 4);
}

#[tokio::test]
async fn the_fake_forge_conforms() {
    let sha = "a".repeat(40);
    let fake = orchestrator_core::conformance::forge::standard_fake(&sha);
    orchestrator_core::conformance::forge::run_suite(&fake, &sha).await;
}
