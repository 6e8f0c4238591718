//! `orchestrator trash list|restore|clean` on the real binary, over trash
//! folders in a repository's session folders.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use orchestrator_core::trash::Trash;

fn orchestrator(repo: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .args(args)
        .arg("--repo")
        .arg(repo)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A repository folder with two sessions' trash: review-fix's (a script,
/// mode 0750, and a symlink) and planex's (one file).
fn setup() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path();
    let work = repo.join("work");
    std::fs::create_dir_all(work.join("bin")).unwrap();
    std::fs::write(work.join("bin/run.sh"), "#!/bin/sh\necho agent\n").unwrap();
    std::fs::set_permissions(
        work.join("bin/run.sh"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    std::os::unix::fs::symlink("bin/run.sh", work.join("latest")).unwrap();
    std::fs::write(work.join("notes.txt"), "12345678").unwrap();
    let fix = Trash::for_session(&repo.join(".review/fixes/fix-1"));
    fix.put(
        &work,
        "bin/run.sh",
        "rollback of an attempt in worktree slot-0",
    )
    .unwrap();
    fix.put(&work, "latest", "rollback of an attempt in worktree slot-0")
        .unwrap();
    let planex = Trash::for_session(&repo.join(".workflow/.lite-plan/wpp-1"));
    planex
        .put(
            &work,
            "notes.txt",
            "removal of worktree slot-1 left by a crash",
        )
        .unwrap();
    tmp
}

#[test]
fn list_shows_each_sessions_entries_and_a_bad_session_is_named() {
    let tmp = setup();
    let listed = orchestrator(tmp.path(), &["trash", "list"]);
    assert!(listed.status.success(), "{listed:?}");
    let stdout = text(&listed.stdout);
    assert!(stdout.contains("fix-1: 2 files"), "{stdout}");
    assert!(stdout.contains("fix-1:1 "), "{stdout}");
    assert!(stdout.contains("bin/run.sh (mode 750)"), "{stdout}");
    assert!(stdout.contains("latest -> bin/run.sh"), "{stdout}");
    assert!(stdout.contains("wpp-1: 1 file"), "{stdout}");
    assert!(
        stdout.contains("removal of worktree slot-1 left by a crash"),
        "{stdout}"
    );

    let one = orchestrator(tmp.path(), &["trash", "list", "wpp-1"]);
    assert!(!text(&one.stdout).contains("fix-1"), "{one:?}");

    let bad = orchestrator(tmp.path(), &["trash", "list", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
    let stderr = text(&bad.stderr);
    assert!(stderr.contains("no session `nope`"), "{stderr}");
    assert!(stderr.contains("fix-1"), "{stderr}");
}

#[test]
fn restore_brings_bytes_mode_and_link_back_and_never_overwrites_a_changed_file() {
    let tmp = setup();
    let repo = tmp.path();
    let out = repo.join("out");
    for entry in ["fix-1:1", "fix-1:2"] {
        let restored = orchestrator(
            repo,
            &["trash", "restore", entry, "--to", out.to_str().unwrap()],
        );
        assert!(restored.status.success(), "{restored:?}");
    }
    assert_eq!(
        std::fs::read(out.join("bin/run.sh")).unwrap(),
        b"#!/bin/sh\necho agent\n"
    );
    let mode = std::fs::metadata(out.join("bin/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o750);
    assert_eq!(
        std::fs::read_link(out.join("latest")).unwrap(),
        Path::new("bin/run.sh")
    );

    // Into the repository, where the user has a different notes.txt.
    std::fs::write(repo.join("notes.txt"), "yours").unwrap();
    let refused = orchestrator(repo, &["trash", "restore", "wpp-1:1"]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let stderr = text(&refused.stderr);
    assert!(stderr.contains("refusing to overwrite"), "{stderr}");
    assert!(stderr.contains("notes.txt"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.txt")).unwrap(),
        "yours"
    );

    for (entry, expected) in [
        ("fix-1:9", "has no entry 9"),
        ("x:y", "is not an entry"),
        ("other:1", "no session `other`"),
    ] {
        let bad = orchestrator(repo, &["trash", "restore", entry]);
        assert_eq!(bad.status.code(), Some(2), "{entry}: {bad:?}");
        assert!(text(&bad.stderr).contains(expected), "{entry}: {bad:?}");
    }
}

#[test]
fn clean_removes_only_what_it_names_and_says_what_it_frees() {
    let tmp = setup();
    let repo = tmp.path();
    let cleaned = orchestrator(repo, &["trash", "clean", "wpp-1"]);
    assert!(cleaned.status.success(), "{cleaned:?}");
    let stdout = text(&cleaned.stdout);
    assert!(stdout.contains("wpp-1/trash (8 B)"), "{stdout}");
    assert!(stdout.contains("freed 8 B"), "{stdout}");
    assert!(!repo.join(".workflow/.lite-plan/wpp-1/trash").exists());
    assert!(repo.join(".review/fixes/fix-1/trash/trash.json").is_file());

    let all = orchestrator(repo, &["trash", "clean"]);
    assert!(text(&all.stdout).contains("fix-1/trash"), "{all:?}");
    assert!(!repo.join(".review/fixes/fix-1/trash").exists());
    assert!(
        repo.join(".review/fixes/fix-1").is_dir(),
        "the session stays"
    );
    let empty = orchestrator(repo, &["trash", "list"]);
    assert!(text(&empty.stdout).contains("no trash"), "{empty:?}");
}
