//! [`GitVcs`]: the core [`Vcs`] trait over the `git` command-line tool.
//!
//! Every invocation goes through one private function (`GitVcs::run`) that:
//! - passes arguments as an explicit argv (never a shell), with `--` before
//!   paths, and checks them with the argument guard (`guard.rs`), which refuses
//!   any force, forced refspec, amend or subcommand outside an allowlist;
//! - fixes the environment: `GIT_*` variables that redirect the repository or
//!   change output (`GIT_DIR`, `GIT_INDEX_FILE`, `GIT_CONFIG_PARAMETERS`,
//!   `GIT_EXTERNAL_DIFF`, …) are removed, prompts and pagers are off, and
//!   pathspecs are literal (`GIT_LITERAL_PATHSPECS=1`, so `*.rs` or
//!   `:(top)` in a file name mean nothing special);
//! - overrides the configuration that would change output formats
//!   (`core.quotepath=off`, colours, encodings, rerere, auto-gc).
//!
//! User configuration otherwise applies (identity, signing, hooks).
//!
//! Output is read from machine formats only (`-z` lists, `--porcelain`,
//! `cat-file --batch`), never from localised messages. Commit messages go to
//! `git commit -F -` on stdin with `--cleanup=verbatim`, so they are stored
//! byte for byte.

mod guard;
mod parse;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_core::vcs::{CherryPick, CommitInfo, PushOutcome, Status, check_relative_path};
use orchestrator_core::{Checkpoint, CommitId, Vcs, VcsError};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::sync::Mutex;

/// Configuration given to every invocation with `-c`, so that user settings
/// cannot change the formats this adapter parses.
const FIXED_CONFIG: &[&str] = &[
    "core.quotepath=off",
    "core.pager=cat",
    "color.ui=false",
    "column.ui=never",
    "i18n.commitEncoding=UTF-8",
    "i18n.logOutputEncoding=UTF-8",
    "log.showSignature=false",
    "rerere.enabled=false",
    "status.submoduleSummary=false",
    "advice.detachedHead=false",
    "gc.auto=0",
    "maintenance.auto=false",
];

/// Environment set for every invocation.
const FIXED_ENV: &[(&str, &str)] = &[
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_PAGER", "cat"),
    ("PAGER", "cat"),
    ("GIT_EDITOR", ":"),
    ("GIT_SEQUENCE_EDITOR", ":"),
    ("GIT_MERGE_AUTOEDIT", "no"),
    ("GIT_LITERAL_PATHSPECS", "1"),
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("GIT_ADVICE", "0"),
];

/// `GIT_*` variables passed through from the caller's environment (identity,
/// transport and configuration-file locations); every other `GIT_*` variable
/// is removed.
const KEPT_GIT_ENV: &[&str] = &[
    "GIT_ASKPASS",
    "GIT_AUTHOR_DATE",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_NAME",
    "GIT_COMMITTER_DATE",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_SYSTEM",
    "GIT_EXEC_PATH",
    "GIT_HTTP_USER_AGENT",
    "GIT_PROXY_COMMAND",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSH_VARIANT",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
];

/// How many paths one command line carries at most (argv size limits).
const PATH_CHUNK: usize = 512;

/// Options for [`GitVcs::open_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitOptions {
    /// The `git` executable (looked up on `PATH` when it has no directory).
    pub program: PathBuf,
}

impl Default for GitOptions {
    fn default() -> Self {
        Self {
            program: PathBuf::from("git"),
        }
    }
}

/// A git working tree, driven through the `git` CLI.
///
/// Operations that write the index, refs or `info/exclude` are serialised by
/// a lock shared with the worktrees created from this value; reads run
/// concurrently.
#[derive(Debug, Clone)]
pub struct GitVcs {
    root: PathBuf,
    program: PathBuf,
    write_lock: Arc<Mutex<()>>,
}

/// The outcome of one git invocation.
struct GitOutput {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    command: String,
}

impl GitOutput {
    fn error(&self) -> VcsError {
        VcsError::Command {
            command: self.command.clone(),
            status: self.status.to_string(),
            stderr: stderr_text(&self.stderr),
        }
    }

