//! Landing a commit on the user's checkout ([`Vcs::cherry_pick`] outside
//! an engine worktree) without a cherry-pick in progress there, and
//! without a byte of the user's in what lands.
//!
//! A plain `git cherry-pick` merges, writes `CHERRY_PICK_HEAD`, then
//! commits. When the user's own git holds `index.lock` at the commit step
//! (the user staging a file at that instant), git stops with the pick in
//! progress; the only way back git offers is `cherry-pick --abort`, a
//! `reset --merge` that puts every *staged* file back to HEAD — the user's
//! staged work with it. While a pick is in progress the user's own
//! `git commit -- <path>` is refused too.
//!
//! So the landed commit is built from objects alone: `git merge-tree
//! --write-tree --merge-base=<id>^ HEAD <id>` gives the picked tree (or
//! the conflicting paths) without reading the index or the work tree,
//! `git commit-tree` makes the commit on HEAD with the original message
//! and author, and `git merge --ff-only` ([`GitVcs::fast_forward_locked`],
//! with its checks for the user's work) moves the branch, the index and the
//! commit's files to it. Nothing the user writes meanwhile can be in it;
//! when the user commits first, it is built again on their commit.
//!
//! Git older than 2.40 has no `merge-tree --merge-base`: there the change
//! is merged with `cherry-pick --no-commit` and committed with `commit
//! --only -C` (no sequencer state either); a landing that does not
//! complete puts the commit's paths back to HEAD, saved to the trash first.
//! There, an edit the user makes to one of the commit's files in the
//! instant between the merge and the commit goes into the commit.

use std::ffi::OsString;

use orchestrator_core::vcs::{CherryPick, FastForward};
use orchestrator_core::{CommitId, Vcs, VcsError};

use super::run::os_args;
use super::{GitVcs, parse};

/// How many times a landing's commit is made again after the user moved
/// HEAD under it.
const REF_MOVED_RETRIES: u32 = 10;

/// Whether git refused a commit because HEAD moved after it was read.
fn head_moved(stderr: &[u8]) -> bool {
    let text = String::from_utf8_lossy(stderr);
    text.contains("cannot lock ref 'HEAD'") || text.contains("cannot lock ref 'refs/heads/")
}

/// How many times a landing is built again because the user committed
/// while it was being built.
const HEAD_MOVED_REBUILDS: u32 = 50;

/// What `git merge-tree` made of a pick.
enum Merged {
    /// The picked tree, clean.
    Tree(String),
    /// The paths that conflict.
    Conflict(Vec<String>),
    /// This git has no `merge-tree --merge-base` (older than 2.40).
    Unsupported,
}

impl GitVcs {
    /// Lands commit `id` (a full id) on HEAD of the user's checkout; the
    /// caller holds the write lock. Blocked when the user's work is in the
    /// way, a conflict when it does not apply, an error when git refused:
    /// in each case nothing was changed.
    pub(super) async fn land_pick(&self, id: &str) -> Result<CherryPick, VcsError> {
        let parent = format!("{id}^");
        let (raw, mut read_head) = self.commit_and_head(id).await?;
        let (author, message) = author_and_message(&raw).ok_or_else(|| {
            VcsError::Other(format!("commit {id} has no author line git can read"))
        })?;
        for _ in 0..HEAD_MOVED_REBUILDS {
            let (head, head_tree) = match read_head.take() {
                Some(read) => read,
                None => self.head_and_tree().await?,
            };
            let tree = match self.merged_tree(&parent, head.as_str(), id).await? {
                Merged::Tree(tree) => tree,
                Merged::Conflict(paths) => return Ok(CherryPick::Conflict { paths }),
                Merged::Unsupported => return self.land_with_index(id).await,
            };
            if tree == head_tree {
                return Err(VcsError::Other(format!(
                    "commit {id} changes nothing on HEAD {}: it is applied already",
                    head.short()
                )));
            }
            let landed = self
                .commit_tree_as(&author, &message, &tree, head.as_str())
                .await?;
            // The checks for the user's work come with the fast-forward.
            match self.fast_forward_locked(&head, &landed).await? {
                FastForward::Moved => return Ok(CherryPick::Applied { commit: landed }),
                FastForward::Blocked { paths } => return Ok(CherryPick::Blocked { paths }),
                // The user committed meanwhile: built again on their commit.
                FastForward::NotPossible => {}
            }
        }
        Err(VcsError::Other(format!(
            "commit {id} could not be landed: the branch moved under each of {HEAD_MOVED_REBUILDS} attempts"
        )))
    }

