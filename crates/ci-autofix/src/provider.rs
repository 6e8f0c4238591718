//! Where failed checks and their logs come from: [`CiProvider`].
//!
//! - [`GithubProvider`] drives the `gh` CLI through a [`CommandRunner`]:
//!   `gh run view <id> --log-failed` (capped at [`LOG_CAP`], the tail kept),
//!   `gh pr diff <N>`, and a poll of the PR's head and checks until none is
//!   pending: `gh pr view <N> --json headRefOid,statusCheckRollup` (one
//!   answer for both, so the checks read are the head's). After a push the
//!   poll waits for the head to be the pushed commit — until GitHub moves
//!   the PR head it still shows the old head's (failed) checks — and a head
//!   with no checks yet is pending, not green; both within the time limit.
//!   Which checks are required comes from `gh pr checks <N> --required`
//!   (its tab-separated lines, name first: Debian's gh 2.23 has no `--json`
//!   there) once the head's checks are done (its "no checks reported" is
//!   pending too); the failed checks that are not required are counted
//!   for a watcher handoff (`auxiliaryFailCount`).
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

mod local;
pub use local::*;

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
    /// Local mode has nothing to diff the working change against.
    #[error(
        "no base to diff the working change against: the branch has no upstream ({stderr}); pass --base <REF>"
    )]
    NoBase {
        /// What `git rev-parse @{{upstream}}` said.
        stderr: String,
    },
    /// A `--base` that git would read as an option.
    #[error("--base {base:?} is not a ref (it starts with `-`)")]
    BadBase {
        /// The value given.
        base: String,
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

    /// Runs or waits for the required checks. With `head` (the commit just
    /// pushed), a provider that reads a remote CI waits until the results
    /// are that commit's; local checks run on the tree as it is.
    async fn wait_for_checks(&self, head: Option<&str>) -> Result<CheckRun, ProviderError>;

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

    /// The command lines of the checks when the provider runs them itself
    /// (local mode), so the fixing agent may be allowed to run them; empty
    /// for a remote CI (the default), whose commands are not known here.
    fn check_commands(&self) -> Vec<String> {
        Vec::new()
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
    /// Time between two polls of the PR's checks.
    pub poll_interval: Duration,
    /// How long to wait for pending checks (and for the PR head to be the
    /// pushed commit).
    pub timeout: Duration,
}

/// The fields of `gh pr view --json` the poll reads.
pub const PR_VIEW_FIELDS: [&str; 2] = ["headRefOid", "statusCheckRollup"];

/// [`CiProvider`] over the `gh` CLI.
#[derive(Debug, Clone)]
pub struct GithubProvider {
    runner: Arc<dyn CommandRunner>,
    repo_dir: PathBuf,
    config: GithubConfig,
    /// The required check names and every check of the head at the last
    /// poll that found none pending.
    last: Arc<Mutex<Option<Finished>>>,
}

/// What the last finished poll saw.
#[derive(Debug, Clone)]
struct Finished {
    required: BTreeSet<String>,
    checks: Vec<Check>,
}

/// One check of the head, as `gh pr checks` would show it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Check {
    name: String,
    /// `pass`, `fail`, `pending`, `skipping` or `cancel` (gh's buckets).
    bucket: &'static str,
    link: String,
}

/// `gh pr view <N> --json headRefOid,statusCheckRollup`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PrView {
    head_ref_oid: String,
    #[serde(default)]
    status_check_rollup: Option<Vec<RollupEntry>>,
}

/// One entry of `statusCheckRollup`: a check run (`name`, `status`,
/// `conclusion`, `detailsUrl`) or a commit status (`context`, `state`,
/// `targetUrl`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RollupEntry {
    #[serde(rename = "__typename", default)]
    typename: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    conclusion: String,
    #[serde(default)]
    details_url: String,
    #[serde(default)]
    context: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    target_url: String,
}

