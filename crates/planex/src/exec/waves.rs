//! The per-wave CSVs of the rows started and the checkpoint taken when a
//! wave completes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use orchestrator_core::scheduler::{JobId, Scheduler};
use orchestrator_core::state::write_csv_atomic;

use crate::error::PlanexError;
use crate::session::{Session, SessionState};

/// Temporary per-wave CSVs and wave-completion checkpoints.
pub(super) struct WaveFiles {
    headers: Vec<String>,
    /// Which wave each pending row is in.
    wave_of: HashMap<String, u32>,
    /// Rows not yet final, per wave.
    remaining: BTreeMap<u32, usize>,
    /// Rows started, per wave: the cells of the wave CSV.
    started: BTreeMap<u32, Vec<Vec<String>>>,
    /// Waves that became complete since the last checkpoint.
    completed: BTreeSet<u32>,
    /// Name prefix of the wave CSVs (`explore-wave-` / `task-wave-`).
    prefix: &'static str,
}

impl WaveFiles {
    /// The wave bookkeeping of the pending jobs of `sched`; the wave CSVs
    /// have `headers` and names starting with `prefix`.
    pub(super) fn new(sched: &Scheduler, headers: Vec<String>, prefix: &'static str) -> Self {
        let mut wave_of = HashMap::new();
        let mut remaining = BTreeMap::new();
        for (i, spec) in sched.specs().iter().enumerate() {
            let job = JobId(i);
            if sched.state(job) == orchestrator_core::scheduler::JobState::Pending {
                let wave = sched.wave(job);
                wave_of.insert(spec.id.clone(), wave);
                *remaining.entry(wave).or_insert(0usize) += 1;
            }
        }
        Self {
            headers,
            wave_of,
            remaining,
            started: BTreeMap::new(),
            completed: BTreeSet::new(),
            prefix,
        }
    }

    fn path(&self, session: &Session, wave: u32) -> PathBuf {
        session.dir().join(format!("{}{wave}.csv", self.prefix))
    }

    /// A row of `wave` started: (re)writes the wave's CSV with it.
    pub(super) fn started(
        &mut self,
        session: &Session,
        wave: u32,
        cells: Vec<String>,
    ) -> Result<(), PlanexError> {
        let path = self.path(session, wave);
        let rows = self.started.entry(wave).or_default();
        rows.push(cells);
        write_csv_atomic(path, &self.headers, rows)?;
        Ok(())
    }

    /// A row became final.
    pub(super) fn row_final(&mut self, id: &str) {
        if let Some(wave) = self.wave_of.remove(id)
            && let Some(left) = self.remaining.get_mut(&wave)
        {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.completed.insert(wave);
            }
        }
    }

    /// Checkpoints when a wave completed since the last call, and removes the
    /// completed waves' CSVs.
    pub(super) fn flush(
        &mut self,
        session: &mut Session,
        state: &SessionState,
    ) -> Result<(), PlanexError> {
        if self.completed.is_empty() {
            return Ok(());
        }
        session.checkpoint(state)?;
        for wave in std::mem::take(&mut self.completed) {
            session.remove_file(&self.path(session, wave))?;
        }
        Ok(())
    }

    /// Removes every wave CSV this run wrote.
    pub(super) fn remove_all(&self, session: &Session) -> Result<(), PlanexError> {
        for wave in self.started.keys() {
            session.remove_file(&self.path(session, *wave))?;
        }
        Ok(())
    }
}
