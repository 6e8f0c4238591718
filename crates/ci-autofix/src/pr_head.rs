//! Where a pull request's fix is made and pushed: on the PR's head, never
//! on whatever happens to be checked out.
//!
//! The PR's head (`headRefName`, `headRefOid`, the head repository,
//! `isCrossRepository`, `maintainerCanModify`) decides, before any agent
//! call ([`decide`], pure):
//! - a fork that does not let maintainers push is refused: a fix could not
//!   reach the PR;
//! - the checked-out branch is the PR's branch (`headRefName`, or gh's
//!   `<owner>/<branch>` for a fork whose branch is named like the default
//!   branch) with commits the PR head does not have: refused, naming them —
//!   pushing the fix would push them too;
//! - that branch at exactly the PR head: the fix is made in place;
//! - anything else (another branch, a detached HEAD, a branch behind the
//!   PR): the fix is made in a worktree at the PR head, taken from the
//!   run's [`WorktreePool`] so it gets what the project needs, outside the
//!   repository; the user's checkout is never touched.
//!
//! The PR head is fetched from the base remote (`refs/pull/<n>/head`, which
//! GitHub keeps for forks too), and the fix is pushed to the PR's branch on
//! its head repository: the base remote for a branch of the same
//! repository, the fork's URL (made from the base remote's URL) for a fork.
//! Pushes are fast-forwards of that branch; nothing else is ever pushed.

use std::sync::Arc;

use orchestrator_core::vcs::{CommitId, CommitInfo, Vcs};
use orchestrator_core::worktree::{Lease, WorktreePool};

use crate::context::{AutofixContext, AutofixError};
use crate::provider::PrHead;

/// Where the fix is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// In the user's checkout (it is the PR's branch at the PR head).
    Checkout,
    /// In a worktree at the PR head.
    Worktree,
    /// Nowhere; why.
    Refused(String),
}

/// The decision of the module docs. `local_commits` are the commits of the
/// checkout that the PR head does not have, oldest first.
pub(crate) fn decide(
    head: &PrHead,
    branch: Option<&str>,
    local_head: &CommitId,
    local_commits: &[CommitInfo],
) -> Place {
    if head.cross_repository && !head.maintainer_can_modify {
        return Place::Refused(format!(
            "{} comes from the fork {}/{}, which does not allow edits from maintainers, so a \
             fix could not be pushed to it; ask its author to allow edits (or to run ci-autofix \
             in the fork)",
            head.label, head.owner, head.repo
        ));
    }
    let pr_branch =
        branch.is_some_and(|b| b == head.branch || b == format!("{}/{}", head.owner, head.branch));
    if pr_branch && !local_commits.is_empty() {
        let named: Vec<String> = local_commits
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c.id.short(),
                    c.message.lines().next().unwrap_or_default()
                )
            })
            .collect();
        return Place::Refused(format!(
            "the checked-out branch `{}` has {} commit(s) that {}'s head does not have ({}); a \
             fix pushed on top would push them too. Push them first, or check out another branch \
             (the fix is then made on the PR head in a worktree)",
            branch.unwrap_or_default(),
            local_commits.len(),
            head.label,
            named.join("; ")
        ));
    }
    if pr_branch && local_head.as_str().eq_ignore_ascii_case(&head.oid) {
        Place::Checkout
    } else {
        Place::Worktree
    }
}

/// The URL of `owner/repo` on the host of `base_url`, in its form
/// (`https://h/o/r.git`, `git@h:o/r.git`, `ssh://git@h/o/r.git`).
pub(crate) fn fork_url(base_url: &str, owner: &str, repo: &str) -> Option<String> {
    let trimmed = base_url.trim_end_matches('/');
    let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
    let (rest, _name) = trimmed.rsplit_once('/')?;
    let cut = rest.rfind(['/', ':'])?;
    let (host, sep) = (&rest[..cut], &rest[cut..=cut]);
    if host.is_empty() || host.ends_with(':') && sep == "/" && !host.contains("://") {
        return None;
    }
    Some(format!("{host}{sep}{owner}/{repo}.git"))
}