    /// After a `merge --ff-only` to `to` that failed: git checks out the
    /// new files before it moves the branch, so when the user's commit
    /// moved HEAD between the two, `to`'s version of the paths it changes
    /// is left in the index and the work tree. Each path where both still
    /// hold exactly `to`'s version (and HEAD another) is put back to HEAD,
    /// file by file ([`GitVcs::put_back_if_unchanged`]); a path that holds
    /// anything else is the user's and stays.
    pub(super) async fn undo_partial_fast_forward(&self, to: &CommitId) -> Result<(), VcsError> {
        let head = self.head().await?;
        if head == *to {
            return Ok(());
        }
        let paths = self.paths_between(head.as_str(), to.as_str()).await?;
        if paths.is_empty() {
            return Ok(());
        }
        let worktree_differs: std::collections::BTreeSet<String> = parse::nul_list(
            &self
                .run_paths(
                    "diff",
                    &["--name-only", "-z", "--no-renames", to.as_str()],
                    &paths,
                )
                .await?,
        )?
        .into_iter()
        .collect();
        let index_differs: std::collections::BTreeSet<String> = parse::nul_list(
            &self
                .run_paths(
                    "diff",
                    &["--cached", "--name-only", "-z", "--no-renames", to.as_str()],
                    &paths,
                )
                .await?,
        )?
        .into_iter()
        .collect();
        let left: Vec<String> = paths
            .into_iter()
            .filter(|p| !worktree_differs.contains(p) && !index_differs.contains(p))
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        tracing::warn!(paths = ?left, "a fast-forward failed after writing files; putting them back");
        for path in &left {
            self.put_back_if_unchanged(&head, to, path).await?;
        }
        Ok(())
    }

    /// Puts `path` back to `head`'s version when its file still holds
    /// exactly `to`'s bytes, checked and replaced in this process (a
    /// rename; a removal when `head` has no such file) so that a line the
    /// user writes an instant before is seen and kept; then its index
    /// entry goes back to `head`'s.
    async fn put_back_if_unchanged(
        &self,
        head: &CommitId,
        to: &CommitId,
        path: &str,
    ) -> Result<(), VcsError> {
        let full = self.root.join(path);
        let written = self.blob_at(to, path).await?;
        let before = self.blob_at(head, path).await?;
        let now = tokio::fs::read(&full).await.ok();
        if now != written {
            return Ok(());
        }
        let io =
            |e: std::io::Error| VcsError::Other(format!("cannot put back {}: {e}", full.display()));
        match before {
            Some(bytes) => {
                let temp = full.with_file_name(format!(
                    ".{}.orchestrator-put-back",
                    full.file_name()
                        .map(|n| n.to_string_lossy())
                        .unwrap_or_default()
                ));
                tokio::fs::write(&temp, &bytes).await.map_err(io)?;
                if let Ok(meta) = tokio::fs::metadata(&full).await {
                    tokio::fs::set_permissions(&temp, meta.permissions())
                        .await
                        .map_err(io)?;
                }
                tokio::fs::rename(&temp, &full).await.map_err(io)?;
            }
            None => tokio::fs::remove_file(&full).await.map_err(io)?,
        }
        self.run_paths(
            "restore",
            &["--source=HEAD", "--staged"],
            &[path.to_owned()],
        )
        .await
        .map(|_| ())
    }

