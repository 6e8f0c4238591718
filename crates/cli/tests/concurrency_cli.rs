//! Two `orchestrator` processes started at the same instant on the same
//! session (issue 9, item 6): two `review-fix` runs on one repository, two
//! `review-fix --resume` of one unfinished session, two `planex --continue`
//! of one stopped session, and two `ci-autofix --local` runs on one branch
//! (its state file left by an escalation, or none yet).
//!
//! Each round is a fresh temporary git repository; the two children are
//! spawned by two threads released by one barrier, then both are waited
//! for. What every round checks: exactly one run proceeds to its normal
//! end; the other is refused with exit 2 (the CLI's "bad input or usage"
//! code, which covers "another run holds this") and a message saying
//! another run is at work; no panic; afterwards every state file in the
//! engine folders parses, no run is left marked unfinished, each fix is
//! committed once and each task ran once.
//!
//! `ORCH_CONCURRENCY_ROUNDS=N` changes the number of rounds (default 10).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod flow_support;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use flow_support::{Sandbox, assert_no_panic, git, show, stderr, stdout};

fn rounds() -> usize {
    std::env::var("ORCH_CONCURRENCY_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
}

/// Spawns the binary twice at the same instant (two threads behind one
/// barrier), with `env` set, and waits for both.
fn race(sb: &Sandbox, args: &[OsString], env: &[(&str, &str)]) -> [Output; 2] {
    let barrier = Arc::new(Barrier::new(2));
    let spawn = || {
        let mut cmd = sb.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let barrier = Arc::clone(&barrier);
        std::thread::spawn(move || {
            barrier.wait();
            cmd.spawn().unwrap().wait_with_output().unwrap()
        })
    };
    let (a, b) = (spawn(), spawn());
    [a.join().unwrap(), b.join().unwrap()]
}

/// Which of the two proceeded (exit `proceeds`) and which was refused
/// (exit 2, stderr holding `refusal`); panics unless exactly one each.
/// Returns (winner, loser).
fn one_proceeds<'a>(
    case: &str,
    outputs: &'a [Output; 2],
    proceeds: i32,
    refusal: &str,
) -> (&'a Output, &'a Output) {
    for o in outputs {
        assert_no_panic(case, o);
    }
    let codes = outputs.each_ref().map(|o| o.status.code());
    let (winner, loser) = match codes {
        [Some(c), Some(2)] if c == proceeds => (&outputs[0], &outputs[1]),
        [Some(2), Some(c)] if c == proceeds => (&outputs[1], &outputs[0]),
        _ => panic!(
            "{case}: expected exits {{{proceeds}, 2}}, got {codes:?}\n=== first\n{}\n=== second\n{}",
            show(&outputs[0]),
            show(&outputs[1])
        ),
    };
    assert!(
        stderr(loser).contains(refusal),
        "{case}: the refused run does not say why: {}",
        show(loser)
    );
    (winner, loser)
}

/// Every state file under the engine folders parses: `.json` as JSON,
/// `.ndjson` line by line, `.csv` as a CSV table, `.md` as UTF-8 text.
/// Returns how many were checked.
fn assert_state_files_parse(repo: &Path) -> usize {
    let mut checked = 0;
    let mut stack: Vec<PathBuf> = flow_support::ENGINE_FOLDERS
        .iter()
        .map(|f| repo.join(f))
        .filter(|p| p.is_dir())
        .collect();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                // A worktree left behind would be a bug of its own; its
                // files are the repository's, not state.
                if path.file_name().is_some_and(|n| n != ".git") {
                    stack.push(path);
                }
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let name = path.display().to_string();
            match path.extension().and_then(|e| e.to_str()) {
                Some("json") => {
                    serde_json::from_slice::<serde_json::Value>(&bytes)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                }
                Some("ndjson") => {
                    for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
                        if !line.is_empty() {
                            serde_json::from_slice::<serde_json::Value>(line)
                                .unwrap_or_else(|e| panic!("{name} line {}: {e}", n + 1));
                        }
                    }
                }
                Some("csv") => {
                    orchestrator_core::state::read_csv(&path)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                }
                Some("md") => {
                    String::from_utf8(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
                }
                _ => continue,
            }
            checked += 1;
        }
    }
    checked
}

