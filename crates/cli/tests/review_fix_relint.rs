//! `orchestrator review-fix --relint`: the findings command runs again after
//! each pass, and what earlier fixes uncovered is fixed in a further pass.
//!
//! The "linter" is a shell script around `awk`: every line of `a.txt` that
//! starts with `((` is reported (rdjsonl) with a suggestion removing one
//! layer of parentheses, so `((((x))))` needs three passes. The test command
//! fails when `a.txt` holds the line `(q)`, so the fix of `((q))` is rolled
//! back — and, reported again by every re-lint, never tried a second time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod flow_support;

use std::path::PathBuf;
use std::process::{Command, Output};

use flow_support::git;

/// The linter script (`sh LINTER` in the repository prints its findings).
const LINTER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../review-fix/tests/data/paren_lint.sh"
);

/// A linter whose fixes overlap on one line (see the script).
const OVERLAP_LINTER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../review-fix/tests/data/overlap_lint.sh"
);

struct Fixture {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    lint: PathBuf,
    findings: PathBuf,
    base: String,
}

fn fixture(text: &str) -> Fixture {
    fixture_linted(text, LINTER)
}

fn fixture_linted(text: &str, linter: &str) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("a.txt"), text).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "test@example.invalid"]);
    git(&repo, &["config", "user.name", "Test"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "start"]);
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let lint = PathBuf::from(linter);
    let out = Command::new("sh")
        .arg(&lint)
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(out.status.success());
    let findings = tmp.path().join("findings.rdjsonl");
    std::fs::write(&findings, &out.stdout).unwrap();
    Fixture {
        tmp,
        repo,
        lint,
        findings,
        base,
    }
}

