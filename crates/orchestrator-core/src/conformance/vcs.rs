//! The [`Vcs`] conformance suite.
//!
//! Every check builds a fresh repository through the harness in its own
//! temporary directory, so checks are independent.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use super::must;

mod series;
use crate::vcs::{Checkpoint, CherryPick, CommitId, Vcs, VcsError};
pub use series::cherry_pick_series_stops_at_the_first_that_does_not_apply;

/// Builds repositories of the implementation under test.
#[async_trait]
pub trait VcsHarness: Send + Sync {
    /// Creates a repository in the empty directory `dir` whose first commit
    /// holds `files` (path, content), with branch `main` checked out, and
    /// returns a `Vcs` for it.
    async fn init(&self, dir: &Path, files: &[(&str, &str)]) -> Arc<dyn Vcs>;
}

const FILES: &[(&str, &str)] = &[
    ("a.txt", "alpha\n"),
    ("b.txt", "bravo\n"),
    ("d.txt", "delta\n"),
    ("dir with space/é.txt", "unicode\n"),
];

/// A hostile commit message: it must reach history byte for byte and run nothing.
pub const HOSTILE_MESSAGE: &str =
    "fix(security): quote \"it\" & `backtick` $(touch pwned) [F-1]\n\nbody line 'two'\n日本語 ✓";

fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        must(std::fs::create_dir_all(parent), "create parent directory");
    }
    must(std::fs::write(&path, content), "write file");
}

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel)).ok()
}

async fn fresh(h: &dyn VcsHarness) -> (tempfile::TempDir, Arc<dyn Vcs>) {
    let dir = must(tempfile::tempdir(), "create temp dir");
    let vcs = h.init(dir.path(), FILES).await;
    (dir, vcs)
}

/// Runs every check.
pub async fn run_suite(h: &dyn VcsHarness) {
    status_reports_modified_and_untracked(h).await;
    restore_undoes_exactly_the_write_set(h).await;
    restore_refuses_when_dirty_files_were_touched(h).await;
    commit_takes_exactly_the_given_paths(h).await;
    commit_rejects_bad_paths_and_empty_commits(h).await;
    diff_shows_what_a_commit_changed(h).await;
    worktree_commit_and_cherry_pick(h).await;
    cherry_pick_conflict_changes_nothing(h).await;
    cherry_pick_series_stops_at_the_first_that_does_not_apply(h).await;
    worktree_remove_finishes_an_interrupted_removal(h).await;
    worktree_move_moves_a_clean_worktree(h).await;
    cherry_pick_never_touches_uncommitted_work(h).await;
}

/// `status` lists modified and untracked files, minus excluded folders.
pub async fn status_reports_modified_and_untracked(h: &dyn VcsHarness) {
    let (dir, vcs) = fresh(h).await;
    let root = dir.path();
    assert!(
        must(vcs.status().await, "status").is_clean(),
        "conformance: a fresh repository is clean"
    );
    assert_eq!(
        must(vcs.current_branch().await, "branch").as_deref(),
        Some("main")
    );
    write(root, "a.txt", "changed\n");
    write(root, "new file.txt", "new\n");
    must(vcs.exclude(".review/").await, "exclude");
    must(vcs.exclude(".review/").await, "exclude twice is harmless");
    write(root, ".review/fixes/state.json", "{}");
    let status = must(vcs.status().await, "status");
    assert_eq!(
        status.modified,
        vec!["a.txt".to_string()],
        "conformance: modified"
    );
    assert_eq!(
        status.untracked,
        vec!["new file.txt".to_string()],
        "conformance: untracked, excluded folder hidden"
    );
    must(std::fs::remove_file(root.join("d.txt")), "delete");
    let status = must(vcs.status().await, "status");
    assert!(
        status.modified.contains(&"d.txt".to_string()),
        "conformance: a deleted tracked file is modified: {status:?}"
    );
}

