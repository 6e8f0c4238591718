//! `orchestrator ci-autofix`, run as a user runs it: the real binary on temp
//! git repositories holding a tiny Rust crate, real `cargo fmt` / `cargo
//! clippy` / `cargo test` checks in local mode. (GitHub mode runs the real
//! gh: `ci_autofix_github.rs`.)
//!
//! Every test that runs cargo gives it its own `CARGO_TARGET_DIR` in the
//! test's temp dir (outside the repository).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ci-autofix/tests/data/corpus")
        .join(name)
}

/// One `orchestrator` invocation.
struct Run {
    cwd: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Option<String>,
}

impl Run {
    fn new(cwd: &Path, args: &[&str]) -> Self {
        Self {
            cwd: cwd.to_path_buf(),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            env: Vec::new(),
            stdin: None,
        }
    }

    fn env(mut self, k: &str, v: impl AsRef<Path>) -> Self {
        self.env
            .push((k.to_owned(), v.as_ref().to_string_lossy().into_owned()));
        self
    }

    fn stdin(mut self, text: &str) -> Self {
        self.stdin = Some(text.to_owned());
        self
    }

    fn output(self) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
        cmd.env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
            .args(&self.args)
            .current_dir(&self.cwd)
            .env_remove("RUST_LOG")
            .env_remove("ORCHESTRATOR_AGENT")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET_DIR")
            .env("CARGO_TERM_COLOR", "never")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("run orchestrator");
        if let Some(text) = &self.stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        child.wait_with_output().unwrap()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    )
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    stdout(&o)
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const CARGO_TOML: &str =
    "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n";

/// A formatting error (and nothing else).
const UNFORMATTED: &str = "pub fn add(a:i32,b:i32)->i32{a+b}\n";

/// A temp dir holding `repo/` (a git repository with a tiny crate on branch
/// `main`, committed) and room for a cargo target dir, fakes and a remote.
struct Fixture {
    tmp: tempfile::TempDir,
}

