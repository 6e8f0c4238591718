//! Where failed checks and their logs come from: [`CiProvider`].
//!
//! - [`GithubProvider`] drives the `gh` CLI through a [`CommandRunner`]:
//!   `gh run view <id> --log-failed` (capped at [`LOG_CAP`], the tail kept),
//!   `gh pr diff <N>`, and `gh pr checks <N> --required --json
//!   bucket,name,state,link,workflow` polled until no check is pending. For
//!   a watcher handoff ([`watch`]) one more `gh pr checks <N> --json …`
//!   without `--required` counts the failed checks that are not required
//!   (`auxiliaryFailCount`); `gh`'s JSON has no "required" field, so a check
//!   is required when its name is among the `--required` query's.
//! - [`LocalProvider`] runs configured check commands (`sh -c <cmd>`) in the
//!   repository and keeps the output of the failing ones as their logs.
//!
//! Neither spawns a process itself: the runner does (the real one lives in
//! `orchestrator-adapters`, tests use `fakes::ScriptedCommands`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::command::{CommandRunner, CommandSpec};
use serde::Deserialize;

use crate::handoff::{FailedCheck, Handoff, run_id_from_url};

/// `gh run view --log-failed` output is capped at 200 KB (the tail is kept).
pub const LOG_CAP: usize = 200 * 1024;

/// Why a provider call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// A command could not run or exited non-zero.
    #[error("`{command}` failed{}: {stderr}", status.map(|s| format!(" with exit status {s}")).unwrap_or_default())]
    Command {
        /// The command line.
        command: String,
        /// Exit status, if it exited.
        status: Option<i32>,
        /// Its standard error (or the spawn error).
        stderr: String,
    },
    /// A failed check has no run id to fetch its log with.
    #[error(
        "failed check `{check}` has no run id (neither `runId` nor a `/actions/runs/<id>/` logUrl)"
    )]
    NoRunId {
        /// The check's name.
        check: String,
    },
    /// Output could not be parsed.
    #[error("could not parse the output of `{command}`: {message}")]
    Parse {
        /// The command line.
        command: String,
        /// What was wrong.
        message: String,
    },
}

/// The log of one failed check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLog {
    /// The check's name.
    pub name: String,
    /// Its log.
    pub log: String,
}

/// The state of the required checks after waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckRun {
    /// All required checks passed.
    Green,
    /// These required checks failed.
    Failed(Vec<FailedCheck>),
    /// Checks were still pending when the time limit ran out.
    TimedOut,
}

/// The counts a watcher handoff carries besides the failed checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CheckCounts {
    /// How many required checks there are (`totalRequired`).
    pub total_required: u64,
    /// How many checks that are not required failed (`auxiliaryFailCount`).
    pub auxiliary_failed: u64,
}

/// A source of CI results. Object-safe.
#[async_trait]
pub trait CiProvider: Send + Sync + fmt::Debug {
    /// Whether fixes are pushed (GitHub) or only committed (local, unless configured).
    fn pushes(&self) -> bool;

    /// Runs or waits for the required checks.
    async fn wait_for_checks(&self) -> Result<CheckRun, ProviderError>;

    /// The log of each failed check (an error if any log cannot be fetched).
    async fn failed_logs(&self, checks: &[FailedCheck]) -> Result<Vec<CheckLog>, ProviderError>;

    /// The change under test (PR diff), for the agent's context. A failure
    /// here is only a warning for the loop.
    async fn diff(&self) -> Result<String, ProviderError>;

    /// The counts for a handoff of the last finished
    /// [`CiProvider::wait_for_checks`]; `None` when unknown (the handoff then
    /// says 0). The default knows nothing.
    async fn check_counts(&self) -> Result<Option<CheckCounts>, ProviderError> {
        Ok(None)
    }
}

fn keep_tail(mut text: String, cap: usize) -> String {
    if text.len() <= cap {
        return text;
    }
    let mut cut = text.len() - cap;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.replace_range(..cut, "");
    text
}