/// `restore` restores changed files, removes created ones, brings back deleted
/// ones, and leaves files that were dirty before the checkpoint alone.
pub async fn restore_undoes_exactly_the_write_set(h: &dyn VcsHarness) {
    let (dir, vcs) = fresh(h).await;
    let root = dir.path();
    // The user's own uncommitted work.
    write(root, "a.txt", "user's edit\n");
    write(root, "notes.md", "user's untracked notes\n");
    let before = must(vcs.status().await, "status");
    let cp = must(vcs.checkpoint().await, "checkpoint");
    // The "agent" works.
    write(root, "b.txt", "agent edit\n");
    write(root, "created/by agent.txt", "new\n");
    must(std::fs::remove_file(root.join("d.txt")), "delete");
    let changed = must(vcs.changed_since(&cp).await, "changed_since");
    assert_eq!(
        changed,
        vec![
            "b.txt".to_string(),
            "created/by agent.txt".to_string(),
            "d.txt".to_string()
        ],
        "conformance: the write-set is exactly the agent's changes"
    );
    let mut restored = must(vcs.restore(&cp).await, "restore");
    restored.sort();
    assert_eq!(
        restored, changed,
        "conformance: restore reports the write-set"
    );
    assert_eq!(read(root, "b.txt").as_deref(), Some("bravo\n"));
    assert_eq!(read(root, "d.txt").as_deref(), Some("delta\n"));
    assert_eq!(read(root, "created/by agent.txt"), None);
    assert_eq!(read(root, "a.txt").as_deref(), Some("user's edit\n"));
    assert_eq!(
        read(root, "notes.md").as_deref(),
        Some("user's untracked notes\n")
    );
    assert_eq!(
        must(vcs.status().await, "status"),
        before,
        "conformance: status after restore equals status at the checkpoint"
    );
}

/// A change to a file that was dirty at the checkpoint is an error, and then
/// nothing is restored.
pub async fn restore_refuses_when_dirty_files_were_touched(h: &dyn VcsHarness) {
    let (dir, vcs) = fresh(h).await;
    let root = dir.path();
    write(root, "a.txt", "user's edit\n");
    let cp = must(vcs.checkpoint().await, "checkpoint");
    write(root, "a.txt", "agent overwrote the user's edit\n");
    write(root, "b.txt", "agent edit\n");
    match vcs.changed_since(&cp).await {
        Err(VcsError::TouchedDirty { paths }) => assert_eq!(paths, vec!["a.txt".to_string()]),
        other => panic!("conformance: changed_since must report TouchedDirty, got {other:?}"),
    }
    assert!(
        matches!(vcs.restore(&cp).await, Err(VcsError::TouchedDirty { .. })),
        "conformance: restore must refuse"
    );
    assert_eq!(
        read(root, "b.txt").as_deref(),
        Some("agent edit\n"),
        "conformance: a refused restore restores nothing"
    );
    assert_eq!(
        read(root, "a.txt").as_deref(),
        Some("agent overwrote the user's edit\n")
    );
}

/// `commit` takes exactly the named paths; the message survives unchanged;
/// `is_ancestor` follows the history.
pub async fn commit_takes_exactly_the_given_paths(h: &dyn VcsHarness) {
    let (dir, vcs) = fresh(h).await;
    let root = dir.path();
    let base = must(vcs.head().await, "head");
    write(root, "b.txt", "fixed\n");
    write(root, "a.txt", "unrelated user edit\n");
    write(root, "dir with space/é.txt", "also fixed\n");
    must(std::fs::remove_file(root.join("d.txt")), "delete");
    let commit = must(
        vcs.commit(
            &[
                "b.txt".to_string(),
                "dir with space/é.txt".to_string(),
                "d.txt".to_string(),
            ],
            HOSTILE_MESSAGE,
        )
        .await,
        "commit",
    );
    assert_eq!(
        must(vcs.head().await, "head"),
        commit,
        "conformance: HEAD advances"
    );
    let log = must(vcs.log_since(&base).await, "log_since");
    assert_eq!(log.len(), 1, "conformance: one commit");
    assert_eq!(log[0].id, commit);
    assert_eq!(
        log[0].message.trim_end(),
        HOSTILE_MESSAGE,
        "conformance: message survives byte for byte"
    );
    assert!(
        !root.join("pwned").exists(),
        "conformance: the message ran nothing"
    );
    let status = must(vcs.status().await, "status");
    assert_eq!(
        status.modified,
        vec!["a.txt".to_string()],
        "conformance: only the named paths were committed"
    );
    // A second commit with the same tree content elsewhere gives a new tree id.
    write(root, "b.txt", "fixed again\n");
    must(
        vcs.commit(&["b.txt".to_string()], "second").await,
        "second commit",
    );
    let log = must(vcs.log_since(&base).await, "log_since");
    assert_eq!(log.len(), 2);
    assert_eq!(log[1].message.trim_end(), "second");
    assert_ne!(log[0].tree, log[1].tree, "conformance: trees differ");
    // Ancestry: the base and the first commit are in HEAD's history; HEAD
    // is not in the base's, and a commit the repository lacks is in none.
    let head = must(vcs.head().await, "head");
    assert!(must(vcs.is_ancestor(&base, &head).await, "is_ancestor"));
    assert!(must(vcs.is_ancestor(&commit, &head).await, "is_ancestor"));
    assert!(!must(vcs.is_ancestor(&head, &base).await, "is_ancestor"));
    let unknown = CommitId("0123456789abcdef0123456789abcdef01234567".to_owned());
    assert!(!must(vcs.is_ancestor(&unknown, &head).await, "is_ancestor"));
}

