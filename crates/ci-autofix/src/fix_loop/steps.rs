//! Small steps of an iteration: the provider's notices, the logs that can
//! be fixed (and why the others cannot), a fresh history entry.

use super::*;

/// The notices the provider has for the run, each once (e.g. "the base
/// branch requires no checks: every check counts").
pub(super) fn notices(ctx: &AutofixContext) {
    for message in ctx.provider.take_notices() {
        ctx.sink.emit(&Event::Notice { message });
    }
}

/// The logs of `failures` that can be fixed, and the reasons the others
/// cannot (a commit status of another CI has no log): said as warnings and
/// kept in the iteration's `warnings`.
pub(super) async fn fixable_logs(
    ctx: &AutofixContext,
    failures: &[crate::handoff::FailedCheck],
    warnings: &mut Vec<String>,
) -> Result<(Vec<CheckLog>, Vec<String>), AutofixError> {
    let (fixable, foreign): (Vec<CheckLog>, Vec<CheckLog>) = ctx
        .provider
        .failed_logs(failures)
        .await?
        .into_iter()
        .partition(|l| l.not_fixable.is_none());
    let reasons: Vec<String> = foreign.into_iter().filter_map(|l| l.not_fixable).collect();
    for reason in &reasons {
        ctx.sink.emit(&Event::Warning {
            message: reason.clone(),
        });
        warnings.push(reason.clone());
    }
    Ok((fixable, reasons))
}

/// A fresh history entry for `iteration` on `failures`.
pub(super) fn history_entry(
    iteration: u32,
    failures: &[crate::handoff::FailedCheck],
    warnings: Vec<String>,
) -> HistoryEntry {
    HistoryEntry {
        iteration,
        classification: String::new(),
        sub_class: String::new(),
        action: String::new(),
        patch_sha: None,
        escalation_reason: None,
        checks: failures.iter().map(|f| f.name.clone()).collect(),
        warnings,
        finished_at: String::new(),
        agent_spend: None,
        rerun: None,
    }
}