/// The session folders of review-fix.
fn fix_sessions(sb: &Sandbox) -> Vec<PathBuf> {
    match std::fs::read_dir(sb.repo.join(".review/fixes")) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Two findings, each fixed by the fix agent with one commit.
const FINDINGS: &str = r#"{"findings": [
  {"id": "F1", "title": "First", "severity": "high", "dimension": "correctness",
   "file": "src/lib.rs", "line": 2, "description": "d", "recommendation": "r"},
  {"id": "F2", "title": "Second", "severity": "high", "dimension": "correctness",
   "file": "src/lib.rs", "line": 5, "description": "d", "recommendation": "r"}
]}"#;

const FIXES: [&str; 2] = [
    "fix(correctness): First [F1]",
    "fix(correctness): Second [F2]",
];

const REVIEW_FIX_REFUSAL: &str = "another review-fix run is in progress on";

/// Checks a review-fix repository after a race: each fix committed once,
/// one session, finished, its files parsing, the tree clean.
fn check_review_fix_end(case: &str, sb: &Sandbox, winner: &Output) -> usize {
    let mut commits = sb.commits();
    commits.sort();
    assert_eq!(commits, FIXES, "{case}: each fix committed exactly once");
    assert!(
        stdout(winner).contains("every finding fixed"),
        "{case}: {}",
        show(winner)
    );
    let sessions = fix_sessions(sb);
    assert_eq!(sessions.len(), 1, "{case}: {sessions:?}");
    assert!(
        !sessions[0].join("active-fix-session.json").exists(),
        "{case}: the session is left unfinished"
    );
    assert!(sessions[0].join("fix-summary.md").is_file(), "{case}");
    assert!(
        sb.snapshot().status.is_empty(),
        "{case}: the tree is not clean"
    );
    assert_eq!(
        git(&sb.repo, &["worktree", "list"]).lines().count(),
        1,
        "{case}: a worktree was left"
    );
    assert_state_files_parse(&sb.repo)
}

fn review_fix_args(sb: &Sandbox, input: &Path) -> Vec<OsString> {
    sb.review_fix_args(input)
}

#[test]
fn two_fresh_review_fix_runs_on_one_repository() {
    let started = Instant::now();
    let mut refused_naming_the_pid = 0;
    for round in 1..=rounds() {
        let case = format!("review-fix fresh, round {round}");
        let sb = Sandbox::new();
        let input = sb.write_input("findings.json".as_ref(), FINDINGS.as_bytes());
        let outputs = race(
            &sb,
            &review_fix_args(&sb, &input),
            &[("FIX_AGENT_DELAY", "0.2")],
        );
        let (winner, loser) = one_proceeds(&case, &outputs, 0, REVIEW_FIX_REFUSAL);
        assert!(stdout(loser).is_empty(), "{case}: {}", show(loser));
        if stderr(loser).contains("pid ") {
            refused_naming_the_pid += 1;
        }
        check_review_fix_end(&case, &sb, winner);
    }
    eprintln!(
        "review-fix fresh: {} rounds, each 1 proceeded and 1 refused ({} named the holder's pid), {:.1}s",
        rounds(),
        refused_naming_the_pid,
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn two_review_fix_resumes_of_one_unfinished_session() {
    let started = Instant::now();
    for round in 1..=rounds() {
        let case = format!("review-fix --resume, round {round}");
        let sb = Sandbox::new();
        let input = sb.write_input("findings.json".as_ref(), FINDINGS.as_bytes());
        // Without -y and without a terminal the run stops at its plan.
        let mut first = review_fix_args(&sb, &input);
        first.retain(|a| a.as_os_str() != "-y");
        let o = sb.run(&first);
        assert_eq!(o.status.code(), Some(3), "{case}: {}", show(&o));
        let session = fix_sessions(&sb).pop().unwrap();
        assert!(session.join("active-fix-session.json").is_file());

        let resume: Vec<OsString> = vec![
            "review-fix".into(),
            "--resume".into(),
            "--agent".into(),
            sb.agent_spec().into(),
            "--test-cmd".into(),
            "true".into(),
            "-y".into(),
        ];
        let outputs = race(&sb, &resume, &[("FIX_AGENT_DELAY", "0.2")]);
        let (winner, _) = one_proceeds(&case, &outputs, 0, REVIEW_FIX_REFUSAL);
        check_review_fix_end(&case, &sb, winner);
        // One resume finished the session: the history holds run 2 (the
        // stopped first run records none) and nothing after it.
        let history: serde_json::Value =
            serde_json::from_slice(&std::fs::read(session.join("fix-history.json")).unwrap())
                .unwrap();
        let runs: Vec<(u64, bool, &str, usize)> = history["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["run"].as_u64().unwrap(),
                    e["resumed"].as_bool().unwrap(),
                    e["outcome"].as_str().unwrap(),
                    e["commits"].as_array().unwrap().len(),
                )
            })
            .collect();
        assert_eq!(runs, [(2, true, "all_fixed", 2)], "{case}: {history:#}");
    }
    eprintln!(
        "review-fix --resume: {} rounds, each 1 proceeded and 1 refused, {:.1}s",
        rounds(),
        started.elapsed().as_secs_f64()
    );
}

