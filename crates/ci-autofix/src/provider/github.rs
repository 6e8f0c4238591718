//! [`GithubProvider`]: a pull request's checks through the `gh` CLI.
//!
//! - One poll is `gh pr view <N> --json` [`PR_VIEW_FIELDS`]: the head
//!   ([`PrHead`]) and its checks in one answer, de-duplicated to the latest
//!   attempt of each (`rollup`). After a push the poll waits for the head
//!   to be the pushed commit. A head with no check at all is pending for
//!   [`GithubConfig::no_checks_grace`], then [`CheckRun::NoChecks`].
//! - Once no check is pending, `gh pr checks <N> --required` says which
//!   are required (its tab-separated lines, name first: Debian's gh 2.23
//!   has no `--json` there). Its "no required checks reported" (exit 1)
//!   means the base branch requires none: then every reported check
//!   counts, and the run is told so once. Required checks that have not
//!   reported at all are missing from that list (cli/cli#8855), so the
//!   base branch's protection is read once
//!   (`gh api repos/{owner}/{repo}/branches/<base>/protection/required_status_checks`)
//!   and a required context not reported yet keeps the poll pending.
//! - Logs: `gh run view --job <id> --log-failed` per failed job (the job
//!   id from the check's link), so an optional job's log never reaches the
//!   classifier; a check without a job is a commit status of another CI,
//!   not fixable from a log. Re-runs: `gh run rerun --job <id>`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::command::{CommandOutput, CommandRunner, CommandSpec};

use super::rollup::{Check, PR_VIEW_FIELDS, PrHead, PrView};
use super::{
    CheckCounts, CheckLog, CheckRun, CiProvider, LOG_CAP, ProviderError, RerunOutcome, keep_tail,
    run_spec, stdout_of_success,
};
use crate::handoff::{FailedCheck, job_id_from_url};

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
    /// How long a head may show no check at all before the wait ends with
    /// [`CheckRun::NoChecks`] (CI may take a moment to start).
    pub no_checks_grace: Duration,
}

impl GithubConfig {
    /// Settings for `pr` with a 10 s poll, a 30 min limit and a 2 min grace
    /// for a head without checks.
    pub fn new(pr: u64) -> Self {
        Self {
            pr,
            poll_interval: Duration::from_secs(10),
            timeout: Duration::from_secs(30 * 60),
            no_checks_grace: Duration::from_secs(120),
        }
    }
}

/// [`CiProvider`] over the `gh` CLI.
#[derive(Debug, Clone)]
pub struct GithubProvider {
    runner: Arc<dyn CommandRunner>,
    repo_dir: PathBuf,
    config: GithubConfig,
    state: Arc<Mutex<Seen>>,
}

/// What the provider has seen so far in the run.
#[derive(Debug, Default)]
struct Seen {
    /// The head at the last poll.
    head: Option<PrHead>,
    /// The required names and every check of the head at the last poll
    /// that found none pending (`None` required: none is).
    finished: Option<(Option<BTreeSet<String>>, Vec<Check>)>,
    /// The base branch's required contexts (read once).
    protected: Option<Vec<String>>,
    /// Notices not handed out yet, and every one ever said.
    notices: Vec<String>,
    said: BTreeSet<String>,
}

/// What `gh pr checks --required` said.
enum Required {
    /// These checks are required.
    Names(BTreeSet<String>),
    /// The base branch requires none.
    Nothing,
    /// gh saw no checks yet (a race with the poll): pending.
    NotYet,
}

/// One poll's result.
enum Poll {
    Pending,
    Empty(String),
    Done(CheckRun),
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
            state: Arc::new(Mutex::new(Seen::default())),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says `message` once in the run.
    fn notice(&self, message: String) {
        let mut seen = self.seen();
        if seen.said.insert(message.clone()) {
            seen.notices.push(message);
        }
    }

    async fn gh_output(&self, args: Vec<String>) -> Result<(String, CommandOutput), ProviderError> {
        run_spec(
            self.runner.as_ref(),
            CommandSpec::new("gh", args, self.repo_dir.clone()),
        )
        .await
    }

    async fn gh(&self, args: &[&str]) -> Result<String, ProviderError> {
        let (command, out) = self.gh_output(strings(args)).await?;
        stdout_of_success(command, out)
    }