/// Where fixes are made and where they are pushed.
#[derive(Debug)]
pub(crate) struct Workplace {
    /// The tree the agent edits and the fix is committed in.
    pub(crate) tree: Arc<dyn Vcs>,
    /// The remote (name or URL) and branch the fix is pushed to.
    pub(crate) push_to: (String, String),
    /// The worktree's pool and lease, when the fix is not made in place.
    held: Option<(WorktreePool, Lease)>,
}

impl Workplace {
    /// Gives the worktree back to its pool and removes it.
    pub(crate) async fn close(self) {
        if let Some((pool, lease)) = self.held {
            pool.release(lease);
            pool.close().await;
        }
    }
}

/// Where PR `head`'s fix will be made and pushed, decided before any
/// agent call (the worktree is made only when a fix is needed).
#[derive(Debug, Clone)]
pub(crate) struct Located {
    in_place: bool,
    /// The remote (name or URL) and branch the fix is pushed to.
    push_to: (String, String),
    /// The PR head, fetched.
    head: CommitId,
    number: u64,
}

impl Located {
    /// Whether the fix is made in the user's checkout.
    pub(crate) fn in_place(&self) -> bool {
        self.in_place
    }
}

/// Reads where PR `head`'s fix goes (see the module docs). `Err` when the
/// run must stop: a refusal ([`AutofixError::PrHead`]) or a git failure.
pub(crate) async fn locate(ctx: &AutofixContext, head: &PrHead) -> Result<Located, AutofixError> {
    let vcs = &ctx.vcs;
    let remote = &ctx.config.remote;
    let fetched = vcs.fetch_ref(remote, &head.head_ref).await?;
    if !fetched.as_str().eq_ignore_ascii_case(&head.oid) {
        return Err(AutofixError::PrHead {
            reason: format!(
                "{}'s head moved while it was read ({} on the forge, {} fetched); run again",
                head.label,
                &head.oid[..head.oid.len().min(7)],
                fetched.short()
            ),
        });
    }
    let branch = vcs.current_branch().await?;
    let local_head = vcs.head().await?;
    let local_commits = vcs.log_since(&fetched).await?;
    let in_place = match decide(head, branch.as_deref(), &local_head, &local_commits) {
        Place::Refused(reason) => return Err(AutofixError::PrHead { reason }),
        Place::Checkout => true,
        Place::Worktree => false,
    };
    let push_to = if head.cross_repository {
        let base_url = vcs.remote_url(remote).await?;
        let url =
            fork_url(&base_url, &head.owner, &head.repo).ok_or_else(|| AutofixError::PrHead {
                reason: format!(
                    "cannot tell the URL of the fork {}/{} from remote `{remote}` ({base_url})",
                    head.owner, head.repo
                ),
            })?;
        (url, head.branch.clone())
    } else {
        (remote.clone(), head.branch.clone())
    };
    Ok(Located {
        in_place,
        push_to,
        head: fetched,
        number: head.number,
    })
}

