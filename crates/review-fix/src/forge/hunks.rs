//! Unified diffs as `git diff` prints them, read into hunks per file, and
//! the line arithmetic delivery needs: which new-side lines a request's
//! diff adds, which lines a fix replaces, and where a line of a later tree
//! stood in an earlier one.

use std::collections::BTreeMap;

/// One hunk: `@@ -old_start,old_len +new_start,new_len @@` and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// First line on the old side (for an empty side, the line before).
    pub old_start: u64,
    /// Lines on the old side.
    pub old_len: u64,
    /// First line on the new side (for an empty side, the line before).
    pub new_start: u64,
    /// Lines on the new side.
    pub new_len: u64,
    /// The hunk's body lines, each with its `' '`, `-` or `+` mark.
    pub lines: Vec<String>,
}

impl Hunk {
    /// The new-side text of the hunk's lines (context and added).
    pub fn new_text(&self) -> String {
        self.lines
            .iter()
            .filter_map(|l| l.strip_prefix(' ').or_else(|| l.strip_prefix('+')))
            .map(|l| format!("{l}\n"))
            .collect()
    }
}

/// A diff's hunks by file (the path after the change), in order.
pub type FileHunks = BTreeMap<String, Vec<Hunk>>;

/// Reads `diff` (`git diff` output, any number of files). Binary files and
/// deleted files have no hunks here.
pub fn parse(diff: &str) -> FileHunks {
    let mut files = FileHunks::new();
    let mut file: Option<String> = None;
    let mut current: Option<Hunk> = None;
    let flush = |files: &mut FileHunks, file: &Option<String>, hunk: &mut Option<Hunk>| {
        if let (Some(f), Some(h)) = (file, hunk.take()) {
            files.entry(f.clone()).or_default().push(h);
        }
    };
    for line in diff.lines() {
        if line.starts_with("diff --git ") {
            flush(&mut files, &file, &mut current);
            file = None;
        } else if let Some(path) = line.strip_prefix("+++ ") {
            flush(&mut files, &file, &mut current);
            file = path.strip_prefix("b/").map(str::to_owned);
        } else if let Some(header) = line.strip_prefix("@@ ") {
            flush(&mut files, &file, &mut current);
            current = hunk_header(header);
        } else if let Some(h) = current.as_mut() {
            if line.starts_with([' ', '+', '-']) {
                h.lines.push(line.to_owned());
            } else if line.is_empty() {
                // An empty context line some tools print without its space.
                h.lines.push(" ".to_owned());
            }
        }
    }
    flush(&mut files, &file, &mut current);
    files
}

