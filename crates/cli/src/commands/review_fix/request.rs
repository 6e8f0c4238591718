//! `review-fix --mr N` / `--pr N`: the request's open review threads are
//! the findings, the fixes are delivered into it (`--deliver push` or
//! `suggestions`). The flow is `orchestrator_review_fix::forge`; this
//! module picks the forge, the agents and renders what was delivered.

use std::fmt::Write as _;
use std::sync::Arc;

use orchestrator_adapters::forge::{GitlabForge, GitlabLocation, GitlabToken, detect_forge};
use orchestrator_core::agent::Agent;
use orchestrator_core::forge::{Forge, ForgeKind};
use orchestrator_core::vcs::Vcs;
use orchestrator_review_fix::forge::{Delivery, RequestOptions, RequestReport, RoutedAgent};

/// How `--deliver` hands verified fixes to the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeliverArg {
    /// Push the commits to the request's branch (never forced) and reply
    /// "Fixed in abc1234." in each thread.
    Push,
    /// Push nothing: post one review with committable suggestions.
    Suggestions,
}

/// The flags of a run on a pull/merge request.
#[derive(Debug, Clone, clap::Args)]
pub struct RequestFlags {
    /// Fix the open review threads of this GitLab merge request (token:
    /// GITLAB_TOKEN or CI_JOB_TOKEN; instance and project: the remote).
    #[arg(long, value_name = "N", conflicts_with = "pr",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub mr: Option<u64>,
    /// Fix the open review threads of this pull request (GitLab when the
    /// remote or `--gitlab-url` says so).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pr: Option<u64>,
    /// How verified fixes reach the request.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = DeliverArg::Push)]
    pub deliver: DeliverArg,
    /// With `--deliver push`: resolve each thread a pushed fix answered.
    #[arg(long)]
    pub resolve: bool,
    /// GitLab: the instance's URL when the remote does not give it.
    #[arg(long, value_name = "URL")]
    pub gitlab_url: Option<String>,
    /// The git remote of the request's repository.
    #[arg(long, value_name = "NAME", default_value = "origin")]
    pub remote: String,
}

impl RequestFlags {
    /// The request's number, when the run is on one.
    pub fn number(&self) -> Option<u64> {
        self.mr.or(self.pr)
    }

    /// The library's options.
    pub fn options(&self, number: u64) -> RequestOptions {
        let delivery = match self.deliver {
            DeliverArg::Push => Delivery::Push,
            DeliverArg::Suggestions => Delivery::Suggestions,
        };
        RequestOptions::new(number, delivery)
            .with_resolve(self.resolve)
            .with_remote(self.remote.clone())
    }

    /// Flags that make sense only on a request, given without one.
    pub fn stray(&self) -> Option<&'static str> {
        if self.number().is_some() {
            None
        } else if self.resolve {
            Some("--resolve")
        } else if self.deliver != DeliverArg::Push {
            Some("--deliver")
        } else if self.gitlab_url.is_some() {
            Some("--gitlab-url")
        } else {
            None
        }
    }
}

/// The forge the flags and the remote name; `Err` says what is missing.
pub async fn request_forge(flags: &RequestFlags, vcs: &dyn Vcs) -> Result<Arc<dyn Forge>, String> {
    let url = vcs
        .remote_url(&flags.remote)
        .await
        .map_err(|e| format!("cannot read remote `{}`: {e}", flags.remote))?;
    let gitlab = flags.mr.is_some()
        || flags.gitlab_url.is_some()
        || detect_forge(&url) == Some(ForgeKind::Gitlab);
    if !gitlab {
        return Err(format!(
            "review-fix --pr reads GitLab merge requests for now, and remote `{}` ({url}) is not \
             GitLab; give --gitlab-url for a self-hosted GitLab under another host name",
            flags.remote
        ));
    }
    let mut location = GitlabLocation::from_remote(&url).map_err(|e| e.to_string())?;
    if let Some(instance) = &flags.gitlab_url {
        location = location.with_instance(instance);
    }
    let token = GitlabToken::from_env(|k| std::env::var(k).ok()).ok_or_else(|| {
        format!(
            "no GitLab token: set GITLAB_TOKEN to an access token with the `api` scope \
             (or CI_JOB_TOKEN inside a GitLab job) for {}",
            location.api_base()
        )
    })?;
    Ok(Arc::new(
        GitlabForge::new(location, token).map_err(|e| e.to_string())?,
    ))
}

/// The agent of a request run: suggestions to the builtin agent, the rest
/// to `llm` (none with `--agent builtin`).
pub fn routed(builtin: Arc<dyn Agent>, llm: Option<Arc<dyn Agent>>) -> Arc<dyn Agent> {
    Arc::new(RoutedAgent::new(builtin, llm))
}

/// What was delivered, after the run's summary.
pub fn render_delivery(report: &RequestReport) -> String {
    let mut out = String::new();
    let d = &report.delivered;
    let _ = writeln!(
        out,
        "{}: {} from review threads{}",
        report.label,
        orchestrator_core::text::counted(report.threads.len() as u64, "finding", "findings"),
        match report.skipped.len() {
            0 => String::new(),
            k => format!(", {k} thread(s) left out"),
        }
    );
    for (thread, why) in &report.skipped {
        let _ = writeln!(out, "  left out {}: {why}", short(thread));
    }
    match &d.pushed {
        Some((sha, branch)) => {
            let _ = writeln!(
                out,
                "  pushed {} to `{branch}` (fast-forward)",
                &sha[..sha.len().min(7)]
            );
        }
        None if d.suggestions > 0 || !d.patches.is_empty() => {
            let _ = writeln!(
                out,
                "  posted one review: {} suggestion(s), {} fix(es) as a patch in its summary; nothing pushed",
                d.suggestions,
                d.patches.len()
            );
        }
        None => {
            let _ = writeln!(out, "  nothing pushed");
        }
    }
    for (thread, body) in &d.replies {
        let _ = writeln!(out, "  replied in {}: {body}", short(thread));
    }
    if !d.resolved.is_empty() {
        let _ = writeln!(out, "  resolved {} thread(s)", d.resolved.len());
    }
    out
}

fn short(thread: &str) -> &str {
    &thread[..thread.len().min(8)]
}
