//! The session's trash under every revert, with real `git`: a rollback in
//! a worktree and the removal of a worktree a kill left save what they
//! would lose first (a rollback's entries naming whose attempt it was); a
//! clean removal saves nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use orchestrator_adapters::git::GitVcs;
use orchestrator_core::trash::{EntryKind, Restored, Trash, TrashError};
use orchestrator_core::worktree::{SlotRecord, WorktreePool, remove_leftovers};
use orchestrator_core::{CommitId, Vcs};
use tempfile::TempDir;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository with a tracked source, a tracked script and an ignored
/// `target/`, its `GitVcs` and a session folder.
async fn repo() -> (TempDir, Arc<dyn Vcs>, CommitId) {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("repo");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["config", "user.name", "T"]);
    git(&dir, &["config", "user.email", "t@example.invalid"]);
    std::fs::write(dir.join("src/a.rs"), "fn a() {}\n").unwrap();
    std::fs::write(dir.join(".gitignore"), "target/\n").unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "initial"]);
    let vcs: Arc<dyn Vcs> = Arc::new(GitVcs::open(&dir).await.unwrap());
    let head = vcs.head().await.unwrap();
    (tmp, vcs, head)
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[tokio::test]
async fn a_rollback_in_a_worktree_saves_the_agents_bytes_and_restore_brings_them_back() {
    let (tmp, vcs, head) = repo().await;
    let wt_path = tmp.path().join("slot-0");
    let wt = vcs
        .worktree_add(&wt_path, "orch/slot-0", &head)
        .await
        .unwrap();
    // Given after the worktree was made: it reaches the worktree too.
    let trash = Arc::new(Trash::for_session(&tmp.path().join("session")));
    assert!(vcs.set_trash(Some(Arc::clone(&trash))));
    let checkpoint = wt.checkpoint().await.unwrap();
    let root = wt.root().to_path_buf();
    std::fs::write(root.join("src/a.rs"), b"fn a() { agent(); }\n\xff").unwrap();
    std::fs::write(root.join("tool.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(root.join("tool.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink("src/a.rs", root.join("latest")).unwrap();

    let restored = wt.restore(&checkpoint).await.unwrap();
    assert_eq!(restored, vec!["latest", "src/a.rs", "tool.sh"]);
    assert_eq!(
        std::fs::read_to_string(root.join("src/a.rs")).unwrap(),
        "fn a() {}\n"
    );
    assert!(!root.join("tool.sh").exists());

    let saved = trash.saved();
    let paths: Vec<&str> = saved.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["latest", "src/a.rs", "tool.sh"]);
    assert!(
        saved[0]
            .reason
            .contains("rollback of an attempt in worktree slot-0")
    );
    assert_eq!(
        saved[0].kind,
        EntryKind::Symlink {
            target: "src/a.rs".into()
        }
    );
    assert_eq!(saved[2].kind, EntryKind::File { mode: 0o750 });

    // Back into the worktree: the file there is the checkpoint's now, so
    // restoring over it is refused, naming it, and it is left alone.
    let err = trash.restore(saved[1].id, &root).unwrap_err();
    assert!(matches!(err, TrashError::WouldOverwrite { .. }), "{err}");
    assert!(err.to_string().contains("src/a.rs"), "{err}");
    assert_eq!(
        std::fs::read_to_string(root.join("src/a.rs")).unwrap(),
        "fn a() {}\n"
    );
    // Elsewhere: byte-exact, mode and link kept.
    let out = tmp.path().join("out");
    for entry in &saved {
        assert!(matches!(
            trash.restore(entry.id, &out).unwrap(),
            Restored::Written(_)
        ));
    }
    assert_eq!(
        std::fs::read(out.join("src/a.rs")).unwrap(),
        b"fn a() { agent(); }\n\xff"
    );
    assert_eq!(mode(&out.join("tool.sh")), 0o750);
    assert_eq!(
        std::fs::read_link(out.join("latest")).unwrap(),
        Path::new("src/a.rs")
    );
    // The manifest on disk says the same.
    assert_eq!(trash.entries().unwrap(), saved);
}

/// A checkpoint taken for a finding: what a rollback to it saves names
/// the finding, beside the worktree and the commit it went back to.
#[tokio::test]
async fn a_rollback_to_a_checkpoint_taken_for_a_finding_names_the_finding_in_the_trash() {
    let (tmp, vcs, head) = repo().await;
    let wt = vcs
        .worktree_add(&tmp.path().join("slot-2"), "orch/slot-2", &head)
        .await
        .unwrap();
    let trash = Arc::new(Trash::for_session(&tmp.path().join("session")));
    assert!(vcs.set_trash(Some(Arc::clone(&trash))));
    let checkpoint = wt
        .checkpoint()
        .await
        .unwrap()
        .with_reason("finding F7 (unused import)");
    std::fs::write(wt.root().join("src/a.rs"), "fn a() { broken(); }\n").unwrap();

    assert_eq!(wt.restore(&checkpoint).await.unwrap(), vec!["src/a.rs"]);
    let reasons: Vec<String> = trash.saved().into_iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        [format!(
            "rollback of an attempt at finding F7 (unused import) in worktree slot-2 (back to {})",
            head.short()
        )]
    );
}

