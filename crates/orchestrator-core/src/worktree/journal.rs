//! Where a pool's worktrees are written down: [`FileJournal`], and the
//! clean-up after a crash, [`remove_leftovers`].

use super::*;

/// A [`PoolJournal`] kept as a JSON list of slots in one file, written
/// atomically on every change (`worktrees.json` in a session folder).
#[derive(Debug)]
pub struct FileJournal {
    path: PathBuf,
    slots: Mutex<Vec<SlotRecord>>,
    sink: Option<Arc<dyn EventSink>>,
}

impl FileJournal {
    /// A journal in `path`, starting from what the file already lists (a
    /// crashed run's slots stay listed until removed).
    pub fn open(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let slots = Self::leftovers(&path);
        Self {
            path,
            slots: Mutex::new(slots),
            sink: None,
        }
    }

    /// Builder: a failed write is a warning here (the pool goes on).
    pub fn with_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// The slots a journal file lists (none when it is missing or
    /// unreadable).
    pub fn leftovers(path: &Path) -> Vec<SlotRecord> {
        crate::state::read_json_if_exists::<Vec<SlotRecord>>(path)
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    fn change(&self, f: impl FnOnce(&mut Vec<SlotRecord>)) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut slots);
        if let Err(e) = crate::state::write_json_atomic(&self.path, &*slots)
            && let Some(sink) = &self.sink
        {
            sink.emit(&Event::Warning {
                message: format!(
                    "the worktree journal {} could not be written: {e}",
                    self.path.display()
                ),
            });
        }
    }
}

impl PoolJournal for FileJournal {
    fn making(&self, slot: &SlotRecord) {
        self.change(|slots| slots.push(slot.clone()));
    }
    fn removed(&self, slot: &SlotRecord) {
        self.change(|slots| slots.retain(|s| s.path != slot.path));
    }
}

/// Removes the worktrees a crashed run's journal lists, whatever they hold
/// (what git would lose saved to the trash first,
/// [`delete_worktree_dir`]; only folders inside `within`, the pool's folder: a record naming
/// anything else is not deleted), and their branches. Returns what could
/// not be removed, with why.
pub async fn remove_leftovers(vcs: &dyn Vcs, slots: &[SlotRecord], within: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for slot in slots {
        if slot.path.parent() != Some(within) {
            problems.push(format!(
                "{} is not inside {}: left as it is",
                slot.path.display(),
                within.display()
            ));
            continue;
        }
        let reason = removal_reason(&slot.path, " left by a crash");
        if let Err(e) = delete_worktree_dir(vcs, &slot.path, &reason).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            problems.push(format!("{} could not be removed: {e}", slot.path.display()));
            continue;
        }
        if let Err(e) = vcs.worktree_remove(&slot.path, &slot.branch).await {
            problems.push(format!(
                "the worktree {} (branch {}) could not be forgotten: {e}",
                slot.path.display(),
                slot.branch
            ));
        }
    }
    problems
}
