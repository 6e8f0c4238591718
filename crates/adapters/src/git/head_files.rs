//! HEAD read from the repository's files, without a git process.
//!
//! `git rev-parse HEAD` costs a process (milliseconds); the engine reads
//! HEAD before and after most of what it does. In the plain case git keeps
//! HEAD as a file holding either a commit id (detached) or `ref:
//! refs/heads/<branch>`, and the branch as a loose file holding its commit
//! id; git writes both by lock file and rename, so a read sees the old or
//! the new content, never a mix. A loose branch file is authoritative
//! (git removes it when it packs the ref), and git refuses to point a
//! branch at anything but a commit.
//!
//! Anything else — the reftable format, a branch only in `packed-refs`, a
//! symbolic branch, an unborn branch, unexpected content — gives `None`,
//! and the caller asks git: this is a shortcut, never a second opinion.
//!
//! The index is read the same way for one thing only: whether it is still
//! the file git wrote at a moment the engine knows about. Git replaces the
//! index by lock file and rename whenever anything in it changes, and ends
//! it with a checksum of its content ([`index_fingerprint`]).

use std::path::{Path, PathBuf};

use orchestrator_core::CommitId;

use super::parse::full_object_id;

/// HEAD's commit in the work tree whose top is `root`, from its files;
/// `None` when they are not the plain case described in the module docs.
/// Blocking, but a few small reads of files git just wrote.
pub(super) fn head_from_files(root: &Path) -> Option<CommitId> {
    head_and_branch_from_files(root).map(|(head, _)| head)
}

/// [`head_from_files`], and the branch HEAD is on (`None`: detached).
pub(super) fn head_and_branch_from_files(root: &Path) -> Option<(CommitId, Option<String>)> {
    let (git_dir, common_dir) = git_dirs(root)?;
    if common_dir.join("reftable").exists() {
        return None;
    }
    let head = read_trimmed(&git_dir.join("HEAD"))?;
    if full_object_id(&head) {
        return Some((CommitId(head), None));
    }
    let reference = head.strip_prefix("ref: ")?;
    let branch = reference.strip_prefix("refs/heads/")?;
    if branch.is_empty()
        || branch
            .split('/')
            .any(|part| part.is_empty() || part.starts_with('.'))
    {
        return None;
    }
    let id = read_trimmed(&common_dir.join(reference))?;
    full_object_id(&id).then(|| (CommitId(id), Some(branch.to_owned())))
}

/// The index's length and last 32 bytes, which end with git's checksum of
/// its whole content: two equal fingerprints are the same index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct IndexFingerprint {
    len: u64,
    tail: [u8; 32],
}

/// The fingerprint of the index of the work tree whose top is `root`;
/// `None` when it cannot be read, or has no checksum (`index.skipHash`).
pub(super) fn index_fingerprint(root: &Path) -> Option<IndexFingerprint> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let (git_dir, _) = git_dirs(root)?;
    let mut file = std::fs::File::open(git_dir.join("index")).ok()?;
    let len = file.metadata().ok()?.len();
    if len < 32 {
        return None;
    }
    file.seek(SeekFrom::Start(len - 32)).ok()?;
    let mut tail = [0u8; 32];
    file.read_exact(&mut tail).ok()?;
    // SHA-1's 20 bytes are the shortest checksum; all zero: none written.
    if tail[12..].iter().all(|b| *b == 0) {
        return None;
    }
    Some(IndexFingerprint { len, tail })
}

/// The work tree's own git folder (its `HEAD`) and the repository's
/// common one (its branches): the same folder for the main work tree, the
/// `gitdir:` of a `.git` file and its `commondir` for a linked worktree.
fn git_dirs(root: &Path) -> Option<(PathBuf, PathBuf)> {
    let dot_git = root.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    if meta.is_dir() {
        return Some((dot_git.clone(), dot_git));
    }
    if !meta.is_file() {
        return None;
    }
    let pointer = read_trimmed(&dot_git)?;
    let git_dir = root.join(pointer.strip_prefix("gitdir: ")?);
    let common_dir = match read_trimmed(&git_dir.join("commondir")) {
        Some(common) => git_dir.join(common),
        None => git_dir.clone(),
    };
    Some((git_dir, common_dir))
}

/// A small file's text without its line ending; `None` when it cannot be
/// read or is not UTF-8.
fn read_trimmed(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.trim_end_matches(['\n', '\r']).to_owned())
}