/// Settings of the GitHub mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubConfig {
    /// The pull request.
    pub pr: u64,
    /// Time between two `gh pr checks` polls.
    pub poll_interval: Duration,
    /// How long to wait for pending checks.
    pub timeout: Duration,
}

/// [`CiProvider`] over the `gh` CLI.
#[derive(Debug, Clone)]
pub struct GithubProvider {
    runner: Arc<dyn CommandRunner>,
    repo_dir: PathBuf,
    config: GithubConfig,
    /// The names of the required checks at the last poll that found none
    /// pending.
    last_required: Arc<Mutex<Option<BTreeSet<String>>>>,
}

/// One row of `gh pr checks --json bucket,name,state,link,workflow`.
#[derive(Debug, Deserialize)]
struct GhCheck {
    #[serde(default)]
    bucket: String,
    name: String,
    #[serde(default)]
    link: String,
}

impl GithubProvider {
    /// A provider for `config.pr`, running `gh` in `repo_dir`.
    pub fn new(
        runner: Arc<dyn CommandRunner>,
        repo_dir: impl Into<PathBuf>,
        config: GithubConfig,
    ) -> Self {
        Self {
            runner,
            repo_dir: repo_dir.into(),
            config,
            last_required: Arc::new(Mutex::new(None)),
        }
    }

    async fn gh(&self, args: Vec<String>) -> Result<String, ProviderError> {
        let spec = CommandSpec::new("gh", args, self.repo_dir.clone());
        let command = spec.display();
        let out = self
            .runner
            .run(spec)
            .await
            .map_err(|e| ProviderError::Command {
                command: command.clone(),
                status: None,
                stderr: e.to_string(),
            })?;
        if !out.success() {
            return Err(ProviderError::Command {
                command,
                status: out.exit_code,
                stderr: out.stderr.trim().to_owned(),
            });
        }
        Ok(out.stdout)
    }

    /// `gh pr checks <N> [--required] --json …`, parsed. `gh` exits 8
    /// while checks are pending and 1 when some failed; the JSON on stdout
    /// is what counts.
    async fn checks(&self, required: bool) -> Result<Vec<GhCheck>, ProviderError> {
        let mut args: Vec<String> = vec!["pr".into(), "checks".into(), self.config.pr.to_string()];
        if required {
            args.push("--required".into());
        }
        args.extend(["--json".into(), "bucket,name,state,link,workflow".into()]);
        let command = format!("gh {}", args.join(" "));
        let spec = CommandSpec::new("gh", args, self.repo_dir.clone());
        let out = self
            .runner
            .run(spec)
            .await
            .map_err(|e| ProviderError::Command {
                command: command.clone(),
                status: None,
                stderr: e.to_string(),
            })?;
        if out.stdout.trim().is_empty() && !out.success() {
            return Err(ProviderError::Command {
                command,
                status: out.exit_code,
                stderr: out.stderr.trim().to_owned(),
            });
        }
        serde_json::from_str(&out.stdout).map_err(|e| ProviderError::Parse {
            command,
            message: e.to_string(),
        })
    }

    /// One poll of the required checks: `None` while some are pending.
    async fn poll(&self) -> Result<Option<CheckRun>, ProviderError> {
        let checks = self.checks(true).await?;
        if checks.iter().any(|c| c.bucket == "pending") {
            return Ok(None);
        }
        *self.last_required.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(checks.iter().map(|c| c.name.clone()).collect());
        let failed: Vec<FailedCheck> = checks
            .iter()
            .filter(|c| is_failure(&c.bucket))
            .map(|c| FailedCheck {
                name: c.name.clone(),
                run_id: run_id_from_url(&c.link),
                log_url: (!c.link.is_empty()).then(|| c.link.clone()),
                conclusion_detail: None,
            })
            .collect();
        Ok(Some(if failed.is_empty() {
            CheckRun::Green
        } else {
            CheckRun::Failed(failed)
        }))
    }
}

#[async_trait]
impl CiProvider for GithubProvider {
    fn pushes(&self) -> bool {
        true
    }