    /// The PR's head and its checks (latest attempts).
    async fn pr_view(&self) -> Result<(PrHead, Vec<Check>), ProviderError> {
        let pr = self.config.pr.to_string();
        let fields = PR_VIEW_FIELDS.join(",");
        let command = format!("gh pr view {pr} --json {fields}");
        let text = self.gh(&["pr", "view", &pr, "--json", &fields]).await?;
        let view: PrView = serde_json::from_str(&text).map_err(|e| ProviderError::Parse {
            command,
            message: e.to_string(),
        })?;
        let head = view.head(self.config.pr);
        self.seen().head = Some(head.clone());
        Ok((head, view.checks()))
    }

    /// `gh pr checks <N> --required`: its lines off a terminal are
    /// tab-separated, the name first (2.23 and later alike; gh exits 1 or 8
    /// while checks fail or are pending, the lines are what counts).
    async fn required(&self) -> Result<Required, ProviderError> {
        let pr = self.config.pr.to_string();
        let (command, out) = self
            .gh_output(strings(&["pr", "checks", &pr, "--required"]))
            .await?;
        if out.stdout.trim().is_empty() && !out.success() {
            if out.stderr.contains("no required checks reported") {
                return Ok(Required::Nothing);
            }
            if out.stderr.contains("no checks reported") {
                return Ok(Required::NotYet);
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
        Ok(Required::Names(names))
    }

    /// The contexts the base branch's protection requires, read once: a
    /// branch without protection (404) requires none; a protection we may
    /// not read (403) is said once and counts as none.
    async fn protected(&self, base: &str) -> Result<Vec<String>, ProviderError> {
        if let Some(p) = self.seen().protected.clone() {
            return Ok(p);
        }
        let path =
            format!("repos/{{owner}}/{{repo}}/branches/{base}/protection/required_status_checks");
        let (command, out) = self.gh_output(strings(&["api", &path])).await?;
        let contexts = if out.success() {
            let v: serde_json::Value =
                serde_json::from_str(&out.stdout).map_err(|e| ProviderError::Parse {
                    command,
                    message: e.to_string(),
                })?;
            v["contexts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect()
        } else {
            if !out.stderr.contains("(HTTP 404)") {
                self.notice(format!(
                    "could not read the protection of branch `{base}` ({}); checks required \
                     but not reported yet cannot be waited for",
                    out.stderr.trim()
                ));
            }
            Vec::new()
        };
        self.seen().protected = Some(contexts.clone());
        Ok(contexts)
    }

    /// One poll (see the module docs).
    async fn poll(&self, head: Option<&str>) -> Result<Poll, ProviderError> {
        let (pr_head, checks) = self.pr_view().await?;
        if head.is_some_and(|h| !h.eq_ignore_ascii_case(&pr_head.oid)) {
            return Ok(Poll::Pending);
        }
        if checks.is_empty() {
            return Ok(Poll::Empty(pr_head.oid));
        }
        if checks.iter().any(|c| c.bucket == "pending") {
            return Ok(Poll::Pending);
        }
        let required = match self.required().await? {
            Required::NotYet => return Ok(Poll::Pending),
            Required::Nothing => None,
            Required::Names(names) => Some(names),
        };
        let protected = self.protected(&pr_head.base_branch).await?;
        if protected
            .iter()
            .any(|p| !checks.iter().any(|c| &c.name == p))
        {
            return Ok(Poll::Pending);
        }
        if required.is_none() {
            self.notice(format!(
                "branch `{}` requires no checks: every check reported on PR #{} counts",
                pr_head.base_branch, self.config.pr
            ));
        }
        let counts = |c: &Check| required.as_ref().is_none_or(|r| r.contains(&c.name));
        let failed: Vec<FailedCheck> = checks
            .iter()
            .filter(|c| counts(c) && c.failed())
            .map(Check::failed_check)
            .collect();
        self.seen().finished = Some((required, checks));
        Ok(Poll::Done(if failed.is_empty() {
            CheckRun::Green
        } else {
            CheckRun::Failed(failed)
        }))
    }

    /// The log of one failed check: per job when its link names one.
    async fn job_log(&self, check: &FailedCheck) -> Result<Option<String>, ProviderError> {
        let job = check.log_url.as_deref().and_then(job_id_from_url);
        let args: Vec<&str> = match (&job, &check.run_id) {
            (Some(job), _) => vec!["run", "view", "--job", job, "--log-failed"],
            (None, Some(run)) => vec!["run", "view", run, "--log-failed"],
            (None, None) => return Ok(None),
        };
        Ok(Some(keep_tail(self.gh(&args).await?, LOG_CAP)))
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

#[async_trait]
impl CiProvider for GithubProvider {
    fn pushes(&self) -> bool {
        true
    }

    async fn wait_for_checks(&self, head: Option<&str>) -> Result<CheckRun, ProviderError> {
        let start = tokio::time::Instant::now();
        let mut empty_since: Option<(String, tokio::time::Instant)> = None;
        loop {
            match self.poll(head).await? {
                Poll::Done(run) => return Ok(run),
                Poll::Empty(oid) => {
                    let since = match &empty_since {
                        Some((o, t)) if *o == oid => *t,
                        _ => {
                            let now = tokio::time::Instant::now();
                            empty_since = Some((oid.clone(), now));
                            now
                        }
                    };
                    if since.elapsed() >= self.config.no_checks_grace {
                        return Ok(CheckRun::NoChecks { head: oid });
                    }
                }
                Poll::Pending => empty_since = None,
            }
            if start.elapsed() + self.config.poll_interval > self.config.timeout {
                return Ok(CheckRun::TimedOut);
            }
            tokio::time::sleep(self.config.poll_interval).await;
        }
    }

    async fn failed_logs(&self, checks: &[FailedCheck]) -> Result<Vec<CheckLog>, ProviderError> {
        let mut logs = Vec::with_capacity(checks.len());
        let mut fetched: BTreeMap<String, Option<String>> = BTreeMap::new();
        for c in checks {
            let key = format!("{:?}|{:?}", c.log_url, c.run_id);
            let log = match fetched.get(&key) {
                Some(log) => log.clone(),
                None => {
                    let log = self.job_log(c).await?;
                    fetched.insert(key, log.clone());
                    log
                }
            };
            logs.push(match log {
                Some(log) => CheckLog::new(&c.name, log),
                None => CheckLog::not_fixable(
                    &c.name,
                    format!(
                        "not fixable from a log: `{}` is a commit status of another CI, not a \
                         GitHub Actions job{}",
                        c.name,
                        c.log_url
                            .as_deref()
                            .map(|u| format!(" (see {u})"))
                            .unwrap_or_default()
                    ),
                ),
            });
        }
        Ok(logs)
    }

    async fn diff(&self) -> Result<String, ProviderError> {
        self.gh(&["pr", "diff", &self.config.pr.to_string()]).await
    }

    /// From the last finished poll: `totalRequired` (every check when none
    /// is required), and as `auxiliaryFailCount` the failed (or cancelled)
    /// checks that are not required.
    async fn check_counts(&self) -> Result<Option<CheckCounts>, ProviderError> {
        let seen = self.seen();
        Ok(seen.finished.as_ref().map(|(required, checks)| {
            let counts = |c: &Check| required.as_ref().is_none_or(|r| r.contains(&c.name));
            CheckCounts {
                total_required: required.as_ref().map_or(checks.len(), BTreeSet::len) as u64,
                auxiliary_failed: checks.iter().filter(|c| c.failed() && !counts(c)).count() as u64,
            }
        }))
    }

    async fn pr_head(&self) -> Result<Option<PrHead>, ProviderError> {
        Ok(Some(self.pr_view().await?.0))
    }

    fn seen_head(&self) -> Option<PrHead> {
        self.seen().head.clone()
    }

    fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut self.seen().notices)
    }

    /// `gh run rerun --job <id>`, then polls until that check's newest
    /// attempt is another job and has finished.
    async fn rerun(&self, check: &FailedCheck) -> Result<RerunOutcome, ProviderError> {
        let Some(job) = check.log_url.as_deref().and_then(job_id_from_url) else {
            return Ok(RerunOutcome::Unsupported);
        };
        self.gh(&["run", "rerun", "--job", &job]).await?;
        let start = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.config.poll_interval).await;
            let (_, checks) = self.pr_view().await?;
            let now = checks.iter().find(|c| {
                c.name == check.name && job_id_from_url(&c.link).is_some_and(|j| j != job)
            });
            match now {
                Some(c) if c.bucket == "pass" || c.bucket == "skipping" => {
                    return Ok(RerunOutcome::Passed);
                }
                Some(c) if c.failed() => return Ok(RerunOutcome::Failed(c.failed_check())),
                _ => {}
            }
            if start.elapsed() + self.config.poll_interval > self.config.timeout {
                return Ok(RerunOutcome::TimedOut);
            }
        }
    }
}
