//! The task CSVs of the bad-input corpus (`tests/data/bad-input/`) through
//! `Planex::run_tasks_file`: each is refused before a session exists, with
//! exit code 2 and a message naming the file and the line (and the ids, for
//! duplicate, unknown and cyclic dependencies). No agent runs and nothing is
//! written to the repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability_support;

use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::event::CollectingSink;
use orchestrator_core::fakes::FakeAgent;
use orchestrator_core::gate::AutoYes;
use orchestrator_planex::{Agents, ExecutionPolicy, Mode, Planex, PlanexOptions};
use reliability_support::{Repo, assert_covers_readme_rows};

const THIS_TEST: &str = "planex";

fn cases() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        ("tasks-empty.csv", &["no `id` column", "line 1"]),
        (
            "tasks-unbalanced-quote.csv",
            &["line 3", "unbalanced quote"],
        ),
        ("tasks-unclosed-quote.csv", &["line 4", "unbalanced quote"]),
        ("tasks-ragged-row.csv", &["line 3", "expected 17 fields"]),
        ("tasks-wrong-field-types.csv", &["line 3", "column `wave`"]),
        ("tasks-missing-id-column.csv", &["no `id` column"]),
        ("tasks-invalid-utf8.csv", &["line 3", "invalid UTF-8"]),
        ("tasks-binary.bin", &["line 1", "invalid UTF-8"]),
        ("tasks-duplicate-ids.csv", &["T1", "line 4", "line 2"]),
        ("tasks-unknown-dep.csv", &["line 3", "T2", "T9"]),
        ("tasks-cycle.csv", &["cycle", "T1", "T2", "T3"]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_task_files_are_refused_with_file_and_line_before_any_session_exists() {
    let cases = cases();
    assert_covers_readme_rows(THIS_TEST, cases.iter().map(|(f, _)| *f));

    for (file, fragments) in cases {
        let repo = Repo::new();
        let input = repo.input(file);
        let agent = Arc::new(FakeAgent::new("never-called"));
        let planex = Planex::new(
            repo.path(),
            Agents::all(agent.clone()),
            Arc::new(AutoYes),
            Arc::new(CollectingSink::new()),
            PlanexOptions::default()
                .with_auto_yes(true)
                .with_concurrency(2)
                .with_schedule(Mode::Eager)
                .with_planner_time_limit(Duration::from_secs(5))
                .with_explore_time_limit(Duration::from_secs(5))
                .with_task_time_limit(Duration::from_secs(5))
                .with_execution(ExecutionPolicy::agent()),
        );
        let before = repo.snapshot();
        let result = tokio::time::timeout(Duration::from_secs(10), planex.run_tasks_file(&input))
            .await
            .unwrap_or_else(|_| panic!("{file}: run_tasks_file did not return within 10 s"));
        let err = match result {
            Err(e) => e,
            Ok(outcome) => panic!("{file}: accepted: {}", outcome.summary),
        };
        let msg = err.to_string();
        assert_eq!(err.exit_code(), 2, "{file}: {msg}");
        assert!(
            msg.contains(file),
            "{file}: the message does not name the file: {msg}"
        );
        for f in fragments {
            assert!(msg.contains(f), "{file}: {f:?} missing from: {msg}");
        }
        assert_eq!(repo.snapshot(), before, "{file}: something was written");
        assert!(
            !repo.path().join(".workflow").exists(),
            "{file}: a session was created"
        );
        assert!(agent.calls().is_empty(), "{file}: an agent ran");
    }
}
