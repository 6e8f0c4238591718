//! What `review-fix` prints at the end: the plan, the summary of one pass
//! or of all passes, and their `--json` form.

use super::*;

/// What the summary shows besides the report.
#[derive(Debug, Clone)]
pub struct SummaryContext {
    /// The test command as shown; `None` for a dry run without one.
    pub test_command: Option<String>,
    /// Where it came from; `None` without a test command.
    pub test_source: Option<String>,
    /// Wall time of the run.
    pub wall: Duration,
    /// What the run's agent spent in all (planning included), as its budget
    /// counted it.
    pub run_spend: Option<orchestrator_core::AgentSpent>,
}

/// The line of a run's whole agent spend, when an agent was called.
fn run_spend_line(spend: Option<orchestrator_core::AgentSpent>) -> Option<String> {
    let spend = spend.filter(|s| s.calls > 0)?;
    Some(format!(
        "run spend: {} (planning included), {} tokens, ${:.4}",
        counted(u64::from(spend.calls), "agent call", "agent calls"),
        spend.usage.input_tokens + spend.usage.output_tokens,
        spend.usage.cost_usd
    ))
}

pub(super) fn outcome_line(outcome: &Outcome) -> String {
    match outcome {
        Outcome::AllFixed => "every finding fixed".to_owned(),
        Outcome::SomeFailed => "some findings were not fixed".to_owned(),
        Outcome::DryRun => "dry run: plan written, nothing changed".to_owned(),
        Outcome::Stopped => "stopped at the plan; continue with --resume".to_owned(),
        Outcome::NeedsHuman { reason } => {
            format!("waiting for a human: {reason} (approve with -y, or run in a terminal)")
        }
        Outcome::LimitReached { reason } => format!(
            "stopped at the run's limit ({reason}): the verified fixes are committed; continue with --resume (with a higher limit if need be)"
        ),
    }
}

/// The plan as text: stages, their groups, each group's findings.
pub fn render_plan(plan: &FixPlan, titles: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Plan {}: {} in {} over {} ({} isolation)",
        plan.fix_session_id,
        counted(plan.metadata.total_findings as u64, "finding", "findings"),
        counted(plan.groups.len() as u64, "group", "groups"),
        counted(plan.timeline.len() as u64, "stage", "stages"),
        plan.metadata.isolation
    );
    if !plan.metadata.fallback_batches.is_empty() {
        let batches: Vec<String> = plan
            .metadata
            .fallback_batches
            .iter()
            .map(u32::to_string)
            .collect();
        let _ = writeln!(
            out,
            "  (deterministic fallback plan for batch {})",
            batches.join(", ")
        );
    }
    for stage in &plan.timeline {
        let mode = match stage.execution_mode {
            orchestrator_review_fix::ExecutionMode::Parallel => "parallel",
            orchestrator_review_fix::ExecutionMode::Serial => "serial",
        };
        let _ = writeln!(
            out,
            "Stage {} ({mode}): {}",
            stage.stage,
            stage.groups.join(", ")
        );
        for gid in &stage.groups {
            let Some(g) = plan.group(gid) else { continue };
            let _ = writeln!(
                out,
                "  {} {} [{}] risk {}",
                g.group_id,
                g.group_name,
                g.files.join(", "),
                g.risk_assessment.level
            );
            for f in &g.findings {
                match titles(f) {
                    Some(t) => {
                        let _ = writeln!(out, "    {f}  {t}");
                    }
                    None => {
                        let _ = writeln!(out, "    {f}");
                    }
                }
            }
        }
    }
    out
}

/// The closing summary printed on stdout.
pub fn render_summary(report: &RunReport, context: &SummaryContext) -> String {
    let mut out = String::new();
    if report.outcome == Outcome::DryRun
        && let Some(plan) = &report.plan
    {
        let titles = |id: &str| {
            report
                .findings
                .iter()
                .find(|f| f.id == id)
                .map(|f| f.title.clone())
        };
        out.push_str(&render_plan(plan, &titles));
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "review-fix {}: {}",
        report.fix_session_id,
        outcome_line(&report.outcome)
    );
    for note in &report.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    if report.outcome != Outcome::DryRun {
        render_counts(&mut out, report, context);
        render_not_fixed(&mut out, report);
    }
    let summary = report
        .session_dir
        .join(orchestrator_review_fix::session::SUMMARY_FILE);
    if summary.is_file() {
        let _ = writeln!(out, "  summary: {}", summary.display());
    } else {
        let _ = writeln!(out, "  session: {}", report.session_dir.display());
    }
    out
}

