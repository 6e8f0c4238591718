//! `GitVcs` against real `git` in temporary directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use orchestrator_adapters::git::{GitOptions, GitVcs};
use orchestrator_core::vcs::{CherryPick, FastForward, PushOutcome, Status};
use orchestrator_core::{CommitId, Vcs, VcsError};
use tempfile::TempDir;

/// Runs git for test setup and inspection (not through the adapter).
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn configure(dir: &Path) {
    git(dir, &["config", "user.name", "Test User"]);
    git(dir, &["config", "user.email", "test@example.invalid"]);
    git(dir, &["config", "commit.gpgsign", "false"]);
}

/// A repository with `files` committed on `main`.
struct Repo {
    _tmp: TempDir,
    dir: PathBuf,
    vcs: GitVcs,
}

impl Repo {
    async fn new(files: &[(&str, &str)]) -> Repo {
        let tmp = TempDir::new().unwrap();
        let dir = tmp.path().join("repo");
        std::fs::create_dir(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        configure(&dir);
        for (path, content) in files {
            write(&dir, path, content);
        }
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "--allow-empty", "-m", "initial"]);
        let vcs = GitVcs::open(&dir).await.unwrap();
        Repo {
            _tmp: tmp,
            dir,
            vcs,
        }
    }

    fn read(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.dir.join(path)).ok()
    }

    fn write(&self, path: &str, content: &str) {
        write(&self.dir, path, content);
    }

    fn git(&self, args: &[&str]) -> String {
        git(&self.dir, args)
    }

    fn tmp(&self) -> &Path {
        self._tmp.path()
    }
}

fn write(dir: &Path, path: &str, content: &str) {
    let full = dir.join(path);
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(full, content).unwrap();
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn open_refuses_subdirectories_plain_directories_and_missing_git() {
    let repo = Repo::new(&[("sub/a.txt", "a")]).await;
    let err = GitVcs::open(repo.dir.join("sub")).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("is not the root of a git work tree"),
        "{err}"
    );

    let plain = TempDir::new().unwrap();
    let err = GitVcs::open(plain.path()).await.unwrap_err();
    assert!(err.to_string().contains("is not a git work tree"), "{err}");

    let options = GitOptions {
        program: PathBuf::from("/nonexistent/git-binary"),
    };
    let err = GitVcs::open_with(&repo.dir, options).await.unwrap_err();
    assert!(err.to_string().starts_with("git is not available"), "{err}");

    assert_eq!(
        repo.vcs.root(),
        std::fs::canonicalize(&repo.dir).unwrap().as_path()
    );
}

#[tokio::test]
async fn status_lists_modified_staged_deleted_and_untracked_with_odd_paths() {
    let repo = Repo::new(&[
        ("plain.txt", "1"),
        ("with space.txt", "1"),
        ("gone.txt", "1"),
        ("staged.txt", "1"),
    ])
    .await;
    assert!(repo.vcs.status().await.unwrap().is_clean());

    repo.write("with space.txt", "2");
    std::fs::remove_file(repo.dir.join("gone.txt")).unwrap();
    repo.write("staged.txt", "2");
    repo.git(&["add", "staged.txt"]);
    repo.write("dir/naïve 漢字.txt", "new");
    repo.write("new\nline.txt", "new");
    repo.write("quote\"d.txt", "new");

    let status = repo.vcs.status().await.unwrap();
    assert_eq!(
        status,
        Status {
            modified: strings(&["gone.txt", "staged.txt", "with space.txt"]),
            untracked: strings(&["dir/naïve 漢字.txt", "new\nline.txt", "quote\"d.txt"]),
        }
    );
}

/// Every invocation is counted per subcommand (what `perf-report` splits
/// a flow's wall time by); other tests run in parallel, so the counts only
/// grow by at least this test's own.
#[tokio::test]
async fn git_invocations_are_counted_per_subcommand() {
    let repo = Repo::new(&[("a.txt", "a\n")]).await;
    let before = orchestrator_adapters::git::spent();
    repo.vcs.status().await.unwrap();
    repo.vcs.status().await.unwrap();
    repo.vcs.current_branch().await.unwrap();
    let after = orchestrator_adapters::git::spent();
    let grew = |k: &str| after.get(k).map_or(0, |s| s.runs) - before.get(k).map_or(0, |s| s.runs);
    assert!(grew("status") >= 2, "{before:?} → {after:?}");
    assert!(grew("symbolic-ref") >= 1, "{before:?} → {after:?}");
    assert!(
        after["status"].time
            > before
                .get("status")
                .map_or_else(Default::default, |s| s.time)
    );
}

#[tokio::test]
async fn head_and_current_branch() {
    let repo = Repo::new(&[("a", "a")]).await;
    let head = repo.vcs.head().await.unwrap();
    assert_eq!(head.as_str(), repo.git(&["rev-parse", "HEAD"]).trim());
    assert_eq!(
        repo.vcs.current_branch().await.unwrap().as_deref(),
        Some("main")
    );
    repo.git(&["checkout", "-q", "--detach"]);
    assert_eq!(repo.vcs.current_branch().await.unwrap(), None);
}

