//! The [`Forge`] trait: where teams work — a pull request (GitHub) or merge
//! request (GitLab), its CI, and its review threads — as one interface.
//!
//! Flows (ci-autofix, review-fix) ask a forge for a [`ChangeRequest`] (its
//! head branch and repository, head commit, base, and whether we may push),
//! its latest [`Pipeline`] with the [`Job`]s that failed and their logs, and
//! its [`ReviewThread`]s (comments with [`Position`]s and
//! [`SuggestionBlock`]s); they re-run a job, post a [`NewReview`], reply to
//! and resolve a thread. Pushing is not here: it is a git push of the
//! request's own branch through [`crate::vcs::Vcs`], never forced.
//!
//! The backends live in `orchestrator-adapters` (GitHub through the real
//! `gh`, GitLab through its REST API v4); `fakes::FakeForge` (feature
//! `test-support`) holds a request in memory, and
//! `conformance::forge` is the suite every backend runs against a far side
//! scripted to hold its standard requests.
//!
//! Everything here is data and a trait; [`parse_suggestions`] is pure.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Which forge a backend talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// GitHub (pull requests, Actions checks).
    Github,
    /// GitLab (merge requests, pipelines).
    Gitlab,
    /// An in-memory fake.
    Fake,
}

impl ForgeKind {
    /// What the forge calls a change request: `PR #7` or `MR !7`.
    pub fn request_label(self, number: u64) -> String {
        match self {
            ForgeKind::Gitlab => format!("MR !{number}"),
            ForgeKind::Github | ForgeKind::Fake => format!("PR #{number}"),
        }
    }
}

/// Why a forge call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ForgeError {
    /// The forge answered a request with an error status.
    #[error("{method} {url} failed with HTTP {status}: {message}")]
    Http {
        /// `GET`, `POST`, …
        method: String,
        /// The URL (no credentials).
        url: String,
        /// The HTTP status.
        status: u16,
        /// The forge's message (or the body's start).
        message: String,
    },
    /// The forge could not be reached, or a command could not run.
    #[error("could not reach the forge with {what}: {message}")]
    Transport {
        /// The request or command.
        what: String,
        /// What went wrong.
        message: String,
    },
    /// An answer had not the expected shape.
    #[error("could not read the answer to {what}: {message}")]
    Parse {
        /// The request or command.
        what: String,
        /// What was wrong, naming the field.
        message: String,
    },
    /// Something the caller named does not exist (a thread, a job).
    #[error("{what} not found")]
    NotFound {
        /// What was looked for.
        what: String,
    },
    /// The backend cannot do this.
    #[error("{forge:?} cannot {what}")]
    Unsupported {
        /// The forge.
        forge: ForgeKind,
        /// What was asked.
        what: String,
    },
    /// The backend's settings are wrong or missing (no token, a remote
    /// whose host cannot be read).
    #[error("forge configuration: {0}")]
    Config(String),
}

/// A pull request or merge request, read now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRequest {
    /// Its number (GitHub's PR number, GitLab's `iid`).
    pub number: u64,
    /// The branch the changes are on.
    pub head_branch: String,
    /// The repository that branch lives in (`owner/name`, or a GitLab
    /// project path with its subgroups).
    pub head_repo: String,
    /// The repository the request targets.
    pub base_repo: String,
    /// The head commit.
    pub head_sha: String,
    /// The branch it targets.
    pub base_branch: String,
    /// Whether the head lives in another repository (a fork).
    pub cross_repository: bool,
    /// Whether we may push to the head branch (for a fork: whether its
    /// author allows edits from maintainers / collaboration).
    pub can_push: bool,
    /// Where to push the head branch when it is a fork (its clone URL),
    /// when the forge says; `None` for the base repository.
    pub head_push_url: Option<String>,
    /// The ref the base repository keeps the head at
    /// (`refs/pull/7/head`, `refs/merge-requests/7/head`).
    pub head_ref: String,
}

/// The state of a pipeline or a job, reduced to what a flow decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CiStatus {
    /// Not finished (created, pending, running, waiting, manual).
    Pending,
    /// Passed (also "passed with warnings").
    Success,
    /// Failed.
    Failed,
    /// Cancelled.
    Canceled,
    /// Skipped.
    Skipped,
}

impl CiStatus {
    /// Whether it is finished.
    pub fn is_finished(self) -> bool {
        self != CiStatus::Pending
    }
}

/// One job (a GitHub Actions job, a GitLab CI job).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// The forge's id of the job (its log and re-run are by this id).
    pub id: String,
    /// The job's name (`lint`, `test:unit`).
    pub name: String,
    /// Its state.
    pub status: CiStatus,
    /// Whether its failure does not fail the pipeline (not required).
    pub allow_failure: bool,
    /// The forge's reason for the failure (`script_failure`,
    /// `runner_system_failure`), when it gives one.
    pub failure_reason: Option<String>,
    /// Where the job ran: the repository or project id its log is read
    /// from (the fork, for a GitLab fork MR's pipeline).
    pub project: String,
    /// A link to the job, for people.
    pub web_url: Option<String>,
}

