//! The session's `trash/` (see `orchestrator_core::trash`): given to the
//! repository's version control when the session opens, so every rollback
//! of an attempt and every removal of a worktree holding uncommitted files
//! saves what it would lose there first; the summary lists what this run
//! saved, with the command to bring it back.

use std::path::Path;
use std::sync::Arc;

use orchestrator_core::Vcs;
use orchestrator_core::trash::Trash;

/// Gives the session in `session_dir` its trash.
pub(crate) fn install(vcs: &dyn Vcs, session_dir: &Path) {
    vcs.set_trash(Some(Arc::new(Trash::for_session(session_dir))));
}

/// The summary's section on what this run saved to trash (empty when
/// nothing was).
pub(crate) fn summary_section(vcs: &dyn Vcs) -> String {
    vcs.trash().map(|t| t.report_markdown()).unwrap_or_default()
}
