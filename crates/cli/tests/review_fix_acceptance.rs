//! Acceptance measurement of `orchestrator review-fix --agent builtin` on a
//! real crate this project did not write (issue #5).
//!
//! Runs only with `ORCH_RF_ACCEPT=1` (it fetches a crate from the registry
//! and builds it many times; minutes, not seconds):
//!
//! ```sh
//! ORCH_RF_ACCEPT=1 cargo test -p orchestrator-cli --test review_fix_acceptance -- --nocapture
//! ```
//!
//! `ORCH_RF_ACCEPT_CRATE=name@version` picks the crate (default
//! `smallvec@1.16.6`). The test:
//!
//! 1. `cargo fetch`es the crate into the local registry cache, copies its
//!    source into a temporary git repository (its own `[workspace]`, a
//!    `Cargo.lock`, `/target` ignored) and commits it;
//! 2. takes the findings from `cargo clippy --all-targets
//!    --message-format=json -- -W clippy::pedantic`;
//! 3. runs `orchestrator review-fix --agent builtin --relint "cargo clippy
//!    …" -y --json` on them — one invocation; `--relint` re-runs clippy
//!    after each pass and fixes what the earlier fixes uncovered, as `cargo
//!    clippy --fix` re-lints and applies again (a fix can leave an import
//!    unused, or rewrite the text an overlapping suggestion was to replace);
//! 4. counts the machine-applicable clippy warnings left, and those left by
//!    `cargo clippy --fix` on a fresh copy;
//! 5. checks out every fix commit in a scratch worktree and runs
//!    `cargo test` there.
//!
//! It prints the figures as one JSON line (`acceptance: {...}`) and asserts
//! the acceptance criteria: no more machine-applicable warnings left than
//! `cargo clippy --fix` leaves, and every commit passes the crate's tests.
//!
//! Measured on smallvec 1.16.6 (2-core machine shared with other builds),
//! one invocation, default `--verify auto`: 101 findings over 2 passes (94
//! from the first clippy run, 49 of them machine-applicable; 7 after pass
//! 1), 54 fixed, 54 commits, 11 test runs, 30.6 s wall; no
//! machine-applicable warning left, against 2 (`unused_mut`) left by
//! `cargo clippy --fix`. All 54 commits pass `cargo test`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::{Value, json};

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = run(Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1"));
    String::from_utf8(out.stdout).unwrap()
}

fn cargo(dir: &Path, target: &Path) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    cmd
}

const CLIPPY_ARGS: [&str; 7] = [
    "clippy",
    "--all-targets",
    "--message-format=json",
    "--quiet",
    "--",
    "-W",
    "clippy::pedantic",
];

/// The distinct warnings (lint, file, line, column) that carry a
/// machine-applicable suggestion, from a cargo JSON stream.
fn machine_applicable(stream: &str) -> BTreeSet<(String, String, u64, u64)> {
    fn has_machine(m: &Value) -> bool {
        m["spans"].as_array().into_iter().flatten().any(|s| {
            s["suggestion_applicability"] == "MachineApplicable"
                && s["suggested_replacement"].is_string()
        }) || m["children"]
            .as_array()
            .into_iter()
            .flatten()
            .any(has_machine)
    }
    let mut out = BTreeSet::new();
    for line in stream.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-message" || v["message"]["level"] != "warning" {
            continue;
        }
        let m = &v["message"];
        let Some(span) = m["spans"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["is_primary"] == true)
        else {
            continue;
        };
        if has_machine(m) {
            out.insert((
                m["code"]["code"].as_str().unwrap_or("").to_owned(),
                span["file_name"].as_str().unwrap_or("").to_owned(),
                span["line_start"].as_u64().unwrap_or(0),
                span["column_start"].as_u64().unwrap_or(0),
            ));
        }
    }
    out
}

