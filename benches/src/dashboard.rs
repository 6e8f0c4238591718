//! The dashboard's workload: a review-fix session of `n` findings as a run
//! leaves it — `fix-progress-N.json` files of five findings each (every
//! fourth finding failed with a test output, the rest fixed with a commit)
//! and an `events.ndjson` with the run's events (start, test run, agent
//! call, commit or failure, finish per finding) — for timing how long
//! `orchestrator serve` takes to list the repository's sessions.

use std::path::Path;

use orchestrator_core::event::{Event, JobStatus};
use orchestrator_core::state::event_log::{EVENTS_FILE, LogEntry, LogLine};
use serde_json::json;

/// Findings per group (progress file).
const PER_GROUP: usize = 5;

fn line(at_ms: i64, event: Event) -> String {
    let line = LogLine {
        v: 1,
        at_ms,
        pid: 1,
        entry: LogEntry::Event { event },
    };
    serde_json::to_string(&line).unwrap_or_default()
}

/// Writes a review-fix session of `n` findings under `repo`.
pub fn review_fix_session(repo: &Path, n: usize) -> std::io::Result<()> {
    let dir = repo.join(".review/fixes/fix-1767225600000");
    std::fs::create_dir_all(&dir)?;
    let mut events = Vec::with_capacity(n * 5 + 1);
    events.push(line(
        0,
        Event::SessionOpened {
            flow: "review-fix".into(),
            session: "fix-1767225600000".into(),
            dir: dir.clone(),
        },
    ));
    for (g, chunk) in (0..n).collect::<Vec<_>>().chunks(PER_GROUP).enumerate() {
        let mut findings = Vec::new();
        for &i in chunk {
            let id = format!("clippy::needless_return@src/m{g}.rs:{i}:5");
            let failed = i % 4 == 3;
            events.extend(finding_events(&id, i, failed));
            findings.push(progress_record(&id, g, i, failed));
        }
        let progress = json!({
            "progress_id": format!("fix-progress-{}", g + 1), "group_id": format!("G{}", g + 1),
            "group_name": "quality", "status": "completed", "phase": "done", "assigned_agent": "builtin",
            "started_at": "2026-01-01T00:00:00Z", "last_update": "2026-01-01T00:00:01Z",
            "findings": findings,
            "summary": {"total_findings": chunk.len(), "pending": 0, "in_progress": 0, "fixed": 0, "failed": 0, "percent_complete": 100.0},
            "current_finding": null, "flow_control": {"implementation_approach": [], "current_step": null},
            "errors": [],
        });
        std::fs::write(
            dir.join(format!("fix-progress-{}.json", g + 1)),
            progress.to_string(),
        )?;
    }
    std::fs::write(dir.join(EVENTS_FILE), events.join("\n") + "\n")
}

/// The event-log lines of finding `i`: started, tested, one agent call,
/// then a commit (or, when `failed`, a failed attempt), finished.
fn finding_events(id: &str, i: usize, failed: bool) -> Vec<String> {
    let at = i64::try_from(i).unwrap_or(0) * 10;
    let id = id.to_owned();
    let outcome = if failed {
        Event::AttemptFailed {
            id: id.clone(),
            round: 1,
            attempt: 1,
            error: "the tests failed\nrunning 3 tests\ntest tests::it_works ... FAILED\n".repeat(3),
        }
    } else {
        Event::CommitMade {
            id: id.clone(),
            commit: format!("{i:040x}"),
            summary: format!("fix(quality): unneeded `return` statement [{id}]"),
        }
    };
    vec![
        line(
            at,
            Event::JobStarted {
                id: id.clone(),
                title: Some("unneeded `return` statement".into()),
            },
        ),
        line(
            at + 2,
            Event::TestsRan {
                id: Some(id.clone()),
                passed: !failed,
                failing: if failed {
                    vec!["tests::it_works".into()]
                } else {
                    vec![]
                },
            },
        ),
        line(
            at + 3,
            Event::AgentCall {
                id: id.clone(),
                spend: Default::default(),
                total: Default::default(),
            },
        ),
        line(at + 4, outcome),
        line(
            at + 5,
            Event::JobFinished {
                id,
                status: if failed {
                    JobStatus::Failed
                } else {
                    JobStatus::Completed
                },
                detail: None,
            },
        ),
    ]
}

/// Finding `i`'s record in group `g`'s progress file.
fn progress_record(id: &str, g: usize, i: usize, failed: bool) -> serde_json::Value {
    json!({
        "finding_id": id, "finding_title": "unneeded `return` statement",
        "file": format!("src/m{g}.rs"), "line": i, "status": "completed",
        "result": if failed { "failed" } else { "fixed" }, "attempts": if failed { 2 } else { 1 },
        "started_at": "2026-01-01T00:00:00Z", "completed_at": "2026-01-01T00:00:01Z",
        "commit_hash": if failed { None } else { Some(format!("{i:040x}")) },
        "test_passed": !failed,
        "error_message": if failed { Some("the tests failed: tests::it_works") } else { None },
    })
}
