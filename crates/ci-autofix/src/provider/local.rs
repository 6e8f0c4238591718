//! The local mode: the configured check commands run through
//! `CommandRunner`, each one check, failing by its exit status.

use super::*;

/// Settings of the local mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LocalConfig {
    /// Shell commands, each one check (`cargo fmt --check`).
    pub checks: Vec<String>,
    /// What the working change is diffed against (`--base`); `None`: the
    /// branch's upstream.
    pub base: Option<String>,
    /// Whether fix commits are pushed.
    pub push: bool,
    /// Time limit per check run.
    pub time_limit: Option<Duration>,
}

/// [`CiProvider`] that runs the configured checks locally.
#[derive(Debug)]
pub struct LocalProvider {
    pub(super) runner: Arc<dyn CommandRunner>,
    pub(super) repo_dir: PathBuf,
    pub(super) config: LocalConfig,
    pub(super) last_logs: Mutex<BTreeMap<String, String>>,
}

/// The stdout of a command that exited 0; else an error with its status and
/// stderr.
pub(super) fn stdout_of_success(
    command: String,
    out: orchestrator_core::command::CommandOutput,
) -> Result<String, ProviderError> {
    if !out.success() {
        return Err(ProviderError::Command {
            command,
            status: out.exit_code,
            stderr: out.stderr.trim().to_owned(),
        });
    }
    Ok(out.stdout)
}

/// Runs `spec`; `Err` only when it cannot run, else its output whatever
/// the exit status, with the command line for messages.
pub(super) async fn run_spec(
    runner: &dyn CommandRunner,
    spec: CommandSpec,
) -> Result<(String, orchestrator_core::command::CommandOutput), ProviderError> {
    let command = spec.display();
    let out = runner.run(spec).await.map_err(|e| ProviderError::Command {
        command: command.clone(),
        status: None,
        stderr: e.to_string(),
    })?;
    Ok((command, out))
}

impl LocalProvider {
    /// A provider running `config.checks` in `repo_dir`.
    pub fn new(
        runner: Arc<dyn CommandRunner>,
        repo_dir: impl Into<PathBuf>,
        config: LocalConfig,
    ) -> Self {
        Self {
            runner,
            repo_dir: repo_dir.into(),
            config,
            last_logs: Mutex::new(BTreeMap::new()),
        }
    }
}

impl LocalProvider {
    /// Runs `git args…` in the repository; `Err` only when it cannot run.
    pub(super) async fn git(
        &self,
        args: &[&str],
    ) -> Result<(String, orchestrator_core::command::CommandOutput), ProviderError> {
        run_spec(
            self.runner.as_ref(),
            CommandSpec::new("git", args.iter().copied(), self.repo_dir.clone()),
        )
        .await
    }

    /// [`Self::git`], its stdout; a non-zero exit is an error.
    pub(super) async fn git_ok(&self, args: &[&str]) -> Result<String, ProviderError> {
        let (command, out) = self.git(args).await?;
        stdout_of_success(command, out)
    }
}

#[async_trait]
impl CiProvider for LocalProvider {
    fn pushes(&self) -> bool {
        self.config.push
    }

    fn check_commands(&self) -> Vec<String> {
        self.config.checks.clone()
    }

    async fn wait_for_checks(&self, _head: Option<&str>) -> Result<CheckRun, ProviderError> {
        let mut failed = Vec::new();
        let mut logs = BTreeMap::new();
        for check in &self.config.checks {
            let mut spec = CommandSpec::shell(check.clone(), self.repo_dir.clone());
            if let Some(limit) = self.config.time_limit {
                spec = spec.with_time_limit(limit);
            }
            let out = self
                .runner
                .run(spec)
                .await
                .map_err(|e| ProviderError::Command {
                    command: check.clone(),
                    status: None,
                    stderr: e.to_string(),
                })?;
            if !out.success() {
                let mut log = out.combined();
                if out.timed_out {
                    log.push_str("\n[check timed out]\n");
                }
                logs.insert(check.clone(), log);
                failed.push(FailedCheck {
                    name: check.clone(),
                    run_id: None,
                    log_url: None,
                    conclusion_detail: out.exit_code.map(|c| format!("exit status {c}")),
                });
            }
        }
        *self.last_logs.lock().unwrap_or_else(|p| p.into_inner()) = logs;
        Ok(if failed.is_empty() {
            CheckRun::Green
        } else {
            CheckRun::Failed(failed)
        })
    }

    async fn failed_logs(&self, checks: &[FailedCheck]) -> Result<Vec<CheckLog>, ProviderError> {
        let logs = self.last_logs.lock().unwrap_or_else(|p| p.into_inner());
        checks
            .iter()
            .map(|c| {
                logs.get(&c.name)
                    .map(|log| CheckLog {
                        name: c.name.clone(),
                        log: log.clone(),
                    })
                    .ok_or_else(|| ProviderError::Command {
                        command: c.name.clone(),
                        status: None,
                        stderr: "no captured output for this check (it was not run)".into(),
                    })
            })
            .collect()
    }

    /// The working change: `git diff <merge-base>` — what the tree
    /// (committed and uncommitted changes to tracked files) changed since
    /// the branch left its base, the `--base` ref or else the upstream.
    async fn diff(&self) -> Result<String, ProviderError> {
        let base = match &self.config.base {
            Some(base) if base.starts_with('-') => {
                return Err(ProviderError::BadBase { base: base.clone() });
            }
            Some(base) => base.clone(),
            None => {
                let (_, out) = self
                    .git(&[
                        "rev-parse",
                        "--abbrev-ref",
                        "--symbolic-full-name",
                        "@{upstream}",
                    ])
                    .await?;
                if !out.success() {
                    return Err(ProviderError::NoBase {
                        stderr: out.stderr.trim().to_owned(),
                    });
                }
                out.stdout.trim().to_owned()
            }
        };
        let merge_base = self.git_ok(&["merge-base", &base, "HEAD"]).await?;
        self.git_ok(&[
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            merge_base.trim(),
            "--",
        ])
        .await
    }

    /// Every configured check is required; there are no others.
    async fn check_counts(&self) -> Result<Option<CheckCounts>, ProviderError> {
        Ok(Some(CheckCounts {
            total_required: self.config.checks.len() as u64,
            auxiliary_failed: 0,
        }))
    }
}