/// The newest pipeline (GitLab) or check suite (GitHub) of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pipeline {
    /// The forge's id of the pipeline.
    pub id: String,
    /// The commit it ran on.
    pub sha: String,
    /// Its overall state.
    pub status: CiStatus,
    /// Its jobs (the latest attempt of each).
    pub jobs: Vec<Job>,
}

impl Pipeline {
    /// The jobs that failed and count (not allowed to fail).
    pub fn failed_jobs(&self) -> Vec<&Job> {
        self.jobs
            .iter()
            .filter(|j| j.status == CiStatus::Failed && !j.allow_failure)
            .collect()
    }
}

/// Where a comment sits in the request's diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The file (its path after the change).
    pub path: String,
    /// The line on the new side, when the comment is on one.
    pub new_line: Option<u64>,
    /// The line on the old side, when the comment is on a removed or
    /// unchanged line.
    pub old_line: Option<u64>,
}

/// A ```` ```suggestion ```` block of a comment: replace the lines from
/// `lines_above` above to `lines_below` below the commented line with
/// `replacement` (GitLab's `suggestion:-A+B`; GitHub's blocks replace the
/// commented line or range: `-0+0`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuggestionBlock {
    /// Lines above the commented line that are replaced.
    pub lines_above: u32,
    /// Lines below the commented line that are replaced.
    pub lines_below: u32,
    /// The new text (each line ending in `\n`; empty deletes the lines).
    pub replacement: String,
}

/// One comment of a thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewComment {
    /// The forge's id of the comment.
    pub id: String,
    /// Who wrote it.
    pub author: String,
    /// Its Markdown text.
    pub body: String,
    /// Where in the diff it sits; `None` for a comment on the request.
    pub position: Option<Position>,
    /// Its suggestion blocks, in order.
    pub suggestions: Vec<SuggestionBlock>,
}

/// A review thread (GitHub) or discussion (GitLab).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewThread {
    /// The forge's id of the thread (the one replies and resolving use).
    pub id: String,
    /// Whether it can be resolved.
    pub resolvable: bool,
    /// Whether it is resolved.
    pub resolved: bool,
    /// Its comments, oldest first.
    pub comments: Vec<ReviewComment>,
}

/// One comment of a review to post, on a line of the new side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewComment {
    /// The file.
    pub path: String,
    /// The line on the new side.
    pub line: u64,
    /// The Markdown text (may hold a suggestion block).
    pub body: String,
}

/// A review to post: a summary and comments on lines.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NewReview {
    /// The summary (may be empty).
    pub body: String,
    /// The line comments.
    pub comments: Vec<NewComment>,
}

/// A forge. Object-safe; every method reads or acts now (no caching
/// across calls, so a poll sees the forge's newest state).
#[async_trait]
pub trait Forge: Send + Sync + fmt::Debug {
    /// Which forge this is.
    fn kind(&self) -> ForgeKind;

    /// The request `number`.
    async fn change_request(&self, number: u64) -> Result<ChangeRequest, ForgeError>;

    /// Request `number`'s diff (unified, as `git diff` prints it), for an
    /// agent's context.
    async fn diff(&self, number: u64) -> Result<String, ForgeError>;

    /// The newest pipeline of request `number`'s head, with its jobs;
    /// `None` when none ran yet.
    async fn pipeline(&self, number: u64) -> Result<Option<Pipeline>, ForgeError>;

    /// The log of `job` (the whole text the forge keeps).
    async fn job_log(&self, job: &Job) -> Result<String, ForgeError>;

    /// Re-runs `job` at the same commit; the new attempt.
    async fn retry_job(&self, job: &Job) -> Result<Job, ForgeError>;

    /// The request's review threads, oldest first (system notes left out).
    async fn threads(&self, number: u64) -> Result<Vec<ReviewThread>, ForgeError>;

    /// Posts `review` on request `number`.
    async fn post_review(&self, number: u64, review: &NewReview) -> Result<(), ForgeError>;

    /// Replies `body` in thread `thread` of request `number`.
    async fn reply(&self, number: u64, thread: &str, body: &str) -> Result<(), ForgeError>;

    /// Resolves thread `thread` of request `number`.
    async fn resolve(&self, number: u64, thread: &str) -> Result<(), ForgeError>;
}

