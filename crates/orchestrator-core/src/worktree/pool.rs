//! [`WorktreePool`]: one worktree per slot for a run (see the parent
//! module).

use super::*;
use crate::vcs::Checkpoint;

/// Why a worktree could not be had from a [`WorktreePool`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// Making, moving or removing the worktree failed.
    #[error("a worktree could not be made: {0}")]
    Vcs(#[from] VcsError),
    /// The worktree's setup failed (in this acquire or an earlier one of
    /// the run, which is not retried).
    #[error("{0}")]
    Setup(ProvisionError),
}

/// A worktree a [`WorktreePool`] made, as its journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRecord {
    /// The worktree's folder.
    pub path: PathBuf,
    /// Its branch.
    pub branch: String,
}

/// Where a pool writes down the worktrees it makes, so that a run killed
/// at any instant leaves a record a resume can clean up after.
pub trait PoolJournal: Send + Sync + fmt::Debug {
    /// Called before the worktree is made.
    fn making(&self, slot: &SlotRecord);
    /// Called once the worktree is gone.
    fn removed(&self, slot: &SlotRecord);
}

/// A worktree leased from a [`WorktreePool`]: clean, at the base it was
/// acquired for, provisioned.
#[derive(Debug, Clone)]
pub struct Lease {
    /// The slot's number (0-based, stable for the worktree's life).
    pub slot: usize,
    /// The worktree's folder and branch.
    pub record: SlotRecord,
    /// Version control in the worktree.
    pub vcs: Arc<dyn Vcs>,
    /// The environment for commands run in it ([`Provisioner::env`]).
    pub env: BTreeMap<String, String>,
    /// Whether this acquire made the worktree (`false`: a slot reused).
    pub fresh: bool,
    /// The commit the worktree was acquired at.
    pub base: CommitId,
}

impl Lease {
    /// The worktree's folder.
    pub fn path(&self) -> &Path {
        &self.record.path
    }

    /// A checkpoint of the worktree as it was leased. A reused slot is
    /// clean at its base by the contract of [`Vcs::worktree_move`], which
    /// checked it, so it costs no read; a new one is read (its
    /// provisioning may have written files git does not ignore).
    pub async fn checkpoint(&self) -> Result<Checkpoint, VcsError> {
        if self.fresh {
            self.vcs.checkpoint().await
        } else {
            Ok(Checkpoint::new(self.base.clone(), BTreeMap::new()))
        }
    }
}

/// What a pool has done, for the run's report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStats {
    /// Worktrees made (and provisioned).
    pub made: u32,
    /// Acquires served by moving an idle worktree.
    pub reused: u32,
    /// Time spent provisioning, in all.
    pub setup_ms: u64,
    /// Time spent making and moving worktrees (git), in all.
    pub git_ms: u64,
}

#[derive(Debug)]
struct Idle {
    slot: usize,
    record: SlotRecord,
    env: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct PoolState {
    idle: Vec<Idle>,
    next_slot: usize,
    busy: usize,
    stats: PoolStats,
    setup_failed: Option<ProvisionError>,
    announced: bool,
}

/// One worktree per slot for a run, made and provisioned once, moved to
/// each item's base; see the module documentation.
pub struct WorktreePool {
    vcs: Arc<dyn Vcs>,
    dir: PathBuf,
    branch_prefix: String,
    provisioner: Option<Arc<dyn Provisioner>>,
    journal: Option<Arc<dyn PoolJournal>>,
    sink: Option<Arc<dyn EventSink>>,
    reclaim: bool,
    state: Mutex<PoolState>,
}

impl fmt::Debug for WorktreePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorktreePool")
            .field("dir", &self.dir)
            .field("branch_prefix", &self.branch_prefix)
            .finish_non_exhaustive()
    }
}

impl WorktreePool {
    /// A pool of worktrees of `vcs`'s repository under `dir` (`slot-0`,
    /// `slot-1`, …), on branches `<branch_prefix>slot-<n>`.
    pub fn new(
        vcs: Arc<dyn Vcs>,
        dir: impl Into<PathBuf>,
        branch_prefix: impl Into<String>,
    ) -> Self {
        Self {
            vcs,
            dir: dir.into(),
            branch_prefix: branch_prefix.into(),
            provisioner: None,
            journal: None,
            sink: None,
            reclaim: false,
            state: Mutex::new(PoolState::default()),
        }
    }

    /// Builder: the slots' folders and branches are stable names the
    /// caller owns exclusively (one run of a flow per repository at a
    /// time), so whatever a crashed earlier run left at a slot's place is
    /// removed before the slot is made again. Stable places keep a build
    /// folder keyed by path (cargo's) warm from one run to the next.
    pub fn with_reclaim(mut self, reclaim: bool) -> Self {
        self.reclaim = reclaim;
        self
    }

    /// Builder: provision each new worktree with `provisioner`.
    pub fn with_provisioner(mut self, provisioner: Option<Arc<dyn Provisioner>>) -> Self {
        self.provisioner = provisioner;
        self
    }