    fn into_ok(self) -> Result<Vec<u8>, VcsError> {
        if self.status.success() {
            Ok(self.stdout)
        } else {
            Err(self.error())
        }
    }
}

impl GitVcs {
    /// Opens the working tree whose root is `path`, checking that `git` runs
    /// and that `path` is the top of a work tree (not a subdirectory, not a
    /// bare repository).
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, VcsError> {
        Self::open_with(path, GitOptions::default()).await
    }

    /// [`GitVcs::open`] with explicit options.
    pub async fn open_with(path: impl AsRef<Path>, options: GitOptions) -> Result<Self, VcsError> {
        let path = path.as_ref();
        let root = tokio::fs::canonicalize(path).await.map_err(|e| {
            VcsError::Other(format!(
                "cannot open {} as a git work tree: {e}",
                path.display()
            ))
        })?;
        let vcs = Self {
            root,
            program: options.program,
            write_lock: Arc::new(Mutex::new(())),
        };
        let version = vcs
            .run("version", Vec::new(), None)
            .await
            .map_err(|e| match e {
                VcsError::Command { stderr, .. } => VcsError::Other(format!(
                    "git is not available: could not run `{}`: {stderr}",
                    vcs.program.display()
                )),
                other => other,
            })?;
        if !version.status.success() {
            return Err(version.error());
        }
        let out = vcs
            .run("rev-parse", os_args(["--show-toplevel"]), None)
            .await?;
        if !out.status.success() {
            return Err(VcsError::Other(format!(
                "{} is not a git work tree: {}",
                path.display(),
                stderr_text(&out.stderr)
            )));
        }
        let top = String::from_utf8_lossy(&out.stdout)
            .trim_end_matches('\n')
            .to_owned();
        let top = tokio::fs::canonicalize(&top).await.map_err(|e| {
            VcsError::Other(format!("cannot resolve the work tree root {top}: {e}"))
        })?;
        if top != vcs.root {
            return Err(VcsError::Other(format!(
                "{} is not the root of a git work tree (its root is {})",
                path.display(),
                top.display()
            )));
        }
        Ok(vcs)
    }

