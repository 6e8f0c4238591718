//! [`GitlabForge`]: the [`Forge`] over GitLab's REST API v4.
//!
//! The routes each call makes are listed in the `forge` module docs.

use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::forge::{
    ChangeRequest, CiStatus, Forge, ForgeError, ForgeKind, Job, NewReview, Pipeline, Position,
    ReviewComment, ReviewThread, parse_suggestions,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::remote::{GitlabLocation, encode_project};

mod transport;

/// A GitLab credential, sent in the header its kind takes.
#[derive(Clone, PartialEq, Eq)]
pub enum GitlabToken {
    /// A personal, project or group access token: `PRIVATE-TOKEN`.
    Private(String),
    /// A CI/CD job token (`$CI_JOB_TOKEN`): `JOB-TOKEN`.
    Job(String),
}

impl std::fmt::Debug for GitlabToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GitlabToken::Private(_) => "Private(..)",
            GitlabToken::Job(_) => "Job(..)",
        })
    }
}

impl GitlabToken {
    /// `GITLAB_TOKEN`, else `CI_JOB_TOKEN`, from `var` (the environment).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        set("GITLAB_TOKEN")
            .map(GitlabToken::Private)
            .or_else(|| set("CI_JOB_TOKEN").map(GitlabToken::Job))
    }

    fn header(&self) -> (&'static str, &str) {
        match self {
            GitlabToken::Private(t) => ("PRIVATE-TOKEN", t),
            GitlabToken::Job(t) => ("JOB-TOKEN", t),
        }
    }
}

/// [`Forge`] over GitLab's REST API v4 (the routes are listed in the
/// [`forge`](crate::forge) module docs).
#[derive(Debug, Clone)]
pub struct GitlabForge {
    client: reqwest::Client,
    location: GitlabLocation,
    token: GitlabToken,
}

/// `GET /projects/:id/merge_requests/:iid` (merge_requests.md, "Get single MR").
#[derive(Debug, Deserialize)]
struct WireMr {
    iid: u64,
    /// "Equal to `target_project_id`, unless the merge request originates from a fork".
    source_project_id: u64,
    target_project_id: u64,
    source_branch: String,
    target_branch: String,
    /// "Diff head SHA of the merge request".
    sha: Option<String>,
    /// Only present for a fork MR (entity `merge_request_basic.rb`).
    #[serde(default)]
    allow_collaboration: Option<bool>,
    /// "Pipeline running on the branch HEAD of the merge request".
    #[serde(default)]
    head_pipeline: Option<WirePipeline>,
    /// `{base_sha, head_sha, start_sha}` ("Empty when the merge request is created").
    #[serde(default)]
    diff_refs: Option<WireDiffRefs>,
}

#[derive(Debug, Deserialize, Clone)]
struct WireDiffRefs {
    base_sha: Option<String>,
    head_sha: Option<String>,
    start_sha: Option<String>,
}

/// `GET /projects/:id` (projects.md): the fork's path and clone URL.
#[derive(Debug, Deserialize)]
struct WireProject {
    path_with_namespace: String,
    http_url_to_repo: Option<String>,
}

/// A pipeline (pipelines.md, "Get a single pipeline"; `PipelineBasic`).
#[derive(Debug, Deserialize, Clone)]
struct WirePipeline {
    id: u64,
    project_id: u64,
    #[serde(default)]
    sha: String,
    status: String,
}

/// A job (jobs.md, "List pipeline jobs"; `failure_reason` only when failed).
#[derive(Debug, Deserialize)]
struct WireJob {
    id: u64,
    name: String,
    status: String,
    #[serde(default)]
    allow_failure: bool,
    #[serde(default)]
    failure_reason: Option<String>,
    #[serde(default)]
    web_url: Option<String>,
}

/// A discussion (discussions.md, "List project merge request discussion items").
#[derive(Debug, Deserialize)]
struct WireDiscussion {
    id: String,
    notes: Vec<WireNote>,
}

/// A note (entity `note.rb`): `position` on `DiffNote`s, `resolvable`,
/// `resolved`, `system` for notes GitLab writes itself.
#[derive(Debug, Deserialize)]
struct WireNote {
    id: u64,
    body: String,
    #[serde(default)]
    author: Option<WireUser>,
    #[serde(default)]
    system: bool,
    #[serde(default)]
    resolvable: bool,
    #[serde(default)]
    resolved: Option<bool>,
    #[serde(default)]
    position: Option<WirePosition>,
}

