//! The confirmation gate: stopping at it when nobody can be asked
//! ([`stop_at_gate`]: the verified patch kept as a commit on an engine
//! branch, the gate recorded in the state file in one atomic write), and
//! going on from it in a later run ([`resume_gate`]: the recorded answer,
//! else the question asked again; an approval lands and pushes the kept
//! commit as a run confirmed on the spot does, a decline escalates).

use crate::classify::{Evidence, Level};
use crate::confirm::{drop_kept, keep};
use crate::fix_tree::StagedPatch;
use crate::state::{AnsweredBy, ConfirmGate, GateAnswer, GateDecision, GateEvidence};

use super::land::*;
use super::*;

/// The question nobody could answer now, and what it was about.
pub(super) struct Asked<'a> {
    /// The verified patch, committed in the engine's worktree.
    pub(super) staged: &'a StagedPatch,
    pub(super) question: &'a Question,
    /// Why the cadence matrix asks.
    pub(super) reason: &'a str,
    /// The fix commit's subject.
    pub(super) message: &'a str,
}

/// Where an iteration's patch lands and is recorded.
#[derive(Clone, Copy)]
pub(super) struct Place<'a> {
    /// The tree the fix lands in (the user's, or the PR head's worktree).
    pub(super) tree: &'a AutofixContext,
    /// Where the fix is pushed: a PR head's remote and branch.
    pub(super) push_to: Option<&'a (String, String)>,
    pub(super) file: &'a StateFile,
    pub(super) audit: (&'a std::path::Path, &'a str),
}

/// How many deciding evidence lines a gate keeps.
const GATE_EVIDENCE: usize = 20;

/// Stops the run at the confirmation of `staged`: keeps its commit, records
/// the gate (with the iteration's classification, evidence and files) and
/// an audit section, and ends with [`AutofixOutcome::AwaitingConfirmation`].
pub(super) async fn stop_at_gate(
    ctx: &AutofixContext,
    it: &Iter<'_>,
    state: &mut AutofixState,
    entry: HistoryEntry,
    asked: Asked<'_>,
) -> Result<AutofixOutcome, AutofixError> {
    let Asked {
        staged,
        question: q,
        reason,
        message,
    } = asked;
    let cfg = &ctx.config;
    let key = cfg.target.key();
    let (keep_path, keep_branch) = keep(ctx.vcs.as_ref(), &key, staged.commit()).await?;
    let diff = match it.tree.vcs.diff(staged.base(), staged.commit()).await {
        Ok(diff) => diff,
        Err(e) => format!("(could not read the patch: {e})"),
    };
    let gate = ConfirmGate {
        iteration: entry.iteration,
        question: q.id.clone(),
        prompt: q.prompt.clone(),
        classification: entry.classification.clone(),
        sub_class: entry.sub_class.clone(),
        reason: reason.to_owned(),
        checks: entry.checks.clone(),
        evidence: gate_evidence(it.report),
        write_set: staged.write_set.clone(),
        base: staged.base().to_string(),
        commit: staged.commit().to_string(),
        message: message.to_owned(),
        keep_branch: keep_branch.clone(),
        keep_path,
        diff,
        warnings: entry.warnings.clone(),
        agent_spend: spend_since(ctx.agent.as_ref(), it.spent_before),
        asked_at: now_of(cfg).to_string(),
        resume: cfg.resume_command.clone(),
        answer: None,
    };
    // The gate, its commit and its evidence: one atomic write.
    state.gate = Some(gate.clone());
    it.file.save(state)?;
    audit_waiting(it, entry, &gate, now_of(cfg))?;
    ctx.sink.emit(&Event::Notice {
        message: format!(
            "{}: iteration {}'s patch waits for confirmation (kept as {} on branch {keep_branch})",
            cfg.target.label(),
            gate.iteration,
            staged.commit().short()
        ),
    });
    Ok(AutofixOutcome::AwaitingConfirmation {
        key,
        iteration: gate.iteration,
        commit: gate.commit,
        branch: keep_branch,
        write_set: gate.write_set,
    })
}

/// The deciding evidence lines of `report` a gate keeps (the first
/// [`GATE_EVIDENCE`]).
fn gate_evidence(report: &ClassificationReport) -> Vec<GateEvidence> {
    report
        .deciding_evidence()
        .into_iter()
        .take(GATE_EVIDENCE)
        .map(|e| GateEvidence {
            line: e.line,
            rule: e.rule.clone(),
            text: e.text.clone(),
        })
        .collect()
}

/// The audit log's section of an iteration whose patch waits at `gate`
/// (kept, not applied). The history gets the iteration once it is answered.
fn audit_waiting(
    it: &Iter<'_>,
    entry: HistoryEntry,
    gate: &ConfirmGate,
    now: Timestamp,
) -> Result<(), AutofixError> {
    let mut shown = entry;
    shown.action = "waiting for confirmation (the patch is kept, not applied)".into();
    shown.patch_sha = Some(CommitId(gate.commit.clone()).short().to_owned());
    shown.finished_at = now.to_string();
    shown.agent_spend = gate.agent_spend;
    append_audit(
        it.audit.0,
        it.audit.1,
        &audit_section(&shown, Some(it.report)),
    )?;
    Ok(())
}

