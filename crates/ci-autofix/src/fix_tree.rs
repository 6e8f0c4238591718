//! Where a fix is made, and how it lands in the user's working tree.
//!
//! The agent never works in the user's tree, where the user may be working
//! (an edit made there while the agent worked could not be told from the
//! agent's, and a formatter over the whole project — `cargo fmt --all`,
//! `black .` — would rewrite uncommitted files). It works in a git worktree
//! at HEAD, made by a pool of one (outside the repository, so tools that
//! read configuration from parent folders never see the user's
//! uncommitted settings; provisioned like every flow's worktree with the
//! project's ignored dependency folders and setup, so fixers that need
//! `node_modules/` or a virtualenv find them), and the write-set is taken
//! there. The patch is refused — with the files named, and nothing in the
//! user's tree changed — when it changes a file that is modified or
//! untracked in the user's tree, or creates a file where the user has an
//! (ignored) one. Otherwise it is committed in the worktree, with the fix
//! commit's message, and the worktree is removed before anything else
//! happens (also when the agent or git fails; a removal that fails is a
//! warning naming the leftover worktree and branch). Landing cherry-picks
//! that commit onto the user's branch, after checking that HEAD has not
//! moved; git refuses — and nothing is written — when a file it changes
//! is dirty by then, or changes are staged. The commit is made from git's
//! index, never from the files on disk: a line the user types into a fixed
//! file while the fix lands stays theirs, uncommitted, and is never part of
//! the fix. A patch that is declined was never written: nothing to undo.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_core::agent::{AgentError, AgentRequest, AgentSpend};
use orchestrator_core::event::Event;
use orchestrator_core::vcs::{Checkpoint, CherryPick, CommitId, Vcs};
use orchestrator_core::worktree::{PoolError, SlotRecord, WorktreePool};

use crate::context::{AutofixContext, AutofixError, is_protected};
use crate::patch;

/// How many dirty paths a message names before it says "and N more".
const NAMED_PATHS: usize = 10;

/// What the agent made of a fix request.
#[derive(Debug)]
pub(crate) enum Made {
    /// A patch, ready to confirm and land.
    Patch(StagedPatch),
    /// No usable patch; the reason. The user's tree is as it was.
    Problem(String),
    /// The agent's call was refused at a run limit (`[budget]`); the
    /// limit's message. The user's tree is as it was.
    Limit(String),
}

/// A patch, committed in a worktree at `base` and not landed yet; the
/// user's tree is untouched until [`StagedPatch::land`].
#[derive(Debug)]
pub(crate) struct StagedPatch {
    /// The repository-relative paths it changes, sorted.
    pub(crate) write_set: Vec<String>,
    base: CommitId,
    /// The fix commit made in the worktree (its parent is `base`).
    commit: CommitId,
}

/// One changed file of a patch, as far as landing it cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileChange {
    /// The file is written; `created` when HEAD does not have it.
    Write { created: bool },
    /// The file was deleted.
    Delete,
}

/// Asks the agent for a patch in a temporary worktree at HEAD (`request`'s
/// working directory is replaced by it; see the module docs) and commits a
/// usable one there as `message`. Warnings (a worktree that could not be
/// removed) are emitted and pushed to `warnings`.
pub(crate) async fn make_patch(
    ctx: &AutofixContext,
    request: AgentRequest,
    iteration: u32,
    message: &str,
    warnings: &mut Vec<String>,
) -> Result<Made, AutofixError> {
    let dirty = ctx.vcs.status().await?.dirty_paths();
    let base = ctx.vcs.head().await?;
    let (parent, tmp) = worktree_dir(ctx, iteration)?;
    // The branch is named after the (unique) temporary directory, and the
    // worktree is that directory's only entry.
    let dir_name = tmp
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "ci-autofix".into());
    // A pool of one: the worktree is made and provisioned (dependency
    // folders, setup commands) like every flow's, and removed at the end.
    let pool = WorktreePool::new(Arc::clone(&ctx.vcs), tmp.path(), format!("{dir_name}-"))
        .with_provisioner(ctx.config.provisioner.clone())
        .with_sink(Arc::clone(&ctx.sink));
    let lease = match pool.acquire(&base).await {
        Ok(lease) => lease,
        Err(PoolError::Setup(e)) => {
            pool.close().await;
            return Ok(Made::Problem(format!(
                "the fix worktree could not be set up, so no agent was asked: {e}"
            )));
        }
        Err(PoolError::Vcs(e)) => {
            pool.close().await;
            return Err(e.into());
        }
        Err(e) => {
            pool.close().await;
            return Ok(Made::Problem(e.to_string()));
        }
    };
    let record = lease.record.clone();
    let request = request.with_env(lease.env.clone());
    let made = work_in(
        ctx,
        lease.vcs.as_ref(),
        base,
        &dirty,
        request,
        message,
        warnings,
    )
    .await;
    pool.release(lease);
    pool.close().await;
    remove_dir(ctx, &parent, tmp, &record, warnings);
    made
}