impl Fixture {
    /// `orchestrator review-fix ARGS` in the repository, clean environment.
    fn review_fix(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_orchestrator"))
            .env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
            .env("ORCHESTRATOR_CACHE_DIR", self.tmp.path().join("cache"))
            .arg("review-fix")
            .args(args)
            .current_dir(&self.repo)
            .env("RUST_BACKTRACE", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("ORCHESTRATOR_AGENT")
            .output()
            .unwrap()
    }

    fn run(&self, extra: &[&str]) -> Output {
        let relint = format!("sh '{}'", self.lint.display());
        Command::new(env!("CARGO_BIN_EXE_orchestrator"))
            .env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
            .env("ORCHESTRATOR_CACHE_DIR", self.tmp.path().join("cache"))
            .args([
                "review-fix",
                "--fix",
                self.findings.to_str().unwrap(),
                "--relint",
                &relint,
                "--test-cmd",
                "sh -c '! grep -qx \"(q)\" a.txt'",
                "--isolation",
                "serial",
                "--max-iterations",
                "1",
                "-y",
            ])
            .args(extra)
            .current_dir(&self.repo)
            .env("RUST_BACKTRACE", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("ORCHESTRATOR_AGENT")
            .output()
            .unwrap()
    }

    /// Session ids, paths, commit ids and wall times replaced.
    fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        let mut sessions: Vec<String> = std::fs::read_dir(self.repo.join(".review/fixes"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_str().unwrap().to_owned())
            .collect();
        sessions.sort();
        for (i, id) in sessions.iter().enumerate() {
            out = out.replace(id, &format!("fix-<session{}>", i + 1));
        }
        let real = self.tmp.path().canonicalize().unwrap();
        out = out
            .replace(real.to_str().unwrap(), "<tmp>")
            .replace(self.tmp.path().to_str().unwrap(), "<tmp>");
        let ids = git(
            &self.repo,
            &[
                "log",
                "--reverse",
                "--format=%h",
                "--abbrev=7",
                &format!("{}..HEAD", self.base),
            ],
        );
        for (i, c) in ids.lines().enumerate() {
            out = out.replace(c, &format!("<c{}>", i + 1));
        }
        // The re-lint output files are named by pass and millisecond.
        while let Some(at) = out.find("/relint/pass-") {
            let from = at + "/relint/pass-".len() + 2;
            let digits = out[from..].chars().take_while(char::is_ascii_digit).count();
            out.replace_range(from..from + digits, "<ms>");
            out.replace_range(at..at + 1, "\u{0}");
        }
        out = out.replace('\u{0}', "/");
        out.lines()
            .map(|l| match l.find("wall time ") {
                Some(at) => format!("{}wall time <s>", &l[..at]),
                None => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[test]
fn relint_passes_fix_what_earlier_fixes_uncover() {
    let fx = fixture("((((x))))\nplain\n((q))\n");
    let o = fx.run(&[]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("re-lint with `sh ") && err.contains("(at most 4 passes)"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.repo.join("a.txt")).unwrap(),
        "(x)\nplain\n((q))\n"
    );
    let subjects = git(
        &fx.repo,
        &["log", "--format=%s", &format!("{}..HEAD", fx.base)],
    );
    assert_eq!(subjects.lines().count(), 3, "{subjects}");
    assert_eq!(git(&fx.repo, &["status", "--porcelain"]), "");
    insta::assert_snapshot!("relint_summary", fx.redact(&out));
}

/// A fix that overlaps one applied earlier in the pass is deferred to the
/// next pass, which applies it at its new place; a finding whose edit an
/// earlier fix made is fixed without a commit of its own.
#[test]
fn an_overlapping_fix_is_deferred_to_the_next_pass() {
    let fx = fixture_linted("a --x b\npair\nend\n", OVERLAP_LINTER);
    let o = fx.run(&[]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(fx.repo.join("a.txt")).unwrap(),
        "a x b\nend\n"
    );
    insta::assert_snapshot!("relint_deferred_summary", fx.redact(&out));
}

#[test]
fn relint_json_ends_with_the_totals() {
    let fx = fixture("((((x))))\n");
    let o = fx.run(&["--json", "--relint-passes", "2"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let passes: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|v| v["event"] == "pass_summary")
        .collect();
    assert_eq!(passes.len(), 2, "{out}");
    assert_eq!(passes[0]["pass"], 1);
    assert_eq!(passes[1]["counts"]["fixed"], 1);
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "summary", "{out}");
    assert_eq!(last["passes"], 2);
    assert_eq!(last["relint_stop"], "the pass limit was reached");
    assert_eq!(last["counts"]["fixed"], 2);
    assert_eq!(last["commits"].as_array().unwrap().len(), 2);
    assert_eq!(last["outcome"], "all_fixed");
    assert_eq!(last["exit_code"], 0);
}

/// The test command is recorded in the session: a resume without
/// `--test-cmd` runs it again (this repository implies none, so without the
/// record the resume would be a usage error).
#[test]
fn a_resume_runs_the_test_command_the_session_recorded() {
    let fx = fixture("((x))\n((q))\n");
    let orchestrator = |args: &[&str]| fx.review_fix(args);
    // Without -y and without a terminal the plan waits for a human: exit 3,
    // the session stays resumable.
    let first = orchestrator(&[
        "--fix",
        fx.findings.to_str().unwrap(),
        "--test-cmd",
        "sh -c '! grep -qx \"(q)\" a.txt'",
        "--isolation",
        "serial",
    ]);
    assert_eq!(first.status.code(), Some(3), "{first:?}");

    let resumed = orchestrator(&["--resume", "-y", "--max-iterations", "1"]);
    let err = String::from_utf8_lossy(&resumed.stderr).into_owned();
    assert!(
        err.contains(r#"test command `sh -c '! grep -qx "(q)" a.txt'` (recorded in the session)"#),
        "{err}"
    );
    assert_eq!(
        resumed.status.code(),
        Some(1),
        "q breaks the recorded test\n{err}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.repo.join("a.txt")).unwrap(),
        "(x)\n((q))\n"
    );

    // A repository that implies no test command, and no session to take it
    // from: a usage error.
    let none = orchestrator(&["--fix", fx.findings.to_str().unwrap(), "-y"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("no test command"),
        "{none:?}"
    );
}

/// A findings command that fails after pass 1: the pass's fixes stay, the
/// closing lines say the re-lint failed (exit 1, not "every finding fixed")
/// and show the end of its stderr.
#[test]
fn a_failing_relint_command_is_reported_with_its_stderr() {
    let fx = fixture("((x))\n");
    let o = fx.review_fix(&[
        "--fix",
        fx.findings.to_str().unwrap(),
        "--relint",
        "sh -c 'echo lint: config not found >&2; exit 4'",
        "--test-cmd",
        "true",
        "-y",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{out}");
    let tail: Vec<&str> = out.lines().rev().take(3).collect();
    assert_eq!(tail[0], "    lint: config not found", "{out}");
    assert_eq!(tail[1], "  the re-lint command's stderr ends:", "{out}");
    assert!(
        tail[2].starts_with(
            "review-fix: 1 pass (the re-lint command failed: `sh -c echo lint: config not found >&2; exit 4` exited with 4 and printed no findings): some findings were not fixed; 1 finding (1 fixed"
        ),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.repo.join("a.txt")).unwrap(),
        "(x)\n"
    );
}

/// A dry run with `--relint` plans the first pass only and prints it as a
/// plain dry run: nothing is changed, nothing re-linted.
#[test]
fn a_dry_run_with_relint_prints_the_first_plan_only() {
    let fx = fixture("(((x)))\n");
    let o = fx.run(&["--dry-run"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("dry run: plan written, nothing changed"),
        "{out}"
    );
    assert!(!out.contains("pass 1/"), "{out}");
    assert!(!fx.repo.join(".review/relint").exists());
    assert_eq!(
        std::fs::read_to_string(fx.repo.join("a.txt")).unwrap(),
        "(((x)))\n"
    );
}

/// Re-lint options that cannot work are usage errors (exit 2) named in the
/// message, and nothing runs.
#[test]
fn bad_relint_options_are_usage_errors() {
    let cases: [(&[&str], &str); 2] = [
        (
            &["--relint-passes", "3"],
            "--relint-passes needs a re-lint command",
        ),
        (
            &["--relint", "cargo clippy 'unbalanced"],
            "--relint \"cargo clippy 'unbalanced\"",
        ),
    ];
    for (options, message) in cases {
        let fx = fixture("((x))\n");
        let mut args = vec!["--fix", fx.findings.to_str().unwrap(), "--test-cmd", "true"];
        args.extend_from_slice(options);
        let o = fx.review_fix(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{options:?}: {err}");
        assert!(err.contains(message), "{options:?}: {err}");
        assert_eq!(
            git(
                &fx.repo,
                &["log", "--format=%s", &format!("{}..HEAD", fx.base)]
            ),
            "",
            "{options:?}: nothing ran"
        );
    }
}