#[tokio::test]
async fn removing_a_worktree_a_kill_left_saves_edited_and_untracked_files_not_ignored_ones() {
    let (tmp, vcs, head) = repo().await;
    let pool_dir = tmp.path().join("pool");
    std::fs::create_dir_all(&pool_dir).unwrap();
    let path = pool_dir.join("slot-1");
    let wt = vcs.worktree_add(&path, "orch/slot-1", &head).await.unwrap();
    let root = wt.root().to_path_buf();
    // What someone left in it before the kill.
    std::fs::write(root.join("src/a.rs"), "fn a() { edited(); }\n").unwrap();
    std::fs::write(root.join("new.txt"), "untracked\n").unwrap();
    std::fs::create_dir_all(root.join("target/debug")).unwrap();
    std::fs::write(root.join("target/debug/big"), vec![0u8; 4096]).unwrap();
    drop(wt);

    let trash = Arc::new(Trash::for_session(&tmp.path().join("session")));
    vcs.set_trash(Some(Arc::clone(&trash)));
    let slot = SlotRecord {
        path: path.clone(),
        branch: "orch/slot-1".into(),
    };
    let problems = remove_leftovers(vcs.as_ref(), &[slot], &pool_dir).await;
    assert!(problems.is_empty(), "{problems:?}");
    assert!(!path.exists());
    let saved = trash.saved();
    let paths: Vec<&str> = saved.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["new.txt", "src/a.rs"]);
    assert!(
        saved
            .iter()
            .all(|e| e.reason == "removal of worktree slot-1 left by a crash")
    );
    let out = tmp.path().join("out");
    trash.restore(saved[1].id, &out).unwrap();
    assert_eq!(
        std::fs::read_to_string(out.join("src/a.rs")).unwrap(),
        "fn a() { edited(); }\n"
    );
    assert!(
        trash
            .report()
            .contains("orchestrator trash restore session:<N>")
    );
}

#[tokio::test]
async fn a_clean_worktree_removal_and_a_rollback_without_a_trash_save_nothing() {
    let (tmp, vcs, head) = repo().await;
    let trash = Arc::new(Trash::for_session(&tmp.path().join("session")));
    vcs.set_trash(Some(Arc::clone(&trash)));
    let pool = WorktreePool::new(Arc::clone(&vcs), tmp.path().join("pool"), "orch/");
    let lease = pool.acquire(&head).await.unwrap();
    // Ignored build output is not what git would lose.
    std::fs::create_dir_all(lease.vcs.root().join("target")).unwrap();
    std::fs::write(lease.vcs.root().join("target/out"), "built").unwrap();
    pool.discard(lease).await;
    pool.close().await;
    assert!(trash.saved().is_empty());
    assert!(
        !trash.dir().exists(),
        "a clean removal makes no trash folder"
    );

    // A library user that gives no trash keeps the old behaviour.
    vcs.set_trash(None);
    let wt = vcs
        .worktree_add(&tmp.path().join("wt"), "orch/wt", &head)
        .await
        .unwrap();
    let checkpoint = wt.checkpoint().await.unwrap();
    std::fs::write(wt.root().join("src/a.rs"), "changed").unwrap();
    wt.restore(&checkpoint).await.unwrap();
    assert!(!trash.dir().exists());
}

#[tokio::test]
async fn a_restore_that_fails_after_saving_names_the_trash() {
    let (tmp, vcs, head) = repo().await;
    let trash = Arc::new(Trash::for_session(&tmp.path().join("session")));
    vcs.set_trash(Some(Arc::clone(&trash)));
    let wt = vcs
        .worktree_add(&tmp.path().join("slot-0"), "orch/slot-0", &head)
        .await
        .unwrap();
    let checkpoint = wt.checkpoint().await.unwrap();
    std::fs::write(wt.root().join("src/a.rs"), "agent's change\n").unwrap();
    // Another git holds the worktree's index: `git restore` fails.
    let out = Command::new("git")
        .current_dir(wt.root())
        .args(["rev-parse", "--absolute-git-dir"])
        .output()
        .unwrap();
    let git_dir = String::from_utf8(out.stdout).unwrap();
    std::fs::write(Path::new(git_dir.trim()).join("index.lock"), "").unwrap();

    let err = wt.restore(&checkpoint).await.unwrap_err().to_string();
    assert!(err.contains("orchestrator trash list session"), "{err}");
    assert!(err.contains(&trash.dir().display().to_string()), "{err}");
    let saved = trash.saved();
    assert_eq!(saved.len(), 1);
    assert_eq!(
        std::fs::read_to_string(trash.dir().join(saved[0].stored())).unwrap(),
        "agent's change\n"
    );
}
