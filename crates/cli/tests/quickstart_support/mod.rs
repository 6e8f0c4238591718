//! The quickstart fixture shared by `review_fix_cli.rs`, `findings_cli.rs`,
//! `dashboard.rs` and `ray_flows.rs`: a git copy of `examples/quickstart/`
//! with its clippy JSON beside the repository, committed now or on a fixed
//! date (so that two copies have the same base commit); and the one-commit
//! set-up any test repository gets.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use orchestrator_adapters::test_support::git;

/// The quickstart crate's files a copy holds (its clippy JSON stays
/// outside the repository).
const FILES: [&str; 6] = [
    "Cargo.toml",
    "Cargo.lock",
    ".gitignore",
    "README.md",
    "src/lib.rs",
    "src/ring.rs",
];

/// The date of a fixed-date commit.
const FIXED_DATE: &str = "2026-01-01T00:00:00Z";

/// When a set-up's one commit is dated.
#[derive(Clone, Copy, Debug)]
pub enum Dated {
    /// Now, as git dates it.
    Now,
    /// On [`FIXED_DATE`], author and committer: two repositories with the
    /// same files get the same commit.
    Fixed,
}

/// `examples/quickstart` in this workspace.
pub fn quickstart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart")
}

/// A git copy of the quickstart crate at `dir/repo`, its clippy JSON at
/// `dir/clippy.json`; returns the repository.
pub fn quickstart_repo(dir: &Path, dated: Dated) -> PathBuf {
    let repo = dir.join("repo");
    for rel in FILES {
        let to = repo.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(quickstart().join(rel), &to).unwrap();
    }
    std::fs::copy(quickstart().join("clippy.json"), dir.join("clippy.json")).unwrap();
    init_and_commit(&repo, "quickstart", dated);
    repo
}

/// Makes `repo` (holding its files already) a git repository on `main`
/// with a test identity, and commits everything in it as `message`.
pub fn init_and_commit(repo: &Path, message: &str, dated: Dated) {
    git(repo, &["init", "-q", "-b", "main"]);
    git(repo, &["config", "user.email", "test@example.invalid"]);
    git(repo, &["config", "user.name", "Test"]);
    git(repo, &["add", "-A"]);
    let mut commit = Command::new("git");
    commit
        .args(["commit", "-q", "-m", message])
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1");
    if let Dated::Fixed = dated {
        commit
            .env("GIT_AUTHOR_DATE", FIXED_DATE)
            .env("GIT_COMMITTER_DATE", FIXED_DATE);
    }
    let out = commit.output().unwrap();
    assert!(
        out.status.success(),
        "git commit in {}: {}",
        repo.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
