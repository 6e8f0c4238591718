use std::time::Instant;

use proptest::prelude::*;

use super::*;
use crate::state::cache::{CacheLease, MARKER_FILE, repo_folder};

const GIB: u64 = 1 << 30;

fn at(hours_ago: i64) -> Timestamp {
    let now: Timestamp = "2026-12-06T12:00:00Z".parse().unwrap();
    now - jiff::SignedDuration::from_hours(hours_ago)
}

fn folder(kind: CacheKind, key: &str, owner: Owner, hours_ago: i64, bytes: u64) -> CacheFolder {
    CacheFolder {
        kind,
        path: PathBuf::from("/cache").join(kind.dir_name()).join(key),
        key: key.to_owned(),
        marked: owner != Owner::Unknown,
        owner,
        last_used: at(hours_ago),
        bytes,
        in_use: false,
    }
}

fn live(path: &str) -> Owner {
    Owner::Repo {
        path: PathBuf::from(path),
        exists: true,
    }
}

fn gone(path: &str) -> Owner {
    Owner::Repo {
        path: PathBuf::from(path),
        exists: false,
    }
}

fn policy(max_size: u64, keep: Option<&str>) -> PrunePolicy {
    PrunePolicy {
        max_size,
        keep: keep.map(str::to_owned),
        now: at(0),
        unmarked_grace: UNMARKED_GRACE,
    }
}

/// The plan as `(key of the folder, reason)`, in removal order.
fn check(folders: &[CacheFolder], policy: &PrunePolicy, expected: &[(&str, RemovalReason)]) {
    let plan: Vec<(String, RemovalReason)> = plan_prune(folders, policy)
        .into_iter()
        .map(|r| {
            (
                format!("{}/{}", r.folder.kind.dir_name(), r.folder.key),
                r.reason,
            )
        })
        .collect();
    let expected: Vec<(String, RemovalReason)> = expected
        .iter()
        .map(|(k, r)| ((*k).to_owned(), *r))
        .collect();
    assert_eq!(plan, expected);
}

#[test]
fn gone_repositories_go_first_then_the_least_recently_used_targets_down_to_the_cap() {
    use CacheKind::{Targets, Worktrees};
    use RemovalReason::{OverCap, Stale};
    let folders = [
        folder(Targets, "a", live("/a"), 1, 8 * GIB),
        folder(Targets, "b", live("/b"), 50, 8 * GIB),
        folder(Targets, "c", gone("/c"), 2, 8 * GIB),
        folder(Targets, "d", live("/d"), 30, 8 * GIB),
        folder(Worktrees, "c", gone("/c"), 2, GIB),
        folder(Worktrees, "b", live("/b"), 500, GIB),
        folder(Targets, "old", Owner::Unknown, 48, GIB),
        folder(Targets, "young", Owner::Unknown, 2, GIB),
    ];
    // 34 GiB of targets; the gone repository's and the old unmarked folder
    // leave 25; "b" then "d" are the least recently used, which leaves 9
    // (the worktree folder of a live repository is never evicted).
    check(
        &folders,
        &policy(16 * GIB, Some("a")),
        &[
            ("targets/c", Stale),
            ("worktrees/c", Stale),
            ("targets/old", Stale),
            ("targets/b", OverCap),
            ("targets/d", OverCap),
        ],
    );
    // Under the cap only the stale go; the current repository and a young
    // unmarked folder stay even when nothing else is left to evict.
    check(
        &folders,
        &policy(100 * GIB, Some("a")),
        &[
            ("targets/c", Stale),
            ("worktrees/c", Stale),
            ("targets/old", Stale),
        ],
    );
    let mut held = folders.clone();
    for f in &mut held {
        f.in_use = f.key != "a";
    }
    check(&held, &policy(0, Some("a")), &[]);
}

fn arb_folder() -> impl Strategy<Value = CacheFolder> {
    (
        prop_oneof![Just(CacheKind::Targets), Just(CacheKind::Worktrees)],
        0..12u8,
        prop_oneof![
            Just(Owner::Unknown),
            any::<bool>().prop_map(|exists| Owner::Repo {
                path: PathBuf::from("/r"),
                exists
            })
        ],
        0..100i64,
        0..10 * GIB,
        any::<bool>(),
    )
        .prop_map(|(kind, key, owner, hours_ago, bytes, in_use)| {
            let mut f = folder(kind, &format!("k{key}"), owner, hours_ago, bytes);
            f.in_use = in_use;
            f
        })
}

