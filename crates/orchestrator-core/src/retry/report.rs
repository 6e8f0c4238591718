//! What people and agents read: the instruction of each attempt and the
//! human intervention report.

use std::fmt::Write as _;

use super::analysis::{Analysis, Complexity, ErrorPattern};
use super::{AttemptRecord, AttemptResult, HistoryEntry, Milestone, attempts, since_last_human};

/// How many earlier failed attempts an instruction repeats (the most recent).
pub const PROMPT_FAILED_ATTEMPTS: usize = 4;

/// The instruction for attempt `attempt` of round `round`: the milestone, its
/// exit criteria and the report format, then — since the last human action —
/// the human's note, the most recent failed attempts with every failing
/// criterion's explanation, and the hints for this round.
pub fn build_attempt_prompt(
    milestone: &Milestone,
    history: &[HistoryEntry],
    round: u32,
    attempt: u32,
    auto_mode: bool,
) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail: the results below are ignored.
    let _ = writeln!(out, "# Milestone {}: {}\n", milestone.id, milestone.title);
    let _ = writeln!(out, "{}\n", milestone.instruction.trim());
    if !milestone.exit_criteria.is_empty() {
        out.push_str("## Exit criteria\n\n");
        for c in &milestone.exit_criteria {
            let _ = writeln!(out, "- {c}");
        }
        out.push_str(
            "\n## How to report\n\n\
             When you are done, report every exit criterion on its own line, exactly:\n\n\
             - [ ] <criterion> - PASS - <explanation>\n\
             - [ ] <criterion> - FAIL - <explanation>\n\n\
             or answer with JSON: \
             {\"criteria\": [{\"criterion\": \"…\", \"status\": \"PASS\" or \"FAIL\", \"explanation\": \"…\"}]}\n",
        );
    }
    if auto_mode {
        out.push_str("\nYou are approved to proceed: do the work without asking for permission.\n");
    }

    let resumed_note = history.iter().rev().find_map(|e| match e {
        HistoryEntry::HumanResumed { note, .. } => Some(note.as_deref()),
        _ => None,
    });
    if let Some(note) = resumed_note {
        out.push_str("\n## Guidance from a human\n\n");
        out.push_str("A human looked at the earlier failures and acted on them.");
        if let Some(note) = note.filter(|n| !n.trim().is_empty()) {
            let _ = write!(
                out,
                " Their note:\n\n> {}",
                note.trim().replace('\n', "\n> ")
            );
        }
        out.push('\n');
    }

    let window = since_last_human(history);
    let failed: Vec<&AttemptRecord> = attempts(window).filter(|a| !a.passed()).collect();
    if !failed.is_empty() {
        let _ = writeln!(
            out,
            "\n## Previous attempts\n\nThis is round {round}, attempt {attempt}. \
             Earlier attempts failed; do not repeat their mistakes.\n"
        );
        let skip = failed.len().saturating_sub(PROMPT_FAILED_ATTEMPTS);
        for a in &failed[skip..] {
            let _ = writeln!(out, "### Round {}, attempt {}\n", a.round, a.attempt);
            for m in a.failure_messages() {
                let _ = writeln!(out, "- FAIL {m}");
            }
            out.push('\n');
        }
    }
    let hints = window.iter().rev().find_map(|e| match e {
        HistoryEntry::Hints { round: r, hints } if *r == round => Some(hints),
        _ => None,
    });
    if let Some(hints) = hints.filter(|h| !h.is_empty()) {
        out.push_str(if failed.is_empty() { "\n" } else { "" });
        out.push_str("## Hints for this round\n\n");
        for h in hints {
            let _ = writeln!(out, "- {h}");
        }
    }
    out
}

/// The human intervention report: milestone, criteria, attempt history per
/// round with failures, the analysis, hints tried and suggested next steps.
pub fn render_human_report(
    milestone: &Milestone,
    history: &[HistoryEntry],
    reason: &str,
    analysis: Option<&Analysis>,
) -> String {
    let mut out = String::new();
    let all: Vec<&AttemptRecord> = attempts(history).collect();
    render_report_header(&mut out, milestone, reason, &all);
    let hints_tried = render_history(&mut out, history);
    if all.is_empty() {
        out.push_str("\n_No attempt finished yet._\n");
    }
    render_analysis(&mut out, analysis);
    out.push_str("\n## Hints tried\n\n");
    if hints_tried.is_empty() {
        out.push_str("_none_\n");
    }
    for (round, hints) in &hints_tried {
        let _ = writeln!(out, "- Round {round}:");
        for h in hints.iter() {
            let _ = writeln!(out, "  - {h}");
        }
    }
    out.push_str("\n## Suggested next steps\n\n");
    for (i, step) in next_steps(&all, analysis, !hints_tried.is_empty())
        .iter()
        .enumerate()
    {
        let _ = writeln!(out, "{}. {step}", i + 1);
    }
    out
}

/// The report's title block: milestone, reason, attempt count, status and
/// the exit criteria.
fn render_report_header(
    out: &mut String,
    milestone: &Milestone,
    reason: &str,
    all: &[&AttemptRecord],
) {
    let mut rounds: Vec<u32> = all.iter().map(|a| a.round).collect();
    rounds.dedup();
    let _ = writeln!(out, "# Human intervention required\n");
    let _ = writeln!(
        out,
        "**Milestone:** {} - {}  ",
        milestone.id, milestone.title
    );
    let _ = writeln!(out, "**Reason:** {reason}  ");
    let _ = writeln!(
        out,
        "**Total attempts:** {} across {} round{}  ",
        all.len(),
        rounds.len(),
        if rounds.len() == 1 { "" } else { "s" }
    );
    out.push_str("**Status:** AWAITING RESOLUTION\n\n## Exit criteria\n\n");
    if milestone.exit_criteria.is_empty() {
        out.push_str("_none_\n");
    }
    for c in &milestone.exit_criteria {
        let _ = writeln!(out, "- {c}");
    }
}

