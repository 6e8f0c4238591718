//! [`GithubForge`]: the [`Forge`] over the real `gh` CLI (`gh api`), with
//! the user's own `gh auth` (or `GH_TOKEN`).
//!
//! The routes each call makes are listed in the `forge` module docs; the
//! documents and wire shapes are in `github_wire`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::command::{CommandRunner, CommandSpec};
use orchestrator_core::forge::{
    ChangeRequest, CiStatus, Forge, ForgeError, ForgeKind, Job, NewReview, Pipeline, ReviewThread,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::github_wire::{
    self as wire, CHECKS_QUERY, ChecksOf, Data, PULL_QUERY, PullRepo, RESOLVE_MUTATION, RepoOf,
    RestJob, RestJobs, THREADS_QUERY, ThreadsOf, WirePull, WireThread, rest_job, review_comment,
    thread,
};
use super::remote::GitlabLocation;

/// A GitHub host and a repository on it, read from a git remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubLocation {
    /// The host gh is told (`github.com`, a GitHub Enterprise host).
    pub host: String,
    /// `owner/name`.
    pub repo: String,
}

impl GithubLocation {
    /// The location of git remote `url` (HTTPS, `ssh://` or scp-like
    /// `git@host:owner/name`; userinfo, ports and `.git` dropped).
    pub fn from_remote(url: &str) -> Result<Self, ForgeError> {
        let bad = |why: &str| {
            ForgeError::Config(format!(
                "cannot read a GitHub host and repository from the remote URL {url:?}: {why}"
            ))
        };
        // The same reading as GitLab's (one rule for remotes), then
        // GitHub's: exactly `owner/name`, the host without a port.
        let at = GitlabLocation::from_remote(url).map_err(|_| bad("expected host/owner/name"))?;
        let host = at.instance.split_once("://").map_or("", |(_, h)| h);
        let host = host.split(':').next().unwrap_or_default();
        if at.project.split('/').count() != 2 {
            return Err(bad("a GitHub repository is `owner/name`"));
        }
        Ok(Self {
            host: host.to_owned(),
            repo: at.project,
        })
    }

    fn owner_name(&self) -> (&str, &str) {
        self.repo.split_once('/').unwrap_or((&self.repo, ""))
    }
}

/// Whether git remote `url` is on GitHub: its host is `github.com`,
/// `github.localhost`, names GitHub, or is `gh_host` (`$GH_HOST`, a GitHub
/// Enterprise host gh is pointed at).
pub fn is_github_remote(url: &str, gh_host: Option<&str>) -> bool {
    let Ok(at) = GithubLocation::from_remote(url) else {
        return false;
    };
    let host = at.host.to_ascii_lowercase();
    host.contains("github")
        || gh_host.is_some_and(|h| !h.trim().is_empty() && h.trim().eq_ignore_ascii_case(&host))
}

/// [`Forge`] over `gh api` (the routes are listed in the
/// [`forge`](crate::forge) module docs).
#[derive(Debug, Clone)]
pub struct GithubForge {
    runner: Arc<dyn CommandRunner>,
    cwd: PathBuf,
    location: GithubLocation,
    program: String,
    env: Vec<(String, String)>,
}

/// How long one `gh api` call may take.
const CALL_LIMIT: Duration = Duration::from_secs(120);

impl GithubForge {
    /// A forge for `location`, running `gh` (from `PATH`) through `runner`
    /// in `cwd`.
    pub fn new(
        runner: Arc<dyn CommandRunner>,
        cwd: impl Into<PathBuf>,
        location: GithubLocation,
    ) -> Self {
        Self {
            runner,
            cwd: cwd.into(),
            location,
            program: "gh".into(),
            env: Vec::new(),
        }
    }

    /// Builder: run this gh executable instead of `gh` from `PATH`.
    pub fn with_program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// Builder: extra environment for every gh call.
    pub fn with_env(mut self, env: impl IntoIterator<Item = (String, String)>) -> Self {
        self.env.extend(env);
        self
    }

    /// Where it points.
    pub fn location(&self) -> &GithubLocation {
        &self.location
    }

