//! The session's edit ledger (`edit-history.json`, ours, versioned): for
//! each file a fix may touch, which edits — in the coordinates of the file
//! as the findings saw it — produced which content.
//!
//! Findings are produced once, before any fix, and fixed one at a time in
//! worktrees, rolled back, cherry-picked and resumed. Rather than follow the
//! file through all of that, the ledger is keyed by content: an entry says
//! "a file with exactly this content is the baseline plus these edits". The
//! baseline content of every file of the findings is recorded when the
//! session starts (with no edits); after each fix the builtin agent reports
//! the edits it applied ([`orchestrator_core::edit::AppliedEdit`]) and the
//! new content is recorded with the old edits plus those. Before a fix, the
//! file's current content is looked up: found, the agent places every edit
//! exactly ([`orchestrator_core::edit::apply_mapped`]); not found (an agent
//! that reports no edits changed it, or landing combined fixes into a
//! content never seen), the file counts as changed in unrecorded ways and
//! the agent refuses pure insertions rather than guess, so the next lint
//! pass reports them at their fresh place.
//!
//! A rollback restores content already in the ledger, so nothing is ever
//! removed; the file is rewritten atomically after every change.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use orchestrator_core::edit::{AppliedEdit, EditHistory};
use orchestrator_core::finding::digest_hex;
use orchestrator_core::state::{read_json_if_exists, write_json_atomic};
use serde::{Deserialize, Serialize};

use crate::error::ReviewFixError;
use crate::sync::lock;

/// `edit-history.json`.
pub const LEDGER_FILE: &str = "edit-history.json";
/// Version of `edit-history.json`.
pub const LEDGER_VERSION: u32 = 1;

/// One known content of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The file, relative to the repository root.
    pub file: String,
    /// Digest of the content.
    pub digest: String,
    /// The edits that turn the baseline into this content.
    pub edits: EditHistory,
}

/// `edit-history.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerFile {
    /// Format version ([`LEDGER_VERSION`]).
    pub version: u32,
    /// Known contents, in the order they were first seen.
    pub entries: Vec<LedgerEntry>,
}

/// The ledger file and, by (file, digest), the index of each entry.
type Indexed = (LedgerFile, HashMap<(String, String), usize>);

/// The ledger of a running session.
#[derive(Debug)]
pub(crate) struct Ledger {
    path: PathBuf,
    inner: Mutex<Indexed>,
}

fn content_digest(bytes: &[u8]) -> String {
    digest_hex(&[b"content", bytes])
}

fn index(file: &LedgerFile) -> HashMap<(String, String), usize> {
    file.entries
        .iter()
        .enumerate()
        .map(|(i, e)| ((e.file.clone(), e.digest.clone()), i))
        .collect()
}

impl Ledger {
    /// Starts the ledger of a new session: the current content of `files`
    /// under `root` is their baseline.
    pub(crate) fn start(
        session_dir: &Path,
        root: &Path,
        files: &BTreeSet<String>,
    ) -> Result<(), ReviewFixError> {
        let mut entries = Vec::new();
        for file in files {
            if let Ok(bytes) = std::fs::read(root.join(file)) {
                entries.push(LedgerEntry {
                    file: file.clone(),
                    digest: content_digest(&bytes),
                    edits: EditHistory::new(),
                });
            }
        }
        let ledger = LedgerFile {
            version: LEDGER_VERSION,
            entries,
        };
        write_json_atomic(session_dir.join(LEDGER_FILE), &ledger)?;
        Ok(())
    }

    /// Opens the session's ledger; a session without one (started before
    /// the ledger existed) gets an empty one, so every file counts as
    /// changed in unrecorded ways.
    pub(crate) fn open(session_dir: &Path) -> Result<Self, ReviewFixError> {
        let path = session_dir.join(LEDGER_FILE);
        let file: LedgerFile = read_json_if_exists(&path)?.unwrap_or(LedgerFile {
            version: LEDGER_VERSION,
            entries: Vec::new(),
        });
        if file.version != LEDGER_VERSION {
            return Err(ReviewFixError::Version {
                path,
                found: file.version,
                expected: LEDGER_VERSION,
            });
        }
        let idx = index(&file);
        Ok(Self {
            path,
            inner: Mutex::new((file, idx)),
        })
    }

    fn with<R>(
        &self,
        f: impl FnOnce(&mut (LedgerFile, HashMap<(String, String), usize>)) -> R,
    ) -> R {
        f(&mut lock(&self.inner))
    }

    /// The history of each of `files` as they are now under `root`: `None`
    /// for a content the ledger does not know.
    pub(crate) fn histories(
        &self,
        root: &Path,
        files: &BTreeSet<String>,
    ) -> BTreeMap<String, Option<EditHistory>> {
        files
            .iter()
            .map(|file| {
                let history = std::fs::read(root.join(file)).ok().and_then(|bytes| {
                    let key = (file.clone(), content_digest(&bytes));
                    self.with(|(ledger, idx)| {
                        idx.get(&key).map(|&i| ledger.entries[i].edits.clone())
                    })
                });
                (file.clone(), history)
            })
            .collect()
    }

    /// Records that `file` under `root` now holds `before` plus `applied`.
    pub(crate) fn record(
        &self,
        root: &Path,
        file: &str,
        before: &EditHistory,
        applied: &[AppliedEdit],
    ) -> Result<(), ReviewFixError> {
        let Ok(bytes) = std::fs::read(root.join(file)) else {
            return Ok(());
        };
        let mut edits = before.clone();
        edits.record(applied);
        let key = (file.to_owned(), content_digest(&bytes));
        // Written under the lock, so that concurrent groups never write an
        // older snapshot over a newer one.
        self.with(|(ledger, idx)| {
            if idx.contains_key(&key) {
                return Ok(());
            }
            idx.insert(key.clone(), ledger.entries.len());
            ledger.entries.push(LedgerEntry {
                file: key.0.clone(),
                digest: key.1.clone(),
                edits,
            });
            write_json_atomic(&self.path, ledger)
        })?;
        Ok(())
    }
}
