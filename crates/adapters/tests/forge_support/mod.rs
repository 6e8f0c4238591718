//! Helpers shared by the forge tests (`github_forge.rs`,
//! `gitlab_forge.rs`): real git with a fixed author, and the repository
//! the forge conformance suite's far side is pushed from.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use orchestrator_core::conformance::forge::{BASE_BRANCH, FILE, HEAD_BRANCH};

/// Runs `git` in `dir` as author and committer `t`; its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The suite's branches in a new repository `root/work`: the suite's
/// `FILE` on `BASE_BRANCH`, a line added to it on `HEAD_BRANCH` (checked
/// out). The repository and the head branch's commit.
pub fn suite_branches(root: &Path) -> (PathBuf, String) {
    let work = root.join("work");
    std::fs::create_dir_all(work.join("src")).unwrap();
    git(&work, &["init", "-q", "-b", BASE_BRANCH]);
    std::fs::write(work.join(FILE), "pub fn add() {}\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-qm", "base"]);
    git(&work, &["checkout", "-qb", HEAD_BRANCH]);
    std::fs::write(work.join(FILE), "pub fn add() {}\nconst N: u32 = 2;\n").unwrap();
    git(&work, &["commit", "-qam", "feature"]);
    let head = git(&work, &["rev-parse", "HEAD"]);
    (work, head)
}
