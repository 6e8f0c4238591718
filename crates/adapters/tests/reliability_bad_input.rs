//! The configuration files of the bad-input corpus (`tests/data/bad-input/`)
//! through `Config::load`: refused with the file, the line and column, and
//! what is wrong; nothing is written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability_support;

use orchestrator_adapters::config::Config;
use reliability_support::{Repo, assert_covers_readme_rows};

const THIS_TEST: &str = "adapters";

fn cases() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        (
            "config-unknown-key.toml",
            &["line 5, column 1", "unknown field `modle`"],
        ),
        (
            "config-wrong-type.toml",
            &["line 4", "invalid type: string \"four\""],
        ),
    ]
}

#[test]
fn bad_config_files_are_refused_with_file_line_and_column() {
    let cases = cases();
    assert_covers_readme_rows(THIS_TEST, cases.iter().map(|(f, _)| *f));

    for (file, fragments) in cases {
        let repo = Repo::new();
        let input = repo.input(file);
        let before = repo.snapshot();
        let msg = Config::load(&input).unwrap_err().to_string();
        assert!(
            msg.contains(file),
            "{file}: the message does not name the file: {msg}"
        );
        for f in fragments {
            assert!(msg.contains(f), "{file}: {f:?} missing from: {msg}");
        }
        assert_eq!(repo.snapshot(), before, "{file}: something was written");
    }
}
