use std::path::Path;

use proptest::prelude::*;

use super::*;

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[cfg(unix)]
#[test]
fn a_saved_file_and_symlink_come_back_byte_exact_with_mode_and_link() {
    use std::os::unix::fs::PermissionsExt;
    let tree = tempfile::tempdir().unwrap();
    let session = tempfile::tempdir().unwrap();
    write(tree.path(), "bin/run.sh", b"#!/bin/sh\necho \xff\n");
    std::fs::set_permissions(
        tree.path().join("bin/run.sh"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    std::os::unix::fs::symlink("run.sh", tree.path().join("bin/link")).unwrap();
    let trash = Trash::for_session(session.path());
    let file = trash
        .put(tree.path(), "bin/run.sh", "test")
        .unwrap()
        .unwrap();
    let link = trash.put(tree.path(), "bin/link", "test").unwrap().unwrap();
    assert_eq!(file.kind, EntryKind::File { mode: 0o750 });
    assert_eq!(
        link.kind,
        EntryKind::Symlink {
            target: "run.sh".into()
        }
    );
    assert_eq!(trash.saved().len(), 2);

    let back = tempfile::tempdir().unwrap();
    assert!(matches!(
        trash.restore(file.id, back.path()).unwrap(),
        Restored::Written(_)
    ));
    trash.restore(link.id, back.path()).unwrap();
    let restored = back.path().join("bin/run.sh");
    assert_eq!(std::fs::read(&restored).unwrap(), b"#!/bin/sh\necho \xff\n");
    assert_eq!(mode(&restored), 0o750);
    assert_eq!(
        std::fs::read_link(back.path().join("bin/link")).unwrap(),
        Path::new("run.sh")
    );
    // A second restore finds the same bytes there: nothing to do.
    assert!(matches!(
        trash.restore(file.id, back.path()).unwrap(),
        Restored::AlreadyThere(_)
    ));
}

#[test]
fn restore_refuses_to_overwrite_a_file_that_differs_and_keeps_it() {
    let tree = tempfile::tempdir().unwrap();
    let session = tempfile::tempdir().unwrap();
    write(tree.path(), "a.txt", b"saved");
    let trash = Trash::for_session(session.path());
    let entry = trash.put(tree.path(), "a.txt", "test").unwrap().unwrap();
    write(tree.path(), "a.txt", b"yours since");
    let err = trash.restore(entry.id, tree.path()).unwrap_err();
    assert!(matches!(err, TrashError::WouldOverwrite { .. }), "{err}");
    assert!(err.to_string().contains("a.txt"), "{err}");
    assert_eq!(
        std::fs::read(tree.path().join("a.txt")).unwrap(),
        b"yours since"
    );
}

#[test]
fn missing_paths_and_folders_save_nothing_and_bad_entries_are_named() {
    let tree = tempfile::tempdir().unwrap();
    let session = tempfile::tempdir().unwrap();
    std::fs::create_dir(tree.path().join("nested")).unwrap();
    let trash = Trash::for_session(session.path());
    assert!(
        trash
            .put(tree.path(), "gone.txt", "test")
            .unwrap()
            .is_none()
    );
    assert!(trash.put(tree.path(), "nested", "test").unwrap().is_none());
    assert!(!trash.dir().exists(), "nothing saved, no folder made");
    let err = trash.restore(7, tree.path()).unwrap_err();
    assert!(err.to_string().contains("no entry 7"), "{err}");

    write(tree.path(), "x", b"x");
    trash.put(tree.path(), "x", "test").unwrap();
    let mut manifest = read_manifest(trash.dir()).unwrap();
    manifest.entries[0].path = "../escape".into();
    crate::state::write_json_atomic(trash.dir().join(MANIFEST), &manifest).unwrap();
    let err = trash.restore(1, tree.path()).unwrap_err();
    assert!(matches!(err, TrashError::BadPath { .. }), "{err}");
}

#[test]
fn a_new_value_numbers_after_the_entries_on_disk_and_remove_says_what_it_frees() {
    let tree = tempfile::tempdir().unwrap();
    let session = tempfile::tempdir().unwrap();
    write(tree.path(), "a", b"12345");
    Trash::for_session(session.path())
        .put(tree.path(), "a", "first run")
        .unwrap();
    let again = Trash::for_session(session.path());
    let entry = again.put(tree.path(), "a", "resume").unwrap().unwrap();
    assert_eq!(entry.id, 2);
    assert_eq!(again.saved(), vec![entry]);
    assert_eq!(again.entries().unwrap().len(), 2);
    assert_eq!(remove_trash(again.dir()).unwrap(), 10);
    assert!(!again.dir().exists());
    assert_eq!(remove_trash(again.dir()).unwrap(), 0);
}

fn sample() -> Vec<TrashEntry> {
    vec![
        TrashEntry {
            id: 1,
            original: "/cache/worktrees/repo-1/review-fix/slot-0/src/lib.rs".into(),
            path: "src/lib.rs".into(),
            kind: EntryKind::File { mode: 0o644 },
            size: 2300,
            reason: "rollback of an attempt in worktree slot-0 (back to 1a2b3c4)".into(),
            at_ms: 1_765_030_000_000,
        },
        TrashEntry {
            id: 2,
            original: "/cache/worktrees/repo-1/review-fix/slot-1/notes".into(),
            path: "notes".into(),
            kind: EntryKind::Symlink {
                target: "docs/notes.md".into(),
            },
            size: 13,
            reason: "removal of worktree slot-1 left by a crash".into(),
            at_ms: 1_765_030_060_000,
        },
    ]
}

#[test]
fn the_list_and_the_report_section_read_as_snapshotted() {
    let dir = Path::new("/repo/.review/fixes/fix-1765030000000/trash");
    insta::assert_snapshot!(
        "trash_list",
        render_entries("fix-1765030000000", dir, &sample())
    );
    insta::assert_snapshot!(
        "trash_report",
        render_saved("fix-1765030000000", dir, &sample())
    );
    insta::assert_snapshot!(
        "trash_report_markdown",
        render_saved_markdown("fix-1765030000000", &sample())
    );
    assert_eq!(render_saved("s", dir, &[]), "");
    assert_eq!(render_saved_markdown("s", &[]), "");
    assert_eq!(human_size(1023), "1023 B");
    assert_eq!(human_size(1536), "1.5 KiB");
}

fn entry_strategy() -> impl Strategy<Value = TrashEntry> {
    (
        1u32..10_000,
        "[a-z0-9_ .\u{e9}-]{1,12}(/[a-z0-9_.-]{1,8}){0,3}",
        prop_oneof![
            (0u32..0o7777).prop_map(|mode| EntryKind::File { mode }),
            "[^\u{0}]{1,20}".prop_map(|target| EntryKind::Symlink { target }),
        ],
        any::<u64>(),
        "\\PC{0,40}",
        any::<i64>(),
    )
        .prop_map(|(id, path, kind, size, reason, at_ms)| TrashEntry {
            id,
            original: Path::new("/w").join(&path),
            path,
            kind,
            size,
            reason,
            at_ms,
        })
}

proptest! {
    #[test]
    fn the_manifest_reads_back_what_was_written(entries in prop::collection::vec(entry_strategy(), 0..8)) {
        let dir = tempfile::tempdir().unwrap();
        let manifest = Manifest { entries };
        crate::state::write_json_atomic(dir.path().join(MANIFEST), &manifest).unwrap();
        prop_assert_eq!(read_manifest(dir.path()).unwrap(), manifest);
    }
}