#[derive(Debug, Deserialize)]
struct WireUser {
    username: String,
}

#[derive(Debug, Deserialize)]
struct WirePosition {
    new_path: Option<String>,
    old_path: Option<String>,
    new_line: Option<u64>,
    old_line: Option<u64>,
}

/// Pipeline and job `status` values (pipelines.md, jobs.md "Job status
/// values"), reduced. `manual` waits for a person: pending.
fn ci_status(status: &str) -> CiStatus {
    match status {
        "success" => CiStatus::Success,
        "failed" => CiStatus::Failed,
        "canceled" | "canceling" => CiStatus::Canceled,
        "skipped" => CiStatus::Skipped,
        _ => CiStatus::Pending,
    }
}

impl GitlabForge {
    /// A forge for `location`, authenticated with `token`.
    pub fn new(location: GitlabLocation, token: GitlabToken) -> Result<Self, ForgeError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .user_agent(concat!("orchestrator/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ForgeError::Config(format!("cannot build an HTTP client: {e}")))?;
        Ok(Self {
            client,
            location,
            token,
        })
    }

    /// Where it points.
    pub fn location(&self) -> &GitlabLocation {
        &self.location
    }

    fn project(&self) -> String {
        encode_project(&self.location.project)
    }

    fn mr_path(&self, iid: u64) -> String {
        format!("/projects/{}/merge_requests/{iid}", self.project())
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ForgeError> {
        let (_, text) = self.send(reqwest::Method::GET, path, None).await?;
        parse(path, &text)
    }

    async fn write<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Value,
    ) -> Result<T, ForgeError> {
        let (_, text) = self.send(method, path, Some(body)).await?;
        parse(path, &text)
    }

    /// Every item of a list, page by page (REST docs, "Pagination": follow
    /// `x-next-page` until it is empty).
    async fn list<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>, ForgeError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut items = Vec::new();
        let mut page = "1".to_owned();
        loop {
            let paged = format!("{path}{sep}per_page=100&page={page}");
            let (headers, text) = self.send(reqwest::Method::GET, &paged, None).await?;
            items.extend(parse::<Vec<T>>(&paged, &text)?);
            let next = headers
                .get("x-next-page")
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .unwrap_or_default();
            if next.is_empty() || next == page {
                return Ok(items);
            }
            next.clone_into(&mut page);
        }
    }

    async fn mr(&self, iid: u64) -> Result<WireMr, ForgeError> {
        self.get(&self.mr_path(iid)).await
    }
}

fn parse<T: DeserializeOwned>(path: &str, text: &str) -> Result<T, ForgeError> {
    serde_json::from_str(text).map_err(|e| ForgeError::Parse {
        what: path.to_owned(),
        message: e.to_string(),
    })
}

/// GitLab's error bodies: `message` as a string or an object, else
/// `error`, else the raw text (REST troubleshooting docs, "Status codes").
fn error_message(text: &str) -> String {
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    match (&v["message"], &v["error"]) {
        (Value::String(m), _) => m.clone(),
        (m @ Value::Object(_), _) => m.to_string(),
        (_, Value::String(e)) => e.clone(),
        _ => orchestrator_core::limits::excerpt(text.trim()),
    }
}

fn job(project: u64, wire: WireJob) -> Job {
    Job {
        id: wire.id.to_string(),
        name: wire.name,
        status: ci_status(&wire.status),
        allow_failure: wire.allow_failure,
        failure_reason: wire.failure_reason,
        project: project.to_string(),
        web_url: wire.web_url,
    }
}

fn thread(wire: WireDiscussion) -> Option<ReviewThread> {
    let notes: Vec<WireNote> = wire.notes.into_iter().filter(|n| !n.system).collect();
    if notes.is_empty() {
        return None;
    }
    let resolvable = notes.iter().any(|n| n.resolvable);
    // No discussion-level `resolved` in REST: all resolvable notes resolved.
    let resolved = resolvable
        && notes
            .iter()
            .filter(|n| n.resolvable)
            .all(|n| n.resolved == Some(true));
    let comments = notes
        .into_iter()
        .map(|n| ReviewComment {
            id: n.id.to_string(),
            author: n.author.map(|a| a.username).unwrap_or_default(),
            suggestions: parse_suggestions(&n.body),
            position: n.position.and_then(|p| {
                Some(Position {
                    path: p.new_path.or(p.old_path)?,
                    new_line: p.new_line,
                    old_line: p.old_line,
                })
            }),
            body: n.body,
        })
        .collect();
    Some(ReviewThread {
        id: wire.id,
        resolvable,
        resolved,
        comments,
    })
}

