//! The cache upkeep on the real binary: a real `orchestrator review-fix`
//! run on a git repository claims its cache folders and prunes the others
//! (a removed repository's, then the least recently used over the cap);
//! `orchestrator cache list|clean` show and remove them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod flow_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use flow_support::git;
use orchestrator_core::state::cache::{
    CacheKind, CacheLease, MARKER_FILE, read_marker, repo_folder,
};

const LINTER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../review-fix/tests/data/paren_lint.sh"
);

fn orchestrator(cache: &Path, cwd: &Path, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
    cmd.env("XDG_CONFIG_HOME", "/nonexistent/orchestrator-tests")
        .env("ORCHESTRATOR_CACHE_DIR", cache)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("ORCHESTRATOR_AGENT")
        .env_remove("ORCHESTRATOR_CACHE_MAX_SIZE")
        .env_remove("RUST_LOG")
        .args(args)
        .current_dir(cwd);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn repo(parent: &Path, name: &str) -> PathBuf {
    let repo = parent.join(name);
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("a.txt"), "((x))\n").unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "test@example.invalid"]);
    git(&repo, &["config", "user.name", "Test"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "start"]);
    repo.canonicalize().unwrap()
}

/// Claims `repo`'s folders as an earlier run did, `hours_ago`, leaving
/// `bytes` in its build cache.
fn earlier_run(cache: &Path, repo: &Path, hours_ago: i64, bytes: usize) {
    let lease = CacheLease::claim_in(cache, repo).unwrap();
    let targets = repo_folder(cache, CacheKind::Targets, repo);
    std::fs::create_dir_all(targets.join("review-fix-slot-0")).unwrap();
    std::fs::write(targets.join("review-fix-slot-0/lib.rlib"), vec![7u8; bytes]).unwrap();
    std::fs::create_dir_all(repo_folder(cache, CacheKind::Worktrees, repo).join("fix-1")).unwrap();
    drop(lease);
    for kind in CacheKind::ALL {
        let dir = repo_folder(cache, kind, repo);
        let mut marker = read_marker(&dir).unwrap();
        marker.last_used =
            (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(hours_ago)).to_string();
        std::fs::write(dir.join(MARKER_FILE), serde_json::to_vec(&marker).unwrap()).unwrap();
    }
}

/// `cache list` with the size and time columns (which depend on the file
/// system and the clock) and the temporary folder replaced.
fn redact(text: &str, tmp: &Path) -> String {
    text.replace(tmp.to_str().unwrap(), "<tmp>")
        .lines()
        .map(|line| {
            let cols: Vec<&str> = line.split("  ").filter(|c| !c.trim().is_empty()).collect();
            if line.starts_with("targets ") || line.starts_with("worktrees ") {
                format!(
                    "{} <size> <time> {}",
                    cols[0].trim(),
                    cols[3..].join("  ").trim()
                )
            } else if line.starts_with("cache ") {
                line.split(':').next().unwrap().to_owned()
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_run_prunes_the_cache_and_cache_list_and_clean_show_and_remove_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = tmp.path().canonicalize().unwrap();
    let cache = tmp_path.join("cache");
    let current = repo(&tmp_path, "current");
    let other = repo(&tmp_path, "other");
    let removed = repo(&tmp_path, "removed");
    // The current repository's build cache is the oldest and over the cap
    // on its own: it stays all the same.
    earlier_run(&cache, &current, 10, 2 << 20);
    earlier_run(&cache, &other, 5, 2 << 20);
    earlier_run(&cache, &removed, 1, 64 << 10);
    std::fs::remove_dir_all(&removed).unwrap();

    let findings = tmp_path.join("findings.rdjsonl");
    let lint = Command::new("sh")
        .arg(LINTER)
        .current_dir(&current)
        .output()
        .unwrap();
    std::fs::write(&findings, &lint.stdout).unwrap();
    let run = orchestrator(
        &cache,
        &current,
        &[
            "review-fix",
            "--fix",
            findings.to_str().unwrap(),
            "--test-cmd",
            "true",
            "-y",
        ],
        &[("ORCHESTRATOR_CACHE_MAX_SIZE", "1MiB")],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    // The removed repository's folders went as stale, the other's build
    // cache as the least recently used over 1 MiB; its worktree folder and
    // the current repository's folders stay, marked as used now.
    for kind in CacheKind::ALL {
        assert!(!repo_folder(&cache, kind, &removed).exists(), "{stderr}");
        let marker = read_marker(&repo_folder(&cache, kind, &current)).unwrap();
        assert_eq!(marker.repo, current);
        let age = jiff::Timestamp::now().duration_since(marker.last_used_at().unwrap());
        assert!(age < jiff::SignedDuration::from_mins(10), "{age:?}");
    }
    assert!(
        !repo_folder(&cache, CacheKind::Targets, &other).exists(),
        "{stderr}"
    );
    assert!(repo_folder(&cache, CacheKind::Worktrees, &other).is_dir());
    assert!(
        stderr.contains("note: cache: removed 3 folders, ")
            && stderr.contains(
                "2 of repositories that are gone, 1 least recently used over the 1.0 MiB cap"
            ),
        "{stderr}"
    );

    let list = orchestrator(&cache, &current, &["cache", "list"], &[]);
    assert!(list.status.success(), "{list:?}");
    insta::assert_snapshot!(redact(&String::from_utf8_lossy(&list.stdout), &tmp_path));

    let both = orchestrator(
        &cache,
        &current,
        &["cache", "clean", "--stale", "--repo", "."],
        &[],
    );
    assert_eq!(both.status.code(), Some(2), "{both:?}");
    let stale = orchestrator(&cache, &current, &["cache", "clean", "--stale"], &[]);
    assert_eq!(String::from_utf8_lossy(&stale.stdout), "freed 0 B\n");
    let mine = orchestrator(
        &cache,
        &tmp_path,
        &["cache", "clean", "--repo", "current"],
        &[],
    );
    let text = String::from_utf8_lossy(&mine.stdout).replace(tmp_path.to_str().unwrap(), "<tmp>");
    assert!(mine.status.success(), "{mine:?}");
    assert!(
        text.starts_with("removed <tmp>/cache/targets/current-"),
        "{text}"
    );
    assert!(text.contains("): asked\nfreed "), "{text}");
    assert!(!repo_folder(&cache, CacheKind::Targets, &current).exists());
    assert!(repo_folder(&cache, CacheKind::Worktrees, &current).is_dir());
}
