//! review-fix on a pull/merge request: its open review threads are the
//! findings, the fixes are made on its head and delivered into it.
//!
//! ```text
//!  Forge::change_request ── a fork we may not push to is refused here,
//!        │                  before any agent call, when delivery pushes
//!        ▼
//!  Forge::threads + Forge::diff ──► threads::from_threads (unresolved
//!        │   threads on diff lines → rdjson; a ```suggestion block is a
//!        │   machine-applicable finding)
//!        │        ── .review/requests/<forge>-<n>/.review/threads.rdjson (its sessions beside it)
//!        ▼
//!  Vcs::fetch_ref(head ref) ──► Vcs::worktree_add at the head (outside the
//!        │   repository: the user's tree is never touched)
//!        ▼
//!  relint::run_with_relint in that worktree (the threads' findings first,
//!        │   then any --fix inputs; verified as every run is)
//!        ▼
//!  deliver: push + "Fixed in <sha>" replies (+ resolve), or one review of
//!           committable suggestions; a reply saying why for each failure
//! ```
//!
//! The agent for such a run is a [`RoutedAgent`]: suggestions go to the
//! builtin agent, prose comments to the configured LLM agent.

mod deliver;
pub mod hunks;
mod route;
pub mod threads;

use std::path::PathBuf;
use std::sync::Arc;

use orchestrator_core::forge::{ChangeRequest, Forge};
use orchestrator_core::vcs::{CommitId, Vcs};

pub use deliver::{Delivered, Delivery};
pub use route::RoutedAgent;

use crate::relint::{PassesReport, Relint, run_with_relint};
use crate::{ReviewFixConfig, ReviewFixError, Services};

/// Which request, and how its fixes are delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestOptions {
    /// The request's number (a PR number, an MR's `iid`).
    pub number: u64,
    /// How verified fixes reach it.
    pub delivery: Delivery,
    /// Resolve each thread a pushed fix answered.
    pub resolve: bool,
    /// The git remote of the request's base repository.
    pub remote: String,
}

impl RequestOptions {
    /// Request `number`, delivered by `delivery`, through remote `origin`,
    /// threads left unresolved.
    pub fn new(number: u64, delivery: Delivery) -> Self {
        Self {
            number,
            delivery,
            resolve: false,
            remote: "origin".to_owned(),
        }
    }

    /// Resolve the threads a pushed fix answered.
    pub fn with_resolve(mut self, resolve: bool) -> Self {
        self.resolve = resolve;
        self
    }

    /// The base repository's remote.
    pub fn with_remote(mut self, remote: impl Into<String>) -> Self {
        self.remote = remote.into();
        self
    }
}

/// What a run on a request did.
#[derive(Debug, Clone)]
pub struct RequestReport {
    /// `MR !7`, `PR #7`.
    pub label: String,
    /// The request as read before the run.
    pub request: ChangeRequest,
    /// The threads made findings.
    pub threads: Vec<threads::ThreadFinding>,
    /// Threads left out, with why.
    pub skipped: Vec<(String, String)>,
    /// The run's passes; `None` when there was nothing to fix.
    pub passes: Option<PassesReport>,
    /// What was delivered.
    pub delivered: Delivered,
}

fn forge_error(action: String, e: orchestrator_core::forge::ForgeError) -> ReviewFixError {
    ReviewFixError::Forge {
        action,
        message: e.to_string(),
    }
}

/// Runs review-fix on request `options.number` of `forge`; see the module
/// docs. `config.inputs` are extra findings files (`--fix`); `services.vcs`
/// is the user's repository, which is only read (the fixes are made in a
/// worktree at the request's head).
pub async fn run_on_request(
    forge: Arc<dyn Forge>,
    options: &RequestOptions,
    config: ReviewFixConfig,
    mut services: Services,
    relint: Option<&Relint>,
) -> Result<RequestReport, ReviewFixError> {
    let n = options.number;
    let label = forge.kind().request_label(n);
    let request = forge
        .change_request(n)
        .await
        .map_err(|e| forge_error(format!("reading {label}"), e))?;
    refuse_unpushable(&label, &request, options.delivery)?;
    let (diff, found) = read_threads(forge.as_ref(), n, &label).await?;
    let mut report = RequestReport {
        label: label.clone(),
        request: request.clone(),
        threads: found.threads.clone(),
        skipped: found.skipped.clone(),
        passes: None,
        delivered: Delivered::default(),
    };
    if found.threads.is_empty() && config.inputs.is_empty() {
        return Ok(report);
    }
    let user = Arc::clone(&services.vcs);
    let head = fetch_head(user.as_ref(), options, &label, &request).await?;
    let threads_file = write_threads(user.root(), forge.kind(), n, &found.rdjson)?;
    let (path, branch) = worktree_place(user.root(), forge.kind(), n);
    let tree = fresh_worktree(user.as_ref(), &path, &branch, &head, &label).await?;
    services.vcs = Arc::clone(&tree);
    let mut inputs = vec![threads_file];
    inputs.extend(config.inputs.iter().cloned());
    let passes = run_with_relint(config.with_inputs(inputs), services, relint).await?;
    let findings: Vec<_> = passes
        .passes
        .iter()
        .flat_map(|p| p.findings.clone())
        .collect();
    let commits: Vec<CommitId> = passes
        .passes
        .iter()
        .flat_map(|p| p.commits.iter().map(|c| c.id.clone()))
        .collect();
    let push_remote = match (&request.cross_repository, &request.head_push_url) {
        (true, Some(url)) => url.clone(),
        _ => options.remote.clone(),
    };
    let delivering = deliver::Delivering {
        forge: forge.as_ref(),
        request: &request,
        tree: &tree,
        head: &head,
        diff: &diff,
        findings: &findings,
        threads: &found.threads,
        commits: &commits,
        push_remote: &push_remote,
    };
    report.delivered = match options.delivery {
        Delivery::Push => delivering.push(options.resolve).await?,
        Delivery::Suggestions => delivering.suggest().await?,
    };
    report.passes = Some(passes);
    // Delivered: the run's branch is scratch now (pushed, or in the review).
    user.worktree_remove(&path, &branch)
        .await
        .map_err(|e| ReviewFixError::vcs(format!("removing the worktree {}", path.display()), e))?;
    Ok(report)
}