impl Located {
    /// The workplace: the user's checkout, or a worktree at the PR head
    /// from a pool of one (provisioned like every flow's worktrees).
    pub(crate) async fn open(&self, ctx: &AutofixContext) -> Result<Workplace, AutofixError> {
        let vcs = &ctx.vcs;
        if self.in_place {
            return Ok(Workplace {
                tree: Arc::clone(vcs),
                push_to: self.push_to.clone(),
                held: None,
            });
        }
        let parent = orchestrator_core::state::worktree_root(vcs.root());
        let pool = WorktreePool::new(
            Arc::clone(vcs),
            &parent,
            format!("ci-autofix-pr-{}-", self.number),
        )
        .with_provisioner(ctx.config.provisioner.clone())
        .with_sink(Arc::clone(&ctx.sink));
        match pool.acquire(&self.head).await {
            Ok(lease) => Ok(Workplace {
                tree: Arc::clone(&lease.vcs),
                push_to: self.push_to.clone(),
                held: Some((pool, lease)),
            }),
            Err(e) => {
                pool.close().await;
                Err(AutofixError::PrHead {
                    reason: format!(
                        "the worktree at PR #{}'s head could not be made, so no agent was asked: {e}",
                        self.number
                    ),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(cross: bool, mcm: bool) -> PrHead {
        PrHead {
            number: 7,
            branch: "feature".into(),
            oid: "a".repeat(40),
            owner: if cross { "forker" } else { "octo" }.into(),
            repo: "demo".into(),
            cross_repository: cross,
            maintainer_can_modify: mcm,
            base_branch: "main".into(),
            head_ref: "refs/pull/7/head".into(),
            label: "PR #7".into(),
        }
    }

    fn commit(id: char, message: &str) -> CommitInfo {
        CommitInfo {
            id: CommitId(id.to_string().repeat(40)),
            message: message.into(),
            tree: String::new(),
        }
    }

    #[test]
    fn the_pr_head_decides_where_the_fix_goes() {
        let at_head = CommitId("a".repeat(40));
        let elsewhere = CommitId("b".repeat(40));
        let same = head(false, false);
        assert_eq!(
            decide(&same, Some("feature"), &at_head, &[]),
            Place::Checkout
        );
        assert_eq!(
            decide(&same, Some("main"), &elsewhere, &[]),
            Place::Worktree
        );
        assert_eq!(
            decide(&same, Some("main"), &at_head, &[]),
            Place::Worktree,
            "never commit on another branch"
        );
        assert_eq!(decide(&same, None, &at_head, &[]), Place::Worktree);
        assert_eq!(
            decide(&same, Some("feature"), &elsewhere, &[]),
            Place::Worktree,
            "behind the PR"
        );
        let Place::Refused(why) = decide(
            &same,
            Some("feature"),
            &elsewhere,
            &[commit('c', "wip: local\nbody")],
        ) else {
            panic!("unpushed commits must be refused")
        };
        assert!(
            why.contains("cccccc wip: local") && why.contains("1 commit(s)"),
            "{why}"
        );
        // Another branch with commits of its own is not the PR's: fine.
        assert_eq!(
            decide(&same, Some("main"), &elsewhere, &[commit('c', "x")]),
            Place::Worktree
        );
        // gh names a fork's branch `<owner>/<branch>` when it clashes.
        let fork = head(true, true);
        assert_eq!(
            decide(&fork, Some("forker/feature"), &at_head, &[]),
            Place::Checkout
        );
        let Place::Refused(why) = decide(&head(true, false), Some("feature"), &at_head, &[]) else {
            panic!("a fork without maintainer edits must be refused")
        };
        assert!(
            why.contains("forker/demo") && why.contains("does not allow edits from maintainers"),
            "{why}"
        );
    }

    #[test]
    fn fork_urls_keep_the_base_remotes_form() {
        for (base, fork) in [
            (
                "http://github.localhost/octo/demo.git",
                "http://github.localhost/forker/demo.git",
            ),
            (
                "https://github.com/octo/demo",
                "https://github.com/forker/demo.git",
            ),
            (
                "https://github.com/octo/demo/",
                "https://github.com/forker/demo.git",
            ),
            (
                "git@github.com:octo/demo.git",
                "git@github.com:forker/demo.git",
            ),
            (
                "ssh://git@github.com/octo/demo.git",
                "ssh://git@github.com/forker/demo.git",
            ),
        ] {
            assert_eq!(
                fork_url(base, "forker", "demo").as_deref(),
                Some(fork),
                "{base}"
            );
        }
        assert_eq!(fork_url("demo", "forker", "demo"), None);
    }
}
