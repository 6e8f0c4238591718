//! How an iteration ends in the records: [`finish`] (history, audit log,
//! the agent's spend in the iteration) and [`escalate`] (the report, the
//! question to a person, then [`finish`]).

use super::*;

/// Records a finished iteration in the history and the audit log.
pub(super) fn finish(
    file: &StateFile,
    state: &mut AutofixState,
    mut entry: HistoryEntry,
    report: Option<&ClassificationReport>,
    audit: (&std::path::Path, &str),
    now: Timestamp,
    spend: Option<AgentSpend>,
) -> Result<(), AutofixError> {
    entry.finished_at = now.to_string();
    entry.agent_spend = spend;
    append_audit(audit.0, audit.1, &audit_section(&entry, report))?;
    state.history.push(entry);
    file.save(state)?;
    Ok(())
}

/// What `agent` spent since it counted `before`, when it keeps count and
/// made a call since.
pub(super) fn spend_since(agent: &dyn Agent, before: Option<AgentSpent>) -> Option<AgentSpend> {
    let now = agent.spent()?;
    let before = before.unwrap_or_default();
    let calls = now.calls.saturating_sub(before.calls);
    (calls > 0).then(|| AgentSpend {
        calls,
        input_tokens: now
            .usage
            .input_tokens
            .saturating_sub(before.usage.input_tokens),
        output_tokens: now
            .usage
            .output_tokens
            .saturating_sub(before.usage.output_tokens),
        cost_usd: (now.usage.cost_usd - before.usage.cost_usd).max(0.0),
        turns: now.usage.turns.saturating_sub(before.usage.turns),
    })
}

pub(super) struct EscalateArgs<'a> {
    pub(super) action: Action,
    pub(super) reason: String,
    pub(super) report: &'a ClassificationReport,
    pub(super) per_check: &'a [(String, String)],
    pub(super) diagnosis: Option<&'a str>,
    pub(super) blocking: bool,
    pub(super) audit: (&'a std::path::Path, &'a str),
    pub(super) now: Timestamp,
    /// The agent's count when the iteration started.
    pub(super) spent_before: Option<AgentSpent>,
}

pub(super) async fn escalate(
    ctx: &AutofixContext,
    file: &StateFile,
    state: &mut AutofixState,
    mut entry: HistoryEntry,
    args: EscalateArgs<'_>,
) -> Result<AutofixOutcome, AutofixError> {
    let md = escalation_report(&EscalationInput {
        target: &ctx.config.target,
        iteration: entry.iteration,
        max_iterations: ctx.config.max_iterations,
        report: args.report,
        checks: args.per_check,
        action: args.action.table_label(),
        reason: &args.reason,
        diagnosis: args.diagnosis,
        history: &state.history,
    });
    let options = vec![
        GateOption::new(
            "Fix it by hand (recommended)",
            "take over the failure manually",
        ),
        GateOption::new("Change the spec", "revise the requirements or the checks"),
        GateOption::new("Abandon the PR", "stop working on this change"),
    ];
    let mut q = Question::new(
        format!("ci-autofix.{}", args.action.as_str()),
        format!(
            "{}: {} — a person must decide",
            ctx.config.target.label(),
            args.reason
        ),
        options,
    )
    .with_details(md.clone());
    if args.blocking {
        q = q.blocking();
    }
    ctx.sink.emit(&Event::GateAsked {
        question: q.id.clone(),
        prompt: q.prompt.clone(),
    });
    let answer = ctx.gate.ask(&q).await?;
    let choice = answer.index().and_then(|i| q.label(i)).map(str::to_owned);
    ctx.sink.emit(&Event::GateAnswered {
        question: q.id.clone(),
        choice: choice.clone(),
    });
    ctx.sink.emit(&Event::Escalated {
        id: Some(format!("iter-{}", entry.iteration)),
        reason: args.reason.clone(),
    });
    entry.action = "escalated".into();
    entry.escalation_reason = Some(args.reason.clone());
    state.last_action = args.action.as_str().into();
    finish(
        file,
        state,
        entry,
        Some(args.report),
        args.audit,
        args.now,
        spend_since(ctx.agent.as_ref(), args.spent_before),
    )?;
    Ok(AutofixOutcome::Escalated {
        action: args.action,
        reason: args.reason,
        report: md,
        choice,
    })
}