impl Fixture {
    fn new(lib_rs: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["config", "user.name", "Test"]);
        git(&repo, &["config", "user.email", "test@example.com"]);
        git(&repo, &["config", "commit.gpgsign", "false"]);
        write(&repo.join("Cargo.toml"), CARGO_TOML);
        write(&repo.join(".gitignore"), "/target\nCargo.lock\n");
        write(&repo.join("src/lib.rs"), lib_rs);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "init"]);
        Self { tmp }
    }

    fn repo(&self) -> PathBuf {
        self.tmp.path().join("repo")
    }

    fn target_dir(&self) -> PathBuf {
        self.tmp.path().join("target")
    }

    /// The engine's cache (where worktrees go), inside the test's temp dir.
    fn cache(&self) -> PathBuf {
        self.tmp.path().join("cache")
    }

    /// A run in the repository with this fixture's cargo target dir.
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output()
    }

    fn cmd(&self, args: &[&str]) -> Run {
        Run::new(&self.repo(), args).env("CARGO_TARGET_DIR", self.target_dir())
    }

    fn head(&self) -> String {
        git(&self.repo(), &["rev-parse", "HEAD"]).trim().to_owned()
    }

    fn subjects(&self) -> Vec<String> {
        git(&self.repo(), &["log", "--format=%s"])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn status(&self) -> String {
        git(
            &self.repo(),
            &["status", "--porcelain", "--untracked-files=all"],
        )
    }

    /// Every path ever committed on HEAD.
    fn committed_paths(&self) -> String {
        git(&self.repo(), &["log", "--name-only", "--format="])
    }

    fn audit_logs(&self) -> Vec<PathBuf> {
        let dir = self.repo().join(".moai/reports/ci-autofix");
        match std::fs::read_dir(dir) {
            Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn local_state_file(&self) -> PathBuf {
        self.repo().join(".moai/state/ci-autofix-local-main.json")
    }

    /// Replaces the temp paths, dates and commit ids in `text`.
    fn redact(&self, text: &str) -> String {
        let mut s = text.to_owned();
        for p in [self.repo().canonicalize().unwrap(), self.repo()] {
            s = s.replace(&p.display().to_string(), "[REPO]");
        }
        let date = regex_lite_date(&s);
        if let Some(d) = date {
            s = s.replace(&d, "[DATE]");
        }
        for line in git(&self.repo(), &["log", "--format=%h %H"]).lines() {
            for id in line.split(' ') {
                s = s.replace(id, "[SHA]");
            }
        }
        s
    }
}

/// The first `YYYY-MM-DD` in `text`.
fn regex_lite_date(text: &str) -> Option<String> {
    let b = text.as_bytes();
    (0..b.len().saturating_sub(9)).find_map(|i| {
        let w = &b[i..i + 10];
        let ok = w.iter().enumerate().all(|(j, c)| match j {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
        ok.then(|| String::from_utf8_lossy(w).into_owned())
    })
}

/// The JSON lines of a `--json` run.
fn events(o: &Output) -> Vec<serde_json::Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

// ---------------------------------------------------------------- classify

#[test]
fn classify_prints_the_seed_lines_for_corpus_logs() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (log, expected) in [
        (
            "rust-rustfmt-check.log",
            "classification=mechanical\nsub_class=trivial\n",
        ),
        (
            "rust-clippy-deny.log",
            "classification=mechanical\nsub_class=non-trivial\n",
        ),
        (
            "multi-rustfmt-and-test.log",
            "classification=semantic\nsub_class=none\n",
        ),
        (
            "py-pip-nonexistent.log",
            "classification=unknown\nsub_class=none\n",
        ),
    ] {
        let path = corpus(log);
        let o = Run::new(here, &["ci-autofix", "classify", path.to_str().unwrap()]).output();
        assert_eq!(o.status.code(), Some(0), "{log}: {}", show(&o));
        assert_eq!(stdout(&o), expected, "{log}");
    }
}

#[test]
fn classify_json_has_the_evidence_and_reads_stdin() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A format diff and a clippy error: the most severe class wins.
    let path = corpus("multi-rustfmt-and-clippy.log");
    let o = Run::new(
        here,
        &["ci-autofix", "classify", path.to_str().unwrap(), "--json"],
    )
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    insta::assert_json_snapshot!("classify_multi_rustfmt_and_clippy", v);

    // `-` and no argument both read standard input; gh prefixes are stripped.
    let log = std::fs::read_to_string(corpus("gh-rust-rustfmt-check.log")).unwrap();
    for args in [
        &["ci-autofix", "classify", "-", "--json"][..],
        &["ci-autofix", "classify", "--json"][..],
    ] {
        let o = Run::new(here, args).stdin(&log).output();
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["classification"], "mechanical");
        assert_eq!(v["sub_class"], "trivial");
        let first = &v["evidence"][0];
        assert_eq!(first["rule"], "rustfmt");
        assert_eq!(
            first["text"],
            "Diff in /home/runner/work/demo/rs/fmt/src/lib.rs:1:"
        );
    }

    // An empty log is readable: unknown, exit 0.
    let o = Run::new(here, &["ci-autofix", "classify"])
        .stdin("")
        .output();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "classification=unknown\nsub_class=none\n");

    // An unreadable input is exit 2.
    let o = Run::new(here, &["ci-autofix", "classify", "no/such/file.log"]).output();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no/such/file.log"), "{}", show(&o));
}

// -------------------------------------------------------------- local loop

