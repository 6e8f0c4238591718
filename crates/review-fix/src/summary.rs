//! `fix-summary.md`: the closing report of a run.

use std::fmt::Write as _;

use orchestrator_core::text::counted;
use orchestrator_core::verify::VerifyMode;

use crate::files::{
    AgentSpend, FixPlan, FixProgress, FixResult, RejectedFinding, SUMMARY_VERSION,
    VerificationStats,
};

/// What the summary is rendered from.
#[derive(Debug, Clone)]
pub struct SummaryInput<'a> {
    /// The session id.
    pub fix_session_id: &'a str,
    /// The run number.
    pub run: u32,
    /// When the session started.
    pub started_at: &'a str,
    /// When the run finished.
    pub finished_at: &'a str,
    /// The plan, when planning happened.
    pub plan: Option<&'a FixPlan>,
    /// Every group's progress, in group order.
    pub progress: &'a [FixProgress],
    /// Findings rejected before planning.
    pub rejected: &'a [RejectedFinding],
    /// Findings the findings ledger left out, with why.
    pub skipped: &'a [RejectedFinding],
    /// Test runs of this run and what `each` would have needed.
    pub verification: VerificationStats,
    /// The outcome, as in `fix-history.json`.
    pub outcome: &'a str,
    /// What the run's worktrees cost, when it made any.
    pub worktrees: Option<&'a orchestrator_core::worktree::PoolStats>,
    /// The tests at the base, when the run kept them (a red base's
    /// failures were blamed on no fix).
    pub base: Option<&'a orchestrator_core::test_runner::Baseline>,
}

/// `Agent: 9 calls, 1920 tokens, $0.0123; per verified fix: $0.0041, 1.3
/// test runs` — what the agent spent on these findings, and what each fix
/// that landed cost; `None` when no agent was called.
pub fn spend_line<'a>(
    spends: impl IntoIterator<Item = &'a AgentSpend>,
    fixed: usize,
    test_runs: u32,
) -> Option<String> {
    let mut total = AgentSpend::default();
    for s in spends {
        total.add(s);
    }
    if total.calls == 0 {
        return None;
    }
    let per_fix = if fixed == 0 {
        "no verified fix".to_owned()
    } else {
        // Counts stay far below 2^53.
        #[allow(clippy::cast_precision_loss)]
        let n = fixed as f64;
        format!(
            "per verified fix: ${:.4}, {:.1} test runs",
            total.cost_usd / n,
            f64::from(test_runs) / n
        )
    };
    Some(format!(
        "Agent: {}, {} tokens, ${:.4}; {per_fix}",
        counted(u64::from(total.calls), "call", "calls"),
        total.tokens(),
        total.cost_usd
    ))
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Renders `fix-summary.md` (format version [`SUMMARY_VERSION`]).
pub fn render_summary(input: &SummaryInput<'_>) -> String {
    let mut out = String::new();
    let findings: Vec<Row<'_>> = input
        .progress
        .iter()
        .flat_map(|p| p.findings.iter().map(move |f| (p.group_id.as_str(), f)))
        .collect();
    render_overview(&mut out, input, &findings);
    render_findings_table(&mut out, &findings);
    render_failures(&mut out, &findings);
    render_declined(&mut out, &findings);
    render_flaky(&mut out, input.progress);
    render_left_out(&mut out, "Rejected", input.rejected);
    render_left_out(&mut out, "Skipped (findings ledger)", input.skipped);
    out
}

/// A finding of the summary with its group's id.
type Row<'a> = (&'a str, &'a crate::files::ProgressFinding);

/// The list at the top: outcome, counts, plan, commits, test runs, spend,
/// the base's failures, worktrees, flaky failures and times.
fn render_overview(out: &mut String, input: &SummaryInput<'_>, findings: &[Row<'_>]) {
    let fixed = findings
        .iter()
        .filter(|(_, f)| f.result == Some(FixResult::Fixed))
        .count();
    let commits = findings
        .iter()
        .filter(|(_, f)| f.commit_hash.is_some())
        .count();
    let _ = writeln!(out, "<!-- fix-summary version {SUMMARY_VERSION} -->");
    let _ = writeln!(out, "# Fix summary: {}\n", input.fix_session_id);
    let _ = writeln!(out, "- Outcome: **{}** (run {})", input.outcome, input.run);
    let _ = writeln!(out, "- {}", findings_line(findings, input.rejected.len()));
    if let Some(plan) = input.plan {
        let _ = writeln!(
            out,
            "- Plan: {} in {} ({}, isolation {})",
            counted(plan.groups.len() as u64, "group", "groups"),
            counted(plan.timeline.len() as u64, "stage", "stages"),
            plan.execution_strategy.approach,
            plan.metadata.isolation
        );
    }
    let _ = writeln!(out, "- Commits: {commits}");
    let v = &input.verification;
    render_test_runs(out, v);
    if let Some(line) = spend_line(
        findings.iter().filter_map(|(_, f)| f.spend.as_ref()),
        fixed,
        v.test_runs,
    ) {
        let _ = writeln!(out, "- {line}");
    }
    if let Some(base) = input.base {
        render_base(out, base);
    }
    if let Some(w) = input.worktrees {
        let _ = writeln!(
            out,
            "- Worktrees: {} made (setup {:.1}s, git {:.1}s), {} reused",
            w.made,
            w.setup_ms as f64 / 1000.0,
            w.git_ms as f64 / 1000.0,
            w.reused
        );
    }
    if v.flaky > 0 {
        let _ = writeln!(
            out,
            "- Flaky test failures: {} (failed, then passed on the identical tree; the fixes were kept)",
            v.flaky
        );
    }
    let _ = writeln!(
        out,
        "- Started: {}; finished: {}",
        input.started_at, input.finished_at
    );
}