proptest! {
    #[test]
    fn a_prune_ends_under_the_cap_unless_only_unremovable_folders_are_left(
        mut folders in proptest::collection::vec(arb_folder(), 0..24),
        cap in 0..40 * GIB,
        keep in proptest::option::of(0..12u8),
    ) {
        // One folder per kind and key, as on disk.
        let mut seen = HashSet::new();
        folders.retain(|f| seen.insert((f.kind, f.key.clone())));
        let keep = keep.map(|k| format!("k{k}"));
        let policy = policy(cap, keep.as_deref());
        let plan = plan_prune(&folders, &policy);
        let removed: HashSet<&Path> = plan.iter().map(|r| r.folder.path.as_path()).collect();
        prop_assert_eq!(removed.len(), plan.len(), "a folder planned twice");
        let mut left_targets = 0;
        let mut all_unremovable = true;
        for f in &folders {
            let gone = removed.contains(f.path.as_path());
            let unremovable = f.in_use
                || keep.as_deref() == Some(f.key.as_str())
                || f.is_young_unmarked(policy.now, policy.unmarked_grace);
            prop_assert!(!(gone && unremovable), "removed {:?}", f);
            if gone && f.kind == CacheKind::Worktrees {
                prop_assert!(f.is_stale(policy.now, policy.unmarked_grace), "evicted {:?}", f);
            }
            if !gone && f.kind == CacheKind::Targets {
                left_targets += f.bytes;
                all_unremovable &= unremovable;
            }
        }
        prop_assert!(left_targets <= cap || all_unremovable, "{} > {}", left_targets, cap);
    }
}

/// A real repository (its `.git` folder is all the check looks at).
fn repo(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    fs::create_dir_all(dir.join(".git")).unwrap();
    dir
}

/// Claims `r`'s folders as a run that made a worktree and a build does.
fn used(cache: &Path, r: &Path, files: usize, bytes: usize) {
    let lease = CacheLease::claim_in(cache, r).unwrap();
    fill(&repo_folder(cache, CacheKind::Targets, r), files, bytes);
    fs::create_dir_all(repo_folder(cache, CacheKind::Worktrees, r).join("fix-1")).unwrap();
    drop(lease);
}

fn fill(dir: &Path, files: usize, bytes: usize) {
    let slot = dir.join("review-fix-slot-0").join("debug");
    fs::create_dir_all(&slot).unwrap();
    for i in 0..files {
        fs::write(slot.join(format!("f{i}")), vec![1u8; bytes]).unwrap();
    }
}

fn set_last_used(dir: &Path, hours_ago: i64) {
    let mut marker = read_marker(dir).unwrap();
    marker.last_used = (Timestamp::now() - jiff::SignedDuration::from_hours(hours_ago)).to_string();
    write_json_atomic(dir.join(MARKER_FILE), &marker).unwrap();
}

