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

    /// The id to hand git for `commit`: a full id as it is (a wrong one
    /// makes the command that takes it fail before anything changes),
    /// anything else resolved first ([`GitVcs::resolve_commit`]).
    pub(super) async fn commit_arg(&self, commit: &CommitId) -> Result<String, VcsError> {
        if super::parse::full_object_id(commit.as_str()) {
            Ok(commit.as_str().to_owned())
        } else {
            self.resolve_commit(commit).await
        }
    }

    /// Checks that `name` is a valid branch name that cannot be read as an
    /// option.
    pub(super) async fn check_branch(&self, name: &str) -> Result<(), VcsError> {
        refuse_option_like_branch(name)?;
        let out = self
            .run(
                "check-ref-format",
                os_args([format!("refs/heads/{name}")]),
                None,
            )
            .await?;
        if !out.status.success() {
            return Err(VcsError::Other(format!(
                "`{name}` is not a valid branch name: git check-ref-format refuses it"
            )));
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

/// Refuses a branch name that is empty or could be read as an option: the
/// check before any other, which needs no git.
pub(super) fn refuse_option_like_branch(name: &str) -> Result<(), VcsError> {
    if name.is_empty() || name.starts_with('-') {
        return Err(VcsError::Other(format!(
            "`{name}` is not a valid branch name: it is empty or starts with `-`"
        )));
    }
    Ok(())
}
