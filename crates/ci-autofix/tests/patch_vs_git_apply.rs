//! ci-autofix's patch applier against `git apply`, over the same patches.
//!
//! The question (issue 38) was whether the strict parser and applier of
//! `orchestrator_ci_autofix::patch` should give way to `git apply`. This file
//! is the answer's evidence, run against the real git:
//!
//! - On every patch both should take — good, stale, shifted, created,
//!   deleted, blank-stripped, without a final newline, several files — the
//!   two give the same verdict and byte-identical trees, and refused patches
//!   leave both trees untouched (all or nothing). A property test adds random
//!   edits diffed by git itself.
//! - Where they differ, ours is the stricter on a safety path, and each
//!   difference is asserted here: an absolute path, which `git apply -p1`
//!   reads as a path inside the repository; a rename and a mode change,
//!   which git applies and an autofix must not make; a protected path
//!   (workflows, credentials), which git has no notion of; a hunk found
//!   only far from where its header puts it.
//! - The other way round, ours takes hunks as agents write them (one line of
//!   context, a header a few lines off) that git's position rules for its
//!   own three-line diffs refuse; ours still matches every line exactly.
//!
//! So a `git apply` backend would still need our parser for the policy, and
//! the applier it would replace agrees with git on everything else: we keep
//! ours and keep this test as the check that they stay in step.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use orchestrator_ci_autofix::patch;
use proptest::prelude::*;

/// What one applier did with a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// Applied; the files afterwards.
    Applied(BTreeMap<String, Vec<u8>>),
    /// Refused; the tree was left as it was.
    Refused,
}

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args([
            "-c",
            "core.autocrlf=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap()
}

/// A git repository holding `files`, committed.
fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    assert!(git(dir.path(), &["init", "-q"]).status.success());
    for (path, text) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    assert!(git(dir.path(), &["add", "-A"]).status.success());
    let commit = git(
        dir.path(),
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "base",
            "--allow-empty",
        ],
    );
    assert!(commit.status.success(), "{commit:?}");
    dir
}

