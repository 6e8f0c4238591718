//! Which forge a `--pr` / `--mr` run reads, for every flow that takes one:
//! GitLab for `--mr`, for `--gitlab-url`, or for a remote whose host names
//! GitLab; the caller decides what "not GitLab" means (ci-autofix's own
//! GitHub provider; for review-fix, [`github_forge`] when the remote is on
//! GitHub, else a refusal).

use std::path::Path;
use std::sync::Arc;

use orchestrator_adapters::forge::{
    GithubForge, GithubLocation, GitlabForge, GitlabLocation, GitlabToken, detect_forge,
    is_github_remote,
};
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_core::forge::{Forge, ForgeKind};
use orchestrator_core::vcs::Vcs;

/// What the flags and the remote say.
pub enum RemoteForge {
    /// GitLab, opened with the token from the environment.
    Gitlab(Arc<dyn Forge>),
    /// Not GitLab: the remote's URL, for the caller's message.
    Other { url: String },
}

/// Reads remote `remote` and opens its GitLab when `mr` is set (an `--mr`
/// run), `gitlab_url` is given, or the remote's host names GitLab. `Err`
/// says what is missing: the remote, a readable location, the token.
pub async fn remote_forge(
    vcs: &dyn Vcs,
    remote: &str,
    mr: bool,
    gitlab_url: Option<&str>,
) -> Result<RemoteForge, String> {
    let url = vcs
        .remote_url(remote)
        .await
        .map_err(|e| format!("cannot read remote `{remote}`: {e}"))?;
    if !(mr || gitlab_url.is_some() || detect_forge(&url) == Some(ForgeKind::Gitlab)) {
        return Ok(RemoteForge::Other { url });
    }
    let mut location = GitlabLocation::from_remote(&url).map_err(|e| e.to_string())?;
    if let Some(instance) = gitlab_url {
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
    Ok(RemoteForge::Gitlab(Arc::new(forge)))
}

/// The GitHub forge of remote `url`, through the real `gh` run in `cwd`
/// with the user's `gh auth`, when the remote is on GitHub: its host names
/// GitHub (`github.com`, `github.localhost`) or is `$GH_HOST` (GitHub
/// Enterprise). `None` for any other remote.
pub fn github_forge(url: &str, cwd: &Path) -> Option<Result<Arc<dyn Forge>, String>> {
    let gh_host = std::env::var("GH_HOST").ok();
    if !is_github_remote(url, gh_host.as_deref()) {
        return None;
    }
    Some(
        GithubLocation::from_remote(url)
            .map(|location| {
                let runner = Arc::new(ProcessRunner::default());
                Arc::new(GithubForge::new(runner, cwd, location)) as Arc<dyn Forge>
            })
            .map_err(|e| e.to_string()),
    )
}
