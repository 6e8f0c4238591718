//! Exit-criteria validation: reading the agent's report and matching it to
//! the milestone's criteria.
//!
//! Two report formats are accepted:
//! - JSON (the structured answer, or JSON found in the text by
//!   [`crate::agent::extract_json`]):
//!   `{"criteria": [{"criterion": "…", "status": "PASS"|"FAIL", "explanation": "…"}]}`;
//! - the seed's markdown lines, `- [ ] <criterion> - PASS|FAIL - <explanation>`
//!   (also `- [x]`, any case for PASS/FAIL, en or em dashes, extra spaces).
//!
//! Reported criteria are matched to the milestone's exactly first, then
//! ignoring case and runs of whitespace. When a criterion is reported twice
//! the last report wins. A criterion the agent did not report FAILS with the
//! explanation "not reported".

use serde::{Deserialize, Serialize};

use crate::agent::extract_json;

/// The explanation of a criterion the agent did not report on.
pub const NOT_REPORTED: &str = "not reported";

/// One criterion as the agent reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedCriterion {
    /// The criterion text, as written by the agent.
    pub criterion: String,
    /// PASS or FAIL.
    pub passed: bool,
    /// The agent's explanation (may be empty).
    pub explanation: String,
}

/// The verdict on one of the milestone's criteria.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionResult {
    /// The criterion, as the milestone states it.
    pub criterion: String,
    /// Whether it passed.
    pub passed: bool,
    /// Whether the agent reported on it at all.
    pub reported: bool,
    /// The agent's explanation, or [`NOT_REPORTED`].
    pub explanation: String,
}

/// The validation of one answer against the milestone's criteria.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    /// One result per milestone criterion, in the milestone's order.
    pub results: Vec<CriterionResult>,
    /// Whether every criterion passed (true when there are none).
    pub all_passed: bool,
}

impl Validation {
    /// The failing criteria.
    pub fn failures(&self) -> impl Iterator<Item = &CriterionResult> {
        self.results.iter().filter(|r| !r.passed)
    }
}

/// Reads the agent's report: from `structured` when it holds a `criteria`
/// array, else from JSON found in `text`, else from the markdown lines of
/// `text`. Entries that cannot be read (no criterion, a status other than
/// PASS/FAIL) are skipped. An empty result means "no report".
pub fn parse_report(text: &str, structured: Option<&serde_json::Value>) -> Vec<ReportedCriterion> {
    if let Some(found) = structured.and_then(parse_json_report) {
        return found;
    }
    if let Some(found) = extract_json(text).as_ref().and_then(parse_json_report) {
        return found;
    }
    text.lines().filter_map(parse_markdown_line).collect()
}

/// Matches a report to the milestone's criteria.
pub fn validate_exit_criteria(reported: &[ReportedCriterion], criteria: &[String]) -> Validation {
    let results: Vec<CriterionResult> = criteria
        .iter()
        .map(|criterion| {
            let found = reported
                .iter()
                .rev()
                .find(|r| r.criterion.trim() == criterion.trim())
                .or_else(|| {
                    let wanted = normalize(criterion);
                    reported
                        .iter()
                        .rev()
                        .find(|r| normalize(&r.criterion) == wanted)
                });
            match found {
                Some(r) => CriterionResult {
                    criterion: criterion.clone(),
                    passed: r.passed,
                    reported: true,
                    explanation: r.explanation.clone(),
                },
                None => CriterionResult {
                    criterion: criterion.clone(),
                    passed: false,
                    reported: false,
                    explanation: NOT_REPORTED.to_owned(),
                },
            }
        })
        .collect();
    let all_passed = results.iter().all(|r| r.passed);
    Validation {
        results,
        all_passed,
    }
}

/// Lowercase with runs of whitespace collapsed to one space.
fn normalize(s: &str) -> String {
    s.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

fn parse_json_report(value: &serde_json::Value) -> Option<Vec<ReportedCriterion>> {
    let items = value.get("criteria")?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|item| {
                let criterion = item.get("criterion")?.as_str()?.trim();
                let passed = parse_status(item.get("status")?.as_str()?.trim())?;
                if criterion.is_empty() {
                    return None;
                }
                let explanation = item
                    .get("explanation")
                    .and_then(|e| e.as_str())
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                Some(ReportedCriterion {
                    criterion: criterion.to_owned(),
                    passed,
                    explanation,
                })
            })
            .collect(),
    )
}

fn parse_status(s: &str) -> Option<bool> {
    if s.eq_ignore_ascii_case("pass") {
        Some(true)
    } else if s.eq_ignore_ascii_case("fail") {
        Some(false)
    } else {
        None
    }
}

const DASHES: [char; 3] = ['-', '–', '—'];

