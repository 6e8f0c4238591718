//! A session's `trash/`: the safety net under every revert.
//!
//! Before the engine restores or deletes a path — a failed attempt's
//! rollback in its worktree, the removal of a worktree that holds changes
//! nobody committed (a slot a kill left behind, an attempt thrown away) —
//! the path's current bytes are copied here, with its mode, or as the
//! symlink it was. It is a net for the engine's own mistakes, not where a
//! user's edits go (the engine never reverts those): even a wrong decision
//! then loses nothing.
//!
//! ```text
//!  <session>/trash/
//!    trash.json        the manifest: one TrashEntry per saved path (atomic)
//!    1/src/lib.rs      entry 1's bytes, at its repository-relative path
//!    2/notes.txt       …
//! ```
//!
//! A [`Trash`] is given to the version control of the session's repository
//! ([`crate::Vcs::set_trash`]); the worktrees made from it share it, so
//! every revert the flow makes goes through it without the flow naming it.
//! Nothing here deletes a trash: only the explicit `orchestrator trash
//! clean` does ([`remove_trash`]).

use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

mod render;
#[cfg(test)]
mod tests;

pub use render::{human_size, render_entries, render_saved, render_saved_markdown};

/// The folder name of a session's trash.
pub const TRASH_DIR: &str = "trash";
/// The manifest's file name inside a trash folder.
pub const MANIFEST: &str = "trash.json";

/// Why a trash operation failed; each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrashError {
    /// Reading or writing a file failed.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The manifest could not be read or written.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// No entry has this number.
    #[error("{} has no entry {id} (it lists {known})", dir.display())]
    NoEntry {
        /// The trash folder.
        dir: PathBuf,
        /// The entry asked for.
        id: u32,
        /// The entries it has, for the message.
        known: String,
    },
    /// An entry's path leaves its folder (`..`, absolute): the manifest
    /// was edited by hand.
    #[error("entry {id} of {} names {path:?}, which is not a relative path inside the repository", dir.display())]
    BadPath {
        /// The trash folder.
        dir: PathBuf,
        /// The entry.
        id: u32,
        /// Its path.
        path: String,
    },
    /// Restoring would overwrite a file whose content is not the entry's.
    #[error("refusing to overwrite {}: it exists and differs from trash entry {id}; move it away, or restore with --to DIR", path.display())]
    WouldOverwrite {
        /// The entry.
        id: u32,
        /// The file in the way.
        path: PathBuf,
    },
}

/// What a saved path was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file, with its Unix permission bits.
    File {
        /// `st_mode & 0o7777`.
        mode: u32,
    },
    /// A symbolic link, kept as a link.
    Symlink {
        /// Where it pointed.
        target: String,
    },
}

/// One saved path, as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrashEntry {
    /// Its number in this trash (1, 2, …).
    pub id: u32,
    /// Where it was, absolute (a worktree's folder may be gone since).
    pub original: PathBuf,
    /// Its path relative to the repository (or worktree) root, `/`-separated.
    pub path: String,
    /// A file or a symlink.
    #[serde(flatten)]
    pub kind: EntryKind,
    /// Its size in bytes (a symlink's: its target's length).
    pub size: u64,
    /// Why the engine was about to restore or delete it.
    pub reason: String,
    /// When it was saved, Unix milliseconds.
    pub at_ms: i64,
}

impl TrashEntry {
    /// Where the entry's bytes are, relative to the trash folder.
    pub fn stored(&self) -> PathBuf {
        Path::new(&self.id.to_string()).join(&self.path)
    }
}

/// The manifest file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Every entry, in the order saved.
    pub entries: Vec<TrashEntry>,
}

/// What [`Trash::restore`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// The bytes were written at this path.
    Written(PathBuf),
    /// The path already held exactly the entry's content.
    AlreadyThere(PathBuf),
}

/// A session's trash folder; see the module documentation.
#[derive(Debug)]
pub struct Trash {
    dir: PathBuf,
    /// The manifest as last written, and the entries saved by this value.
    state: Mutex<Option<(Manifest, Vec<TrashEntry>)>>,
}

