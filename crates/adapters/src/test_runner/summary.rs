//! Recognises the closing summary of common test runners in captured output.
//!
//! Each parser reads the lines a runner prints at the end of a run (and the
//! per-test lines that name failures) and returns `None` when the output is
//! not in its format. [`parse`] tries them in an order that avoids false
//! matches: the formats with the most distinctive lines first.
//!
//! Formats (taken from real output, see `tests/fixtures/procs/`):
//! - cargo test (libtest): `test result: FAILED. 2 passed; 1 failed; 1 ignored; …`
//!   once per test binary (summed), failures from `test NAME ... FAILED`;
//! - cargo nextest: `Summary [ 0.021s] 14 tests run: 13 passed, 1 failed, 177 skipped`,
//!   failures from `FAIL [ 0.003s] binary-id test::name`;
//! - pytest: `=== 3 failed, 3 passed, 1 skipped, 1 error in 0.04s ===`
//!   (or the same without the rule in `-q` mode), failures from the
//!   `FAILED id - reason` / `ERROR id` lines of the short summary;
//! - go test: `--- PASS: TestX (0.00s)` / `--- FAIL:` / `--- SKIP:` lines and
//!   the `ok  pkg 0.01s` / `FAIL pkg 0.01s` package lines;
//! - node --test: the TAP (`# pass 2`) or spec (`ℹ pass 2`) totals, failures
//!   from `not ok N - name` or `✖ name (1.2ms)`;
//! - a plain `N passed, N failed[, N skipped]` line, as any runner may print.

use serde::{Deserialize, Serialize};

/// Which runner's output a summary was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerFormat {
    /// `cargo test` (libtest).
    CargoTest,
    /// `cargo nextest run`.
    Nextest,
    /// pytest.
    Pytest,
    /// `go test`.
    GoTest,
    /// `node --test` (TAP or spec reporter).
    NodeTest,
    /// A JUnit XML report.
    Junit,
    /// A plain `N passed, N failed` line.
    Plain,
}

/// Counts and failing test names read from a run's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The format recognised.
    pub format: RunnerFormat,
    /// Tests that passed.
    pub passed: u32,
    /// Tests that failed (errors and cancellations included).
    pub failed: u32,
    /// Tests skipped, ignored or todo.
    pub skipped: u32,
    /// Names of failing tests, in order of first appearance, without duplicates.
    pub failing_tests: Vec<String>,
}

impl Summary {
    fn new(format: RunnerFormat) -> Self {
        Self {
            format,
            passed: 0,
            failed: 0,
            skipped: 0,
            failing_tests: Vec::new(),
        }
    }

    /// Records a failing test; duplicates are dropped by [`Self::finish`]
    /// (checking here would make a log of many failures quadratic).
    fn add_failing(&mut self, name: &str) {
        let name = name.trim();
        if !name.is_empty() {
            self.failing_tests.push(name.to_owned());
        }
    }

    /// Drops repeated failing-test names, keeping first appearances in order.
    fn finish(mut self) -> Self {
        let mut seen = std::collections::HashSet::new();
        self.failing_tests.retain(|name| seen.insert(name.clone()));
        self
    }
}

/// Reads the summary of the first recognised format in `log`.
pub fn parse(log: &str) -> Option<Summary> {
    nextest(log)
        .or_else(|| cargo_test(log))
        .or_else(|| pytest(log))
        .or_else(|| node_test(log))
        .or_else(|| go_test(log))
        .or_else(|| plain(log))
}

/// Parses `"<n> <word>"` into its number and word.
fn count_word(item: &str) -> Option<(u32, &str)> {
    let item = item.trim();
    let (n, word) = item.split_once(' ')?;
    Some((n.trim().parse().ok()?, word.trim()))
}

