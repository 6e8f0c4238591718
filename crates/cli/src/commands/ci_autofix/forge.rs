//! Which forge a `--pr` / `--mr` run reads: GitLab for `--mr`, for
//! `--gitlab-url`, or for a remote whose host names GitLab; GitHub (through
//! `gh`) otherwise.

use std::sync::Arc;

use orchestrator_adapters::forge::{GitlabForge, GitlabLocation, GitlabToken, detect_forge};
use orchestrator_core::forge::{Forge, ForgeKind};
use orchestrator_core::vcs::Vcs;

use super::FixArgs;

/// The GitLab forge the flags and the remote name, or `None` for GitHub
/// (or local mode); `Err` says what is missing.
pub(super) async fn gitlab_forge(
    args: &FixArgs,
    vcs: &dyn Vcs,
) -> Result<Option<Arc<dyn Forge>>, String> {
    if args.mr.is_none() && args.pr.is_none() {
        return Ok(None);
    }
    let url = vcs
        .remote_url(&args.remote)
        .await
        .map_err(|e| format!("cannot read remote `{}`: {e}", args.remote))?;
    let gitlab = args.mr.is_some()
        || args.gitlab_url.is_some()
        || detect_forge(&url) == Some(ForgeKind::Gitlab);
    if !gitlab {
        return Ok(None);
    }
    let mut location = GitlabLocation::from_remote(&url).map_err(|e| e.to_string())?;
    if let Some(instance) = &args.gitlab_url {
        location = location.with_instance(instance);
    }
    let token = GitlabToken::from_env(|k| std::env::var(k).ok()).ok_or_else(|| {
        format!(
            "no GitLab token: set GITLAB_TOKEN to an access token with the `api` scope \
             (or CI_JOB_TOKEN inside a GitLab job) for {}",
            location.api_base()
        )
    })?;
    let forge = GitlabForge::new(location, token).map_err(|e| e.to_string())?;
    Ok(Some(Arc::new(forge)))
}