/// `Findings: 9 (5 fixed, 1 failed, 2 rejected, 1 not finished)`, naming
/// the declined and deferred only when there are some.
fn findings_line(findings: &[Row<'_>], rejected: usize) -> String {
    let count = |r: FixResult| findings.iter().filter(|(_, f)| f.result == Some(r)).count();
    let (fixed, failed) = (count(FixResult::Fixed), count(FixResult::Failed));
    let (not_fixable, deferred) = (count(FixResult::NotFixable), count(FixResult::Deferred));
    let open = findings.len() - fixed - failed - not_fixable - deferred;
    let mut line = format!(
        "Findings: {} ({fixed} fixed, {failed} failed, ",
        findings.len() + rejected
    );
    if not_fixable > 0 {
        let _ = write!(line, "{not_fixable} not fixable by this agent, ");
    }
    if deferred > 0 {
        let _ = write!(line, "{deferred} deferred to a re-lint, ");
    }
    let _ = write!(line, "{rejected} rejected");
    if open > 0 {
        let _ = write!(line, ", {open} not finished");
    }
    line.push(')');
    line
}

/// The test runs line: how many, in which mode, and what one by one would
/// have taken.
fn render_test_runs(out: &mut String, v: &VerificationStats) {
    let reruns = if v.reruns > 0 {
        format!(", {} of them re-runs for flaky checks", v.reruns)
    } else {
        String::new()
    };
    if v.mode == VerifyMode::Each {
        let _ = writeln!(out, "- Test runs: {} (verify each{reruns})", v.test_runs);
    } else {
        let _ = writeln!(
            out,
            "- Test runs: {} (verify {}{reruns}; one by one: {}, saved {})",
            v.test_runs,
            v.mode,
            v.each_runs,
            v.runs_saved()
        );
    }
}

/// What the tests said at the base, when they failed there.
fn render_base(out: &mut String, base: &orchestrator_core::test_runner::Baseline) {
    if let Some(how) = &base.unnamed_failure {
        let _ = writeln!(
            out,
            "- Before any fix the test command {how}, naming no failing test: each fix was held to a passing run"
        );
    } else if !base.failing_tests.is_empty() {
        let names: Vec<&str> = base.failing_tests.iter().map(String::as_str).collect();
        let _ = writeln!(
            out,
            "- Failing before any fix: {} ({}; no fix was blamed for them, each was judged by no new failure)",
            names.join(", "),
            counted(names.len() as u64, "test", "tests")
        );
    }
}

/// The table of every finding with its result, attempts and commit.
fn render_findings_table(out: &mut String, findings: &[Row<'_>]) {
    if !findings.is_empty() {
        let _ = writeln!(out, "\n## Findings\n");
        let _ = writeln!(
            out,
            "| Finding | Title | Location | Group | Result | Attempts | Commit |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for (group, f) in findings {
            let location = match f.line {
                Some(l) => format!("{}:{l}", f.file),
                None => f.file.clone(),
            };
            let result = match f.result {
                Some(FixResult::Fixed) => "fixed",
                Some(FixResult::Failed) => "failed",
                Some(FixResult::NotFixable) => "not fixable by this agent",
                Some(FixResult::Deferred) => "deferred: overlaps an earlier fix",
                None => "not finished",
            };
            let commit = f
                .commit_hash
                .as_deref()
                .map(|c| c.chars().take(7).collect::<String>())
                .unwrap_or_else(|| "-".to_owned());
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                cell(&f.finding_id),
                cell(&f.finding_title),
                cell(&location),
                group,
                result,
                f.attempts,
                commit
            );
        }
    }
}

/// Each failed finding with its last error.
fn render_failures(out: &mut String, findings: &[Row<'_>]) {
    let failures: Vec<_> = findings
        .iter()
        .filter(|(_, f)| f.result == Some(FixResult::Failed))
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "\n## Failures");
        for (_, f) in failures {
            let _ = writeln!(
                out,
                "\n### {}: {}\n\nAttempts: {}. Last error:\n\n```text\n{}\n```",
                f.finding_id,
                f.finding_title,
                f.attempts,
                f.error_message
                    .as_deref()
                    .unwrap_or("(none recorded)")
                    .trim()
            );
        }
    }
}