/// cargo test (libtest) output.
pub fn cargo_test(log: &str) -> Option<Summary> {
    let mut s = Summary::new(RunnerFormat::CargoTest);
    let mut seen = false;
    // Inside the closing `failures:` list (names indented by four spaces,
    // directly under the header; the earlier `failures:` header that opens
    // the captured output is followed by a blank line instead).
    let mut in_list = false;
    let mut after_header = false;
    for line in log.lines() {
        let line = line.trim_end();
        let listed = line
            .strip_prefix("    ")
            .filter(|name| !name.is_empty() && !name.starts_with(' '));
        if (after_header || in_list)
            && let Some(name) = listed
        {
            in_list = true;
            after_header = false;
            s.add_failing(name);
            continue;
        }
        in_list = false;
        after_header = line == "failures:";
        if let Some(rest) = line.strip_prefix("test result: ") {
            // "FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.09s"
            let Some((_, counts)) = rest.split_once(". ") else {
                continue;
            };
            seen = true;
            for item in counts.split(';') {
                match count_word(item) {
                    Some((n, "passed")) => s.passed += n,
                    Some((n, "failed")) => s.failed += n,
                    Some((n, "ignored")) => s.skipped += n,
                    _ => {}
                }
            }
        } else if let Some(rest) = line.strip_prefix("test ")
            && let Some(name) = rest.strip_suffix(" ... FAILED")
        {
            s.add_failing(name);
        } else if let Some(name) = line.strip_suffix(" --- FAILED") {
            // `cargo test -q` reports a failure as "NAME --- FAILED".
            s.add_failing(name);
        }
    }
    seen.then_some(s.finish())
}

/// cargo nextest output.
pub fn nextest(log: &str) -> Option<Summary> {
    const FAIL_STATUSES: &[&str] = &[
        "FAIL",
        "TIMEOUT",
        "ABORT",
        "SIGSEGV",
        "SIGABRT",
        "SIGBUS",
        "SIGILL",
        "SIGKILL",
        "SIGTERM",
        "LEAK-FAIL",
        "TMT",
    ];
    let mut s = Summary::new(RunnerFormat::Nextest);
    let mut seen = false;
    for line in log.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Summary [")
            && let Some((_, after)) = rest.split_once(']')
            && let Some((_, counts)) = after.split_once(" run: ")
        {
            // "14 tests run: 13 passed, 1 failed, 177 skipped" — the last
            // Summary line wins if the output holds several.
            seen = true;
            s.passed = 0;
            s.failed = 0;
            s.skipped = 0;
            for item in counts.split(',') {
                // "13 passed (1 flaky)" → "13 passed"
                let item = item.split(" (").next().unwrap_or(item);
                match count_word(item) {
                    Some((n, "passed")) => s.passed += n,
                    Some((n, "failed" | "timed out" | "exec failed")) => s.failed += n,
                    Some((n, "skipped")) => s.skipped += n,
                    _ => {}
                }
            }
            continue;
        }
        // "FAIL [   0.003s] binary-id tests::name" or with a "(1/3)" counter.
        if let Some((status, rest)) = line.split_once(" [")
            && FAIL_STATUSES.contains(&status.trim())
            && let Some((_, name)) = rest.split_once("] ")
        {
            let name = name.trim();
            let name = match name.strip_prefix('(') {
                Some(counted) => counted.split_once(") ").map_or(name, |(_, n)| n),
                None => name,
            };
            // The test name is the last word; the words before it are the
            // binary id.
            if let Some(test) = name.split_whitespace().last() {
                s.add_failing(test);
            }
        }
    }
    seen.then_some(s.finish())
}

