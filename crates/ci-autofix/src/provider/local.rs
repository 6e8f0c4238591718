//! The local mode: the configured check commands run through
//! `CommandRunner`, each one check, failing by its exit status. The working
//! change is read through the guarded [`Vcs`], never by running git here.

use orchestrator_core::vcs::{Vcs, VcsError};

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
    pub(super) vcs: Option<Arc<dyn Vcs>>,
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
            vcs: None,
        }
    }

    /// Reads the working change ([`CiProvider::diff`]) through `vcs` (the
    /// guarded git adapter); without one the change is not shown.
    pub fn with_vcs(mut self, vcs: Arc<dyn Vcs>) -> Self {
        self.vcs = Some(vcs);
        self
    }

    /// Runs check `check` once: `None` when it passed, else its log.
    async fn run_check(&self, check: &str) -> Result<Option<(String, Option<i32>)>, ProviderError> {
        let mut spec = CommandSpec::shell(check.to_owned(), self.repo_dir.clone());
        if let Some(limit) = self.config.time_limit {
            spec = spec.with_time_limit(limit);
        }
        let out = self
            .runner
            .run(spec)
            .await
            .map_err(|e| ProviderError::Command {
                command: check.to_owned(),
                status: None,
                stderr: e.to_string(),
            })?;
        if out.success() {
            return Ok(None);
        }
        let mut log = out.combined();
        if out.timed_out {
            log.push_str("\n[check timed out]\n");
        }
        Ok(Some((log, out.exit_code)))
    }
}

fn vcs_error(what: &str, e: VcsError) -> ProviderError {
    ProviderError::Command {
        command: what.to_owned(),
        status: None,
        stderr: e.to_string(),
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
            if let Some((log, code)) = self.run_check(check).await? {
                logs.insert(check.clone(), log);
                failed.push(FailedCheck {
                    name: check.clone(),
                    run_id: None,
                    log_url: None,
                    conclusion_detail: code.map(|c| format!("exit status {c}")),
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
                    .map(|log| CheckLog::new(&c.name, log.clone()))
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
        if let Some(base) = self.config.base.as_ref().filter(|b| b.starts_with('-')) {
            return Err(ProviderError::BadBase { base: base.clone() });
        }
        let Some(vcs) = &self.vcs else {
            return Err(ProviderError::NoBase {
                stderr: "no version control to read the working change with".into(),
            });
        };
        let base = match &self.config.base {
            Some(base) if base.starts_with('-') => {
                return Err(ProviderError::BadBase { base: base.clone() });
            }
            Some(base) => base.clone(),
            None => match vcs.upstream().await {
                Ok(Some(upstream)) => upstream,
                Ok(None) => {
                    return Err(ProviderError::NoBase {
                        stderr: "no upstream configured for the branch".into(),
                    });
                }
                Err(e) => {
                    return Err(ProviderError::NoBase {
                        stderr: e.to_string(),
                    });
                }
            },
        };
        vcs.diff_from(&base)
            .await
            .map_err(|e| vcs_error(&format!("git diff against {base}"), e))
    }

    /// Runs the check command again on the same tree.
    async fn rerun(&self, check: &FailedCheck) -> Result<RerunOutcome, ProviderError> {
        if !self.config.checks.contains(&check.name) {
            return Ok(RerunOutcome::Unsupported);
        }
        Ok(match self.run_check(&check.name).await? {
            None => RerunOutcome::Passed,
            Some((log, code)) => {
                self.last_logs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(check.name.clone(), log);
                RerunOutcome::Failed(FailedCheck {
                    conclusion_detail: code.map(|c| format!("exit status {c}")),
                    ..check.clone()
                })
            }
        })
    }

    /// Every configured check is required; there are no others.
    async fn check_counts(&self) -> Result<Option<CheckCounts>, ProviderError> {
        Ok(Some(CheckCounts {
            total_required: self.config.checks.len() as u64,
            auxiliary_failed: 0,
        }))
    }
}
