//! The [`Vcs`] conformance check of [`Vcs::cherry_pick_series`].

use super::{VcsHarness, fresh, must, read, write};
use crate::vcs::Vcs;

/// A series of picks applies in order and stops at the first that does not
/// apply, with the tree at the last one applied and nothing half-applied;
/// in the user's checkout as in a worktree.
pub async fn cherry_pick_series_stops_at_the_first_that_does_not_apply(h: &dyn VcsHarness) {
    let (dir, vcs) = fresh(h).await;
    let root = dir.path();
    let wt_parent = must(tempfile::tempdir(), "temp dir");
    let base = must(vcs.head().await, "head");
    let source = must(
        vcs.worktree_add(&wt_parent.path().join("src"), "orch/src", &base)
            .await,
        "worktree_add",
    );
    let mut commits = Vec::new();
    for (file, text) in [("a.txt", "one\n"), ("b.txt", "two\n"), ("d.txt", "three\n")] {
        write(&wt_parent.path().join("src"), file, text);
        let c = must(source.commit(&[file.to_string()], file).await, "commit");
        commits.push(c);
    }
    // All three stack on a tree at the base.
    let target_path = wt_parent.path().join("all");
    let target = must(
        vcs.worktree_add(&target_path, "orch/all", &base).await,
        "worktree_add",
    );
    let applied = must(target.cherry_pick_series(&commits).await, "series");
    assert_eq!(applied.len(), 3, "conformance: the whole series applies");
    assert_eq!(must(target.head().await, "head"), applied[2]);
    let log = must(target.log_since(&base).await, "log");
    let messages: Vec<&str> = log.iter().map(|c| c.message.trim_end()).collect();
    assert_eq!(
        messages,
        ["a.txt", "b.txt", "d.txt"],
        "conformance: in order"
    );
    assert_eq!(read(&target_path, "d.txt").as_deref(), Some("three\n"));
    // The second conflicts with a commit of the target's own: the series
    // stops after the first, in a worktree and in the user's checkout.
    let stuck_path = wt_parent.path().join("stuck");
    let stuck = must(
        vcs.worktree_add(&stuck_path, "orch/stuck", &base).await,
        "worktree_add",
    );
    for (tree, tree_root) in [(&stuck, stuck_path.as_path()), (&vcs, root)] {
        write(tree_root, "b.txt", "ours\n");
        let ours = must(tree.commit(&["b.txt".to_string()], "ours").await, "commit");
        let applied = must(tree.cherry_pick_series(&commits).await, "series");
        assert_eq!(applied.len(), 1, "conformance: stops at the conflict");
        assert_eq!(must(tree.head().await, "head"), applied[0]);
        let log = must(tree.log_since(&ours).await, "log");
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].message.trim_end(), "a.txt");
        assert_eq!(read(tree_root, "b.txt").as_deref(), Some("ours\n"));
        assert_eq!(read(tree_root, "a.txt").as_deref(), Some("one\n"));
        assert!(
            must(tree.status().await, "status").is_clean(),
            "conformance: nothing left half-applied"
        );
    }
    for (path, branch) in [
        ("src", "orch/src"),
        ("all", "orch/all"),
        ("stuck", "orch/stuck"),
    ] {
        must(
            vcs.worktree_remove(&wt_parent.path().join(path), branch)
                .await,
            "worktree_remove",
        );
    }
}
