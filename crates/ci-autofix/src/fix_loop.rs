//! The fix loop: classify → cadence matrix → patch or escalate → commit →
//! push → wait for the checks → again, until green, escalated or out of
//! iterations.
//!
//! A patch is what the agent changed in the tree it ran in (builtin agents
//! and CLI agents edit files directly): the write-set since a
//! [`Vcs::checkpoint`]. An agent that changed nothing but answered with a
//! unified diff (a ` ```diff ` block or the whole answer) has the diff
//! applied by [`crate::patch`] — strictly, all-or-nothing, protected paths
//! refused — and the write-set is taken after that; a diff that does not
//! apply cleanly escalates with the reason and nothing written. A patch that
//! touches a protected path ([`is_protected`]) is discarded and the loop
//! escalates.
//!
//! **Where the agent runs.** A dirty tree is refused unless `allow_dirty`.
//! Either way the agent never runs in the user's tree: it runs in a
//! temporary git worktree at HEAD (of the user's tree, or of the PR-head
//! worktree `pr_head` opened), outside the repository, where a usable patch
//! is committed; landing cherry-picks that commit, which git refuses
//! (nothing written) when a file it changes is dirty or changes are staged
//! — the escalation names the files. The fix commit is made from git's
//! index, so an edit the user makes to a fixed file while it lands stays
//! theirs and uncommitted. The worktree and its branch are removed
//! afterwards, also on errors (details in the `fix_tree` module).
//!
//! Each iteration fetches the failed logs (a failure is an error) and the PR
//! diff ([`CiProvider::diff`](crate::provider::CiProvider::diff); a failure is only a warning: an
//! [`Event::Warning`] and a `warnings` line in the audit log). The agent's
//! instruction carries the log tails and the first [`DIFF_CAP`] bytes of the
//! PR diff (in local mode the working change), cut at a line end — the
//! head, because a diff's first files and hunk headers say most about the
//! change — and, from the second iteration on, each earlier iteration's
//! patch ([`Vcs::diff`] of its commit, the first [`EARLIER_PATCH_CAP`]
//! bytes) with the checks that still failed after it, so the agent builds
//! on what was tried instead of repeating it. (A resumed run starts this
//! list afresh; the state file keeps only the earlier iterations'
//! classifications and commit ids.) Fix commits are new commits
//! (`fix(ci): auto-fix <class> failure (iter <N>)`); pushes never force —
//! the [`Vcs`] API has no way to.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

use jiff::Timestamp;
use orchestrator_core::agent::{Agent, AgentRequest, AgentSpend, AgentSpent, Role};
use orchestrator_core::cadence::{Action, Cadence, Classification};
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::gate::{Answer, Gate, GateOption, Question};
use orchestrator_core::vcs::{CommitId, PushOutcome, Vcs};

use crate::classify::{ClassificationReport, classify, classify_many};
use crate::fix_tree::{self, Made};
use crate::handoff::FailedCheck;
use crate::pr_head;
use crate::provider::{CheckLog, CheckRun};
use crate::report::{
    EscalationInput, append_audit, audit_header, audit_log_path, audit_section, escalation_report,
};
use crate::state::{AutofixState, HistoryEntry, MOAI_DIR, StateFile, Target};

pub use crate::context::{AutofixConfig, AutofixContext, AutofixError, is_protected};

mod prompt;
pub use prompt::*;

mod ending;
use ending::*;

mod rerun;
use rerun::*;

mod outcome;
pub use outcome::*;

mod steps;
use steps::*;

mod land;
use land::*;

mod waiting;
use waiting::*;

mod iteration;
use iteration::*;

const FLOW: &str = "ci-autofix";

/// How much of the PR diff goes into the agent's instruction: the first
/// 50 KB, cut at a line end, with a note saying how much was left out.
pub const DIFF_CAP: usize = 50 * 1024;

/// How much of each earlier iteration's patch goes into the instruction.
pub const EARLIER_PATCH_CAP: usize = 20 * 1024;

/// An earlier iteration of this run, as the next instruction shows it: its
/// patch and what the checks said after it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Earlier {
    iteration: u32,
    /// `class/sub_class`.
    classification: String,
    /// The fix commit (short id).
    commit: String,
    /// The commit's diff (or why it could not be read).
    patch: String,
    /// `still failing: a, b`.
    checks_after: String,
}