fn clippy_json(dir: &Path, target: &Path) -> String {
    let out = cargo(dir, target).args(CLIPPY_ARGS).output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// The crate's source from the local registry cache, fetched first.
fn crate_source(name: &str, version: &str, scratch: &Path) -> PathBuf {
    let fetch = scratch.join("fetch");
    std::fs::create_dir_all(fetch.join("src")).unwrap();
    std::fs::write(
        fetch.join("Cargo.toml"),
        format!(
            "[package]\nname = \"fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[dependencies]\n{name} = \"={version}\"\n\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::write(fetch.join("src/lib.rs"), "").unwrap();
    run(cargo(&fetch, &scratch.join("t")).arg("fetch"));
    let home = std::env::var("CARGO_HOME").map_or_else(
        |_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo"),
        PathBuf::from,
    );
    let want = format!("{name}-{version}");
    std::fs::read_dir(home.join("registry/src"))
        .unwrap()
        .map(|e| e.unwrap().path().join(&want))
        .find(|p| p.join("Cargo.toml").is_file())
        .unwrap_or_else(|| panic!("{want} is not in the registry cache"))
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A committed git repository holding the crate, buildable on its own.
fn repository(source: &Path, dir: &Path, target: &Path) {
    copy_tree(source, dir);
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    if !text.lines().any(|l| l.trim() == "[workspace]") {
        std::fs::write(&manifest, format!("{text}\n[workspace]\n")).unwrap();
    }
    std::fs::write(dir.join(".gitignore"), "/target\n").unwrap();
    run(cargo(dir, target).arg("generate-lockfile"));
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.email", "acceptance@example.invalid"]);
    git(dir, &["config", "user.name", "Acceptance"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "crate source"]);
}

/// The re-lint command: the same clippy invocation the findings came from.
fn relint_command() -> String {
    format!("cargo {}", CLIPPY_ARGS.join(" "))
}

/// One `orchestrator review-fix --agent builtin --relint … -y --json` run:
/// its `pass_summary` lines, its last `summary` line, wall time and exit
/// code.
fn review_fix(
    repo: &Path,
    findings: &Path,
    target: &Path,
) -> (Vec<Value>, Value, f64, Option<i32>) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .args(["review-fix", "--agent", "builtin", "-y", "--json"])
        .args(["--relint", &relint_command()])
        .arg("--fix")
        .arg(findings)
        .current_dir(repo)
        .env("CARGO_TARGET_DIR", target)
        .env("RUST_BACKTRACE", "0")
        .env_remove("RUSTFLAGS")
        .env_remove("RUST_LOG")
        .env_remove("ORCHESTRATOR_AGENT")
        .output()
        .unwrap();
    let wall = started.elapsed().as_secs_f64();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let passes: Vec<Value> = lines
        .iter()
        .filter(|v| v["event"] == "pass_summary")
        .cloned()
        .collect();
    let summary = lines
        .iter()
        .rev()
        .find(|v| v["event"] == "summary")
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "no summary; exit {:?}\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            )
        });
    (passes, summary, wall, out.status.code())
}

#[test]
fn builtin_review_fix_on_a_real_crate_matches_cargo_clippy_fix() {
    // The counter agrees with the quickstart's committed clippy output
    // (seven warnings, each with a machine-applicable suggestion).
    let quickstart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart");
    let counted =
        machine_applicable(&std::fs::read_to_string(quickstart.join("clippy.json")).unwrap());
    assert_eq!(counted.len(), 7, "{counted:?}");
    assert!(counted.contains(&(
        "clippy::len_zero".to_owned(),
        "src/ring.rs".to_owned(),
        42,
        12
    )));
    if std::env::var("ORCH_RF_ACCEPT").as_deref() != Ok("1") {
        eprintln!("acceptance measurement not run: set ORCH_RF_ACCEPT=1");
        return;
    }
    let spec = std::env::var("ORCH_RF_ACCEPT_CRATE").unwrap_or_else(|_| "smallvec@1.16.6".into());
    let (name, version) = spec
        .split_once('@')
        .expect("ORCH_RF_ACCEPT_CRATE=name@version");
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let source = crate_source(name, version, tmp);
    let clippy_target = tmp.join("target-clippy");

    // Ours: one review-fix invocation on clippy's findings. With
    // `--relint` it re-runs clippy after each pass and fixes what the
    // previous fixes uncovered, as `cargo clippy --fix` re-lints and applies
    // again: a fix can make a new warning (an import left unused) or move
    // the text an overlapping suggestion replaces.
    let ours = tmp.join("ours");
    repository(&source, &ours, &clippy_target);
    let base = git(&ours, &["rev-parse", "HEAD"]).trim().to_owned();
    let stream = clippy_json(&ours, &clippy_target);
    let before = machine_applicable(&stream);
    let findings_file = tmp.join("clippy.json");
    std::fs::write(&findings_file, &stream).unwrap();
    let (passes, summary, wall, code) = review_fix(&ours, &findings_file, &tmp.join("target-main"));
    assert!(matches!(code, Some(0 | 1)), "review-fix exited {code:?}");
    assert_eq!(git(&ours, &["status", "--porcelain"]), "", "a clean tree");
    let rounds: Vec<Value> = passes
        .iter()
        .map(|p| {
            json!({
                "pass": p["pass"],
                "findings": p["counts"]["total"],
                "fixed": p["counts"]["fixed"],
                "failed": p["counts"]["failed"],
                "rejected": p["counts"]["rejected"],
                "commits": p["commits"].as_array().map_or(0, Vec::len),
                "test_runs": p["test_runs"],
                "wall_time_s": p["wall_time_s"].as_f64().map(|w| (w * 10.0).round() / 10.0),
                "not_fixed_with_a_suggestion": p["findings"].as_array().unwrap().iter()
                    .filter(|f| f["result"] != "fixed")
                    .filter_map(|f| f["error"].as_str())
                    .filter(|e| !e.contains("carries no machine-applicable suggestion"))
                    .map(|e| e.lines().next().unwrap_or("").to_owned())
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    let left_by_us = machine_applicable(&clippy_json(&ours, &clippy_target));

    // Every commit passes the crate's tests, each checked out on its own.
    let commits: Vec<String> = git(&ours, &["rev-list", "--reverse", &format!("{base}..HEAD")])
        .lines()
        .map(str::to_owned)
        .collect();
    let scratch = tmp.join("scratch");
    git(
        &ours,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            scratch.to_str().unwrap(),
            &base,
        ],
    );
    let scratch_target = tmp.join("target-scratch");
    let mut failing_commits = Vec::new();
    for c in &commits {
        git(&scratch, &["checkout", "-q", "--detach", c]);
        let status = cargo(&scratch, &scratch_target)
            .args(["test", "--quiet"])
            .output()
            .unwrap()
            .status;
        if !status.success() {
            failing_commits.push(c.clone());
        }
    }

    // `cargo clippy --fix` on a fresh copy.
    let theirs = tmp.join("theirs");
    repository(&source, &theirs, &tmp.join("target-theirs"));
    let fix_started = Instant::now();
    let fixed = cargo(&theirs, &tmp.join("target-theirs"))
        .args([
            "clippy",
            "--fix",
            "--allow-dirty",
            "--all-targets",
            "--quiet",
            "--",
            "-W",
            "clippy::pedantic",
        ])
        .output()
        .unwrap();
    let fix_wall = fix_started.elapsed().as_secs_f64();
    assert!(
        fixed.status.success(),
        "{}",
        String::from_utf8_lossy(&fixed.stderr)
    );
    let left_by_clippy_fix = machine_applicable(&clippy_json(&theirs, &clippy_target));
    let clippy_fix_tests_pass = cargo(&theirs, &tmp.join("target-theirs"))
        .args(["test", "--quiet"])
        .output()
        .unwrap()
        .status
        .success();
    let clippy_fix_files = git(&theirs, &["status", "--porcelain"]).lines().count();

    let figures = json!({
        "crate": spec,
        "findings": summary["counts"]["total"],
        "fixed": summary["counts"]["fixed"],
        "machine_applicable_findings": before.len(),
        "passes": rounds,
        "relint_stop": summary["relint_stop"],
        "test_runs": summary["test_runs"],
        "wall_time_s": (wall * 10.0).round() / 10.0,
        "exit_code": code,
        "commits": commits.len(),
        "commits_failing_tests": failing_commits.len(),
        "machine_applicable_left_by_us": left_by_us.len(),
        "machine_applicable_left_by_clippy_fix": left_by_clippy_fix.len(),
        "clippy_fix_wall_time_s": (fix_wall * 10.0).round() / 10.0,
        "clippy_fix_files_changed": clippy_fix_files,
        "clippy_fix_tests_pass": clippy_fix_tests_pass,
        "left_by_us": left_by_us.iter().map(|(l, f, line, col)| format!("{l} {f}:{line}:{col}")).collect::<Vec<_>>(),
        "left_by_clippy_fix": left_by_clippy_fix.iter().map(|(l, f, line, col)| format!("{l} {f}:{line}:{col}")).collect::<Vec<_>>(),
    });
    println!("acceptance: {figures}");

    let fixed = summary["counts"]["fixed"].as_u64().unwrap();
    assert_eq!(commits.len() as u64, fixed, "one commit per fix");
    assert!(
        failing_commits.is_empty(),
        "commits failing the tests: {failing_commits:?}"
    );
    assert!(
        left_by_us.len() <= left_by_clippy_fix.len(),
        "we left {} machine-applicable warnings, cargo clippy --fix left {}",
        left_by_us.len(),
        left_by_clippy_fix.len()
    );
}