impl Trash {
    /// The trash in `dir` (made on the first save).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            state: Mutex::new(None),
        }
    }

    /// The trash of the session whose folder is `session_dir`:
    /// `<session_dir>/trash`.
    pub fn for_session(session_dir: &Path) -> Self {
        Self::new(session_dir.join(TRASH_DIR))
    }

    /// The trash folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The session's name, as `orchestrator trash` takes it: the name of
    /// the folder holding the trash.
    pub fn session(&self) -> String {
        session_of(&self.dir)
    }

    /// What this value saved, as a report's section (with the commands to
    /// list and restore); empty when it saved nothing.
    pub fn report(&self) -> String {
        render_saved(&self.session(), &self.dir, &self.saved())
    }

    /// [`Trash::report`] as a Markdown `## Trash` section.
    pub fn report_markdown(&self) -> String {
        render_saved_markdown(&self.session(), &self.saved())
    }

    /// Saves the current bytes of `root/rel` before the engine restores
    /// or deletes it; `None` when there is nothing to save (the path is
    /// missing, or a folder — a nested repository, which is never deleted).
    pub fn put(
        &self,
        root: &Path,
        rel: &str,
        reason: &str,
    ) -> Result<Option<TrashEntry>, TrashError> {
        let full = root.join(rel);
        let meta = match std::fs::symlink_metadata(&full) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(io("read", &full, source)),
        };
        if meta.is_dir() {
            return Ok(None);
        }
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (manifest, added) = match &mut *guard {
            Some(state) => state,
            empty => empty.insert((read_manifest(&self.dir)?, Vec::new())),
        };
        let id = manifest.entries.iter().map(|e| e.id).max().unwrap_or(0) + 1;
        let (kind, size) = copy_out(&full, &meta, &self.dir.join(id.to_string()).join(rel))?;
        let entry = TrashEntry {
            id,
            original: full,
            path: rel.to_owned(),
            kind,
            size,
            reason: reason.to_owned(),
            at_ms: jiff::Timestamp::now().as_millisecond(),
        };
        manifest.entries.push(entry.clone());
        crate::state::write_json_atomic(self.dir.join(MANIFEST), &*manifest)?;
        added.push(entry.clone());
        Ok(Some(entry))
    }

    /// The entries this value saved (for the run's report).
    pub fn saved(&self) -> Vec<TrashEntry> {
        let guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        guard.as_ref().map(|(_, a)| a.clone()).unwrap_or_default()
    }

    /// Every entry the manifest lists.
    pub fn entries(&self) -> Result<Vec<TrashEntry>, TrashError> {
        Ok(read_manifest(&self.dir)?.entries)
    }

    /// Brings entry `id` back under `root` at its relative path; never
    /// overwrites a file whose content is not the entry's.
    pub fn restore(&self, id: u32, root: &Path) -> Result<Restored, TrashError> {
        let entries = self.entries()?;
        let Some(entry) = entries.iter().find(|e| e.id == id) else {
            return Err(TrashError::NoEntry {
                dir: self.dir.clone(),
                id,
                known: known_ids(&entries),
            });
        };
        if !is_inside(&entry.path) {
            return Err(TrashError::BadPath {
                dir: self.dir.clone(),
                id,
                path: entry.path.clone(),
            });
        }
        let from = self.dir.join(entry.stored());
        let to = root.join(&entry.path);
        if let Ok(meta) = std::fs::symlink_metadata(&to) {
            return if same_content(&from, &to, &meta, &entry.kind) {
                Ok(Restored::AlreadyThere(to))
            } else {
                Err(TrashError::WouldOverwrite { id, path: to })
            };
        }
        copy_back(&from, &to, &entry.kind).map_err(|(what, path, e)| io(what, &path, e))?;
        Ok(Restored::Written(to))
    }
}

/// The manifest of the trash in `dir` (empty when there is none).
pub fn read_manifest(dir: &Path) -> Result<Manifest, TrashError> {
    Ok(crate::state::read_json_if_exists::<Manifest>(dir.join(MANIFEST))?.unwrap_or_default())
}

