//! The working-directory package a job runs in: the files git would commit
//! (tracked, and untracked but not ignored) of the tree holding the
//! command's directory, as a deterministic zip named by its SHA-256.
//!
//! Ray unpacks a `gcs://` zip as is, with the mode in each entry's external
//! attributes (an entry without one becomes `-rw-------`), turns a symlink
//! entry into a regular file holding the link's target, and caches the
//! unpacked folder by the package's name. So: files at the root, explicit
//! modes, a symlink to a file stored as the file's content (what Ray's own
//! zipper does), fixed timestamps and sorted entries so that the same tree
//! always gives the same bytes and the same name.

use std::io::{Cursor, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;

use super::RayError;
use crate::process::{self, ProcessSpec};

/// The largest package the Jobs API accepts (its HTTP body limit).
pub const MAX_PACKAGE_BYTES: usize = 100 * 1024 * 1024;

/// A zipped tree, ready to upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// `_ray_pkg_orch_<sha256 prefix>.zip`: the same bytes, the same name.
    pub name: String,
    /// The zip.
    pub bytes: Vec<u8>,
    /// The command's directory relative to the tree's root.
    pub rel_cwd: PathBuf,
    /// The root of the packaged tree (a git work tree's top, else the
    /// command's directory).
    pub root: PathBuf,
    /// Files in the package.
    pub files: usize,
}

/// Packages the tree that holds `cwd`.
pub async fn build(cwd: &Path) -> Result<Package, RayError> {
    let (root, files) = match git_toplevel(cwd).await {
        Some(root) => {
            let files = git_files(&root).await?;
            (root, files)
        }
        None => (cwd.to_path_buf(), walk_files(cwd)),
    };
    let rel_cwd = std::fs::canonicalize(cwd)
        .ok()
        .and_then(|c| {
            let r = std::fs::canonicalize(&root).ok()?;
            c.strip_prefix(&r).ok().map(Path::to_path_buf)
        })
        .unwrap_or_default();
    let zip_root = root.clone();
    let (bytes, count) = tokio::task::spawn_blocking(move || zip_files(&zip_root, &files))
        .await
        .map_err(|e| RayError::Package(format!("the zipping task failed: {e}")))??;
    if bytes.len() > MAX_PACKAGE_BYTES {
        return Err(RayError::Package(format!(
            "the tree at {} zips to {} bytes, over the Jobs API's limit of {MAX_PACKAGE_BYTES} \
             bytes; ignore its large files (.gitignore) or run the tests locally",
            root.display(),
            bytes.len()
        )));
    }
    Ok(Package {
        name: package_name(&bytes),
        bytes,
        rel_cwd,
        root,
        files: count,
    })
}

/// The content-addressed name of a zip.
pub fn package_name(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().take(20).map(|b| format!("{b:02x}")).collect();
    format!("_ray_pkg_orch_{hex}.zip")
}

async fn git(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let spec = ProcessSpec::new("git")
        .args(args)
        .cwd(dir)
        .output_limit(256 * 1024 * 1024);
    let out = process::run(&spec).await.ok()?;
    (out.code() == Some(0)).then_some(out.stdout)
}

async fn git_toplevel(cwd: &Path) -> Option<PathBuf> {
    let out = git(cwd, &["rev-parse", "--show-toplevel"]).await?;
    let text = String::from_utf8(out).ok()?;
    Some(PathBuf::from(text.trim_end_matches('\n')))
}

/// Tracked and untracked-but-not-ignored files: what `git add -A` would
/// commit.
async fn git_files(root: &Path) -> Result<Vec<PathBuf>, RayError> {
    let out = git(
        root,
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
    )
    .await
    .ok_or_else(|| RayError::Package(format!("`git ls-files` failed in {}", root.display())))?;
    let mut files: Vec<PathBuf> = out
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .filter_map(|p| std::str::from_utf8(p).ok().map(PathBuf::from))
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// Every file under `dir` that the ignore files do not exclude (a
/// directory that is no git work tree).
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ignore::WalkBuilder::new(dir)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| !t.is_dir()))
        .filter_map(|e| e.path().strip_prefix(dir).ok().map(Path::to_path_buf))
        .collect();
    files.sort();
    files
}

/// The zip of `files` (relative to `root`): sorted, fixed times, explicit
/// modes. A file that no longer exists (deleted, not yet committed) or a
/// directory (a submodule) is left out; a symlink is stored as what it
/// points to, or left out when that is no file.
fn zip_files(root: &Path, files: &[PathBuf]) -> Result<(Vec<u8>, usize), RayError> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let mut count = 0;
    for rel in files {
        let path = root.join(rel);
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let Some(name) = rel.to_str() else {
            return Err(RayError::Package(format!(
                "{} is not valid UTF-8, which a zip entry needs",
                path.display()
            )));
        };
        let bytes = std::fs::read(&path)
            .map_err(|e| RayError::Package(format!("reading {}: {e}", path.display())))?;
        let mode = if meta.permissions().mode() & 0o111 != 0 {
            0o755
        } else {
            0o644
        };
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(mode)
            .last_modified_time(zip::DateTime::default());
        zip.start_file(name, options)
            .and_then(|()| zip.write_all(&bytes).map_err(Into::into))
            .map_err(|e| RayError::Package(format!("zipping {}: {e}", path.display())))?;
        count += 1;
    }
    let cursor = zip
        .finish()
        .map_err(|e| RayError::Package(format!("finishing the zip: {e}")))?;
    Ok((cursor.into_inner(), count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn same_tree_same_name_and_modes_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            dir.path().join("sub/run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let one = build(dir.path()).await.unwrap();
        let two = build(dir.path()).await.unwrap();
        assert_eq!(one.name, two.name);
        assert_eq!(one.bytes, two.bytes);
        assert_eq!(one.files, 2);
        let mut archive = zip::ZipArchive::new(Cursor::new(one.bytes)).unwrap();
        let run = archive.by_name("sub/run.sh").unwrap();
        assert_eq!(run.unix_mode().map(|m| m & 0o777), Some(0o755));
        drop(run);
        std::fs::write(dir.path().join("a.txt"), "b").unwrap();
        assert_ne!(build(dir.path()).await.unwrap().name, one.name);
    }
}
