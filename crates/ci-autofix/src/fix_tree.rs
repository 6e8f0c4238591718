//! Where a fix is made, and how it lands in the user's working tree.
//!
//! **A clean tree** is fixed in place: a [`Vcs::checkpoint`], the agent edits
//! the working tree, the write-set is what changed since the checkpoint, and
//! a discarded patch is [`Vcs::restore`]d. Nothing of the user's can be lost:
//! there is nothing uncommitted.
//!
//! **A dirty tree** (`--allow-dirty`) is never given to the agent. A formatter
//! run over the whole project (`cargo fmt --all`, `black .`) would rewrite the
//! user's uncommitted files, and a checkpoint can only notice that afterwards.
//! So the agent works in a temporary git worktree at HEAD (a fresh directory
//! under the system temp dir, on a temporary branch named after it), and the
//! write-set is taken there. The patch is refused — with the files named,
//! and nothing in the user's tree changed — when it changes a file that is
//! modified or untracked in the user's tree, or creates a file where the user
//! has an (ignored) one. Otherwise the changed files' contents and deletions
//! are read into memory, and the worktree and its branch are removed before
//! anything else happens (also when the agent or git fails; a removal that
//! fails is a warning naming the leftover worktree and branch). Landing
//! writes exactly those files into the user's tree, after checking again that
//! HEAD has not moved and that none of them became dirty meanwhile; the loop
//! then commits exactly those paths.
//!
//! Why only when dirty, and not always: in a clean tree the in-place path is
//! just as safe, and it keeps what a fresh checkout would lose — the warm
//! build directory (`target/`, `node_modules/`) that linters and fixers such
//! as `cargo clippy --fix` need, and the agent's project settings in the
//! repository. The two paths share the agent run, the diff fallback and the
//! protected-path check; they differ only in where the agent runs and in how
//! a patch is landed or discarded. The worktree lives outside the repository
//! so that tools which look for configuration in parent directories (rustfmt,
//! ruff, eslint, prettier) never read the user's uncommitted configuration.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_core::agent::{AgentError, AgentRequest, AgentSpend};
use orchestrator_core::event::Event;
use orchestrator_core::vcs::{Checkpoint, CommitId, Vcs};
use orchestrator_core::worktree::{PoolError, WorktreePool};

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

/// A patch that is not committed yet.
#[derive(Debug)]
pub(crate) struct StagedPatch {
    /// The repository-relative paths it changes, sorted.
    pub(crate) write_set: Vec<String>,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// The files are already changed in the user's (clean) tree.
    InPlace(Checkpoint),
    /// The new contents, made in a worktree at `base`; the user's tree is
    /// untouched until [`StagedPatch::land`].
    Isolated {
        base: CommitId,
        files: BTreeMap<String, FileChange>,
    },
}

/// One changed file of an isolated patch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileChange {
    /// The file's new content and permission bits; `created` when HEAD does
    /// not have it.
    Write {
        bytes: Vec<u8>,
        mode: Option<u32>,
        created: bool,
    },
    /// The file was deleted.
    Delete,
}

/// Asks the agent for a patch (`request`'s working directory is replaced by
/// the tree it runs in): in place when the user's tree is clean, in a
/// temporary worktree when it is dirty (see the module docs). Warnings (a
/// worktree that could not be removed) are emitted and pushed to `warnings`.
pub(crate) async fn make_patch(
    ctx: &AutofixContext,
    request: AgentRequest,
    iteration: u32,
    warnings: &mut Vec<String>,
) -> Result<Made, AutofixError> {
    let status = ctx.vcs.status().await?;
    if status.is_clean() {
        in_place(ctx, request).await
    } else {
        isolated(ctx, request, iteration, &status.dirty_paths(), warnings).await
    }
}

async fn in_place(ctx: &AutofixContext, request: AgentRequest) -> Result<Made, AutofixError> {
    let tree = ctx.vcs.as_ref();
    let checkpoint = tree.checkpoint().await?;
    let (write_set, problem) = run_agent(ctx, tree, &checkpoint, request).await?;
    if let Some(problem) = problem {
        if !write_set.is_empty() {
            tree.restore(&checkpoint).await?;
        }
        return Ok(problem.made(None));
    }
    Ok(Made::Patch(StagedPatch {
        write_set,
        kind: Kind::InPlace(checkpoint),
    }))
}

async fn isolated(
    ctx: &AutofixContext,
    request: AgentRequest,
    iteration: u32,
    dirty: &[String],
    warnings: &mut Vec<String>,
) -> Result<Made, AutofixError> {
    let base = ctx.vcs.head().await?;
    // Outside the repository, in its folder of the cache (the policy every
    // flow follows: see `orchestrator_core::state::cache`).
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
    let made = work_in(ctx, lease.vcs.as_ref(), base, dirty, request, warnings).await;
    pool.release(lease);
    pool.close().await;
    if record.path.exists() {
        // Keep the directory: git still knows the worktree, and the person
        // cleaning up needs its files.
        let kept = tmp.keep();
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
        drop(tmp);
        // The repository's cache folder goes once nothing is left in it.
        let _ = std::fs::remove_dir(&parent);
    }
    made
}