    async fn wait_for_checks(&self) -> Result<CheckRun, ProviderError> {
        let start = tokio::time::Instant::now();
        loop {
            if let Some(run) = self.poll().await? {
                return Ok(run);
            }
            if start.elapsed() + self.config.poll_interval > self.config.timeout {
                return Ok(CheckRun::TimedOut);
            }
            tokio::time::sleep(self.config.poll_interval).await;
        }
    }

    async fn failed_logs(&self, checks: &[FailedCheck]) -> Result<Vec<CheckLog>, ProviderError> {
        let mut logs = Vec::with_capacity(checks.len());
        let mut fetched: BTreeMap<String, String> = BTreeMap::new();
        for c in checks {
            let id = c.run_id.clone().ok_or_else(|| ProviderError::NoRunId {
                check: c.name.clone(),
            })?;
            let log = match fetched.get(&id) {
                Some(log) => log.clone(),
                None => {
                    let log = self
                        .gh(vec![
                            "run".into(),
                            "view".into(),
                            id.clone(),
                            "--log-failed".into(),
                        ])
                        .await?;
                    let log = keep_tail(log, LOG_CAP);
                    fetched.insert(id, log.clone());
                    log
                }
            };
            logs.push(CheckLog {
                name: c.name.clone(),
                log,
            });
        }
        Ok(logs)
    }

    async fn diff(&self) -> Result<String, ProviderError> {
        self.gh(vec!["pr".into(), "diff".into(), self.config.pr.to_string()])
            .await
    }

    /// `totalRequired` from the last poll; `auxiliaryFailCount` from one
    /// more query of all checks: the failed (or cancelled) ones whose name
    /// is not a required check's.
    async fn check_counts(&self) -> Result<Option<CheckCounts>, ProviderError> {
        let Some(required) = self
            .last_required
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            return Ok(None);
        };
        let all = self.checks(false).await?;
        let auxiliary_failed = all
            .iter()
            .filter(|c| is_failure(&c.bucket) && !required.contains(&c.name))
            .count();
        Ok(Some(CheckCounts {
            total_required: required.len() as u64,
            auxiliary_failed: auxiliary_failed as u64,
        }))
    }
}

/// Whether a `gh pr checks` bucket is a failure (`fail`, `cancel`).
fn is_failure(bucket: &str) -> bool {
    bucket == "fail" || bucket == "cancel"
}

/// What [`watch`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchOutcome {
    /// All required checks passed (exit 0).
    Green,
    /// Some failed: the handoff for the fix loop (exit 2).
    Failed(Handoff),
    /// Still pending at the time limit (exit 3).
    TimedOut,
}

impl WatchOutcome {
    /// The watcher's exit code: 0 green, 2 failed, 3 timeout (1 is an error).
    pub fn exit_code(&self) -> i32 {
        match self {
            WatchOutcome::Green => 0,
            WatchOutcome::Failed(_) => 2,
            WatchOutcome::TimedOut => 3,
        }
    }
}

/// The CI watcher: waits for the required checks of `pr` on `branch`. A
/// failure's handoff carries the provider's [`CiProvider::check_counts`]
/// (an error fetching them is an error of the watch).
pub async fn watch(
    provider: &dyn CiProvider,
    pr: u64,
    branch: &str,
) -> Result<WatchOutcome, ProviderError> {
    Ok(match provider.wait_for_checks().await? {
        CheckRun::Green => WatchOutcome::Green,
        CheckRun::TimedOut => WatchOutcome::TimedOut,
        CheckRun::Failed(failed_checks) => {
            let counts = provider.check_counts().await?.unwrap_or_default();
            WatchOutcome::Failed(Handoff {
                pr_number: pr,
                branch: branch.to_owned(),
                total_required: counts.total_required,
                auxiliary_fail_count: counts.auxiliary_failed,
                failed_checks,
            })
        }
    })
}

/// Settings of the local mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LocalConfig {
    /// Shell commands, each one check (`cargo fmt --check`).
    pub checks: Vec<String>,
    /// Whether fix commits are pushed.
    pub push: bool,
    /// Time limit per check run.
    pub time_limit: Option<Duration>,
}