/// Reads one `- [ ] <criterion> - PASS|FAIL - <explanation>` line.
fn parse_markdown_line(line: &str) -> Option<ReportedCriterion> {
    let mut rest = line.trim_start();
    if let Some(r) = rest.strip_prefix(['-', '*', '+']) {
        rest = r.trim_start();
    }
    let rest = rest.strip_prefix('[')?;
    let close = rest.find(']')?;
    if rest[..close].trim().chars().count() > 1 {
        return None;
    }
    let rest = rest[close + 1..].trim_start();
    // The first dash followed by a PASS/FAIL word separates the criterion.
    for (i, c) in rest.char_indices() {
        if !DASHES.contains(&c) {
            continue;
        }
        let after = rest[i + c.len_utf8()..].trim_start();
        let Some(word) = after.get(..4) else { continue };
        let Some(passed) = parse_status(word) else {
            continue;
        };
        let tail = &after[4..];
        if tail
            .chars()
            .next()
            .is_some_and(|n| !n.is_whitespace() && !DASHES.contains(&n) && n != ':')
        {
            continue;
        }
        let criterion = rest[..i].trim();
        if criterion.is_empty() {
            return None;
        }
        let explanation = tail
            .trim_start()
            .trim_start_matches(|ch| DASHES.contains(&ch) || ch == ':')
            .trim();
        return Some(ReportedCriterion {
            criterion: criterion.to_owned(),
            passed,
            explanation: explanation.to_owned(),
        });
    }
    None
}

/// Phrases that mark an answer as a request for permission.
const PERMISSION_PHRASES: [&str; 16] = [
    "should i proceed",
    "shall i proceed",
    "may i proceed",
    "can i proceed",
    "ok to proceed",
    "okay to proceed",
    "should i continue",
    "shall i continue",
    "should i go ahead",
    "shall i go ahead",
    "do you want me to",
    "would you like me to",
    "want me to proceed",
    "proceed?",
    "continue?",
    "go ahead?",
];

