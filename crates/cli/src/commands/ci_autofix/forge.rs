//! Which forge a `--pr` / `--mr` run reads: GitLab for `--mr`, for
//! `--gitlab-url`, or for a remote whose host names GitLab; GitHub (through
//! `gh`) otherwise.

use std::sync::Arc;

use orchestrator_core::forge::Forge;
use orchestrator_core::vcs::Vcs;

use super::FixArgs;
use crate::commands::gitlab::{RemoteForge, remote_forge};

/// The GitLab forge the flags and the remote name, or `None` for GitHub
/// (or local mode); `Err` says what is missing.
pub(super) async fn gitlab_forge(
    args: &FixArgs,
    vcs: &dyn Vcs,
) -> Result<Option<Arc<dyn Forge>>, String> {
    if args.mr.is_none() && args.pr.is_none() {
        return Ok(None);
    }
    let found = remote_forge(
        vcs,
        &args.remote,
        args.mr.is_some(),
        args.gitlab_url.as_deref(),
    );
    Ok(match found.await? {
        RemoteForge::Gitlab(forge) => Some(forge),
        RemoteForge::Other { .. } => None,
    })
}