/// The temporary directory the fix worktree goes in, and its parent:
/// outside the repository, in its folder of the cache (the policy every
/// flow follows: see `orchestrator_core::state::cache`).
fn worktree_dir(
    ctx: &AutofixContext,
    iteration: u32,
) -> Result<(PathBuf, tempfile::TempDir), AutofixError> {
    let parent = orchestrator_core::state::worktree_root(ctx.vcs.root());
    let tmp = std::fs::create_dir_all(&parent)
        .and_then(|()| {
            tempfile::Builder::new()
                .prefix(&format!("ci-autofix-iter-{iteration}-"))
                .tempdir_in(&parent)
        })
        .map_err(|source| AutofixError::Io {
            what: "create a temporary directory for the fix worktree in".into(),
            path: parent.clone(),
            source,
        })?;
    Ok((parent, tmp))
}

/// Removes the fix worktree's temporary directory `dir`, and the
/// repository's cache folder `parent` once nothing is left in it — unless the worktree `record`
/// is still there: then git still knows it and the person cleaning up
/// needs its files, so the directory is kept and a warning says how to
/// remove it.
fn remove_dir(
    ctx: &AutofixContext,
    parent: &Path,
    dir: tempfile::TempDir,
    record: &SlotRecord,
    warnings: &mut Vec<String>,
) {
    if record.path.exists() {
        let kept = dir.keep();
        warn(
            ctx,
            warnings,
            format!(
                "could not remove the temporary fix worktree {} (branch `{}`); \
                 remove it by hand (`git worktree remove {}` and `git branch -D {}`)",
                kept.display(),
                record.branch,
                record.path.display(),
                record.branch
            ),
        );
    } else {
        drop(dir);
        let _ = std::fs::remove_dir(parent);
    }
}

/// The agent's run inside the worktree; leaves the worktree clean again
/// (a usable patch committed, anything else undone).
async fn work_in(
    ctx: &AutofixContext,
    worktree: &dyn Vcs,
    base: CommitId,
    dirty: &[String],
    request: AgentRequest,
    message: &str,
    warnings: &mut Vec<String>,
) -> Result<Made, AutofixError> {
    let checkpoint = worktree.checkpoint().await?;
    let made = take_patch(ctx, worktree, &checkpoint, base, dirty, request, message).await;
    if matches!(made, Ok(Made::Patch(_))) {
        return made;
    }
    // The worktree must be clean to be removed.
    if let Err(e) = worktree.restore(&checkpoint).await {
        warn(
            ctx,
            warnings,
            format!(
                "could not undo the agent's changes in the temporary fix worktree {}: {e}",
                worktree.root().display()
            ),
        );
    }
    made
}

async fn take_patch(
    ctx: &AutofixContext,
    worktree: &dyn Vcs,
    checkpoint: &Checkpoint,
    base: CommitId,
    dirty: &[String],
    request: AgentRequest,
    message: &str,
) -> Result<Made, AutofixError> {
    let (write_set, problem) = run_agent(ctx, worktree, checkpoint, request).await?;
    if let Some(problem) = problem {
        return Ok(problem.made(Some(dirty)));
    }
    let created: BTreeSet<String> = worktree.status().await?.untracked.into_iter().collect();
    let mut files = BTreeMap::new();
    for path in &write_set {
        let full = worktree.root().join(path);
        let change = match std::fs::symlink_metadata(&full) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileChange::Delete,
            Err(source) => {
                return Err(AutofixError::Io {
                    what: "inspect".into(),
                    path: full,
                    source,
                });
            }
            Ok(meta) if !meta.is_file() => {
                return Ok(Made::Problem(format!(
                    "the patch turns `{path}` into something other than a regular file (a symlink?); only file contents are applied, so it was discarded"
                )));
            }
            Ok(_) => FileChange::Write {
                created: created.contains(path),
            },
        };
        files.insert(path.clone(), change);
    }
    if let Some(reason) = clash(ctx, &files).await? {
        return Ok(Made::Problem(reason));
    }
    let commit = worktree.commit(&write_set, message).await?;
    Ok(Made::Patch(StagedPatch {
        write_set,
        base,
        commit,
    }))
}

