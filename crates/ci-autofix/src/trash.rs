//! A run with the session's trash (see `orchestrator_core::trash`): the
//! loop gives the target's state folder its `trash/` when it takes the
//! lock, and every rollback of a patch and removal of a fix worktree saves
//! what it would lose there first. After the run, what it saved is said on
//! stderr and appended to the audit log, with the command to bring it back.

use std::sync::Arc;

use jiff::Timestamp;
use orchestrator_core::event::Event;

use crate::fix_loop::{self, AutofixContext, AutofixError, AutofixOutcome};
use crate::report::{append_audit, audit_header, audit_log_path};

/// Runs the loop ([`fix_loop::run_autofix`]), then reports what it saved
/// to the trash, if anything.
pub async fn run_autofix(ctx: AutofixContext) -> Result<AutofixOutcome, AutofixError> {
    let vcs = Arc::clone(&ctx.vcs);
    let sink = Arc::clone(&ctx.sink);
    let target = ctx.config.target.clone();
    let now = ctx.config.now.unwrap_or_else(Timestamp::now);
    let outcome = fix_loop::run_autofix(ctx).await;
    let saved = vcs.trash().map(|t| t.report()).unwrap_or_default();
    if saved.is_empty() {
        return outcome;
    }
    sink.emit(&Event::Warning {
        message: format!(
            "files were saved to the trash before the run reverted them.\n{}",
            saved.trim_end()
        ),
    });
    let log = audit_log_path(vcs.root(), &target, now);
    let section = vcs.trash().map(|t| t.report_markdown()).unwrap_or_default();
    if let Err(e) = append_audit(&log, &audit_header(&target, now), &section) {
        sink.emit(&Event::Warning {
            message: format!("the trash section could not be added to the audit log: {e}"),
        });
    }
    outcome
}