/// Runs the loop (see the module docs).
pub async fn run_autofix(ctx: AutofixContext) -> Result<AutofixOutcome, AutofixError> {
    let opened = open_run(&ctx).await?;
    // A run stopped at its confirmation gate goes on from there: the
    // checks are waited for only after its patch lands.
    let failures = match first_failures(&ctx, &opened).await? {
        ControlFlow::Continue(failures) => failures,
        ControlFlow::Break(outcome) => return Ok(outcome),
    };
    // The tree the fix is made in: the user's, or a worktree at the PR head.
    let workplace = match &opened.located {
        Some(l) => Some(l.open(&ctx).await?),
        None => None,
    };
    let tree = AutofixContext {
        vcs: workplace
            .as_ref()
            .map_or_else(|| Arc::clone(&ctx.vcs), |w| Arc::clone(&w.tree)),
        ..ctx.clone()
    };
    let push_to = workplace.as_ref().map(|w| w.push_to.clone());
    let run = Run {
        ctx: &ctx,
        place: Place {
            tree: &tree,
            push_to: push_to.as_ref(),
            file: &opened.file,
            audit: (&opened.audit_path, &opened.header),
        },
        cadence: Cadence {
            max_iterations: ctx.config.max_iterations,
        },
    };
    let result = run.fix_loop(opened.state, failures).await;
    if let Some(w) = workplace {
        w.close().await;
    }
    result
}

/// What opening a run gives: the target's state file (locked) and state,
/// where the PR head's fix is made, and the run's audit log.
struct Opened {
    file: StateFile,
    state: AutofixState,
    /// The PR head's place (none: the fix is made from the user's tree).
    located: Option<pr_head::Located>,
    audit_path: PathBuf,
    /// The audit log's header.
    header: String,
}

/// Opens the run: locks the target, locates the PR head, refuses a dirty
/// tree the fix would be made from, and loads the state.
async fn open_run(ctx: &AutofixContext) -> Result<Opened, AutofixError> {
    let cfg = &ctx.config;
    ctx.vcs.exclude(&format!("{MOAI_DIR}/")).await?;
    let root = ctx.vcs.root().to_path_buf();
    // The target is locked before the tree is looked at: while another run
    // is mid-fix its uncommitted patch must not be reported as the user's.
    let lock = StateFile::lock(&root, &cfg.target)?;
    ctx.sink.emit(&Event::SessionOpened {
        flow: FLOW.into(),
        session: format!("ci-autofix-{}", cfg.target.key()),
        dir: lock.dir().to_path_buf(),
    });
    // Rollbacks and worktree removals save what they would lose here first.
    ctx.vcs.set_trash(Some(Arc::new(
        orchestrator_core::trash::Trash::for_session(lock.dir()),
    )));
    let located = locate_head(ctx).await?;
    let status = ctx.vcs.status().await?;
    // A fix made in a worktree never touches the user's tree.
    if !status.is_clean() && !cfg.allow_dirty && located.as_ref().is_none_or(|l| l.in_place()) {
        return Err(AutofixError::DirtyTree {
            paths: status.dirty_paths(),
        });
    }
    let (file, state, _) = lock.load(&root, &cfg.target, cfg.max_iterations, now_of(cfg))?;
    let audit_path = audit_log_path(&root, &cfg.target, now_of(cfg));
    let header = audit_header(&cfg.target, now_of(cfg));
    ctx.sink.emit(&Event::PhaseStarted {
        flow: FLOW.into(),
        phase: "fix-loop".into(),
    });
    Ok(Opened {
        file,
        state,
        located,
        audit_path,
        header,
    })
}

/// The PR's head, which decides where the fix is made and pushed, before
/// any agent call (see `pr_head`); a handoff for another branch than the
/// head's is refused.
async fn locate_head(ctx: &AutofixContext) -> Result<Option<pr_head::Located>, AutofixError> {
    let cfg = &ctx.config;
    let Some(head) = ctx.provider.pr_head().await? else {
        return Ok(None);
    };
    if cfg.initial_failures.is_some() && cfg.target.branch() != head.branch {
        return Err(AutofixError::PrHead {
            reason: format!(
                "the handoff is for branch `{}` but PR #{}'s head is `{}`",
                cfg.target.branch(),
                head.number,
                head.branch
            ),
        });
    }
    Ok(Some(pr_head::locate(ctx, &head).await?))
}