    /// The bytes of `path` in `commit`, `None` when it has no such file.
    async fn blob_at(&self, commit: &CommitId, path: &str) -> Result<Option<Vec<u8>>, VcsError> {
        let out = self
            .run(
                "cat-file",
                os_args(["blob", &format!("{}:{path}", commit.as_str())]),
                None,
            )
            .await?;
        Ok(out.status.success().then_some(out.stdout))
    }

    /// Commit `id`'s raw object, and HEAD's commit and tree ids, read by
    /// one `git cat-file --batch`.
    async fn commit_and_head(
        &self,
        id: &str,
    ) -> Result<(Vec<u8>, Option<(CommitId, String)>), VcsError> {
        let out = self
            .run(
                "cat-file",
                os_args(["--batch"]),
                Some(format!("{id}\nHEAD\n").into_bytes()),
            )
            .await?
            .into_ok()?;
        let mut found = parse::cat_file_batch_found(&out)?.into_iter();
        let commit = match found.next() {
            Some(Ok(object)) if object.kind == "commit" => object.content,
            _ => {
                // Not a commit: said as for an id that needed resolving.
                self.resolve_commit(&CommitId(id.to_owned())).await?;
                return Err(VcsError::Other(format!("{id} is not a commit")));
            }
        };
        // HEAD read here or, when that fails, again by the caller's loop.
        let head = match found.next() {
            Some(Ok(object)) if object.kind == "commit" => {
                let (tree, _) = parse::commit_object(&object.content)?;
                Some((CommitId(object.id), tree))
            }
            _ => None,
        };
        Ok((commit, head))
    }

    /// HEAD's commit and tree ids, read at once.
    async fn head_and_tree(&self) -> Result<(CommitId, String), VcsError> {
        let out = self
            .run_ok("rev-parse", os_args(["HEAD^{commit}", "HEAD^{tree}"]))
            .await?;
        let text = String::from_utf8_lossy(&out);
        let mut ids = text.lines().map(str::to_owned);
        match (ids.next(), ids.next()) {
            (Some(commit), Some(tree)) => Ok((CommitId(commit), tree)),
            _ => Err(VcsError::Other(format!(
                "git rev-parse gave no HEAD and tree: {text}"
            ))),
        }
    }

    /// The tree of picking `id` (whose parent is `parent`) onto `head`, from
    /// objects alone.
    async fn merged_tree(&self, parent: &str, head: &str, id: &str) -> Result<Merged, VcsError> {
        let base = format!("--merge-base={parent}");
        let out = self
            .run(
                "merge-tree",
                os_args([
                    "--write-tree",
                    "-z",
                    "--name-only",
                    "--no-messages",
                    &base,
                    head,
                    id,
                ]),
                None,
            )
            .await?;
        match out.status.code() {
            Some(0 | 1) => {
                let mut fields = parse::nul_list(&out.stdout)?.into_iter();
                let tree = fields.next().unwrap_or_default();
                if out.status.code() == Some(0) {
                    return Ok(Merged::Tree(tree));
                }
                let mut paths: Vec<String> = fields.filter(|p| !p.is_empty()).collect();
                paths.sort();
                paths.dedup();
                Ok(Merged::Conflict(paths))
            }
            // 129: a usage error, the option this git does not know.
            Some(129) => Ok(Merged::Unsupported),
            _ => Err(out.error()),
        }
    }