/// Goes on from the gate `gate` a run stopped at: its recorded answer, or
/// the question asked again (deferred again: the run stops there again,
/// nothing changed).
pub(super) async fn resume_gate(
    ctx: &AutofixContext,
    place: Place<'_>,
    state: &mut AutofixState,
    gate: ConfirmGate,
    commits: &mut Vec<String>,
) -> Result<Next, AutofixError> {
    let Place {
        tree,
        push_to,
        file,
        audit,
    } = place;
    let cfg = &ctx.config;
    let report = report_of(&gate);
    let per_check: Vec<(String, String)> = gate
        .checks
        .iter()
        .map(|c| (c.clone(), report.classification.to_string()))
        .collect();
    let it = Iter {
        tree,
        push_to,
        file,
        audit,
        report: &report,
        per_check: &per_check,
        action: Action::ConfirmAndApply,
        class: report.classification,
        spent_before: ctx.agent.spent(),
        kept_spend: gate.agent_spend,
    };
    let Some(answer) = answer_of(ctx, &gate, report.classification).await? else {
        return Ok(Next::Stop(still_waiting(&gate, &cfg.target)));
    };
    let mut entry = history_entry(gate.iteration, &[], gate.warnings.clone());
    entry.checks = gate.checks.clone();
    entry.classification = gate.classification.clone();
    entry.sub_class = gate.sub_class.clone();
    // The gate goes with the iteration's record (the same write).
    state.gate = None;
    let kept = StagedPatch::kept(
        gate.write_set.clone(),
        CommitId(gate.base.clone()),
        CommitId(gate.commit.clone()),
    );
    let next = match answer.decision {
        GateDecision::Decline => {
            let reason = format!("the patch was declined ({})", answer.origin);
            let args = it.no_patch(reason, now_of(cfg));
            Next::Stop(escalate(ctx, file, state, entry, args).await?)
        }
        GateDecision::Approve => {
            entry.action = format!("applied (approved by {})", answer.origin);
            land_kept(ctx, &it, state, entry, &kept, &gate.message, commits).await?
        }
    };
    if let Err(e) = drop_kept(ctx.vcs.as_ref(), &gate).await {
        ctx.sink.emit(&Event::Warning {
            message: format!(
                "could not remove the gate's engine worktree {} (branch `{}`): {e}",
                gate.keep_path.display(),
                gate.keep_branch
            ),
        });
    }
    Ok(next)
}

/// The answer to `gate`: the one recorded (from the page or `ci-autofix
/// answer`), else the question asked again — `None` when it is deferred
/// again.
async fn answer_of(
    ctx: &AutofixContext,
    gate: &ConfirmGate,
    class: Classification,
) -> Result<Option<GateAnswer>, AutofixError> {
    if let Some(answer) = &gate.answer {
        ctx.sink.emit(&Event::GateAnswered {
            question: gate.question.clone(),
            choice: Some(format!("{} ({})", answer.decision.as_str(), answer.origin)),
        });
        return Ok(Some(answer.clone()));
    }
    let cfg = &ctx.config;
    let q = confirm_question(
        gate.iteration,
        class,
        &gate.write_set,
        &cfg.target,
        &gate.reason,
    );
    let decision = match ask(ctx, &q).await?.index() {
        None => return Ok(None),
        Some(0) => GateDecision::Approve,
        Some(_) => GateDecision::Decline,
    };
    Ok(Some(GateAnswer {
        decision,
        at: now_of(cfg).to_string(),
        by: AnsweredBy::Gate,
        origin: "the run's own gate".into(),
    }))
}

/// Lands the kept commit — unless a run killed after landing it already
/// did (the commit with its message is on the tree since its base).
async fn land_kept(
    ctx: &AutofixContext,
    it: &Iter<'_>,
    state: &mut AutofixState,
    entry: HistoryEntry,
    kept: &StagedPatch,
    message: &str,
    commits: &mut Vec<String>,
) -> Result<Next, AutofixError> {
    let tree = it.tree;
    let head = tree.vcs.head().await?;
    let landed_before = if head == *kept.base() {
        None
    } else {
        tree.vcs
            .log_since(kept.base())
            .await
            .ok()
            .and_then(|log| match log.as_slice() {
                [only] if only.message.lines().next() == Some(message) => Some(only.id.clone()),
                _ => None,
            })
    };
    let (parent, commit) = match landed_before {
        Some(commit) => (kept.base().clone(), commit),
        None => match kept.land(tree).await? {
            Ok(commit) => (head, commit),
            Err(reason) => {
                let args = it.no_patch(reason, now_of(&ctx.config));
                return Ok(Next::Stop(
                    escalate(ctx, it.file, state, entry, args).await?,
                ));
            }
        },
    };
    let landed = Landed {
        parent,
        commit,
        message,
    };
    after_landing(ctx, it, state, entry, landed, commits).await
}

/// The outcome of a gate still waiting.
fn still_waiting(gate: &ConfirmGate, target: &Target) -> AutofixOutcome {
    AutofixOutcome::AwaitingConfirmation {
        key: target.key(),
        iteration: gate.iteration,
        commit: gate.commit.clone(),
        branch: gate.keep_branch.clone(),
        write_set: gate.write_set.clone(),
    }
}

/// The classification the gate recorded, as a report (for the records).
fn report_of(gate: &ConfirmGate) -> ClassificationReport {
    let classification = Classification::parse(&gate.classification, &gate.sub_class)
        .unwrap_or(Classification::Unknown);
    ClassificationReport {
        classification,
        evidence: gate
            .evidence
            .iter()
            .map(|e| Evidence {
                line: e.line,
                text: e.text.clone(),
                rule: e.rule.clone(),
                level: Level::Trivial,
                job: None,
            })
            .collect(),
    }
}
