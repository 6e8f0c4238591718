//! Putting one folder of the main tree into a worktree: copy-on-write
//! clones, hard links to the engine's snapshot, or plain copies. Plain
//! blocking file-system code, run on tokio's blocking pool.
//!
//! The snapshot is what keeps hard links safe for the user: a worktree's
//! files are linked to the engine's copy of the folder, never to the
//! user's, so a tool that writes into a linked file in place (an agent, a
//! test that patches a dependency) changes the snapshot — shared by the
//! run's worktrees, which is the hazard `setup` avoids — and never the
//! user's own folder. The snapshot is synced with the user's folder before
//! each use: files whose size, modification time or mode changed there are
//! copied again, files changed in the snapshot itself (its recorded inode
//! and modification time differ) are copied again, files gone are removed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The snapshot manifest's format version.
const MANIFEST_VERSION: u32 = 1;

/// One entry of a folder, as walked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Entry {
    Dir,
    Symlink {
        target: PathBuf,
    },
    File {
        size: u64,
        mtime_ns: i64,
        mode: u32,
        /// The snapshot copy's inode and modification time when it was
        /// made (a change means something wrote into it in place).
        #[serde(default)]
        snap_ino: u64,
        #[serde(default)]
        snap_mtime_ns: i64,
    },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    version: u32,
    entries: BTreeMap<String, Entry>,
}

/// Counts of one provisioning.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counts {
    /// Regular files placed in the worktree.
    pub(super) files: u64,
    /// Files (re)copied into the snapshot by this sync.
    pub(super) copied_to_snapshot: u64,
}

/// Modification time in nanoseconds since the epoch (an `i64` holds
/// dates up to 2262; JSON numbers beyond it would not round-trip).
fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

/// Walks `root` (not following symlinks), sorted, without `root` itself.
fn walk(root: &Path) -> io::Result<Vec<(String, fs::Metadata)>> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1)
    {
        let entry = entry.map_err(io::Error::other)?;
        let rel = entry
            .path()
            .strip_prefix(root)
            .map_err(io::Error::other)?
            .to_string_lossy()
            .into_owned();
        let meta = entry.path().symlink_metadata()?;
        out.push((rel, meta));
    }
    Ok(out)
}

/// A symlink's target as it should be in the worktree: an absolute target
/// inside the main tree points into the worktree instead.
pub(super) fn relocate_target(target: &Path, main: &[PathBuf], worktree: &Path) -> PathBuf {
    for root in main {
        if let Ok(rest) = target.strip_prefix(root) {
            return worktree.join(rest);
        }
    }
    target.to_path_buf()
}

/// Copies `from` to `to` through a temporary file in `to`'s folder and a
/// rename, so the copy is a new inode (links to the old one keep it).
fn copy_fresh(from: &Path, to: &Path) -> io::Result<()> {
    let parent = to.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new()
        .prefix(".orch-copy-")
        .tempfile_in(parent)?;
    fs::copy(from, tmp.path())?;
    tmp.persist(to).map_err(|e| e.error)?;
    Ok(())
}

/// Removes whatever is at `path` (a file, a symlink or a folder).
fn remove_any(path: &Path) -> io::Result<()> {
    match path.symlink_metadata() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
    }
}

/// Whether `from` can be cloned (copy-on-write) into `into_dir`.
pub(super) fn reflink_works(from: &Path, into_dir: &Path) -> bool {
    let Ok(tmp) = tempfile::Builder::new()
        .prefix(".orch-reflink-probe-")
        .tempdir_in(into_dir)
    else {
        return false;
    };
    reflink_copy::reflink(from, tmp.path().join("probe")).is_ok()
}

/// The first regular file under `dir`, to probe with.
pub(super) fn first_file(dir: &Path) -> Option<PathBuf> {
    walkdir::WalkDir::new(dir)
        .follow_links(false)
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.file_type().is_file())
        .map(walkdir::DirEntry::into_path)
}

