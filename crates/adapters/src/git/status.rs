//! Status and dirty files: the porcelain status, content digests of
//! working-tree files, and the `info/exclude` patterns that keep files out
//! of both.

use std::collections::BTreeMap;
use std::path::PathBuf;

use orchestrator_core::vcs::Status;
use orchestrator_core::{CommitId, VcsError};
use tokio::io::AsyncWriteExt;

use super::run::os_args;
use super::{GitVcs, parse};

impl GitVcs {
    /// The ignored entries of the working tree, relative and sorted: an
    /// ignored folder once, with a trailing `/` (git does not descend into
    /// it), an ignored file as itself. Engine folders excluded through
    /// `info/exclude` are among them.
    pub async fn ignored_entries(&self) -> Result<Vec<String>, VcsError> {
        let out = self
            .run_ok(
                "ls-files",
                os_args([
                    "-z",
                    "--others",
                    "--ignored",
                    "--exclude-standard",
                    "--directory",
                ]),
            )
            .await?;
        let mut entries = parse::nul_list(&out)?;
        entries.sort();
        Ok(entries)
    }

    /// Status, optionally limited to `paths`.
    pub(super) async fn status_of(&self, paths: Option<&[String]>) -> Result<Status, VcsError> {
        let args = [
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ];
        let out = match paths {
            None => self.run_ok("status", os_args(args)).await?,
            Some(paths) => self.run_paths("status", &args, paths).await?,
        };
        parse::porcelain_status(&out)
    }

    /// Status and the HEAD commit, read by one `git status` (porcelain v2
    /// with its branch header): one process where [`Vcs::status`] and
    /// [`Vcs::head`] take two, and both from the same moment.
    ///
    /// [`Vcs::status`]: orchestrator_core::Vcs::status
    /// [`Vcs::head`]: orchestrator_core::Vcs::head
    pub(super) async fn status_and_head(&self) -> Result<(Status, CommitId), VcsError> {
        let parse::BranchStatus { head, status, .. } = self.branch_status().await?;
        let head = head.ok_or_else(|| {
            VcsError::Other(format!(
                "HEAD of {} names no commit yet (a branch with no commits)",
                self.root.display()
            ))
        })?;
        Ok((status, CommitId(head)))
    }

    /// `git status --porcelain=v2 --branch`: the files, the HEAD commit
    /// and the branch, from one process.
    pub(super) async fn branch_status(&self) -> Result<parse::BranchStatus, VcsError> {
        let argv = os_args([
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ]);
        let out = self.run_ok("status", argv).await?;
        parse::porcelain_v2_status(&out)
    }

    /// Content digests of the given working-tree paths: the git blob id of a
    /// regular file's bytes (no filters), `symlink:<target>` for a symlink,
    /// `directory` for a directory (a nested repository), `None` for a
    /// missing file.
    pub(super) async fn digests(
        &self,
        paths: impl IntoIterator<Item = &String>,
    ) -> Result<BTreeMap<String, Option<String>>, VcsError> {
        let mut digests = BTreeMap::new();
        let mut files = Vec::new();
        for path in paths {
            let full = self.root.join(path);
            let digest = match tokio::fs::symlink_metadata(&full).await {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    return Err(VcsError::Other(format!(
                        "cannot read {}: {e}",
                        full.display()
                    )));
                }
                Ok(meta) if meta.file_type().is_symlink() => {
                    let target = tokio::fs::read_link(&full).await.map_err(|e| {
                        VcsError::Other(format!("cannot read link {}: {e}", full.display()))
                    })?;
                    Some(format!("symlink:{}", target.display()))
                }
                Ok(meta) if meta.is_dir() => Some("directory".to_owned()),
                Ok(_) => {
                    files.push(path.clone());
                    continue;
                }
            };
            digests.insert(path.clone(), digest);
        }
        let out = self
            .run_paths("hash-object", &["--no-filters"], &files)
            .await?;
        let hashes: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_owned)
            .collect();
        if hashes.len() != files.len() {
            return Err(VcsError::Other(format!(
                "git hash-object returned {} ids for {} files",
                hashes.len(),
                files.len()
            )));
        }
        digests.extend(files.into_iter().zip(hashes.into_iter().map(Some)));
        Ok(digests)
    }

    /// [`Vcs::exclude`](orchestrator_core::Vcs::exclude): appends `pattern` to the
    /// common `info/exclude` unless it is there already.
    pub(super) async fn add_exclude(&self, pattern: &str) -> Result<(), VcsError> {
        if pattern.trim().is_empty() || pattern.contains(['\n', '\r', '\0']) {
            return Err(VcsError::Other(format!(
                "`{pattern}` is not a valid exclude pattern (empty or multi-line)"
            )));
        }
        let out = self
            .run_ok("rev-parse", os_args(["--git-common-dir"]))
            .await?;
        let common = PathBuf::from(String::from_utf8_lossy(&out).trim_end_matches('\n'));
        let common = if common.is_absolute() {
            common
        } else {
            self.root.join(common)
        };
        let info = common.join("info");
        let file = info.join("exclude");
        let io_error = |what: &str, e: std::io::Error| {
            VcsError::Other(format!("failed to {what} {}: {e}", file.display()))
        };
        let _guard = self.write_lock.lock().await;
        tokio::fs::create_dir_all(&info)
            .await
            .map_err(|e| io_error("create the directory of", e))?;
        let existing = match tokio::fs::read(&file).await {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_error("read", e)),
        };
        let text = String::from_utf8_lossy(&existing);
        if text.lines().any(|line| line.trim_end() == pattern) {
            return Ok(());
        }
        let mut addition = String::new();
        if !existing.is_empty() && !existing.ends_with(b"\n") {
            addition.push('\n');
        }
        addition.push_str(pattern);
        addition.push('\n');
        let mut handle = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .await
            .map_err(|e| io_error("open", e))?;
        handle
            .write_all(addition.as_bytes())
            .await
            .map_err(|e| io_error("append to", e))?;
        handle.flush().await.map_err(|e| io_error("flush", e))?;
        Ok(())
    }
}