/// Splits a pytest closing line into its count items, or `None` if the line
/// is not one: `=== 3 failed, 3 passed in 0.04s ===` or the same bare.
fn pytest_counts(line: &str) -> Option<Vec<(u32, &str)>> {
    let line = line.trim().trim_matches('=').trim();
    let (counts, time) = line.rsplit_once(" in ")?;
    let time = time.split(' ').next()?;
    if !time.ends_with('s') || time.trim_end_matches('s').parse::<f64>().is_err() {
        return None;
    }
    if counts == "no tests ran" {
        return Some(Vec::new());
    }
    counts
        .split(", ")
        .map(|item| {
            let (n, word) = count_word(item)?;
            const WORDS: &[&str] = &[
                "passed",
                "failed",
                "skipped",
                "error",
                "errors",
                "xfailed",
                "xpassed",
                "deselected",
                "warning",
                "warnings",
                "rerun",
            ];
            WORDS.contains(&word).then_some((n, word))
        })
        .collect()
}

/// pytest output.
pub fn pytest(log: &str) -> Option<Summary> {
    let closing = log.lines().rev().find_map(pytest_counts)?;
    let mut s = Summary::new(RunnerFormat::Pytest);
    for (n, word) in closing {
        match word {
            "passed" | "xpassed" => s.passed += n,
            "failed" | "error" | "errors" => s.failed += n,
            "skipped" | "xfailed" => s.skipped += n,
            _ => {}
        }
    }
    for line in log.lines() {
        let line = line.trim_end();
        let id = line
            .strip_prefix("FAILED ")
            .or_else(|| line.strip_prefix("ERROR "));
        if let Some(id) = id {
            let id = id.split(" - ").next().unwrap_or(id);
            // Collection errors name a file, not a test; keep them: they are
            // what failed.
            s.add_failing(id);
        }
    }
    Some(s.finish())
}

/// go test output (verbose or not).
pub fn go_test(log: &str) -> Option<Summary> {
    let mut s = Summary::new(RunnerFormat::GoTest);
    let mut seen = false;
    for line in log.lines() {
        let trimmed = line.trim();
        let verdict = [("--- PASS: ", 0), ("--- FAIL: ", 1), ("--- SKIP: ", 2)]
            .iter()
            .find_map(|(prefix, kind)| trimmed.strip_prefix(prefix).map(|rest| (rest, *kind)));
        if let Some((rest, kind)) = verdict {
            seen = true;
            let name = rest.rsplit_once(" (").map_or(rest, |(n, _)| n);
            match kind {
                0 => s.passed += 1,
                1 => {
                    s.failed += 1;
                    s.add_failing(name);
                }
                _ => s.skipped += 1,
            }
            continue;
        }
        // Package lines: "ok  \texample.com/m\t0.002s", "FAIL\texample.com/m\t0.002s".
        let mut fields = line.split('\t');
        if let (Some(head), Some(pkg), Some(tail)) = (fields.next(), fields.next(), fields.next())
            && matches!(head.trim(), "ok" | "FAIL")
            && !pkg.trim().is_empty()
            && (tail.trim().ends_with('s') || tail.contains("(cached)"))
        {
            seen = true;
        }
    }
    seen.then_some(s.finish())
}

