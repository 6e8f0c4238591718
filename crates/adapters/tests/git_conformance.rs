//! `GitVcs` passes the core `Vcs` conformance suite with real git.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_adapters::git::GitVcs;
use orchestrator_core::Vcs;
use orchestrator_core::conformance::vcs::{VcsHarness, run_suite};

/// Initialises real git repositories: `git init -b main`, a local identity,
/// the files committed.
struct GitHarness;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[async_trait]
impl VcsHarness for GitHarness {
    async fn init(&self, dir: &Path, files: &[(&str, &str)]) -> Arc<dyn Vcs> {
        git(dir, &["init", "-q", "-b", "main"]);
        git(dir, &["config", "user.name", "Conformance"]);
        git(
            dir,
            &["config", "user.email", "conformance@example.invalid"],
        );
        git(dir, &["config", "commit.gpgsign", "false"]);
        for (path, content) in files {
            let full = dir.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, content).unwrap();
        }
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "--allow-empty", "-m", "initial"]);
        Arc::new(GitVcs::open(dir).await.unwrap())
    }
}

#[tokio::test]
async fn git_vcs_passes_the_vcs_conformance_suite() {
    run_suite(&GitHarness).await;
}