/// The acceptance test: a real `cargo fmt --check` failure. Without `-y` and
/// without a terminal the confirmation cannot be asked: the run stops at its
/// gate (exit 3) with the verified patch kept as a commit on an engine
/// branch and the user's tree as it was; `ci-autofix decline` drops it and
/// escalates. With `-y` the builtin agent runs `cargo fmt`, the fix is
/// committed, the check re-runs green: exit 0.
#[test]
#[expect(clippy::too_many_lines, reason = "a test scenario reads top to bottom")]
fn local_format_failure_stops_at_its_gate_without_a_terminal_is_declined_then_fixed_with_yes() {
    let f = Fixture::new(UNFORMATTED);
    let before = f.head();
    let check = ["ci-autofix", "--local", "--check", "cargo fmt --check"];

    let o = f
        .cmd(&check)
        .env("ORCHESTRATOR_CACHE_DIR", f.cache())
        .output();
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(
        stderr(&o).contains("?? gate ci-autofix.apply-patch"),
        "{}",
        show(&o)
    );
    let kept = git(&f.repo(), &["rev-parse", "ci-autofix-gate-local-main"]);
    let shown = f
        .redact(&stdout(&o))
        .replace(&kept.trim()[..7], "[KEPT]")
        .replace(&f.repo().display().to_string(), "[REPO]");
    insta::assert_snapshot!("local_stopped_at_the_confirmation_gate", shown);
    assert_eq!(f.head(), before, "nothing committed");
    assert_eq!(f.status(), "", "the tree as it was, .moai/ invisible");
    assert_eq!(
        git(&f.repo(), &["show", "--format=%s", "--stat", kept.trim()])
            .lines()
            .next(),
        Some("fix(ci): auto-fix mechanical failure (iter 1)")
    );
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f.local_state_file()).unwrap()).unwrap();
    assert_eq!(state["iteration"], 1);
    assert_eq!(state["gate"]["commit"], kept.trim());
    assert_eq!(state["gate"]["classification"], "mechanical");
    assert!(state["history"].as_array().unwrap().is_empty());

    // Declined: the kept commit is dropped, the iteration escalates.
    let o = f.run(&["ci-autofix", "decline", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let answered: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(answered["event"], "declined");
    assert_eq!(answered["key"], "local-main");
    assert_eq!(
        git(&f.repo(), &["branch", "--list", "ci-autofix-gate-*"]),
        ""
    );
    assert_eq!(f.head(), before);
    assert_eq!(f.status(), "");
    assert_eq!(
        std::fs::read_to_string(f.repo().join("src/lib.rs")).unwrap(),
        UNFORMATTED
    );
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f.local_state_file()).unwrap()).unwrap();
    assert!(state["gate"].is_null());
    assert_eq!(state["history"][0]["action"], "escalated");
    let reason = state["history"][0]["escalation_reason"].as_str().unwrap();
    assert!(
        reason.starts_with("the patch was declined (orchestrator ci-autofix decline (pid "),
        "{reason}"
    );
    // Nothing waits any more: answering again is bad input.
    let o = f.run(&["ci-autofix", "approve"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("no ci-autofix run waits for confirmation"),
        "{}",
        show(&o)
    );

    let mut yes = check.to_vec();
    yes.push("-y");
    let o = f.run(&yes);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let last = stdout(&o).lines().last().unwrap().to_owned();
    assert!(
        last.starts_with("ci-autofix: green on branch main (local) — 1 fix commit ("),
        "{last}"
    );
    assert_eq!(
        f.subjects(),
        ["fix(ci): auto-fix mechanical failure (iter 1)", "init"]
    );
    assert_eq!(
        git(&f.repo(), &["show", "--name-only", "--format=", "HEAD"]),
        "src/lib.rs\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.repo().join("src/lib.rs")).unwrap(),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    );
    assert_eq!(f.status(), "", "working tree clean, .moai/ not shown");
    assert!(
        !f.committed_paths().contains(".moai"),
        "{}",
        f.committed_paths()
    );
    let exclude = std::fs::read_to_string(f.repo().join(".git/info/exclude")).unwrap();
    assert!(exclude.lines().any(|l| l == ".moai/"), "{exclude}");
    // Green removes the state file (the seed: "exit 0 → delete the state
    // file"); the audit log keeps both runs' iteration-1 sections.
    assert!(!f.local_state_file().exists());
    let logs = f.audit_logs();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let audit = std::fs::read_to_string(&logs[0]).unwrap();
    assert_eq!(audit.matches("## Iteration 1").count(), 3, "{audit}");
    assert!(
        audit.contains("- **action**: waiting for confirmation"),
        "{audit}"
    );
    assert!(audit.contains("- **action**: escalated"), "{audit}");
    assert!(audit.contains("- **action**: applied\n"), "{audit}");

    // A second run on the now green tree has nothing to do.
    let o = f.run(&yes);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stdout(&o).contains("no fix needed"), "{}", show(&o));
    assert_eq!(f.subjects().len(), 2);
}