/// node --test output, TAP or spec reporter.
pub fn node_test(log: &str) -> Option<Summary> {
    let mut s = Summary::new(RunnerFormat::NodeTest);
    let mut tests = None;
    let mut pass = None;
    for line in log.lines() {
        let trimmed = line.trim();
        let total = trimmed
            .strip_prefix("# ")
            .or_else(|| trimmed.strip_prefix("ℹ "));
        if let Some(total) = total
            && let Some((word, n)) = total.split_once(' ')
            && let Ok(n) = n.trim().parse::<u32>()
        {
            match word {
                "tests" => tests = Some(n),
                "pass" => pass = Some(n),
                "fail" | "cancelled" => s.failed += n,
                "skipped" | "todo" => s.skipped += n,
                _ => {}
            }
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("not ok ")
            && let Some((_, name)) = rest.split_once(" - ")
        {
            // Drop a TAP directive ("# TODO", "# SKIP").
            let name = name.split(" # ").next().unwrap_or(name);
            s.add_failing(name);
        } else if let Some(rest) = trimmed.strip_prefix("✖ ")
            && let Some((name, time)) = rest.rsplit_once(" (")
            && time.ends_with("ms)")
        {
            s.add_failing(name);
        }
    }
    s.passed = pass?;
    tests?;
    Some(s.finish())
}

/// A plain `N passed, N failed[, N skipped]` line, optionally after one word
/// and a colon (`Tests: 3 passed, 1 failed`).
pub fn plain(log: &str) -> Option<Summary> {
    log.lines().rev().find_map(|line| {
        let line = line.trim();
        let line = match line.split_once(": ") {
            Some((word, rest)) if !word.contains(' ') => rest,
            _ => line,
        };
        let items: Vec<(u32, &str)> = line
            .split(", ")
            .map(count_word)
            .collect::<Option<Vec<_>>>()?;
        match items.as_slice() {
            [(p, "passed"), (f, "failed")] => Some((*p, *f, 0)),
            [(p, "passed"), (f, "failed"), (k, "skipped")] => Some((*p, *f, *k)),
            _ => None,
        }
        .map(|(passed, failed, skipped)| Summary {
            format: RunnerFormat::Plain,
            passed,
            failed,
            skipped,
            failing_tests: Vec::new(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks one log against the expected counts and names.
    fn check(log: &str, format: RunnerFormat, counts: (u32, u32, u32), failing: &[&str]) {
        let s = parse(log).unwrap_or_else(|| panic!("not recognised:\n{log}"));
        assert_eq!(s.format, format, "format of:\n{log}");
        assert_eq!((s.passed, s.failed, s.skipped), counts, "counts of:\n{log}");
        assert_eq!(s.failing_tests, failing, "failing tests of:\n{log}");
    }

    #[test]
    fn cargo_test_real_failing_run() {
        check(
            include_str!("../../tests/fixtures/procs/cargo_test_failed.txt"),
            RunnerFormat::CargoTest,
            (4, 2, 1),
            &["tests::fails", "integration_fails"],
        );
    }

    #[test]
    fn cargo_test_real_quiet_run() {
        check(
            include_str!("../../tests/fixtures/procs/cargo_test_quiet_failed.txt"),
            RunnerFormat::CargoTest,
            (4, 2, 1),
            &["tests::fails", "integration_fails"],
        );
    }

    #[test]
    fn cargo_test_failures_list_alone_names_the_tests() {
        let log = "failures:\n\n---- a stdout ----\n    indented panic text\n\nfailures:\n    a\n    src/lib.rs - add (line 3)\n\ntest result: FAILED. 0 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
        check(
            log,
            RunnerFormat::CargoTest,
            (0, 2, 0),
            &["a", "src/lib.rs - add (line 3)"],
        );
    }

    #[test]
    fn cargo_test_real_passing_run() {
        check(
            include_str!("../../tests/fixtures/procs/cargo_test_passed.txt"),
            RunnerFormat::CargoTest,
            (1, 0, 0),
            &[],
        );
    }

    #[test]
    fn nextest_documented_output() {
        check(
            include_str!("../../tests/fixtures/procs/nextest_failed.txt"),
            RunnerFormat::Nextest,
            (12, 2, 177),
            &["tests::fails", "tests::hangs"],
        );
        check(
            "     Summary [   0.021s] 14 tests run: 14 passed, 177 skipped\n",
            RunnerFormat::Nextest,
            (14, 0, 177),
            &[],
        );
        check(
            "        FAIL [   0.010s] (1/2) my-crate::it flaky::one\n     Summary [   0.021s] 2 tests run: 2 passed (1 flaky), 0 skipped\n",
            RunnerFormat::Nextest,
            (2, 0, 0),
            &["flaky::one"],
        );
    }

    #[test]
    fn pytest_real_failing_run() {
        check(
            include_str!("../../tests/fixtures/procs/pytest_failed.txt"),
            RunnerFormat::Pytest,
            (3, 4, 1),
            &[
                "test_sample.py::test_fails",
                "test_sample.py::TestGroup::test_method_fails",
                "test_sample.py::test_param[2]",
                "test_sample.py::test_error",
            ],
        );
    }

    #[test]
    fn pytest_real_passing_and_quiet_runs() {
        check(
            include_str!("../../tests/fixtures/procs/pytest_passed.txt"),
            RunnerFormat::Pytest,
            (2, 0, 0),
            &[],
        );
        check(
            "..F\n1 failed, 2 passed in 0.03s\n",
            RunnerFormat::Pytest,
            (2, 1, 0),
            &[],
        );
        check(
            "======== no tests ran in 0.01s ========\n",
            RunnerFormat::Pytest,
            (0, 0, 0),
            &[],
        );
    }

    #[test]
    fn node_real_tap_and_spec_runs() {
        let names = &["fails on purpose", "inner fails", "suite of subtests"];
        check(
            include_str!("../../tests/fixtures/procs/node_tap_failed.txt"),
            RunnerFormat::NodeTest,
            (2, 3, 1),
            names,
        );
        check(
            include_str!("../../tests/fixtures/procs/node_spec_failed.txt"),
            RunnerFormat::NodeTest,
            (2, 3, 1),
            names,
        );
        check(
            include_str!("../../tests/fixtures/procs/node_tap_passed.txt"),
            RunnerFormat::NodeTest,
            (1, 0, 3),
            &[],
        );
    }

    #[test]
    fn go_test_documented_output() {
        check(
            include_str!("../../tests/fixtures/procs/go_test_failed.txt"),
            RunnerFormat::GoTest,
            (2, 3, 1),
            &["TestSub", "TestTable", "TestTable/negative"],
        );
        check(
            "ok  \texample.com/calc\t0.002s\n",
            RunnerFormat::GoTest,
            (0, 0, 0),
            &[],
        );
    }

    #[test]
    fn plain_closing_line() {
        check(
            "running...\nTests: 7 passed, 2 failed, 1 skipped\n",
            RunnerFormat::Plain,
            (7, 2, 1),
            &[],
        );
        check("5 passed, 0 failed", RunnerFormat::Plain, (5, 0, 0), &[]);
    }

    #[test]
    fn unknown_output_is_not_recognised() {
        for log in [
            "",
            "error[E0425]: cannot find value `x` in this scope\n",
            "make: *** [all] Error 2\n",
            "everything went fine in 2s\n",
            "# comment only\n",
        ] {
            assert_eq!(parse(log), None, "{log}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_input_gives_unique_non_empty_failing_names(log in "(\\PC|\n){0,400}") {
            if let Some(s) = parse(&log) {
                let mut names = s.failing_tests.clone();
                names.sort();
                names.dedup();
                proptest::prop_assert_eq!(names.len(), s.failing_tests.len());
                proptest::prop_assert!(s.failing_tests.iter().all(|n| !n.trim().is_empty()));
            }
        }

        #[test]
        fn cargo_test_counts_sum_over_binaries(
            binaries in proptest::collection::vec((0u32..500, 0u32..50, 0u32..20), 1..6),
        ) {
            let mut log = String::new();
            for (i, (p, f, k)) in binaries.iter().enumerate() {
                let verdict = if *f == 0 { "ok" } else { "FAILED" };
                log.push_str(&format!(
                    "     Running unittests src/lib.rs (target/debug/deps/b{i})\n\nrunning {} tests\n\ntest result: {verdict}. {p} passed; {f} failed; {k} ignored; 0 measured; 0 filtered out; finished in 0.01s\n\n",
                    p + f + k
                ));
            }
            let s = cargo_test(&log).unwrap();
            let sum = |pick: fn(&(u32, u32, u32)) -> u32| binaries.iter().map(pick).sum::<u32>();
            proptest::prop_assert_eq!(
                (s.passed, s.failed, s.skipped),
                (sum(|b| b.0), sum(|b| b.1), sum(|b| b.2))
            );
        }
    }
}
