//! The groups' progress files (`fix-progress-N.json`), and how a finding
//! or a group ends in them.
//!
//! A file is rewritten atomically when a milestone changes (a finding's
//! result, the group's status, a new error): what a resume or a watcher
//! must not miss is on disk before the run goes on. Step-level changes (a
//! step started or ended, an attempt counted) are written at most every
//! [`STEP_WRITE_INTERVAL`]: by the next write, or by a timer when nothing
//! else changes (a long agent call), and by [`Progress::flush`] at the end
//! of the run. A fix of a few milliseconds took eight synced rewrites of
//! its group's file before.

use super::*;

/// How often step-level changes alone rewrite a progress file.
const STEP_WRITE_INTERVAL: Duration = Duration::from_millis(200);

/// A group's progress file, rewritten atomically as described in the
/// module documentation.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    path: PathBuf,
    state: Arc<Mutex<ProgressState>>,
    sink: Arc<dyn EventSink>,
}

/// The file's content and when it was last written.
#[derive(Debug)]
struct ProgressState {
    file: FixProgress,
    /// When the file was last written (`None`: not yet by this run).
    written: Option<std::time::Instant>,
    /// Changes not written yet.
    pending: bool,
    /// A timer will write them ([`Progress::schedule_flush`]).
    flush_scheduled: bool,
}

/// What changes a milestone of a progress file: the group's status, its
/// settled counts and its errors.
fn milestone(p: &FixProgress) -> (ProgressStatus, [usize; 4], usize) {
    let s = &p.summary;
    (
        p.status,
        [s.fixed, s.failed, s.not_fixable, s.deferred],
        p.errors.len(),
    )
}

impl Progress {
    pub(crate) fn new(path: PathBuf, progress: FixProgress, sink: Arc<dyn EventSink>) -> Self {
        Self {
            path,
            state: Arc::new(Mutex::new(ProgressState {
                file: progress,
                written: None,
                pending: false,
                flush_scheduled: false,
            })),
            sink,
        }
    }

    pub(crate) fn snapshot(&self) -> FixProgress {
        lock(&self.state).file.clone()
    }

    /// Applies `f`, recounts, stamps `last_update`, and writes the file
    /// when a milestone changed or the last write is older than
    /// [`STEP_WRITE_INTERVAL`].
    pub(crate) fn update(&self, f: impl FnOnce(&mut FixProgress)) {
        let result = {
            let mut st = lock(&self.state);
            let before = milestone(&st.file);
            f(&mut st.file);
            st.file.recount();
            st.file.last_update = now();
            let due = milestone(&st.file) != before
                || st
                    .written
                    .is_none_or(|at| at.elapsed() >= STEP_WRITE_INTERVAL);
            if due {
                self.write(&mut st)
            } else {
                st.pending = true;
                self.schedule_flush(&mut st)
            }
        };
        self.warn_on(result);
    }

