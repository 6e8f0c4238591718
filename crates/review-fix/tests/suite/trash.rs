//! A resume after `kill -9` removes the worktrees the killed run left, and
//! what someone changed in one — an edited tracked file, a new untracked
//! one — goes to the session's `trash/` first, and the resume says so.
//! Real git, a real `cargo test`, the real process killed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_core::event::{CollectingSink, Event};
use orchestrator_core::trash::read_manifest;
use orchestrator_review_fix::{VerifyMode, run};

use crate::support::{
    config, copy_quickstart, git, kill_after_first_commit, run_as_child, services,
};

const CHILD_ENV: &str = "REVIEW_FIX_TRASH_CHILD_REPO";
const TEST: &str = "trash::a_resume_saves_what_was_changed_in_a_left_worktree_and_says_so";

/// The worktrees of `repo` other than itself.
fn worktrees(repo: &Path) -> Vec<PathBuf> {
    let main = std::fs::canonicalize(repo).unwrap();
    git(repo, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(PathBuf::from)
        .filter(|p| *p != main)
        .collect()
}

#[tokio::test]
async fn a_resume_saves_what_was_changed_in_a_left_worktree_and_says_so() {
    if run_as_child(CHILD_ENV, VerifyMode::Each).await {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (repo, input) = copy_quickstart(tmp.path());
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    kill_after_first_commit(TEST, CHILD_ENV, tmp.path(), &base);

    // Someone works in a worktree the killed run left.
    let left = worktrees(&repo);
    let slot = left.first().expect("the killed run left a worktree");
    let mut lib = std::fs::read_to_string(slot.join("src/lib.rs")).unwrap();
    lib.push_str("// edited after the kill\n");
    std::fs::write(slot.join("src/lib.rs"), &lib).unwrap();
    std::fs::write(slot.join("someones-notes.txt"), "written after the kill\n").unwrap();

    let sink = Arc::new(CollectingSink::new());
    let mut services = services(&repo, &tmp.path().join("target"), Arc::default()).await;
    services.sink = sink.clone();
    let mut cfg = config(vec![input]);
    cfg.resume = true;
    let report = run(cfg, services).await.unwrap();
    assert_eq!(report.count("fixed"), 6);
    assert!(worktrees(&repo).is_empty(), "the left worktrees are gone");

    let session = repo.join(".review/fixes").join(&report.fix_session_id);
    let entries = read_manifest(&session.join("trash")).unwrap().entries;
    let saved = |path: &str| {
        let entry = entries.iter().find(|e| e.path == path);
        let entry = entry.unwrap_or_else(|| panic!("{path} not in trash: {entries:?}"));
        assert!(entry.reason.contains("left by a crash"), "{entry:?}");
        std::fs::read_to_string(session.join("trash").join(entry.stored())).unwrap()
    };
    assert_eq!(saved("src/lib.rs"), lib);
    assert_eq!(saved("someones-notes.txt"), "written after the kill\n");

    let said: Vec<String> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Warning { message } => Some(message),
            _ => None,
        })
        .filter(|m| m.contains("saved their uncommitted files first"))
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("someones-notes.txt"), "{}", said[0]);
    assert!(
        said[0].contains("orchestrator trash restore"),
        "{}",
        said[0]
    );
    let summary = std::fs::read_to_string(session.join("fix-summary.md")).unwrap();
    assert!(summary.contains("## Trash"), "{summary}");
    assert!(summary.contains("someones-notes.txt"), "{summary}");
}