#[tokio::test]
async fn commit_messages_survive_byte_for_byte_and_nothing_is_executed() {
    let repo = Repo::new(&[("a.txt", "a")]).await;
    let base = repo.vcs.head().await.unwrap();
    let messages = [
        "fix: handle \"quotes\" and 'single quotes'",
        "run `touch pwned-backtick` and $(touch pwned) and ${HOME}; rm -rf / # no",
        "subject line\n\nbody with\ttabs\n\n\n# a line that looks like a comment\ntrailing spaces   \n",
        "unicode: naïve café 漢字 😀 — ∑",
        "  leading spaces and no trailing newline",
    ];
    let mut ids = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        repo.write("a.txt", &format!("version {i}"));
        ids.push(
            repo.vcs
                .commit(&strings(&["a.txt"]), message)
                .await
                .unwrap(),
        );
    }
    let log = repo.vcs.log_since(&base).await.unwrap();
    let got: Vec<&str> = log.iter().map(|c| c.message.as_str()).collect();
    assert_eq!(got, messages);
    assert_eq!(log.iter().map(|c| c.id.clone()).collect::<Vec<_>>(), ids);
    for info in &log {
        let tree = repo.git(&["rev-parse", &format!("{}^{{tree}}", info.id)]);
        assert_eq!(info.tree, tree.trim());
    }
    assert!(!repo.dir.join("pwned").exists());
    assert!(!repo.dir.join("pwned-backtick").exists());
    assert!(repo.vcs.status().await.unwrap().is_clean());
    assert!(repo.vcs.log_since(&ids[4]).await.unwrap().is_empty());
}

#[tokio::test]
async fn commit_takes_exactly_the_given_paths_and_leaves_prestaged_changes_staged() {
    let repo = Repo::new(&[("mine.txt", "1"), ("theirs.txt", "1"), ("gone.txt", "1")]).await;
    // The user staged an unrelated change before the engine commits.
    repo.write("theirs.txt", "user's staged work");
    repo.git(&["add", "theirs.txt"]);
    repo.write("untracked-user-file.txt", "keep me");
    // The engine's write-set: a change, a new file with odd name, a deletion.
    repo.write("mine.txt", "2");
    repo.write("new dir/ünïcode file.txt", "new");
    std::fs::remove_file(repo.dir.join("gone.txt")).unwrap();

    let id = repo
        .vcs
        .commit(
            &strings(&["mine.txt", "new dir/ünïcode file.txt", "gone.txt"]),
            "engine fix",
        )
        .await
        .unwrap();

    let files = repo.git(&["show", "--name-status", "--format=", "-z", id.as_str()]);
    let mut fields: Vec<&str> = files.split('\0').filter(|f| !f.is_empty()).collect();
    fields.sort();
    assert_eq!(
        fields,
        vec![
            "A",
            "D",
            "M",
            "gone.txt",
            "mine.txt",
            "new dir/ünïcode file.txt"
        ]
    );
    // The unrelated staged change is still staged, not committed.
    assert_eq!(
        repo.git(&["diff", "--cached", "--name-only"]).trim(),
        "theirs.txt"
    );
    assert_eq!(
        repo.vcs.status().await.unwrap(),
        Status {
            modified: strings(&["theirs.txt"]),
            untracked: strings(&["untracked-user-file.txt"]),
        }
    );
}

#[tokio::test]
async fn commit_treats_glob_and_option_like_names_literally() {
    let repo = Repo::new(&[("a.txt", "1"), ("b.txt", "1")]).await;
    repo.write("*.txt", "star");
    repo.write("-f", "dash");
    repo.write("a.txt", "changed but not committed");
    let id = repo
        .vcs
        .commit(&strings(&["*.txt", "-f"]), "literal names")
        .await
        .unwrap();
    let files = repo.git(&["show", "--name-only", "--format=", id.as_str()]);
    assert_eq!(files.lines().collect::<Vec<_>>(), vec!["*.txt", "-f"]);
    assert_eq!(
        repo.vcs.status().await.unwrap().modified,
        strings(&["a.txt"])
    );
}

#[tokio::test]
async fn commit_refuses_nothing_directories_and_escaping_paths() {
    let repo = Repo::new(&[("dir/a.txt", "1")]).await;
    let err = repo
        .vcs
        .commit(&strings(&["dir/a.txt"]), "nothing")
        .await
        .unwrap_err();
    assert!(matches!(err, VcsError::NothingToCommit { .. }), "{err}");

    repo.write("dir/a.txt", "2");
    let err = repo
        .vcs
        .commit(&strings(&["dir"]), "dir")
        .await
        .unwrap_err();
    assert!(matches!(err, VcsError::BadPath { .. }), "{err}");
    let err = repo
        .vcs
        .commit(&strings(&["../outside.txt"]), "escape")
        .await
        .unwrap_err();
    assert!(matches!(err, VcsError::BadPath { .. }), "{err}");
    let err = repo.vcs.commit(&[], "empty").await.unwrap_err();
    assert!(matches!(err, VcsError::NothingToCommit { .. }), "{err}");
    // Nothing was committed by the refusals.
    assert_eq!(repo.git(&["rev-list", "--count", "HEAD"]).trim(), "1");
}

#[tokio::test]
async fn commit_errors_carry_command_status_and_stderr() {
    let repo = Repo::new(&[("a.txt", "1")]).await;
    let hook = repo.dir.join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\necho 'hook says no' >&2\nexit 1\n").unwrap();
    make_executable(&hook);
    repo.write("a.txt", "2");
    let err = repo
        .vcs
        .commit(&strings(&["a.txt"]), "blocked")
        .await
        .unwrap_err();
    match err {
        VcsError::Command {
            command,
            status,
            stderr,
        } => {
            assert!(command.starts_with("git commit --only"), "{command}");
            assert!(status.contains('1'), "{status}");
            assert!(stderr.contains("hook says no"), "{stderr}");
        }
        other => panic!("expected a command error, got {other:?}"),
    }
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    perms.set_mode(0o755);
    std::fs::set_permissions(path, perms).unwrap();
}