/// `diff` between two commits shows exactly the changed files: a change, an
/// addition and a deletion, in path order; nothing between equal commits.
pub async fn diff_shows_what_a_commit_changed(h: &dyn VcsHarness) {
    let (dir, vcs) = fresh(h).await;
    let root = dir.path();
    let base = must(vcs.head().await, "head");
    write(root, "b.txt", "fixed\n");
    write(root, "new.txt", "added\n");
    write(root, "a.txt", "not committed\n");
    must(std::fs::remove_file(root.join("d.txt")), "delete");
    let paths = ["b.txt", "d.txt", "new.txt"].map(String::from);
    let commit = must(vcs.commit(&paths, "change").await, "commit");
    let diff = must(vcs.diff(&base, &commit).await, "diff");
    let headers: Vec<&str> = diff
        .lines()
        .filter(|l| l.starts_with("--- ") || l.starts_with("+++ "))
        .map(|l| l.split('\t').next().unwrap_or(l))
        .collect();
    assert_eq!(
        headers,
        [
            "--- a/b.txt",
            "+++ b/b.txt",
            "--- a/d.txt",
            "+++ /dev/null",
            "--- /dev/null",
            "+++ b/new.txt"
        ],
        "conformance: one header pair per changed file, in path order:\n{diff}"
    );
    for line in ["-bravo", "+fixed", "-delta", "+added"] {
        assert!(
            diff.lines().any(|l| l == line),
            "conformance: the diff has `{line}`:\n{diff}"
        );
    }
    assert!(
        !diff.contains("alpha") && !diff.contains("not committed"),
        "conformance: uncommitted and unchanged files are not in it:\n{diff}"
    );
    assert_eq!(
        must(
            vcs.diff(&commit, &commit).await,
            "diff of a commit with itself"
        ),
        "",
        "conformance: no change, no diff"
    );
}

/// Paths outside the repository and commits with no change are errors.
pub async fn commit_rejects_bad_paths_and_empty_commits(h: &dyn VcsHarness) {
    let (_dir, vcs) = fresh(h).await;
    assert!(
        vcs.commit(&["../outside.txt".to_string()], "x")
            .await
            .is_err(),
        "conformance: a path leaving the repository is refused"
    );
    assert!(
        vcs.commit(&["b.txt".to_string()], "nothing changed")
            .await
            .is_err(),
        "conformance: an empty commit is refused"
    );
}

/// A worktree gets its own branch; its commit can be cherry-picked back and
/// the worktree removed.
pub async fn worktree_commit_and_cherry_pick(h: &dyn VcsHarness) {
    let (dir, vcs) = fresh(h).await;
    let wt_parent = must(tempfile::tempdir(), "temp dir");
    let wt_path = wt_parent.path().join("wt-g1");
    let base = must(vcs.head().await, "head");
    let wt = must(
        vcs.worktree_add(&wt_path, "orch/g1", &base).await,
        "worktree_add",
    );
    assert_eq!(read(&wt_path, "b.txt").as_deref(), Some("bravo\n"));
    assert_eq!(
        must(wt.current_branch().await, "branch").as_deref(),
        Some("orch/g1")
    );
    write(&wt_path, "b.txt", "fixed in worktree\n");
    let c = must(
        wt.commit(&["b.txt".to_string()], "fix b").await,
        "worktree commit",
    );
    assert_eq!(
        read(dir.path(), "b.txt").as_deref(),
        Some("bravo\n"),
        "conformance: a worktree commit does not touch the main tree"
    );
    match must(vcs.cherry_pick(&c).await, "cherry_pick") {
        CherryPick::Applied { commit } => {
            assert_eq!(must(vcs.head().await, "head"), commit);
        }
        other => panic!("conformance: cherry-pick should apply, got {other:?}"),
    }
    assert_eq!(
        read(dir.path(), "b.txt").as_deref(),
        Some("fixed in worktree\n")
    );
    let log = must(vcs.log_since(&base).await, "log");
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].message.trim_end(), "fix b");
    must(
        vcs.worktree_remove(&wt_path, "orch/g1").await,
        "worktree_remove",
    );
    assert!(!wt_path.exists(), "conformance: worktree directory removed");
}

