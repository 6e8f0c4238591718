//! `EnvProvisioner` with real git and a real pool: what a worktree of a
//! JavaScript or Python project gets, that the user's own folders are
//! never shared with it, setup once per slot, and a failing setup's output.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use orchestrator_adapters::config::{LinkMode, WorktreeSection};
use orchestrator_adapters::git::GitVcs;
use orchestrator_adapters::process::ProcessRunner;
use orchestrator_adapters::worktree_env::EnvProvisioner;
use orchestrator_core::event::{CollectingSink, Event, EventSink};
use orchestrator_core::vcs::Vcs;
use orchestrator_core::worktree::{PoolError, Provisioner, WorktreePool};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A project with an ignored `node_modules/`, an ignored `.venv/` holding
/// an editable install of the project, a `.env`, and a `target/`.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["config", "user.name", "t"]);
    git(root, &["config", "user.email", "t@example.invalid"]);
    git(root, &["config", "commit.gpgsign", "false"]);
    write(
        &root.join(".gitignore"),
        "node_modules/\n.venv/\n.env\ntarget/\n",
    );
    write(&root.join("package.json"), "{\"name\":\"demo\"}\n");
    write(&root.join("src/pkg/__init__.py"), "VALUE = 1\n");
    write(
        &root.join("node_modules/dep/index.js"),
        "module.exports = 42;\n",
    );
    std::os::unix::fs::symlink("../dep/index.js", {
        std::fs::create_dir_all(root.join("node_modules/.bin")).unwrap();
        root.join("node_modules/.bin/dep")
    })
    .unwrap();
    write(&root.join(".venv/pyvenv.cfg"), "home = /usr/bin\n");
    let m = root.canonicalize().unwrap().display().to_string();
    write(
        &root.join(".venv/bin/pytest"),
        &format!("#!{m}/.venv/bin/python\n"),
    );
    write(
        &root.join(".venv/lib/python3.11/site-packages/__editable__.demo-0.1.pth"),
        &format!("{m}/src\n"),
    );
    write(&root.join(".env"), "TOKEN=local\n");
    write(&root.join("target/debug/big"), "artifact\n");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "initial"]);
    dir
}

struct Run {
    _cache: tempfile::TempDir,
    pool: WorktreePool,
    vcs: Arc<dyn Vcs>,
    sink: Arc<CollectingSink>,
    provisioner: Arc<EnvProvisioner>,
}

async fn pool(repo: &Path, section: WorktreeSection) -> Run {
    let cache = tempfile::tempdir().unwrap();
    let vcs: Arc<dyn Vcs> = Arc::new(GitVcs::open(repo).await.unwrap());
    let provisioner = Arc::new(EnvProvisioner::new(
        section,
        Arc::new(ProcessRunner::default()),
    ));
    let sink = Arc::new(CollectingSink::new());
    let pool = WorktreePool::new(Arc::clone(&vcs), cache.path().join("slots"), "wt-env/")
        .with_provisioner(Some(Arc::clone(&provisioner) as Arc<dyn Provisioner>))
        .with_sink(Arc::clone(&sink) as Arc<dyn EventSink>);
    Run {
        _cache: cache,
        pool,
        vcs,
        sink,
        provisioner,
    }
}

fn parse_section(text: &str) -> WorktreeSection {
    toml::from_str(text).unwrap()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test]
