//! Remotes and bases: fetching one ref into `FETCH_HEAD` (no local ref is
//! updated), pushing one commit to a branch (never forced), reading a
//! remote's URL and the branch's upstream, and the working change since a
//! base. Every call goes through `GitVcs::run` and its argument guard.

use orchestrator_core::vcs::PushOutcome;
use orchestrator_core::{CommitId, VcsError};

use super::GitVcs;
use super::parse;
use super::run::os_args;

/// A remote given by name or URL that git could read as an option, or
/// that carries a line break.
fn check_remote(remote: &str) -> Result<(), VcsError> {
    if remote.is_empty() || remote.starts_with(['-', '+']) || remote.contains(['\0', '\n']) {
        return Err(VcsError::Other(format!("`{remote}` is not a valid remote")));
    }
    Ok(())
}

impl GitVcs {
    /// [`Vcs::push_commit`](orchestrator_core::Vcs::push_commit).
    pub(super) async fn push_commit_to(
        &self,
        remote: &str,
        commit: &CommitId,
        branch: &str,
    ) -> Result<PushOutcome, VcsError> {
        check_remote(remote)?;
        self.check_branch(branch).await?;
        let commit = self.resolve_commit(commit).await?;
        let refspec = format!("{commit}:refs/heads/{branch}");
        let out = self
            .run("push", os_args(["--porcelain", remote, &refspec]), None)
            .await?;
        let rejected = parse::push_rejections(&out.stdout);
        if !rejected.is_empty() {
            return Ok(PushOutcome::Rejected {
                reason: rejected.join("; "),
            });
        }
        if !out.status.success() {
            return Err(out.error());
        }
        Ok(PushOutcome::Pushed)
    }

    /// [`Vcs::fetch_ref`](orchestrator_core::Vcs::fetch_ref).
    pub(super) async fn fetch_one(
        &self,
        remote: &str,
        refname: &str,
    ) -> Result<CommitId, VcsError> {
        check_remote(remote)?;
        if !refname.starts_with("refs/") || refname.contains([':', '\0', '\n', ' ']) {
            return Err(VcsError::Other(format!(
                "`{refname}` is not a full ref name to fetch"
            )));
        }
        self.run_ok("fetch", os_args(["--no-tags", "--quiet", remote, refname]))
            .await?;
        let out = self
            .run_ok("rev-parse", os_args(["--verify", "FETCH_HEAD^{commit}"]))
            .await?;
        Ok(CommitId(String::from_utf8_lossy(&out).trim().to_owned()))
    }

    /// [`Vcs::remote_url`](orchestrator_core::Vcs::remote_url).
    pub(super) async fn url_of(&self, name: &str) -> Result<String, VcsError> {
        check_remote(name)?;
        let out = self.run_ok("remote", os_args(["get-url", name])).await?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// [`Vcs::upstream`](orchestrator_core::Vcs::upstream).
    pub(super) async fn upstream_of_head(&self) -> Result<Option<String>, VcsError> {
        let out = self
            .run(
                "rev-parse",
                os_args(["--abbrev-ref", "--symbolic-full-name", "@{upstream}"]),
                None,
            )
            .await?;
        if !out.status.success() {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok((!text.is_empty()).then_some(text))
    }

    /// [`Vcs::diff_from`](orchestrator_core::Vcs::diff_from).
    pub(super) async fn diff_since_base(&self, base: &str) -> Result<String, VcsError> {
        if base.is_empty() || base.starts_with('-') || base.contains(['\0', '\n']) {
            return Err(VcsError::Other(format!("`{base}` is not a ref")));
        }
        let merge_base = self.run_ok("merge-base", os_args([base, "HEAD"])).await?;
        let merge_base = String::from_utf8_lossy(&merge_base).trim().to_owned();
        let out = self
            .run_ok(
                "diff",
                os_args([
                    "--no-color",
                    "--no-ext-diff",
                    "--no-textconv",
                    &merge_base,
                    "--",
                ]),
            )
            .await?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}