/// A conflicting cherry-pick reports the paths and changes nothing.
pub async fn cherry_pick_conflict_changes_nothing(h: &dyn VcsHarness) {
    let (dir, vcs) = fresh(h).await;
    let root = dir.path();
    let wt_parent = must(tempfile::tempdir(), "temp dir");
    let wt_path = wt_parent.path().join("wt-g2");
    let base = must(vcs.head().await, "head");
    let wt = must(
        vcs.worktree_add(&wt_path, "orch/g2", &base).await,
        "worktree_add",
    );
    write(&wt_path, "b.txt", "theirs\n");
    let theirs = must(wt.commit(&["b.txt".to_string()], "theirs").await, "commit");
    write(root, "b.txt", "ours\n");
    let ours = must(vcs.commit(&["b.txt".to_string()], "ours").await, "commit");
    match must(vcs.cherry_pick(&theirs).await, "cherry_pick") {
        CherryPick::Conflict { paths } => {
            assert!(
                paths.contains(&"b.txt".to_string()),
                "conformance: conflict names b.txt"
            )
        }
        other => panic!("conformance: expected a conflict, got {other:?}"),
    }
    assert_eq!(
        must(vcs.head().await, "head"),
        ours,
        "conformance: HEAD unchanged"
    );
    assert_eq!(read(root, "b.txt").as_deref(), Some("ours\n"));
    assert!(
        must(vcs.status().await, "status").is_clean(),
        "conformance: nothing left half-applied"
    );
    must(
        vcs.worktree_remove(&wt_path, "orch/g2").await,
        "worktree_remove",
    );
}

/// A worktree whose directory is already gone (a crash part-way through its
/// removal) is removed with its branch, and removing again succeeds.
pub async fn worktree_remove_finishes_an_interrupted_removal(h: &dyn VcsHarness) {
    let (_dir, vcs) = fresh(h).await;
    let wt_parent = must(tempfile::tempdir(), "temp dir");
    let wt_path = wt_parent.path().join("wt-g3");
    let base = must(vcs.head().await, "head");
    let wt = must(
        vcs.worktree_add(&wt_path, "orch/g3", &base).await,
        "worktree_add",
    );
    write(&wt_path, "b.txt", "fixed in worktree\n");
    must(wt.commit(&["b.txt".to_string()], "fix b").await, "commit");
    must(std::fs::remove_dir_all(&wt_path), "remove the directory");
    must(
        vcs.worktree_remove(&wt_path, "orch/g3").await,
        "worktree_remove of a worktree whose directory is gone",
    );
    // Neither the registration nor the branch is left: the same worktree
    // can be made again.
    must(
        vcs.worktree_add(&wt_path, "orch/g3", &base).await,
        "conformance: worktree_add after the interrupted removal",
    );
    must(
        vcs.worktree_remove(&wt_path, "orch/g3").await,
        "worktree_remove",
    );
    must(
        vcs.worktree_remove(&wt_path, "orch/g3").await,
        "conformance: removing a removed worktree again succeeds",
    );
    assert!(!wt_path.exists(), "conformance: worktree directory removed");
}