#[async_trait]
impl<F: Forge + ?Sized> Forge for Arc<F> {
    fn kind(&self) -> ForgeKind {
        (**self).kind()
    }
    async fn change_request(&self, number: u64) -> Result<ChangeRequest, ForgeError> {
        (**self).change_request(number).await
    }
    async fn diff(&self, number: u64) -> Result<String, ForgeError> {
        (**self).diff(number).await
    }
    async fn pipeline(&self, number: u64) -> Result<Option<Pipeline>, ForgeError> {
        (**self).pipeline(number).await
    }
    async fn job_log(&self, job: &Job) -> Result<String, ForgeError> {
        (**self).job_log(job).await
    }
    async fn retry_job(&self, job: &Job) -> Result<Job, ForgeError> {
        (**self).retry_job(job).await
    }
    async fn threads(&self, number: u64) -> Result<Vec<ReviewThread>, ForgeError> {
        (**self).threads(number).await
    }
    async fn post_review(&self, number: u64, review: &NewReview) -> Result<(), ForgeError> {
        (**self).post_review(number, review).await
    }
    async fn reply(&self, number: u64, thread: &str, body: &str) -> Result<(), ForgeError> {
        (**self).reply(number, thread, body).await
    }
    async fn resolve(&self, number: u64, thread: &str) -> Result<(), ForgeError> {
        (**self).resolve(number, thread).await
    }
}

/// The suggestion blocks of a comment's Markdown, in order: fences of three
/// or more backticks whose info string is `suggestion` or
/// `suggestion:-A+B` (GitLab: both parts optional, a bare block is
/// `-0+0`). An unclosed block runs to the end of the text.
pub fn parse_suggestions(body: &str) -> Vec<SuggestionBlock> {
    let mut found = Vec::new();
    let mut lines = body.split_inclusive('\n');
    while let Some(line) = lines.next() {
        let trimmed = line.trim_end_matches(['\n', '\r']).trim_start();
        let ticks = trimmed.chars().take_while(|c| *c == '`').count();
        if ticks < 3 {
            continue;
        }
        let Some((above, below)) = suggestion_range(trimmed[ticks..].trim()) else {
            continue;
        };
        let fence = &trimmed[..ticks];
        let mut replacement = String::new();
        for inner in lines.by_ref() {
            let t = inner.trim_end_matches(['\n', '\r']).trim();
            if t.starts_with(fence) && t.chars().all(|c| c == '`') {
                break;
            }
            replacement.push_str(inner.trim_end_matches('\r'));
            if !replacement.ends_with('\n') {
                replacement.push('\n');
            }
        }
        found.push(SuggestionBlock {
            lines_above: above,
            lines_below: below,
            replacement,
        });
    }
    found
}

/// `suggestion` → (0, 0); `suggestion:-2+1` → (2, 1); anything else `None`.
fn suggestion_range(info: &str) -> Option<(u32, u32)> {
    let rest = info.strip_prefix("suggestion")?;
    if rest.is_empty() {
        return Some((0, 0));
    }
    let rest = rest.strip_prefix(':')?;
    let mut above = 0;
    let mut below = 0;
    let mut rest = rest;
    if let Some(r) = rest.strip_prefix('-') {
        let n = r.chars().take_while(char::is_ascii_digit).count();
        above = r[..n].parse().ok()?;
        rest = &r[n..];
    }
    if let Some(r) = rest.strip_prefix('+') {
        let n = r.chars().take_while(char::is_ascii_digit).count();
        below = r[..n].parse().ok()?;
        rest = &r[n..];
    }
    rest.is_empty().then_some((above, below))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn suggestion_blocks_are_read_with_their_ranges() {
        let body = "Off by one.\n\n```suggestion:-1+2\n    for i in 0..len {\n```\nand\n\
                    ````suggestion\n```rust\nx\n```\n````\n```rust\nnot one\n```\n";
        assert_eq!(
            parse_suggestions(body),
            vec![
                SuggestionBlock {
                    lines_above: 1,
                    lines_below: 2,
                    replacement: "    for i in 0..len {\n".into()
                },
                SuggestionBlock {
                    lines_above: 0,
                    lines_below: 0,
                    replacement: "```rust\nx\n```\n".into()
                },
            ]
        );
        assert_eq!(
            parse_suggestions("```suggestion\n```\n"),
            vec![SuggestionBlock {
                lines_above: 0,
                lines_below: 0,
                replacement: String::new()
            }],
            "an empty block deletes the line"
        );
        assert!(parse_suggestions("```suggestions\nx\n```").is_empty());
        assert!(parse_suggestions("```suggestion:-x\nx\n```").is_empty());
    }

    proptest! {
        #[test]
        fn a_written_suggestion_reads_back(
            above in 0u32..100, below in 0u32..100,
            lines in proptest::collection::vec("[a-z {}();]{0,12}", 0..5),
        ) {
            let replacement: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let body = format!("why\n```suggestion:-{above}+{below}\n{replacement}```\n");
            prop_assert_eq!(
                parse_suggestions(&body),
                vec![SuggestionBlock { lines_above: above, lines_below: below, replacement }]
            );
        }
    }
}
