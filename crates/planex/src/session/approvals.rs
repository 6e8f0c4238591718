//! Approvals of the gates and the state a session replays from its journal.

use super::*;

/// Who approved a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovedBy {
    /// The gate's first option (Approve / Execute) was chosen.
    Gate,
    /// `-y`: the run was told to approve every gate.
    AutoYes,
    /// `orchestrator planex approve` ([`approve_plan`](crate::approve_plan)):
    /// approved outside a run, where no gate could be asked, for the next
    /// `--continue`.
    Command,
}

/// One recorded approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// When (RFC 3339, UTC).
    pub at: String,
    /// How.
    pub by: ApprovedBy,
}

/// The approvals of a session's two plans (`session.json` field
/// `approvals`).
///
/// A plan runs only once approved: phase 2 needs the exploration plan's
/// approval, phase 4 the execution plan's. The approval is written
/// (atomically) before the phase starts, so after a crash at any instant a
/// resumed session either finds it — and goes on without asking, the
/// person having said yes — or does not, and asks the gate again. A plan
/// that was written but never approved is therefore never run by
/// `--continue` alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approvals {
    /// The exploration plan (`explore.csv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explore_plan: Option<Approval>,
    /// The execution plan (`tasks.csv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_plan: Option<Approval>,
}

impl Approvals {
    /// Whether nothing was approved yet.
    pub fn is_empty(&self) -> bool {
        self.explore_plan.is_none() && self.execution_plan.is_none()
    }

    /// The approval of the plan at `gate`.
    pub fn get(&self, gate: GatePoint) -> Option<&Approval> {
        match gate {
            GatePoint::ExplorePlan => self.explore_plan.as_ref(),
            GatePoint::ExecutionPlan => self.execution_plan.as_ref(),
        }
    }

    pub(super) fn slot(&mut self, gate: GatePoint) -> &mut Option<Approval> {
        match gate {
            GatePoint::ExplorePlan => &mut self.explore_plan,
            GatePoint::ExecutionPlan => &mut self.execution_plan,
        }
    }
}

/// What a session holds: the rows of both CSVs with the journal replayed over
/// them, and the tasks paused for a human.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    /// `explore.csv`, when the session has one.
    pub explore: Option<Vec<ExploreRow>>,
    /// `tasks.csv`, when the session has one.
    pub tasks: Option<Vec<TaskRow>>,
    /// Tasks paused for a human, by id.
    pub paused: BTreeMap<String, PausedTask>,
    /// What the engine's verification found per task, by id (verified
    /// runs only).
    pub verified: BTreeMap<String, crate::verify::Verified>,
}

impl SessionState {
    /// Applies one journal entry (idempotent: it sets values). Entries for
    /// ids that are not in the CSVs (a row removed by hand) are ignored.
    pub fn apply(&mut self, entry: &JournalEntry) {
        match entry {
            JournalEntry::Explore(r) => {
                if let Some(row) = self.explore.iter_mut().flatten().find(|row| row.id == r.id) {
                    row.status = r.status;
                    row.findings = r.findings.clone();
                    row.key_files = r.key_files.clone();
                    row.error = r.error.clone();
                }
            }
            JournalEntry::Task(r) => {
                self.paused.remove(&r.id);
                match &r.verified {
                    Some(v) => {
                        self.verified.insert(r.id.clone(), v.clone());
                    }
                    None => {
                        self.verified.remove(&r.id);
                    }
                }
                if let Some(row) = self.tasks.iter_mut().flatten().find(|row| row.id == r.id) {
                    row.status = r.status;
                    row.findings = r.findings.clone();
                    row.files_modified = r.files_modified.clone();
                    row.tests_passed = r.tests_passed;
                    row.acceptance_met = r.acceptance_met.clone();
                    row.error = r.error.clone();
                }
            }
            JournalEntry::Paused(p) => {
                if self.tasks.iter().flatten().any(|row| row.id == p.id) {
                    self.paused.insert(p.id.clone(), p.clone());
                }
            }
            JournalEntry::Reset { ids } => {
                for row in self.tasks.iter_mut().flatten() {
                    if ids.contains(&row.id) {
                        row.status = RowStatus::Pending;
                        row.error.clear();
                    }
                }
                for id in ids {
                    self.paused.remove(id);
                }
            }
        }
    }

    /// The explore rows (empty without `explore.csv`).
    pub fn explore_rows(&self) -> &[ExploreRow] {
        self.explore.as_deref().unwrap_or(&[])
    }

    /// The task rows (empty without `tasks.csv`).
    pub fn task_rows(&self) -> &[TaskRow] {
        self.tasks.as_deref().unwrap_or(&[])
    }
}