    /// Builder: record each worktree made and removed in `journal`.
    pub fn with_journal(mut self, journal: Arc<dyn PoolJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Builder: say once, as [`Event::Notice`], what worktrees get.
    pub fn with_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// The folder the slots live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the pool has done so far.
    pub fn stats(&self) -> PoolStats {
        self.lock().stats.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A clean, provisioned worktree at `base`: an idle slot moved there,
    /// or a new one. An idle slot whose move is refused (it holds a change
    /// nobody committed) is removed and replaced.
    pub async fn acquire(&self, base: &CommitId) -> Result<Lease, PoolError> {
        loop {
            let idle = {
                let mut state = self.lock();
                if let Some(failed) = &state.setup_failed {
                    return Err(PoolError::Setup(failed.clone()));
                }
                let idle = state.idle.pop();
                state.busy += 1;
                idle
            };
            let Some(idle) = idle else {
                return match self.make(base).await {
                    Ok(lease) => Ok(lease),
                    Err(e) => {
                        self.lock().busy -= 1;
                        Err(e)
                    }
                };
            };
            let started = Instant::now();
            let moved = self
                .vcs
                .worktree_move(&idle.record.path, &idle.record.branch, base)
                .await;
            let refused = {
                let mut state = self.lock();
                state.stats.git_ms += millis(started.elapsed());
                match moved {
                    Ok(vcs) => {
                        state.stats.reused += 1;
                        return Ok(Lease {
                            slot: idle.slot,
                            record: idle.record,
                            vcs,
                            env: idle.env,
                            fresh: false,
                            base: base.clone(),
                        });
                    }
                    Err(e) => {
                        state.busy -= 1;
                        e
                    }
                }
            };
            self.warn(format!(
                "the worktree {} could not be reused ({refused}); a new one is made",
                idle.record.path.display()
            ));
            self.remove(&idle.record, " whose reuse was refused").await;
        }
    }

    /// Makes and provisions a new slot (the busy count already holds it).
    async fn make(&self, base: &CommitId) -> Result<Lease, PoolError> {
        let slot = {
            let mut state = self.lock();
            let slot = state.next_slot;
            state.next_slot += 1;
            slot
        };
        let record = SlotRecord {
            path: self.dir.join(format!("slot-{slot}")),
            branch: format!("{}slot-{slot}", self.branch_prefix),
        };
        if self.reclaim {
            self.remove(&record, " left by an earlier run").await;
        }
        if let Some(journal) = &self.journal {
            journal.making(&record);
        }
        let started = Instant::now();
        if let Err(e) = std::fs::create_dir_all(&self.dir) {
            return Err(PoolError::Vcs(VcsError::Other(format!(
                "cannot create {}: {e}",
                self.dir.display()
            ))));
        }
        let made = self
            .vcs
            .worktree_add(&record.path, &record.branch, base)
            .await;
        self.lock().stats.git_ms += millis(started.elapsed());
        let vcs = match made {
            Ok(vcs) => vcs,
            Err(e) => {
                // git may have made the branch before failing.
                self.remove(&record, " git could not make").await;
                return Err(PoolError::Vcs(e));
            }
        };
        let provisioned = match &self.provisioner {
            None => Ok(Provisioned::default()),
            Some(p) => p.provision(self.vcs.root(), vcs.root()).await,
        };
        match provisioned {
            Ok(report) => {
                let env = self
                    .provisioner
                    .as_ref()
                    .map(|p| p.env(vcs.root()))
                    .unwrap_or_default();
                let announce = {
                    let mut state = self.lock();
                    state.stats.made += 1;
                    state.stats.setup_ms += report.duration_ms;
                    !std::mem::replace(&mut state.announced, true)
                };
                if announce && let (Some(sink), Some(line)) = (&self.sink, report.describe()) {
                    sink.emit(&Event::Notice { message: line });
                }
                Ok(Lease {
                    slot,
                    record,
                    vcs,
                    env,
                    fresh: true,
                    base: base.clone(),
                })
            }
            Err(e) => {
                self.lock().setup_failed = Some(e.clone());
                drop(vcs);
                self.remove(&record, " whose setup failed").await;
                Err(PoolError::Setup(e))
            }
        }
    }

    /// Gives `lease` back: its worktree waits, clean, for the next acquire.
    pub fn release(&self, lease: Lease) {
        let mut state = self.lock();
        state.busy = state.busy.saturating_sub(1);
        state.idle.push(Idle {
            slot: lease.slot,
            record: lease.record,
            env: lease.env,
        });
    }

    /// Removes `lease`'s worktree, whatever it holds (it is the engine's:
    /// nothing of the user's is ever in a pool worktree).
    pub async fn discard(&self, lease: Lease) {
        {
            let mut state = self.lock();
            state.busy = state.busy.saturating_sub(1);
        }
        let record = lease.record.clone();
        drop(lease);
        self.remove(&record, " discarded after its attempt").await;
    }

    /// Removes every idle worktree (call once the run's items are done).
    /// Failures are warnings naming what is left.
    pub async fn close(&self) {
        let idle = std::mem::take(&mut self.lock().idle);
        for slot in idle {
            self.remove(&slot.record, " at the end of the run").await;
        }
        if std::fs::read_dir(&self.dir).is_ok_and(|mut d| d.next().is_none()) {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }

    /// Removes one worktree's folder and git's record of it and its
    /// branch; a failure is a warning.
    async fn remove(&self, record: &SlotRecord, why: &str) {
        let reason = removal_reason(&record.path, why);
        if let Err(e) = delete_worktree_dir(self.vcs.as_ref(), &record.path, &reason).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            self.warn(format!(
                "the worktree {} could not be removed: {e}",
                record.path.display()
            ));
            return;
        }
        match self.vcs.worktree_remove(&record.path, &record.branch).await {
            Ok(()) => {
                if let Some(journal) = &self.journal {
                    journal.removed(record);
                }
            }
            Err(e) => self.warn(format!(
                "the worktree {} (branch {}) could not be forgotten: {e}",
                record.path.display(),
                record.branch
            )),
        }
    }

    fn warn(&self, message: String) {
        if let Some(sink) = &self.sink {
            sink.emit(&Event::Warning { message });
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