    /// Makes sure what is pending is written when the interval is over,
    /// even if nothing else changes meanwhile (a long agent call after its
    /// step started): one timer at a time, on the run's runtime; without
    /// one, it is written now.
    fn schedule_flush(
        &self,
        st: &mut ProgressState,
    ) -> Result<(), orchestrator_core::state::StateError> {
        if st.flush_scheduled {
            return Ok(());
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return self.write(st);
        };
        let wait = st.written.map_or(Duration::ZERO, |at| {
            STEP_WRITE_INTERVAL.saturating_sub(at.elapsed())
        });
        st.flush_scheduled = true;
        let progress = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(wait).await;
            lock(&progress.state).flush_scheduled = false;
            progress.flush();
        });
        Ok(())
    }

    /// Writes what step-level changes left unwritten.
    pub(crate) fn flush(&self) {
        let result = {
            let mut st = lock(&self.state);
            if st.pending {
                self.write(&mut st)
            } else {
                Ok(())
            }
        };
        self.warn_on(result);
    }

    fn write(&self, st: &mut ProgressState) -> Result<(), orchestrator_core::state::StateError> {
        st.written = Some(std::time::Instant::now());
        st.pending = false;
        write_json_atomic(&self.path, &st.file)
    }

    fn warn_on(&self, result: Result<(), orchestrator_core::state::StateError>) {
        if let Err(e) = result {
            self.sink.emit(&Event::Warning {
                message: format!("failed to write progress file: {e}"),
            });
        }
    }

    pub(super) fn finding(&self, id: &str, f: impl FnOnce(&mut ProgressFinding)) {
        self.update(|p| {
            if let Some(entry) = p.finding_mut(id) {
                f(entry);
            }
        });
    }

    pub(crate) fn error(&self, finding: &str, error_type: &str, message: &str) {
        self.update(|p| {
            p.errors.push(ProgressError {
                finding_id: Some(finding.to_owned()),
                error_type: error_type.to_owned(),
                message: message.to_owned(),
                timestamp: now(),
            });
        });
    }

    /// Starts a flow-control step: current finding status, phase, step.
    pub(super) fn step(&self, step: &str, phase: &str, action: &str) {
        self.update(|p| {
            let ts = now();
            p.phase = phase.to_owned();
            if let Some(cur) = p.current_finding.as_mut() {
                cur.status = phase.to_owned();
                cur.action = action.to_owned();
            }
            p.flow_control.implementation_approach.push(FlowStep {
                step: step.to_owned(),
                action: action.to_owned(),
                status: "in-progress".to_owned(),
                started_at: Some(ts),
                completed_at: None,
            });
            p.flow_control.current_step = Some(step.to_owned());
        });
    }

    /// Ends the current flow-control step with `status`.
    pub(super) fn end_step(&self, status: &str) {
        self.update(|p| {
            if let Some(last) = p.flow_control.implementation_approach.last_mut()
                && last.status == "in-progress"
            {
                last.status = status.to_owned();
                last.completed_at = Some(now());
            }
        });
    }
}

/// The initial progress file of a group.
pub(crate) fn init_progress(
    group: &PlanGroup,
    number: usize,
    findings: &HashMap<String, Finding>,
) -> FixProgress {
    let entries: Vec<ProgressFinding> = group
        .findings
        .iter()
        .map(|id| {
            let f = findings.get(id);
            ProgressFinding {
                finding_id: id.clone(),
                finding_title: f.map(|f| f.title.clone()).unwrap_or_default(),
                file: f.and_then(|f| f.file.clone()).unwrap_or_default(),
                line: f.and_then(|f| f.line),
                status: ProgressStatus::Pending,
                result: None,
                attempts: 0,
                started_at: None,
                completed_at: None,
                commit_hash: None,
                test_passed: None,
                error_message: None,
                spend: None,
            }
        })
        .collect();
    let mut p = FixProgress {
        progress_id: format!("fix-progress-{number}"),
        group_id: group.group_id.clone(),
        group_name: group.group_name.clone(),
        status: ProgressStatus::Pending,
        phase: "pending".to_owned(),
        assigned_agent: None,
        started_at: None,
        last_update: now(),
        findings: entries,
        summary: ProgressSummary {
            total_findings: 0,
            pending: 0,
            in_progress: 0,
            fixed: 0,
            failed: 0,
            not_fixable: 0,
            deferred: 0,
            percent_complete: 0.0,
        },
        current_finding: None,
        flow_control: FlowControl::default(),
        errors: Vec::new(),
        verification: None,
    };
    p.recount();
    p
}

/// Marks a group completed and reports it.
pub(crate) fn finish_group(shared: &Shared, group: &PlanGroup, progress: &Progress) {
    let gid = group.group_id.clone();
    let snapshot = progress.snapshot();
    let failed = snapshot.summary.failed;
    progress.update(|p| {
        p.status = ProgressStatus::Completed;
        p.phase = "done".to_owned();
        p.current_finding = None;
        p.flow_control = FlowControl::default();
    });
    shared.sink.emit(&Event::JobFinished {
        id: gid,
        status: if failed == 0 {
            JobStatus::Completed
        } else {
            JobStatus::Failed
        },
        detail: Some(format!(
            "{} fixed, {} failed",
            snapshot.summary.fixed, snapshot.summary.failed
        )),
    });
}

/// Marks a finding failed with `message`.
pub(crate) fn finish_failed(shared: &Shared, progress: &Progress, id: &str, message: String) {
    finish_unfixed(shared, progress, id, message, FixResult::Failed);
}