/// The name of the session whose trash is `dir` (its parent folder's).
pub fn session_of(dir: &Path) -> String {
    dir.parent().and_then(Path::file_name).map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Deletes the trash folder `dir` and returns the bytes its entries held.
pub fn remove_trash(dir: &Path) -> Result<u64, TrashError> {
    let freed = read_manifest(dir)?.entries.iter().map(|e| e.size).sum();
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(freed),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(source) => Err(io("remove", dir, source)),
    }
}

fn io(what: &'static str, path: &Path, source: std::io::Error) -> TrashError {
    TrashError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn known_ids(entries: &[TrashEntry]) -> String {
    if entries.is_empty() {
        return "none".to_owned();
    }
    let ids: Vec<String> = entries.iter().map(|e| e.id.to_string()).collect();
    ids.join(", ")
}

/// Whether `rel` is a non-empty relative path with no `..`.
fn is_inside(rel: &str) -> bool {
    let path = Path::new(rel);
    !rel.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Copies `full` (described by `meta`) to `to`, keeping a symlink a
/// symlink and a file's mode; fsyncs a copied file.
fn copy_out(
    full: &Path,
    meta: &std::fs::Metadata,
    to: &Path,
) -> Result<(EntryKind, u64), TrashError> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io("create", parent, e))?;
    }
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(full).map_err(|e| io("read the link", full, e))?;
        make_symlink(&target, to).map_err(|e| io("create the link", to, e))?;
        let target = target.to_string_lossy().into_owned();
        let size = target.len() as u64;
        return Ok((EntryKind::Symlink { target }, size));
    }
    let size = std::fs::copy(full, to).map_err(|e| io("copy", full, e))?;
    std::fs::File::open(to)
        .and_then(|f| f.sync_all())
        .map_err(|e| io("sync", to, e))?;
    Ok((
        EntryKind::File {
            mode: mode_of(meta),
        },
        size,
    ))
}

type CopyFailure = (&'static str, PathBuf, std::io::Error);

/// Writes entry bytes `from` at `to`, which does not exist: a file through
/// a temporary file in the same folder, renamed without replacing.
fn copy_back(from: &Path, to: &Path, kind: &EntryKind) -> Result<(), CopyFailure> {
    let parent = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| ("create", parent.to_path_buf(), e))?;
    if let EntryKind::Symlink { target } = kind {
        return make_symlink(Path::new(target), to).map_err(|e| ("create the link", to.into(), e));
    }
    let temp = tempfile::Builder::new()
        .prefix(".trash-restore")
        .tempfile_in(parent)
        .map_err(|e| ("create a temporary file in", parent.to_path_buf(), e))?;
    std::fs::copy(from, temp.path()).map_err(|e| ("copy", from.to_path_buf(), e))?;
    temp.as_file()
        .sync_all()
        .map_err(|e| ("sync", temp.path().to_path_buf(), e))?;
    temp.persist_noclobber(to)
        .map_err(|e| ("write", to.to_path_buf(), e.error))?;
    Ok(())
}

/// Whether `to` (described by `meta`) already holds the entry stored at
/// `from`.
fn same_content(from: &Path, to: &Path, meta: &std::fs::Metadata, kind: &EntryKind) -> bool {
    match kind {
        EntryKind::Symlink { target } => {
            meta.file_type().is_symlink()
                && std::fs::read_link(to).is_ok_and(|t| t.to_string_lossy() == *target)
        }
        EntryKind::File { .. } => {
            meta.is_file()
                && match (std::fs::read(from), std::fs::read(to)) {
                    (Ok(a), Ok(b)) => a == b,
                    _ => false,
                }
        }
    }
}

#[cfg(unix)]
fn mode_of(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(meta: &std::fs::Metadata) -> u32 {
    if meta.permissions().readonly() {
        0o444
    } else {
        0o644
    }
}

#[cfg(unix)]
fn make_symlink(target: &Path, at: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, at)
}

#[cfg(not(unix))]
fn make_symlink(target: &Path, at: &Path) -> std::io::Result<()> {
    // Without Unix symlinks, the link's target is kept as the file's text.
    std::fs::write(at, target.to_string_lossy().as_bytes())
}
