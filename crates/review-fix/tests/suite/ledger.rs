//! The findings ledger across runs: a second run over the same findings
//! calls no agent for what the first fixed, what failed (unless retried)
//! and what the user declined; a fix gone from the branch is tried again.

use std::sync::Arc;

use orchestrator_core::fakes::FakeAgent;
use orchestrator_core::gate::AutoYes;
use orchestrator_review_fix::findings_ledger::{Event, FindingsLedger, ledger_path};
use orchestrator_review_fix::{Outcome, RunReport, run};
use serde_json::json;

use crate::flow::{FILES, Fixture, config, edit, finding};

fn results(report: &RunReport) -> Vec<(String, String, Option<String>)> {
    let mut out: Vec<_> = report
        .findings
        .iter()
        .map(|f| (f.id.clone(), f.result.clone(), f.error.clone()))
        .collect();
    out.sort();
    out
}

/// Edits the ledger as `orchestrator findings decline` does.
fn edit_ledger(fx: &Fixture, finding_id: &str, event: Event) {
    let path = ledger_path(fx.root());
    let mut ledger = FindingsLedger::read(&path).unwrap();
    let key = ledger.resolve(finding_id).unwrap();
    ledger.record(&key, event, "2026-01-01T00:00:00Z");
    ledger.write(&path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
async fn a_second_run_calls_no_agent_for_fixed_failed_or_declined_findings() {
    let fx = Fixture::new(FILES);
    let input = fx.export(json!([
        finding("F1", "src/a.rs", 1, "Rename a1"),
        finding("F2", "src/b.rs", 1, "Break b1"),
        finding("F3", "src/c.rs", 1, "Break c1"),
    ]));
    let first = Arc::new(
        FakeAgent::new("fake")
            .on("F1", edit("src/a.rs", "A1\na2\na3\n"))
            .on("F2", edit("src/b.rs", "BAD\nb2\n"))
            .on("F3", edit("src/c.rs", "BAD\n")),
    );
    let once = || config(vec![input.clone()]).with_max_iterations(1);
    let report = run(once(), fx.services(first.clone(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::SomeFailed);
    let fixed_in = report.commits[0].id.to_string();
    let ledger = FindingsLedger::read(&ledger_path(fx.root())).unwrap();
    let statuses: Vec<(&str, &str)> = ledger
        .entries
        .values()
        .map(|e| (e.finding_id.as_str(), e.status().name()))
        .collect();
    assert_eq!(statuses.len(), 3);
    for expected in [("F1", "fixed"), ("F2", "failed"), ("F3", "failed")] {
        assert!(statuses.contains(&expected), "{statuses:?}");
    }

    // The user declines F3; the second run tries nothing.
    edit_ledger(
        &fx,
        "F3",
        Event::Declined {
            reason: "c1 is right as it is".to_owned(),
        },
    );
    let second = Arc::new(FakeAgent::new("fake").otherwise(edit("src/c.rs", "C1\n")));
    let report = run(once(), fx.services(second.clone(), Arc::new(AutoYes)))
        .await
        .unwrap();
    assert_eq!(second.calls().len(), 0, "no agent call on the second run");
    assert!(report.commits.is_empty());
    let short = &fixed_in[..12];
    assert_eq!(
        results(&report),
        [
            (
                "F1".to_owned(),
                "skipped".to_owned(),
                Some(format!("fixed in {short}"))
            ),
            (
                "F2".to_owned(),
                "skipped".to_owned(),
                Some(
                    "failed before (max iterations reached (1): the tests failed with the fix \
                     applied (failing: tests::it_works); the fix was rolled back. Test output \
                     (tail):); --retry-failed tries it again"
                        .to_owned()
                )
            ),
            (
                "F3".to_owned(),
                "skipped".to_owned(),
                Some("declined: c1 is right as it is".to_owned())
            ),
        ]
    );
    let summary = std::fs::read_to_string(report.session_dir.join("fix-summary.md")).unwrap();
    assert!(
        summary.contains("## Skipped (findings ledger)"),
        "{summary}"
    );

    // With --retry-failed, and F1's fix gone from the branch (its commit no
    // ancestor of HEAD): F1 and F2 are tried, the declined F3 is not.
    edit_ledger(
        &fx,
        "F1",
        Event::Fixed {
            commit: "0123456789abcdef0123456789abcdef01234567".to_owned(),
        },
    );
    let third = Arc::new(
        FakeAgent::new("fake")
            .on("F1", edit("src/a.rs", "A1\na2\na3\n"))
            .on("F2", edit("src/b.rs", "B1\nb2\n"))
            .on("F3", edit("src/c.rs", "C1\n")),
    );
    run(
        once().with_retry_failed(true),
        fx.services(third.clone(), Arc::new(AutoYes)),
    )
    .await
    .unwrap();
    assert_eq!(third.calls_for("F1"), 1);
    assert_eq!(third.calls_for("F2"), 1);
    assert_eq!(third.calls_for("F3"), 0);
    let ledger = FindingsLedger::read(&ledger_path(fx.root())).unwrap();
    let f2 = ledger
        .entries
        .values()
        .find(|e| e.finding_id == "F2")
        .unwrap();
    assert_eq!(f2.status().name(), "fixed");
}