/// `--confirm gate` stops at the gate even where a terminal could ask;
/// `approve` records who approved, `--continue` goes on with the run's own
/// flags (here `--local --check …`) and lands the kept commit exactly as a
/// run confirmed on the spot: the same content, the check green, the engine
/// branch gone, and the user's uncommitted file untouched throughout.
#[test]
fn a_gate_approved_from_the_command_line_lands_the_kept_commit_on_continue() {
    let f = Fixture::new(UNFORMATTED);
    write(&f.repo().join("notes.txt"), "mine, uncommitted\n");
    let o = f
        .cmd(&[
            "ci-autofix",
            "--local",
            "--check",
            "cargo fmt --check",
            "--allow-dirty",
            "--confirm",
            "gate",
        ])
        .env("ORCHESTRATOR_CACHE_DIR", f.cache())
        .output();
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    let kept = git(&f.repo(), &["rev-parse", "ci-autofix-gate-local-main"]);
    // `--continue` before an answer asks again; without a terminal it
    // stops at the same gate again, with no new patch.
    let o = f
        .cmd(&["ci-autofix", "--continue", "local-main"])
        .env("ORCHESTRATOR_CACHE_DIR", f.cache())
        .output();
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert_eq!(
        git(&f.repo(), &["rev-parse", "ci-autofix-gate-local-main"]),
        kept,
        "the same kept commit"
    );
    let o = f.run(&["ci-autofix", "approve", "ci-autofix-local-main"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        stdout(&o).starts_with("The patch of iteration 1 ("),
        "{}",
        show(&o)
    );
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f.local_state_file()).unwrap()).unwrap();
    assert_eq!(state["gate"]["answer"]["by"], "command");
    assert_eq!(state["gate"]["answer"]["decision"], "approve");

    let o = f
        .cmd(&["ci-autofix", "--continue", "local-main", "--json"])
        .env("ORCHESTRATOR_CACHE_DIR", f.cache())
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let last = events(&o).pop().unwrap();
    assert_eq!(last["outcome"], "green", "{last}");
    assert_eq!(
        f.subjects(),
        ["fix(ci): auto-fix mechanical failure (iter 1)", "init"]
    );
    assert_eq!(git(&f.repo(), &["diff", kept.trim(), "HEAD"]), "");
    assert_eq!(
        git(&f.repo(), &["branch", "--list", "ci-autofix-gate-*"]),
        ""
    );
    assert_eq!(
        std::fs::read_to_string(f.repo().join("notes.txt")).unwrap(),
        "mine, uncommitted\n"
    );
    assert_eq!(f.status(), "?? notes.txt\n");
    assert!(!f.local_state_file().exists(), "green removes the state");
    let audit = std::fs::read_to_string(&f.audit_logs()[0]).unwrap();
    assert!(
        audit.contains("- **action**: applied (approved by orchestrator ci-autofix approve (pid "),
        "{audit}"
    );
    // Nothing waits now: `--continue` is refused as bad input.
    let o = f.run(&["ci-autofix", "--continue", "local-main"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains("does not wait at a confirmation gate"),
        "{}",
        show(&o)
    );
}