    /// A commit of `tree` on `parent` with a landed commit's `message`
    /// (byte for byte) and `author` (name, email and date); the committer
    /// is the user's git identity, as a cherry-pick's is.
    async fn commit_tree_as(
        &self,
        author: &Author,
        message: &[u8],
        tree: &str,
        parent: &str,
    ) -> Result<CommitId, VcsError> {
        let env = [
            ("GIT_AUTHOR_NAME", author.name.as_str()),
            ("GIT_AUTHOR_EMAIL", author.email.as_str()),
            ("GIT_AUTHOR_DATE", author.date.as_str()),
        ];
        let out = self
            .run_env(
                "commit-tree",
                os_args([tree, "-p", parent, "-F", "-"]),
                Some(message.to_vec()),
                &env,
            )
            .await?
            .into_ok()?;
        Ok(CommitId(String::from_utf8_lossy(&out).trim().to_owned()))
    }

    /// [`GitVcs::land_pick`] for a git without `merge-tree --merge-base`:
    /// merged into the index and work tree, committed from the work tree.
    async fn land_with_index(&self, id: &str) -> Result<CherryPick, VcsError> {
        let parent = format!("{id}^");
        let paths = self.paths_between(&parent, id).await?;
        let out = self
            .run("cherry-pick", os_args(["--no-commit", id]), None)
            .await?;
        if !out.status.success() {
            let conflicted = self.unmerged_paths().await?;
            if conflicted.is_empty() {
                // git refused before changing anything (the user changed
                // a path between the check and the pick).
                let blocked = self.in_the_way(&parent, id).await?;
                if !blocked.is_empty() {
                    return Ok(CherryPick::Blocked { paths: blocked });
                }
                return Err(out.error());
            }
            self.undo_landing(id, &paths).await?;
            return Ok(CherryPick::Conflict { paths: conflicted });
        }
        match self.commit_as(id, &paths).await {
            Ok(()) => Ok(CherryPick::Applied {
                commit: self.head().await?,
            }),
            Err(e) => {
                self.undo_landing(id, &paths).await?;
                Err(e)
            }
        }
    }

    /// The paths commit `id` changes against `parent` (any two commits).
    pub(super) async fn paths_between(
        &self,
        parent: &str,
        id: &str,
    ) -> Result<Vec<String>, VcsError> {
        self.diff_names(&[parent, id]).await
    }

    /// Each path the commits from `parent` to `id` change, with its
    /// `--name-status` letter (`A` added, `M`, `D`, `T`).
    pub(super) async fn changes_between(
        &self,
        parent: &str,
        id: &str,
    ) -> Result<Vec<(u8, String)>, VcsError> {
        let argv = os_args([
            "--name-status",
            "-z",
            "--no-renames",
            "--no-ext-diff",
            parent,
            id,
            "--",
        ]);
        parse::name_status(&self.run_ok("diff", argv).await?)
    }

    /// The names `git diff --name-only -z --no-renames --no-ext-diff
    /// <what> --` lists: `what` is the commits, or the options (`--cached`,
    /// `--diff-filter=A`) and then the commits, to compare.
    pub(super) async fn diff_names(&self, what: &[&str]) -> Result<Vec<String>, VcsError> {
        let mut argv = os_args(["--name-only", "-z", "--no-renames", "--no-ext-diff"]);
        argv.extend(os_args(what.iter().copied()));
        argv.push("--".into());
        parse::nul_list(&self.run_ok("diff", argv).await?)
    }

    /// The paths with unmerged entries in the index.
    pub(super) async fn unmerged_paths(&self) -> Result<Vec<String>, VcsError> {
        parse::nul_list(
            &self
                .run_ok(
                    "diff",
                    os_args(["--name-only", "-z", "--diff-filter=U", "--no-ext-diff"]),
                )
                .await?,
        )
    }