/// The summary's figures of a run that fixed: the findings by result, the
/// commits and test runs, the verification's savings, the agent's spend,
/// and each commit's subject.
fn render_counts(out: &mut String, report: &RunReport, context: &SummaryContext) {
    let _ = writeln!(
        out,
        "  findings: {} ({} fixed, {} failed, {}{}{} rejected{})",
        report.findings.len(),
        report.count("fixed"),
        report.count("failed"),
        match report.count("not_fixable") {
            0 => String::new(),
            n => format!("{n} not fixable by this agent, "),
        },
        match report.count("deferred") {
            0 => String::new(),
            n => format!("{n} deferred to a re-lint, "),
        },
        report.count("rejected"),
        match report.count("skipped") {
            0 => String::new(),
            n => format!(", {n} skipped by the findings ledger"),
        },
    );
    let v = &report.verification;
    let tests = match (&context.test_command, &context.test_source) {
        (Some(command), Some(source)) => format!("`{command}`, {source}"),
        (Some(command), None) => format!("`{command}`"),
        (None, _) => "no test command".to_owned(),
    };
    let _ = writeln!(
        out,
        "  commits: {}; test runs: {} ({tests}); wall time {:.1}s",
        report.commits.len(),
        v.test_runs,
        context.wall.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "  verification: {}; one by one would need {} runs, saved {}; re-runs {}, flaky {}",
        v.mode,
        v.each_runs,
        v.runs_saved(),
        v.reruns,
        v.flaky
    );
    if let Some(line) = report.spend_line() {
        let _ = writeln!(out, "  {}", line.replacen("Agent:", "agent:", 1));
    }
    if let Some(line) = run_spend_line(context.run_spend) {
        let _ = writeln!(out, "  {line}");
    }
    for c in &report.commits {
        let short = &c.id.as_str()[..c.id.as_str().len().min(7)];
        let subject = c.message.lines().next().unwrap_or_default();
        let _ = writeln!(out, "    {short} {subject}");
    }
}

/// The summary's `not fixed:` section: each finding that was not fixed,
/// with its result, its attempts and the first line of why.
fn render_not_fixed(out: &mut String, report: &RunReport) {
    let not_fixed: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.result != "fixed")
        .collect();
    if not_fixed.is_empty() {
        return;
    }
    let _ = writeln!(out, "  not fixed:");
    for f in not_fixed {
        let why = f.error.as_deref().map(first_line).unwrap_or_default();
        let attempts = if f.attempts > 0 && !matches!(f.result.as_str(), "not_fixable" | "deferred")
        {
            format!(" after {}", counted(f.attempts, "attempt", "attempts"))
        } else {
            String::new()
        };
        let result = match f.result.as_str() {
            "not_fixable" => "not fixable by this agent",
            "deferred" => "deferred (overlaps an earlier fix)",
            other => other,
        };
        let _ = writeln!(out, "    {} {result}{attempts}: {why}", f.id);
    }
}