/// The failed checks the run starts on: none at a confirmation gate (the
/// run goes on from the gate), the handoff's, or the checks' at the head —
/// or how the run ends when nothing failed.
async fn first_failures(
    ctx: &AutofixContext,
    opened: &Opened,
) -> Result<ControlFlow<AutofixOutcome, Vec<FailedCheck>>, AutofixError> {
    let first = match (&opened.state.gate, &ctx.config.initial_failures) {
        (Some(_), _) => CheckRun::Failed(Vec::new()),
        (None, Some(f)) => CheckRun::Failed(f.clone()),
        (None, None) => ctx.provider.wait_for_checks(None).await?,
    };
    notices(ctx);
    Ok(match first {
        CheckRun::Green => {
            opened.file.remove()?;
            ControlFlow::Break(AutofixOutcome::Green { commits: vec![] })
        }
        CheckRun::TimedOut => ControlFlow::Break(AutofixOutcome::StillFailing {
            reason: "checks still pending at the time limit".into(),
        }),
        CheckRun::NoChecks { head } => ControlFlow::Break(AutofixOutcome::NoChecks { head }),
        CheckRun::Failed(f) => ControlFlow::Continue(f),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_paths() {
        let extra = vec![".github/required-checks.json".to_owned()];
        for p in [
            ".env",
            "config/.env.production",
            "deploy/aws_credentials.txt",
            "gcp_service_key.json",
            "src/secrets.rs",
            "k8s/Secret.yaml",
            ".github/workflows/ci.yml",
            ".moai/state/ci-autofix-1.json",
            ".github/required-checks.json",
        ] {
            assert!(is_protected(p, &extra), "{p}");
        }
        for p in [
            "src/lib.rs",
            "README.md",
            ".github/CODEOWNERS",
            "environment.md",
            "keys.json",
        ] {
            assert!(!is_protected(p, &extra), "{p}");
        }
    }

    #[test]
    fn the_instruction_carries_the_logs_and_the_pr_diff() {
        let log =
            "Diff in /w/src/lib.rs:1:\n-pub fn f()->u32{1}\n+pub fn f() -> u32 {\n+    1\n+}\n";
        let report = classify(log);
        let logs = [crate::provider::CheckLog::new("Lint", log.into())];
        let target = Target::Pr {
            number: 785,
            branch: "feat/x".into(),
            forge: orchestrator_core::forge::ForgeKind::Github,
        };
        // A diff that itself holds a fence gets a longer one.
        let pr_diff = "--- a/README.md\n+++ b/README.md\n@@ -1 +1,3 @@\n # x\n+```sh\n+make\n";
        insta::assert_snapshot!(
            "fix_instruction",
            instruction(&target, &report, &logs, pr_diff, &[], true)
        );
        let diagnose = instruction(&target, &report, &logs, "", &[], false);
        assert!(!diagnose.contains("PR diff"));
        assert!(diagnose.ends_with("Do NOT change any file.\n"));
    }

    #[test]
    fn the_diff_cap_keeps_whole_lines_from_the_head() {
        assert_eq!(cap_diff("a\nb\n", 10), "a\nb\n");
        assert_eq!(
            cap_diff("line one\nline two\n", 12),
            "line one\n[… PR diff truncated: the first 9 of 18 bytes are shown]\n"
        );
        // A multi-byte character at the cut is never split.
        let capped = cap_diff("ééééé", 3);
        assert!(capped.starts_with("é["), "{capped}");
        assert_eq!(fence_for("no ticks"), "```");
        assert_eq!(fence_for("a ```` b"), "`````");
    }

    #[test]
    fn commit_messages() {
        assert_eq!(
            commit_message(
                Classification::Mechanical(orchestrator_core::cadence::SubClass::Trivial),
                2
            ),
            "fix(ci): auto-fix mechanical failure (iter 2)"
        );
    }
}