/// The request's diff and its open review threads as findings placed on it.
async fn read_threads(
    forge: &dyn Forge,
    n: u64,
    label: &str,
) -> Result<(hunks::FileHunks, threads::ThreadFindings), ReviewFixError> {
    let threads = forge
        .threads(n)
        .await
        .map_err(|e| forge_error(format!("reading {label}'s threads"), e))?;
    let diff = forge
        .diff(n)
        .await
        .map_err(|e| forge_error(format!("reading {label}'s diff"), e))?;
    let diff = hunks::parse(&diff);
    let found = threads::from_threads(label, &threads, &diff);
    Ok((diff, found))
}

/// A new worktree at the request's head, in place of the one an earlier
/// run left (killed mid-way), if any.
async fn fresh_worktree(
    user: &dyn Vcs,
    path: &std::path::Path,
    branch: &str,
    head: &CommitId,
    label: &str,
) -> Result<Arc<dyn Vcs>, ReviewFixError> {
    user.worktree_remove(path, branch).await.map_err(|e| {
        ReviewFixError::vcs(format!("removing the old worktree {}", path.display()), e)
    })?;
    user.worktree_add(path, branch, head)
        .await
        .map_err(|e| ReviewFixError::vcs(format!("making a worktree at {label}'s head"), e))
}

/// A fork whose author does not allow edits cannot take a pushed fix.
fn refuse_unpushable(
    label: &str,
    request: &ChangeRequest,
    delivery: Delivery,
) -> Result<(), ReviewFixError> {
    if delivery == Delivery::Push && !request.can_push {
        let from = if request.cross_repository {
            format!(
                "comes from the fork {}, which does not allow edits from maintainers",
                request.head_repo
            )
        } else {
            format!("has a branch `{}` we may not push to", request.head_branch)
        };
        return Err(ReviewFixError::Request {
            reason: format!(
                "{label} {from}, so fixes could not be pushed to it; no agent was asked. \
                 Use --deliver suggestions, or ask its author to allow edits"
            ),
        });
    }
    Ok(())
}

/// The request's head, fetched from the base remote (which keeps it for
/// forks too) and checked against what the forge says.
async fn fetch_head(
    vcs: &dyn Vcs,
    options: &RequestOptions,
    label: &str,
    request: &ChangeRequest,
) -> Result<CommitId, ReviewFixError> {
    let head = vcs
        .fetch_ref(&options.remote, &request.head_ref)
        .await
        .map_err(|e| {
            ReviewFixError::vcs(format!("fetching {label}'s head ({})", request.head_ref), e)
        })?;
    if !request.head_sha.is_empty() && !head.as_str().eq_ignore_ascii_case(&request.head_sha) {
        return Err(ReviewFixError::Request {
            reason: format!(
                "{label}'s head moved while it was read ({} on the forge, {} fetched); run again",
                &request.head_sha[..request.head_sha.len().min(7)],
                head.short()
            ),
        });
    }
    Ok(head)
}

/// `<repo>/.review/requests/<forge>-<n>/.review/threads.rdjson`, written
/// atomically. The inner `.review` makes the session's folder
/// `.review/requests/<forge>-<n>/.review/fixes`: apart from the sessions of
/// the checked-out branch, so a `review-fix --resume` there never picks up
/// a request's session (whose commits belong to the request's head).
fn write_threads(
    repo: &std::path::Path,
    kind: orchestrator_core::forge::ForgeKind,
    n: u64,
    rdjson: &serde_json::Value,
) -> Result<PathBuf, ReviewFixError> {
    let dir = repo
        .join(".review")
        .join("requests")
        .join(format!("{}-{n}", kind_name(kind)))
        .join(".review");
    let path = dir.join("threads.rdjson");
    std::fs::create_dir_all(&dir).map_err(|e| ReviewFixError::io("create", &dir, e))?;
    orchestrator_core::state::write_json_atomic(&path, rdjson)?;
    Ok(path)
}

fn kind_name(kind: orchestrator_core::forge::ForgeKind) -> &'static str {
    match kind {
        orchestrator_core::forge::ForgeKind::Github => "github-pr",
        orchestrator_core::forge::ForgeKind::Gitlab => "gitlab-mr",
        _ => "request",
    }
}

/// Where the request's worktree goes (outside the repository) and its branch.
fn worktree_place(
    repo: &std::path::Path,
    kind: orchestrator_core::forge::ForgeKind,
    n: u64,
) -> (PathBuf, String) {
    let name = format!("review-fix-{}-{n}", kind_name(kind));
    (
        orchestrator_core::state::worktree_root(repo).join(&name),
        format!("orchestrator/{name}"),
    )
}