/// The agent's run inside the worktree; leaves the worktree clean again.
async fn work_in(
    ctx: &AutofixContext,
    worktree: &dyn Vcs,
    base: CommitId,
    dirty: &[String],
    request: AgentRequest,
    warnings: &mut Vec<String>,
) -> Result<Made, AutofixError> {
    let checkpoint = worktree.checkpoint().await?;
    let made = take_patch(ctx, worktree, &checkpoint, base, dirty, request).await;
    // The worktree must be clean to be removed; the patch, if any, is in
    // memory by now.
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
            Ok(meta) => FileChange::Write {
                bytes: std::fs::read(&full).map_err(|source| AutofixError::Io {
                    what: "read".into(),
                    path: full.clone(),
                    source,
                })?,
                mode: mode_of(&meta),
                created: created.contains(path),
            },
        };
        files.insert(path.clone(), change);
    }
    if let Some(reason) = clash(ctx, &files).await? {
        return Ok(Made::Problem(reason));
    }
    Ok(Made::Patch(StagedPatch {
        write_set,
        kind: Kind::Isolated { base, files },
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
                if let Some(dirty) = dirty {
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
    /// Drops the patch: an in-place patch is restored, an isolated one was
    /// never written.
    pub(crate) async fn discard(self, vcs: &dyn Vcs) -> Result<(), AutofixError> {
        if let Kind::InPlace(checkpoint) = &self.kind {
            vcs.restore(checkpoint).await?;
        }
        Ok(())
    }

    /// Puts the patch into the user's tree (an in-place one is there
    /// already). `Ok(Err(reason))` when it can no longer land safely (HEAD
    /// moved, or one of its files became dirty); then nothing was written.
    pub(crate) async fn land(
        &self,
        ctx: &AutofixContext,
    ) -> Result<Result<(), String>, AutofixError> {
        let Kind::Isolated { base, files } = &self.kind else {
            return Ok(Ok(()));
        };
        let head = ctx.vcs.head().await?;
        if &head != base {
            return Ok(Err(format!(
                "HEAD moved from {} to {} while the fix was made; the patch was discarded",
                base.short(),
                head.short()
            )));
        }
        if let Some(reason) = clash(ctx, files).await? {
            return Ok(Err(reason));
        }
        // Every file written here was clean (or absent): a checkpoint now
        // can put all of them back if a write fails halfway.
        let checkpoint = ctx.vcs.checkpoint().await?;
        let root = ctx.vcs.root();
        for (path, change) in files {
            if let Err(e) = write_change(root, path, change) {
                if let Err(undo) = ctx.vcs.restore(&checkpoint).await {
                    return Err(AutofixError::Vcs(undo));
                }
                return Err(e);
            }
        }
        Ok(Ok(()))
    }
}

/// Writes one file of an isolated patch into `root` (atomically: a temporary
/// file in the same directory, then a rename) or deletes it.
fn write_change(root: &Path, path: &str, change: &FileChange) -> Result<(), AutofixError> {
    let full = root.join(path);
    let io = |what: &str, path: PathBuf| {
        let what = what.to_owned();
        move |source| AutofixError::Io { what, path, source }
    };
    match change {
        FileChange::Delete => match std::fs::remove_file(&full) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("delete", full)(e)),
            _ => Ok(()),
        },
        FileChange::Write { bytes, mode, .. } => {
            let dir = full.parent().unwrap_or(root).to_path_buf();
            std::fs::create_dir_all(&dir).map_err(io("create", dir.clone()))?;
            let mut tmp =
                tempfile::NamedTempFile::new_in(&dir).map_err(io("create a file in", dir))?;
            std::io::Write::write_all(&mut tmp, bytes).map_err(io("write", full.clone()))?;
            set_mode(tmp.as_file(), *mode).map_err(io("set the permissions of", full.clone()))?;
            tmp.persist(&full)
                .map_err(|e| io("replace", full.clone())(e.error))?;
            Ok(())
        }
    }
}

#[cfg(unix)]
fn mode_of(meta: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    Some(meta.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn mode_of(_meta: &std::fs::Metadata) -> Option<u32> {
    None
}

#[cfg(unix)]
fn set_mode(file: &std::fs::File, mode: Option<u32>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    match mode {
        Some(mode) => file.set_permissions(std::fs::Permissions::from_mode(mode)),
        None => Ok(()),
    }
}

#[cfg(not(unix))]
fn set_mode(_file: &std::fs::File, _mode: Option<u32>) -> std::io::Result<()> {
    Ok(())
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

    #[test]
    fn files_are_written_with_their_mode_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let change = FileChange::Write {
            bytes: b"#!/bin/sh\n".to_vec(),
            mode: Some(0o100755),
            created: true,
        };
        write_change(dir.path(), "bin/run.sh", &change).unwrap();
        let path = dir.path().join("bin/run.sh");
        assert_eq!(std::fs::read(&path).unwrap(), b"#!/bin/sh\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o755);
        }
        write_change(dir.path(), "bin/run.sh", &FileChange::Delete).unwrap();
        assert!(!path.exists());
        // Deleting what is already gone is not an error.
        write_change(dir.path(), "bin/run.sh", &FileChange::Delete).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path().join("bin")).unwrap().count(),
            0
        );
    }
}
