//! Property: whatever the user's uncommitted state and whatever an agent does
//! afterwards, `restore` brings the working tree back to exactly the state at
//! the checkpoint — or, when the agent touched a pre-dirty file, refuses and
//! changes nothing. Real git, random scenarios.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use orchestrator_adapters::git::GitVcs;
use orchestrator_core::{Vcs, VcsError};
use proptest::prelude::*;

const TRACKED: &[&str] = &["a.txt", "with space.txt", "dir/ü 1.txt", "dir/deep/x.rs"];
const UNTRACKED: &[&str] = &["notes.md", "dir/scratch ü.txt"];
const CREATED: &[&str] = &["new.txt", "dir/new dir/n.rs", "other/z.txt"];

#[derive(Debug, Clone, Copy)]
enum Edit {
    Keep,
    Modify(u8),
    Delete,
    /// Modify and `git add` it.
    Stage(u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        Just(Edit::Keep),
        any::<u8>().prop_map(Edit::Modify),
        Just(Edit::Delete),
        any::<u8>().prop_map(Edit::Stage),
    ]
}

#[derive(Debug, Clone)]
struct Scenario {
    /// The user's edits to tracked files before the checkpoint.
    user: Vec<Edit>,
    /// Which untracked user files exist.
    user_untracked: Vec<bool>,
    /// The agent's edits to tracked files (applied only to files the user
    /// left clean, unless `touch_dirty`).
    agent: Vec<Edit>,
    /// Which files the agent creates (`Some(stage)`).
    agent_created: Vec<Option<bool>>,
    /// Whether the agent also overwrites one pre-dirty file.
    touch_dirty: bool,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        proptest::collection::vec(edit(), TRACKED.len()),
        proptest::collection::vec(any::<bool>(), UNTRACKED.len()),
        proptest::collection::vec(edit(), TRACKED.len()),
        proptest::collection::vec(proptest::option::of(any::<bool>()), CREATED.len()),
        any::<bool>(),
    )
        .prop_map(
            |(user, user_untracked, agent, agent_created, touch_dirty)| Scenario {
                user,
                user_untracked,
                agent,
                agent_created,
                touch_dirty,
            },
        )
}

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

fn write(dir: &Path, path: &str, content: &str) {
    let full = dir.join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, content).unwrap();
}

fn apply(dir: &Path, path: &str, edit: Edit, who: &str) {
    match edit {
        Edit::Keep => {}
        Edit::Modify(n) => write(dir, path, &format!("{who} {n}\n")),
        Edit::Delete => {
            let _ = std::fs::remove_file(dir.join(path));
        }
        Edit::Stage(n) => {
            write(dir, path, &format!("{who} staged {n}\n"));
            git(dir, &["add", "--", path]);
        }
    }
}

/// Every file under `dir` except `.git`, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if path.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

async fn check(s: Scenario) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "P"]);
    git(dir, &["config", "user.email", "p@example.invalid"]);
    for (i, path) in TRACKED.iter().enumerate() {
        write(dir, path, &format!("head {i}\n"));
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "init"]);
    let vcs = GitVcs::open(dir).await.unwrap();

    for (path, edit) in TRACKED.iter().zip(&s.user) {
        apply(dir, path, *edit, "user");
    }
    for (path, exists) in UNTRACKED.iter().zip(&s.user_untracked) {
        if *exists {
            write(dir, path, "user notes\n");
        }
    }
    let before = snapshot(dir);
    let status_before = vcs.status().await.unwrap();
    let checkpoint = vcs.checkpoint().await.unwrap();

    let mut touched = None;
    for (i, (path, edit)) in TRACKED.iter().zip(&s.agent).enumerate() {
        if matches!(s.user[i], Edit::Keep) {
            apply(dir, path, *edit, "agent");
        } else if s.touch_dirty && touched.is_none() {
            write(dir, path, "agent overwrote user work\n");
            touched = Some((*path).to_owned());
        }
    }
    for (path, created) in CREATED.iter().zip(&s.agent_created) {
        if let Some(stage) = created {
            write(dir, path, "agent created\n");
            if *stage {
                git(dir, &["add", "--", path]);
            }
        }
    }
    let after_agent = snapshot(dir);

    match (vcs.restore(&checkpoint).await, touched) {
        (Ok(_), None) => {
            assert_eq!(snapshot(dir), before, "work tree differs after restore");
            assert_eq!(vcs.status().await.unwrap(), status_before);
        }
        (Err(VcsError::TouchedDirty { paths }), Some(path)) => {
            assert_eq!(paths, vec![path]);
            assert_eq!(
                snapshot(dir),
                after_agent,
                "a refused restore changed files"
            );
        }
        (result, touched) => panic!("restore gave {result:?}, touched dirty file: {touched:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn restore_returns_exactly_to_the_checkpoint(s in scenario()) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(check(s));
    }
}
