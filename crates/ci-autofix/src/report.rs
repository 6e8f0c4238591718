//! Markdown for people: the append-only audit log and the escalation report.
//!
//! The audit log `.moai/reports/ci-autofix/PR-<N>-<YYYY-MM-DD>.md` (local
//! mode: `local-<branch>-<date>.md`) gets a header once and one
//! `## Iteration N` section per iteration, with the seed's fields
//! (classification, sub_class, action, patch_sha, escalation_reason). It is
//! only ever appended to.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use jiff::tz::TimeZone;
use orchestrator_core::forge::ForgeKind;
use orchestrator_core::state::StateError;

use crate::classify::ClassificationReport;
use crate::state::{HistoryEntry, MOAI_DIR, Target, slug};

/// Evidence lines quoted per report.
const EVIDENCE_IN_REPORT: usize = 12;

/// The UTC date of `now` (`2026-05-07`).
pub fn utc_date(now: Timestamp) -> String {
    now.to_zoned(TimeZone::UTC).date().to_string()
}

/// The audit log's path for `target` on the day of `now`.
pub fn audit_log_path(root: &Path, target: &Target, now: Timestamp) -> PathBuf {
    let date = utc_date(now);
    let name = match target {
        Target::Pr {
            number,
            forge: ForgeKind::Gitlab,
            ..
        } => format!("MR-{number}-{date}.md"),
        Target::Pr { number, .. } => format!("PR-{number}-{date}.md"),
        Target::Local { branch } => format!("local-{}-{date}.md", slug(branch)),
    };
    root.join(MOAI_DIR)
        .join("reports")
        .join("ci-autofix")
        .join(name)
}

/// The header written when the audit log is created.
pub fn audit_header(target: &Target, now: Timestamp) -> String {
    format!(
        "# CI Auto-Fix Log — {} — {}\n",
        target.label(),
        utc_date(now)
    )
}

/// One `## Iteration N` section.
pub fn audit_section(entry: &HistoryEntry, report: Option<&ClassificationReport>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n## Iteration {}\n", entry.iteration);
    let _ = writeln!(s, "- **classification**: {}", entry.classification);
    let _ = writeln!(s, "- **sub_class**: {}", entry.sub_class);
    let _ = writeln!(s, "- **action**: {}", entry.action);
    let _ = writeln!(
        s,
        "- **patch_sha**: {}",
        entry.patch_sha.as_deref().unwrap_or("N/A")
    );
    let _ = writeln!(
        s,
        "- **escalation_reason**: {}",
        entry.escalation_reason.as_deref().unwrap_or("N/A")
    );
    if !entry.checks.is_empty() {
        let _ = writeln!(s, "- **failed_checks**: {}", entry.checks.join(", "));
    }
    if let Some(spend) = &entry.agent_spend {
        let _ = writeln!(
            s,
            "- **agent_spend**: {}, {} tokens, ${:.4}",
            orchestrator_core::text::counted(u64::from(spend.calls), "call", "calls"),
            spend.tokens(),
            spend.cost_usd
        );
    }
    if let Some(r) = &entry.rerun {
        let _ = writeln!(
            s,
            "- **rerun** ({}): {} at the same commit, {:.1} s; passed: {}; failed again: {}",
            r.reason,
            orchestrator_core::text::counted(u64::from(r.runs), "run", "runs"),
            r.wall_secs,
            if r.passed.is_empty() {
                "none".to_owned()
            } else {
                r.passed.join(", ")
            },
            if r.failed_again.is_empty() {
                "none".to_owned()
            } else {
                r.failed_again.join(", ")
            },
        );
        if !r.tests.is_empty() {
            let _ = writeln!(s, "- **tests**: {}", r.tests.join(", "));
        }
    }
    for w in &entry.warnings {
        let _ = writeln!(s, "- **warning**: {w}");
    }
    if let Some(report) = report {
        let deciding = report.deciding_evidence();
        if !deciding.is_empty() {
            let _ = writeln!(s, "- **evidence**:");
            for e in deciding.iter().take(5) {
                let _ = writeln!(s, "  - line {} `{}`: `{}`", e.line, e.rule, e.text);
            }
        }
    }
    s
}