/// If `text` asks permission to proceed ("Should I proceed?", "Continue?",
/// "Do you want me to …?"), the line that asks it. Callers only treat the
/// answer as a permission request when it holds no criteria report.
pub fn permission_question(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    if !lower.contains('?') || !PERMISSION_PHRASES.iter().any(|p| lower.contains(p)) {
        return None;
    }
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| {
            let l = l.to_lowercase();
            l.contains('?') && PERMISSION_PHRASES.iter().any(|p| l.contains(p))
        })
        .or_else(|| text.lines().map(str::trim).find(|l| l.contains('?')))
        .unwrap_or_default();
    Some(line.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn criteria(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Validates `text` against `wanted` and renders one line per criterion.
    fn check(text: &str, wanted: &[&str], expected: &[&str]) {
        let v = validate_exit_criteria(&parse_report(text, None), &criteria(wanted));
        let got: Vec<String> = v
            .results
            .iter()
            .map(|r| {
                format!(
                    "{} | {} | {}",
                    r.criterion,
                    if r.passed { "PASS" } else { "FAIL" },
                    r.explanation
                )
            })
            .collect();
        assert_eq!(got, expected, "report:\n{text}");
        assert_eq!(
            v.all_passed,
            expected.iter().all(|e| e.contains("| PASS |"))
        );
    }

    #[test]
    fn seed_markdown_report() {
        let text = "## Milestone 1 Results\n\n**Test Results:**\n\
            - [ ] Response status = 200 - PASS - Got status 200\n\
            - [ ] Data structure valid - PASS - Schema matches\n\
            - [ ] Response time < 500ms - FAIL - Got 612ms (too slow)\n\
            - [ ] API authentication works - PASS - No 401 errors\n\n\
            **Conclusion:**\nFAIL → Need to optimize query performance\n";
        check(
            text,
            &[
                "Response status = 200",
                "Data structure valid",
                "Response time < 500ms",
                "API authentication works",
            ],
            &[
                "Response status = 200 | PASS | Got status 200",
                "Data structure valid | PASS | Schema matches",
                "Response time < 500ms | FAIL | Got 612ms (too slow)",
                "API authentication works | PASS | No 401 errors",
            ],
        );
    }

    #[test]
    fn checked_boxes_extra_spaces_case_and_dashes() {
        let text = "  -   [x]   Builds   cleanly  -  pass  -  no warnings  \n\
                    * [X] tests green — PASS — 12 passed\n\
                    - [] Docs - fail: missing example\n\
                    -[ ] Lints - PASS";
        check(
            text,
            &["Builds cleanly", "Tests green", "docs", "Lints"],
            &[
                "Builds cleanly | PASS | no warnings",
                "Tests green | PASS | 12 passed",
                "docs | FAIL | missing example",
                "Lints | PASS | ",
            ],
        );
    }

    #[test]
    fn unreported_criteria_fail() {
        check(
            "- [ ] A - PASS - ok",
            &["A", "B"],
            &["A | PASS | ok", "B | FAIL | not reported"],
        );
        check("I did the work.", &["A"], &["A | FAIL | not reported"]);
    }

    #[test]
    fn criteria_with_dashes_and_the_echoed_template() {
        // The template line itself is not a report; a dash inside the criterion is kept.
        let text = "- [ ] <criterion> - PASS|FAIL - <explanation>\n\
                    - [ ] p95 - cold start < 2s - FAIL - 2.4s - too slow";
        check(
            text,
            &["p95 - cold start < 2s"],
            &["p95 - cold start < 2s | FAIL | 2.4s - too slow"],
        );
    }

    #[test]
    fn last_report_of_a_criterion_wins() {
        check(
            "- [ ] A - FAIL - first try\n- [x] A - PASS - fixed",
            &["A"],
            &["A | PASS | fixed"],
        );
    }

    #[test]
    fn json_reports_in_text_and_structured() {
        let text = "Done.\n```json\n{\"criteria\": [\
            {\"criterion\": \"A\", \"status\": \"PASS\", \"explanation\": \"ok\"},\
            {\"criterion\": \"b \", \"status\": \"fail\", \"explanation\": \"broken\"},\
            {\"criterion\": \"C\", \"status\": \"maybe\"}]}\n```";
        check(
            text,
            &["A", "B", "C"],
            &[
                "A | PASS | ok",
                "B | FAIL | broken",
                "C | FAIL | not reported",
            ],
        );

        let structured = json!({"criteria": [{"criterion": "A", "status": "PASS"}]});
        let reported = parse_report("- [ ] A - FAIL - markdown loses", Some(&structured));
        assert_eq!(
            reported,
            [ReportedCriterion {
                criterion: "A".into(),
                passed: true,
                explanation: String::new()
            }]
        );
        // JSON without a criteria array falls back to the markdown lines.
        let reported = parse_report("{\"note\": 1}\n- [ ] A - FAIL - md", Some(&json!({"x": 1})));
        assert_eq!(reported.len(), 1);
        assert!(!reported[0].passed);
    }

    #[test]
    fn no_criteria_passes_vacuously() {
        let v = validate_exit_criteria(&[], &[]);
        assert!(v.all_passed);
        assert!(v.results.is_empty());
    }

    proptest::proptest! {
        /// Whatever the criteria and explanations, a report written in either
        /// format reads back as written.
        #[test]
        fn reports_round_trip(
            entries in proptest::collection::vec(
                ("[A-Za-z0-9<>=.,()/ ]{0,24}[A-Za-z0-9]", proptest::bool::ANY, "[A-Za-z0-9<>=.,()/ ]{0,30}"),
                0..6,
            ),
            checked in proptest::bool::ANY,
        ) {
            let expected: Vec<ReportedCriterion> = entries
                .iter()
                .map(|(c, p, e)| ReportedCriterion {
                    criterion: c.trim().to_owned(),
                    passed: *p,
                    explanation: e.trim().to_owned(),
                })
                .collect();
            let markdown: String = expected
                .iter()
                .map(|r| format!(
                    "- [{}] {} - {} - {}\n",
                    if checked { "x" } else { " " },
                    r.criterion,
                    if r.passed { "PASS" } else { "FAIL" },
                    r.explanation
                ))
                .collect();
            proptest::prop_assert_eq!(&parse_report(&markdown, None), &expected);
            let json = json!({"criteria": expected.iter().map(|r| json!({
                "criterion": r.criterion,
                "status": if r.passed { "PASS" } else { "FAIL" },
                "explanation": r.explanation,
            })).collect::<Vec<_>>()});
            proptest::prop_assert_eq!(&parse_report(&json.to_string(), None), &expected);
        }
    }

    #[test]
    fn permission_questions() {
        let yes = [
            (
                "I have read the code. Should I proceed?",
                "I have read the code. Should I proceed?",
            ),
            ("Plan ready.\nContinue?", "Continue?"),
            (
                "Do you want me to refactor the module first?",
                "Do you want me to refactor the module first?",
            ),
            (
                "Would you like me to go ahead?\nThanks",
                "Would you like me to go ahead?",
            ),
        ];
        for (text, line) in yes {
            assert_eq!(permission_question(text).as_deref(), Some(line), "{text}");
        }
        for text in [
            "Should I proceed. (no question mark)",
            "Why does this fail? The timeout is 5s.",
            "- [ ] A - PASS - ok",
        ] {
            assert_eq!(permission_question(text), None, "{text}");
        }
    }
}
