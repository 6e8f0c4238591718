//! The findings files of the bad-input corpus (`tests/data/bad-input/`)
//! through review-fix's input loader, `input::load_inputs`: an unreadable or
//! unparsable file is an error (exit 2) naming the file and the place; a bad
//! finding inside a readable file — out of the repository, through a symlink
//! that leaves it, at a missing file, a duplicate id, a field of the wrong
//! type — is rejected on its own with the reason, and the rest is kept.
//! Nothing is written to the repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability_support;

use orchestrator_review_fix::input::load_inputs;
use reliability_support::{Repo, assert_covers_readme_rows};

const THIS_TEST: &str = "review-fix";

enum Expect {
    /// `load_inputs` fails (exit 2); the message holds these fragments.
    Error(&'static [&'static str]),
    /// Findings kept (ids), and per rejected finding: fragments of
    /// `id: reason`.
    Read {
        kept: &'static [&'static str],
        rejected: &'static [&'static [&'static str]],
    },
}

fn cases() -> Vec<(&'static str, Expect)> {
    use Expect::{Error, Read};
    vec![
        ("findings-empty.json", Error(&["the input is empty"])),
        ("findings-truncated.json", Error(&["line 12, column 20"])),
        (
            "findings-binary.bin",
            Error(&["not UTF-8 text (invalid byte at offset 4)"]),
        ),
        (
            "findings-wrong-field-types.json",
            Read {
                kept: &["F4"],
                rejected: &[
                    &["findings[0]", "field `line`"],
                    &["findings[1]", "field `severity`"],
                    &["findings[2]", "field `title`"],
                ],
            },
        ),
        (
            "findings-duplicate-ids.json",
            Read {
                kept: &["F1", "F3"],
                rejected: &[&["findings[1]", "reuses id `F1`"]],
            },
        ),
        (
            "findings-outside-repo.json",
            Read {
                kept: &["F4"],
                rejected: &[
                    &["F1", "`../../../etc/passwd` points outside the repository"],
                    &["F2", "`/etc/passwd` points outside the repository"],
                    &["F3", "`src/missing.rs` points at nothing"],
                ],
            },
        ),
        (
            "findings-symlink-escape.json",
            Read {
                kept: &["F2"],
                rejected: &[&["F1", "`link-out/secret.txt` points outside the repository"]],
            },
        ),
    ]
}

#[test]
fn bad_findings_inputs_fail_with_their_place_or_are_rejected_one_by_one() {
    let cases = cases();
    assert_covers_readme_rows(THIS_TEST, cases.iter().map(|(f, _)| *f));

    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not yours\n").unwrap();
    for (file, expect) in &cases {
        let repo = Repo::new();
        std::os::unix::fs::symlink(outside.path(), repo.path().join("link-out")).unwrap();
        let input = repo.input(file);
        let before = repo.snapshot();
        let result = load_inputs(repo.path(), std::slice::from_ref(&input));
        assert_eq!(repo.snapshot(), before, "{file}: something was written");
        match (result, expect) {
            (Err(e), Expect::Error(fragments)) => {
                let msg = e.to_string();
                assert_eq!(e.exit_code(), 2, "{file}: {msg}");
                assert_eq!(
                    msg.matches(file).count(),
                    1,
                    "{file}: the message names the file once: {msg}"
                );
                for f in *fragments {
                    assert!(msg.contains(f), "{file}: {f:?} missing from: {msg}");
                }
            }
            (Ok(loaded), Expect::Read { kept, rejected }) => {
                let ids: Vec<&str> = loaded.findings.iter().map(|f| f.id.as_str()).collect();
                assert_eq!(&ids, kept, "{file}: kept");
                let got: Vec<String> = loaded
                    .rejected
                    .iter()
                    .map(|r| format!("{}: {}", r.finding_id, r.reason))
                    .collect();
                assert_eq!(got.len(), rejected.len(), "{file}: {got:#?}");
                for (msg, fragments) in got.iter().zip(rejected.iter()) {
                    assert!(
                        msg.matches(file).count() <= 1,
                        "{file}: the file is named at most once: {msg}"
                    );
                    for f in *fragments {
                        assert!(msg.contains(f), "{file}: {f:?} missing from: {msg}");
                    }
                }
            }
            (Err(e), _) => panic!("{file}: unexpected error {e}"),
            (Ok(loaded), _) => panic!("{file}: unexpectedly read: {loaded:?}"),
        }
    }
}

/// A findings file whose name is not UTF-8 is read; the findings in it are
/// checked as usual.
#[test]
fn a_findings_file_with_a_non_utf8_name_is_read() {
    use std::os::unix::ffi::OsStrExt;
    let repo = Repo::new();
    std::fs::create_dir_all(repo.path().join("input")).unwrap();
    let input = repo
        .path()
        .join("input")
        .join(std::ffi::OsStr::from_bytes(b"export-\xff.json"));
    std::fs::copy(
        reliability_support::corpus_dir().join("findings-outside-repo.json"),
        &input,
    )
    .unwrap();
    let before = repo.snapshot();
    let loaded = load_inputs(repo.path(), std::slice::from_ref(&input)).unwrap();
    assert_eq!(repo.snapshot(), before);
    assert_eq!(loaded.findings.len(), 1);
    assert_eq!(loaded.rejected.len(), 3);
    assert!(
        loaded
            .notes
            .iter()
            .any(|n| n.contains("export-\u{fffd}.json")),
        "{:?}",
        loaded.notes
    );
}

/// A findings file that is a directory of nothing, or missing, is an error
/// naming it.
#[test]
fn a_missing_input_is_an_error_naming_it() {
    let repo = Repo::new();
    let missing = repo.path().join("nope.json");
    let err = load_inputs(repo.path(), &[missing]).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("nope.json"), "{err}");
    let empty_dir = repo.path().join("reviews");
    std::fs::create_dir_all(&empty_dir).unwrap();
    let err = load_inputs(repo.path(), &[empty_dir]).unwrap_err();
    assert!(err.to_string().contains("reviews"), "{err}");
    assert!(!repo.path().join(".review").exists());
}
