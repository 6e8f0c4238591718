//! `Vcs::head` of `GitVcs` reads HEAD from the repository's files when it
//! can: in every state a repository can be in, it agrees with `git
//! rev-parse HEAD`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::test_support;
use orchestrator_core::Vcs;
use tempfile::TempDir;

/// Real git in `dir`, its output without the line ending.
fn git(dir: &Path, args: &[&str]) -> String {
    test_support::git(dir, args).trim().to_owned()
}

/// A repository at `dir` with one commit, made with `init_args`.
fn repo(dir: &Path, init_args: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut args = vec!["init", "-q", "-b", "main"];
    args.extend_from_slice(init_args);
    git(dir, &args);
    git(dir, &["config", "user.name", "Test User"]);
    git(dir, &["config", "user.email", "test@example.invalid"]);
    git(dir, &["config", "commit.gpgsign", "false"]);
    commit(dir, "one");
}

fn commit(dir: &Path, text: &str) {
    std::fs::write(dir.join("f.txt"), text).unwrap();
    git(dir, &["add", "f.txt"]);
    git(dir, &["commit", "-q", "-m", text]);
}

/// The adapter's HEAD, and git's.
async fn both(dir: &Path) -> (String, String) {
    let vcs = GitVcs::open(dir).await.unwrap();
    let ours = vcs.head().await.unwrap().as_str().to_owned();
    (ours, git(dir, &["rev-parse", "HEAD"]))
}

/// The adapter's `rev-parse` runs so far (this binary's only counter
/// reader: one test function, so no other test runs git meanwhile).
fn rev_parse_runs() -> u64 {
    orchestrator_adapters::git::spent()
        .get("rev-parse")
        .map_or(0, |s| s.runs)
}

#[tokio::test]
async fn head_agrees_with_git_in_every_state_and_the_plain_case_needs_no_git() {
    loose_detached_packed_and_symbolic().await;
    linked_worktree_and_reftable().await;
    branch_with_no_commit().await;
}

async fn loose_detached_packed_and_symbolic() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("repo");
    repo(&dir, &[]);
    let vcs = GitVcs::open(&dir).await.unwrap();
    let before = rev_parse_runs();
    let ours = vcs.head().await.unwrap();
    assert_eq!(rev_parse_runs(), before, "read from the files");
    assert_eq!(
        ours.as_str(),
        git(&dir, &["rev-parse", "HEAD"]),
        "a loose branch"
    );

    commit(&dir, "two");
    let (ours, theirs) = both(&dir).await;
    assert_eq!(ours, theirs, "after a new commit");

    git(&dir, &["pack-refs", "--all"]);
    assert!(!dir.join(".git/refs/heads/main").exists());
    let before = rev_parse_runs();
    let (ours, theirs) = both(&dir).await;
    assert_eq!(ours, theirs, "a branch only in packed-refs");
    assert!(rev_parse_runs() > before + 1, "asked git");

    let first = git(&dir, &["rev-parse", "HEAD~1"]);
    git(&dir, &["checkout", "-q", "--detach", &first]);
    let (ours, theirs) = both(&dir).await;
    assert_eq!(
        (ours.as_str(), theirs.as_str()),
        (first.as_str(), first.as_str()),
        "detached"
    );

    git(&dir, &["checkout", "-q", "main"]);
    git(
        &dir,
        &["symbolic-ref", "refs/heads/alias", "refs/heads/main"],
    );
    git(&dir, &["symbolic-ref", "HEAD", "refs/heads/alias"]);
    let (ours, theirs) = both(&dir).await;
    assert_eq!(ours, theirs, "a symbolic branch");
}

async fn linked_worktree_and_reftable() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("repo");
    repo(&dir, &[]);
    let linked = tmp.path().join("linked");
    git(
        &dir,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            linked.to_str().unwrap(),
        ],
    );
    commit(&linked, "on side");
    let (ours, theirs) = both(&linked).await;
    assert_eq!(ours, theirs, "a linked worktree's own branch");
    assert_ne!(ours, git(&dir, &["rev-parse", "HEAD"]));

    let table = tmp.path().join("table");
    repo(&table, &["--ref-format=reftable"]);
    assert!(table.join(".git/reftable").is_dir());
    commit(&table, "two");
    let before = rev_parse_runs();
    let (ours, theirs) = both(&table).await;
    assert_eq!(ours, theirs, "the reftable format");
    assert!(rev_parse_runs() > before + 1, "asked git");
}

async fn branch_with_no_commit() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("repo");
    repo(&dir, &[]);
    git(&dir, &["checkout", "-q", "--orphan", "unborn"]);
    let vcs = GitVcs::open(&dir).await.unwrap();
    assert!(vcs.head().await.is_err());
}
