use std::path::PathBuf;

use orchestrator_core::state::cache::{
    CacheFolder, CacheKind, Owner, PruneReport, Removal, RemovalReason,
};

use super::*;

fn folder(kind: CacheKind, key: &str, owner: Owner, last_used: &str, bytes: u64) -> CacheFolder {
    CacheFolder {
        kind,
        path: PathBuf::from("/home/u/.cache/orchestrator")
            .join(kind.dir_name())
            .join(key),
        key: key.to_owned(),
        marked: owner != Owner::Unknown,
        owner,
        last_used: last_used.parse().unwrap(),
        bytes,
        in_use: false,
    }
}

fn repo(path: &str, exists: bool) -> Owner {
    Owner::Repo {
        path: PathBuf::from(path),
        exists,
    }
}

fn folders() -> Vec<CacheFolder> {
    let mut busy = folder(
        CacheKind::Targets,
        "api-5e0c4d1a9b2f",
        repo("/home/u/src/api", true),
        "2026-12-06T11:58:00Z",
        3 << 30,
    );
    busy.in_use = true;
    vec![
        busy,
        folder(
            CacheKind::Targets,
            "tmpx81-0c1d2e3f4a5b",
            repo("/tmp/.tmpx81", false),
            "2026-12-05T09:10:00Z",
            700 << 20,
        ),
        folder(
            CacheKind::Targets,
            "web-aa00bb11cc22",
            Owner::Unknown,
            "2026-11-30T08:00:00Z",
            12 << 30,
        ),
        folder(
            CacheKind::Worktrees,
            "api-5e0c4d1a9b2f",
            repo("/home/u/src/api", true),
            "2026-12-06T11:58:00Z",
            48 << 10,
        ),
    ]
}

#[test]
fn the_list_says_whose_each_folder_is_and_what_clean_stale_would_free() {
    let now = "2026-12-06T12:00:00Z".parse().unwrap();
    let text = render_list(
        Path::new("/home/u/.cache/orchestrator"),
        &folders(),
        20 << 30,
        now,
    );
    insta::assert_snapshot!(text);
    let empty = render_list(Path::new("/c"), &[], 20 << 30, now);
    assert_eq!(
        empty,
        "cache /c: build caches 0 B (cap 20.0 GiB), worktrees 0 B\nno repository folders\n"
    );
}

#[test]
fn clean_says_what_it_removed_kept_and_freed() {
    let all = folders();
    let report = PruneReport {
        removed: vec![
            Removal {
                folder: all[1].clone(),
                reason: RemovalReason::Stale,
            },
            Removal {
                folder: all[2].clone(),
                reason: RemovalReason::Stale,
            },
        ],
        skipped: vec![(all[0].clone(), "in use by a running flow".to_owned())],
        targets_before: 0,
        targets_after: 0,
    };
    insta::assert_snapshot!(render_clean(&report));
}