/// The attempt history, round by round, with escalations and human
/// actions in place; returns the hints given, by round.
fn render_history<'h>(out: &mut String, history: &'h [HistoryEntry]) -> Vec<(u32, &'h [String])> {
    out.push_str("\n## Attempt history\n");
    let mut current_round = None;
    let mut hints_tried: Vec<(u32, &[String])> = Vec::new();
    for entry in history {
        match entry {
            HistoryEntry::Attempt(a) => {
                if current_round != Some(a.round) {
                    current_round = Some(a.round);
                    let _ = write!(out, "\n### Round {}", a.round);
                    if hints_tried.last().is_some_and(|(r, _)| *r == a.round) {
                        out.push_str(" (after hints)");
                    }
                    out.push('\n');
                }
                render_attempt(out, a);
            }
            HistoryEntry::Hints { round, hints } => hints_tried.push((*round, hints)),
            HistoryEntry::Escalated { round, reason } => {
                let _ = writeln!(out, "\n_Escalated after round {round}: {reason}._");
            }
            HistoryEntry::HumanResumed { round, note } => {
                let _ = write!(out, "\n_A human acted; resumed at round {round}");
                if let Some(n) = note {
                    let _ = write!(out, " with the note: \"{}\"", n.trim());
                }
                out.push_str("._\n");
            }
        }
    }
    hints_tried
}

/// The failure analysis section: pattern, complexity, confidence and the
/// distinct errors.
fn render_analysis(out: &mut String, analysis: Option<&Analysis>) {
    out.push_str("\n## Analysis\n\n");
    let Some(a) = analysis else {
        out.push_str("_No failed attempt to analyse._\n");
        return;
    };
    let pattern = match a.pattern {
        ErrorPattern::SameError => "the same error every attempt",
        ErrorPattern::DifferentErrors => "a different error each attempt",
        ErrorPattern::Intermittent => "errors that come and go (intermittent)",
    };
    let _ = writeln!(
        out,
        "**Error pattern:** {pattern} (`{}`)  ",
        a.pattern.as_str()
    );
    let complexity = match a.complexity {
        Complexity::Simple => "simple",
        Complexity::Complex => "complex (timeouts or non-deterministic behaviour)",
    };
    let _ = writeln!(out, "**Complexity:** {complexity}  ");
    let confidence = match a.confidence {
        super::Confidence::High => "high",
        super::Confidence::Low => "low",
    };
    let _ = writeln!(out, "**Confidence in the root cause:** {confidence}  ");
    let _ = writeln!(out, "**Failed attempts analysed:** {}\n", a.failed_attempts);
    out.push_str("**Distinct errors:**\n\n");
    for e in &a.unique_errors {
        let _ = writeln!(out, "- {e}");
    }
}

fn render_attempt(out: &mut String, a: &AttemptRecord) {
    let _ = write!(out, "\n**Attempt {}:**", a.attempt);
    if a.permission_reasks > 0 {
        let _ = write!(
            out,
            " _(asked permission to proceed {} time{})_",
            a.permission_reasks,
            if a.permission_reasks == 1 { "" } else { "s" }
        );
    }
    out.push('\n');
    match &a.result {
        AttemptResult::Validated { validation } => {
            for r in &validation.results {
                let mark = if r.passed { "✅" } else { "❌" };
                let _ = writeln!(out, "- {mark} {} → {}", r.criterion, r.explanation);
            }
            if validation.results.is_empty() {
                out.push_str("- ✅ (no exit criteria)\n");
            }
        }
        AttemptResult::AgentError { message } => {
            let _ = writeln!(out, "- ❌ agent error → {message}");
        }
        AttemptResult::KeptAskingPermission { question } => {
            let _ = writeln!(out, "- ❌ kept asking permission to proceed → {question}");
        }
    }
}

fn next_steps(all: &[&AttemptRecord], analysis: Option<&Analysis>, hinted: bool) -> Vec<String> {
    let mut steps: Vec<String> = Vec::new();
    if let Some(a) = analysis {
        match a.pattern {
            ErrorPattern::SameError => steps.push(
                "The same failure repeats: fix its cause outside the agent (environment, \
                 credentials, data, a dependency) or correct the exit criterion if it is wrong."
                    .into(),
            ),
            ErrorPattern::DifferentErrors | ErrorPattern::Intermittent => steps.push(
                "Failures change between attempts: look for unstable infrastructure (network, \
                 rate limits, shared state) before retrying."
                    .into(),
            ),
        }
        if a.complexity == Complexity::Complex {
            steps.push(
                "Timeouts or non-deterministic behaviour were reported: reproduce the check by \
                 hand and make it deterministic (time limits, retries with backoff)."
                    .into(),
            );
        }
    }
    if all
        .iter()
        .any(|a| matches!(a.result, AttemptResult::AgentError { .. }))
    {
        steps.push(
            "Some attempts failed inside the agent itself: check its configuration, budget and \
             time limit."
                .into(),
        );
    }
    if all
        .iter()
        .any(|a| matches!(a.result, AttemptResult::KeptAskingPermission { .. }))
        || all.iter().any(|a| a.permission_reasks > 0)
    {
        steps.push(
            "The agent asked for permission to proceed: answer its question in your note.".into(),
        );
    }
    if hinted {
        steps.push("The hints above did not resolve it: do not simply retry with them.".into());
    }
    steps.push(
        "Then resume the milestone from its saved state (a fresh round starts, with your note \
         passed to the agent), or stop it."
            .into(),
    );
    steps
}
