//! Acceptance: no code path can force a push or amend a commit.

#![allow(clippy::unwrap_used, clippy::expect_used)]
//!
//! Three layers, each checked here or next to the code:
//! 1. the `Vcs` trait has no parameter or method that could ask for it
//!    (checked below on the trait's source);
//! 2. every git process is started by one private function that runs the
//!    argument guard first (checked below: one `Command::new` in all of
//!    `src/git/`, in `run.rs`, guarded);
//! 3. the guard refuses `--force`, `-f`, `--force-with-lease`, `+` refspecs
//!    and `--amend` in every spelling (unit tests in `src/git/guard.rs`), and
//!    the adapter's sources never spell those arguments (checked below).

use std::path::PathBuf;

fn source(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The adapter's git sources (`src/git/*.rs`), relative to the crate, sorted.
fn git_sources() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/git");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .map(|name| format!("src/git/{name}"))
        .collect();
    files.sort();
    files
}

/// Every string literal in `text` (good enough for our own sources: no raw
/// strings with embedded quotes are used for arguments).
fn string_literals(text: &str) -> Vec<String> {
    let mut literals = Vec::new();
    let mut chars = text.chars().peekable();
    let mut in_line_comment = false;
    let mut prev = '\0';
    while let Some(c) = chars.next() {
        if in_line_comment {
            if c == '\n' {
                in_line_comment = false;
            }
            prev = c;
            continue;
        }
        if c == '/' && chars.peek() == Some(&'/') {
            in_line_comment = true;
            continue;
        }
        // Skip char literals such as '"' so they do not open a string.
        if c == '\'' && prev != '\\' {
            let rest: String = chars.clone().take(3).collect();
            if rest.starts_with("\"'") || rest.starts_with("\\\"'") {
                for _ in 0..rest.find('\'').map_or(0, |i| i + 1) {
                    chars.next();
                }
                prev = '\'';
                continue;
            }
        }
        if c == '"' {
            let mut literal = String::new();
            let mut escaped = false;
            for c in chars.by_ref() {
                if escaped {
                    literal.push(c);
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    break;
                } else {
                    literal.push(c);
                }
            }
            literals.push(literal);
            prev = '"';
            continue;
        }
        prev = c;
    }
    literals
}

/// Whether a literal could be (or start) a forbidden git argument.
fn is_forbidden_argument(literal: &str) -> bool {
    let trimmed = literal.trim();
    trimmed.starts_with("--force")
        || trimmed.starts_with("--amend")
        || trimmed.starts_with("--mirror")
        || trimmed == "-f"
        || (trimmed.starts_with('-') && !trimmed.starts_with("--") && trimmed.contains('f'))
        || (trimmed.starts_with('+') && trimmed.contains("refs/"))
        || trimmed.starts_with("+{")
}

#[test]
fn the_adapter_sources_never_spell_a_forbidden_argument() {
    let mut total = 0;
    // The guard spells the forbidden arguments to refuse them.
    for file in git_sources()
        .into_iter()
        .filter(|file| file != "src/git/guard.rs")
    {
        let text = source(&file);
        let literals = string_literals(&text);
        total += literals.len();
        let bad: Vec<&String> = literals
            .iter()
            .filter(|l| is_forbidden_argument(l))
            .collect();
        assert!(
            bad.is_empty(),
            "{file} contains forbidden git arguments: {bad:?}"
        );
    }
    assert!(total > 100, "the scanner found too few literals");
}

#[test]
fn the_scanner_would_catch_a_forbidden_argument() {
    let sample = r#"let args = ["push", "--force", "origin"]; let b = "-f"; let c = "--amend"; let d = '"'; let e = "+refs/heads/x";"#;
    let literals = string_literals(sample);
    let bad: Vec<&String> = literals
        .iter()
        .filter(|l| is_forbidden_argument(l))
        .collect();
    assert_eq!(bad, vec!["--force", "-f", "--amend", "+refs/heads/x"]);
    assert!(!is_forbidden_argument("-F"));
    assert!(!is_forbidden_argument("--porcelain"));
}

#[test]
fn every_git_process_is_started_by_the_guarded_function() {
    let sources = git_sources();
    let starts: usize = sources
        .iter()
        .map(|file| source(file).matches("Command::new(").count())
        .sum();
    assert_eq!(starts, 1, "exactly one place may start a git process");
    let text = source("src/git/run.rs");
    let run = text
        .split("async fn run(")
        .nth(1)
        .expect("the run function exists");
    let guard_at = run.find("guard::check_args(").expect("run calls the guard");
    let spawn_at = run.find("Command::new(").expect("run builds the command");
    assert!(
        guard_at < spawn_at,
        "the guard runs before the command is built"
    );
    for other in sources.iter().filter(|file| *file != "src/git/run.rs") {
        let text = source(other);
        assert!(
            !text.contains("Command::new("),
            "{other} must not start processes"
        );
        assert!(
            !text.contains("std::process"),
            "{other} must not start processes"
        );
    }
}

#[test]
fn the_vcs_trait_has_no_way_to_ask_for_force_or_amend() {
    let text = source("../orchestrator-core/src/vcs.rs");
    let trait_body = text
        .split("pub trait Vcs")
        .nth(1)
        .and_then(|rest| rest.split("\n}\n").next())
        .expect("the Vcs trait exists");
    let signatures: Vec<&str> = trait_body
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("///") && !l.is_empty())
        .collect();
    assert!(signatures.iter().any(|l| l.contains("async fn push(")));
    for line in signatures {
        let lower = line.to_lowercase();
        for word in ["force", "amend", "reset", "lease"] {
            assert!(
                !lower.contains(word),
                "Vcs trait line mentions {word}: {line}"
            );
        }
    }
    // The push outcome has no forced variant either.
    let outcome = text
        .split("pub enum PushOutcome")
        .nth(1)
        .and_then(|rest| rest.split("\n}\n").next())
        .expect("PushOutcome exists");
    assert!(!outcome.to_lowercase().contains("forced"));
}