/// The closing summary of all passes: one pass is [`render_summary`]; with
/// re-lint passes, each pass's summary under a `pass N` heading, then the
/// totals and why the passes stopped.
pub fn render_passes(passes: &PassesReport, context: &SummaryContext) -> String {
    // One pass that is the whole story (no re-lint, or a dry run or a plan
    // waiting for approval, after which nothing re-lints): its summary.
    if let ([only], StopReason::NotAsked | StopReason::NotExecuted) =
        (passes.passes.as_slice(), &passes.stop)
    {
        return render_summary(only, context);
    }
    let mut out = String::new();
    let n = passes.passes.len();
    for (i, report) in passes.passes.iter().enumerate() {
        let _ = writeln!(out, "pass {}/{n}:", i + 1);
        out.push_str(&render_summary(report, &pass_context(passes, i, context)));
    }
    let _ = writeln!(
        out,
        "review-fix: {} ({}): {}; {} ({} fixed, {} failed, {}{}{} rejected); {}; {}; wall time {:.1}s",
        counted(n as u64, "pass", "passes"),
        passes.stop,
        outcome_line(&passes.outcome()),
        counted(passes.findings() as u64, "finding", "findings"),
        passes.count("fixed"),
        passes.count("failed"),
        match passes.count("not_fixable") {
            0 => String::new(),
            k => format!("{k} not fixable by this agent, "),
        },
        match passes.count("deferred") {
            0 => String::new(),
            k => format!("{k} deferred to the next pass, "),
        },
        passes.count("rejected"),
        counted(passes.commits() as u64, "commit", "commits"),
        counted(u64::from(passes.test_runs()), "test run", "test runs"),
        context.wall.as_secs_f64()
    );
    if let Some(line) = run_spend_line(context.run_spend) {
        let _ = writeln!(out, "  {line}");
    }
    if let StopReason::CommandFailed { stderr_tail, .. } = &passes.stop
        && !stderr_tail.trim().is_empty()
    {
        let _ = writeln!(out, "  the re-lint command's stderr ends:");
        for line in stderr_tail.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    out
}

/// The summary context of pass `i`: its own wall time.
pub(super) fn pass_context(
    passes: &PassesReport,
    i: usize,
    context: &SummaryContext,
) -> SummaryContext {
    SummaryContext {
        wall: passes.walls.get(i).copied().unwrap_or(context.wall),
        // The whole run's, shown once after the passes.
        run_spend: None,
        ..context.clone()
    }
}

/// The `--json` closing lines: without re-lint, one `summary` line
/// ([`summary_json`]); with `--relint` (even when one pass ran), a
/// `pass_summary` line per pass and a last `summary` line with the totals
/// (`passes`, `relint_stop`, `relint_stderr_tail`, the findings of every
/// pass — each with its `pass` — and their commits).
pub fn render_passes_json(passes: &PassesReport, context: &SummaryContext) -> String {
    let mut out = String::new();
    let many = passes.passes.len() > 1 || passes.stop != StopReason::NotAsked;
    if !many && let [only] = passes.passes.as_slice() {
        let _ = writeln!(out, "{}", summary_json(only, context));
        return out;
    }
    let mut findings = Vec::new();
    let mut commits = Vec::new();
    for (i, report) in passes.passes.iter().enumerate() {
        let mut line = summary_json(report, &pass_context(passes, i, context));
        line["event"] = json!("pass_summary");
        line["pass"] = json!(i + 1);
        if let Some(f) = line["findings"].as_array() {
            findings.extend(f.iter().cloned().map(|mut f| {
                f["pass"] = json!(i + 1);
                f
            }));
        }
        if let Some(c) = line["commits"].as_array() {
            commits.extend(c.iter().cloned());
        }
        let _ = writeln!(out, "{line}");
    }
    let outcome = passes.outcome();
    let last = passes.passes.last().map(|r| summary_json(r, context));
    // `wall_time_s` stays the whole run's.
    let mut total = last.unwrap_or_else(|| json!({}));
    total["event"] = json!("summary");
    total["run_spend"] = json!(context.run_spend);
    total["outcome"] = json!(outcome.as_str());
    total["exit_code"] = json!(outcome.exit_code());
    total["passes"] = json!(passes.passes.len());
    total["relint_stop"] = json!(passes.stop.to_string());
    if let StopReason::CommandFailed { stderr_tail, .. } = &passes.stop {
        total["relint_stderr_tail"] = json!(stderr_tail);
    }
    total["findings"] = json!(findings);
    total["commits"] = json!(commits);
    total["counts"] = json!({
        "total": passes.findings(),
        "fixed": passes.count("fixed"),
        "failed": passes.count("failed"),
        "rejected": passes.count("rejected"),
    });
    total["test_runs"] = json!(passes.test_runs());
    let _ = writeln!(out, "{total}");
    out
}

/// The closing summary as one JSON object (`--json`).
pub fn summary_json(report: &RunReport, context: &SummaryContext) -> serde_json::Value {
    let summary = report
        .session_dir
        .join(orchestrator_review_fix::session::SUMMARY_FILE);
    json!({
        "event": "summary",
        "flow": orchestrator_review_fix::FLOW,
        "fix_session_id": report.fix_session_id,
        "session_dir": report.session_dir,
        "summary_file": summary.is_file().then_some(summary),
        "outcome": report.outcome.as_str(),
        "exit_code": report.outcome.exit_code(),
        "findings": report.findings.iter().map(|f| json!({
            "id": f.id,
            "title": f.title,
            "result": f.result,
            "attempts": f.attempts,
            "commit": f.commit,
            "error": f.error,
            "spend": f.spend,
        })).collect::<Vec<_>>(),
        "counts": {
            "total": report.findings.len(),
            "fixed": report.count("fixed"),
            "failed": report.count("failed"),
            "rejected": report.count("rejected"),
            "skipped": report.count("skipped"),
        },
        "commits": report.commits.iter().map(|c| json!({
            "id": c.id.as_str(),
            "message": c.message.lines().next().unwrap_or_default(),
        })).collect::<Vec<_>>(),
        "test_runs": report.verification.test_runs,
        "verification": {
            "mode": report.verification.mode.to_string(),
            "test_runs": report.verification.test_runs,
            "reruns": report.verification.reruns,
            "each_runs": report.verification.each_runs,
            "runs_saved": report.verification.runs_saved(),
            "flaky": report.verification.flaky,
        },
        "test_command": context.test_command,
        "test_command_source": context.test_source,
        "wall_time_s": context.wall.as_secs_f64(),
        "run_spend": context.run_spend,
        "plan": report.plan,
        "notes": report.notes,
    })
}