/// Why the agent's answer is not a usable patch.
#[derive(Debug)]
enum Problem {
    /// Nothing changed and no diff in the answer.
    NoPatch,
    /// Anything else, said in full.
    Other(String),
    /// The call was refused at a run limit: no attempt happened.
    Limit(String),
}

impl Problem {
    /// What the agent made: nothing usable, or nothing at all (a limit).
    fn made(self, dirty: Option<&[String]>) -> Made {
        match self {
            Problem::Limit(limit) => Made::Limit(limit),
            problem => Made::Problem(problem.reason(dirty)),
        }
    }

    /// The escalation reason; `dirty` are the user's uncommitted files when
    /// the agent ran in a worktree without them.
    fn reason(self, dirty: Option<&[String]>) -> String {
        match self {
            Problem::Other(reason) => reason,
            Problem::Limit(limit) => format!("the run's limit is reached ({limit})"),
            Problem::NoPatch => {
                let mut s = "the agent proposed no patch (no file changed, and no unified diff in its answer changed one)".to_owned();
                if let Some(dirty) = dirty.filter(|d| !d.is_empty()) {
                    s.push_str(&format!(
                        "; it ran on a clean checkout of HEAD, without your uncommitted changes \
                         ({}) — if the failure comes from them, fix it by hand",
                        name_paths(dirty)
                    ));
                }
                s
            }
        }
    }
}

/// Runs the agent in `tree` and takes its write-set since `checkpoint`; an
/// agent that changed nothing but answered with a unified diff has the diff
/// applied in `tree`. Returns the write-set and, when the patch is not
/// usable, why (the caller undoes the write-set then).
async fn run_agent(
    ctx: &AutofixContext,
    tree: &dyn Vcs,
    checkpoint: &Checkpoint,
    mut request: AgentRequest,
) -> Result<(Vec<String>, Option<Problem>), AutofixError> {
    let protected_paths = &ctx.config.protected_paths;
    request.workdir = tree.root().to_path_buf();
    let limits = request.spend_limits;
    let iteration = request
        .id
        .rsplit('.')
        .next()
        .unwrap_or(&request.id)
        .to_owned();
    let agent_result = ctx.agent.run(request).await;
    if !matches!(agent_result, Err(AgentError::Budget { .. })) {
        // One fix call per iteration: the call's spend is the iteration's.
        let mut spend = AgentSpend::default();
        spend.add_call(agent_result.as_ref().ok().and_then(|r| r.usage.as_ref()));
        ctx.sink.emit(&Event::AgentCall {
            id: iteration,
            spend,
            total: spend,
        });
    }
    let mut write_set = tree.changed_since(checkpoint).await?;
    let mut diff_problem = None;
    if write_set.is_empty()
        && let Ok(response) = &agent_result
        && let Some(diff) = patch::extract_diff(&response.text)
    {
        let protected = |p: &str| is_protected(p, protected_paths);
        if let Err(e) = patch::parse(&diff).and_then(|p| patch::apply(tree.root(), &p, &protected))
        {
            diff_problem = Some(format!("the agent's diff was not applied: {e}"));
        }
        write_set = tree.changed_since(checkpoint).await?;
    }
    // The iteration's own limit, for the agents that cannot stop at it
    // themselves: a call that spent past it has its patch discarded.
    let overrun = agent_result
        .as_ref()
        .ok()
        .and_then(|r| r.usage.as_ref())
        .and_then(|usage| limits.overrun(usage));
    let problem = match (&agent_result, diff_problem, write_set.is_empty()) {
        (Err(AgentError::Budget { message }), _, _) => Some(Problem::Limit(message.clone())),
        (Err(AgentError::CallLimit { message }), _, _) => Some(Problem::Other(format!(
            "the iteration's limit was reached: {message}"
        ))),
        (Ok(_), _, _) if overrun.is_some() => Some(Problem::Other(format!(
            "the iteration's limit was passed: {}; its patch was discarded",
            overrun.unwrap_or_default()
        ))),
        (Err(e), _, _) => Some(Problem::Other(format!("the agent failed: {e}"))),
        (Ok(_), Some(reason), _) => Some(Problem::Other(reason)),
        (Ok(_), None, true) => Some(Problem::NoPatch),
        _ => None,
    }
    .or_else(|| {
        let bad: Vec<&str> = write_set
            .iter()
            .filter(|p| is_protected(p, protected_paths))
            .map(String::as_str)
            .collect();
        (!bad.is_empty()).then(|| {
            Problem::Other(format!(
                "the patch touches protected paths ({}); it was discarded",
                bad.join(", ")
            ))
        })
    });
    Ok((write_set, problem))
}

