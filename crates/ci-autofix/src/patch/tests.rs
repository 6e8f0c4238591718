use super::*;
use proptest::prelude::*;

/// A temp repository holding `files`.
fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    dir
}

/// Every file under `root`, by relative path.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    out
}

fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn never(_: &str) -> bool {
    false
}

/// Parses and applies `diff` in a repository of `before`; returns the
/// result and the files afterwards.
fn check(
    before: &[(&str, &str)],
    diff: &str,
) -> (Result<Vec<String>, PatchError>, BTreeMap<String, String>) {
    let dir = repo(before);
    let result = parse(diff).and_then(|p| apply(dir.path(), &p, &never));
    (result, snapshot(dir.path()))
}

const LIB: &str = "fn a() {}\nfn b() {}\nfn c() {}\nfn d() {}\nfn e() {}\n";

#[test]
fn modifies_a_file() {
    let diff = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -2,3 +2,3 @@\n fn b() {}\n-fn c() {}\n+fn c() -> u32 { 1 }\n fn d() {}\n";
    let (result, after) = check(&[("src/lib.rs", LIB)], diff);
    assert_eq!(result.unwrap(), ["src/lib.rs"]);
    assert_eq!(
        after,
        files(&[(
            "src/lib.rs",
            "fn a() {}\nfn b() {}\nfn c() -> u32 { 1 }\nfn d() {}\nfn e() {}\n"
        )])
    );
}

#[test]
fn adds_a_file_in_a_new_folder() {
    let diff = "diff --git a/src/new/mod.rs b/src/new/mod.rs\nnew file mode 100644\nindex 0000000..e69de29\n--- /dev/null\n+++ b/src/new/mod.rs\n@@ -0,0 +1,2 @@\n+pub mod x;\n+pub mod y;\n";
    let (result, after) = check(&[("src/lib.rs", LIB)], diff);
    assert_eq!(result.unwrap(), ["src/new/mod.rs"]);
    assert_eq!(
        after,
        files(&[
            ("src/lib.rs", LIB),
            ("src/new/mod.rs", "pub mod x;\npub mod y;\n")
        ])
    );
    // Creating a file that exists is refused.
    let (result, after) = check(&[("src/new/mod.rs", "old\n")], diff);
    assert_eq!(
        result.unwrap_err().to_string(),
        "`src/new/mod.rs`: the diff creates it, but it already exists"
    );
    assert_eq!(after, files(&[("src/new/mod.rs", "old\n")]));
}

#[test]
fn deletes_a_file() {
    let diff = "--- a/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n";
    let (result, after) = check(&[("old.txt", "one\ntwo\n"), ("keep", "k\n")], diff);
    assert_eq!(result.unwrap(), ["old.txt"]);
    assert_eq!(after, files(&[("keep", "k\n")]));
    // A deletion must remove the whole content.
    let (result, after) = check(&[("old.txt", "one\ntwo\nthree\n")], diff);
    assert_eq!(
        result.unwrap_err().to_string(),
        "`old.txt`: the diff deletes it, but lines remain after removing the hunks"
    );
    assert_eq!(after, files(&[("old.txt", "one\ntwo\nthree\n")]));
    // So must a missing file.
    let (result, _) = check(&[], diff);
    assert_eq!(
        result.unwrap_err().to_string(),
        "`old.txt`: the diff changes it, but it does not exist"
    );
}

#[test]
fn a_shifted_hunk_is_found_and_its_offset_carries_to_the_next() {
    let shifted = format!("// 1\n// 2\n// 3\n{LIB}x\ny\nz\n");
    // Both hunks were written against LIB + "x\ny\nz\n" (3 lines up).
    let diff = "--- a/lib.rs\n+++ b/lib.rs\n@@ -1,2 +1,2 @@\n-fn a() {}\n+fn a() { 0 }\n fn b() {}\n@@ -6,2 +6,2 @@\n x\n-y\n+Y\n";
    let (result, after) = check(&[("lib.rs", &shifted)], diff);
    assert_eq!(result.unwrap(), ["lib.rs"]);
    assert_eq!(
        after["lib.rs"],
        "// 1\n// 2\n// 3\nfn a() { 0 }\nfn b() {}\nfn c() {}\nfn d() {}\nfn e() {}\nx\nY\nz\n"
    );
    // Beyond MAX_OFFSET the hunk is not found.
    let far = format!("{}{LIB}", "//\n".repeat(MAX_OFFSET + 1));
    let (result, after) = check(&[("lib.rs", &far)], diff);
    assert_eq!(
        result.unwrap_err().to_string(),
        "`lib.rs`, hunk 1 (@@ -1,2 +1,2 @@): not found at line 1 nor within 50 lines of it; line 1 is `//` where the hunk expects `fn a() {}`"
    );
    assert_eq!(after["lib.rs"], far);
}