    /// `gh api --hostname <host> [-X method] [args…] <endpoint>`, with
    /// `input` as the request body; gh's standard output.
    async fn api(
        &self,
        method: &str,
        endpoint: &str,
        extra: &[&str],
        input: Option<&Value>,
    ) -> Result<String, ForgeError> {
        let mut args = vec!["api", "--hostname", &self.location.host, "-X", method];
        args.extend_from_slice(extra);
        if input.is_some() {
            args.extend_from_slice(&["--input", "-"]);
        }
        args.push(endpoint);
        let mut spec = CommandSpec::new(&self.program, args, self.cwd.clone())
            .with_time_limit(CALL_LIMIT)
            .with_env("GH_PROMPT_DISABLED", "1")
            .with_env("NO_COLOR", "1");
        for (k, v) in &self.env {
            spec = spec.with_env(k, v);
        }
        if let Some(body) = input {
            spec = spec.with_stdin(body.to_string());
        }
        let what = format!("gh api -X {method} {endpoint}");
        let out = self
            .runner
            .run(spec)
            .await
            .map_err(|e| ForgeError::Transport {
                what: what.clone(),
                message: e.to_string(),
            })?;
        if out.success() {
            return Ok(out.stdout);
        }
        Err(gh_error(
            method,
            endpoint,
            &out.stdout,
            &out.stderr,
            out.timed_out,
        ))
    }

    async fn rest<T: DeserializeOwned>(
        &self,
        method: &str,
        endpoint: &str,
        body: Option<&Value>,
    ) -> Result<T, ForgeError> {
        let text = self.api(method, endpoint, &[], body).await?;
        parse(endpoint, &text)
    }

    async fn graphql<T: DeserializeOwned>(
        &self,
        query: &str,
        variables: Value,
    ) -> Result<T, ForgeError> {
        let body = json!({ "query": query, "variables": variables });
        let text = self.api("POST", "graphql", &[], Some(&body)).await?;
        let data: Data<T> = parse("graphql", &text)?;
        Ok(data.data)
    }

    fn vars(&self, number: u64) -> Value {
        let (owner, name) = self.location.owner_name();
        json!({ "owner": owner, "name": name, "number": number })
    }

    fn repo_path(&self, rest: &str) -> String {
        format!("repos/{}/{rest}", self.location.repo)
    }

    async fn pull(&self, number: u64) -> Result<(Option<String>, WirePull), ForgeError> {
        let found: RepoOf<PullRepo<WirePull>> = self.graphql(PULL_QUERY, self.vars(number)).await?;
        let repo = found.repository.ok_or_else(|| ForgeError::NotFound {
            what: format!("repository {}", self.location.repo),
        })?;
        let pull = repo.pull_request.ok_or_else(|| self.no_pull(number))?;
        Ok((repo.viewer_permission, pull))
    }

    /// The pull request out of a GraphQL answer about request `number`; a
    /// missing repository or request is [`ForgeError::NotFound`].
    fn pull_request<T>(&self, found: RepoOf<PullRepo<T>>, number: u64) -> Result<T, ForgeError> {
        found
            .repository
            .and_then(|r| r.pull_request)
            .ok_or_else(|| self.no_pull(number))
    }

    /// The error for request `number` missing from this repository.
    fn no_pull(&self, number: u64) -> ForgeError {
        ForgeError::NotFound {
            what: format!("pull request #{number} of {}", self.location.repo),
        }
    }

    /// Every review thread of request `number`, page by page.
    async fn wire_threads(&self, number: u64) -> Result<Vec<WireThread>, ForgeError> {
        let mut all = Vec::new();
        let mut after = Value::Null;
        loop {
            let mut vars = self.vars(number);
            vars["after"] = after;
            let found: RepoOf<PullRepo<ThreadsOf>> = self.graphql(THREADS_QUERY, vars).await?;
            let pull = self.pull_request(found, number)?;
            let page = pull.review_threads;
            all.extend(page.nodes);
            match page.page_info.end_cursor {
                Some(c) if page.page_info.has_next_page => after = json!(c),
                _ => return Ok(all),
            }
        }
    }

