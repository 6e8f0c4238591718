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

use std::sync::Arc;

use jiff::Timestamp;
use orchestrator_core::agent::{Agent, AgentRequest, AgentSpend, AgentSpent, Role};
use orchestrator_core::cadence::{Action, Cadence, Classification};
use orchestrator_core::event::{Event, EventSink};
use orchestrator_core::gate::{Answer, Gate, GateOption, Question};
use orchestrator_core::vcs::{CommitId, PushOutcome, Vcs};

use crate::classify::{ClassificationReport, classify, classify_many};
use crate::fix_tree::{self, Made};
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
    let cfg = &ctx.config;
    let now = || cfg.now.unwrap_or_else(Timestamp::now);
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
    // The PR's head decides where the fix is made and pushed, before any
    // agent call (see `pr_head`).
    let located = match ctx.provider.pr_head().await? {
        Some(head) => {
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
            Some(pr_head::locate(&ctx, &head).await?)
        }
        None => None,
    };
    let status = ctx.vcs.status().await?;
    // A fix made in a worktree never touches the user's tree.
    if !status.is_clean() && !cfg.allow_dirty && located.as_ref().is_none_or(|l| l.in_place()) {
        return Err(AutofixError::DirtyTree {
            paths: status.dirty_paths(),
        });
    }
    let (file, mut state, _) = lock.load(&root, &cfg.target, cfg.max_iterations, now())?;
    let audit_path = audit_log_path(&root, &cfg.target, now());
    let header = audit_header(&cfg.target, now());
    ctx.sink.emit(&Event::PhaseStarted {
        flow: FLOW.into(),
        phase: "fix-loop".into(),
    });

    // A run stopped at its confirmation gate goes on from there: the
    // checks are waited for only after its patch lands.
    let first = match (&state.gate, &cfg.initial_failures) {
        (Some(_), _) => CheckRun::Failed(Vec::new()),
        (None, Some(f)) => CheckRun::Failed(f.clone()),
        (None, None) => ctx.provider.wait_for_checks(None).await?,
    };
    notices(&ctx);
    let mut failures = match first {
        CheckRun::Green => {
            file.remove()?;
            return Ok(AutofixOutcome::Green { commits: vec![] });
        }
        CheckRun::TimedOut => {
            return Ok(AutofixOutcome::StillFailing {
                reason: "checks still pending at the time limit".into(),
            });
        }
        CheckRun::NoChecks { head } => return Ok(AutofixOutcome::NoChecks { head }),
        CheckRun::Failed(f) => f,
    };
    // The tree the fix is made in: the user's, or a worktree at the PR head.
    let workplace = match &located {
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
    let tree_root = tree.vcs.root().to_path_buf();
    let result: Result<AutofixOutcome, AutofixError> = async {
        let mut commits = Vec::new();
        // Every instruction carries the earlier iterations' patches and the
        // checks after them, so the agent does not try the same fix again.
        let mut earlier: Vec<Earlier> = Vec::new();
        let mut last_diff_warning: Option<String> = None;
        let cadence = Cadence {
            max_iterations: cfg.max_iterations,
        };
        let mut reran_first = false;

        loop {
            if let Some(gate) = state.gate.clone() {
                let place = Place {
                    tree: &tree,
                    push_to: push_to.as_ref(),
                    file: &file,
                    audit: (&audit_path, &header),
                };
                match resume_gate(&ctx, place, &mut state, gate, &mut commits).await? {
                    Next::Stop(outcome) => return Ok(outcome),
                    Next::Again {
                        failures: f,
                        earlier: e,
                    } => {
                        earlier.push(e);
                        failures = f;
                        continue;
                    }
                }
            }
            let iteration = state.iteration;
            // What the agent spent in this iteration is the difference (for
            // the audit log; agents that keep no count report nothing).
            let spent_before = ctx.agent.spent();
            let mut warnings = Vec::new();
            let (mut logs, foreign) = fixable_logs(&ctx, &failures, &mut warnings).await?;
            if logs.is_empty() {
                return Ok(AutofixOutcome::StillFailing {
                    reason: foreign.join("; "),
                });
            }
            failures.retain(|f| logs.iter().any(|l| l.name == f.name));
            let pr_diff = match ctx.provider.diff().await {
                Ok(d) => d,
                Err(e) => {
                    let what = match cfg.target {
                        Target::Local { .. } => "the working change",
                        _ => "the PR diff",
                    };
                    let message = format!("could not fetch {what} (going on without it): {e}");
                    // Said once per run on the terminal; every iteration's audit
                    // entry keeps it.
                    if last_diff_warning.as_ref() != Some(&message) {
                        ctx.sink.emit(&Event::Warning {
                            message: message.clone(),
                        });
                        last_diff_warning = Some(message.clone());
                    }
                    warnings.push(message);
                    String::new()
                }
            };
            let mut report = classify_many(logs.iter().map(|l| l.log.as_str()));
            let mut rerun_record = None;
            if rerun_first(cfg, iteration, report.classification, reran_first) {
                // Before the first fix of a test failure: the same commit again.
                reran_first = true;
                let reran = rerun_failed(&ctx, &failures).await?;
                let record = reran.record("flaky?", &logs);
                if reran.all_passed() {
                    let entry = history_entry(iteration, &failures, warnings);
                    return passed_on_rerun(
                        &file,
                        &mut state,
                        entry,
                        Classification::Flaky,
                        record,
                        &report,
                        (&audit_path, &header, now()),
                    );
                }
                // Failed again: the fix goes on, with the re-run's logs too.
                let again = ctx.provider.failed_logs(&reran.failed).await?;
                logs.extend(
                    again
                        .into_iter()
                        .filter(|l| l.not_fixable.is_none())
                        .map(|l| CheckLog {
                            name: format!("{} (re-run at the same commit)", l.name),
                            ..l
                        }),
                );
                failures = reran.failed;
                report = classify_many(logs.iter().map(|l| l.log.as_str()));
                rerun_record = Some(record);
            }
            let per_check: Vec<(String, String)> = logs
                .iter()
                .map(|l| (l.name.clone(), classify(&l.log).classification.to_string()))
                .collect();
            let class = report.classification;
            let previous =
                Classification::parse(&state.last_classification, &state.last_subclass).ok();
            let decision = cadence.decide(iteration, class, previous);
            state.last_classification = class.as_str().into();
            state.last_subclass = class.sub_class_str().into();
            state.last_action = decision.action.as_str().into();
            file.save(&state)?;
            let mut entry = history_entry(iteration, &failures, warnings);
            entry.classification = class.as_str().into();
            entry.sub_class = class.sub_class_str().into();
            entry.rerun = rerun_record;

            if decision.action == Action::RerunOnce {
                // Not the code's fault: never patched; the same commit again.
                let reran = rerun_failed(&ctx, &failures).await?;
                let record = reran.record("infrastructure", &logs);
                if reran.all_passed() {
                    return passed_on_rerun(
                        &file,
                        &mut state,
                        entry,
                        class,
                        record,
                        &report,
                        (&audit_path, &header, now()),
                    );
                }
                entry.action = "re-ran (infrastructure); failed again".into();
                entry.rerun = Some(record);
                finish(
                    &file,
                    &mut state,
                    entry,
                    Some(&report),
                    (&audit_path, &header),
                    now(),
                    None,
                )?;
                // The next round sees `infrastructure` as the previous class:
                // escalated with the evidence if it is infrastructure again.
                failures = reran.failed;
                continue;
            }

            // The arguments of every "escalate, no patch applied" exit below.
            let no_patch = |reason: String| EscalateArgs {
                action: Action::EscalateNoPatch,
                reason,
                report: &report,
                per_check: &per_check,
                diagnosis: None,
                blocking: false,
                audit: (&audit_path, &header),
                now: now(),
                spent_before,
            };

            if !decision.action.applies_patch() {
                let diagnosis = if decision.action == Action::EscalateNoPatch {
                    let req = AgentRequest::new(
                        format!("ci-autofix.diagnose.iter-{iteration}"),
                        Role::Diagnose,
                        instruction(&cfg.target, &report, &logs, &pr_diff, &earlier, false),
                        tree_root.clone(),
                    );
                    let req = match audit_path.parent() {
                        Some(dir) => req.with_artifacts_dir(dir),
                        None => req,
                    };
                    match ctx.agent.run(req).await {
                        Ok(r) => Some(r.text),
                        Err(e) => {
                            ctx.sink.emit(&Event::Warning {
                                message: format!("diagnosis failed: {e}"),
                            });
                            None
                        }
                    }
                } else {
                    None
                };
                return escalate(
                    &ctx,
                    &file,
                    &mut state,
                    entry,
                    EscalateArgs {
                        action: decision.action,
                        reason: decision.reason.clone(),
                        report: &report,
                        per_check: &per_check,
                        diagnosis: diagnosis.as_deref(),
                        blocking: decision.blocking,
                        audit: (&audit_path, &header),
                        now: now(),
                        spent_before,
                    },
                )
                .await;
            }

            // Ask the agent for a patch: in place in a clean tree, in a
            // temporary worktree when the tree is dirty (see `fix_tree`).
            let req = AgentRequest::new(
                format!("ci-autofix.fix.iter-{iteration}"),
                Role::Fix,
                instruction(&cfg.target, &report, &logs, &pr_diff, &earlier, true),
                tree_root.clone(),
            )
            .with_context(fix_context(&report, &logs))
            .with_spend_limits(cfg.iteration_limits);
            // Agent records (transcripts) go beside the audit log that names them.
            let req = match audit_path.parent() {
                Some(dir) => req.with_artifacts_dir(dir),
                None => req,
            };
            // The agent may run the checks that will judge its patch, and
            // nothing else by default (see `AgentRequest::allowed_commands`).
            let req = ctx
                .provider
                .check_commands()
                .iter()
                .fold(req, |req, line| req.allow_command_line(line));
            let message = commit_message(class, iteration);
            let staged =
                match fix_tree::make_patch(&tree, req, iteration, &message, &mut entry.warnings)
                    .await?
                {
                    Made::Patch(staged) => staged,
                    Made::Problem(reason) => {
                        return escalate(&ctx, &file, &mut state, entry, no_patch(reason)).await;
                    }
                    Made::Limit(reason) => {
                        // Nothing to decide: the iteration did not happen. It is
                        // recorded, and the state keeps its number for the next run.
                        ctx.sink.emit(&Event::Warning {
                            message: format!(
                                "the run's limit is reached ({reason}): no patch was made; \
                         run ci-autofix again (with a higher limit) to go on"
                            ),
                        });
                        entry.action = "stopped at the run's limit".into();
                        entry.escalation_reason =
                            Some(format!("the run's limit is reached ({reason})"));
                        finish(
                            &file,
                            &mut state,
                            entry,
                            Some(&report),
                            (&audit_path, &header),
                            now(),
                            spend_since(ctx.agent.as_ref(), spent_before),
                        )?;
                        return Ok(AutofixOutcome::LimitReached { reason });
                    }
                };
            let write_set = staged.write_set.clone();

            let it = Iter {
                tree: &tree,
                push_to: push_to.as_ref(),
                file: &file,
                audit: (&audit_path, &header),
                report: &report,
                per_check: &per_check,
                action: decision.action,
                class,
                spent_before,
                kept_spend: None,
            };
            if decision.action == Action::ConfirmAndApply {
                let q =
                    confirm_question(iteration, class, &write_set, &cfg.target, &decision.reason);
                match ask(&ctx, &q).await?.index() {
                    // Nobody can answer now: the patch waits at the gate.
                    None => {
                        let asked = Asked {
                            staged: &staged,
                            question: &q,
                            reason: &decision.reason,
                            message: &message,
                        };
                        return stop_at_gate(&ctx, &it, &mut state, entry, asked).await;
                    }
                    Some(0) => {}
                    Some(_) => {
                        // Never written into the user's tree: nothing to undo.
                        drop(staged);
                        let args = it.no_patch("the user rejected the patch".into(), now());
                        return escalate(&ctx, &file, &mut state, entry, args).await;
                    }
                }
            }

            let parent = tree.vcs.head().await?;
            let commit = match staged.land(&tree).await? {
                Ok(commit) => commit,
                Err(reason) => {
                    return escalate(&ctx, &file, &mut state, entry, it.no_patch(reason, now()))
                        .await;
                }
            };
            let landed = Landed {
                parent,
                commit,
                message: &message,
            };
            match after_landing(&ctx, &it, &mut state, entry, landed, &mut commits).await? {
                Next::Stop(outcome) => return Ok(outcome),
                Next::Again {
                    failures: f,
                    earlier: e,
                } => {
                    earlier.push(e);
                    failures = f;
                }
            }
        }
    }
    .await;
    if let Some(w) = workplace {
        w.close().await;
    }
    result
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