/// Clones (reflinks) or copies every entry of `source` into `dest`.
pub(super) fn clone_tree(
    source: &Path,
    dest: &Path,
    main: &[PathBuf],
    worktree: &Path,
    reflink: bool,
) -> io::Result<Counts> {
    let mut counts = Counts::default();
    fs::create_dir_all(dest)?;
    for (rel, meta) in walk(source)? {
        let to = dest.join(&rel);
        let ft = meta.file_type();
        if ft.is_dir() {
            fs::create_dir_all(&to)?;
        } else if ft.is_symlink() {
            let target = fs::read_link(source.join(&rel))?;
            std::os::unix::fs::symlink(relocate_target(&target, main, worktree), &to)?;
        } else if ft.is_file() {
            let from = source.join(&rel);
            if reflink {
                reflink_copy::reflink(&from, &to)?;
                fs::set_permissions(&to, fs::Permissions::from_mode(meta.mode()))?;
            } else {
                fs::copy(&from, &to)?;
            }
            counts.files += 1;
        }
        // Sockets, fifos and devices are not provided.
    }
    Ok(counts)
}

/// Brings the snapshot at `snapshot` (with its manifest beside it) in line
/// with `source`; returns the manifest's entries.
fn sync_snapshot(source: &Path, snapshot: &Path) -> io::Result<(Manifest, u64)> {
    let manifest_path = snapshot.with_extension("manifest.json");
    let mut old: Manifest = fs::read(&manifest_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|m: &Manifest| m.version == MANIFEST_VERSION)
        .unwrap_or_default();
    if old.entries.is_empty() {
        // No usable manifest: whatever is there is not trusted.
        remove_any(snapshot)?;
    }
    fs::create_dir_all(snapshot)?;
    let mut new = Manifest {
        version: MANIFEST_VERSION,
        entries: BTreeMap::new(),
    };
    let mut copied = 0;
    for (rel, meta) in walk(source)? {
        let to = snapshot.join(&rel);
        let ft = meta.file_type();
        let previous = old.entries.remove(&rel);
        let entry = if ft.is_dir() {
            if !matches!(previous, Some(Entry::Dir)) {
                remove_any(&to)?;
            }
            fs::create_dir_all(&to)?;
            Entry::Dir
        } else if ft.is_symlink() {
            let target = fs::read_link(source.join(&rel))?;
            let same = matches!(&previous, Some(Entry::Symlink { target: t }) if *t == target)
                && fs::read_link(&to).is_ok_and(|t| t == target);
            if !same {
                remove_any(&to)?;
                std::os::unix::fs::symlink(&target, &to)?;
            }
            Entry::Symlink { target }
        } else if ft.is_file() {
            let (entry, fresh) = sync_file(&source.join(&rel), &to, &meta, previous.as_ref())?;
            copied += u64::from(fresh);
            entry
        } else {
            continue;
        };
        new.entries.insert(rel, entry);
    }
    // What the source no longer has, deepest first.
    let gone: BTreeSet<String> = old.entries.into_keys().collect();
    for rel in gone.iter().rev() {
        remove_any(&snapshot.join(rel))?;
    }
    let bytes = serde_json::to_vec(&new).map_err(io::Error::other)?;
    orchestrator_core::state::write_atomic(&manifest_path, &bytes).map_err(io::Error::other)?;
    Ok((new, copied))
}

/// A file of the snapshot at `to`: kept when neither the source (size,
/// mtime, mode) nor the snapshot's copy (inode, mtime) changed since the
/// manifest's `previous` entry, else copied fresh from `from` (`true`).
fn sync_file(
    from: &Path,
    to: &Path,
    meta: &fs::Metadata,
    previous: Option<&Entry>,
) -> io::Result<(Entry, bool)> {
    let (size, mtime, mode) = (meta.len(), mtime_ns(meta), meta.mode());
    let kept = match previous {
        Some(Entry::File {
            size: s,
            mtime_ns: m,
            mode: md,
            snap_ino,
            snap_mtime_ns,
        }) if (*s, *m, *md) == (size, mtime, mode) => to
            .symlink_metadata()
            .ok()
            .filter(|snap| {
                snap.is_file()
                    && snap.ino() == *snap_ino
                    && mtime_ns(snap) == *snap_mtime_ns
                    && snap.len() == size
            })
            .map(|snap| (snap.ino(), mtime_ns(&snap))),
        _ => None,
    };
    let fresh = kept.is_none();
    let (snap_ino, snap_mtime_ns) = match kept {
        Some(k) => k,
        None => {
            if to.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                remove_any(to)?;
            }
            copy_fresh(from, to)?;
            let snap = to.symlink_metadata()?;
            (snap.ino(), mtime_ns(&snap))
        }
    };
    let entry = Entry::File {
        size,
        mtime_ns: mtime,
        mode,
        snap_ino,
        snap_mtime_ns,
    };
    Ok((entry, fresh))
}