    /// The newest attempt of each check run of request `number`'s head.
    async fn head_checks(&self, number: u64) -> Result<(String, Vec<(Job, u64)>), ForgeError> {
        let mut jobs: Vec<(Job, u64, String)> = Vec::new();
        let mut after = Value::Null;
        let mut sha;
        loop {
            let mut vars = self.vars(number);
            vars["after"] = after;
            let found: RepoOf<PullRepo<ChecksOf>> = self.graphql(CHECKS_QUERY, vars).await?;
            let pull = self.pull_request(found, number)?;
            sha = pull.head_ref_oid;
            let Some(commit) = pull.commits.nodes.into_iter().next().map(|n| n.commit) else {
                break;
            };
            let Some(rollup) = commit.status_check_rollup.filter(|_| commit.oid == sha) else {
                break;
            };
            for c in rollup.contexts.nodes {
                self.add_check(&mut jobs, c);
            }
            match rollup.contexts.page_info.end_cursor {
                Some(c) if rollup.contexts.page_info.has_next_page => after = json!(c),
                _ => break,
            }
        }
        Ok((sha, jobs.into_iter().map(|(j, run, _)| (j, run)).collect()))
    }

    /// Adds check run `c`, replacing an older attempt of the same name (the
    /// rollup lists every attempt; a later `startedAt` is newer).
    fn add_check(&self, jobs: &mut Vec<(Job, u64, String)>, c: wire::WireContext) {
        let (Some(id), Some(name), true) = (c.database_id, c.name, c.typename == "CheckRun") else {
            return;
        };
        let run = c
            .check_suite
            .and_then(|s| s.workflow_run)
            .and_then(|r| r.database_id)
            .unwrap_or_default();
        let status = wire::check_status(c.status.as_deref().unwrap_or(""), c.conclusion.as_deref());
        let job = Job {
            id: id.to_string(),
            name: name.clone(),
            status,
            allow_failure: false,
            failure_reason: (status == CiStatus::Failed)
                .then(|| c.conclusion.map(|k| k.to_ascii_lowercase()))
                .flatten(),
            project: self.location.repo.clone(),
            web_url: c.details_url,
        };
        // A queued attempt has no start yet: it is the newest.
        let started = c.started_at.unwrap_or_else(|| "~".into());
        match jobs.iter_mut().find(|(j, _, _)| j.name == name) {
            Some(old) if old.2 <= started => *old = (job, run, started),
            Some(_) => {}
            None => jobs.push((job, run, started)),
        }
    }
}

fn parse<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, ForgeError> {
    serde_json::from_str(text).map_err(|e| ForgeError::Parse {
        what: what.to_owned(),
        message: e.to_string(),
    })
}

/// A failed `gh api`: gh prints `gh: <message> (HTTP <status>)` on
/// standard error for an HTTP error, and GraphQL errors' messages (their
/// `type`, such as `NOT_FOUND`, in the body it prints on standard output).
fn gh_error(
    method: &str,
    endpoint: &str,
    stdout: &str,
    stderr: &str,
    timed_out: bool,
) -> ForgeError {
    let message = stderr.trim().trim_start_matches("gh: ").trim().to_owned();
    if timed_out {
        return ForgeError::Transport {
            what: format!("gh api -X {method} {endpoint}"),
            message: format!("no answer within {} s", CALL_LIMIT.as_secs()),
        };
    }
    let body: Value = serde_json::from_str(stdout).unwrap_or(Value::Null);
    let not_found = body["errors"]
        .as_array()
        .is_some_and(|e| e.iter().any(|e| e["type"] == "NOT_FOUND"));
    if not_found {
        return ForgeError::NotFound { what: message };
    }
    let status = message
        .rsplit_once("(HTTP ")
        .and_then(|(_, s)| s.trim_end_matches(')').parse::<u16>().ok());
    match status {
        Some(status) => ForgeError::Http {
            method: method.to_owned(),
            url: endpoint.to_owned(),
            status,
            message: if status == 401 {
                format!("{message} (run `gh auth login`, or set GH_TOKEN)")
            } else {
                message
            },
        },
        None => ForgeError::Transport {
            what: format!("gh api -X {method} {endpoint}"),
            message: if message.is_empty() {
                orchestrator_core::limits::excerpt(stdout.trim())
            } else {
                message
            },
        },
    }
}

