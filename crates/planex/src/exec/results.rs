//! Task results made of the last report of a task's agent: its findings,
//! the files it modified (as reported and as seen changed) and its status.

use serde_json::Value;

use orchestrator_core::retry::{HistoryEntry, MilestoneOutcome};

use crate::journal::{PausedTask, TaskResult};
use crate::protocol::{TASK_FINDINGS_MAX, list_field, str_field, truncate_chars};
use crate::rows::RowStatus;

/// The report of the last answer: its JSON and the files the backend saw changed.
pub(super) type LastReport = Option<(Value, Vec<String>)>;

/// The result of a task that passed, made of its last report.
pub(super) fn completed_task(id: &str, last: LastReport) -> TaskResult {
    let mut r = result_from_report(id, last);
    r.status = RowStatus::Completed;
    r.error.clear();
    r
}

/// The result of a task that failed with `error`, made of its last report.
pub(super) fn failed_task(id: &str, last: LastReport, error: String) -> TaskResult {
    let mut r = result_from_report(id, last);
    r.status = RowStatus::Failed;
    r.error = error;
    r
}

/// A task result of `last` (status pending, no error).
fn result_from_report(id: &str, last: LastReport) -> TaskResult {
    let (value, changed) = last.unwrap_or((Value::Null, Vec::new()));
    let mut files = list_field(value.get("files_modified"));
    for f in changed {
        if !files.contains(&f) {
            files.push(f);
        }
    }
    TaskResult {
        id: id.to_owned(),
        status: RowStatus::Pending,
        findings: truncate_chars(&str_field(&value, "findings"), TASK_FINDINGS_MAX),
        files_modified: files,
        tests_passed: value.get("tests_passed").and_then(Value::as_bool),
        acceptance_met: str_field(&value, "acceptance_met"),
        error: String::new(),
        verified: None,
    }
}

/// What a task job yields.
pub(crate) enum TaskOutput {
    /// Completed or failed.
    Done(TaskResult),
    /// Needs a human; resume from the state.
    Paused(PausedTask),
}

/// The last failed attempt's summary, or `reason` when no attempt ran.
pub(super) fn failure_text(history: &[HistoryEntry], reason: &str) -> String {
    orchestrator_core::retry::attempts(history)
        .last()
        .filter(|a| !a.passed())
        .map_or_else(|| reason.to_owned(), |a| a.summary())
}

/// The output of a task whose milestone did not pass: failed, with the last
/// failure (and `note`) as its error, or — needing a human — paused, unless
/// `auto_yes` makes it a failure naming the escalation. A passed milestone
/// is the completed task.
pub(super) fn unfinished(
    id: &str,
    last: LastReport,
    outcome: MilestoneOutcome,
    auto_yes: bool,
    note: &str,
) -> TaskOutput {
    match outcome {
        MilestoneOutcome::Passed { .. } => TaskOutput::Done(completed_task(id, last)),
        MilestoneOutcome::Failed { reason, history } => TaskOutput::Done(failed_task(
            id,
            last,
            format!("{}{note}", failure_text(&history, &reason)),
        )),
        MilestoneOutcome::NeedsHuman {
            reason,
            report_markdown,
            state,
        } => {
            if auto_yes {
                let error = format!(
                    "{} (escalated: {reason}){note}",
                    failure_text(&state.history, &reason)
                );
                TaskOutput::Done(failed_task(id, last, error))
            } else {
                TaskOutput::Paused(PausedTask {
                    id: id.to_owned(),
                    reason,
                    report_markdown,
                    state,
                })
            }
        }
    }
}