/// Syncs the snapshot of `source` at `snapshot`, then hard-links it into
/// `dest` (a file the link cannot reach, on another file system, is
/// copied).
pub(super) fn link_snapshot(
    source: &Path,
    snapshot: &Path,
    dest: &Path,
    main: &[PathBuf],
    worktree: &Path,
) -> io::Result<Counts> {
    let (manifest, copied) = sync_snapshot(source, snapshot)?;
    let mut counts = Counts {
        files: 0,
        copied_to_snapshot: copied,
    };
    fs::create_dir_all(dest)?;
    for (rel, entry) in &manifest.entries {
        let to = dest.join(rel);
        match entry {
            Entry::Dir => fs::create_dir_all(&to)?,
            Entry::Symlink { target } => {
                std::os::unix::fs::symlink(relocate_target(target, main, worktree), &to)?;
            }
            Entry::File { .. } => {
                let from = snapshot.join(rel);
                if fs::hard_link(&from, &to).is_err() {
                    fs::copy(&from, &to)?;
                }
                counts.files += 1;
            }
        }
    }
    Ok(counts)
}

/// Copies one file (a `.env`) into the worktree.
pub(super) fn copy_file(from: &Path, to: &Path) -> io::Result<()> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::copy(from, to).map(|_| ())
}