/// [`CiProvider`] that runs the configured checks locally.
#[derive(Debug)]
pub struct LocalProvider {
    runner: Arc<dyn CommandRunner>,
    repo_dir: PathBuf,
    config: LocalConfig,
    last_logs: Mutex<BTreeMap<String, String>>,
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

#[async_trait]
impl CiProvider for LocalProvider {
    fn pushes(&self) -> bool {
        self.config.push
    }

    async fn wait_for_checks(&self) -> Result<CheckRun, ProviderError> {
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

    async fn diff(&self) -> Result<String, ProviderError> {
        Ok(String::new())
    }

    /// Every configured check is required; there are no others.
    async fn check_counts(&self) -> Result<Option<CheckCounts>, ProviderError> {
        Ok(Some(CheckCounts {
            total_required: self.config.checks.len() as u64,
            auxiliary_failed: 0,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::fakes::ScriptedCommands;

    fn gh_provider(runner: Arc<ScriptedCommands>) -> GithubProvider {
        GithubProvider::new(
            runner,
            "/repo",
            GithubConfig {
                pr: 785,
                poll_interval: Duration::from_secs(10),
                timeout: Duration::from_secs(60),
            },
        )
    }

    #[tokio::test(start_paused = true)]
    async fn watch_polls_until_no_check_is_pending() {
        let pending = r#"[{"bucket":"pending","name":"Lint","state":"IN_PROGRESS","link":"","workflow":"ci"}]"#;
        let failed = r#"[{"bucket":"pass","name":"Build","state":"SUCCESS","link":"https://github.com/o/r/actions/runs/1/job/2","workflow":"ci"},
                         {"bucket":"fail","name":"Lint","state":"FAILURE","link":"https://github.com/o/r/actions/runs/12345678/job/3","workflow":"ci"}]"#;
        // All checks: the two required ones, a failed and a cancelled
        // optional one, a passing and a skipped optional one.
        let all = r#"[{"bucket":"pass","name":"Build","state":"SUCCESS","link":"","workflow":"ci"},
                      {"bucket":"fail","name":"Lint","state":"FAILURE","link":"","workflow":"ci"},
                      {"bucket":"fail","name":"Coverage","state":"FAILURE","link":"","workflow":"cov"},
                      {"bucket":"cancel","name":"Bench","state":"CANCELLED","link":"","workflow":"bench"},
                      {"bucket":"pass","name":"Docs","state":"SUCCESS","link":"","workflow":"docs"},
                      {"bucket":"skipping","name":"Deploy","state":"SKIPPED","link":"","workflow":"cd"}]"#;
        let runner = Arc::new(
            ScriptedCommands::new()
                .on("gh pr checks 785 --json", 1, all)
                .on("gh pr checks 785 --required", 8, pending)
                .on("gh pr checks 785 --required", 1, failed),
        );
        let out = watch(&gh_provider(runner.clone()), 785, "feat/x")
            .await
            .unwrap();
        let WatchOutcome::Failed(h) = &out else {
            panic!("{out:?}")
        };
        assert_eq!(out.exit_code(), 2);
        assert_eq!(h.failed_checks.len(), 1);
        assert_eq!(h.failed_checks[0].run_id.as_deref(), Some("12345678"));
        assert_eq!((h.total_required, h.auxiliary_fail_count), (2, 2));
        let calls: Vec<Vec<String>> = runner.calls().into_iter().map(|c| c.args).collect();
        let required = [
            "pr",
            "checks",
            "785",
            "--required",
            "--json",
            "bucket,name,state,link,workflow",
        ];
        let all_checks = [
            "pr",
            "checks",
            "785",
            "--json",
            "bucket,name,state,link,workflow",
        ];
        assert_eq!(calls, [&required[..], &required[..], &all_checks[..]]);
    }

    #[tokio::test]
    async fn counts_need_a_finished_poll_and_a_failing_count_query_fails_the_watch() {
        let failed = r#"[{"bucket":"fail","name":"Lint","link":"https://github.com/o/r/actions/runs/7/job/3"}]"#;
        let runner = Arc::new(
            ScriptedCommands::new()
                .on("gh pr checks 785 --json", 4, "")
                .on("gh pr checks 785 --required", 1, failed),
        );
        let p = gh_provider(runner.clone());
        assert_eq!(p.check_counts().await.unwrap(), None, "no poll yet");
        assert!(runner.calls().is_empty());
        let err = watch(&p, 785, "b").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "`gh pr checks 785 --json bucket,name,state,link,workflow` failed with exit status 4: "
        );
        // Local checks: every configured check is required.
        let local = LocalProvider::new(
            runner,
            "/repo",
            LocalConfig {
                checks: vec!["a".into(), "b".into(), "c".into()],
                push: false,
                time_limit: None,
            },
        );
        assert_eq!(
            local.check_counts().await.unwrap(),
            Some(CheckCounts {
                total_required: 3,
                auxiliary_failed: 0
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn watch_times_out_and_reports_green() {
        let pending = r#"[{"bucket":"pending","name":"Lint"}]"#;
        let runner = Arc::new(ScriptedCommands::new().on("gh pr checks", 8, pending));
        let out = watch(&gh_provider(runner), 785, "b").await.unwrap();
        assert_eq!((out.clone(), out.exit_code()), (WatchOutcome::TimedOut, 3));
        let runner = Arc::new(ScriptedCommands::new().on(
            "gh pr checks",
            0,
            r#"[{"bucket":"pass","name":"Lint"}]"#,
        ));
        assert_eq!(
            watch(&gh_provider(runner), 785, "b").await.unwrap(),
            WatchOutcome::Green
        );
        let runner = Arc::new(ScriptedCommands::new().on("gh pr checks", 4, ""));
        assert!(watch(&gh_provider(runner), 785, "b").await.is_err());
    }

    #[tokio::test]
    async fn logs_are_fetched_once_per_run_and_capped() {
        let big = format!("{}END", "x".repeat(LOG_CAP + 10));
        let runner = Arc::new(ScriptedCommands::new().on("gh run view 42 --log-failed", 0, big));
        let p = gh_provider(runner.clone());
        let checks = [
            FailedCheck {
                name: "a".into(),
                run_id: Some("42".into()),
                log_url: None,
                conclusion_detail: None,
            },
            FailedCheck {
                name: "b".into(),
                run_id: Some("42".into()),
                log_url: None,
                conclusion_detail: None,
            },
        ];
        let logs = p.failed_logs(&checks).await.unwrap();
        assert_eq!(logs.len(), 2);
        assert_eq!(logs[0].log.len(), LOG_CAP);
        assert!(logs[0].log.ends_with("END"));
        assert_eq!(runner.calls().len(), 1);
        let missing = [FailedCheck {
            name: "c".into(),
            run_id: None,
            log_url: None,
            conclusion_detail: None,
        }];
        assert_eq!(
            p.failed_logs(&missing).await.unwrap_err().to_string(),
            "failed check `c` has no run id (neither `runId` nor a `/actions/runs/<id>/` logUrl)"
        );
    }

    #[tokio::test]
    async fn local_checks_run_through_the_shell_and_keep_failing_output() {
        let runner = Arc::new(
            ScriptedCommands::new()
                .on("cargo fmt --check", 1, "Diff in /r/src/lib.rs:1:\n")
                .on("cargo test", 0, "ok"),
        );
        let p = LocalProvider::new(
            runner.clone(),
            "/repo",
            LocalConfig {
                checks: vec!["cargo fmt --check".into(), "cargo test".into()],
                push: false,
                time_limit: None,
            },
        );
        let CheckRun::Failed(failed) = p.wait_for_checks().await.unwrap() else {
            panic!("expected a failure")
        };
        assert_eq!(failed.len(), 1);
        let logs = p.failed_logs(&failed).await.unwrap();
        assert_eq!(logs[0].log, "Diff in /r/src/lib.rs:1:\n");
        assert_eq!(runner.calls()[0].program, "sh");
        assert!(!p.pushes());
    }
}
