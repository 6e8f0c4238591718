//! The end of an iteration that applies a patch: the confirmation question,
//! and what follows a landed commit — push (never forced), the records,
//! the checks at the pushed commit. Shared by a run confirmed on the spot
//! and a run going on from its confirmation gate, so both land alike.

use std::path::Path;

use crate::handoff::FailedCheck;
use crate::state::APPLY_PATCH_QUESTION;

use super::*;

/// What an iteration that applies a patch carries to its end.
pub(super) struct Iter<'a> {
    /// The tree the fix lands in (the user's, or the PR head's worktree).
    pub(super) tree: &'a AutofixContext,
    /// Where the fix is pushed: a PR head's remote and branch.
    pub(super) push_to: Option<&'a (String, String)>,
    pub(super) file: &'a StateFile,
    pub(super) audit: (&'a Path, &'a str),
    pub(super) report: &'a ClassificationReport,
    pub(super) per_check: &'a [(String, String)],
    pub(super) action: Action,
    pub(super) class: Classification,
    /// The agent's count when the iteration started.
    pub(super) spent_before: Option<AgentSpent>,
    /// What the patch cost when it was made by an earlier run (a gate).
    pub(super) kept_spend: Option<AgentSpend>,
}

impl Iter<'_> {
    /// The arguments of an "escalate, no patch applied" end.
    pub(super) fn no_patch(&self, reason: String, now: Timestamp) -> EscalateArgs<'_> {
        EscalateArgs {
            action: Action::EscalateNoPatch,
            reason,
            report: self.report,
            per_check: self.per_check,
            diagnosis: None,
            blocking: false,
            audit: self.audit,
            now,
            spent_before: self.spent_before,
        }
    }

    fn spend(&self, agent: &dyn Agent) -> Option<AgentSpend> {
        spend_since(agent, self.spent_before).or(self.kept_spend)
    }
}

/// How an iteration that landed a patch goes on.
pub(super) enum Next {
    /// The run ends.
    Stop(AutofixOutcome),
    /// The checks still fail at the pushed commit: another iteration.
    Again {
        /// The failed checks.
        failures: Vec<FailedCheck>,
        /// This iteration, for the next instruction.
        earlier: Earlier,
    },
    /// The failed checks were re-run at the same commit and failed again:
    /// another iteration on the re-run's failures, with no patch to show.
    Reran {
        /// The failed checks.
        failures: Vec<FailedCheck>,
    },
}

/// The clock of the run.
pub(super) fn now_of(cfg: &AutofixConfig) -> Timestamp {
    cfg.now.unwrap_or_else(Timestamp::now)
}

/// The question that confirms a patch.
pub(super) fn confirm_question(
    iteration: u32,
    class: Classification,
    write_set: &[String],
    target: &Target,
    reason: &str,
) -> Question {
    Question::new(
        APPLY_PATCH_QUESTION,
        format!(
            "Iteration {iteration}: apply the {class} fix to {} file(s) on {}?",
            write_set.len(),
            target.label()
        ),
        vec![
            GateOption::new(
                "Apply patch (recommended)",
                "commit the fix and re-run the checks",
            ),
            GateOption::new("Reject", "discard the patch and stop (escalate)"),
        ],
    )
    .with_details(format!(
        "Files changed:\n{}\n\nReason: {reason}",
        write_set
            .iter()
            .map(|p| format!("- {p}"))
            .collect::<Vec<_>>()
            .join("\n"),
    ))
}

/// Asks `q`, with the events around it.
pub(super) async fn ask(ctx: &AutofixContext, q: &Question) -> Result<Answer, AutofixError> {
    ctx.sink.emit(&Event::GateAsked {
        question: q.id.clone(),
        prompt: q.prompt.clone(),
    });
    let answer = ctx.gate.ask(q).await?;
    ctx.sink.emit(&Event::GateAnswered {
        question: q.id.clone(),
        choice: answer.index().and_then(|i| q.label(i)).map(str::to_owned),
    });
    Ok(answer)
}

/// A fix commit that landed in the tree.
pub(super) struct Landed<'a> {
    /// The tree's HEAD before it.
    pub(super) parent: CommitId,
    /// The landed commit.
    pub(super) commit: CommitId,
    /// Its subject.
    pub(super) message: &'a str,
}