    /// Commits the work-tree content of exactly `paths` with commit `id`'s
    /// message (byte for byte) and author; the user's other staged files
    /// stay staged. No hooks: the fix's own commit ran them. The paths are
    /// added first: a git of the user's that read the index before the
    /// pick wrote it may have written its older copy back since.
    async fn commit_as(&self, id: &str, paths: &[String]) -> Result<(), VcsError> {
        // A path the commit deletes is gone from both; `add` would not
        // match it, and `commit --only` finds it in HEAD.
        let mut present = Vec::new();
        for path in paths {
            if tokio::fs::symlink_metadata(self.root.join(path))
                .await
                .is_ok()
            {
                present.push(path.clone());
            }
        }
        if !present.is_empty() {
            self.run_paths("add", &["-A"], &present).await?;
        }
        let mut argv = os_args([
            "--only",
            "--no-verify",
            "--cleanup=verbatim",
            "--quiet",
            "-C",
            id,
            "--",
        ]);
        argv.extend(paths.iter().map(OsString::from));
        let mut attempt = 0;
        loop {
            let out = self.run("commit", argv.clone(), None).await?;
            // The user committed between this commit's read of HEAD and
            // its update of it: git changed nothing; again on the new HEAD.
            if out.status.success() || attempt >= REF_MOVED_RETRIES || !head_moved(&out.stderr) {
                return out.into_ok().map(|_| ());
            }
            attempt += 1;
            tokio::time::sleep(std::time::Duration::from_millis(5 * u64::from(attempt))).await;
        }
    }

    /// Puts `paths` back to HEAD in the index and work tree after a
    /// landing of `id` that did not complete (a file HEAD and the index do
    /// not know is deleted), each file's content saved to the trash first
    /// (they held nothing of the user's when the landing began; whatever is
    /// there now is kept there).
    async fn undo_landing(&self, id: &str, paths: &[String]) -> Result<(), VcsError> {
        if paths.is_empty() {
            return Ok(());
        }
        if let Some(trash) = self.trash.get() {
            let short = id.get(..12).unwrap_or(id);
            let reason = format!("landing of {short} undone on the checked-out branch");
            for path in paths {
                if tokio::fs::symlink_metadata(self.root.join(path))
                    .await
                    .is_err()
                {
                    continue;
                }
                trash.put(&self.root, path, &reason).map_err(|e| {
                    VcsError::Other(format!(
                        "cannot undo the landing of {short}: {path} could not be saved to the trash first: {e}"
                    ))
                })?;
            }
        }
        let head = self.head().await?;
        self.put_back(&head, paths.to_vec()).await.map(|_| ())
    }
}

/// A commit's author, as git's environment variables take it.
struct Author {
    name: String,
    email: String,
    /// `<seconds since the epoch> <zone>`, git's internal date format.
    date: String,
}

/// The author and the raw message (the bytes after the first empty line)
/// of a raw commit object.
fn author_and_message(raw: &[u8]) -> Option<(Author, Vec<u8>)> {
    let split = raw.windows(2).position(|w| w == b"\n\n");
    let (headers, message) = match split {
        Some(i) => (&raw[..i], raw[i + 2..].to_vec()),
        None => (raw, Vec::new()),
    };
    let headers = String::from_utf8_lossy(headers);
    let line = headers.lines().find_map(|l| l.strip_prefix("author "))?;
    let open = line.rfind(" <")?;
    let close = line.rfind("> ")?;
    (open < close).then(|| {
        (
            Author {
                name: line[..open].to_owned(),
                email: line[open + 2..close].to_owned(),
                date: line[close + 2..].to_owned(),
            },
            message,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::author_and_message;

    #[test]
    fn the_author_and_the_message_come_out_as_stored() {
        let raw = b"tree 1\nparent 2\nauthor A. N. Other <a@x.invalid> 1700000000 +0130\ncommitter C <c@x> 1 +0000\n\n  subject \n\nbody\n";
        let (author, message) = author_and_message(raw).unwrap();
        assert_eq!(author.name, "A. N. Other");
        assert_eq!(author.email, "a@x.invalid");
        assert_eq!(author.date, "1700000000 +0130");
        assert_eq!(message, b"  subject \n\nbody\n");
        assert!(author_and_message(b"tree 1\n\nno author").is_none());
    }
}
