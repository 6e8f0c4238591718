//! Test runs of a fix's tree, with re-runs that tell a flaky test from a
//! broken fix, and how failures are described.

use super::*;

/// The one place a fix is verified one by one: runs the tests in the fix's
/// tree. Counted in the session's test runs; emits [`Event::TestsRan`].
pub(crate) async fn verify_fix(
    shared: &Shared,
    tree: &Tree,
    finding: &str,
    pattern: Option<String>,
) -> Result<TestReport, String> {
    run_tests(shared, &tree.env, Some(finding.to_owned()), pattern).await
}

/// Runs the tests once in `env`: counted, judged against the base (a
/// failure the base already had is not the fix's; see [`establish`]),
/// reported as [`Event::TestsRan`].
pub(crate) async fn run_tests(
    shared: &Shared,
    env: &TreeEnv,
    id: Option<String>,
    pattern: Option<String>,
) -> Result<TestReport, String> {
    let runner: Arc<dyn TestRunner> = shared.tests.runner(env);
    shared.test_runs.fetch_add(1, Ordering::SeqCst);
    let mut report = runner
        .run(TestRequest {
            workdir: env.root.clone(),
            pattern,
            time_limit: shared.config.test_time_limit,
        })
        .await
        .map_err(|e| format!("the tests could not run: {e}"));
    if let Ok(r) = &report
        && !r.is_pass()
    {
        // A failure is judged against the base, measured now if it was
        // put off; a base that cannot be judged blames no fix.
        if let Err(why) = base_for_judging(shared).await {
            report = Err(why);
        }
    }
    let report = report.map(|report| lock(&shared.baseline).judge(report));
    shared.sink.emit(&Event::TestsRan {
        id,
        passed: report.as_ref().is_ok_and(TestReport::is_pass),
        failing: report
            .as_ref()
            .map(|r| r.failing_tests.clone())
            .unwrap_or_default(),
    });
    report
}

/// The last report of a test run and its re-runs, and the failure a re-run
/// showed to be flaky.
pub(super) struct Rerun {
    /// The last run's report.
    pub(super) last: TestReport,
    /// The failure that passed on a re-run, when one did.
    pub(super) flaky: Option<FlakyFailure>,
    /// Re-runs made after the first run.
    pub(super) reruns: u32,
}

/// A failing run that passed on a re-run of the identical tree.
#[derive(Debug, Clone)]
pub(crate) struct FlakyFailure {
    /// What failed, in one line (failing tests or the first log line).
    pub failure: String,
    /// Runs that failed before the passing one.
    pub failed_runs: u32,
}

/// `each`: one run, and on failure up to `flaky_reruns` re-runs of the
/// identical tree; a re-run that passes makes the failure flaky.
pub(super) async fn test_with_reruns(
    shared: &Shared,
    tree: &Tree,
    finding: &str,
    pattern: Option<String>,
) -> Result<Rerun, String> {
    let first = verify_fix(shared, tree, finding, pattern.clone()).await?;
    let mut reruns = 0;
    let mut last = first;
    let mut flaky = None;
    while !last.is_pass() && reruns < shared.config.flaky_reruns {
        reruns += 1;
        let again = verify_fix(shared, tree, finding, pattern.clone()).await?;
        if again.is_pass() {
            flaky = Some(FlakyFailure {
                failure: short_failure(&last),
                failed_runs: reruns,
            });
        }
        last = again;
    }
    shared.with_stats(|s| {
        s.reruns += reruns;
        s.each_runs += 1 + reruns;
    });
    Ok(Rerun {
        last,
        flaky,
        reruns,
    })
}

/// Records a flaky failure: an error entry `flaky_test` in the progress
/// file, a warning event, and the session's count.
pub(crate) fn record_flaky(
    shared: &Shared,
    progress: &Progress,
    finding: &str,
    flaky: &FlakyFailure,
) {
    let message = format!(
        "flaky tests: the tests failed ({}), then passed on a re-run of the identical tree; the failure is not blamed on the fix, which is kept",
        first_line(&flaky.failure)
    );
    progress.error(finding, "flaky_test", &message);
    progress.update(|p| {
        if let Some(v) = p.verification.as_mut() {
            v.flaky += 1;
        }
    });
    shared.with_stats(|s| s.flaky += 1);
    shared.warn(format!(
        "flaky tests while verifying {finding}: {} failing run(s), then a pass on the identical tree; the fix is kept",
        flaky.failed_runs
    ));
}

/// A failing run in one line: its failing tests, or the first log line.
pub(crate) fn short_failure(report: &TestReport) -> String {
    if !report.failing_tests.is_empty() {
        return format!("failing: {}", report.failing_tests.join(", "));
    }
    let line = report
        .log
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    match report.exit_code {
        Some(code) if line.is_empty() => format!("exit status {code}"),
        _ => line.to_owned(),
    }
}

/// The failure text fed back to the agent.
pub(crate) fn describe_failure(report: &TestReport) -> String {
    describe_failure_as(
        report,
        "the tests failed with the fix applied",
        "the fix was rolled back",
    )
}

/// The failure text: `what` happened (with the failing tests), `then`,
/// and the tail of the test output.
pub(crate) fn describe_failure_as(report: &TestReport, what: &str, then: &str) -> String {
    const TAIL: usize = 4000;
    let log = report.log.trim();
    let tail = match log.char_indices().rev().nth(TAIL) {
        Some((i, _)) => &log[i..],
        None => log,
    };
    let failing = if report.failing_tests.is_empty() {
        String::new()
    } else {
        format!(" (failing: {})", report.failing_tests.join(", "))
    };
    format!("{what}{failing}; {then}. Test output (tail):\n{tail}")
}
