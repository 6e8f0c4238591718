//! Landings on the user's checkout (`Vcs::cherry_pick` outside an engine
//! worktree) with real git: while the user runs git there, what a landing
//! leaves, and when git refuses the landing's commit (with a git older than
//! 2.40, which lands by another way: see the adapter's `git/land.rs`).
//!
//! In the first test the user appends a line to `user.txt`, stages it and
//! commits it, over and over, as fast as git lets them; meanwhile the
//! adapter lands fix commits made in an engine worktree. A plain
//! `git cherry-pick` there stops with the pick in progress whenever the
//! user's `git add` holds `index.lock` at its commit step, and
//! `cherry-pick --abort` then puts the user's staged file back to HEAD:
//! their line is gone and their next commit finds nothing to commit.
//! Checked: every commit the user makes succeeds, every line they wrote is
//! in the history, no landed commit carries a path of the user's, and
//! every fix lands.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use orchestrator_adapters::git::{GitOptions, GitVcs};
use orchestrator_core::vcs::CherryPick;
use orchestrator_core::{CommitId, Vcs};

fn git_output(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_output(dir, args);
    assert!(
        out.status.success(),
        "git {args:?}: {}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs git as a user would while another git is at work: again after a
/// short wait while a lock refuses it, or while git's compare-and-swap
/// refuses a commit because a landing moved HEAD after the commit read it
/// (in both cases git changed nothing). Any other failure — a pick in
/// progress among them — is the test's failure.
fn git_retrying(dir: &Path, args: &[&str]) {
    for _ in 0..400 {
        let out = git_output(dir, args);
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            return;
        }
        assert!(
            err.contains(".lock") || err.contains("cannot lock ref 'HEAD'"),
            "the user's git {args:?} failed: {err}{}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    panic!("the user's git {args:?} was refused for too long");
}

/// Fixes landed while the user works.
const FIXES: usize = 25;

/// The user's loop: append, stage, commit `user.txt` while `go` holds (at
/// most 5,000 times, up to fifty a second), then the lines they wrote.
fn user(dir: &Path, go: &AtomicBool) -> Vec<String> {
    let mut lines = Vec::new();
    for i in 0..5_000 {
        if !go.load(Ordering::SeqCst) {
            break;
        }
        let line = format!("user line {i}");
        let path = dir.join("user.txt");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(&line);
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        lines.push(line);
        git_retrying(dir, &["add", "--", "user.txt"]);
        git_retrying(
            dir,
            &["commit", "-q", "-m", &format!("user {i}"), "--", "user.txt"],
        );
        // A pause of 10 to 40 ms: still far faster than any person.
        std::thread::sleep(Duration::from_millis(10 + (i as u64 * 7) % 31));
    }
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landings_never_take_or_drop_what_the_user_stages_meanwhile() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    std::fs::create_dir(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["config", "user.name", "User"]);
    git(&dir, &["config", "user.email", "user@example.invalid"]);
    git(&dir, &["config", "commit.gpgsign", "false"]);
    std::fs::write(dir.join("user.txt"), "start\n").unwrap();
    std::fs::write(dir.join("fix.txt"), "fixes\n").unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "start"]);
    let vcs = GitVcs::open(&dir).await.unwrap();
    let base = vcs.head().await.unwrap();
    let wt = vcs
        .worktree_add(&tmp.path().join("engine"), "engine", &base)
        .await
        .unwrap();

    let go = Arc::new(AtomicBool::new(true));
    let user_thread = {
        let (dir, go) = (dir.clone(), Arc::clone(&go));
        std::thread::spawn(move || user(&dir, &go))
    };
    // Each fix is tried for a while beside the user; what the user keeps
    // blocking (their staged file, or HEAD moving under every rebuild) is
    // landed once they stop. Any other outcome fails the test.
    let mut beside_the_user = 0;
    let mut later = Vec::new();
    for fix in 0..FIXES {
        // Each fix a new file of its own: nothing for the user's commits to
        // conflict with.
        let name = format!("fix-{fix}.txt");
        std::fs::write(wt.root().join(&name), format!("fix {fix}\n")).unwrap();
        let commit = wt.commit(&[name], &format!("fix {fix}")).await.unwrap();
        let mut landed = false;
        for _ in 0..100 {
            if user_thread.is_finished() {
                break;
            }
            match vcs.cherry_pick(&commit).await {
                Ok(CherryPick::Applied { .. }) => {
                    landed = true;
                    break;
                }
                Ok(CherryPick::Blocked { .. }) => {}
                Err(e) if e.to_string().contains("the branch moved under each") => {}
                other => {
                    go.store(false, Ordering::SeqCst);
                    panic!("landing fix {fix}: {other:?}");
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if landed {
            beside_the_user += 1;
        } else {
            later.push(commit);
        }
    }
    go.store(false, Ordering::SeqCst);
    let lines = user_thread.join().unwrap();
    for commit in later {
        let picked = vcs.cherry_pick(&commit).await.unwrap();
        assert!(matches!(picked, CherryPick::Applied { .. }), "{picked:?}");
    }

    assert!(
        beside_the_user >= 1,
        "only {beside_the_user} of {FIXES} fixes landed while the user worked"
    );
    let committed = git(&dir, &["show", "HEAD:user.txt"]);
    for line in &lines {
        assert!(
            committed.lines().any(|l| l == line),
            "the user's {line:?} is not in their committed user.txt"
        );
    }
    for subject_and_files in git(&dir, &["log", "--format=@%s", "--name-only", "main"])
        .split('@')
        .filter(|c| c.starts_with("fix "))
    {
        assert!(
            !subject_and_files.contains("user.txt"),
            "a landed fix took the user's file: {subject_and_files}"
        );
    }
    assert!(!dir.join(".git/CHERRY_PICK_HEAD").exists());
    eprintln!(
        "{beside_the_user} of {FIXES} fixes landed while the user made {} commits",
        lines.len()
    );
}

/// A repository with `a.txt` and `mine.txt` committed, opened with git
/// `program`, and a fix commit made in an engine worktree that changes
/// `a.txt`, adds `new.txt` and deletes `gone.txt`.
async fn repo_with_a_fix(tmp: &Path, program: &Path) -> (PathBuf, GitVcs, CommitId, CommitId) {
    let dir = tmp.join("repo");
    std::fs::create_dir(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["config", "user.name", "User"]);
    git(&dir, &["config", "user.email", "user@example.invalid"]);
    git(&dir, &["config", "commit.gpgsign", "false"]);
    for (path, text) in [
        ("a.txt", "a\n"),
        ("mine.txt", "mine\n"),
        ("gone.txt", "g\n"),
    ] {
        std::fs::write(dir.join(path), text).unwrap();
    }
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "start"]);
    let vcs = GitVcs::open_with(
        &dir,
        GitOptions {
            program: program.to_path_buf(),
        },
    )
    .await
    .unwrap();
    let base = vcs.head().await.unwrap();
    let wt = vcs
        .worktree_add(&tmp.join("engine"), "engine", &base)
        .await
        .unwrap();
    std::fs::write(wt.root().join("a.txt"), "a fixed\n").unwrap();
    std::fs::write(wt.root().join("new.txt"), "new\n").unwrap();
    std::fs::remove_file(wt.root().join("gone.txt")).unwrap();
    let paths = ["a.txt", "new.txt", "gone.txt"].map(String::from);
    let fix = wt
        .commit(&paths, "  fix a \n\nwith a body\n")
        .await
        .unwrap();
    (dir, vcs, base, fix)
}

/// A shell script at `dir/name` that runs `before` (a line of `sh`), then
/// the real git with the same arguments.
fn git_wrapper(dir: &Path, name: &str, before: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("#!/bin/sh\n{before}\nexec {} \"$@\"\n", real.trim()),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A git that answers `merge-tree --merge-base` as git 2.39 does (a usage
/// error, exit 129) and is the real git otherwise.
fn git_before_2_40(dir: &Path) -> PathBuf {
    git_wrapper(
        dir,
        "git-2.39",
        "for a in \"$@\"; do case \"$a\" in --merge-base=*) echo \"error: unknown option \\`$a'\" >&2; exit 129;; esac; done",
    )
}

/// What a landing leaves, with today's git and with one older than 2.40:
/// the fix's change on the branch (its file added and deleted) with its
/// message byte for byte and its author and date, and the user's edit
/// elsewhere left as it was, uncommitted.
#[tokio::test]
async fn a_landing_keeps_the_fix_whole_and_the_users_edit_theirs() {
    let tmp = tempfile::tempdir().unwrap();
    let old_git = git_before_2_40(tmp.path());
    for (name, program) in [("git", PathBuf::from("git")), ("git 2.39", old_git)] {
        let case = tmp.path().join(format!("case {name}"));
        std::fs::create_dir(&case).unwrap();
        let (dir, vcs, base, fix) = repo_with_a_fix(&case, &program).await;
        std::fs::write(dir.join("mine.txt"), "mine, edited\n").unwrap();
        let picked = vcs.cherry_pick(&fix).await.unwrap();
        let CherryPick::Applied { commit } = picked else {
            panic!("{name}: {picked:?}");
        };
        assert_eq!(
            git(&dir, &["rev-parse", "HEAD^"]).trim(),
            base.as_str(),
            "{name}"
        );
        assert_eq!(commit, vcs.head().await.unwrap(), "{name}");
        assert_eq!(
            git(&dir, &["cat-file", "-p", "HEAD"])
                .split_once("\n\n")
                .unwrap()
                .1,
            "  fix a \n\nwith a body\n",
            "{name}"
        );
        let author = |c: &str| git(&dir, &["log", "-1", "--format=%an <%ae> %ad", c]);
        assert_eq!(author("HEAD"), author(fix.as_str()), "{name}");
        assert_eq!(
            git(&dir, &["diff", "--name-status", "HEAD^", "HEAD"]),
            "M\ta.txt\nD\tgone.txt\nA\tnew.txt\n",
            "{name}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("a.txt")).unwrap(),
            "a fixed\n"
        );
        assert!(!dir.join("gone.txt").exists());
        assert_eq!(
            git(&dir, &["status", "--porcelain"]),
            " M mine.txt\n",
            "{name}: only the user's edit is left uncommitted"
        );
    }
}

/// With git older than 2.40, a landing whose commit git refuses (here the
/// user's `prepare-commit-msg` hook fails) changes nothing: HEAD stays, the
/// fix's paths are back as they were (its new file gone, its changed and
/// deleted files at HEAD's bytes), the user's work elsewhere is as it was,
/// and no pick is left in progress. Today's git builds the commit from
/// objects and runs no hook: the fix's own commit ran them.
#[tokio::test]
async fn a_landing_git_refuses_to_commit_leaves_the_checkout_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let old_git = git_before_2_40(tmp.path());
    let (dir, vcs, base, fix) = repo_with_a_fix(tmp.path(), &old_git).await;
    std::fs::write(dir.join("mine.txt"), "mine, edited\n").unwrap();
    let hook = dir.join(".git/hooks/prepare-commit-msg");
    std::fs::write(&hook, "#!/bin/sh\necho 'no commits today' >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let status_before = git(&dir, &["status", "--porcelain"]);

    let err = vcs.cherry_pick(&fix).await.unwrap_err();
    assert!(err.to_string().contains("no commits today"), "{err}");
    assert_eq!(vcs.head().await.unwrap(), base);
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("gone.txt")).unwrap(),
        "g\n"
    );
    assert!(!dir.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("mine.txt")).unwrap(),
        "mine, edited\n"
    );
    assert_eq!(git(&dir, &["status", "--porcelain"]), status_before);
    assert!(!dir.join(".git/CHERRY_PICK_HEAD").exists());

    // Without the hook the same landing goes through.
    std::fs::remove_file(&hook).unwrap();
    assert!(matches!(
        vcs.cherry_pick(&fix).await.unwrap(),
        CherryPick::Applied { .. }
    ));
    assert_eq!(git(&dir, &["status", "--porcelain"]), " M mine.txt\n");
}

/// The real git, logging each command line to `log` first.
fn logging_git(dir: &Path, log: &Path) -> PathBuf {
    git_wrapper(
        dir,
        "git-logging",
        &format!("echo \"$*\" >> '{}'", log.display()),
    )
}

/// How many checks for staged work (`git diff --cached`, with no commit
/// to compare against) the log holds.
fn staged_checks(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" diff ") && l.trim_end().ends_with("--cached --"))
        .count()
}

