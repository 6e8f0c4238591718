//! CommandTestRunner on real commands: cargo test on a temp crate, node
//! --test, JUnit reports, timeouts, patterns and errors.

// Helpers outside #[test] functions unwrap too: this file is all test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod procs_support;

use std::path::Path;
use std::time::{Duration, Instant};

use orchestrator_adapters::test_runner::CommandTestRunner;
use orchestrator_core::test_runner::{TestOutcome, TestRequest, TestRunner, TestRunnerError};
use procs_support::fixture;

fn request(dir: &Path, pattern: Option<&str>) -> TestRequest {
    TestRequest {
        workdir: dir.to_path_buf(),
        pattern: pattern.map(str::to_owned),
        time_limit: Some(Duration::from_secs(300)),
    }
}

/// A crate with one passing, one failing and one ignored test.
fn tiny_crate(dir: &Path) {
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        r#"
#[cfg(test)]
mod tests {
    #[test]
    fn passes() {}
    #[test]
    fn fails() { assert_eq!(1 + 1, 3, "arithmetic"); }
    #[test]
    #[ignore]
    fn ignored() {}
}
"#,
    )
    .unwrap();
}

#[tokio::test]
async fn real_cargo_test_failing_then_filtered_to_passing() {
    let dir = tempfile::tempdir().unwrap();
    tiny_crate(dir.path());
    let runner = CommandTestRunner::argv(["cargo", "test", "--offline", "{pattern}"])
        .env(
            "CARGO_TARGET_DIR",
            dir.path().join("target").display().to_string(),
        )
        .env("RUSTFLAGS", "")
        .env("RUST_BACKTRACE", "0");

    let report = runner.run(request(dir.path(), None)).await.unwrap();
    assert_eq!(report.outcome, TestOutcome::Failed, "{}", report.log);
    assert_eq!((report.passed, report.failed, report.skipped), (1, 1, 1));
    assert_eq!(report.failing_tests, ["tests::fails"]);
    assert_eq!(report.exit_code, Some(101));
    assert!(report.log.contains("arithmetic"));

    let report = runner
        .run(request(dir.path(), Some("tests::passes")))
        .await
        .unwrap();
    assert_eq!(report.outcome, TestOutcome::Passed, "{}", report.log);
    assert_eq!((report.passed, report.failed, report.skipped), (1, 0, 0));
    assert_eq!(report.exit_code, Some(0));
}

#[tokio::test]
async fn real_node_test_with_and_without_a_name_pattern() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("node_sample.test.mjs"),
        dir.path().join("sample.test.mjs"),
    )
    .unwrap();
    let runner = CommandTestRunner::argv([
        "node",
        "--test",
        "--test-name-pattern={pattern}",
        "sample.test.mjs",
    ]);

    let report = runner.run(request(dir.path(), Some("."))).await.unwrap();
    assert_eq!(report.outcome, TestOutcome::Failed);
    assert_eq!((report.passed, report.failed, report.skipped), (2, 3, 1));
    assert_eq!(
        report.failing_tests,
        ["fails on purpose", "inner fails", "suite of subtests"]
    );

    let report = runner
        .run(request(dir.path(), Some("adds numbers")))
        .await
        .unwrap();
    assert_eq!(report.outcome, TestOutcome::Passed, "{}", report.log);
    assert_eq!(report.passed, 1);
    assert!(report.failing_tests.is_empty());
}

#[tokio::test]
async fn junit_report_written_by_the_run_is_preferred() {
    let dir = tempfile::tempdir().unwrap();
    let runner = CommandTestRunner::shell(format!(
        "cp '{}' report.xml; echo '9 passed, 0 failed'; exit 1",
        fixture("pytest_junit.xml").display()
    ))
    .junit_xml("report.xml");
    let report = runner.run(request(dir.path(), None)).await.unwrap();
    assert_eq!(report.outcome, TestOutcome::Failed);
    assert_eq!((report.passed, report.failed, report.skipped), (3, 4, 1));
    assert_eq!(report.failing_tests.len(), 4);
    assert_eq!(report.exit_code, Some(1));
}