#[tokio::test]
async fn restore_undoes_the_write_set_and_leaves_pre_dirty_files_byte_identical() {
    let repo = Repo::new(&[
        ("changed.txt", "original\n"),
        ("deleted by agent.txt", "bring me back\n"),
        ("user-dirty.txt", "committed\n"),
        ("user-deleted.txt", "committed\n"),
        ("staged by agent.txt", "committed\n"),
    ])
    .await;
    // Pre-existing user state: a modified file, a deleted file, an untracked
    // file, a staged change.
    repo.write("user-dirty.txt", "user edit, not committed\r\n\u{0}binary");
    std::fs::remove_file(repo.dir.join("user-deleted.txt")).unwrap();
    repo.write("user untracked ü.txt", "scratch notes");
    let checkpoint = repo.vcs.checkpoint().await.unwrap();
    assert_eq!(
        checkpoint.dirty.keys().cloned().collect::<Vec<_>>(),
        strings(&["user untracked ü.txt", "user-deleted.txt", "user-dirty.txt"])
    );
    assert_eq!(checkpoint.dirty["user-deleted.txt"], None);

    // The agent's changes.
    repo.write("changed.txt", "agent edit\n");
    std::fs::remove_file(repo.dir.join("deleted by agent.txt")).unwrap();
    repo.write("created/by agent.txt", "new\n");
    repo.write("staged by agent.txt", "agent staged\n");
    repo.write("agent-added.txt", "added to the index\n");
    repo.git(&["add", "staged by agent.txt", "agent-added.txt"]);

    let write_set = repo.vcs.changed_since(&checkpoint).await.unwrap();
    let expected = strings(&[
        "agent-added.txt",
        "changed.txt",
        "created/by agent.txt",
        "deleted by agent.txt",
        "staged by agent.txt",
    ]);
    assert_eq!(write_set, expected);

    let restored = repo.vcs.restore(&checkpoint).await.unwrap();
    assert_eq!(restored, expected);

    assert_eq!(repo.read("changed.txt").unwrap(), b"original\n");
    assert_eq!(
        repo.read("deleted by agent.txt").unwrap(),
        b"bring me back\n"
    );
    assert_eq!(repo.read("created/by agent.txt"), None);
    assert_eq!(repo.read("agent-added.txt"), None);
    assert_eq!(repo.read("staged by agent.txt").unwrap(), b"committed\n");
    // The user's state is exactly as before.
    assert_eq!(
        repo.read("user-dirty.txt").unwrap(),
        b"user edit, not committed\r\n\0binary"
    );
    assert_eq!(repo.read("user-deleted.txt"), None);
    assert_eq!(repo.read("user untracked ü.txt").unwrap(), b"scratch notes");
    assert_eq!(repo.vcs.checkpoint().await.unwrap(), checkpoint);
    assert!(
        repo.vcs
            .changed_since(&checkpoint)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn restore_refuses_and_touches_nothing_when_a_pre_dirty_file_changed() {
    let repo = Repo::new(&[("user.txt", "committed"), ("agent.txt", "committed")]).await;
    repo.write("user.txt", "user edit");
    repo.write("notes.txt", "untracked");
    let checkpoint = repo.vcs.checkpoint().await.unwrap();

    repo.write("agent.txt", "agent edit");
    repo.write("user.txt", "agent overwrote the user's edit");
    std::fs::remove_file(repo.dir.join("notes.txt")).unwrap();
    repo.write("agent-new.txt", "new");

    let expected = VcsError::TouchedDirty {
        paths: strings(&["notes.txt", "user.txt"]),
    };
    assert_eq!(
        repo.vcs.changed_since(&checkpoint).await.unwrap_err(),
        expected
    );
    assert_eq!(repo.vcs.restore(&checkpoint).await.unwrap_err(), expected);
    // Nothing was restored or removed.
    assert_eq!(repo.read("agent.txt").unwrap(), b"agent edit");
    assert_eq!(
        repo.read("user.txt").unwrap(),
        b"agent overwrote the user's edit"
    );
    assert_eq!(repo.read("agent-new.txt").unwrap(), b"new");
    assert_eq!(repo.read("notes.txt"), None);
}

#[tokio::test]
async fn restore_detects_a_pre_dirty_file_reverted_to_head() {
    let repo = Repo::new(&[("user.txt", "committed")]).await;
    repo.write("user.txt", "user edit");
    let checkpoint = repo.vcs.checkpoint().await.unwrap();
    repo.write("user.txt", "committed");
    assert_eq!(
        repo.vcs.restore(&checkpoint).await.unwrap_err(),
        VcsError::TouchedDirty {
            paths: strings(&["user.txt"])
        }
    );
}

#[tokio::test]
async fn restore_refuses_when_head_moved_but_changed_since_still_works() {
    let repo = Repo::new(&[("a.txt", "1"), ("b.txt", "1")]).await;
    let checkpoint = repo.vcs.checkpoint().await.unwrap();
    repo.write("a.txt", "2");
    repo.vcs
        .commit(&strings(&["a.txt"]), "agent committed")
        .await
        .unwrap();
    repo.write("b.txt", "2");
    assert_eq!(
        repo.vcs.changed_since(&checkpoint).await.unwrap(),
        strings(&["a.txt", "b.txt"])
    );
    let err = repo.vcs.restore(&checkpoint).await.unwrap_err();
    assert!(err.to_string().contains("HEAD moved"), "{err}");
    assert_eq!(repo.read("b.txt").unwrap(), b"2");
}

#[tokio::test]
async fn worktree_add_commit_cherry_pick_back_and_remove() {
    let repo = Repo::new(&[("a.txt", "a\n"), ("b.txt", "b\n")]).await;
    let base = repo.vcs.head().await.unwrap();
    let wt_path = repo.tmp().join("wt fix-1");
    let wt = repo
        .vcs
        .worktree_add(&wt_path, "fix-1", &base)
        .await
        .unwrap();
    assert_eq!(wt.head().await.unwrap(), base);
    assert_eq!(wt.current_branch().await.unwrap().as_deref(), Some("fix-1"));
    assert_eq!(
        wt.root(),
        std::fs::canonicalize(&wt_path).unwrap().as_path()
    );

    write(wt.root(), "b.txt", "b fixed\n");
    let fix = wt.commit(&strings(&["b.txt"]), "fix b").await.unwrap();
    // Meanwhile main moved on.
    repo.write("a.txt", "a changed on main\n");
    repo.vcs
        .commit(&strings(&["a.txt"]), "main work")
        .await
        .unwrap();

    let picked = repo.vcs.cherry_pick(&fix).await.unwrap();
    let CherryPick::Applied { commit } = picked else {
        panic!("expected Applied, got {picked:?}");
    };
    assert_eq!(commit, repo.vcs.head().await.unwrap());
    assert_ne!(commit, fix);
    assert_eq!(repo.read("b.txt").unwrap(), b"b fixed\n");
    let log = repo.vcs.log_since(&base).await.unwrap();
    assert_eq!(
        log.iter().map(|c| c.message.as_str()).collect::<Vec<_>>(),
        vec!["main work", "fix b"]
    );

    // Removal refuses a dirty worktree and a wrong branch name.
    write(wt.root(), "scratch.txt", "dirty");
    let err = repo
        .vcs
        .worktree_remove(&wt_path, "fix-1")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("uncommitted changes"), "{err}");
    std::fs::remove_file(wt.root().join("scratch.txt")).unwrap();
    let err = repo
        .vcs
        .worktree_remove(&wt_path, "main")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not on branch `main`"), "{err}");

    repo.vcs.worktree_remove(&wt_path, "fix-1").await.unwrap();
    assert!(!wt_path.exists());
    assert_eq!(
        repo.git(&["branch", "--list", "fix-1"]).trim(),
        "",
        "branch deleted"
    );
    assert_eq!(
        repo.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
}

#[tokio::test]
async fn worktree_add_refuses_bad_branch_names() {
    let repo = Repo::new(&[("a", "a")]).await;
    let base = repo.vcs.head().await.unwrap();
    for branch in ["-f", "a..b", "", "with space"] {
        let path = repo.tmp().join("wt-bad");
        assert!(
            repo.vcs.worktree_add(&path, branch, &base).await.is_err(),
            "{branch:?}"
        );
        assert!(!path.exists());
    }
    let err = repo
        .vcs
        .worktree_add(&repo.tmp().join("wt"), "ok", &CommitId("--force".into()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a commit id"), "{err}");
}

#[tokio::test]
async fn cherry_pick_conflict_is_aborted_cleanly() {
    let repo = Repo::new(&[("a.txt", "line\n"), ("other.txt", "o\n")]).await;
    let base = repo.vcs.head().await.unwrap();
    let wt_path = repo.tmp().join("wt");
    let wt = repo
        .vcs
        .worktree_add(&wt_path, "side", &base)
        .await
        .unwrap();
    write(wt.root(), "a.txt", "side version\n");
    let side = wt.commit(&strings(&["a.txt"]), "side").await.unwrap();

    repo.write("a.txt", "main version\n");
    let main_head = repo.vcs.commit(&strings(&["a.txt"]), "main").await.unwrap();
    // An unrelated user edit must survive the abort.
    repo.write("other.txt", "user edit\n");

    let result = repo.vcs.cherry_pick(&side).await.unwrap();
    assert_eq!(
        result,
        CherryPick::Conflict {
            paths: strings(&["a.txt"])
        }
    );
    assert_eq!(repo.vcs.head().await.unwrap(), main_head);
    assert_eq!(repo.read("a.txt").unwrap(), b"main version\n");
    assert_eq!(repo.read("other.txt").unwrap(), b"user edit\n");
    assert!(!repo.dir.join(".git/CHERRY_PICK_HEAD").exists());
    assert_eq!(
        repo.vcs.status().await.unwrap(),
        Status {
            modified: strings(&["other.txt"]),
            untracked: vec![],
        }
    );
}

/// A bare remote with `main` pushed from `repo`, registered as `origin`.
fn bare_remote(repo: &Repo) -> PathBuf {
    let remote = repo.tmp().join("remote.git");
    git(
        repo.tmp(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    repo.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    repo.git(&["push", "-q", "origin", "main"]);
    remote
}

#[tokio::test]
async fn push_fast_forward_to_a_bare_remote() {
    let repo = Repo::new(&[("a.txt", "1")]).await;
    let remote = bare_remote(&repo);
    repo.write("a.txt", "2");
    let head = repo
        .vcs
        .commit(&strings(&["a.txt"]), "second")
        .await
        .unwrap();
    assert_eq!(
        repo.vcs.push("origin", "main").await.unwrap(),
        PushOutcome::Pushed
    );
    assert_eq!(git(&remote, &["rev-parse", "main"]).trim(), head.as_str());
    // A new branch is a push too.
    repo.git(&["branch", "feature"]);
    assert_eq!(
        repo.vcs.push("origin", "feature").await.unwrap(),
        PushOutcome::Pushed
    );
    assert_eq!(
        git(&remote, &["rev-parse", "feature"]).trim(),
        head.as_str()
    );
}

#[tokio::test]
async fn non_fast_forward_push_is_rejected_and_the_remote_is_unchanged() {
    let repo = Repo::new(&[("a.txt", "1")]).await;
    let remote = bare_remote(&repo);
    // Another clone pushes first.
    let other = repo.tmp().join("other");
    git(
        repo.tmp(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    configure(&other);
    write(&other, "a.txt", "theirs");
    git(&other, &["commit", "-q", "-am", "theirs"]);
    git(&other, &["push", "-q", "origin", "main"]);
    let remote_head = git(&remote, &["rev-parse", "main"]);

    repo.write("a.txt", "ours");
    repo.vcs.commit(&strings(&["a.txt"]), "ours").await.unwrap();
    let outcome = repo.vcs.push("origin", "main").await.unwrap();
    let PushOutcome::Rejected { reason } = outcome else {
        panic!("expected Rejected, got {outcome:?}");
    };
    assert!(reason.contains("rejected"), "{reason}");
    assert!(reason.contains("refs/heads/main"), "{reason}");
    assert_eq!(git(&remote, &["rev-parse", "main"]), remote_head);
}

#[tokio::test]
async fn push_failures_other_than_rejection_are_errors() {
    let repo = Repo::new(&[("a.txt", "1")]).await;
    let err = repo.vcs.push("no-such-remote", "main").await.unwrap_err();
    assert!(matches!(err, VcsError::Command { .. }), "{err}");
    for remote in ["--force", "+origin", ""] {
        assert!(repo.vcs.push(remote, "main").await.is_err(), "{remote:?}");
    }
    assert!(repo.vcs.push("origin", "+main").await.is_err());
}

#[tokio::test]
async fn exclude_keeps_engine_folders_out_of_status_once() {
    let repo = Repo::new(&[("a.txt", "1")]).await;
    repo.write(".review/fixes/s1/fix-plan.json", "{}");
    repo.write("user.txt", "user");
    assert_eq!(
        repo.vcs.status().await.unwrap().untracked,
        strings(&[".review/fixes/s1/fix-plan.json", "user.txt"])
    );
    repo.vcs.exclude(".review/").await.unwrap();
    repo.vcs.exclude(".review/").await.unwrap();
    assert_eq!(
        repo.vcs.status().await.unwrap().untracked,
        strings(&["user.txt"])
    );
    let exclude = std::fs::read_to_string(repo.dir.join(".git/info/exclude")).unwrap();
    assert_eq!(exclude.lines().filter(|l| *l == ".review/").count(), 1);

    // A checkpoint ignores the engine folder, and commit never picks it up.
    let checkpoint = repo.vcs.checkpoint().await.unwrap();
    assert!(!checkpoint.dirty.keys().any(|k| k.starts_with(".review")));
    let err = repo
        .vcs
        .commit(&strings(&[".review/fixes/s1/fix-plan.json"]), "no")
        .await
        .unwrap_err();
    assert!(matches!(err, VcsError::NothingToCommit { .. }), "{err}");
    assert!(repo.vcs.exclude("two\nlines").await.is_err());
}

#[tokio::test]
async fn exclude_from_a_worktree_writes_the_common_exclude_file() {
    let repo = Repo::new(&[("a.txt", "1")]).await;
    let base = repo.vcs.head().await.unwrap();
    let wt = repo
        .vcs
        .worktree_add(&repo.tmp().join("wt"), "wt", &base)
        .await
        .unwrap();
    wt.exclude(".workflow/").await.unwrap();
    write(wt.root(), ".workflow/x.csv", "x");
    repo.write(".workflow/y.csv", "y");
    assert!(wt.status().await.unwrap().is_clean());
    assert!(repo.vcs.status().await.unwrap().is_clean());
    let exclude = std::fs::read_to_string(repo.dir.join(".git/info/exclude")).unwrap();
    assert!(exclude.lines().any(|l| l == ".workflow/"), "{exclude}");
}

#[tokio::test]
async fn vcs_is_usable_as_a_trait_object_from_several_tasks() {
    let repo = Repo::new(&[("a.txt", "1")]).await;
    let vcs: std::sync::Arc<dyn Vcs> = std::sync::Arc::new(repo.vcs.clone());
    let mut handles = Vec::new();
    for i in 0..4 {
        let vcs = std::sync::Arc::clone(&vcs);
        let dir = repo.dir.clone();
        handles.push(tokio::spawn(async move {
            let name = format!("file-{i}.txt");
            write(&dir, &name, "x");
            vcs.commit(&[name], &format!("commit {i}")).await
        }));
    }
    for handle in handles {
        handle.await.unwrap().unwrap();
    }
    assert_eq!(repo.git(&["rev-list", "--count", "HEAD"]).trim(), "5");
    assert!(vcs.status().await.unwrap().is_clean());
}

#[tokio::test]
async fn push_refused_by_a_remote_hook_is_rejected_with_its_reason() {
    let repo = Repo::new(&[("a.txt", "1")]).await;
    let remote = bare_remote(&repo);
    let hook = remote.join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'protected branch' >&2\nexit 1\n").unwrap();
    make_executable(&hook);
    let before = git(&remote, &["rev-parse", "main"]);
    repo.write("a.txt", "2");
    repo.vcs
        .commit(&strings(&["a.txt"]), "second")
        .await
        .unwrap();
    let outcome = repo.vcs.push("origin", "main").await.unwrap();
    let PushOutcome::Rejected { reason } = outcome else {
        panic!("expected Rejected, got {outcome:?}");
    };
    assert!(reason.contains("remote rejected"), "{reason}");
    assert_eq!(git(&remote, &["rev-parse", "main"]), before);
}

#[tokio::test]
async fn restore_handles_a_file_replaced_by_a_directory_and_back() {
    let repo = Repo::new(&[("foo", "file\n"), ("dir/x", "x\n")]).await;
    let checkpoint = repo.vcs.checkpoint().await.unwrap();
    std::fs::remove_file(repo.dir.join("foo")).unwrap();
    repo.write("foo/bar", "now a directory");
    std::fs::remove_dir_all(repo.dir.join("dir")).unwrap();
    repo.write("dir", "now a file");
    let restored = repo.vcs.restore(&checkpoint).await.unwrap();
    assert_eq!(restored, strings(&["dir", "dir/x", "foo", "foo/bar"]));
    assert_eq!(repo.read("foo").unwrap(), b"file\n");
    assert_eq!(repo.read("dir/x").unwrap(), b"x\n");
    assert!(repo.vcs.status().await.unwrap().is_clean());
}

/// Git sets `GIT_DIR`, `GIT_INDEX_FILE` and friends for hooks; an engine run
/// from a hook (or a test harness) must still work on its own repository.
/// Environment changes are process-wide, so the check runs in a child copy
/// of this test binary.
#[tokio::test]
async fn git_environment_variables_of_the_caller_do_not_redirect_the_adapter() {
    const CHILD: &str = "ORCHESTRATOR_GIT_ENV_CHILD";
    if let Ok(repo_dir) = std::env::var(CHILD) {
        let vcs = GitVcs::open(&repo_dir).await.unwrap();
        let status = vcs.status().await.unwrap();
        assert_eq!(status.untracked, strings(&["naïve.txt"]));
        assert_eq!(
            vcs.head().await.unwrap().as_str(),
            git(
                Path::new(&repo_dir),
                &["--git-dir=.git", "rev-parse", "HEAD"]
            )
            .trim()
        );
        return;
    }
    let repo = Repo::new(&[("a.txt", "1")]).await;
    repo.write("naïve.txt", "x");
    let decoy = Repo::new(&[("decoy.txt", "1")]).await;
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "git_environment_variables_of_the_caller_do_not_redirect_the_adapter",
            "--nocapture",
        ])
        .env(CHILD, &repo.dir)
        .env("GIT_DIR", decoy.dir.join(".git"))
        .env("GIT_WORK_TREE", &decoy.dir)
        .env("GIT_INDEX_FILE", decoy.dir.join(".git/index"))
        .env("GIT_CONFIG_PARAMETERS", "'core.quotepath'='true'")
        .env("GIT_LITERAL_PATHSPECS", "0")
        .env("GIT_EXTERNAL_DIFF", "false")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

/// More paths than one command line carries (the adapter chunks argv).
#[tokio::test]
async fn checkpoint_and_restore_scale_past_one_command_line() {
    let tracked: Vec<(String, String)> = (0..700)
        .map(|i| (format!("src/mod {i}/file.rs"), format!("// {i}\n")))
        .collect();
    let files: Vec<(&str, &str)> = tracked
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let repo = Repo::new(&files).await;
    for i in 0..600 {
        repo.write(&format!("user/notes {i}.md"), &format!("note {i}"));
    }
    let started = std::time::Instant::now();
    let checkpoint = repo.vcs.checkpoint().await.unwrap();
    let checkpoint_took = started.elapsed();
    assert_eq!(checkpoint.dirty.len(), 600);
    for i in 0..700 {
        repo.write(&format!("src/mod {i}/file.rs"), "// agent\n");
        repo.write(&format!("src/mod {i}/new.rs"), "// agent\n");
    }
    let started = std::time::Instant::now();
    let restored = repo.vcs.restore(&checkpoint).await.unwrap();
    let restore_took = started.elapsed();
    assert_eq!(restored.len(), 1400);
    assert_eq!(repo.read("src/mod 699/file.rs").unwrap(), b"// 699\n");
    assert_eq!(repo.read("src/mod 699/new.rs"), None);
    assert_eq!(repo.read("user/notes 599.md").unwrap(), b"note 599");
    eprintln!(
        "checkpoint of 600 dirty files: {checkpoint_took:?}; restore of 1400 files: {restore_took:?}"
    );
}

/// Git's own ways of having uncommitted work, none of which a pick may
/// touch: a staged change anywhere blocks it (git cannot pick over a dirty
/// index, and the pick's commit must never take the user's staged work),
/// and so does an ignored file where the commit adds one (git would
/// overwrite it silently).
#[tokio::test]
async fn a_pick_is_blocked_by_staged_work_and_by_an_ignored_file_it_would_overwrite() {
    let repo = Repo::new(&[
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        (".gitignore", "*.log\n"),
    ])
    .await;
    let base = repo.vcs.head().await.unwrap();
    let wt_path = repo.tmp().join("wt");
    let wt = repo
        .vcs
        .worktree_add(&wt_path, "pick", &base)
        .await
        .unwrap();
    write(&wt_path, "a.txt", "fixed\n");
    write(&wt_path, "new.log", "made by the fix\n");
    // A commit that adds a file the user's tree ignores (the engine never
    // commits an ignored file itself; someone else's commit may add one).
    git(&wt_path, &["add", "-f", "a.txt", "new.log"]);
    git(&wt_path, &["commit", "-q", "-m", "fix a"]);
    let fix = wt.head().await.unwrap();
    // Staged, unrelated to the fix.
    repo.write("b.txt", "staged by the user\n");
    repo.git(&["add", "b.txt"]);
    assert_eq!(
        repo.vcs.cherry_pick(&fix).await.unwrap(),
        CherryPick::Blocked {
            paths: strings(&["b.txt"])
        }
    );
    assert_eq!(repo.vcs.head().await.unwrap(), base);
    assert_eq!(repo.git(&["diff", "--cached", "--name-only"]), "b.txt\n");
    repo.git(&["reset", "-q", "b.txt"]);
    // An ignored file of the user's where the fix adds one.
    repo.write("new.log", "the user's log\n");
    assert_eq!(
        repo.vcs.cherry_pick(&fix).await.unwrap(),
        CherryPick::Blocked {
            paths: strings(&["new.log"])
        }
    );
    assert_eq!(repo.read("new.log").unwrap(), b"the user's log\n");
    std::fs::remove_file(repo.dir.join("new.log")).unwrap();
    // Unrelated unstaged work stays as it is; the pick lands.
    assert!(matches!(
        repo.vcs.cherry_pick(&fix).await.unwrap(),
        CherryPick::Applied { .. }
    ));
    assert_eq!(repo.read("b.txt").unwrap(), b"staged by the user\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), " M b.txt\n");
    drop(wt);
    repo.vcs.worktree_remove(&wt_path, "pick").await.unwrap();
}

/// A verified range lands with one fast-forward, keeping its commit ids and
/// the user's unrelated work; uncommitted work in its way (a modified path
/// it changes, anything staged, an ignored file where it adds one) blocks
/// it with nothing changed; a branch that moved on, or a `merge.autoStash`
/// setting, never makes it stash, merge or move anything.
#[tokio::test]
async fn a_range_lands_by_fast_forward_only_where_nothing_of_the_users_is_in_the_way() {
    let repo = Repo::new(&[
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        ("c.txt", "c\n"),
        (".gitignore", "*.log\n"),
    ])
    .await;
    repo.git(&["config", "merge.autoStash", "true"]);
    let base = repo.vcs.head().await.unwrap();
    let wt_path = repo.tmp().join("wt");
    let wt = repo.vcs.worktree_add(&wt_path, "ff", &base).await.unwrap();
    write(&wt_path, "a.txt", "a fixed\n");
    let first = wt.commit(&strings(&["a.txt"]), "fix a").await.unwrap();
    write(&wt_path, "new.log", "made by the fix\n");
    git(&wt_path, &["add", "-f", "new.log"]);
    git(&wt_path, &["commit", "-q", "-m", "add a log"]);
    let tip = wt.head().await.unwrap();

    // In the way: a path the range changes, modified; then anything staged;
    // then an ignored file where the range adds one.
    repo.write("a.txt", "the user's a\n");
    let ff = repo.vcs.fast_forward(&base, &tip).await.unwrap();
    assert_eq!(
        ff,
        FastForward::Blocked {
            paths: strings(&["a.txt"])
        }
    );
    repo.write("a.txt", "a\n");
    repo.write("b.txt", "staged by the user\n");
    repo.git(&["add", "b.txt"]);
    let ff = repo.vcs.fast_forward(&base, &tip).await.unwrap();
    assert_eq!(
        ff,
        FastForward::Blocked {
            paths: strings(&["b.txt"])
        }
    );
    repo.git(&["reset", "-q", "b.txt"]);
    repo.write("new.log", "the user's log\n");
    let ff = repo.vcs.fast_forward(&base, &tip).await.unwrap();
    assert_eq!(
        ff,
        FastForward::Blocked {
            paths: strings(&["new.log"])
        }
    );
    assert_eq!(repo.read("new.log").unwrap(), b"the user's log\n");
    std::fs::remove_file(repo.dir.join("new.log")).unwrap();
    assert_eq!(repo.vcs.head().await.unwrap(), base);

    // Not where the caller said: nothing moves.
    let ff = repo.vcs.fast_forward(&first, &tip).await.unwrap();
    assert_eq!(ff, FastForward::NotPossible);
    assert_eq!(repo.vcs.head().await.unwrap(), base);

    // Lands with the same ids; the user's unrelated change stays unstaged.
    assert_eq!(
        repo.vcs.fast_forward(&base, &tip).await.unwrap(),
        FastForward::Moved
    );
    assert_eq!(repo.vcs.head().await.unwrap(), tip);
    assert_eq!(repo.read("a.txt").unwrap(), b"a fixed\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), " M b.txt\n");
    assert_eq!(repo.git(&["stash", "list"]), "");

    // The user committed meanwhile: a range from the old tip does not land.
    repo.write("c.txt", "the user's commit\n");
    repo.git(&["commit", "-qam", "user work"]);
    write(&wt_path, "c.txt", "c fixed\n");
    let later = wt.commit(&strings(&["c.txt"]), "fix c").await.unwrap();
    let user_tip = repo.vcs.head().await.unwrap();
    assert_eq!(
        repo.vcs.fast_forward(&tip, &later).await.unwrap(),
        FastForward::NotPossible
    );
    assert_eq!(repo.vcs.head().await.unwrap(), user_tip);
    assert_eq!(repo.read("c.txt").unwrap(), b"the user's commit\n");
    drop(wt);
    repo.vcs.worktree_remove(&wt_path, "ff").await.unwrap();
}

/// A pick into a worktree the engine made skips the checks for the user's
/// work before it, but a change in its way still stops it with nothing
/// changed and the paths named (git refuses, and the refusal is read).
#[tokio::test]
async fn a_pick_into_an_engine_worktree_is_still_refused_over_a_change_in_its_way() {
    let repo = Repo::new(&[("a.txt", "a\n"), ("b.txt", "b\n")]).await;
    let base = repo.vcs.head().await.unwrap();
    let wt_path = repo.tmp().join("trial");
    let wt = repo
        .vcs
        .worktree_add(&wt_path, "trial", &base)
        .await
        .unwrap();
    repo.write("a.txt", "a fixed\n");
    let fix = repo
        .vcs
        .commit(&strings(&["a.txt"]), "fix a")
        .await
        .unwrap();
    write(&wt_path, "a.txt", "left in the trial tree\n");
    assert_eq!(
        wt.cherry_pick(&fix).await.unwrap(),
        CherryPick::Blocked {
            paths: strings(&["a.txt"])
        }
    );
    assert_eq!(wt.head().await.unwrap(), base);
    assert_eq!(
        std::fs::read_to_string(wt_path.join("a.txt")).unwrap(),
        "left in the trial tree\n"
    );
    write(&wt_path, "a.txt", "a\n");
    assert!(matches!(
        wt.cherry_pick(&fix).await.unwrap(),
        CherryPick::Applied { .. }
    ));
    assert_eq!(
        std::fs::read_to_string(wt_path.join("a.txt")).unwrap(),
        "a fixed\n"
    );
    drop(wt);
    repo.vcs.worktree_remove(&wt_path, "trial").await.unwrap();
}

/// The user's own git (or an editor's) holding the index lock for a moment
/// does not fail the engine's command: git refused before doing anything,
/// and the command runs again once the lock is gone.
#[tokio::test]
async fn a_lock_held_for_a_moment_by_another_git_is_waited_for() {
    let repo = Repo::new(&[("a.txt", "a\n")]).await;
    let lock = repo.dir.join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    let held = lock.clone();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(150));
        std::fs::remove_file(held).unwrap();
    });
    repo.write("a.txt", "changed\n");
    repo.vcs
        .commit(&strings(&["a.txt"]), "while the lock was held")
        .await
        .unwrap();
    releaser.join().unwrap();
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]).trim(),
        "while the lock was held"
    );
    // A lock that stays is an error naming it, not a hang.
    std::fs::write(&lock, "").unwrap();
    repo.write("a.txt", "again\n");
    let err = repo
        .vcs
        .commit(&strings(&["a.txt"]), "never")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("index.lock"), "{err}");
    std::fs::remove_file(&lock).unwrap();
}

/// The remote and base helpers: `fetch_ref` updates no local ref,
/// `push_commit` pushes one commit to a branch as a fast-forward (and is
/// refused otherwise), `remote_url` and `upstream` read, `diff_from` shows
/// the tracked change since the merge base.
#[tokio::test]
async fn remote_and_base_helpers_on_real_git() {
    let r = Repo::new(&[("a.txt", "one\n")]).await;
    let bare = r._tmp.path().join("origin.git");
    git(
        r._tmp.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(&r.dir, &["remote", "add", "origin", bare.to_str().unwrap()]);
    git(&r.dir, &["push", "-q", "-u", "origin", "main"]);
    assert_eq!(
        r.vcs.remote_url("origin").await.unwrap(),
        bare.to_str().unwrap()
    );
    assert!(r.vcs.remote_url("--help").await.is_err());
    assert_eq!(
        r.vcs.upstream().await.unwrap().as_deref(),
        Some("origin/main")
    );
    let base = r.vcs.head().await.unwrap();
    write(&r.dir, "a.txt", "two\n");
    let next = r.vcs.commit(&["a.txt".into()], "two").await.unwrap();
    write(&r.dir, "a.txt", "three\n");
    let diff = r.vcs.diff_from("origin/main").await.unwrap();
    assert!(
        diff.contains("-one\n+three\n"),
        "committed and uncommitted: {diff}"
    );
    // Push the commit to another branch; then a non-fast-forward is refused.
    assert_eq!(
        r.vcs.push_commit("origin", &next, "feature").await.unwrap(),
        PushOutcome::Pushed
    );
    assert_eq!(git(&bare, &["rev-parse", "feature"]).trim(), next.as_str());
    assert!(matches!(
        r.vcs.push_commit("origin", &base, "feature").await.unwrap(),
        PushOutcome::Rejected { .. }
    ));
    // Fetch one ref: FETCH_HEAD only, no local branch moves.
    git(&bare, &["update-ref", "refs/pull/7/head", next.as_str()]);
    let branches_before = git(&r.dir, &["for-each-ref"]);
    assert_eq!(
        r.vcs.fetch_ref("origin", "refs/pull/7/head").await.unwrap(),
        next
    );
    assert_eq!(git(&r.dir, &["for-each-ref"]), branches_before);
    assert!(
        r.vcs
            .fetch_ref("origin", "refs/pull/7/head:refs/heads/x")
            .await
            .is_err()
    );
    assert!(
        r.vcs.fetch_ref("origin", "main").await.is_err(),
        "a full ref name only"
    );
}
