//! The handoff files of the bad-input corpus (`tests/data/bad-input/`)
//! through `Handoff::parse`: each is refused with a typed error that names
//! the place (line and column for JSON syntax, the field path otherwise).
//!
//! `Handoff::parse` takes text, so its errors cannot name the file: the
//! caller (the CLI) must prefix the path. That gap is listed in
//! `docs/RELIABILITY.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../orchestrator-core/tests/reliability_support/mod.rs"]
mod reliability_support;

use orchestrator_ci_autofix::handoff::{Handoff, HandoffError};
use reliability_support::{Repo, files_for};

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
    let mut covered: Vec<&str> = cases.iter().map(|(f, _)| *f).collect();
    covered.sort_unstable();
    let mut assigned = files_for(THIS_TEST);
    assigned.sort();
    assert_eq!(
        covered, assigned,
        "cases here vs. README rows naming `{THIS_TEST}`"
    );

    for (file, fragments) in cases {
        let repo = Repo::new();
        let input = repo.input(file);
        let before = repo.snapshot();
        let text = std::fs::read_to_string(&input).unwrap();
        let err = Handoff::parse(&text).unwrap_err();
        assert!(
            matches!(err, HandoffError::Json { .. } | HandoffError::Field { .. }),
            "{file}: {err:?}"
        );
        let msg = err.to_string();
        for f in fragments {
            assert!(msg.contains(f), "{file}: {f:?} missing from: {msg}");
        }
        assert_eq!(repo.snapshot(), before, "{file}: something was written");
    }
}
