//! The groups' progress files (`fix-progress-N.json`), rewritten at every
//! step, and how a finding or a group ends in them.

use super::*;

/// A group's progress file, rewritten atomically on every change.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    path: PathBuf,
    state: Arc<Mutex<FixProgress>>,
    sink: Arc<dyn EventSink>,
}

impl Progress {
    pub(crate) fn new(path: PathBuf, progress: FixProgress, sink: Arc<dyn EventSink>) -> Self {
        Self {
            path,
            state: Arc::new(Mutex::new(progress)),
            sink,
        }
    }

    pub(crate) fn snapshot(&self) -> FixProgress {
        lock(&self.state).clone()
    }

    /// Applies `f`, recounts, stamps `last_update` and writes the file.
    pub(crate) fn update(&self, f: impl FnOnce(&mut FixProgress)) {
        let result = {
            let mut st = lock(&self.state);
            f(&mut st);
            st.recount();
            st.last_update = now();
            write_json_atomic(&self.path, &*st)
        };
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