/// Marks a finding `result` (failed or not fixable) with `message`.
pub(super) fn finish_unfixed(
    shared: &Shared,
    progress: &Progress,
    id: &str,
    message: String,
    result: FixResult,
) {
    progress.finding(id, |f| {
        f.status = ProgressStatus::Completed;
        f.result = Some(result);
        f.test_passed = if f.attempts > 0 { Some(false) } else { None };
        f.completed_at = Some(now());
        // An untested commit in a worktree never landed.
        f.commit_hash = None;
        f.error_message = Some(message.clone());
    });
    progress.update(|p| {
        p.current_finding = None;
        p.flow_control = FlowControl::default();
    });
    shared.sink.emit(&Event::JobFinished {
        id: id.to_owned(),
        status: if matches!(result, FixResult::NotFixable | FixResult::Deferred) {
            JobStatus::Skipped
        } else {
            JobStatus::Failed
        },
        detail: Some(first_line(&message)),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::{FixStrategy, RiskAssessment};

    fn group() -> PlanGroup {
        PlanGroup {
            group_id: "G1".to_owned(),
            group_name: "one".to_owned(),
            findings: vec!["F1".to_owned(), "F2".to_owned()],
            fix_strategy: FixStrategy {
                approach: String::new(),
                rationale: String::new(),
                complexity: "low".to_owned(),
                estimated_duration_minutes: 1,
                test_pattern: String::new(),
                rollback_plan: String::new(),
            },
            risk_assessment: RiskAssessment {
                level: "low".to_owned(),
                concerns: Vec::new(),
                mitigation: String::new(),
            },
            progress_file: None,
            batch_id: None,
            files: Vec::new(),
        }
    }

    /// A new group's progress, its file in `dir` not written yet.
    fn fresh(dir: &Path) -> (PathBuf, Progress) {
        let path = dir.join("fix-progress-1.json");
        let progress = Progress::new(
            path.clone(),
            init_progress(&group(), 1, &HashMap::new()),
            Arc::new(orchestrator_core::event::NullSink),
        );
        (path, progress)
    }

    fn on_disk(path: &Path) -> FixProgress {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// Step-level changes wait (the interval is far from over, and the
    /// timer's task cannot run before this test awaits); a result is
    /// written at once with everything before it; a flush writes what
    /// waits.
    #[tokio::test(flavor = "current_thread")]
    async fn milestones_are_written_at_once_and_steps_by_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let (path, progress) = fresh(dir.path());
        progress.update(|_| {});
        assert!(path.is_file(), "the first update writes");
        progress.step("apply_fix", "fixing", "applying");
        progress.finding("F1", |f| f.attempts = 1);
        let written = on_disk(&path);
        assert!(written.flow_control.implementation_approach.is_empty());
        assert_eq!(written.findings[0].attempts, 0);

        progress.finding("F1", |f| f.result = Some(FixResult::Fixed));
        let written = on_disk(&path);
        assert_eq!(written.summary.fixed, 1);
        assert_eq!(written.findings[0].attempts, 1);
        assert_eq!(written.flow_control.implementation_approach.len(), 1);

        progress.end_step("completed");
        assert_eq!(
            on_disk(&path).flow_control.implementation_approach[0].status,
            "in-progress"
        );
        progress.flush();
        assert_eq!(on_disk(&path), progress.snapshot());
    }

    /// A step that starts and then waits (a long agent call) reaches the
    /// file within the interval, with no further change.
    #[tokio::test(flavor = "current_thread")]
    async fn a_waiting_step_is_written_when_the_interval_is_over() {
        let dir = tempfile::tempdir().unwrap();
        let (path, progress) = fresh(dir.path());
        progress.update(|_| {});
        progress.step("apply_fix", "fixing", "applying");
        assert!(on_disk(&path).flow_control.current_step.is_none());
        // Liveness, not speed: it comes, however loaded the machine.
        for _ in 0..200 {
            if on_disk(&path).flow_control.current_step.is_some() {
                break;
            }
            tokio::time::sleep(STEP_WRITE_INTERVAL / 4).await;
        }
        assert_eq!(
            on_disk(&path).flow_control.current_step.as_deref(),
            Some("apply_fix")
        );
    }
}