/// The findings the agent declined, with its first line of reason.
fn render_declined(out: &mut String, findings: &[Row<'_>]) {
    let declined: Vec<_> = findings
        .iter()
        .filter(|(_, f)| f.result == Some(FixResult::NotFixable))
        .collect();
    if !declined.is_empty() {
        let _ = writeln!(out, "\n## Not fixable by this agent\n");
        for (_, f) in declined {
            let _ = writeln!(
                out,
                "- {}: {}",
                f.finding_id,
                f.error_message
                    .as_deref()
                    .and_then(|m| m.lines().next())
                    .unwrap_or("declined")
            );
        }
    }
}

/// The tests that failed, then passed on the identical tree.
fn render_flaky(out: &mut String, progress: &[FixProgress]) {
    let flaky: Vec<(&str, &str)> = progress
        .iter()
        .flat_map(|p| p.errors.iter())
        .filter(|e| e.error_type == "flaky_test")
        .map(|e| (e.finding_id.as_deref().unwrap_or("-"), e.message.as_str()))
        .collect();
    if !flaky.is_empty() {
        let _ = writeln!(out, "\n## Flaky tests\n");
        for (id, message) in flaky {
            let _ = writeln!(
                out,
                "- {id}: {}",
                message.lines().next().unwrap_or_default()
            );
        }
    }
}

/// The findings rejected before planning, or skipped by the findings
/// ledger, with the reason, under `title`.
fn render_left_out(out: &mut String, title: &str, rejected: &[RejectedFinding]) {
    if !rejected.is_empty() {
        let _ = writeln!(out, "\n## {title}\n");
        for r in rejected {
            match &r.file {
                Some(file) => {
                    let _ = writeln!(out, "- {} (`{}`): {}", r.finding_id, file, r.reason);
                }
                None => {
                    let _ = writeln!(out, "- {}: {}", r.finding_id, r.reason);
                }
            }
        }
    }
}