#[test]
fn mismatching_context_rejects_the_patch() {
    let diff = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -2,3 +2,3 @@\n fn b() {}\n-fn c() {}\n+fn c() -> u32 { 1 }\n fn D() {}\n";
    let (result, after) = check(&[("src/lib.rs", LIB)], diff);
    assert_eq!(
        result.unwrap_err().to_string(),
        "`src/lib.rs`, hunk 1 (@@ -2,3 +2,3 @@): not found at line 2 nor within 50 lines of it; line 4 is `fn d() {}` where the hunk expects `fn D() {}`"
    );
    assert_eq!(after, files(&[("src/lib.rs", LIB)]));
    // Trailing whitespace and line endings count: no fuzz.
    let crlf = LIB.replace('\n', "\r\n");
    let (result, _) = check(&[("src/lib.rs", &crlf)], diff);
    assert!(
        result
            .unwrap_err()
            .to_string()
            .ends_with("line 2 is `fn b() {}\\r` where the hunk expects `fn b() {}`")
    );
}

#[test]
fn a_failing_second_file_writes_nothing() {
    let diff = "--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-one\n+ONE\n--- /dev/null\n+++ b/three.txt\n@@ -0,0 +1 @@\n+3\n--- a/two.txt\n+++ b/two.txt\n@@ -1 +1 @@\n-deux\n+TWO\n";
    let before = [("one.txt", "one\n"), ("two.txt", "two\n")];
    let (result, after) = check(&before, diff);
    assert_eq!(
        result.unwrap_err().to_string(),
        "`two.txt`, hunk 1 (@@ -1,1 +1,1 @@): not found at line 1 nor within 50 lines of it; line 1 is `two` where the hunk expects `deux`"
    );
    assert_eq!(after, files(&before));
}

#[test]
fn paths_outside_the_repository_are_refused() {
    for (path, reason) in [
        ("../escape.txt", "it leaves the repository (`..`)"),
        ("src/../../escape.txt", "it leaves the repository (`..`)"),
        ("/etc/passwd", "it is absolute"),
        (".git/config", "it is inside the .git directory"),
        (
            "sub/.GIT/hooks/pre-commit",
            "it is inside the .git directory",
        ),
    ] {
        for prefix in ["", "b/"] {
            let diff = format!("--- /dev/null\n+++ {prefix}{path}\n@@ -0,0 +1 @@\n+x\n");
            let err = parse(&diff).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("path `{path}` is not allowed: {reason}"),
                "{diff}"
            );
        }
    }
    assert_eq!(normalize_path("./src//lib.rs").unwrap(), "src/lib.rs");
}

#[cfg(unix)]
#[test]
fn symlinks_leading_out_of_the_repository_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.txt"), "x\n").unwrap();
    let dir = repo(&[("inside.txt", "x\n")]);
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    std::os::unix::fs::symlink("inside.txt", dir.path().join("link.txt")).unwrap();
    let through_dir = "--- a/out/x.txt\n+++ b/out/x.txt\n@@ -1 +1 @@\n-x\n+y\n";
    let err = apply(dir.path(), &parse(through_dir).unwrap(), &never).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("path `out/x.txt` is not allowed: its folder resolves to "),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("x.txt")).unwrap(),
        "x\n"
    );
    let new_in_dir = "--- /dev/null\n+++ b/out/new.txt\n@@ -0,0 +1 @@\n+y\n";
    assert!(apply(dir.path(), &parse(new_in_dir).unwrap(), &never).is_err());
    assert!(!outside.path().join("new.txt").exists());
    let link = "--- a/link.txt\n+++ b/link.txt\n@@ -1 +1 @@\n-x\n+y\n";
    assert_eq!(
        apply(dir.path(), &parse(link).unwrap(), &never)
            .unwrap_err()
            .to_string(),
        "path `link.txt` is not allowed: it is a symlink"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("inside.txt")).unwrap(),
        "x\n"
    );
}

#[test]
fn protected_paths_are_refused_before_anything_is_written() {
    let diff = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n-fn a() {}\n+fn a() { 0 }\n--- a/.github/workflows/ci.yml\n+++ b/.github/workflows/ci.yml\n@@ -1 +1 @@\n-on: push\n+on: []\n";
    let before = [
        ("src/lib.rs", LIB),
        (".github/workflows/ci.yml", "on: push\n"),
    ];
    let dir = repo(&before);
    let extra = Vec::new();
    let protected = |p: &str| crate::fix_loop::is_protected(p, &extra);
    let err = apply(dir.path(), &parse(diff).unwrap(), &protected).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`.github/workflows/ci.yml` is a protected path; the patch was refused"
    );
    assert_eq!(snapshot(dir.path()), files(&before));
}