impl RollupEntry {
    /// The check as `gh pr checks` buckets it.
    fn check(&self) -> Check {
        let (name, link, state) = if self.typename == "StatusContext" {
            (&self.context, &self.target_url, self.state.as_str())
        } else if self.status.eq_ignore_ascii_case("COMPLETED") {
            (&self.name, &self.details_url, self.conclusion.as_str())
        } else {
            (&self.name, &self.details_url, self.status.as_str())
        };
        let bucket = match state.to_ascii_uppercase().as_str() {
            "SUCCESS" => "pass",
            "SKIPPED" | "NEUTRAL" => "skipping",
            "CANCELLED" => "cancel",
            "ERROR" | "FAILURE" | "TIMED_OUT" | "ACTION_REQUIRED" | "STARTUP_FAILURE" => "fail",
            // EXPECTED, REQUESTED, WAITING, QUEUED, PENDING, IN_PROGRESS, STALE, …
            _ => "pending",
        };
        Check {
            name: name.clone(),
            bucket,
            link: link.clone(),
        }
    }
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
            last: Arc::new(Mutex::new(None)),
        }
    }

    /// Runs `gh args…`; `Err` when it cannot run, else its output whatever
    /// the exit status, with the command line for messages.
    async fn gh_output(
        &self,
        args: Vec<String>,
    ) -> Result<(String, orchestrator_core::command::CommandOutput), ProviderError> {
        run_spec(
            self.runner.as_ref(),
            CommandSpec::new("gh", args, self.repo_dir.clone()),
        )
        .await
    }

    async fn gh(&self, args: Vec<String>) -> Result<String, ProviderError> {
        let (command, out) = self.gh_output(args).await?;
        stdout_of_success(command, out)
    }

    /// The PR's head commit and its checks.
    async fn pr_view(&self) -> Result<(String, Vec<Check>), ProviderError> {
        let args = vec![
            "pr".into(),
            "view".into(),
            self.config.pr.to_string(),
            "--json".into(),
            PR_VIEW_FIELDS.join(","),
        ];
        let (command, out) = self.gh_output(args).await?;
        if !out.success() {
            return Err(ProviderError::Command {
                command,
                status: out.exit_code,
                stderr: out.stderr.trim().to_owned(),
            });
        }
        let view: PrView = serde_json::from_str(&out.stdout).map_err(|e| ProviderError::Parse {
            command,
            message: e.to_string(),
        })?;
        let checks = view
            .status_check_rollup
            .unwrap_or_default()
            .iter()
            .map(RollupEntry::check)
            .collect();
        Ok((view.head_ref_oid, checks))
    }

    /// The names of the required checks: `gh pr checks <N> --required`,
    /// whose output off a terminal is one tab-separated line per check, the
    /// name first — the same in Debian's gh 2.23 (which has no `--json` for
    /// `pr checks`) and in later releases (which add columns after it).
    /// `gh` exits 8 while checks are pending and 1 when some failed, the
    /// lines on stdout are what counts; `None` when it reports no checks yet
    /// ("no checks reported", "no required checks reported").
    async fn required_names(&self) -> Result<Option<BTreeSet<String>>, ProviderError> {
        let args = vec![
            "pr".into(),
            "checks".into(),
            self.config.pr.to_string(),
            "--required".into(),
        ];
        let (command, out) = self.gh_output(args).await?;
        if out.stdout.trim().is_empty() && !out.success() {
            if out.exit_code == Some(1) && out.stderr.contains("checks reported") {
                return Ok(None);
            }
            return Err(ProviderError::Command {
                command,
                status: out.exit_code,
                stderr: out.stderr.trim().to_owned(),
            });
        }
        let mut names = BTreeSet::new();
        for (i, line) in out.stdout.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let Some((name, _)) = line.split_once('\t') else {
                return Err(ProviderError::Parse {
                    command,
                    message: format!(
                        "line {} is not `name<TAB>status<TAB>…`: {:?}",
                        i + 1,
                        orchestrator_core::limits::excerpt(line)
                    ),
                });
            };
            names.insert(name.trim().to_owned());
        }
        Ok(Some(names))
    }

    /// One poll: `None` while the PR head is not `head` (when given), it has
    /// no checks yet, or a check — or a required one not yet reported — is
    /// pending.
    async fn poll(&self, head: Option<&str>) -> Result<Option<CheckRun>, ProviderError> {
        let (pr_head, checks) = self.pr_view().await?;
        if head.is_some_and(|h| !h.eq_ignore_ascii_case(&pr_head)) {
            return Ok(None);
        }
        if checks.is_empty() || checks.iter().any(|c| c.bucket == "pending") {
            return Ok(None);
        }
        let Some(required) = self.required_names().await? else {
            return Ok(None);
        };
        if required
            .iter()
            .any(|r| !checks.iter().any(|c| &c.name == r))
        {
            return Ok(None);
        }
        let failed: Vec<FailedCheck> = checks
            .iter()
            .filter(|c| required.contains(&c.name) && is_failure(c.bucket))
            .map(|c| FailedCheck {
                name: c.name.clone(),
                run_id: run_id_from_url(&c.link),
                log_url: (!c.link.is_empty()).then(|| c.link.clone()),
                conclusion_detail: None,
            })
            .collect();
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(Finished { required, checks });
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

    async fn wait_for_checks(&self, head: Option<&str>) -> Result<CheckRun, ProviderError> {
        let start = tokio::time::Instant::now();
        loop {
            if let Some(run) = self.poll(head).await? {
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

    /// From the last finished poll: `totalRequired`, and as
    /// `auxiliaryFailCount` the head's failed (or cancelled) checks whose
    /// name is not a required check's.
    async fn check_counts(&self) -> Result<Option<CheckCounts>, ProviderError> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        Ok(last.as_ref().map(|f| CheckCounts {
            total_required: f.required.len() as u64,
            auxiliary_failed: f
                .checks
                .iter()
                .filter(|c| is_failure(c.bucket) && !f.required.contains(&c.name))
                .count() as u64,
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
    Ok(match provider.wait_for_checks(None).await? {
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

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::command::CommandOutput;
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

    /// `gh pr view --json headRefOid,statusCheckRollup` for `head` with
    /// check runs `(name, status, conclusion)` and one commit status.
    fn view(head: &str, runs: &[(&str, &str, &str)]) -> String {
        let mut rollup: Vec<serde_json::Value> = runs
            .iter()
            .enumerate()
            .map(|(i, (name, status, conclusion))| {
                serde_json::json!({
                    "__typename": "CheckRun",
                    "name": name,
                    "status": status,
                    "conclusion": conclusion,
                    "detailsUrl": format!("https://github.com/o/r/actions/runs/{}/job/9", 100 + i),
                    "workflowName": "ci",
                })
            })
            .collect();
        if !runs.is_empty() {
            rollup.push(serde_json::json!({
                "__typename": "StatusContext",
                "context": "ci/legacy",
                "state": "SUCCESS",
                "targetUrl": "https://ci.example/1",
            }));
        }
        serde_json::json!({"headRefOid": head, "statusCheckRollup": rollup}).to_string()
    }

    const VIEW: &str = "gh pr view 785 --json headRefOid,statusCheckRollup";
    const REQUIRED: &str = "gh pr checks 785 --required";

    fn no_checks() -> Result<CommandOutput, orchestrator_core::command::CommandError> {
        Ok(CommandOutput {
            exit_code: Some(1),
            stderr: "no checks reported on the 'feat/x' branch\n".into(),
            ..CommandOutput::default()
        })
    }

    #[tokio::test(start_paused = true)]
    async fn watch_polls_until_no_check_is_pending() {
        let pending = view(
            "abc",
            &[("Build", "IN_PROGRESS", ""), ("Lint", "QUEUED", "")],
        );
        // The two required checks, a failed and a cancelled optional one, a
        // passing and a skipped optional one.
        let done = view(
            "abc",
            &[
                ("Build", "COMPLETED", "SUCCESS"),
                ("Lint", "COMPLETED", "FAILURE"),
                ("Coverage", "COMPLETED", "FAILURE"),
                ("Bench", "COMPLETED", "CANCELLED"),
                ("Docs", "COMPLETED", "SUCCESS"),
                ("Deploy", "COMPLETED", "SKIPPED"),
            ],
        );
        let runner = Arc::new(
            ScriptedCommands::new()
                .on(VIEW, 0, pending)
                .on(VIEW, 0, done)
                .on(
                    REQUIRED,
                    1,
                    "Build\tfail\t1m2s\thttps://ci/1\nLint\tpass\t9s\thttps://ci/2\n",
                ),
        );
        let out = watch(&gh_provider(runner.clone()), 785, "feat/x")
            .await
            .unwrap();
        let WatchOutcome::Failed(h) = &out else {
            panic!("{out:?}")
        };
        assert_eq!(out.exit_code(), 2);
        assert_eq!(h.failed_checks.len(), 1);
        assert_eq!(h.failed_checks[0].name, "Lint");
        assert_eq!(h.failed_checks[0].run_id.as_deref(), Some("101"));
        assert_eq!((h.total_required, h.auxiliary_fail_count), (2, 2));
        let calls: Vec<String> = runner.calls().iter().map(CommandSpec::display).collect();
        assert_eq!(calls, [VIEW, VIEW, REQUIRED]);
    }

    /// Right after a push the PR still shows the old head and its failed
    /// checks, then the new head without checks, then checks that `gh pr
    /// checks` does not report yet: all pending, until the new head's
    /// checks are done.
    #[tokio::test(start_paused = true)]
    async fn after_a_push_the_old_heads_checks_and_no_checks_yet_are_pending() {
        let runner = Arc::new(
            ScriptedCommands::new()
                .on(VIEW, 0, view("old", &[("Lint", "COMPLETED", "FAILURE")]))
                .on(VIEW, 0, view("NEW", &[]))
                .on(VIEW, 0, view("NEW", &[("Lint", "COMPLETED", "SUCCESS")]))
                .on_output(REQUIRED, no_checks())
                .on(REQUIRED, 0, "Lint\tpass\t9s\thttps://ci/2\n"),
        );
        let p = gh_provider(runner.clone());
        assert_eq!(
            p.wait_for_checks(Some("new")).await.unwrap(),
            CheckRun::Green
        );
        let calls: Vec<String> = runner.calls().iter().map(CommandSpec::display).collect();
        assert_eq!(calls, [VIEW, VIEW, VIEW, REQUIRED, VIEW, REQUIRED]);

        // Without a head to wait for, the first finished poll counts.
        let runner = Arc::new(
            ScriptedCommands::new()
                .on(VIEW, 0, view("old", &[("Lint", "COMPLETED", "FAILURE")]))
                .on(REQUIRED, 1, "Lint\tfail\t9s\thttps://ci/2\n"),
        );
        let p = gh_provider(runner);
        assert!(matches!(
            p.wait_for_checks(None).await.unwrap(),
            CheckRun::Failed(f) if f[0].name == "Lint"
        ));

        // Output that is not gh's tab-separated lines is an error naming the
        // line, not an empty set of required checks.
        let runner = Arc::new(
            ScriptedCommands::new()
                .on(VIEW, 0, view("old", &[("Lint", "COMPLETED", "FAILURE")]))
                .on(
                    REQUIRED,
                    0,
                    "Lint\tpass\t9s\thttps://ci/2\nsomething else\n",
                ),
        );
        let err = gh_provider(runner).wait_for_checks(None).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("line 2 is not `name<TAB>status<TAB>…`: \"something else\""),
            "{err}"
        );

        // A head that never moves, or never gets checks: pending until the
        // time limit, never an error.
        for stuck in [
            view("old", &[("Lint", "COMPLETED", "FAILURE")]),
            view("new", &[]),
        ] {
            let runner = Arc::new(ScriptedCommands::new().on(VIEW, 0, stuck));
            let p = gh_provider(runner.clone());
            assert_eq!(
                p.wait_for_checks(Some("new")).await.unwrap(),
                CheckRun::TimedOut
            );
            assert_eq!(
                runner.calls().len(),
                7,
                "a poll every 10 s, from 0 s to 60 s"
            );
        }
        let runner = Arc::new(
            ScriptedCommands::new()
                .on(VIEW, 0, view("new", &[("Lint", "COMPLETED", "SUCCESS")]))
                .on_output(REQUIRED, no_checks()),
        );
        assert_eq!(
            gh_provider(runner)
                .wait_for_checks(Some("new"))
                .await
                .unwrap(),
            CheckRun::TimedOut
        );
    }

    #[tokio::test]
    async fn counts_need_a_finished_poll_and_gh_failures_are_errors() {
        let runner = Arc::new(ScriptedCommands::new().on(VIEW, 4, ""));
        let p = gh_provider(runner.clone());
        assert_eq!(p.check_counts().await.unwrap(), None, "no poll yet");
        assert!(runner.calls().is_empty());
        let err = watch(&p, 785, "b").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "`gh pr view 785 --json headRefOid,statusCheckRollup` failed with exit status 4: "
        );
        let runner = Arc::new(
            ScriptedCommands::new()
                .on(VIEW, 0, view("a", &[("Lint", "COMPLETED", "SUCCESS")]))
                .on_output(
                    REQUIRED,
                    Ok(CommandOutput {
                        exit_code: Some(1),
                        stderr: "HTTP 401: Bad credentials\n".into(),
                        ..CommandOutput::default()
                    }),
                ),
        );
        let err = watch(&gh_provider(runner), 785, "b").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "`gh pr checks 785 --required` failed with exit status 1: HTTP 401: Bad credentials"
        );
        let runner = Arc::new(ScriptedCommands::new().on(VIEW, 0, "{\"headRefOid\": 7}"));
        let err = watch(&gh_provider(runner), 785, "b").await.unwrap_err();
        assert!(
            err.to_string().starts_with(
                "could not parse the output of `gh pr view 785 --json headRefOid,statusCheckRollup`: invalid type"
            ),
            "{err}"
        );
        // Local checks: every configured check is required.
        let local = LocalProvider::new(
            Arc::new(ScriptedCommands::new()),
            "/repo",
            LocalConfig {
                checks: vec!["a".into(), "b".into(), "c".into()],
                base: None,
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
        let pending = view("a", &[("Lint", "IN_PROGRESS", "")]);
        let runner = Arc::new(ScriptedCommands::new().on(VIEW, 0, pending));
        let out = watch(&gh_provider(runner), 785, "b").await.unwrap();
        assert_eq!((out.clone(), out.exit_code()), (WatchOutcome::TimedOut, 3));
        let runner = Arc::new(
            ScriptedCommands::new()
                .on(VIEW, 0, view("a", &[("Lint", "COMPLETED", "SUCCESS")]))
                .on(REQUIRED, 0, "Lint\tpass\t9s\thttps://ci/2\n"),
        );
        assert_eq!(
            watch(&gh_provider(runner), 785, "b").await.unwrap(),
            WatchOutcome::Green
        );
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
                base: None,
                push: false,
                time_limit: None,
            },
        );
        let CheckRun::Failed(failed) = p.wait_for_checks(None).await.unwrap() else {
            panic!("expected a failure")
        };
        assert_eq!(failed.len(), 1);
        let logs = p.failed_logs(&failed).await.unwrap();
        assert_eq!(logs[0].log, "Diff in /r/src/lib.rs:1:\n");
        assert_eq!(runner.calls()[0].program, "sh");
        assert!(!p.pushes());
    }
}