#[tokio::test]
async fn a_stale_junit_report_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let report_path = dir.path().join("report.xml");
    std::fs::copy(fixture("pytest_junit.xml"), &report_path).unwrap();
    let touched = std::process::Command::new("touch")
        .args(["-d", "2 hours ago"])
        .arg(&report_path)
        .status()
        .unwrap();
    assert!(touched.success());
    let runner =
        CommandTestRunner::shell("echo 'Tests: 5 passed, 0 failed'").junit_xml("report.xml");
    let report = runner.run(request(dir.path(), None)).await.unwrap();
    assert_eq!(report.outcome, TestOutcome::Passed);
    assert_eq!((report.passed, report.failed), (5, 0));
}

#[tokio::test]
async fn timeout_is_reported_as_timed_out_and_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let runner = CommandTestRunner::shell("echo starting; sleep 1000 & sleep 1000")
        .time_limit(Duration::from_secs(600))
        .grace(Duration::from_millis(200));
    let req = TestRequest {
        time_limit: Some(Duration::from_millis(300)),
        ..request(dir.path(), None)
    };
    let started = Instant::now();
    let report = runner.run(req).await.unwrap();
    assert_eq!(report.outcome, TestOutcome::TimedOut);
    assert_eq!(report.exit_code, None);
    assert_eq!(report.log, "starting\n");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(report.duration_ms >= 300);
}

#[tokio::test]
async fn the_configured_time_limit_applies_when_the_request_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let runner = CommandTestRunner::argv(["sleep", "1000"]).time_limit(Duration::from_millis(200));
    let req = TestRequest::all(dir.path());
    let report = runner.run(req).await.unwrap();
    assert_eq!(report.outcome, TestOutcome::TimedOut);
}

#[tokio::test]
async fn shell_patterns_are_quoted_and_exported() {
    let dir = tempfile::tempdir().unwrap();
    let runner =
        CommandTestRunner::shell(r#"printf '[%s]\n' {pattern} "$ORCHESTRATOR_TEST_PATTERN""#);
    let report = runner
        .run(request(dir.path(), Some("a b; echo pwned")))
        .await
        .unwrap();
    assert_eq!(report.log, "[a b; echo pwned]\n[a b; echo pwned]\n");
    assert_eq!(report.outcome, TestOutcome::Passed);
    assert_eq!((report.passed, report.failed), (0, 0));
}

#[tokio::test]
async fn a_zero_exit_with_failing_tests_in_the_summary_is_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    // `| tee` loses the test command's exit status.
    let runner = CommandTestRunner::shell(format!(
        "cat '{}' | tee /dev/null",
        fixture("pytest_failed.txt").display()
    ));
    let report = runner.run(request(dir.path(), None)).await.unwrap();
    assert_eq!(report.exit_code, Some(0));
    assert_eq!(report.outcome, TestOutcome::Failed);
    assert_eq!(report.failed, 4);
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let runner = CommandTestRunner::argv(["orchestrator-no-such-test-tool", "--all"]);
    let err = runner.run(request(dir.path(), None)).await.unwrap_err();
    assert_eq!(
        err,
        TestRunnerError::Spawn {
            command: "orchestrator-no-such-test-tool --all".into(),
            message: "No such file or directory (os error 2)".into(),
        }
    );
}

#[tokio::test]
async fn long_logs_keep_the_tail_and_say_what_was_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let runner =
        CommandTestRunner::shell("seq 1 100000; echo '3 passed, 0 failed'").output_limit(1000);
    let report = runner.run(request(dir.path(), None)).await.unwrap();
    assert!(report.log.starts_with("[… "), "{}", &report.log[..80]);
    assert!(report.log.contains(" bytes of stdout dropped …]\n"));
    assert!(report.log.ends_with("99999\n100000\n3 passed, 0 failed\n"));
    assert_eq!(report.passed, 3);
}