/// Appends a section to the audit log, creating the file (and its header) first.
pub fn append_audit(path: &Path, header: &str, section: &str) -> Result<(), StateError> {
    let io = |action: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| StateError::Io {
            action,
            path: p,
            source,
        }
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io("create directory", dir))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io("open", path))?;
    let empty = file.metadata().map(|m| m.len() == 0).unwrap_or(false);
    let mut text = String::new();
    if empty {
        text.push_str(header);
    }
    text.push_str(section);
    file.write_all(text.as_bytes())
        .map_err(io("append to", path))?;
    file.sync_all().map_err(io("sync", path))
}

/// Everything the escalation / diagnostic report shows.
#[derive(Debug, Clone)]
pub struct EscalationInput<'a> {
    /// What the loop works on.
    pub target: &'a Target,
    /// The iteration.
    pub iteration: u32,
    /// The cap.
    pub max_iterations: u32,
    /// The combined classification of the failed checks.
    pub report: &'a ClassificationReport,
    /// The failed checks with the class of each one's own log.
    pub checks: &'a [(String, String)],
    /// The cadence action, in the seed's words.
    pub action: &'a str,
    /// Why the loop escalates.
    pub reason: &'a str,
    /// The agent's diagnosis, when one was asked for.
    pub diagnosis: Option<&'a str>,
    /// Earlier iterations.
    pub history: &'a [HistoryEntry],
}

