//! The [`Forge`](orchestrator_core::forge::Forge) backends.
//!
//! - [`GitlabForge`]: GitLab's REST API v4 over `reqwest`, for gitlab.com
//!   and self-hosted instances ([`GitlabLocation`] reads the instance and
//!   the project from the git remote; an explicit URL overrides it).
//! - [`GithubForge`]: GitHub through the real `gh` (`gh api`, the user's
//!   `gh auth`), for github.com and GitHub Enterprise ([`GithubLocation`]:
//!   the host and `owner/name` from the git remote; gh is told the host).
//!
//! ## GitLab's routes
//!
//! Every call is one or a few documented requests (GitLab docs,
//! `doc/api/*.md`; section names cited at each wire type):
//! - the MR: `GET /projects/:id/merge_requests/:iid`; a fork's path and
//!   clone URL from `GET /projects/:source_project_id`; its diff from
//!   `…/merge_requests/:iid/raw_diffs`;
//! - its pipeline: the MR's `head_pipeline` (else the newest of
//!   `…/merge_requests/:iid/pipelines`), its jobs from
//!   `GET /projects/:pipeline_project/pipelines/:id/jobs` (the fork's
//!   project for a fork MR), logs from `…/jobs/:id/trace`, retries by
//!   `POST …/jobs/:id/retry` (which answers the new job);
//! - threads: `…/merge_requests/:iid/discussions` (system notes left out),
//!   replies `POST …/discussions/:id/notes`, resolving
//!   `PUT …/discussions/:id?resolved=true`, a review as one diff thread per
//!   comment (`POST …/discussions` with a `text` position on the MR's
//!   `diff_refs`) and its summary as a note (`POST …/notes`).
//!
//! Lists are read page by page (`per_page=100`, then `x-next-page` until it
//! is empty; never `x-total`, which large lists omit). Tokens:
//! `GITLAB_TOKEN` goes in `PRIVATE-TOKEN`, `CI_JOB_TOKEN` in `JOB-TOKEN`
//! (REST authentication docs); a job token may call none of these routes,
//! so its 404 is explained.
//!
//! ## GitHub's routes
//!
//! Every call is one or a few `gh api` requests (GraphQL documents and
//! wire types in `github_wire`, each field named after the GitHub GraphQL
//! schema type it is read from; REST routes by their operation id in
//! GitHub's REST OpenAPI description):
//! - the PR: `Repository.pullRequest` (head and base refs, head oid,
//!   `isCrossRepository`, `maintainerCanModify`, the viewer's permission on
//!   the base and the head repository: a fork is ours to push only when its
//!   author allows edits and we may write to the base, or we may write to
//!   the fork); its diff: `pulls/get` with the `v3.diff` media type;
//! - its pipeline: the head commit's `statusCheckRollup` check runs (every
//!   attempt is listed; the newest of each name is kept; commit statuses of
//!   other CIs are left out: they have no job), logs from
//!   `actions/download-job-logs-for-workflow-run`, re-runs by
//!   `actions/re-run-job-for-workflow-run`, the new attempt from
//!   `actions/list-jobs-for-workflow-run`;
//! - threads: `PullRequest.reviewThreads` (paged) with their comments;
//!   replies `pulls/create-reply-for-review-comment` on a thread's first
//!   comment; resolving: the `resolveReviewThread` mutation; a review:
//!   `pulls/create-review` (`event: COMMENT`, `comments[]` with
//!   `line`/`side`, `start_line` for a range).
//!
//! ci-autofix's GitHub provider (`orchestrator_ci_autofix::provider`)
//! reads checks through `gh pr view`/`gh pr checks` itself.

mod github;
mod github_wire;
mod gitlab;
mod remote;

pub use github::{GithubForge, GithubLocation, is_github_remote};
pub use gitlab::{GitlabForge, GitlabToken};
pub use remote::{GitlabLocation, detect_forge};