/// After a commit landed in the tree: push it, record the iteration
/// (`entry`, action `applied…`), and wait for the checks at it.
pub(super) async fn after_landing(
    ctx: &AutofixContext,
    it: &Iter<'_>,
    state: &mut AutofixState,
    mut entry: HistoryEntry,
    landed: Landed<'_>,
    commits: &mut Vec<String>,
) -> Result<Next, AutofixError> {
    let Landed {
        parent,
        commit,
        message,
    } = landed;
    let cfg = &ctx.config;
    let iteration = entry.iteration;
    let patch = patch_of(ctx, it.tree, &parent, &commit).await;
    ctx.sink.emit(&Event::CommitMade {
        id: format!("iter-{iteration}"),
        commit: commit.to_string(),
        summary: message.to_owned(),
    });
    commits.push(commit.to_string());
    let pushed = push(ctx, it, &commit).await?;
    entry.patch_sha = Some(commit.short().to_owned());
    if let PushOutcome::Rejected { reason } = pushed {
        entry.action = "applied (push rejected)".into();
        let spend = it.spend(ctx.agent.as_ref());
        finish(it.file, state, entry, None, it.audit, now_of(cfg), spend)?;
        return Ok(Next::Stop(AutofixOutcome::StillFailing {
            reason: format!(
                "push to {} was rejected: {reason}",
                it.push_to.map_or(cfg.remote.as_str(), |p| p.0.as_str())
            ),
        }));
    }
    if entry.action.is_empty() {
        entry.action = if it.action == Action::SilentApplyAndLog {
            "applied (silent)".into()
        } else {
            "applied".into()
        };
    }
    let spend = it.spend(ctx.agent.as_ref());
    finish(
        it.file,
        state,
        entry,
        Some(it.report),
        it.audit,
        now_of(cfg),
        spend,
    )?;
    state.iteration = iteration + 1;
    it.file.save(state)?;
    let this = Earlier {
        iteration,
        classification: format!("{}/{}", it.class.as_str(), it.class.sub_class_str()),
        commit: commit.short().to_owned(),
        patch,
        checks_after: String::new(),
    };
    checks_after(ctx, it, &commit, this, commits).await
}

/// The landed commit's patch, for the next instruction — or, when it
/// cannot be read, why (also said as a warning).
async fn patch_of(
    ctx: &AutofixContext,
    tree: &AutofixContext,
    parent: &CommitId,
    commit: &CommitId,
) -> String {
    match tree.vcs.diff(parent, commit).await {
        Ok(diff) => diff,
        Err(e) => {
            let message = format!("could not read the patch of {}: {e}", commit.short());
            ctx.sink.emit(&Event::Warning {
                message: message.clone(),
            });
            format!("({message})")
        }
    }
}

/// Pushes the landed commit — never forced: to the PR head's branch when
/// the fix was made there, else the target's branch; a provider that does
/// not push (local checks) counts it as pushed.
async fn push(
    ctx: &AutofixContext,
    it: &Iter<'_>,
    commit: &CommitId,
) -> Result<PushOutcome, AutofixError> {
    let cfg = &ctx.config;
    Ok(match (it.push_to, ctx.provider.pushes()) {
        (_, false) => PushOutcome::Pushed,
        (Some((remote, branch)), true) => it.tree.vcs.push_commit(remote, commit, branch).await?,
        (None, true) => it.tree.vcs.push(&cfg.remote, cfg.target.branch()).await?,
    })
}

/// Waits for the checks at the pushed commit — the results must be its,
/// not the old head's. Green ends the run; failed goes on, with this
/// iteration (`this`) for the next instruction.
async fn checks_after(
    ctx: &AutofixContext,
    it: &Iter<'_>,
    commit: &CommitId,
    this: Earlier,
    commits: &[String],
) -> Result<Next, AutofixError> {
    let after = ctx.provider.wait_for_checks(Some(commit.as_str())).await?;
    notices(ctx);
    Ok(match after {
        CheckRun::Green => {
            it.file.remove()?;
            ctx.sink.emit(&Event::PhaseFinished {
                flow: FLOW.into(),
                phase: "fix-loop".into(),
            });
            Next::Stop(AutofixOutcome::Green {
                commits: commits.to_vec(),
            })
        }
        CheckRun::TimedOut => Next::Stop(AutofixOutcome::StillFailing {
            reason: "checks still pending at the time limit after the fix".into(),
        }),
        CheckRun::NoChecks { head } => Next::Stop(AutofixOutcome::NoChecks { head }),
        CheckRun::Failed(f) => {
            let names: Vec<&str> = f.iter().map(|c| c.name.as_str()).collect();
            Next::Again {
                earlier: Earlier {
                    checks_after: format!("still failing: {}", names.join(", ")),
                    ..this
                },
                failures: f,
            }
        }
    })
}
