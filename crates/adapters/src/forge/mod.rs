//! The [`Forge`](orchestrator_core::forge::Forge) backends.
//!
//! - [`GitlabForge`]: GitLab's REST API v4 over `reqwest`, for gitlab.com
//!   and self-hosted instances ([`GitlabLocation`] reads the instance and
//!   the project from the git remote; an explicit URL overrides it).
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
//! GitHub's backend drives the real `gh` and lives with ci-autofix's GitHub
//! provider (`orchestrator_ci_autofix::provider`), which reads the same
//! data.

mod gitlab;
mod remote;

pub use gitlab::{GitlabForge, GitlabToken};
pub use remote::{GitlabLocation, detect_forge};