async fn detected_dependency_folders_reach_every_worktree_without_sharing_the_users_files() {
    let repo = project();
    let run = pool(repo.path(), WorktreeSection::default()).await;
    let base = run.vcs.head().await.unwrap();
    let lease = run.pool.acquire(&base).await.unwrap();
    let wt = lease.path().to_path_buf();
    assert_eq!(
        read(&wt.join("node_modules/dep/index.js")),
        "module.exports = 42;\n"
    );
    assert_eq!(
        read(&wt.join("node_modules/.bin/dep")),
        "module.exports = 42;\n"
    );
    assert!(
        !wt.join(".env").exists(),
        "only dependency folders are detected"
    );
    assert!(
        !wt.join("target").exists(),
        "a build folder is not provided"
    );
    // Never the user's inode.
    let user = std::fs::metadata(repo.path().join("node_modules/dep/index.js")).unwrap();
    let theirs = std::fs::metadata(wt.join("node_modules/dep/index.js")).unwrap();
    assert_ne!((user.dev(), user.ino()), (theirs.dev(), theirs.ino()));
    // A write in place in the worktree leaves the user's file alone.
    std::fs::write(wt.join("node_modules/dep/index.js"), "patched\n").unwrap();
    assert_eq!(
        read(&repo.path().join("node_modules/dep/index.js")),
        "module.exports = 42;\n"
    );
    // The virtualenv's editable install and scripts point at the worktree.
    let w = wt.display().to_string();
    assert_eq!(
        read(&wt.join(".venv/lib/python3.11/site-packages/__editable__.demo-0.1.pth")),
        format!("{w}/src\n")
    );
    assert_eq!(
        read(&wt.join(".venv/bin/pytest")),
        format!("#!{w}/.venv/bin/python\n")
    );
    assert_eq!(lease.env["VIRTUAL_ENV"], format!("{w}/.venv"));
    assert!(lease.env["PATH"].starts_with(&format!("{w}/.venv/bin:")));
    // The provided folders are ignored: the worktree is clean.
    assert!(lease.vcs.status().await.unwrap().is_clean());
    let notices: Vec<String> = run
        .sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Notice { message } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].contains("node_modules/ (detected;"),
        "{}",
        notices[0]
    );
    assert!(notices[0].contains(".venv/ (detected;"), "{}", notices[0]);
    run.pool.release(lease);
    run.pool.close().await;
    assert!(!wt.exists());
}

#[tokio::test]
async fn configured_setup_runs_once_per_slot_with_the_configured_environment() {
    let repo = project();
    let counter = repo.path().join("setups.log");
    let section = parse_section(&format!(
        r#"
setup = ["printf '%s\n' \"$MARK\" >> {counter}", "test -f .env"]
copy = [".env"]
env = {{ MARK = "{{worktree}}" }}
"#,
        counter = counter.display()
    ));
    assert!(!section.detects(), "configured: nothing is guessed");
    let run = pool(repo.path(), section).await;
    let base = run.vcs.head().await.unwrap();
    let a = run.pool.acquire(&base).await.unwrap();
    let b = run.pool.acquire(&base).await.unwrap();
    assert_eq!(read(&a.path().join(".env")), "TOKEN=local\n");
    assert!(!a.path().join("node_modules").exists());
    assert_eq!(a.env["MARK"], a.path().display().to_string());
    run.pool.release(a);
    run.pool.release(b);
    for _ in 0..5 {
        let x = run.pool.acquire(&base).await.unwrap();
        assert!(!x.fresh);
        run.pool.release(x);
    }
    let lines = read(&counter);
    assert_eq!(lines.lines().count(), 2, "once per slot: {lines}");
    assert_eq!(run.pool.stats().made, 2);
    assert_eq!(run.pool.stats().reused, 5);
    run.pool.close().await;
}