const TASKS_HEADER: &str = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave";

#[test]
fn two_planex_continues_of_one_stopped_session() {
    let started = Instant::now();
    for round in 1..=rounds() {
        let case = format!("planex --continue, round {round}");
        let sb = Sandbox::new();
        let csv = format!(
            "{TASKS_HEADER}\n\
             T1,First,Do first,,,,,sleep 0.2; echo one >> ran.txt,,,\n\
             T2,Second,Do second,,,,,echo two >> ran.txt,T1,,\n\
             T3,Third,Do third,,,,,echo three >> ran.txt,T2,,\n"
        );
        let tasks = sb.write_input("tasks.csv".as_ref(), csv.as_bytes());
        let o = sb.run(&[
            OsString::from("planex"),
            "run".into(),
            tasks.into_os_string(),
        ]);
        assert_eq!(o.status.code(), Some(3), "{case}: {}", show(&o));
        let sessions: Vec<PathBuf> = std::fs::read_dir(sb.repo.join(".workflow/.lite-plan"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(sessions.len(), 1);
        let id = sessions[0]
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();

        let args: Vec<OsString> =
            vec!["planex".into(), "--continue".into(), id.into(), "-y".into()];
        let outputs = race(&sb, &args, &[]);
        let (winner, loser) = one_proceeds(&case, &outputs, 0, "is locked by");
        assert!(
            stdout(winner).contains("- **Tasks**: 3/3 completed"),
            "{case}: {}",
            show(winner)
        );
        assert!(stdout(loser).is_empty(), "{case}: {}", show(loser));
        // Each task ran exactly once, in order.
        assert_eq!(
            std::fs::read_to_string(sb.repo.join("ran.txt")).unwrap(),
            "one\ntwo\nthree\n",
            "{case}"
        );
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(sessions[0].join("session.json")).unwrap())
                .unwrap();
        assert_eq!(meta["status"], "finished", "{case}: {meta:#}");
        let rows =
            orchestrator_planex::rows::read_tasks_csv(sessions[0].join("tasks.csv")).unwrap();
        assert!(
            rows.iter()
                .all(|r| r.status == orchestrator_planex::rows::RowStatus::Completed),
            "{case}: {rows:?}"
        );
        assert!(assert_state_files_parse(&sb.repo) >= 5, "{case}");
        // Each task landed as its commit: nothing is left uncommitted.
        assert!(sb.snapshot().status.is_empty(), "{case}");
    }
    eprintln!(
        "planex --continue: {} rounds, each 1 proceeded and 1 refused, {:.1}s",
        rounds(),
        started.elapsed().as_secs_f64()
    );
}

const CARGO_TOML: &str =
    "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n";

/// A formatting error (and nothing else).
const UNFORMATTED: &str = "pub fn add(a:i32,b:i32)->i32{a+b}\n";

#[test]
fn two_ci_autofix_runs_on_one_branch() {
    let started = Instant::now();
    let check = "sleep 0.3; cargo fmt --check";
    let mut with_state = 0;
    for round in 1..=rounds() {
        // Odd rounds: the state file of an escalated run is there (both
        // would resume it); even rounds: no state yet.
        let resume = round % 2 == 1;
        let case = format!(
            "ci-autofix --local ({}), round {round}",
            if resume {
                "state file left"
            } else {
                "no state yet"
            }
        );
        let mut sb = Sandbox::new();
        sb.commit_file(".gitignore", "/target\nCargo.lock\n");
        sb.commit_file("Cargo.toml", CARGO_TOML);
        sb.commit_file("src/lib.rs", UNFORMATTED);
        let state = sb.repo.join(".moai/state/ci-autofix-local-main.json");
        let args: Vec<OsString> = ["ci-autofix", "--local", "--check", check]
            .iter()
            .map(OsString::from)
            .collect();
        if resume {
            // Without -y and without a terminal the fix is not applied.
            let o = sb.run(&args);
            assert_eq!(o.status.code(), Some(3), "{case}: {}", show(&o));
            assert!(state.is_file(), "{case}");
            with_state += 1;
        }
        let mut yes = args.clone();
        yes.push("-y".into());
        let outputs = race(&sb, &yes, &[]);
        let (winner, loser) = one_proceeds(
            &case,
            &outputs,
            0,
            "another ci-autofix run is already working on branch main (local)",
        );
        assert!(
            stdout(winner).contains("green on branch main (local) — 1 fix commit"),
            "{case}: {}",
            show(winner)
        );
        assert!(stdout(loser).is_empty(), "{case}: {}", show(loser));
        assert_eq!(
            sb.commits(),
            ["fix(ci): auto-fix mechanical failure (iter 1)"],
            "{case}: one fix commit"
        );
        assert_eq!(
            std::fs::read_to_string(sb.repo.join("src/lib.rs")).unwrap(),
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
        );
        assert!(!state.exists(), "{case}: green removes the state file");
        assert!(assert_state_files_parse(&sb.repo) >= 1, "{case}");
        assert!(sb.snapshot().status.is_empty(), "{case}: tree not clean");
    }
    eprintln!(
        "ci-autofix --local: {} rounds ({with_state} with a state file), each 1 proceeded and 1 refused, {:.1}s",
        rounds(),
        started.elapsed().as_secs_f64()
    );
}

/// A run started while another is mid-fix is told the branch is busy. The
/// first run's agent works in a worktree of its own, so the user's tree
/// stays clean meanwhile (it used to hold the patch, uncommitted, and a
/// second run called it dirty: "commit or stash them" would have had the
/// user stash the first run's patch).
#[test]
fn a_ci_autofix_run_started_mid_fix_is_told_the_branch_is_busy() {
    let mut sb = Sandbox::new();
    sb.commit_file(".gitignore", "/target\nCargo.lock\n");
    sb.commit_file("Cargo.toml", CARGO_TOML);
    sb.commit_file("src/lib.rs", UNFORMATTED);
    let patched = sb.root.join("patched");
    let agent = format!(
        "command:sh -c 'cargo fmt && touch {} && sleep 1.5'",
        patched.display()
    );
    let mut first = sb
        .command(&[
            "ci-autofix",
            "--local",
            "--check",
            "cargo fmt --check",
            "--agent",
            &agent,
            "-y",
        ])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while !patched.exists() {
        assert!(Instant::now() < deadline, "the first run never patched");
        assert!(first.try_wait().unwrap().is_none(), "the first run ended");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        sb.snapshot().status.is_empty(),
        "mid-fix, the user's tree is untouched: {:?}",
        sb.snapshot().status
    );
    let second = sb.run(&[
        "ci-autofix",
        "--local",
        "--check",
        "cargo fmt --check",
        "-y",
    ]);
    assert_no_panic("second run", &second);
    assert_eq!(second.status.code(), Some(2), "{}", show(&second));
    let err = stderr(&second);
    assert!(
        err.contains("another ci-autofix run is already working on branch main (local)"),
        "{err}"
    );
    assert!(!err.contains("dirty"), "{err}");
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", show(&first));
    assert_eq!(
        sb.commits(),
        ["fix(ci): auto-fix mechanical failure (iter 1)"]
    );
    assert!(sb.snapshot().status.is_empty());
}