/// Every file under `root` except `.git/`, by relative path, with its mode's
/// executable bit in the key so a mode change shows.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == ".git" {
                continue;
            }
            if meta.is_dir() {
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(
                    format!("{rel} -> link"),
                    target.into_os_string().into_encoded_bytes(),
                );
            } else {
                let exec = if meta.permissions().mode() & 0o111 != 0 {
                    " (x)"
                } else {
                    ""
                };
                out.insert(format!("{rel}{exec}"), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// Our parser and applier, with `protected` as the policy.
fn ours(root: &Path, diff: &str, protected: &dyn Fn(&str) -> bool) -> Verdict {
    let before = snapshot(root);
    match patch::parse(diff).and_then(|p| patch::apply(root, &p, protected)) {
        Ok(_) => Verdict::Applied(snapshot(root)),
        Err(_) => {
            assert_eq!(
                snapshot(root),
                before,
                "ours left a refused patch half-applied"
            );
            Verdict::Refused
        }
    }
}

/// `git apply` (its default `-p1`, no fuzz), the way a git backend would
/// call it: check first, then apply.
fn git_apply(root: &Path, diff: &str) -> Verdict {
    let before = snapshot(root);
    let file = root.join(".git").join("candidate.diff");
    std::fs::write(&file, diff).unwrap();
    let file = file.to_string_lossy().into_owned();
    if !git(root, &["apply", "--check", &file]).status.success() {
        assert_eq!(snapshot(root), before, "git apply --check wrote something");
        return Verdict::Refused;
    }
    let applied = git(root, &["apply", &file]);
    assert!(
        applied.status.success(),
        "git apply after --check: {applied:?}"
    );
    Verdict::Applied(snapshot(root))
}

fn never(_: &str) -> bool {
    false
}

/// Both appliers on fresh copies of `before`.
fn both(before: &[(&str, &str)], diff: &str) -> (Verdict, Verdict) {
    let a = repo(before);
    let b = repo(before);
    (ours(a.path(), diff, &never), git_apply(b.path(), diff))
}

const LIB: &str = "fn a() {}\nfn b() {}\nfn c() {}\nfn d() {}\nfn e() {}\n";

/// A case: its name, the files before, the diff, and whether it applies.
type Case = (
    &'static str,
    Vec<(&'static str, &'static str)>,
    &'static str,
    bool,
);

/// Patches both must take, or both refuse, with the same result.
#[expect(clippy::too_many_lines, reason = "the cases are one table")]
fn agreed_cases() -> Vec<Case> {
    vec![
        (
            "modify",
            vec![("src/lib.rs", LIB)],
            "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -2,3 +2,3 @@\n fn b() {}\n-fn c() {}\n+fn c() -> u32 { 1 }\n fn d() {}\n",
            true,
        ),
        (
            "add a file in a new folder",
            vec![("src/lib.rs", LIB)],
            "--- /dev/null\n+++ b/src/deep/new.rs\n@@ -0,0 +1,2 @@\n+pub fn n() {}\n+pub fn m() {}\n",
            true,
        ),
        (
            "delete a file",
            vec![("src/lib.rs", LIB), ("old.txt", "x\ny\n")],
            "--- a/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n",
            true,
        ),
        (
            "a shifted hunk, and its offset carried to the next",
            vec![(
                "lib.rs",
                "// 1\n// 2\n// 3\nfn a() {}\nfn b() {}\nfn c() {}\nfn d() {}\nfn e() {}\nx\ny\nz\n",
            )],
            "--- a/lib.rs\n+++ b/lib.rs\n@@ -2,3 +2,3 @@\n fn a() {}\n-fn b() {}\n+fn b() { 0 }\n fn c() {}\n@@ -7,3 +7,3 @@\n x\n-y\n+Y\n z\n",
            true,
        ),
        (
            "several files",
            vec![("one.txt", "one\n"), ("two.txt", "two\n")],
            "--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-one\n+ONE\n--- /dev/null\n+++ b/three.txt\n@@ -0,0 +1 @@\n+3\n--- a/two.txt\n+++ b/two.txt\n@@ -1 +1 @@\n-two\n+TWO\n",
            true,
        ),
        (
            "add a final newline",
            vec![("f", "a\nb")],
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
            true,
        ),
        (
            "remove a final newline",
            vec![("f", "a\nb\n")],
            "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+b\n\\ No newline at end of file\n",
            true,
        ),
        (
            "a blank context line stripped of its space",
            vec![("f", "a\n\nc\n")],
            "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-c\n+C\n",
            true,
        ),
        (
            "a format-patch mail with timestamps",
            vec![("f", "a\n")],
            "From 1 Mon\nSubject: fix\n---\n f | 2 +-\n\ndiff --git a/f b/f\nindex 1..2 100644\n--- a/f\t2026-05-07 10:00:00\n+++ b/f\t2026-05-07 10:01:00\n@@ -1 +1 @@ fn main\n-a\n+b\n-- \n2.45.0\n",
            true,
        ),
        (
            "CRLF lines matched with CRLF",
            vec![("w.txt", "x\r\ny\r\n")],
            "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n x\r\n-y\r\n+Y\r\n",
            true,
        ),
        (
            "stale: a context line changed since",
            vec![("src/lib.rs", LIB)],
            "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -2,3 +2,3 @@\n fn b() {}\n-fn c() {}\n+fn c() -> u32 { 1 }\n fn D() {}\n",
            false,
        ),
        (
            "stale: LF context against a CRLF file",
            vec![("w.txt", "x\r\ny\r\n")],
            "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n x\n-y\n+Y\n",
            false,
        ),
        (
            "stale: the second file fails, so the first is not written",
            vec![("one.txt", "one\n"), ("two.txt", "two\n")],
            "--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-one\n+ONE\n--- a/two.txt\n+++ b/two.txt\n@@ -1 +1 @@\n-deux\n+TWO\n",
            false,
        ),
        (
            "stale: creating a file that exists",
            vec![("f", "a\n")],
            "--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+x\n",
            false,
        ),
        (
            "stale: deleting a file whose content differs",
            vec![("f", "a\nB\n")],
            "--- a/f\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
            false,
        ),
        (
            "stale: modifying a file that does not exist",
            vec![("f", "a\n")],
            "--- a/g\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n",
            false,
        ),
        (
            "malformed: the header counts more lines than the hunk has",
            vec![("src/lib.rs", LIB)],
            "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,4 +1,4 @@\n fn a() {}\n-fn b() {}\n+fn b() { 1 }\n fn c() {}\n",
            false,
        ),
        (
            "malicious: `..` leaves the repository",
            vec![("f", "a\n")],
            "--- /dev/null\n+++ b/../escape.txt\n@@ -0,0 +1 @@\n+x\n",
            false,
        ),
        (
            "malicious: a path inside .git",
            vec![("f", "a\n")],
            "--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+x\n",
            false,
        ),
        (
            "malicious: a binary patch",
            vec![("f", "a\n")],
            "diff --git a/f b/f\nindex 1..2 100644\nGIT binary patch\nliteral 1\nIcmZpb000310RR91\n\nliteral 0\nHcmV?d00001\n\n",
            false,
        ),
    ]
}

#[test]
fn on_good_stale_and_malicious_patches_ours_and_git_apply_agree() {
    for (name, before, diff, applies) in agreed_cases() {
        let (ours, git) = both(&before, diff);
        assert_eq!(ours, git, "{name}: the two appliers disagree");
        assert_eq!(
            matches!(ours, Verdict::Applied(_)),
            applies,
            "{name}: expected {}",
            if applies { "to apply" } else { "a refusal" }
        );
    }
}

#[test]
fn a_symlinked_folder_leading_out_is_refused_by_both() {
    let outside = tempfile::tempdir().unwrap();
    let diff = "--- /dev/null\n+++ b/out/evil.txt\n@@ -0,0 +1 @@\n+x\n";
    for applier in ["ours", "git"] {
        let dir = repo(&[("f", "a\n")]);
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let verdict = match applier {
            "ours" => ours(dir.path(), diff, &never),
            _ => git_apply(dir.path(), diff),
        };
        assert_eq!(verdict, Verdict::Refused, "{applier}");
        assert!(
            !outside.path().join("evil.txt").exists(),
            "{applier} wrote outside"
        );
    }
}

/// The differences, each a reason the policy needs our parser.
#[test]
fn where_they_differ_ours_refuses_what_an_autofix_must_not_do() {
    // An absolute path: git's `-p1` drops its first component and writes
    // `etc/motd` inside the repository, a file the agent did not name.
    let (o, g) = both(
        &[("f", "a\n")],
        "--- /dev/null\n+++ /etc/motd\n@@ -0,0 +1 @@\n+x\n",
    );
    assert_eq!(o, Verdict::Refused);
    assert!(
        matches!(&g, Verdict::Applied(t) if t.contains_key("etc/motd")),
        "{g:?}"
    );

    // A rename: git moves the file (past any per-path policy that reads
    // only the `---`/`+++` lines); an autofix edits files in place.
    let rename = "diff --git a/f b/g\nsimilarity index 100%\nrename from f\nrename to g\n";
    let (o, g) = both(&[("f", "a\n")], rename);
    assert_eq!(o, Verdict::Refused);
    assert!(matches!(&g, Verdict::Applied(t) if t.contains_key("g") && !t.contains_key("f")));

    // A mode change: git makes the file executable.
    let mode = "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n";
    let (o, g) = both(&[("run.sh", "echo hi\n")], mode);
    assert_eq!(o, Verdict::Refused);
    assert!(
        matches!(&g, Verdict::Applied(t) if t.contains_key("run.sh (x)")),
        "{g:?}"
    );

    // A protected path: git has no notion of one.
    let workflow = "--- a/.github/workflows/ci.yml\n+++ b/.github/workflows/ci.yml\n@@ -1 +1 @@\n-on: push\n+on: []\n";
    let before = [(".github/workflows/ci.yml", "on: push\n")];
    let a = repo(&before);
    let protected = |p: &str| orchestrator_ci_autofix::fix_loop::is_protected(p, &[]);
    assert_eq!(ours(a.path(), workflow, &protected), Verdict::Refused);
    let b = repo(&before);
    assert!(matches!(git_apply(b.path(), workflow), Verdict::Applied(_)));

    // A hunk that matches only far from where its header puts it: git
    // searches the whole file, ours at most MAX_OFFSET lines either way, so
    // a stale diff does not land on a look-alike snippet elsewhere.
    let far: String = (1..=80).map(|i| format!("// {i}\n")).collect::<String>() + LIB;
    let diff = "--- a/lib.rs\n+++ b/lib.rs\n@@ -2,3 +2,3 @@\n fn b() {}\n-fn c() {}\n+fn c() { 0 }\n fn d() {}\n";
    let (o, g) = both(&[("lib.rs", &far)], diff);
    assert_eq!(o, Verdict::Refused);
    assert!(matches!(g, Verdict::Applied(_)));
    const { assert!(80 > patch::MAX_OFFSET) };
}

/// The other way round: hunks as agents write them — one line of context,
/// a header a few lines off — which git's position rules for its own
/// three-line diffs refuse, and ours finds by content, exactly.
#[test]
fn where_they_differ_ours_takes_the_short_context_hunks_agents_write() {
    let shifted = "// 1\n// 2\n// 3\nfn a() {}\nfn b() {}\nfn c() {}\n";
    // A header that says line 1 with fewer than three lines of leading
    // context: git insists it match at the start of the file.
    let diff =
        "--- a/lib.rs\n+++ b/lib.rs\n@@ -1,2 +1,2 @@\n fn a() {}\n-fn b() {}\n+fn b() { 0 }\n";
    let (o, g) = both(&[("lib.rs", shifted)], diff);
    assert_eq!(g, Verdict::Refused);
    let Verdict::Applied(after) = o else {
        panic!("ours refused: {o:?}")
    };
    assert_eq!(
        after["lib.rs"],
        b"// 1\n// 2\n// 3\nfn a() {}\nfn b() { 0 }\nfn c() {}\n"
    );
    // No trailing context: git insists the hunk end at the end of the file.
    let diff =
        "--- a/lib.rs\n+++ b/lib.rs\n@@ -4,2 +4,2 @@\n fn a() {}\n-fn b() {}\n+fn b() { 0 }\n";
    let (o, g) = both(&[("lib.rs", shifted)], diff);
    assert_eq!(g, Verdict::Refused);
    assert!(matches!(o, Verdict::Applied(_)), "{o:?}");
}

/// Lines of a small alphabet, so edits meet repeated lines.
fn lines() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop::sample::select(vec!["a", "b", "c", "", "fn x() {}", "}"]),
        0..40,
    )
    .prop_map(|v| v.into_iter().map(str::to_owned).collect())
}

fn text(lines: &[String], final_newline: bool) -> String {
    let mut t = lines.join("\n");
    if final_newline && !lines.is_empty() {
        t.push('\n');
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A diff git itself makes between two random versions applies the same
    /// way with both, and gives the new version.
    #[test]
    fn a_diff_made_by_git_applies_the_same_with_both(
        old in lines(), new in lines(), old_nl in any::<bool>(), new_nl in any::<bool>(),
    ) {
        let (old, new) = (text(&old, old_nl), text(&new, new_nl));
        prop_assume!(old != new);
        let maker = repo(&[("f.txt", &old)]);
        std::fs::write(maker.path().join("f.txt"), &new).unwrap();
        let out = git(maker.path(), &["diff", "--no-color", "--no-ext-diff"]);
        let diff = String::from_utf8(out.stdout).unwrap();
        let (o, g) = both(&[("f.txt", &old)], &diff);
        prop_assert_eq!(&o, &g);
        let mut expected = BTreeMap::new();
        expected.insert("f.txt".to_owned(), new.into_bytes());
        prop_assert_eq!(o, Verdict::Applied(expected));
    }
}
