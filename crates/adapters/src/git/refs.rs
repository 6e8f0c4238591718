//! Checked references: commit ids resolved to full hashes and branch names
//! validated before they reach a command line.

use orchestrator_core::{CommitId, VcsError};

use super::GitVcs;
use super::run::os_args;

impl GitVcs {
    /// Resolves a commit id to a full hash, refusing option-like input.
    pub(super) async fn resolve_commit(&self, commit: &CommitId) -> Result<String, VcsError> {
        let text = commit.as_str();
        if text.is_empty() || text.starts_with('-') || text.contains(['\0', '\n']) {
            return Err(VcsError::Other(format!("`{text}` is not a commit id")));
        }
        let out = self
            .run(
                "rev-parse",
                os_args(["--verify", "--quiet", &format!("{text}^{{commit}}")]),
                None,
            )
            .await?;
        if !out.status.success() {
            return Err(VcsError::Other(format!("commit `{text}` does not exist")));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Checks that `name` is a valid branch name that cannot be read as an
    /// option.
    pub(super) async fn check_branch(&self, name: &str) -> Result<(), VcsError> {
        let bad = |reason: &str| {
            VcsError::Other(format!("`{name}` is not a valid branch name: {reason}"))
        };
        if name.is_empty() || name.starts_with('-') {
            return Err(bad("it is empty or starts with `-`"));
        }
        let out = self
            .run(
                "check-ref-format",
                os_args([format!("refs/heads/{name}")]),
                None,
            )
            .await?;
        if !out.status.success() {
            return Err(bad("git check-ref-format refuses it"));
        }
        Ok(())
    }

    /// [`Vcs::is_ancestor`](orchestrator_core::Vcs::is_ancestor): `git
    /// merge-base --is-ancestor`, after both ids resolve to commits (an
    /// unknown commit is no ancestor).
    pub(super) async fn ancestor_of(
        &self,
        commit: &CommitId,
        of: &CommitId,
    ) -> Result<bool, VcsError> {
        let Ok(commit) = self.resolve_commit(commit).await else {
            return Ok(false);
        };
        let of = self.resolve_commit(of).await?;
        let out = self
            .run("merge-base", os_args(["--is-ancestor", &commit, &of]), None)
            .await?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(out.error()),
        }
    }
}