/// Why an isolated patch cannot land in the user's tree as it is now: it
/// changes files that are dirty there, or creates files where the user has
/// one that git does not show (an ignored file).
async fn clash(
    ctx: &AutofixContext,
    files: &BTreeMap<String, FileChange>,
) -> Result<Option<String>, AutofixError> {
    let dirty: BTreeSet<String> = ctx.vcs.status().await?.dirty_paths().into_iter().collect();
    let touched: Vec<String> = files
        .keys()
        .filter(|p| dirty.contains(*p))
        .cloned()
        .collect();
    if !touched.is_empty() {
        return Ok(Some(format!(
            "the patch changes {}, which {} uncommitted changes in your working tree; \
             nothing was applied and your files were left as they are",
            name_paths(&touched),
            if touched.len() == 1 { "has" } else { "have" }
        )));
    }
    let root = ctx.vcs.root();
    let shadowed: Vec<String> = files
        .iter()
        .filter(|(p, c)| {
            matches!(c, FileChange::Write { created: true, .. })
                && std::fs::symlink_metadata(root.join(p)).is_ok()
        })
        .map(|(p, _)| p.clone())
        .collect();
    if !shadowed.is_empty() {
        return Ok(Some(format!(
            "the patch creates {}, which already exist in your working tree (ignored by git); \
             nothing was applied and your files were left as they are",
            name_paths(&shadowed)
        )));
    }
    Ok(None)
}

impl StagedPatch {
    /// A patch kept at a confirmation gate: `commit`, made on `base`.
    pub(crate) fn kept(write_set: Vec<String>, base: CommitId, commit: CommitId) -> Self {
        Self {
            write_set,
            base,
            commit,
        }
    }

    /// The commit the patch was made on.
    pub(crate) fn base(&self) -> &CommitId {
        &self.base
    }

    /// The patch's commit (not landed).
    pub(crate) fn commit(&self) -> &CommitId {
        &self.commit
    }

    /// Lands the patch on the user's branch (a cherry-pick of its commit);
    /// the new commit. `Ok(Err(reason))` when it can no longer land safely
    /// (HEAD moved, or uncommitted work is in its way by now); then nothing
    /// was written.
    pub(crate) async fn land(
        &self,
        ctx: &AutofixContext,
    ) -> Result<Result<CommitId, String>, AutofixError> {
        let head = ctx.vcs.head().await?;
        if head != self.base {
            return Ok(Err(format!(
                "HEAD moved from {} to {} while the fix was made; the patch was discarded",
                self.base.short(),
                head.short()
            )));
        }
        Ok(match ctx.vcs.cherry_pick(&self.commit).await? {
            CherryPick::Applied { commit } => Ok(commit),
            CherryPick::Blocked { paths } => Err(format!(
                "the patch changes {}, which {} uncommitted or staged changes in your working \
                 tree by now; nothing was applied and your files were left as they are",
                name_paths(&paths),
                if paths.len() == 1 { "has" } else { "have" }
            )),
            CherryPick::Conflict { paths } => Err(format!(
                "the patch no longer applies to {}; nothing was applied",
                name_paths(&paths)
            )),
        })
    }
}

fn warn(ctx: &AutofixContext, warnings: &mut Vec<String>, message: String) {
    ctx.sink.emit(&Event::Warning {
        message: message.clone(),
    });
    warnings.push(message);
}

/// `a, b, c` — at most [`NAMED_PATHS`] names, then "and N more".
fn name_paths(paths: &[String]) -> String {
    let mut s = paths
        .iter()
        .take(NAMED_PATHS)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > NAMED_PATHS {
        s.push_str(&format!(" and {} more", paths.len() - NAMED_PATHS));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_path_lists_are_shortened() {
        let paths: Vec<String> = (0..12).map(|i| format!("f{i}")).collect();
        assert_eq!(name_paths(&paths[..2]), "f0, f1");
        assert_eq!(
            name_paths(&paths),
            "f0, f1, f2, f3, f4, f5, f6, f7, f8, f9 and 2 more"
        );
    }
}
