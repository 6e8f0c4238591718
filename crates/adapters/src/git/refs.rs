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
}