#[async_trait]
impl Forge for GithubForge {
    fn kind(&self) -> ForgeKind {
        ForgeKind::Github
    }

    async fn change_request(&self, number: u64) -> Result<ChangeRequest, ForgeError> {
        let (base_permission, p) = self.pull(number).await?;
        let head = p.head_repository.as_ref();
        let head_repo = head.map_or_else(
            || "(deleted fork)".to_owned(),
            |h| h.name_with_owner.clone(),
        );
        let base_write = wire::can_write(base_permission.as_deref());
        // A fork takes pushes from its owner's collaborators, and from the
        // base's maintainers when its author allows edits.
        let can_push = if p.is_cross_repository {
            head.is_some()
                && ((p.maintainer_can_modify && base_write)
                    || wire::can_write(head.and_then(|h| h.viewer_permission.as_deref())))
        } else {
            base_write
        };
        Ok(ChangeRequest {
            number: p.number,
            head_branch: p.head_ref_name,
            base_repo: self.location.repo.clone(),
            head_sha: p.head_ref_oid,
            base_branch: p.base_ref_name,
            cross_repository: p.is_cross_repository,
            can_push,
            head_push_url: head
                .filter(|_| p.is_cross_repository)
                .map(|h| format!("{}.git", h.url)),
            head_ref: format!("refs/pull/{number}/head"),
            head_repo,
        })
    }

    /// REST `pulls/get` with the `application/vnd.github.v3.diff` media type.
    async fn diff(&self, number: u64) -> Result<String, ForgeError> {
        let accept = "Accept: application/vnd.github.v3.diff";
        let endpoint = self.repo_path(&format!("pulls/{number}"));
        self.api("GET", &endpoint, &["-H", accept], None).await
    }

    async fn pipeline(&self, number: u64) -> Result<Option<Pipeline>, ForgeError> {
        let (sha, checks) = self.head_checks(number).await?;
        if checks.is_empty() {
            return Ok(None);
        }
        let runs: std::collections::BTreeSet<u64> = checks.iter().map(|(_, r)| *r).collect();
        let jobs: Vec<Job> = checks.into_iter().map(|(j, _)| j).collect();
        let status = if jobs.iter().any(|j| j.status == CiStatus::Pending) {
            CiStatus::Pending
        } else if jobs.iter().any(|j| j.status == CiStatus::Failed) {
            CiStatus::Failed
        } else if jobs.iter().any(|j| j.status == CiStatus::Canceled) {
            CiStatus::Canceled
        } else {
            CiStatus::Success
        };
        // One workflow run: its id; several: the commit's check suites.
        let id = match runs.iter().collect::<Vec<_>>().as_slice() {
            [one] if **one != 0 => one.to_string(),
            _ => sha.clone(),
        };
        Ok(Some(Pipeline {
            id,
            sha,
            status,
            jobs,
        }))
    }

    /// REST `actions/download-job-logs-for-workflow-run` (a redirect to the
    /// plain-text log, which gh follows).
    async fn job_log(&self, job: &Job) -> Result<String, ForgeError> {
        let endpoint = format!("repos/{}/actions/jobs/{}/logs", job.project, job.id);
        self.api("GET", &endpoint, &[], None).await
    }

    /// REST `actions/re-run-job-for-workflow-run`, then the run's jobs at
    /// its newest attempt (`actions/list-jobs-for-workflow-run`).
    async fn retry_job(&self, old: &Job) -> Result<Job, ForgeError> {
        let base = format!("repos/{}/actions", old.project);
        let current: RestJob = self
            .rest("GET", &format!("{base}/jobs/{}", old.id), None)
            .await?;
        let _: Value = self
            .rest(
                "POST",
                &format!("{base}/jobs/{}/rerun", old.id),
                Some(&json!({})),
            )
            .await?;
        let runs = format!("{base}/runs/{}/jobs", current.run_id);
        let listed: RestJobs = self.rest("GET", &runs, None).await?;
        listed
            .jobs
            .into_iter()
            .find(|j| j.name == old.name && j.id.to_string() != old.id)
            .map(|j| rest_job(&old.project, j))
            .ok_or_else(|| ForgeError::NotFound {
                what: format!("the new attempt of job {} ({})", old.name, old.id),
            })
    }