/// The old-side line of new-side `line` of `path` when `diff` shows it
/// as an unchanged (context) line; `None` for an added line or one the
/// diff does not show.
fn unchanged_old_line(diff: &str, path: &str, line: u64) -> Option<u64> {
    let mut in_file = false;
    let (mut new, mut old) = (0u64, 0u64);
    for l in diff.lines() {
        if let Some(p) = l.strip_prefix("+++ ") {
            in_file = p.strip_prefix("b/") == Some(path);
        } else if l.starts_with("diff --git ") {
            in_file = false;
        } else if !in_file {
        } else if let Some(header) = l.strip_prefix("@@ -") {
            let num = |r: &str| r.split(',').next().and_then(|n| n.parse::<u64>().ok());
            let mut parts = header.split(' ');
            old = parts.next().and_then(num)?;
            new = parts.next().and_then(|r| num(r.trim_start_matches('+')))?;
        } else if l.starts_with(' ') {
            if new == line {
                return Some(old);
            }
            (new, old) = (new + 1, old + 1);
        } else if l.starts_with('+') {
            new += 1;
        } else if l.starts_with('-') {
            old += 1;
        }
    }
    None
}

#[async_trait]
impl Forge for GitlabForge {
    fn kind(&self) -> ForgeKind {
        ForgeKind::Gitlab
    }

    async fn change_request(&self, number: u64) -> Result<ChangeRequest, ForgeError> {
        let mr = self.mr(number).await?;
        let fork = mr.source_project_id != mr.target_project_id;
        let (head_repo, head_push_url) = if fork {
            let p: WireProject = self
                .get(&format!("/projects/{}", mr.source_project_id))
                .await?;
            (p.path_with_namespace, p.http_url_to_repo)
        } else {
            (self.location.project.clone(), None)
        };
        Ok(ChangeRequest {
            number: mr.iid,
            head_branch: mr.source_branch,
            head_repo,
            base_repo: self.location.project.clone(),
            head_sha: mr.sha.unwrap_or_default(),
            base_branch: mr.target_branch,
            cross_repository: fork,
            // merge_requests.md "Create MR": `allow_collaboration` lets
            // members who can merge push to the fork's source branch.
            can_push: !fork || mr.allow_collaboration == Some(true),
            head_push_url,
            head_ref: format!("refs/merge-requests/{number}/head"),
        })
    }

    /// merge_requests.md "Show merge request raw diffs": plain `git diff` text.
    async fn diff(&self, number: u64) -> Result<String, ForgeError> {
        let path = format!("{}/raw_diffs", self.mr_path(number));
        Ok(self.send(reqwest::Method::GET, &path, None).await?.1)
    }

    async fn pipeline(&self, number: u64) -> Result<Option<Pipeline>, ForgeError> {
        let mr = self.mr(number).await?;
        let newest = match mr.head_pipeline {
            Some(p) => Some(p),
            None => self
                .list::<WirePipeline>(&format!("{}/pipelines", self.mr_path(number)))
                .await?
                .into_iter()
                .max_by_key(|p| p.id),
        };
        let Some(p) = newest else {
            return Ok(None);
        };
        // The pipeline's own project: the fork's, for a fork MR.
        let jobs: Vec<WireJob> = self
            .list(&format!(
                "/projects/{}/pipelines/{}/jobs",
                p.project_id, p.id
            ))
            .await?;
        Ok(Some(Pipeline {
            id: p.id.to_string(),
            sha: p.sha,
            status: ci_status(&p.status),
            jobs: jobs.into_iter().map(|j| job(p.project_id, j)).collect(),
        }))
    }

    async fn job_log(&self, job: &Job) -> Result<String, ForgeError> {
        let path = format!("/projects/{}/jobs/{}/trace", job.project, job.id);
        Ok(self.send(reqwest::Method::GET, &path, None).await?.1)
    }

    async fn retry_job(&self, old: &Job) -> Result<Job, ForgeError> {
        let path = format!("/projects/{}/jobs/{}/retry", old.project, old.id);
        let wire: WireJob = self.write(reqwest::Method::POST, &path, &json!({})).await?;
        let project = old.project.parse().unwrap_or_default();
        Ok(Job {
            project: old.project.clone(),
            ..job(project, wire)
        })
    }

    async fn threads(&self, number: u64) -> Result<Vec<ReviewThread>, ForgeError> {
        let wire: Vec<WireDiscussion> = self
            .list(&format!("{}/discussions", self.mr_path(number)))
            .await?;
        Ok(wire.into_iter().filter_map(thread).collect())
    }

