//! What the suite's real-git tests share (`e2e`, `trash`, `relint`,
//! `ids`): git, a git copy of the quickstart crate, and the services and
//! config of a quickstart run with real git, a real `cargo test` and the
//! builtin [`SuggestionAgent`]; a run in a child process killed with
//! SIGKILL once its first fix lands (`e2e`'s and `trash`'s resume tests).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orchestrator_adapters::builtin::SuggestionAgent;
use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::test_runner::CommandTestRunner;
pub(crate) use orchestrator_adapters::test_support::git;
use orchestrator_core::agent::{Agent, AgentError, AgentRequest, AgentResponse, Role};
use orchestrator_core::event::NullSink;
use orchestrator_core::gate::AutoYes;
use orchestrator_core::test_runner::TestRunner;
use orchestrator_review_fix::{
    PlannerMode, ReviewFixConfig, Services, TestRunnerFactory, TreeEnv, VerifyMode,
};

/// `examples/quickstart`, linked file by file into this crate so that the
/// packaged crate's tests have it; its `Cargo.toml` is linked as
/// `Cargo.toml.in` because cargo leaves folders holding a `Cargo.toml` out of
/// a package, and its `.gitignore` as `gitignore` because git refuses a
/// symlinked `.gitignore`.
fn quickstart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/quickstart")
}

/// A git repository holding a copy of the quickstart crate (without its
/// clippy JSON, which is returned as an input path outside the repository).
pub(crate) fn copy_quickstart(parent: &Path) -> (PathBuf, PathBuf) {
    let repo = parent.join("repo");
    for (from, rel) in [
        ("Cargo.toml.in", "Cargo.toml"),
        ("Cargo.lock", "Cargo.lock"),
        ("gitignore", ".gitignore"),
        ("README.md", "README.md"),
        ("src/lib.rs", "src/lib.rs"),
        ("src/ring.rs", "src/ring.rs"),
    ] {
        let to = repo.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(quickstart().join(from), &to).unwrap();
    }
    let input = parent.join("clippy.json");
    std::fs::copy(quickstart().join("clippy.json"), &input).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "test@example.invalid"]);
    git(&repo, &["config", "user.name", "Test"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "quickstart"]);
    (repo, input)
}

/// Plans with garbage (so the deterministic fallback is used) and fixes
/// with the builtin suggestion agent.
#[derive(Debug)]
struct GarbagePlanner;

#[async_trait::async_trait]
impl Agent for GarbagePlanner {
    fn name(&self) -> &str {
        "garbage-planner+suggestion"
    }
    async fn run(&self, request: AgentRequest) -> Result<AgentResponse, AgentError> {
        match request.role {
            Role::Plan => Ok(AgentResponse::text(
                "Sure! Here is my plan: fix everything.",
            )),
            _ => SuggestionAgent::new().run(request).await,
        }
    }
}

/// `cargo test` with one target directory for the main tree and the
/// session's per-slot directories for worktrees; records the trees.
#[derive(Debug)]
struct CargoTests {
    target: PathBuf,
    seen: Arc<Mutex<Vec<TreeEnv>>>,
}

impl TestRunnerFactory for CargoTests {
    fn runner(&self, env: &TreeEnv) -> Arc<dyn TestRunner> {
        self.seen.lock().unwrap().push(env.clone());
        // Worktrees must not share the main tree's target directory: cargo
        // names a root package's artifacts the same in every checkout and
        // would run another tree's build.
        let target = env.cargo_target_dir.as_ref().unwrap_or(&self.target);
        Arc::new(
            CommandTestRunner::argv(["cargo", "test", "--quiet", "--offline"])
                .env("CARGO_TARGET_DIR", target.display().to_string())
                .env("RUST_BACKTRACE", "0")
                .time_limit(Duration::from_secs(300)),
        )
    }
}

/// The services of a quickstart run: real git in `repo`, `cargo test`
/// (the main tree's target directory `target`, the trees recorded in
/// `seen`), the garbage planner with the builtin suggestion agent, every
/// question answered yes.
pub(crate) async fn services(
    repo: &Path,
    target: &Path,
    seen: Arc<Mutex<Vec<TreeEnv>>>,
) -> Services {
    Services {
        agent: Arc::new(GarbagePlanner),
        vcs: Arc::new(GitVcs::open(repo).await.unwrap()),
        tests: Arc::new(CargoTests {
            target: target.to_path_buf(),
            seen,
        }),
        gate: Arc::new(AutoYes),
        sink: Arc::new(NullSink),
        provisioner: None,
    }
}

/// A run on `inputs` with the agent planner, the user's dirty files
/// allowed, each fix verified alone.
pub(crate) fn config(inputs: Vec<PathBuf>) -> ReviewFixConfig {
    ReviewFixConfig::default()
        .with_inputs(inputs)
        .with_planner(PlannerMode::Agent)
        .with_allow_dirty(true)
        // These tests pin one-by-one verification; batch verification has
        // its own tests (`batch.rs`).
        .with_verify(VerifyMode::Each)
}

/// The child role of a kill-9 test: when `$child_env` names a folder made
/// by [`kill_after_first_commit`], runs the quickstart session there (in
/// `mode`) until the parent kills this process; `false` in the parent.
pub(crate) async fn run_as_child(child_env: &str, mode: VerifyMode) -> bool {
    let Ok(dir) = std::env::var(child_env) else {
        return false;
    };
    let dir = PathBuf::from(dir);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut cfg = config(vec![dir.join("clippy.json")]);
    cfg.verify = mode;
    let _ = orchestrator_review_fix::run(
        cfg,
        services(&dir.join("repo"), &dir.join("target"), seen).await,
    )
    .await;
    true
}

/// Runs test `test` of this binary as a child process on the quickstart
/// copy in `dir` (named to it by `$child_env`) and SIGKILLs it once the
/// first commit past `base` is on the branch of `dir/repo`.
pub(crate) fn kill_after_first_commit(test: &str, child_env: &str, dir: &Path, base: &str) {
    let repo = dir.join("repo");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads=1"])
        .env(child_env, dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(240);
    while git(&repo, &["rev-list", "--count", &format!("{base}..HEAD")]).trim() == "0" {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child finished before it was killed"
        );
        assert!(Instant::now() < deadline, "no commit within the deadline");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