    async fn threads(&self, number: u64) -> Result<Vec<ReviewThread>, ForgeError> {
        Ok(self
            .wire_threads(number)
            .await?
            .into_iter()
            .map(thread)
            .collect())
    }

    async fn post_review(&self, number: u64, review: &NewReview) -> Result<(), ForgeError> {
        let body = json!({
            "event": "COMMENT",
            "body": review.body,
            "comments": review.comments.iter().map(review_comment).collect::<Vec<_>>(),
        });
        let endpoint = self.repo_path(&format!("pulls/{number}/reviews"));
        let _: Value = self.rest("POST", &endpoint, Some(&body)).await?;
        Ok(())
    }

    /// REST `pulls/create-reply-for-review-comment` on the thread's first
    /// comment.
    async fn reply(&self, number: u64, thread: &str, body: &str) -> Result<(), ForgeError> {
        let threads = self.wire_threads(number).await?;
        let first = threads
            .iter()
            .find(|t| t.id == thread)
            .and_then(|t| t.comments.nodes.first())
            .and_then(|c| c.database_id)
            .ok_or_else(|| ForgeError::NotFound {
                what: format!("review thread {thread} of pull request #{number}"),
            })?;
        let endpoint = self.repo_path(&format!("pulls/{number}/comments/{first}/replies"));
        let _: Value = self
            .rest("POST", &endpoint, Some(&json!({ "body": body })))
            .await?;
        Ok(())
    }

    /// GraphQL `resolveReviewThread(input: {threadId})`.
    async fn resolve(&self, _number: u64, thread: &str) -> Result<(), ForgeError> {
        let _: Value = self
            .graphql(RESOLVE_MUTATION, json!({ "thread": thread }))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_give_the_host_and_the_repository() {
        for (url, host) in [
            ("https://github.com/octo/demo.git", "github.com"),
            ("git@github.com:octo/demo.git", "github.com"),
            ("ssh://git@ghe.corp:2222/octo/demo", "ghe.corp"),
            ("http://github.localhost/octo/demo.git", "github.localhost"),
        ] {
            let at = GithubLocation::from_remote(url).unwrap();
            assert_eq!(
                (at.host.as_str(), at.repo.as_str()),
                (host, "octo/demo"),
                "{url}"
            );
        }
        let err = GithubLocation::from_remote("https://github.com/a/b/c").unwrap_err();
        assert!(err.to_string().contains("owner/name"), "{err}");
        assert!(is_github_remote("git@github.com:o/r.git", None));
        assert!(is_github_remote("https://ghe.corp/o/r", Some("ghe.corp")));
        assert!(!is_github_remote("https://ghe.corp/o/r", Some("")));
        assert!(!is_github_remote("https://gitlab.com/o/r", None));
    }

    #[test]
    fn gh_failures_keep_the_status_and_graphql_not_found() {
        let e = gh_error(
            "GET",
            "repos/o/r/pulls/9",
            "{}",
            "gh: Not Found (HTTP 404)\n",
            false,
        );
        assert!(matches!(e, ForgeError::Http { status: 404, .. }), "{e:?}");
        let e = gh_error(
            "POST",
            "graphql",
            r#"{"data":null,"errors":[{"type":"NOT_FOUND","message":"Could not resolve"}]}"#,
            "gh: Could not resolve\n",
            false,
        );
        assert!(matches!(e, ForgeError::NotFound { .. }), "{e:?}");
        let e = gh_error("GET", "user", "", "gh: Bad credentials (HTTP 401)", false);
        assert!(e.to_string().contains("gh auth login"), "{e}");
    }
}
