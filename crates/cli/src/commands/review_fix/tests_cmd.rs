//! The test command a run verifies with: `--test-cmd`, `[tests]` of
//! `orchestrator.toml`, the one a resumed session recorded, or inferred.

use super::*;

/// The test command and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTests {
    /// What runs.
    pub command: TestCommand,
    /// Where it came from, for the output (`--test-cmd`, `orchestrator.toml`,
    /// `inferred: Cargo.toml found`).
    pub source: String,
    /// The time limit of one run (`[tests] timeout_secs`).
    pub time_limit: Option<Duration>,
    /// The JUnit report the command writes (`[tests] junit_report`).
    pub junit_report: Option<PathBuf>,
}

impl ResolvedTests {
    /// The argv that runs the command (`sh -c …` for a shell line), as
    /// recorded in the session.
    pub fn argv(&self) -> Vec<String> {
        match &self.command {
            TestCommand::Argv(argv) => argv.clone(),
            TestCommand::Shell(script) => vec!["sh".into(), "-c".into(), script.clone()],
        }
    }

    /// The command as shown to the user.
    pub fn display(&self) -> String {
        match &self.command {
            TestCommand::Argv(argv) => orchestrator_adapters::config::join_command(argv),
            TestCommand::Shell(script) => script.clone(),
        }
    }
}

/// Picks the test command: `--test-cmd` (split into words like a shell
/// would, without expansion), else `[tests]` of `orchestrator.toml`, else
/// what the project implies. `Err` names what is missing or wrong.
pub fn resolve_tests(
    flag: Option<&str>,
    config: &Config,
    repo: &Path,
) -> Result<ResolvedTests, String> {
    if let Some(line) = flag {
        let argv = split_command(line).map_err(|e| {
            format!("--test-cmd {line:?}: {e} (for a shell pipeline use: --test-cmd \"sh -c '…'\")")
        })?;
        if argv.is_empty() {
            return Err("--test-cmd is empty".to_owned());
        }
        return Ok(ResolvedTests {
            command: TestCommand::Argv(argv),
            source: "--test-cmd".to_owned(),
            time_limit: None,
            junit_report: None,
        });
    }
    if let Some(section) = &config.tests {
        let command = match section.command_line().map_err(|e| e.to_string())? {
            CommandLine::Argv(argv) => TestCommand::Argv(argv),
            CommandLine::Shell(script) => TestCommand::Shell(script),
        };
        return Ok(ResolvedTests {
            command,
            source: "orchestrator.toml [tests]".to_owned(),
            time_limit: section.timeout(),
            junit_report: section.junit_report.clone(),
        });
    }
    match infer_test_command(repo) {
        Some(inferred) => Ok(ResolvedTests {
            command: TestCommand::Argv(inferred.argv),
            source: format!("inferred: {}", inferred.reason),
            time_limit: None,
            junit_report: None,
        }),
        None => Err(format!(
            "no test command for {}: pass --test-cmd CMD or set [tests] command in orchestrator.toml \
             (nothing to infer: no Cargo.toml, package.json test script, pytest configuration or go.mod)",
            repo.display()
        )),
    }
}

/// The test command of a `--resume` without `--test-cmd`: the one the
/// session recorded (with `[tests]`' time limit and report when it is the
/// same command), else what [`resolve_tests`] picks.
pub fn resolve_resume_tests(
    recorded: Option<Vec<String>>,
    config: &Config,
    repo: &Path,
) -> Result<ResolvedTests, String> {
    let fresh = resolve_tests(None, config, repo);
    match (recorded, fresh) {
        (Some(argv), Ok(fresh)) if fresh.argv() == argv => Ok(fresh),
        (Some(argv), _) if !argv.is_empty() => Ok(ResolvedTests {
            command: TestCommand::Argv(argv),
            source: "recorded in the session".to_owned(),
            time_limit: None,
            junit_report: None,
        }),
        (_, fresh) => fresh,
    }
}

/// The test runner for each tree: the resolved command, with
/// `CARGO_TARGET_DIR` set to the tree's own target directory in a worktree
/// (trees that share one could run each other's builds). The main tree keeps
/// the caller's environment, so a `CARGO_TARGET_DIR` set by the user is used
/// there.
///
/// With a remote runner (`--runner ray`) each run goes through it instead;
/// the tree's local `CARGO_TARGET_DIR` is then not passed (the node keeps
/// its own build cache).
#[derive(Debug, Clone)]
pub struct CliTests {
    tests: ResolvedTests,
    remote: Option<Arc<dyn orchestrator_core::command::CommandRunner>>,
}

impl CliTests {
    /// A factory for `tests`.
    pub fn new(tests: ResolvedTests) -> Self {
        Self {
            tests,
            remote: None,
        }
    }

    /// Builder: run every test run through `runner` (the Ray runner).
    pub fn remote(mut self, runner: Arc<dyn orchestrator_core::command::CommandRunner>) -> Self {
        self.remote = Some(runner);
        self
    }

    /// The runner for `tree`, as a concrete type (for inspection).
    pub fn command_runner(&self, tree: &TreeEnv) -> CommandTestRunner {
        let mut runner = CommandTestRunner::new(self.tests.command.clone());
        if let Some(dir) = tree
            .cargo_target_dir
            .as_ref()
            .filter(|_| self.remote.is_none())
        {
            runner = runner.env("CARGO_TARGET_DIR", dir.display().to_string());
        }
        for (key, value) in &tree.env {
            runner = runner.env(key, value);
        }
        if let Some(limit) = self.tests.time_limit {
            runner = runner.time_limit(limit);
        }
        if let Some(report) = &self.tests.junit_report {
            runner = runner.junit_xml(report.clone());
        }
        runner
    }
}

impl TestRunnerFactory for CliTests {
    fn runner(&self, tree: &TreeEnv) -> Arc<dyn TestRunner> {
        match &self.remote {
            Some(remote) => Arc::new(RemoteTestRunner::new(
                self.command_runner(tree),
                Arc::clone(remote),
            )),
            None => Arc::new(self.command_runner(tree)),
        }
    }
}

/// The tests of a dry run without a test command: the flow plans and runs
/// nothing, so a run that reaches this is a bug, reported as an unusable
/// configuration rather than a pass.
#[derive(Debug, Clone, Copy)]
pub struct NoTests;

#[async_trait::async_trait]
impl TestRunner for NoTests {
    async fn run(&self, _request: TestRequest) -> Result<TestReport, TestRunnerError> {
        Err(TestRunnerError::Config(
            "no test command: pass --test-cmd CMD or set [tests] command in orchestrator.toml"
                .to_owned(),
        ))
    }
}

impl TestRunnerFactory for NoTests {
    fn runner(&self, _tree: &TreeEnv) -> Arc<dyn TestRunner> {
        Arc::new(NoTests)
    }
}
