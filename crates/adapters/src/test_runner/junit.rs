//! Reads counts and failing test names from a JUnit XML report.
//!
//! Only `<testcase>` elements are counted (the `tests`/`failures` attributes
//! of `<testsuite>` are not trusted: writers disagree on whether errors are
//! failures). A test case with a `<failure>` or `<error>` child failed; one
//! with `<skipped>` was skipped; any other passed (nextest's
//! `<flakyFailure>`/`<rerunFailure>` children mark a pass after retries).
//! A failing test is named `classname::name`, or `name` without a classname.

use quick_xml::events::{BytesStart, Event};

use super::summary::{RunnerFormat, Summary};

/// Why a JUnit report could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JunitError {
    /// The XML is malformed.
    #[error("malformed junit xml at byte {position}: {message}")]
    Xml {
        /// Byte offset of the error.
        position: u64,
        /// The parser's message.
        message: String,
    },
    /// The document has no `<testcase>` and no `<testsuite>`.
    #[error("not a junit report: no <testsuite> or <testcase> element")]
    NotJunit,
}

#[derive(Default)]
struct Case {
    name: String,
    classname: String,
    failed: bool,
    skipped: bool,
}

fn attr(e: &BytesStart<'_>, key: &str) -> String {
    match e.try_get_attribute(key) {
        Ok(Some(a)) => a
            .unescape_value()
            .map(|v| v.into_owned())
            .unwrap_or_else(|_| String::from_utf8_lossy(&a.value).into_owned()),
        _ => String::new(),
    }
}

/// Counts a finished test case: failed (its `classname::name` listed once),
/// skipped, or passed.
fn count_case(case: Case, summary: &mut Summary) {
    if case.failed {
        summary.failed += 1;
        let name = if case.classname.is_empty() {
            case.name
        } else {
            format!("{}::{}", case.classname, case.name)
        };
        if !summary.failing_tests.contains(&name) {
            summary.failing_tests.push(name);
        }
    } else if case.skipped {
        summary.skipped += 1;
    } else {
        summary.passed += 1;
    }
}

/// Parses a JUnit XML document.
pub fn parse(xml: &str) -> Result<Summary, JunitError> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut summary = Summary {
        format: RunnerFormat::Junit,
        passed: 0,
        failed: 0,
        skipped: 0,
        failing_tests: Vec::new(),
    };
    let mut current: Option<Case> = None;
    let mut saw_junit = false;

    loop {
        let event = reader.read_event().map_err(|e| JunitError::Xml {
            position: reader.error_position(),
            message: e.to_string(),
        })?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let is_empty = matches!(event, Event::Empty(_));
                match e.local_name().as_ref() {
                    b"testsuite" | b"testsuites" => saw_junit = true,
                    b"testcase" => {
                        saw_junit = true;
                        let case = Case {
                            name: attr(e, "name"),
                            classname: attr(e, "classname"),
                            ..Case::default()
                        };
                        if is_empty {
                            count_case(case, &mut summary);
                        } else if let Some(previous) = current.replace(case) {
                            // A testcase nested in a testcase is malformed;
                            // count the outer one rather than lose it.
                            count_case(previous, &mut summary);
                        }
                    }
                    b"failure" | b"error" => {
                        if let Some(case) = current.as_mut() {
                            case.failed = true;
                        }
                    }
                    b"skipped" => {
                        if let Some(case) = current.as_mut() {
                            case.skipped = true;
                        }
                    }
                    _ => {}
                }
            }
            Event::End(ref e) if e.local_name().as_ref() == b"testcase" => {
                if let Some(case) = current.take() {
                    count_case(case, &mut summary);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if let Some(case) = current.take() {
        count_case(case, &mut summary);
    }
    if !saw_junit {
        return Err(JunitError::NotJunit);
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_pytest_report() {
        let s = parse(include_str!("../../tests/fixtures/procs/pytest_junit.xml")).unwrap();
        assert_eq!((s.passed, s.failed, s.skipped), (3, 4, 1));
        assert_eq!(
            s.failing_tests,
            [
                "test_sample::test_fails",
                "test_sample.TestGroup::test_method_fails",
                "test_sample::test_error",
                "test_sample::test_param[2]",
            ]
        );
    }

    #[test]
    fn nextest_style_report_with_flaky_pass() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="3" failures="1" errors="0">
  <testsuite name="tinycrate" tests="3" disabled="0" errors="0" failures="1">
    <testcase name="tests::adds" classname="tinycrate" timestamp="2026-12-02T10:00:00Z" time="0.004"/>
    <testcase name="tests::flaky" classname="tinycrate" time="0.010">
      <flakyFailure message="first try failed" type="test failure"/>
    </testcase>
    <testcase name="tests::fails" classname="tinycrate" time="0.006">
      <failure type="test failure">thread &apos;tests::fails&apos; panicked</failure>
      <system-out>running 1 test</system-out>
    </testcase>
  </testsuite>
</testsuites>"#;
        let s = parse(xml).unwrap();
        assert_eq!((s.passed, s.failed, s.skipped), (2, 1, 0));
        assert_eq!(s.failing_tests, ["tinycrate::tests::fails"]);
    }

    #[test]
    fn errors_are_typed() {
        assert!(matches!(parse("<html></html>"), Err(JunitError::NotJunit)));
        assert!(matches!(
            parse("<testsuite><testcase name='a'></testsuite>"),
            Err(JunitError::Xml { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn counts_match_generated_cases(cases in proptest::collection::vec(0u8..3, 0..30)) {
            let mut xml = String::from("<testsuites><testsuite name=\"s\">");
            for (i, kind) in cases.iter().enumerate() {
                match kind {
                    0 => xml.push_str(&format!("<testcase classname=\"c\" name=\"t{i}\"/>")),
                    1 => xml.push_str(&format!("<testcase classname=\"c\" name=\"t{i}\"><failure message=\"m\">x &lt; y</failure></testcase>")),
                    _ => xml.push_str(&format!("<testcase name=\"t{i}\"><skipped/></testcase>")),
                }
            }
            xml.push_str("</testsuite></testsuites>");
            let s = parse(&xml).unwrap();
            let count = |k: u8| cases.iter().filter(|c| **c == k).count() as u32;
            proptest::prop_assert_eq!((s.passed, s.failed, s.skipped), (count(0), count(1), count(2)));
            let expected: Vec<String> = cases
                .iter()
                .enumerate()
                .filter(|(_, k)| **k == 1)
                .map(|(i, _)| format!("c::t{i}"))
                .collect();
            proptest::prop_assert_eq!(s.failing_tests, expected);
        }
    }
}
