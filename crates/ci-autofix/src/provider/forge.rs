//! The provider over any [`Forge`]: a merge request's pipeline (GitLab)
//! or a fake forge's, polled like the GitHub provider polls checks.
//!
//! A poll reads the request (its head) and its newest pipeline. While a
//! pushed commit is awaited, a pipeline of another commit is not yet the
//! answer; a pipeline still running is pending; a finished one is green
//! unless a job that may not fail failed (GitLab: `allow_failure: false`,
//! the analogue of a required check). A head with no pipeline at all after
//! the grace period is "no checks". Logs are the failed jobs' traces (the
//! tail kept), re-runs are the forge's job retry, which answers the new
//! attempt: the wait is for that job.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use orchestrator_core::forge::{CiStatus, Forge, ForgeError, Job};

use super::{
    CheckCounts, CheckLog, CheckRun, CiProvider, GithubConfig, LOG_CAP, PrHead, ProviderError,
    RerunOutcome, keep_tail,
};
use crate::handoff::FailedCheck;

/// [`CiProvider`] over a [`Forge`]: the request's newest pipeline on its
/// head, the failed jobs that may not fail, their traces, job retries.
#[derive(Debug, Clone)]
pub struct ForgeProvider {
    forge: Arc<dyn Forge>,
    config: GithubConfig,
    seen: Arc<Mutex<Seen>>,
}

#[derive(Debug, Default)]
struct Seen {
    head: Option<PrHead>,
    /// The jobs of the last finished pipeline.
    jobs: Vec<Job>,
}

fn forge_error(what: &str, e: ForgeError) -> ProviderError {
    ProviderError::Command {
        command: what.to_owned(),
        status: None,
        stderr: e.to_string(),
    }
}

fn failed_check(pipeline: &str, job: &Job) -> FailedCheck {
    FailedCheck {
        name: job.name.clone(),
        run_id: Some(pipeline.to_owned()),
        log_url: job.web_url.clone(),
        conclusion_detail: job.failure_reason.clone(),
    }
}