#[test]
fn a_prune_on_disk_removes_gone_and_old_folders_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let repos = tmp.path().join("repos");
    let (current, other, removed_repo, busy) = (
        repo(&repos, "current"),
        repo(&repos, "other"),
        repo(&repos, "removed"),
        repo(&repos, "busy"),
    );
    // Outside the cache, reachable through a symbolic link inside it.
    let precious = tmp.path().join("precious");
    fs::create_dir_all(&precious).unwrap();
    fs::write(precious.join("keep.txt"), "mine").unwrap();
    for r in [&current, &other, &removed_repo, &busy] {
        used(&cache, r, 8, 64 * 1024);
    }
    let held = CacheLease::claim_in(&cache, &busy).unwrap();
    for (r, hours) in [(&other, 5), (&busy, 9), (&removed_repo, 1)] {
        set_last_used(&repo_folder(&cache, CacheKind::Targets, r), hours);
    }
    std::os::unix::fs::symlink(&precious, cache.join("targets").join("link")).unwrap();
    let link_in = repo_folder(&cache, CacheKind::Targets, &other).join("review-fix-slot-0");
    std::os::unix::fs::symlink(&precious, link_in.join("outside")).unwrap();
    let unmarked = cache.join("targets").join("old-version-0123456789ab");
    fill(&unmarked, 1, 1024);
    fs::remove_dir_all(removed_repo.join(".git")).unwrap();

    // A cap that fits one repository's targets: the current one stays,
    // the busy one is held, the removed repository's goes as stale, the
    // other as least recently used, the young unmarked one is skipped.
    let started = Instant::now();
    let report = prune(&cache, &PrunePolicy::for_run(&current, 600 * 1024)).unwrap();
    let took = started.elapsed();
    let removed: Vec<(PathBuf, RemovalReason)> = report
        .removed
        .iter()
        .map(|r| (r.folder.path.clone(), r.reason))
        .collect();
    assert_eq!(
        removed,
        [
            (
                repo_folder(&cache, CacheKind::Targets, &removed_repo),
                RemovalReason::Stale
            ),
            (
                repo_folder(&cache, CacheKind::Worktrees, &removed_repo),
                RemovalReason::Stale
            ),
            (
                repo_folder(&cache, CacheKind::Targets, &other),
                RemovalReason::OverCap
            ),
        ]
    );
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert_eq!(report.skipped[0].0.path, unmarked);
    for r in &report.removed {
        assert!(!r.folder.path.exists());
    }
    for kept in [&current, &busy] {
        assert!(
            repo_folder(&cache, CacheKind::Targets, kept)
                .join("review-fix-slot-0")
                .is_dir()
        );
    }
    assert!(
        repo_folder(&cache, CacheKind::Worktrees, &other).is_dir(),
        "a live repository keeps its worktrees"
    );
    assert_eq!(
        fs::read_to_string(precious.join("keep.txt")).unwrap(),
        "mine"
    );
    assert!(cache.join("targets").join("link").exists());
    assert!(report.targets_after < report.targets_before);
    let leftovers: Vec<_> = fs::read_dir(cache.join("targets"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(EVICTING))
        .collect();
    assert!(leftovers.is_empty());
    assert!(took < Duration::from_secs(2), "{took:?}");
    drop(held);
}

#[test]
fn a_run_waiting_for_an_evicted_folder_claims_a_fresh_one() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let r = repo(tmp.path(), "r");
    used(&cache, &r, 1, 1024);
    let dir = repo_folder(&cache, CacheKind::Targets, &r);
    let folders = list(&cache).unwrap();
    let target = folders.iter().find(|f| f.path == dir).unwrap();
    assert!(remove_folder(&cache, target).unwrap());
    assert!(!dir.exists());
    let lease = CacheLease::claim_in(&cache, &r).unwrap();
    assert!(read_marker(&dir).is_some());
    // Listed while held: the recorded size is not trusted, and the folder
    // cannot be removed.
    let held = list(&cache).unwrap();
    assert!(held.iter().all(|f| f.in_use));
    assert!(!remove_folder(&cache, &held[0]).unwrap());
    drop(lease);
}

#[test]
fn clean_selects_by_repository_and_staleness() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let (a, b) = (repo(tmp.path(), "a"), repo(tmp.path(), "b"));
    for r in [&a, &b] {
        used(&cache, r, 1, 1024);
    }
    let report = clean(&cache, &Clean::Stale).unwrap();
    assert!(report.removed.is_empty());
    let report = clean(&cache, &Clean::Repo(a.clone())).unwrap();
    let removed: Vec<&Path> = report
        .removed
        .iter()
        .map(|r| r.folder.path.as_path())
        .collect();
    assert_eq!(removed, [repo_folder(&cache, CacheKind::Targets, &a)]);
    fs::remove_dir_all(&b).unwrap();
    let report = clean(&cache, &Clean::All).unwrap();
    let removed: Vec<&Path> = report
        .removed
        .iter()
        .map(|r| r.folder.path.as_path())
        .collect();
    assert_eq!(
        removed,
        [
            repo_folder(&cache, CacheKind::Targets, &b),
            repo_folder(&cache, CacheKind::Worktrees, &b),
        ]
    );
    assert!(repo_folder(&cache, CacheKind::Worktrees, &a).is_dir());
}