    async fn post_review(&self, number: u64, review: &NewReview) -> Result<(), ForgeError> {
        if !review.comments.is_empty() {
            let refs = self
                .mr(number)
                .await?
                .diff_refs
                .ok_or_else(|| ForgeError::Parse {
                    what: self.mr_path(number),
                    message: "`diff_refs` is empty (the MR's diff is not ready yet)".into(),
                })?;
            // discussions.md "Create a new thread in the merge request
            // diff": an unchanged line needs its `old_line` too.
            let diff = self.diff(number).await?;
            for c in &review.comments {
                let mut position = json!({
                    "position_type": "text",
                    "base_sha": refs.base_sha,
                    "start_sha": refs.start_sha,
                    "head_sha": refs.head_sha,
                    "old_path": c.path,
                    "new_path": c.path,
                    "new_line": c.line,
                });
                if let Some(old) = unchanged_old_line(&diff, &c.path, c.line) {
                    position["old_line"] = json!(old);
                }
                let body = json!({ "body": c.body, "position": position });
                let path = format!("{}/discussions", self.mr_path(number));
                let _: Value = self.write(reqwest::Method::POST, &path, &body).await?;
            }
        }
        if !review.body.trim().is_empty() {
            let path = format!("{}/notes", self.mr_path(number));
            let body = json!({ "body": review.body });
            let _: Value = self.write(reqwest::Method::POST, &path, &body).await?;
        }
        Ok(())
    }

    async fn reply(&self, number: u64, thread: &str, body: &str) -> Result<(), ForgeError> {
        let path = format!(
            "{}/discussions/{}/notes",
            self.mr_path(number),
            encode_project(thread)
        );
        let _: Value = self
            .write(reqwest::Method::POST, &path, &json!({ "body": body }))
            .await?;
        Ok(())
    }

    async fn resolve(&self, number: u64, thread: &str) -> Result<(), ForgeError> {
        let path = format!(
            "{}/discussions/{}?resolved=true",
            self.mr_path(number),
            encode_project(thread)
        );
        let _: Value = self.write(reqwest::Method::PUT, &path, &json!({})).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_come_from_gitlab_token_then_the_job_token() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            GitlabToken::from_env(env(&[("GITLAB_TOKEN", "p"), ("CI_JOB_TOKEN", "j")])),
            Some(GitlabToken::Private("p".into()))
        );
        assert_eq!(
            GitlabToken::from_env(env(&[("GITLAB_TOKEN", " "), ("CI_JOB_TOKEN", "j")])),
            Some(GitlabToken::Job("j".into()))
        );
        assert_eq!(GitlabToken::from_env(env(&[])), None);
        assert_eq!(GitlabToken::Job("j".into()).header(), ("JOB-TOKEN", "j"));
        assert_eq!(
            format!("{:?}", GitlabToken::Private("secret".into())),
            "Private(..)"
        );
    }

    #[test]
    fn only_an_unchanged_line_gets_an_old_line() {
        let diff = "diff --git a/a.rs b/a.rs\n--- a/a.rs\n+++ b/a.rs\n@@ -1,3 +1,3 @@\n one\n-two\n+zwei\n three\n\
                    diff --git a/b.rs b/b.rs\n--- a/b.rs\n+++ b/b.rs\n@@ -4,1 +4,2 @@\n four\n+new\n";
        assert_eq!(unchanged_old_line(diff, "a.rs", 1), Some(1));
        assert_eq!(unchanged_old_line(diff, "a.rs", 2), None);
        assert_eq!(unchanged_old_line(diff, "a.rs", 3), Some(3));
        assert_eq!(unchanged_old_line(diff, "b.rs", 4), Some(4));
        assert_eq!(unchanged_old_line(diff, "b.rs", 5), None);
        assert_eq!(unchanged_old_line(diff, "c.rs", 1), None);
    }

    #[test]
    fn error_bodies_of_every_documented_shape_are_read() {
        assert_eq!(
            error_message(r#"{"message":"404 Not found"}"#),
            "404 Not found"
        );
        assert_eq!(
            error_message(r#"{"error":"resolved is missing"}"#),
            "resolved is missing"
        );
        assert_eq!(
            error_message(r#"{"message":{"error":"too many"}}"#),
            r#"{"error":"too many"}"#
        );
        assert_eq!(error_message("Retry later\n"), "Retry later");
    }
}
