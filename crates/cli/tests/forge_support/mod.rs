//! Helpers shared by the scripted-forge tests (`review_fix_github.rs`,
//! `review_fix_gitlab.rs`, `ci_autofix_github.rs`, `ci_autofix_gitlab.rs`):
//! git in a user's clone, the real `orchestrator` run in it with a clean
//! environment, the gh under test first on `PATH`; and the pull/merge
//! request the review-fix tests share (three threads on `notes.txt`, the
//! scripted agent, what a run must leave alone).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use orchestrator_adapters::test_support::github::GhBinary;

/// Runs `git` in `dir` and returns its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// Bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A run's exit code, stdout and stderr, for an assertion's message.
pub fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// The runtime a scripted server runs on while the binary talks to it.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// Writes each `(path, content)` under `dir`, making folders as needed.
fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let to = dir.join(path);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, content).unwrap();
    }
}

/// A user's clone at `clone` (made here) on `main`, whose one commit
/// `init` holds `files`; a name and email set, no signing.
pub fn init_clone(clone: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(clone).unwrap();
    git(clone, &["init", "-q", "-b", "main"]);
    git(clone, &["config", "user.name", "Test"]);
    git(clone, &["config", "user.email", "test@example.com"]);
    git(clone, &["config", "commit.gpgsign", "false"]);
    write_files(clone, files);
    git(clone, &["add", "-A"]);
    git(clone, &["commit", "-qm", "init"]);
}

/// Checks out a new branch `feature` in `clone` and commits `files`
/// (already tracked) on it as `message`.
pub fn commit_feature(clone: &Path, files: &[(&str, &str)], message: &str) {
    git(clone, &["checkout", "-qb", "feature"]);
    write_files(clone, files);
    git(clone, &["commit", "-qam", message]);
}

/// The real `orchestrator` in `dir` with a clean environment: no user
/// config, its cache under `tmp`, no `RUST_LOG` or `ORCHESTRATOR_AGENT`,
/// stdin closed.
pub fn orchestrator(dir: &Path, tmp: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
    cmd.current_dir(dir)
        .env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
        .env("ORCHESTRATOR_CACHE_DIR", tmp.join("cache"))
        .env_remove("RUST_LOG")
        .env_remove("ORCHESTRATOR_AGENT")
        .stdin(Stdio::null());
    cmd
}

/// A `PATH` whose first folder, `bin_dir`, holds `gh`: a link to the gh
/// under test (Debian's, found on `PATH` when it is named by its bare
/// name, or the pinned one at its own path).
pub fn path_with_gh(bin: &GhBinary, bin_dir: &Path) -> String {
    std::fs::create_dir_all(bin_dir).unwrap();
    let link = bin_dir.join("gh");
    if !link.exists() {
        let target = if bin.path.components().count() > 1 {
            bin.path.clone()
        } else {
            let found = Command::new("sh")
                .args(["-c", "command -v gh"])
                .output()
                .unwrap();
            PathBuf::from(text(&found.stdout).trim())
        };
        std::os::unix::fs::symlink(target, &link).unwrap();
    }
    format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The review-fix request's target branch: `notes.txt` on `main`.
pub const BASE: &str = "alpha\n";
/// `notes.txt` on the request's branch: three lines added, one thread on
/// each (lines 2, 3 and 4).
pub const FEATURE: &str = "alpha\nbetta\nTODO gamma\ndelta\n";
/// The tests: fail once `notes.txt` says BROKEN.
pub const CHECK: &str =
    "if grep -q BROKEN notes.txt; then echo 'notes_are_clean FAILED'; exit 1; fi\n";

/// The "LLM": every call is logged beside the script; a fix prompt naming
/// the TODO marker drops it, one asking for a louder delta breaks the
/// tests; any other prompt (planning) gets prose.
pub const AGENT: &str = r##"#!/bin/sh
prompt=$(cat)
echo call >> "$(dirname "$0")/agent-calls"
case "$prompt" in
  "# Milestone "*"drop the TODO marker"*) sed -i 's/^TODO gamma$/gamma/' notes.txt; echo done;;
  "# Milestone "*"louder"*) sed -i 's/^delta$/DELTA BROKEN/' notes.txt; echo done;;
  *) echo "No plan from me: use your own.";;
esac
"##;

/// Writes [`AGENT`] to `tmp/agent.sh`, executable.
pub fn write_agent(tmp: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let agent = tmp.join("agent.sh");
    std::fs::write(&agent, AGENT).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `review-fix <request> <number> -y` with the scripted agent of `tmp`,
/// the check as tests, one iteration, each fix verified alone; `extra`
/// after.
pub fn review_fix_args(tmp: &Path, request: &str, number: &str, extra: &[&str]) -> Vec<String> {
    let agent = format!("command:sh {}", tmp.join("agent.sh").display());
    let mut args: Vec<String> = [
        "review-fix",
        request,
        number,
        "-y",
        "--agent",
        &agent,
        "--test-cmd",
        "sh check.sh",
        "--max-iterations",
        "1",
        "--verify",
        "each",
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

/// The clone is as the user left it: HEAD at `head`, nothing dirty,
/// `notes.txt` as on the request's branch.
pub fn assert_user_tree_untouched(clone: &Path, head: &str) {
    assert_eq!(git(clone, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(clone, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(clone.join("notes.txt")).unwrap(),
        FEATURE
    );
}

/// `log` (`%H %s` of the pushed commits, newest first) holds the prose
/// fix, then the suggestion, each naming its thread; each of the two
/// threads has one reply naming its own commit, and the third one reply
/// saying why it was not fixed. `context` starts each failure's message.
pub fn assert_two_fixed_one_failed(
    log: &str,
    threads: &[String; 3],
    replies: impl Fn(&str) -> Vec<String>,
    context: &str,
) {
    let commits: Vec<(&str, &str)> = log.lines().map(|l| l.split_once(' ').unwrap()).collect();
    assert_eq!(commits.len(), 2, "{context}{log}");
    let short = |sha: &str| sha[..7].to_owned();
    assert!(commits[1].1.contains(&threads[0]), "{context}{log}");
    assert!(commits[0].1.contains(&threads[1]), "{context}{log}");
    assert_eq!(
        replies(&threads[0]),
        [format!("Fixed in {}.", short(commits[1].0))]
    );
    assert_eq!(
        replies(&threads[1]),
        [format!("Fixed in {}.", short(commits[0].0))]
    );
    let failed = replies(&threads[2]);
    assert_eq!(failed.len(), 1, "{context}{failed:?}");
    assert!(
        failed[0].starts_with("Not fixed by orchestrator review-fix: ")
            && failed[0].contains("notes_are_clean"),
        "{context}{failed:?}"
    );
}