#[test]
fn missing_final_newlines_are_kept_exact() {
    // Add a final newline.
    let diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n";
    let (result, after) = check(&[("f", "a\nb")], diff);
    assert_eq!(result.unwrap(), ["f"]);
    assert_eq!(after["f"], "a\nb\n");
    // The diff says the file has no final newline, but it has one.
    let (result, _) = check(&[("f", "a\nb\n")], diff);
    assert!(
        result
            .unwrap_err()
            .to_string()
            .ends_with("line 2 is `b` where the hunk expects `b` (no newline at end of file)")
    );
    // Remove a final newline.
    let diff = "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+b\n\\ No newline at end of file\n";
    let (result, after) = check(&[("f", "a\nb\n")], diff);
    assert_eq!(result.unwrap(), ["f"]);
    assert_eq!(after["f"], "a\nb");
    // Dropping the newline of a line that is not the last is refused.
    let diff = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+a\n\\ No newline at end of file\n";
    let (result, after) = check(&[("f", "a\nb\n")], diff);
    assert!(
        result
            .unwrap_err()
            .to_string()
            .ends_with("its last line has no newline at the end of the file, but the file goes on")
    );
    assert_eq!(after["f"], "a\nb\n");
}

#[test]
fn blank_context_lines_without_their_space_are_accepted() {
    let diff = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-c\n+C\n";
    let (result, after) = check(&[("f", "a\n\nc\n")], diff);
    assert_eq!(result.unwrap(), ["f"]);
    assert_eq!(after["f"], "a\n\nC\n");
}

#[test]
fn malformed_diffs_are_errors() {
    for (diff, message) in [
        (
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n+B\n+C\n-b\n",
            "diff line 6: hunk at line 3 has more lines than its header counts (after 1 of 2 old and 2 of 2 new lines)",
        ),
        (
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n c\n",
            "diff line 7: line after the hunk at line 3 that its header does not count (@@ -1,2 +1,2 @@)",
        ),
        (
            "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n",
            "diff line 5: hunk at line 3 is cut short: the diff ends after 2 of 3 old and 1 of 3 new lines",
        ),
        (
            "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\nsome prose\n",
            "diff line 6: hunk at line 3 is cut short: `some prose` is not a context, removed or added line (after 2 of 3 old and 1 of 3 new lines)",
        ),
        (
            "--- a/f\n+++ b/f\n@@ -1,x +1 @@\n a\n",
            "diff line 3: malformed hunk header `@@ -1,x +1 @@` (expected `@@ -a,b +c,d @@`)",
        ),
        (
            "--- a/f\n+++ b/f\nno hunk\n",
            "diff line 3: file header for `f` is not followed by a hunk",
        ),
        (
            "Here:\n@@ -1 +1 @@\n-a\n+b\n",
            "diff line 2: hunk header without a `--- `/`+++ ` file header before it",
        ),
        (
            "--- a/old\n+++ b/new\n@@ -1 +1 @@\n-a\n+b\n",
            "diff line 1: renaming `old` to `new` is not supported",
        ),
        (
            "diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to y\n",
            "diff line 1: a git diff section without `---`/`+++` hunks (rename, copy, mode change, binary or empty file) is not supported",
        ),
        (
            "--- \"a/sp ace\"\n+++ \"b/sp ace\"\n@@ -1 +1 @@\n-a\n+b\n",
            "diff line 1: the quoted path \"a/sp ace\" is not supported",
        ),
        (
            "--- /dev/null\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n",
            "diff line 3: hunk @@ -1,1 +1,1 @@ of new file `f` has old lines",
        ),
    ] {
        assert_eq!(parse(diff).unwrap_err().to_string(), message, "{diff}");
    }
    assert!(matches!(
        apply(Path::new("."), &parse("just prose\n").unwrap(), &never),
        Err(PatchError::Empty)
    ));
}

#[test]
fn parses_headers_with_timestamps_and_a_format_patch_signature() {
    let diff = "From 1 Mon\nSubject: fix\n---\n f | 2 +-\n\ndiff --git a/f b/f\nindex 1..2 100644\n--- a/f\t2026-05-07 10:00:00\n+++ b/f\t2026-05-07 10:01:00\n@@ -1 +1 @@ fn main\n-a\n+b\n-- \n2.45.0\n";
    let patch = parse(diff).unwrap();
    assert_eq!(patch.files.len(), 1);
    assert_eq!(patch.files[0].path, "f");
    assert_eq!(patch.files[0].change, FileChange::Modify);
    assert_eq!(patch.files[0].hunks[0].lines.len(), 2);
}

