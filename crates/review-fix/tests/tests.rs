//! Integration tests of the review-fix flow: with fakes (`flow`, and batch verification against one-by-one in `batch`) and end to
//! end with real git and `cargo test` on the quickstart crate (`e2e`), and
//! with the builtin agent on linters' output (`relint`, `ids`,
//! `unattemptable`); what a resume after a kill saves to the session's
//! trash (`trash`). The real-git tests share their quickstart set-up
//! (`support`). The base tested only when a run fails: `deferred_base`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "suite/batch.rs"]
mod batch;
#[path = "suite/deferred_base.rs"]
mod deferred_base;
#[path = "suite/e2e.rs"]
mod e2e;
#[path = "suite/flow.rs"]
mod flow;
#[path = "suite/ids.rs"]
mod ids;
#[path = "suite/ledger.rs"]
mod ledger;
#[path = "suite/relint.rs"]
mod relint;
#[path = "suite/sarif_out.rs"]
mod sarif_out;
#[path = "suite/support.rs"]
mod support;
#[path = "suite/trash.rs"]
mod trash;
#[path = "suite/unattemptable.rs"]
mod unattemptable;

/// A summary's `- Worktrees:` line with its wall times replaced (they
/// differ between runs; the counts do not).
fn redact_worktree_times(line: &str) -> String {
    match (line.find(" (setup "), line.find(')')) {
        (Some(open), Some(close)) if close > open => {
            format!(
                "{} (setup <s>, git <s>){}",
                &line[..open],
                &line[close + 1..]
            )
        }
        _ => line.to_owned(),
    }
}