/// `-a,b +c,d @@ …` → the hunk's numbers (a missing length is 1).
fn hunk_header(header: &str) -> Option<Hunk> {
    let mut parts = header.split_whitespace();
    let old = parts.next()?.strip_prefix('-')?;
    let new = parts.next()?.strip_prefix('+')?;
    let range = |r: &str| -> Option<(u64, u64)> {
        match r.split_once(',') {
            Some((s, l)) => Some((s.parse().ok()?, l.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (old_start, old_len) = range(old)?;
    let (new_start, new_len) = range(new)?;
    Some(Hunk {
        old_start,
        old_len,
        new_start,
        new_len,
        lines: Vec::new(),
    })
}

/// The new-side line numbers of `path` that the diff adds (`+` lines):
/// the lines a forge takes a suggestion on.
pub fn added_lines(files: &FileHunks, path: &str) -> Vec<u64> {
    let mut added = Vec::new();
    for h in files.get(path).into_iter().flatten() {
        let mut new_line = h.new_start;
        for l in &h.lines {
            if l.starts_with('+') {
                added.push(new_line);
                new_line += 1;
            } else if l.starts_with(' ') {
                new_line += 1;
            }
        }
    }
    added
}

/// The new-side lines of `path` around `line` that `diff` shows (up to
/// `radius` on each side, within the hunk holding it), each marked as the
/// diff marks it: the context a reviewer saw beside the comment.
pub fn context(files: &FileHunks, path: &str, line: u64, radius: u64) -> Option<String> {
    for h in files.get(path).into_iter().flatten() {
        let mut new_line = h.new_start;
        let mut shown = Vec::new();
        for l in &h.lines {
            let on_new = !l.starts_with('-');
            let at = new_line;
            if on_new {
                new_line += 1;
            }
            if at + radius >= line && at <= line + radius {
                shown.push((at, l.as_str(), on_new));
            }
        }
        if shown.iter().any(|(at, _, on_new)| *on_new && *at == line) {
            return Some(shown.iter().map(|(_, l, _)| format!("{l}\n")).collect());
        }
    }
    None
}

/// Where line `line` of the new side stood on the old side, when the diff
/// left it untouched; `None` when a hunk added or changed it.
pub fn to_old_side(hunks: &[Hunk], line: u64) -> Option<u64> {
    let mut shift: i64 = 0;
    for h in hunks {
        let new_end = h.new_start + h.new_len;
        if h.new_len > 0 && line >= h.new_start && line < new_end {
            return inside(h, line);
        }
        let before_line = if h.new_len == 0 {
            h.new_start < line
        } else {
            new_end <= line
        };
        if before_line {
            shift += i64::try_from(h.old_len).ok()? - i64::try_from(h.new_len).ok()?;
        }
    }
    u64::try_from(i64::try_from(line).ok()? + shift).ok()
}

/// The old-side line of new-side `line` inside hunk `h`: a context line's.
fn inside(h: &Hunk, line: u64) -> Option<u64> {
    let (mut new_line, mut old_line) = (h.new_start, h.old_start);
    for l in &h.lines {
        match l.as_bytes().first() {
            Some(b' ') if new_line == line => return Some(old_line),
            Some(b' ') => {
                new_line += 1;
                old_line += 1;
            }
            Some(b'+') if new_line == line => return None,
            Some(b'+') => new_line += 1,
            _ => old_line += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = r"diff --git a/notes.txt b/notes.txt
index 1111111..2222222 100644
--- a/notes.txt
+++ b/notes.txt
@@ -1,3 +1,5 @@
 one
-two
+zwei
+drei
+vier
 five
@@ -10,0 +13,1 @@ fn x
+tail
";

    #[test]
    fn hunks_are_read_per_file_with_added_lines_and_context() {
        let files = parse(DIFF);
        let hunks = &files["notes.txt"];
        assert_eq!(
            (
                hunks[0].old_start,
                hunks[0].old_len,
                hunks[0].new_start,
                hunks[0].new_len
            ),
            (1, 3, 1, 5)
        );
        assert_eq!(
            (hunks[1].old_start, hunks[1].old_len, hunks[1].new_start),
            (10, 0, 13)
        );
        assert_eq!(added_lines(&files, "notes.txt"), vec![2, 3, 4, 13]);
        assert_eq!(
            context(&files, "notes.txt", 3, 1).as_deref(),
            Some("-two\n+zwei\n+drei\n+vier\n")
        );
        assert_eq!(context(&files, "notes.txt", 9, 1), None);
        assert_eq!(hunks[0].new_text(), "one\nzwei\ndrei\nvier\nfive\n");
    }

    /// `git diff --no-index` of two texts: the diff delivery reads.
    fn git_diff(dir: &std::path::Path, old: &str, new: &str) -> String {
        std::fs::write(dir.join("old"), old).unwrap();
        std::fs::write(dir.join("new"), new).unwrap();
        let out = std::process::Command::new("git")
            .args(["diff", "--no-index", "--no-color", "-U3", "old", "new"])
            .current_dir(dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).replace("+++ b/new", "+++ b/f")
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Against real git's diffs of random edits: every line the diff
        /// does not add maps to an old line with the same text, in order,
        /// and every added line maps nowhere.
        #[test]
        fn every_line_git_keeps_maps_to_its_old_place(
            old in proptest::collection::vec("[a-d]", 0..30),
            edits in proptest::collection::vec((0usize..30, 0u8..3, "[a-f]"), 0..8),
        ) {
            let mut new = old.clone();
            for (at, kind, text) in edits {
                let at = at.min(new.len());
                match kind {
                    0 => new.insert(at, text),
                    1 if at < new.len() => { new.remove(at); }
                    _ if at < new.len() => new[at] = text,
                    _ => new.push(text),
                }
            }
            let dir = tempfile::tempdir().unwrap();
            let lines = |v: &[String]| v.iter().map(|l| format!("{l}\n")).collect::<String>();
            let unified = git_diff(dir.path(), &lines(&old), &lines(&new));
            let files = parse(&unified);
            let hunks = files.get("f").cloned().unwrap_or_default();
            let added = added_lines(&files, "f");
            let mut last_old = 0;
            for n in 1..=new.len() as u64 {
                let mapped = to_old_side(&hunks, n);
                if added.contains(&n) {
                    proptest::prop_assert_eq!(mapped, None, "{}", unified);
                    continue;
                }
                let Some(o) = mapped else {
                    return Err(proptest::test_runner::TestCaseError::fail(format!("line {n} kept but not mapped:\n{unified}")));
                };
                proptest::prop_assert!(o > last_old, "{}", unified);
                proptest::prop_assert_eq!(&old[o as usize - 1], &new[n as usize - 1], "{}", unified);
                last_old = o;
            }
        }
    }

    #[test]
    fn lines_map_back_to_the_old_side_unless_a_hunk_made_them() {
        let hunks = &parse(DIFF)["notes.txt"];
        assert_eq!(to_old_side(hunks, 1), Some(1));
        assert_eq!(to_old_side(hunks, 3), None);
        assert_eq!(to_old_side(hunks, 5), Some(3));
        assert_eq!(to_old_side(hunks, 8), Some(6));
        assert_eq!(to_old_side(hunks, 13), None);
        assert_eq!(to_old_side(hunks, 12), Some(10));
        assert_eq!(to_old_side(hunks, 14), Some(11));
    }
}
