//! The handoff files of the bad-input corpus (`tests/data/bad-input/`)
//! through `Handoff::read`: each is refused with a typed error that names
//! the file and the place (line and column for JSON syntax, the field path
//! otherwise). A handoff with a 10 MB field (generated) is refused the same
//! way, fast, without quoting the field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability_support;

use orchestrator_ci_autofix::handoff::{Handoff, HandoffError, HandoffFileError};
use reliability_support::{Repo, assert_covers_readme_rows};

const THIS_TEST: &str = "ci-autofix";

fn cases() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        (
            "handoff-malformed.json",
            &["not valid JSON at line 1 column"],
        ),
        (
            "handoff-wrong-types.json",
            &["field `prNumber`", "\"seven-eight-five\""],
        ),
        (
            "handoff-bad-check.json",
            &["field `failedChecks[1].name`", "is missing"],
        ),
        (
            "handoff-empty.json",
            &["not valid JSON at line 1 column 0", "EOF"],
        ),
    ]
}

#[test]
fn bad_handoffs_are_refused_with_the_place() {
    let cases = cases();
    assert_covers_readme_rows(THIS_TEST, cases.iter().map(|(f, _)| *f));

    for (file, fragments) in cases {
        let repo = Repo::new();
        let input = repo.input(file);
        let before = repo.snapshot();
        let err = Handoff::read(&input).unwrap_err();
        assert!(
            matches!(
                err,
                HandoffFileError::Invalid {
                    error: HandoffError::Json { .. } | HandoffError::Field { .. },
                    ..
                }
            ),
            "{file}: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("{}: handoff ", input.display())),
            "{file}: the message names the file first: {msg}"
        );
        for f in fragments {
            assert!(msg.contains(f), "{file}: {f:?} missing from: {msg}");
        }
        assert_eq!(repo.snapshot(), before, "{file}: something was written");
    }
}

/// A 10 MB check name (or branch, or detail) is refused naming the file,
/// the field, its size and the limit, without quoting it.
#[test]
fn a_ten_megabyte_field_is_refused_naming_file_and_field() {
    let repo = Repo::new();
    let huge = "z".repeat(10 << 20);
    for (field, json) in [
        (
            "failedChecks[0].name",
            serde_json::json!({"prNumber": 7, "branch": "main", "failedChecks": [{"name": huge}]}),
        ),
        (
            "branch",
            serde_json::json!({"prNumber": 7, "branch": huge, "failedChecks": [{"name": "x"}]}),
        ),
        (
            "failedChecks[0].conclusionDetail",
            serde_json::json!({"prNumber": 7, "branch": "main",
                "failedChecks": [{"name": "x", "conclusionDetail": huge}]}),
        ),
    ] {
        let path = repo.path().join("input/huge-handoff.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, json.to_string()).unwrap();
        let before = repo.snapshot();
        let started = std::time::Instant::now();
        let err = Handoff::read(&path).unwrap_err().to_string();
        let took = started.elapsed();
        assert!(
            err.starts_with(&format!(
                "{}: handoff field `{field}` is 10485760 bytes, over the limit of",
                path.display()
            )),
            "{err}"
        );
        assert!(err.len() < 400, "{} bytes", err.len());
        assert!(
            took < std::time::Duration::from_secs(5),
            "{field}: {took:?}"
        );
        eprintln!(
            "10 MB handoff `{field}` refused in {:.0} ms",
            took.as_secs_f64() * 1000.0
        );
        assert_eq!(repo.snapshot(), before, "{field}: something was written");
    }
}