#[test]
fn finds_the_diff_in_an_answer() {
    let fenced = "I fixed it.\n\n```rust\nfn x() {}\n```\n\n```diff\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n```\n\nAnd:\n\n  ```patch\n  --- a/g\n  +++ b/g\n  @@ -1 +1 @@\n  -c\n  +d\n  ```\n";
    assert_eq!(
        extract_diff(fenced).unwrap(),
        "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-c\n+d\n"
    );
    assert_eq!(
        parse(&extract_diff(fenced).unwrap()).unwrap().files.len(),
        2
    );
    let whole = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
    assert_eq!(extract_diff(whole).as_deref(), Some(whole));
    assert_eq!(extract_diff("I changed src/lib.rs directly.\n"), None);
    // A diff-looking text inside a non-diff fence is still a whole-text diff.
    let in_plain_fence = "```\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n```\n";
    let patch = parse(&extract_diff(in_plain_fence).unwrap()).unwrap();
    assert_eq!(patch.files[0].path, "f");
}

/// Whether every hunk body has the line counts of its header (checked
/// independently of `parse`).
fn counts_agree(diff: &str) -> bool {
    let mut expected: Option<(usize, usize)> = None;
    let mut seen = (0, 0);
    let mut ok = true;
    for line in diff.lines().skip(2) {
        if let Some(rest) = line.strip_prefix("@@ -") {
            ok &= expected.is_none_or(|e| e == seen);
            let ranges = rest.split(" @@").next().unwrap();
            let (o, n) = ranges.split_once(" +").unwrap();
            let len = |r: &str| r.split_once(',').map_or(1, |(_, l)| l.parse().unwrap());
            expected = Some((len(o), len(n)));
            seen = (0, 0);
        } else if line.starts_with(' ') {
            seen = (seen.0 + 1, seen.1 + 1);
        } else if line.starts_with('-') {
            seen.0 += 1;
        } else if line.starts_with('+') {
            seen.1 += 1;
        }
    }
    ok && expected.is_none_or(|e| e == seen)
}

#[test]
fn similar_diffs_with_wrong_counts_are_refused() {
    // similar 2.7 (every algorithm) diffs "\n\na" against " \n\n\n\n" with
    // a `+1,3` header over four new lines; GNU patch refuses it too.
    let diff = similar::TextDiff::from_lines("\n\na", " \n\n\n\n")
        .unified_diff()
        .context_radius(1)
        .header("a/f", "b/f")
        .to_string();
    assert!(diff.contains("@@ -1,3 +1,3 @@"), "{diff}");
    assert!(!counts_agree(&diff));
    assert_eq!(
        parse(&diff).unwrap_err().to_string(),
        "diff line 7: hunk at line 3 has more lines than its header counts (after 1 of 3 old and 3 of 3 new lines)"
    );
}

fn text_from(lines: Vec<String>, final_newline: bool) -> String {
    let mut t = lines.join("\n");
    if final_newline && !t.is_empty() {
        t.push('\n');
    }
    t
}

proptest! {
    /// A diff made by `similar` from old to new applies to old and gives new, exactly.
    #[test]
    fn a_similar_diff_applies_back_exactly(
        old_lines in proptest::collection::vec("[abc ]{0,3}", 0..30),
        new_lines in proptest::collection::vec("[abc ]{0,3}", 0..30),
        old_nl in any::<bool>(),
        new_nl in any::<bool>(),
        context in 0usize..4,
    ) {
        let old = text_from(old_lines, old_nl);
        let new = text_from(new_lines, new_nl);
        prop_assume!(old != new);
        let diff = similar::TextDiff::from_lines(&old, &new)
            .unified_diff()
            .context_radius(context)
            .header("a/dir/file.txt", "b/dir/file.txt")
            .to_string();
        // similar 2.7 sometimes writes a hunk header that disagrees with
        // its body (see `similar_diffs_with_wrong_counts_are_refused`);
        // such a diff is not a well-formed input.
        prop_assume!(counts_agree(&diff));
        let patch = parse(&diff).map_err(|e| TestCaseError::fail(format!("{e}\n{diff}")))?;
        let result = apply_hunks("dir/file.txt", &old, &patch.files[0].hunks)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{diff}")))?;
        prop_assert_eq!(&result, &new, "{}", diff);
        // And through the file system.
        let dir = repo(&[("dir/file.txt", &old)]);
        prop_assert_eq!(apply(dir.path(), &patch, &never).unwrap(), vec!["dir/file.txt".to_owned()]);
        prop_assert_eq!(std::fs::read_to_string(dir.path().join("dir/file.txt")).unwrap(), new);
    }
}