/// In a provided virtualenv at `venv` (in the worktree), the files that
/// name the main tree's path get the worktree's instead: the scripts in
/// `bin/` (their `#!` lines, `activate`), and the `.pth`, `__editable__*`
/// and `.egg-link` files of `site-packages`, which point an editable
/// install at the project's sources — without this, tests in the worktree
/// would import the main tree's code. Each such file is replaced by a
/// fresh file (never written through a link). Returns how many changed.
pub(super) fn relocate_venv(venv: &Path, main: &[PathBuf], worktree: &Path) -> io::Result<u64> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(bin) = fs::read_dir(venv.join("bin")) {
        candidates.extend(bin.filter_map(Result::ok).map(|e| e.path()));
    }
    for lib in ["lib", "lib64"] {
        let Ok(pythons) = fs::read_dir(venv.join(lib)) else {
            continue;
        };
        for python in pythons.filter_map(Result::ok) {
            let Ok(site) = fs::read_dir(python.path().join("site-packages")) else {
                continue;
            };
            candidates.extend(site.filter_map(Result::ok).map(|e| e.path()).filter(|p| {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                name.ends_with(".pth")
                    || name.starts_with("__editable__")
                    || name.ends_with(".egg-link")
            }));
        }
    }
    let to = worktree.to_string_lossy().into_owned();
    let mut changed = 0;
    for path in candidates {
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        if !meta.is_file() || meta.len() > 1 << 20 {
            continue;
        }
        let bytes = fs::read(&path)?;
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let mut new = text.clone();
        for root in main {
            new = new.replace(root.to_string_lossy().as_ref(), &to);
        }
        if new != text {
            let parent = path.parent().unwrap_or(Path::new("."));
            let tmp = tempfile::Builder::new()
                .prefix(".orch-relocate-")
                .tempfile_in(parent)?;
            fs::write(tmp.path(), new)?;
            fs::set_permissions(tmp.path(), fs::Permissions::from_mode(meta.mode()))?;
            tmp.persist(&path).map_err(|e| e.error)?;
            changed += 1;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path) {
        fs::create_dir_all(root.join("dep/lib")).unwrap();
        fs::write(root.join("dep/index.js"), "module.exports = 1;\n").unwrap();
        fs::write(root.join("dep/lib/x.js"), "x\n").unwrap();
        fs::create_dir_all(root.join(".bin")).unwrap();
        std::os::unix::fs::symlink("../dep/index.js", root.join(".bin/dep")).unwrap();
    }

    #[test]
    fn a_write_through_a_worktree_link_never_reaches_the_users_folder() {
        let main = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let wt = tempfile::tempdir().unwrap();
        let source = main.path().join("node_modules");
        tree(&source);
        let snapshot = cache.path().join("node_modules");
        let dest = wt.path().join("node_modules");
        let mains = [main.path().to_path_buf()];
        let counts = link_snapshot(&source, &snapshot, &dest, &mains, wt.path()).unwrap();
        assert_eq!((counts.files, counts.copied_to_snapshot), (2, 2));
        assert_eq!(
            fs::read_to_string(dest.join(".bin/dep")).unwrap(),
            "module.exports = 1;\n",
            "relative symlinks resolve inside the worktree"
        );
        // A tool writes into a linked file in place.
        fs::write(dest.join("dep/index.js"), "patched\n").unwrap();
        assert_eq!(
            fs::read_to_string(source.join("dep/index.js")).unwrap(),
            "module.exports = 1;\n",
            "the user's file is untouched"
        );
        // The next sync notices the snapshot was written and copies it again.
        let wt2 = tempfile::tempdir().unwrap();
        let dest2 = wt2.path().join("node_modules");
        let counts = link_snapshot(&source, &snapshot, &dest2, &mains, wt2.path()).unwrap();
        assert_eq!(counts.copied_to_snapshot, 1);
        assert_eq!(
            fs::read_to_string(dest2.join("dep/index.js")).unwrap(),
            "module.exports = 1;\n"
        );
        // The user updates a dependency and removes another file.
        fs::write(source.join("dep/lib/x.js"), "x2\n").unwrap();
        fs::remove_file(source.join("dep/index.js")).unwrap();
        let wt3 = tempfile::tempdir().unwrap();
        let dest3 = wt3.path().join("node_modules");
        let counts = link_snapshot(&source, &snapshot, &dest3, &mains, wt3.path()).unwrap();
        assert_eq!((counts.files, counts.copied_to_snapshot), (1, 1));
        assert_eq!(
            fs::read_to_string(dest3.join("dep/lib/x.js")).unwrap(),
            "x2\n"
        );
        assert!(!snapshot.join("dep/index.js").exists());
    }

    #[test]
    fn clones_and_copies_relocate_absolute_links_into_the_worktree() {
        let main = tempfile::tempdir().unwrap();
        let wt = tempfile::tempdir().unwrap();
        let source = main.path().join("node_modules");
        tree(&source);
        std::os::unix::fs::symlink(source.join("dep"), source.join("abs")).unwrap();
        let mains = [main.path().to_path_buf()];
        let dest = wt.path().join("node_modules");
        let counts = clone_tree(&source, &dest, &mains, wt.path(), false).unwrap();
        assert_eq!(counts.files, 2);
        assert_eq!(
            fs::read_link(dest.join("abs")).unwrap(),
            wt.path().join("node_modules/dep")
        );
    }

    #[test]
    fn an_editable_install_in_a_venv_points_at_the_worktree() {
        let main = tempfile::tempdir().unwrap();
        let wt = tempfile::tempdir().unwrap();
        let m = main.path().display().to_string();
        let venv = wt.path().join(".venv");
        let site = venv.join("lib/python3.11/site-packages");
        fs::create_dir_all(venv.join("bin")).unwrap();
        fs::create_dir_all(&site).unwrap();
        fs::write(
            venv.join("bin/pytest"),
            format!("#!{m}/.venv/bin/python\nimport pytest\n"),
        )
        .unwrap();
        fs::set_permissions(venv.join("bin/pytest"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(site.join("__editable__.pkg-1.0.pth"), format!("{m}/src\n")).unwrap();
        fs::write(site.join("other.pth"), "import os\n").unwrap();
        let changed = relocate_venv(&venv, &[main.path().to_path_buf()], wt.path()).unwrap();
        assert_eq!(changed, 2);
        let w = wt.path().display();
        assert_eq!(
            fs::read_to_string(venv.join("bin/pytest")).unwrap(),
            format!("#!{w}/.venv/bin/python\nimport pytest\n")
        );
        assert_eq!(
            fs::metadata(venv.join("bin/pytest")).unwrap().mode() & 0o777,
            0o755
        );
        assert_eq!(
            fs::read_to_string(site.join("__editable__.pkg-1.0.pth")).unwrap(),
            format!("{w}/src\n")
        );
    }
}