/// A commit on the engine worktree's branch that writes `path`.
fn engine_commit(engine: &Path, path: &str, text: &str) -> CommitId {
    std::fs::write(engine.join(path), text).unwrap();
    git(engine, &["add", path]);
    git(engine, &["commit", "-q", "-m", &format!("write {path}")]);
    CommitId(git(engine, &["rev-parse", "HEAD"]).trim().to_owned())
}

/// A landing asks git whether anything is staged unless HEAD and the index
/// are still exactly what the previous landing left; once the user stages
/// a file, the index differs, git is asked, and the landing is blocked
/// with nothing changed.
#[tokio::test]
async fn staged_work_is_checked_again_once_the_index_is_not_the_one_a_landing_left() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("git.log");
    let program = logging_git(tmp.path(), &log);
    let (dir, vcs, _base, fix) = repo_with_a_fix(tmp.path(), &program).await;
    let engine = tmp.path().join("engine");

    assert!(matches!(
        vcs.cherry_pick(&fix).await.unwrap(),
        CherryPick::Applied { .. }
    ));
    assert_eq!(staged_checks(&log), 1, "the first landing asks git");

    let second = engine_commit(&engine, "b.txt", "b\n");
    let CherryPick::Applied { commit: landed } = vcs.cherry_pick(&second).await.unwrap() else {
        panic!("the second fix lands");
    };
    assert_eq!(
        staged_checks(&log),
        1,
        "the index is the one the first landing left: git is not asked"
    );
    assert_eq!(vcs.head().await.unwrap(), landed);

    std::fs::write(dir.join("mine.txt"), "the user's staged line\n").unwrap();
    git(&dir, &["add", "mine.txt"]);
    let third = engine_commit(&engine, "c.txt", "c\n");
    assert_eq!(
        vcs.cherry_pick(&third).await.unwrap(),
        CherryPick::Blocked {
            paths: vec!["mine.txt".to_owned()]
        }
    );
    assert!(staged_checks(&log) >= 2, "a changed index is checked again");
    assert_eq!(vcs.head().await.unwrap(), landed);
    assert_eq!(
        git(&dir, &["diff", "--cached", "--name-only"]),
        "mine.txt\n"
    );
    assert!(!dir.join("c.txt").exists());
}