/// A clean worktree moves to a new base on its branch (tracked files
/// follow); a dirty one, the main tree, or a wrong branch is refused with
/// nothing changed.
pub async fn worktree_move_moves_a_clean_worktree(h: &dyn VcsHarness) {
    let (dir, vcs) = fresh(h).await;
    let root = dir.path();
    let wt_parent = must(tempfile::tempdir(), "temp dir");
    let wt_path = wt_parent.path().join("wt-reset");
    let base = must(vcs.head().await, "head");
    let wt = must(
        vcs.worktree_add(&wt_path, "orch/slot-0", &base).await,
        "worktree_add",
    );
    write(&wt_path, "b.txt", "from the worktree\n");
    let wt_head = must(
        wt.commit(&["b.txt".to_string()], "wt change").await,
        "commit",
    );
    write(root, "new.txt", "landed on main\n");
    let tip = must(
        vcs.commit(&["new.txt".to_string()], "main moves").await,
        "main commit",
    );
    // Dirty: refused, nothing changed.
    write(&wt_path, "a.txt", "half done\n");
    assert!(
        vcs.worktree_move(&wt_path, "orch/slot-0", &tip)
            .await
            .is_err(),
        "conformance: a worktree with a change is not reset"
    );
    assert_eq!(read(&wt_path, "a.txt").as_deref(), Some("half done\n"));
    assert_eq!(
        read(&wt_path, "b.txt").as_deref(),
        Some("from the worktree\n"),
        "conformance: a refused move leaves the files as they were"
    );
    assert!(
        read(&wt_path, "new.txt").is_none(),
        "conformance: a refused move brings nothing of the new base"
    );
    assert_eq!(
        must(wt.head().await, "head"),
        wt_head,
        "conformance: a refused move leaves the branch where it was"
    );
    write(&wt_path, "a.txt", &read(root, "a.txt").unwrap_or_default());
    // An untracked file: refused too, the file kept, the branch unmoved.
    write(&wt_path, "stray.txt", "left behind\n");
    assert!(
        vcs.worktree_move(&wt_path, "orch/slot-0", &tip)
            .await
            .is_err(),
        "conformance: a worktree with an untracked file is not reset"
    );
    assert_eq!(
        read(&wt_path, "stray.txt").as_deref(),
        Some("left behind\n")
    );
    assert_eq!(must(wt.head().await, "head"), wt_head);
    std::fs::remove_file(wt_path.join("stray.txt")).unwrap_or_default();
    assert!(
        vcs.worktree_move(&wt_path, "orch/other", &tip)
            .await
            .is_err(),
        "conformance: a worktree on another branch is not reset"
    );
    assert!(
        vcs.worktree_move(root, "main", &tip).await.is_err(),
        "conformance: the working tree itself is never reset"
    );
    let moved = must(
        vcs.worktree_move(&wt_path, "orch/slot-0", &tip).await,
        "worktree_move",
    );
    assert_eq!(must(moved.head().await, "head"), tip);
    assert_eq!(
        must(moved.current_branch().await, "branch").as_deref(),
        Some("orch/slot-0")
    );
    assert_eq!(read(&wt_path, "b.txt").as_deref(), Some("bravo\n"));
    assert_eq!(
        read(&wt_path, "new.txt").as_deref(),
        Some("landed on main\n")
    );
    assert!(must(moved.status().await, "status").is_clean());
    assert_eq!(
        must(moved.checkpoint().await, "checkpoint"),
        Checkpoint::new(tip.clone(), std::collections::BTreeMap::new()),
        "conformance: a moved worktree is clean at its base, as its checkpoint says"
    );
    must(
        vcs.worktree_remove(&wt_path, "orch/slot-0").await,
        "worktree_remove after a reset",
    );
}

/// A pick over uncommitted work: a modified path the commit also changes
/// blocks it (nothing changed, the user's bytes intact); a modified path it
/// does not change is kept as it is, uncommitted.
pub async fn cherry_pick_never_touches_uncommitted_work(h: &dyn VcsHarness) {
    let (dir, vcs) = fresh(h).await;
    let root = dir.path();
    let wt_parent = must(tempfile::tempdir(), "temp dir");
    let wt_path = wt_parent.path().join("wt-pick");
    let base = must(vcs.head().await, "head");
    let wt = must(
        vcs.worktree_add(&wt_path, "orch/pick", &base).await,
        "worktree_add",
    );
    write(&wt_path, "b.txt", "fixed\n");
    let fix = must(wt.commit(&["b.txt".to_string()], "fix b").await, "commit");
    write(root, "b.txt", "the user's edit\n");
    match must(vcs.cherry_pick(&fix).await, "cherry_pick") {
        CherryPick::Blocked { paths } => assert_eq!(paths, ["b.txt"]),
        other => panic!("conformance: a pick over a modified path is blocked, got {other:?}"),
    }
    assert_eq!(
        must(vcs.head().await, "head"),
        base,
        "conformance: HEAD unchanged"
    );
    assert_eq!(read(root, "b.txt").as_deref(), Some("the user's edit\n"));
    write(root, "b.txt", "bravo\n");
    write(root, "d.txt", "the user's other edit\n");
    match must(vcs.cherry_pick(&fix).await, "cherry_pick") {
        CherryPick::Applied { .. } => {}
        other => panic!("conformance: a pick beside a modified path applies, got {other:?}"),
    }
    assert_eq!(read(root, "b.txt").as_deref(), Some("fixed\n"));
    assert_eq!(
        read(root, "d.txt").as_deref(),
        Some("the user's other edit\n"),
        "conformance: the user's edit stays"
    );
    assert_eq!(
        must(vcs.status().await, "status").dirty_paths(),
        ["d.txt"],
        "conformance: and stays uncommitted"
    );
    must(
        vcs.worktree_remove(&wt_path, "orch/pick").await,
        "worktree_remove",
    );
}