    /// Runs `git <subcommand> <args>` in the work tree root. The only place a
    /// git process is started: the argument guard runs first.
    async fn run(
        &self,
        subcommand: &str,
        args: Vec<OsString>,
        stdin: Option<Vec<u8>>,
    ) -> Result<GitOutput, VcsError> {
        guard::check_args(subcommand, &args)?;
        let command_text = display_command(subcommand, &args);
        let mut cmd = Command::new(&self.program);
        cmd.current_dir(&self.root).arg("--no-pager");
        for config in FIXED_CONFIG {
            cmd.arg("-c").arg(config);
        }
        cmd.arg(subcommand).args(&args);
        for (key, _) in std::env::vars_os() {
            let name = key.to_string_lossy();
            if name.starts_with("GIT_") && !KEPT_GIT_ENV.contains(&name.as_ref()) {
                cmd.env_remove(&key);
            }
        }
        cmd.envs(FIXED_ENV.iter().copied())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| VcsError::Command {
            command: command_text.clone(),
            status: "not started".into(),
            stderr: format!("failed to start `{}`: {e}", self.program.display()),
        })?;
        let writer = child.stdin.take();
        let feed = async move {
            if let (Some(mut pipe), Some(data)) = (writer, stdin) {
                // A write error means git exited early; its status says why.
                let _ = pipe.write_all(&data).await;
                let _ = pipe.shutdown().await;
            }
        };
        let (output, ()) = tokio::join!(child.wait_with_output(), feed);
        let output = output.map_err(|e| VcsError::Command {
            command: command_text.clone(),
            status: "unknown".into(),
            stderr: format!("failed to wait for git: {e}"),
        })?;
        tracing::debug!(command = %command_text, status = %output.status, "git");
        Ok(GitOutput {
            status: output.status,
            stdout: output.stdout,
            stderr: output.stderr,
            command: command_text,
        })
    }

    /// [`GitVcs::run`], failing on a non-zero exit; returns stdout.
    async fn run_ok(&self, subcommand: &str, args: Vec<OsString>) -> Result<Vec<u8>, VcsError> {
        self.run(subcommand, args, None).await?.into_ok()
    }

    /// Runs `git <subcommand> <args> -- <paths>` over chunks of `paths`,
    /// concatenating stdout.
    async fn run_paths(
        &self,
        subcommand: &str,
        args: &[&str],
        paths: &[String],
    ) -> Result<Vec<u8>, VcsError> {
        let mut stdout = Vec::new();
        for chunk in paths.chunks(PATH_CHUNK) {
            let mut argv = os_args(args.iter().copied());
            argv.push("--".into());
            argv.extend(chunk.iter().map(OsString::from));
            stdout.extend(self.run_ok(subcommand, argv).await?);
        }
        Ok(stdout)
    }

    /// Resolves a commit id to a full hash, refusing option-like input.
    async fn resolve_commit(&self, commit: &CommitId) -> Result<String, VcsError> {
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

    /// [`Vcs::worktree_remove`] of a worktree whose directory is gone (a
    /// crash after `git worktree remove` but before `git branch -D`, or
    /// before `git worktree add` ran): drops git's record of the worktree,
    /// if it has one, and deletes the branch, if it exists.
    async fn forget_worktree(&self, path: &Path, branch: &str) -> Result<(), VcsError> {
        // git lists a worktree by its real path; the directory is gone, so
        // resolve its parent.
        let wanted = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => tokio::fs::canonicalize(parent)
                .await
                .map_or_else(|_| path.to_owned(), |p| p.join(name)),
            _ => path.to_owned(),
        };
        let _guard = self.write_lock.lock().await;
        let listing = self
            .run_ok("worktree", os_args(["list", "--porcelain"]))
            .await?;
        let registered = String::from_utf8_lossy(&listing)
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .any(|p| Path::new(p) == wanted);
        if registered {
            let mut argv = os_args(["remove", "--"]);
            argv.push(wanted.into_os_string());
            self.run_ok("worktree", argv).await?;
        }
        let branch_exists = self
            .run(
                "rev-parse",
                os_args(["--verify", "--quiet", &format!("refs/heads/{branch}")]),
                None,
            )
            .await?
            .status
            .success();
        if branch_exists {
            self.run_ok("branch", os_args(["-D", "--", branch])).await?;
        }
        Ok(())
    }

    /// Checks that `name` is a valid branch name that cannot be read as an
    /// option.
    async fn check_branch(&self, name: &str) -> Result<(), VcsError> {
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

    /// Status, optionally limited to `paths`.
    async fn status_of(&self, paths: Option<&[String]>) -> Result<Status, VcsError> {
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

    /// Content digests of the given working-tree paths: the git blob id of a
    /// regular file's bytes (no filters), `symlink:<target>` for a symlink,
    /// `directory` for a directory (a nested repository), `None` for a
    /// missing file.
    async fn digests(
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

    /// The files changed since `checkpoint` (sorted) and the pre-dirty files
    /// whose content changed.
    async fn compare(
        &self,
        checkpoint: &Checkpoint,
    ) -> Result<(Vec<String>, Vec<String>), VcsError> {
        let status = self.status().await?;
        let mut candidates: BTreeSet<String> = status.dirty_paths().into_iter().collect();
        if self.head().await? != checkpoint.head {
            let base = self.resolve_commit(&checkpoint.head).await?;
            let out = self
                .run_ok(
                    "diff",
                    os_args([
                        "--name-only",
                        "-z",
                        "--no-renames",
                        "--no-ext-diff",
                        &base,
                        "--",
                    ]),
                )
                .await?;
            candidates.extend(parse::nul_list(&out)?);
        }
        let changed = candidates
            .into_iter()
            .filter(|p| !checkpoint.dirty.contains_key(p))
            .collect();
        let now = self.digests(checkpoint.dirty.keys()).await?;
        let touched = checkpoint
            .dirty
            .iter()
            .filter(|(path, then)| now.get(*path) != Some(*then))
            .map(|(path, _)| path.clone())
            .collect();
        Ok((changed, touched))
    }

    /// The path of a worktree given to `worktree_add`/`worktree_remove`:
    /// relative paths are taken from this work tree's root.
    fn worktree_path(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.root.join(path)
        }
    }
}

#[async_trait]
impl Vcs for GitVcs {
    fn root(&self) -> &Path {
        &self.root
    }

    async fn status(&self) -> Result<Status, VcsError> {
        self.status_of(None).await
    }

    async fn head(&self) -> Result<CommitId, VcsError> {
        let out = self
            .run_ok("rev-parse", os_args(["--verify", "HEAD^{commit}"]))
            .await?;
        Ok(CommitId(String::from_utf8_lossy(&out).trim().to_owned()))
    }

    async fn current_branch(&self) -> Result<Option<String>, VcsError> {
        let out = self
            .run("symbolic-ref", os_args(["--quiet", "HEAD"]), None)
            .await?;
        if !out.status.success() {
            // Exit 1 with --quiet: HEAD is detached.
            if out.status.code() == Some(1) {
                return Ok(None);
            }
            return Err(out.error());
        }
        let full = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok(Some(
            full.strip_prefix("refs/heads/")
                .map_or(full.clone(), str::to_owned),
        ))
    }

    async fn checkpoint(&self) -> Result<Checkpoint, VcsError> {
        let head = self.head().await?;
        let dirty = self.status().await?.dirty_paths();
        let dirty = self.digests(&dirty).await?;
        Ok(Checkpoint { head, dirty })
    }

    async fn changed_since(&self, checkpoint: &Checkpoint) -> Result<Vec<String>, VcsError> {
        let (changed, touched) = self.compare(checkpoint).await?;
        if !touched.is_empty() {
            return Err(VcsError::TouchedDirty { paths: touched });
        }
        Ok(changed)
    }

    async fn restore(&self, checkpoint: &Checkpoint) -> Result<Vec<String>, VcsError> {
        let _guard = self.write_lock.lock().await;
        let head = self.head().await?;
        if head != checkpoint.head {
            return Err(VcsError::Other(format!(
                "cannot restore: HEAD moved from {} to {} since the checkpoint",
                checkpoint.head.short(),
                head.short()
            )));
        }
        // Fails with TouchedDirty before anything is changed.
        let changed = self.changed_since(checkpoint).await?;
        let (nested, files): (Vec<String>, Vec<String>) =
            changed.into_iter().partition(|p| p.ends_with('/'));
        for dir in &nested {
            tracing::warn!(path = %dir, "not removing a nested repository created since the checkpoint");
        }
        if files.is_empty() {
            return Ok(files);
        }
        let in_head: BTreeSet<String> = parse::nul_list(
            &self
                .run_paths(
                    "ls-tree",
                    &["-r", "-z", "--name-only", "--full-tree", &head.0],
                    &files,
                )
                .await?,
        )?
        .into_iter()
        .collect();
        let in_index: BTreeSet<String> = parse::nul_list(
            &self
                .run_paths("ls-files", &["-z", "--cached"], &files)
                .await?,
        )?
        .into_iter()
        .collect();
        let (known, untracked): (Vec<String>, Vec<String>) = files
            .iter()
            .cloned()
            .partition(|p| in_head.contains(p) || in_index.contains(p));
        // Files created since the checkpoint and never added: delete them.
        for path in &untracked {
            let full = self.root.join(path);
            match tokio::fs::remove_file(&full).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(VcsError::Other(format!(
                        "failed to remove {} (created since the checkpoint): {e}",
                        full.display()
                    )));
                }
            }
        }
        // Everything git knows: back to the checkpoint's HEAD, index and
        // work tree; files absent from HEAD are removed (no-overlay mode).
        if !known.is_empty() {
            let source = format!("--source={}", head.0);
            self.run_paths("restore", &[&source, "--staged", "--worktree"], &known)
                .await?;
        }
        Ok(files)
    }

    async fn commit(&self, paths: &[String], message: &str) -> Result<CommitId, VcsError> {
        let mut normalized = Vec::with_capacity(paths.len());
        for path in paths {
            check_relative_path(path)?;
            let path = normalize(path);
            if path.is_empty() {
                return Err(VcsError::BadPath {
                    path: path.clone(),
                    reason: "it names the repository root".into(),
                });
            }
            let full = self.root.join(&path);
            if let Ok(meta) = tokio::fs::symlink_metadata(&full).await
                && meta.is_dir()
            {
                return Err(VcsError::BadPath {
                    path,
                    reason: "it is a directory; commit takes file paths".into(),
                });
            }
            normalized.push(path);
        }
        if normalized.is_empty() {
            return Err(VcsError::NothingToCommit { paths: Vec::new() });
        }
        let _guard = self.write_lock.lock().await;
        let dirty = self.status_of(Some(&normalized)).await?.dirty_paths();
        if dirty.is_empty() {
            return Err(VcsError::NothingToCommit {
                paths: paths.to_vec(),
            });
        }
        self.run_paths("add", &["-A"], &dirty).await?;
        // `--only` commits the work-tree content of exactly these paths and
        // leaves anything else that was staged staged, not committed.
        let mut argv = os_args(["--only", "--cleanup=verbatim", "--no-edit", "-F", "-", "--"]);
        argv.extend(dirty.iter().map(OsString::from));
        self.run("commit", argv, Some(message.as_bytes().to_vec()))
            .await?
            .into_ok()?;
        self.head().await
    }

    async fn diff(&self, from: &CommitId, to: &CommitId) -> Result<String, VcsError> {
        let from = self.resolve_commit(from).await?;
        let to = self.resolve_commit(to).await?;
        let out = self
            .run_ok(
                "diff",
                os_args([
                    "--no-color",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-renames",
                    "-U3",
                    &from,
                    &to,
                    "--",
                ]),
            )
            .await?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    async fn log_since(&self, base: &CommitId) -> Result<Vec<CommitInfo>, VcsError> {
        let base = self.resolve_commit(base).await?;
        let ids = self
            .run_ok("rev-list", os_args(["--reverse", &format!("{base}..HEAD")]))
            .await?;
        if ids.iter().all(u8::is_ascii_whitespace) {
            return Ok(Vec::new());
        }
        let out = self
            .run("cat-file", os_args(["--batch"]), Some(ids))
            .await?
            .into_ok()?;
        parse::cat_file_batch(&out)?
            .into_iter()
            .map(|object| {
                let (tree, message) = parse::commit_object(&object.content)?;
                Ok(CommitInfo {
                    id: CommitId(object.id),
                    message,
                    tree,
                })
            })
            .collect()
    }

    async fn worktree_add(
        &self,
        path: &Path,
        branch: &str,
        base: &CommitId,
    ) -> Result<Arc<dyn Vcs>, VcsError> {
        self.check_branch(branch).await?;
        let base = self.resolve_commit(base).await?;
        let path = self.worktree_path(path);
        {
            let _guard = self.write_lock.lock().await;
            let mut argv = os_args(["add", "-b", branch, "--"]);
            argv.push(path.clone().into_os_string());
            argv.push(base.into());
            self.run_ok("worktree", argv).await?;
        }
        let root = tokio::fs::canonicalize(&path).await.map_err(|e| {
            VcsError::Other(format!(
                "cannot resolve the new worktree {}: {e}",
                path.display()
            ))
        })?;
        Ok(Arc::new(GitVcs {
            root,
            program: self.program.clone(),
            write_lock: Arc::clone(&self.write_lock),
        }))
    }

    async fn worktree_remove(&self, path: &Path, branch: &str) -> Result<(), VcsError> {
        self.check_branch(branch).await?;
        let path = self.worktree_path(path);
        if tokio::fs::symlink_metadata(&path)
            .await
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            return self.forget_worktree(&path, branch).await;
        }
        let root = tokio::fs::canonicalize(&path).await.map_err(|e| {
            VcsError::Other(format!("cannot find the worktree {}: {e}", path.display()))
        })?;
        let worktree = GitVcs {
            root,
            program: self.program.clone(),
            write_lock: Arc::clone(&self.write_lock),
        };
        let status = worktree.status().await?;
        if !status.is_clean() {
            return Err(VcsError::Other(format!(
                "refusing to remove worktree {}: it has uncommitted changes ({})",
                path.display(),
                status.dirty_paths().join(", ")
            )));
        }
        let on = worktree.current_branch().await?;
        if on.as_deref() != Some(branch) {
            return Err(VcsError::Other(format!(
                "refusing to remove worktree {}: it is on {}, not on branch `{branch}`",
                path.display(),
                on.map_or("a detached HEAD".to_owned(), |b| format!("branch `{b}`"))
            )));
        }
        let _guard = self.write_lock.lock().await;
        let mut argv = os_args(["remove", "--"]);
        argv.push(worktree.root.clone().into_os_string());
        self.run_ok("worktree", argv).await?;
        // The branch was created by worktree_add for this worktree only; its
        // commits have been cherry-picked (new ids), so `-d` would refuse.
        self.run_ok("branch", os_args(["-D", "--", branch])).await?;
        Ok(())
    }

    async fn cherry_pick(&self, commit: &CommitId) -> Result<CherryPick, VcsError> {
        let id = self.resolve_commit(commit).await?;
        let _guard = self.write_lock.lock().await;
        let out = self
            .run("cherry-pick", os_args([id.as_str()]), None)
            .await?;
        if out.status.success() {
            return Ok(CherryPick::Applied {
                commit: self.head().await?,
            });
        }
        let in_progress = self
            .run(
                "rev-parse",
                os_args(["--verify", "--quiet", "CHERRY_PICK_HEAD"]),
                None,
            )
            .await?
            .status
            .success();
        if !in_progress {
            return Err(out.error());
        }
        let conflicted = parse::nul_list(
            &self
                .run_ok(
                    "diff",
                    os_args(["--name-only", "-z", "--diff-filter=U", "--no-ext-diff"]),
                )
                .await?,
        )?;
        self.run_ok("cherry-pick", os_args(["--abort"])).await?;
        if conflicted.is_empty() {
            // Stopped without conflicts (the change is already applied and
            // the commit would be empty): aborted, reported as a failure.
            return Err(out.error());
        }
        Ok(CherryPick::Conflict { paths: conflicted })
    }

    async fn push(&self, remote: &str, branch: &str) -> Result<PushOutcome, VcsError> {
        if remote.is_empty() || remote.starts_with(['-', '+']) || remote.contains(['\0', '\n']) {
            return Err(VcsError::Other(format!("`{remote}` is not a valid remote")));
        }
        self.check_branch(branch).await?;
        let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
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

    async fn exclude(&self, pattern: &str) -> Result<(), VcsError> {
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

/// Arguments as `OsString`s.
fn os_args<I, S>(items: I) -> Vec<OsString>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    items.into_iter().map(|s| s.as_ref().to_owned()).collect()
}

/// The command line for error messages (display only, never executed).
fn display_command(subcommand: &str, args: &[OsString]) -> String {
    const MAX: usize = 400;
    let mut text = format!("git {subcommand}");
    for arg in args {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
        if text.len() > MAX {
            let cut = (0..=MAX)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            text.truncate(cut);
            text.push('…');
            break;
        }
    }
    text
}

/// Standard error as trimmed text, keeping the tail of very long output.
fn stderr_text(stderr: &[u8]) -> String {
    const MAX: usize = 4000;
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if text.len() <= MAX {
        return text.to_owned();
    }
    let start = (text.len() - MAX..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("…{}", &text[start..])
}

/// Lexically normalises a checked relative path: drops `.` components and
/// resolves `..` (which [`check_relative_path`] keeps inside the root).
fn normalize(path: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_drops_dots() {
        assert_eq!(normalize("./a/./b/../c.rs"), "a/c.rs");
        assert_eq!(normalize("a b/ü.rs"), "a b/ü.rs");
    }

    #[test]
    fn display_command_is_bounded() {
        let args: Vec<OsString> = (0..1000).map(|i| OsString::from(format!("p{i}"))).collect();
        let text = display_command("add", &args);
        assert!(text.starts_with("git add p0 p1"));
        assert!(text.chars().count() <= 402);
    }

    #[test]
    fn stderr_keeps_the_tail() {
        let long = format!("{}END", "é".repeat(5000));
        let text = stderr_text(long.as_bytes());
        assert!(text.ends_with("END"));
        assert!(text.starts_with('…'));
    }
}