/// The escalation report (markdown), shown with the question and returned
/// in the outcome.
pub fn escalation_report(input: &EscalationInput<'_>) -> String {
    let mut s = String::new();
    let c = input.report.classification;
    let _ = writeln!(s, "# CI Auto-Fix — escalation — {}\n", input.target.label());
    let _ = writeln!(s, "- **branch**: {}", input.target.branch());
    let _ = writeln!(
        s,
        "- **iteration**: {} of {}",
        input.iteration, input.max_iterations
    );
    let _ = writeln!(s, "- **classification**: {}", c.as_str());
    let _ = writeln!(s, "- **sub_class**: {}", c.sub_class_str());
    let _ = writeln!(s, "- **action**: {}", input.action);
    let _ = writeln!(s, "- **reason**: {}", input.reason);
    let _ = writeln!(
        s,
        "\n## Failed checks\n\n| check | classification |\n|---|---|"
    );
    for (name, class) in input.checks {
        let _ = writeln!(s, "| {} | {} |", name.replace('|', "\\|"), class);
    }
    let _ = writeln!(s, "\n## Evidence\n");
    let deciding = input.report.deciding_evidence();
    if deciding.is_empty() {
        let _ = writeln!(
            s,
            "No line of the log matched a known failure pattern: the classifier cannot interpret it."
        );
    }
    for e in deciding.iter().take(EVIDENCE_IN_REPORT) {
        let job = e
            .job
            .as_deref()
            .map(|j| format!(", job `{j}`"))
            .unwrap_or_default();
        let _ = writeln!(s, "- line {} (`{}`{job}): `{}`", e.line, e.rule, e.text);
    }
    if deciding.len() > EVIDENCE_IN_REPORT {
        let _ = writeln!(s, "- … {} more", deciding.len() - EVIDENCE_IN_REPORT);
    }
    if let Some(d) = input.diagnosis.filter(|d| !d.trim().is_empty()) {
        let _ = writeln!(s, "\n## Diagnosis\n\n{}", d.trim_end());
    }
    if !input.history.is_empty() {
        let _ = writeln!(
            s,
            "\n## Earlier iterations\n\n| iteration | classification | sub_class | action | patch_sha |\n|---|---|---|---|---|"
        );
        for h in input.history {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                h.iteration,
                h.classification,
                h.sub_class,
                h.action,
                h.patch_sha.as_deref().unwrap_or("N/A")
            );
        }
    }
    let _ = writeln!(
        s,
        "\n## What now\n\nNo patch was applied for this failure. Fix it by hand (recommended), change the spec, or abandon the PR."
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::classify;

    fn now() -> Timestamp {
        "2026-05-07T10:00:00Z".parse().unwrap()
    }

    fn pr() -> Target {
        Target::Pr {
            number: 785,
            branch: "feat/my-feature".into(),
            forge: orchestrator_core::forge::ForgeKind::Github,
        }
    }

    fn entry(iteration: u32, sub: &str, action: &str, sha: Option<&str>) -> HistoryEntry {
        HistoryEntry {
            iteration,
            classification: "mechanical".into(),
            sub_class: sub.into(),
            action: action.into(),
            patch_sha: sha.map(Into::into),
            escalation_reason: None,
            checks: vec!["Lint".into()],
            warnings: Vec::new(),
            finished_at: "2026-05-07T10:05:00Z".into(),
            agent_spend: None,
            rerun: None,
        }
    }

    #[test]
    fn audit_log_is_appended_section_by_section() {
        let dir = tempfile::tempdir().unwrap();
        let path = audit_log_path(dir.path(), &pr(), now());
        assert!(path.ends_with(".moai/reports/ci-autofix/PR-785-2026-05-07.md"));
        let header = audit_header(&pr(), now());
        let lint = classify("a.py:1:1: F401 'os' imported but unused\n");
        append_audit(
            &path,
            &header,
            &audit_section(
                &HistoryEntry {
                    agent_spend: Some(orchestrator_core::agent::AgentSpend {
                        calls: 1,
                        input_tokens: 2000,
                        output_tokens: 400,
                        cost_usd: 0.0123,
                        turns: 6,
                    }),
                    ..entry(1, "non-trivial", "applied", Some("abc1234"))
                },
                Some(&lint),
            ),
        )
        .unwrap();
        append_audit(
            &path,
            &header,
            &audit_section(
                &entry(2, "trivial", "applied (silent)", Some("def5678")),
                None,
            ),
        )
        .unwrap();
        let mut third = entry(3, "none", "escalated", None);
        third.classification = "semantic".into();
        third.escalation_reason = Some("semantic failure: escalate (no patch)".into());
        append_audit(&path, &header, &audit_section(&third, None)).unwrap();
        insta::assert_snapshot!(std::fs::read_to_string(&path).unwrap());
        let local = Target::Local {
            branch: "feat/x".into(),
        };
        assert!(audit_log_path(dir.path(), &local, now()).ends_with("local-feat-x-2026-05-07.md"));
        assert_eq!(
            audit_header(&local, now()),
            "# CI Auto-Fix Log — branch feat/x (local) — 2026-05-07\n"
        );
    }

    #[test]
    fn escalation_report_markdown() {
        let log = "test\tRun tests\t2026-05-07T10:11:12.0000000Z Diff in /w/src/lib.rs:1:\ntest\tRun tests\t2026-05-07T10:11:12.0000000Z ---- tests::adds stdout ----\ntest\tRun tests\t2026-05-07T10:11:12.0000000Z thread 'tests::adds' panicked at src/lib.rs:15:9:\n";
        let report = classify(log);
        let history = [entry(1, "trivial", "applied", Some("abc1234"))];
        let checks = [
            ("Test".to_owned(), "semantic/none".to_owned()),
            ("Lint".to_owned(), "mechanical/trivial".to_owned()),
        ];
        let md = escalation_report(&EscalationInput {
            target: &pr(),
            iteration: 2,
            max_iterations: 3,
            report: &report,
            checks: &checks,
            action: "escalate (no patch)",
            reason: "iteration 2, semantic/none: escalate (no patch)",
            diagnosis: Some("`add` subtracts instead of adding.\n"),
            history: &history,
        });
        insta::assert_snapshot!(md);
    }

    #[test]
    fn escalation_report_for_an_unreadable_log() {
        let report = classify("something odd happened\n");
        let md = escalation_report(&EscalationInput {
            target: &Target::Local {
                branch: "main".into(),
            },
            iteration: 2,
            max_iterations: 3,
            report: &report,
            checks: &[("cargo test".to_owned(), "unknown/none".to_owned())],
            action: "manual takeover",
            reason: "classifier cannot interpret: unknown twice in a row, manual takeover",
            diagnosis: None,
            history: &[],
        });
        insta::assert_snapshot!(md);
    }
}