#[tokio::test]
async fn a_failing_setup_stops_with_its_output_and_runs_once() {
    let repo = project();
    let section =
        parse_section(r#"setup = ["echo installing; echo 'npm ERR! no lock file' >&2; exit 3"]"#);
    let run = pool(repo.path(), section).await;
    let base = run.vcs.head().await.unwrap();
    for _ in 0..2 {
        let err = run.pool.acquire(&base).await.unwrap_err();
        assert!(matches!(err, PoolError::Setup(_)));
        assert_eq!(
            err.to_string(),
            "worktree setup `echo installing; echo 'npm ERR! no lock file' >&2; exit 3` exited with status 3:\ninstalling\nnpm ERR! no lock file"
        );
    }
    run.pool.close().await;
    let listing = Command::new("git")
        .current_dir(repo.path())
        .args(["worktree", "list"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&listing.stdout).lines().count(),
        1,
        "the failed worktree is gone"
    );
}

#[tokio::test]
async fn copies_share_nothing_and_a_tracked_copy_path_is_refused() {
    let repo = project();
    let section = parse_section("copy = [\"node_modules\"]\nlink = \"copy\"");
    assert_eq!(section.link, LinkMode::Copy);
    let run = pool(repo.path(), section).await;
    let base = run.vcs.head().await.unwrap();
    let lease = run.pool.acquire(&base).await.unwrap();
    assert_eq!(
        read(&lease.path().join("node_modules/dep/index.js")),
        "module.exports = 42;\n"
    );
    assert!(!lease.path().join(".venv").exists());
    run.pool.release(lease);
    run.pool.close().await;
    assert!(run.provisioner.is_active());

    let section = parse_section("copy = [\"package.json\"]");
    let run = pool(repo.path(), section).await;
    let err = run.pool.acquire(&base).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "[worktree] copy[0] = \"package.json\" is not ignored by git: a worktree already has what git tracks (and untracked files are never given to an agent)"
    );
    run.pool.close().await;
}

/// A reused slot moves to each new base with its provided folders in
/// place, clean there, so its checkpoint is known without a read; a base
/// whose `.gitignore` stops ignoring a provided folder would leave the
/// slot with untracked files: that move is undone and refused, and the
/// pool makes a new slot, whose checkpoint is read.
#[tokio::test]
async fn a_slot_moves_with_its_folders_and_a_base_that_unignores_one_gets_a_new_slot() {
    let repo = project();
    let root = repo.path();
    let run = pool(root, WorktreeSection::default()).await;
    let base = run.vcs.head().await.unwrap();
    let lease = run.pool.acquire(&base).await.unwrap();
    let wt = lease.path().to_path_buf();
    run.pool.release(lease);

    write(&root.join("package.json"), "{\"name\":\"demo\",\"v\":2}\n");
    git(root, &["commit", "-qam", "bump"]);
    let tip = run.vcs.head().await.unwrap();
    let lease = run.pool.acquire(&tip).await.unwrap();
    assert!(!lease.fresh, "the slot is reused");
    assert_eq!(lease.path(), wt);
    assert_eq!(
        read(&wt.join("package.json")),
        "{\"name\":\"demo\",\"v\":2}\n"
    );
    assert_eq!(
        read(&wt.join("node_modules/dep/index.js")),
        "module.exports = 42;\n"
    );
    assert_eq!(
        lease.checkpoint().await.unwrap(),
        lease.vcs.checkpoint().await.unwrap(),
        "a moved slot is clean at its base"
    );
    run.pool.release(lease);

    write(&root.join(".gitignore"), ".venv/\n.env\ntarget/\n");
    git(root, &["commit", "-qam", "stop ignoring node_modules"]);
    let unignored = run.vcs.head().await.unwrap();
    let lease = run.pool.acquire(&unignored).await.unwrap();
    assert!(lease.fresh, "the slot could not be moved there");
    assert_ne!(lease.path(), wt);
    assert!(!wt.exists(), "the refused slot is removed");
    let warned = run.sink.events().into_iter().any(|e| {
        matches!(e, Event::Warning { message }
            if message.contains("could not be reused") && message.contains("node_modules/dep/index.js"))
    });
    assert!(warned, "{:?}", run.sink.events());
    assert_eq!(
        lease.checkpoint().await.unwrap(),
        lease.vcs.checkpoint().await.unwrap()
    );
    assert_eq!(lease.vcs.head().await.unwrap(), unignored);
    run.pool.release(lease);
    run.pool.close().await;
}