impl ForgeProvider {
    /// A provider for request `config.pr` on `forge`, polling as `config` says.
    pub fn new(forge: Arc<dyn Forge>, config: GithubConfig) -> Self {
        Self {
            forge,
            config,
            seen: Arc::new(Mutex::new(Seen::default())),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn label(&self) -> String {
        self.forge.kind().request_label(self.config.pr)
    }

    async fn head(&self) -> Result<PrHead, ProviderError> {
        let cr = self
            .forge
            .change_request(self.config.pr)
            .await
            .map_err(|e| forge_error(&format!("read {}", self.label()), e))?;
        let (owner, repo) = cr
            .head_repo
            .rsplit_once('/')
            .map_or((String::new(), cr.head_repo.clone()), |(o, r)| {
                (o.to_owned(), r.to_owned())
            });
        let head = PrHead {
            number: cr.number,
            branch: cr.head_branch,
            oid: cr.head_sha,
            owner,
            repo,
            cross_repository: cr.cross_repository,
            maintainer_can_modify: cr.can_push,
            base_branch: cr.base_branch,
            head_ref: cr.head_ref,
            label: self.label(),
        };
        self.seen().head = Some(head.clone());
        Ok(head)
    }

    /// One poll: `None` while pending, `Some(None)` for no pipeline on the
    /// head, `Some(Some(run))` when finished.
    async fn poll(&self, want: Option<&str>) -> Result<Option<Option<CheckRun>>, ProviderError> {
        let head = self.head().await?;
        if want.is_some_and(|w| !w.eq_ignore_ascii_case(&head.oid)) {
            return Ok(None);
        }
        let pipeline = self
            .forge
            .pipeline(self.config.pr)
            .await
            .map_err(|e| forge_error(&format!("read the pipeline of {}", self.label()), e))?;
        let Some(p) = pipeline.filter(|p| p.sha.eq_ignore_ascii_case(&head.oid)) else {
            return Ok(Some(None));
        };
        if !p.status.is_finished() || p.jobs.iter().any(|j| !j.status.is_finished()) {
            return Ok(None);
        }
        let failed: Vec<FailedCheck> = p
            .failed_jobs()
            .into_iter()
            .map(|j| failed_check(&p.id, j))
            .collect();
        self.seen().jobs = p.jobs;
        Ok(Some(Some(if failed.is_empty() {
            CheckRun::Green
        } else {
            CheckRun::Failed(failed)
        })))
    }

    fn job_named(&self, name: &str) -> Option<Job> {
        self.seen().jobs.iter().find(|j| j.name == name).cloned()
    }
}

#[async_trait]
impl CiProvider for ForgeProvider {
    fn pushes(&self) -> bool {
        true
    }

    async fn wait_for_checks(&self, head: Option<&str>) -> Result<CheckRun, ProviderError> {
        let start = tokio::time::Instant::now();
        let mut empty_since: Option<tokio::time::Instant> = None;
        loop {
            match self.poll(head).await? {
                Some(Some(run)) => return Ok(run),
                Some(None) => {
                    let since = *empty_since.get_or_insert_with(tokio::time::Instant::now);
                    if since.elapsed() >= self.config.no_checks_grace {
                        let oid = self.seen().head.as_ref().map(|h| h.oid.clone());
                        return Ok(CheckRun::NoChecks {
                            head: oid.unwrap_or_default(),
                        });
                    }
                }
                None => empty_since = None,
            }
            if start.elapsed() + self.config.poll_interval > self.config.timeout {
                return Ok(CheckRun::TimedOut);
            }
            tokio::time::sleep(self.config.poll_interval).await;
        }
    }

    async fn failed_logs(&self, checks: &[FailedCheck]) -> Result<Vec<CheckLog>, ProviderError> {
        let mut logs = Vec::with_capacity(checks.len());
        for c in checks {
            let Some(job) = self.job_named(&c.name) else {
                logs.push(CheckLog::not_fixable(
                    &c.name,
                    format!("job `{}` is not in the pipeline last read", c.name),
                ));
                continue;
            };
            let log = self
                .forge
                .job_log(&job)
                .await
                .map_err(|e| forge_error(&format!("read the log of job {}", job.id), e))?;
            logs.push(CheckLog::new(&c.name, keep_tail(log, LOG_CAP)));
        }
        Ok(logs)
    }

    async fn diff(&self) -> Result<String, ProviderError> {
        self.forge
            .diff(self.config.pr)
            .await
            .map_err(|e| forge_error(&format!("read the diff of {}", self.label()), e))
    }

    /// `totalRequired`: the jobs that may not fail; `auxiliaryFailCount`:
    /// failed jobs that may.
    async fn check_counts(&self) -> Result<Option<CheckCounts>, ProviderError> {
        let seen = self.seen();
        if seen.jobs.is_empty() {
            return Ok(None);
        }
        Ok(Some(CheckCounts {
            total_required: seen.jobs.iter().filter(|j| !j.allow_failure).count() as u64,
            auxiliary_failed: seen
                .jobs
                .iter()
                .filter(|j| j.allow_failure && j.status == CiStatus::Failed)
                .count() as u64,
        }))
    }

    async fn pr_head(&self) -> Result<Option<PrHead>, ProviderError> {
        Ok(Some(self.head().await?))
    }

    fn seen_head(&self) -> Option<PrHead> {
        self.seen().head.clone()
    }

    /// The forge's retry of the job, then a wait for that new attempt.
    async fn rerun(&self, check: &FailedCheck) -> Result<RerunOutcome, ProviderError> {
        let Some(job) = self.job_named(&check.name) else {
            return Ok(RerunOutcome::Unsupported);
        };
        let retried = self
            .forge
            .retry_job(&job)
            .await
            .map_err(|e| forge_error(&format!("retry job {}", job.id), e))?;
        let start = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.config.poll_interval).await;
            let pipeline =
                self.forge.pipeline(self.config.pr).await.map_err(|e| {
                    forge_error(&format!("read the pipeline of {}", self.label()), e)
                })?;
            if let Some(p) = pipeline {
                let now = p.jobs.iter().find(|j| j.id == retried.id);
                match now.map(|j| j.status) {
                    Some(CiStatus::Success | CiStatus::Skipped) => return Ok(RerunOutcome::Passed),
                    Some(CiStatus::Failed | CiStatus::Canceled) => {
                        let again = now.cloned().unwrap_or(retried.clone());
                        let check = failed_check(&p.id, &again);
                        let mut seen = self.seen();
                        seen.jobs.retain(|j| j.name != again.name);
                        seen.jobs.push(again);
                        return Ok(RerunOutcome::Failed(check));
                    }
                    _ => {}
                }
            }
            if start.elapsed() + self.config.poll_interval > self.config.timeout {
                return Ok(RerunOutcome::TimedOut);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::conformance::forge::{self as std_forge, FAILED_JOB, FAILED_LOG_LINE};
    use orchestrator_core::forge::Pipeline;
    use std::time::Duration;

    fn config(pr: u64) -> GithubConfig {
        GithubConfig {
            pr,
            poll_interval: Duration::from_millis(10),
            timeout: Duration::from_secs(5),
            no_checks_grace: Duration::from_millis(50),
        }
    }

    #[tokio::test]
    async fn a_failed_pipeline_gives_its_failed_jobs_and_their_logs() {
        let sha = "a".repeat(40);
        let p = ForgeProvider::new(Arc::new(std_forge::standard_fake(&sha)), config(7));
        let CheckRun::Failed(failed) = p.wait_for_checks(Some(&sha)).await.unwrap() else {
            panic!("the standard pipeline failed")
        };
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].name, FAILED_JOB);
        assert_eq!(
            failed[0].conclusion_detail.as_deref(),
            Some("script_failure")
        );
        let logs = p.failed_logs(&failed).await.unwrap();
        assert!(logs[0].log.contains(FAILED_LOG_LINE));
        assert_eq!(
            p.check_counts().await.unwrap(),
            Some(CheckCounts {
                total_required: 2,
                auxiliary_failed: 0
            })
        );
        let head = p.pr_head().await.unwrap().unwrap();
        assert_eq!(
            (head.branch.as_str(), head.label.as_str()),
            ("feature", "PR #7")
        );
        let fork = ForgeProvider::new(Arc::new(std_forge::standard_fake(&sha)), config(8));
        let fork = fork.pr_head().await.unwrap().unwrap();
        assert!(fork.cross_repository && !fork.maintainer_can_modify);
        assert_eq!(
            (fork.owner.as_str(), fork.repo.as_str()),
            ("forker", "demo")
        );
    }

    #[tokio::test]
    async fn another_commits_pipeline_is_not_the_answer() {
        let sha = "a".repeat(40);
        let fake = Arc::new(std_forge::standard_fake(&sha));
        let p = ForgeProvider::new(Arc::clone(&fake) as Arc<dyn Forge>, config(7));
        // The pushed commit is not the head yet: pending until the limit.
        let short = GithubConfig {
            timeout: Duration::from_millis(100),
            ..config(7)
        };
        let waiting = ForgeProvider::new(Arc::clone(&fake) as Arc<dyn Forge>, short);
        assert_eq!(
            waiting
                .wait_for_checks(Some(&"b".repeat(40)))
                .await
                .unwrap(),
            CheckRun::TimedOut
        );
        // The head moved and no pipeline ran on it: no checks after the grace.
        fake.set_head(7, &"b".repeat(40));
        assert_eq!(
            p.wait_for_checks(Some(&"b".repeat(40))).await.unwrap(),
            CheckRun::NoChecks {
                head: "b".repeat(40)
            }
        );
        fake.set_pipeline(
            7,
            Pipeline {
                id: "101".into(),
                sha: "b".repeat(40),
                status: CiStatus::Success,
                jobs: Vec::new(),
            },
        );
        assert_eq!(
            p.wait_for_checks(Some(&"b".repeat(40))).await.unwrap(),
            CheckRun::Green
        );
    }

    #[tokio::test]
    async fn a_rerun_waits_for_the_new_attempt() {
        let sha = "a".repeat(40);
        let fake = Arc::new(std_forge::standard_fake(&sha));
        let p = ForgeProvider::new(Arc::clone(&fake) as Arc<dyn Forge>, config(7));
        let CheckRun::Failed(failed) = p.wait_for_checks(None).await.unwrap() else {
            panic!("failed")
        };
        // The fake's retry stays pending: the wait ends at the limit.
        let short = ForgeProvider::new(
            Arc::clone(&fake) as Arc<dyn Forge>,
            GithubConfig {
                timeout: Duration::from_millis(100),
                ..config(7)
            },
        );
        let _ = short.wait_for_checks(None).await.unwrap();
        assert_eq!(
            short.rerun(&failed[0]).await.unwrap(),
            RerunOutcome::TimedOut
        );
        let unknown = FailedCheck {
            name: "nope".into(),
            run_id: None,
            log_url: None,
            conclusion_detail: None,
        };
        assert_eq!(p.rerun(&unknown).await.unwrap(), RerunOutcome::Unsupported);
    }
}