/// Iteration 1: a clippy error (non-trivial, the most severe class, so it
/// asks) next to a format error; the linter fixer fixes the lint. Iteration
/// 2: only the format error is left (trivial) and is applied silently — no
/// gate question after the first commit.
#[test]
fn local_lint_is_confirmed_in_iteration_1_and_format_applied_silently_in_iteration_2() {
    let lib = "pub fn one() -> i32 {\n    return 1;\n}\n\npub fn add(a:i32,b:i32)->i32{a+b}\n";
    let f = Fixture::new(lib);
    let o = f.run(&[
        "ci-autofix",
        "--local",
        "--check",
        "cargo clippy --quiet -- -D warnings",
        "--check",
        "cargo fmt --check",
        "-y",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let ev = events(&o);
    let kinds: Vec<String> = ev
        .iter()
        .map(|e| {
            let kind = e["event"].as_str().unwrap();
            match kind {
                "commit_made" => format!("commit {}", e["id"].as_str().unwrap()),
                "gate_asked" => format!("gate_asked {}", e["question"].as_str().unwrap()),
                "agent_call" => format!("agent_call {}", e["id"].as_str().unwrap()),
                other => other.to_owned(),
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "session_opened",
            "phase_started",
            "warning",
            "agent_call iter-1",
            "gate_asked ci-autofix.apply-patch",
            "gate_answered",
            "commit iter-1",
            "agent_call iter-2",
            "commit iter-2",
            "phase_finished",
            "outcome",
        ],
        "iteration 2 asks nothing (and does not repeat the warning)"
    );
    // The fixture's branch has no upstream and no --base was given: the
    // agent goes without the working change, and the user is told why.
    assert!(
        ev[2]["message"].as_str().unwrap().ends_with(
            "the branch has no upstream (no upstream configured for the branch); pass --base <REF>"
        ),
        "{}",
        ev[2]
    );
    assert!(
        ev[4]["prompt"]
            .as_str()
            .unwrap()
            .starts_with("Iteration 1: apply the mechanical/non-trivial fix"),
        "{}",
        ev[4]
    );
    let outcome = ev.last().unwrap();
    assert_eq!(outcome["outcome"], "green");
    assert_eq!(outcome["exit_code"], 0);
    assert_eq!(outcome["commits"].as_array().unwrap().len(), 2);

    assert_eq!(
        std::fs::read_to_string(f.repo().join("src/lib.rs")).unwrap(),
        "pub fn one() -> i32 {\n    1\n}\n\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    );
    assert_eq!(f.status(), "");
    assert_eq!(
        f.subjects(),
        [
            "fix(ci): auto-fix mechanical failure (iter 2)",
            "fix(ci): auto-fix mechanical failure (iter 1)",
            "init"
        ]
    );
    let logs = f.audit_logs();
    assert_eq!(logs.len(), 1);
    let audit = f.redact(&std::fs::read_to_string(&logs[0]).unwrap());
    insta::assert_snapshot!("audit_log_lint_then_silent_format", audit);
}

/// A failing `cargo test` assertion is semantic: escalated at once, no
/// patch, no commit, even with `-y`.
#[test]
fn local_semantic_failure_escalates_without_a_commit() {
    let lib = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(2, 2), 4);\n    }\n}\n";
    let f = Fixture::new(lib);
    let before = f.head();
    let o = f.run(&[
        "ci-autofix",
        "--local",
        "--check",
        "cargo test --quiet",
        "-y",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    let out = stdout(&o);
    assert!(out.contains("- **classification**: semantic"), "{out}");
    assert!(out.contains("No automatic diagnosis"), "{out}");
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("ci-autofix: escalated on branch main (local) — "),
        "{last}"
    );
    assert!(
        out.contains("chosen: Fix it by hand (recommended)"),
        "{out}"
    );
    assert!(!stderr(&o).contains("apply-patch"), "no patch was proposed");
    assert_eq!(f.head(), before);
    assert_eq!(f.status(), "");
    assert_eq!(
        std::fs::read_to_string(f.repo().join("src/lib.rs")).unwrap(),
        lib
    );
    assert!(f.local_state_file().is_file());
    let audit = std::fs::read_to_string(&f.audit_logs()[0]).unwrap();
    assert!(audit.contains("- **classification**: semantic"), "{audit}");
    assert!(audit.contains("- **action**: escalated"), "{audit}");
}

#[test]
fn a_dirty_tree_is_refused_unless_allowed_and_then_left_byte_identical() {
    let f = Fixture::new(UNFORMATTED);
    let readme = f.repo().join("README.md");
    write(&readme, "# tiny\n");
    git(&f.repo(), &["add", "README.md"]);
    git(&f.repo(), &["commit", "-q", "-m", "readme"]);
    let dirty = "# tiny\n\nwork in progress   \n\twith odd  whitespace\n";
    write(&readme, dirty);
    let untracked = f.repo().join("notes.txt");
    write(&untracked, "my notes\n");
    let head = f.head();

    let args = [
        "ci-autofix",
        "--local",
        "--check",
        "cargo fmt --check",
        "-y",
    ];
    let o = f.run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains("working tree is dirty") && err.contains("README.md"),
        "{err}"
    );
    assert!(err.contains("--allow-dirty"), "{err}");
    assert_eq!(f.head(), head);

    let mut allowed = args.to_vec();
    allowed.push("--allow-dirty");
    let o = f.run(&allowed);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(std::fs::read(&readme).unwrap(), dirty.as_bytes());
    assert_eq!(std::fs::read(&untracked).unwrap(), b"my notes\n");
    assert_eq!(
        git(&f.repo(), &["show", "--name-only", "--format=", "HEAD"]),
        "src/lib.rs\n",
        "only the fix is committed"
    );
    assert_eq!(f.status(), " M README.md\n?? notes.txt\n");
}

/// `src/lib.rs` declares `mod other;`, so `cargo fmt` formats both files.
const LIB_WITH_OTHER: &str = "pub mod other;\n\npub fn add(a:i32,b:i32)->i32{a+b}\n";
const LIB_WITH_OTHER_FIXED: &str =
    "pub mod other;\n\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";
/// The user's uncommitted `src/other.rs`: work in progress, badly formatted.
const OTHER_DIRTY: &str = "pub fn two()->i32{2}\npub fn three()->i32{3}\n";

/// A fixture whose `src/other.rs` is committed as `other_at_head` and then
/// edited by the user (left uncommitted); runs `--allow-dirty -y` with its
/// own `TMPDIR`, and checks what must hold whatever the outcome: the dirty
/// file is byte-identical and still dirty, and no temporary worktree,
/// branch or directory is left behind. Returns the fixture, the run and the
/// HEAD before it.
fn run_with_dirty_other(other_at_head: &str) -> (Fixture, Output, String) {
    let f = Fixture::new(LIB_WITH_OTHER);
    write(&f.repo().join("src/other.rs"), other_at_head);
    git(&f.repo(), &["add", "src/other.rs"]);
    git(&f.repo(), &["commit", "-q", "-m", "other"]);
    let other = f.repo().join("src/other.rs");
    write(&other, OTHER_DIRTY);
    let head = f.head();
    let tmpdir = f.tmp.path().join("tmpdir");
    std::fs::create_dir(&tmpdir).unwrap();
    let o = f
        .cmd(&[
            "ci-autofix",
            "--local",
            "--check",
            "cargo fmt --check",
            "--allow-dirty",
            "-y",
        ])
        .env("TMPDIR", &tmpdir)
        .output();
    assert_eq!(
        std::fs::read(&other).unwrap(),
        OTHER_DIRTY.as_bytes(),
        "{}",
        show(&o)
    );
    assert_eq!(f.status(), " M src/other.rs\n", "{}", show(&o));
    assert_eq!(
        git(&f.repo(), &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "the temporary worktree is removed"
    );
    assert_eq!(
        git(&f.repo(), &["branch", "--format=%(refname:short)"]),
        "main\n",
        "the temporary branch is deleted"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&tmpdir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("ci-autofix-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    (f, o, head)
}

/// `cargo fmt --check` fails on `src/lib.rs` (committed) and on the user's
/// uncommitted `src/other.rs`, whose HEAD version is formatted. The fix runs
/// in a worktree at HEAD, where only `src/lib.rs` needs formatting: that fix
/// is committed (iteration 1, confirmed by `-y`). The check still fails —
/// on `src/other.rs`, which the engine never touches — and in iteration 2
/// the formatter has nothing left to change at HEAD, so the run escalates
/// (exit 3) and says the failure may come from the uncommitted changes.
/// This is the honest outcome: the engine cannot make the check green
/// without rewriting the user's work, and it does not.
#[test]
fn allow_dirty_commits_the_clean_fix_then_escalates_on_the_users_own_unformatted_file() {
    let (f, o, head) = run_with_dirty_other("pub fn two() -> i32 {\n    2\n}\n");
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert_eq!(
        f.subjects(),
        [
            "fix(ci): auto-fix mechanical failure (iter 1)",
            "other",
            "init"
        ]
    );
    assert_eq!(
        git(&f.repo(), &["diff", "--name-only", &head, "HEAD"]),
        "src/lib.rs\n",
        "only the clean file is committed"
    );
    assert_eq!(
        std::fs::read_to_string(f.repo().join("src/lib.rs")).unwrap(),
        LIB_WITH_OTHER_FIXED
    );
    let out = stdout(&o);
    assert!(
        out.contains("without your uncommitted changes (src/other.rs)"),
        "{}",
        show(&o)
    );
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("ci-autofix: escalated on branch main (local)"),
        "{last}"
    );
}

/// The same, but `src/other.rs` is badly formatted at HEAD too: the
/// formatter in the worktree rewrites it as well, so the patch touches a
/// file the user has uncommitted changes in. The run escalates in iteration
/// 1 naming that file, before any commit: `src/lib.rs` is not fixed either
/// (a patch is landed whole or not at all).
#[test]
fn allow_dirty_escalates_before_committing_when_the_fix_would_rewrite_a_dirty_file() {
    let (f, o, head) = run_with_dirty_other("pub fn two()->i32{2}\n");
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert_eq!(f.head(), head, "nothing committed");
    assert_eq!(
        std::fs::read_to_string(f.repo().join("src/lib.rs")).unwrap(),
        LIB_WITH_OTHER
    );
    let out = stdout(&o);
    assert!(
        out.contains(
            "the patch changes src/other.rs, which has uncommitted changes in your working tree"
        ),
        "{}",
        show(&o)
    );
    assert!(!stderr(&o).contains("apply-patch"), "no patch was offered");
}

#[test]
fn bad_usage_of_the_fix_loop_is_exit_2_and_changes_nothing() {
    let f = Fixture::new(UNFORMATTED);
    let head = f.head();
    for bad in [
        &["ci-autofix"][..],
        &["ci-autofix", "--pr", "7", "--check", "cargo fmt --check"][..],
        &["ci-autofix", "--local"][..],
        &["ci-autofix", "--local", "--check", ""][..],
        &[
            "ci-autofix",
            "--local",
            "--check",
            "true",
            "--max-iterations",
            "0",
        ][..],
        &[
            "ci-autofix",
            "--local",
            "--check",
            "true",
            "--agent",
            "nonsense",
        ][..],
        &["ci-autofix", "--pr", "7", "--local", "--check", "true"][..],
    ] {
        let o = f.run(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", show(&o));
        assert!(stderr(&o).contains("error"), "{bad:?}: {}", show(&o));
    }
    let o = f.run(&[
        "ci-autofix",
        "--local",
        "--check",
        "true",
        "--item-max-agent-calls",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains(
            "error: --item-max-agent-calls: a ci-autofix iteration is one agent call; \
             limit its dollars or tokens (--item-max-cost-usd, --item-max-tokens)"
        ),
        "{}",
        show(&o)
    );
    // Not the top of a git work tree.
    let o = Run::new(
        f.tmp.path(),
        &["ci-autofix", "--local", "--check", "true", "-y"],
    )
    .output();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert_eq!(f.head(), head);
    assert_eq!(f.status(), "");
    assert!(!f.repo().join(".moai/state").exists());
}

/// Ctrl-C (SIGINT) while a check runs: the check's process group is killed,
/// the run stops resumably (exit 3) and keeps its state file.
#[test]
fn interrupting_a_run_stops_it_resumably() {
    let f = Fixture::new(UNFORMATTED);
    let marker = f.tmp.path().join("check-started");
    let survived = f.tmp.path().join("check-survived");
    let check = format!(
        "touch '{}'; sleep 3; touch '{}'",
        marker.display(),
        survived.display()
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
    cmd.env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
        .args(["ci-autofix", "--local", "--check", &check, "-y"])
        .current_dir(f.repo())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let started = std::time::Instant::now();
    while !marker.exists() {
        assert!(started.elapsed().as_secs() < 20, "the check never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed_at = std::time::Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    assert!(
        killed_at.elapsed() < std::time::Duration::from_millis(2500),
        "the run did not stop at once"
    );
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(
        stdout(&o).starts_with("ci-autofix: interrupted on branch main (local); state kept in "),
        "{}",
        show(&o)
    );
    assert!(f.local_state_file().is_file());
    assert_eq!(f.status(), "");
    // The check's whole process group was killed: its shell never goes on.
    let wait_until = killed_at + std::time::Duration::from_millis(3500);
    std::thread::sleep(wait_until.saturating_duration_since(std::time::Instant::now()));
    assert!(!survived.exists(), "the check outlived the interrupted run");
}

// The GitHub loop and `watch` run the real gh against a scripted GitHub
// API: tests/ci_autofix_github.rs.

// ------------------------------------------------------------ invariants

/// git is started in exactly one place, the guarded runner of the git
/// adapter (`crates/adapters/src/git/run.rs`, whose argument guard refuses
/// every force, amend and subcommand outside its allowlist): no other
/// source file of the workspace names `git` as a program — not the CLI,
/// not ci-autofix's providers (whose git calls go through the `Vcs`) —
/// and no source file outside the guard spells a force or amend option.
#[test]
fn git_is_spawned_only_by_the_guarded_runner_and_nothing_forces() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let spawns_git = [
        "Command::new(\"git\")",
        "CommandSpec::new(\"git\"",
        "CommandSpec::new(\n            \"git\"",
        "program: \"git\"",
    ];
    let mut stack = vec![crates];
    let mut scanned = 0;
    let mut runner_seen = false;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let shown = path.display().to_string();
            if path.is_dir() {
                // Tests and test support drive git to build fixtures.
                let name = path.file_name().unwrap().to_string_lossy();
                if !["tests", "target", "test_support", "benches", "fakes"].contains(&name.as_ref())
                {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || !shown.contains("/src/") {
                continue;
            }
            let full = std::fs::read_to_string(&path).unwrap();
            // The lines before a file's unit tests.
            let text = full.split("#[cfg(test)]").next().unwrap_or_default();
            scanned += 1;
            if shown.ends_with("adapters/src/git/run.rs") {
                runner_seen = text.contains("Command::new(&self.program)")
                    && text.contains("guard::check_args");
                continue;
            }
            for needle in spawns_git {
                assert!(
                    !text.contains(needle),
                    "{shown} starts git itself ({needle})"
                );
            }
            if shown.ends_with("adapters/src/git/guard.rs") {
                continue;
            }
            for needle in [
                "\"--force",
                "\"--force-with-lease",
                "\"-f\"",
                "\"--amend",
                "push -f",
                "reset --hard",
            ] {
                assert!(!text.contains(needle), "{shown} contains {needle}");
            }
        }
    }
    assert!(
        runner_seen,
        "the guarded runner (adapters/src/git/run.rs) was not found as expected"
    );
    assert!(scanned >= 100, "scanned only {scanned} files");
}
