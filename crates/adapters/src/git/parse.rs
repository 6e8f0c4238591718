//! Parsers for git's machine-readable output (`-z` NUL-separated lists,
//! `status --porcelain=v1 -z`, `push --porcelain`, `cat-file --batch`).
//!
//! All of them work on bytes: paths may hold spaces, quotes, newlines and any
//! unicode, and only NUL separates them.

use orchestrator_core::vcs::{Status, VcsError};

/// Converts one path from git output to a `String`, refusing non-UTF-8 paths
/// (the `Vcs` API has `String` paths; guessing would touch the wrong file).
pub(crate) fn utf8_path(bytes: &[u8]) -> Result<String, VcsError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| VcsError::BadPath {
        path: String::from_utf8_lossy(bytes).into_owned(),
        reason: "the path is not valid UTF-8".into(),
    })
}

/// Splits a `-z` list (`a\0b\0`) into paths.
pub(crate) fn nul_list(bytes: &[u8]) -> Result<Vec<String>, VcsError> {
    bytes
        .split(|&b| b == 0)
        .filter(|field| !field.is_empty())
        .map(utf8_path)
        .collect()
}

/// Parses `git diff --name-status -z --no-renames` output (`M\0a\0A\0b\0`)
/// into each path with its status letter.
pub(crate) fn name_status(bytes: &[u8]) -> Result<Vec<(u8, String)>, VcsError> {
    let mut out = Vec::new();
    let mut fields = bytes.split(|&b| b == 0).filter(|f| !f.is_empty());
    while let Some(status) = fields.next() {
        let (Some(&letter), Some(path)) = (status.first(), fields.next()) else {
            return Err(VcsError::Other(format!(
                "unexpected `git diff --name-status` entry {:?}",
                String::from_utf8_lossy(status)
            )));
        };
        out.push((letter, utf8_path(path)?));
    }
    Ok(out)
}

/// Parses `git status --porcelain=v1 -z` output. `??` entries are untracked,
/// every other entry (staged, unstaged, deleted, unmerged) is modified;
/// a rename or copy entry (only without `--no-renames`) names both paths.
/// Both lists come back sorted and without duplicates.
pub(crate) fn porcelain_status(bytes: &[u8]) -> Result<Status, VcsError> {
    let mut status = Status::default();
    let mut fields = bytes.split(|&b| b == 0).filter(|f| !f.is_empty());
    while let Some(entry) = fields.next() {
        if entry.len() < 4 || entry[2] != b' ' {
            return Err(VcsError::Other(format!(
                "unexpected `git status --porcelain` entry {:?}",
                String::from_utf8_lossy(entry)
            )));
        }
        let (x, y) = (entry[0], entry[1]);
        let path = utf8_path(&entry[3..])?;
        match (x, y) {
            (b'?', b'?') => status.untracked.push(path),
            (b'!', b'!') => {}
            _ => {
                if matches!(x, b'R' | b'C')
                    && let Some(orig) = fields.next()
                {
                    status.modified.push(utf8_path(orig)?);
                }
                status.modified.push(path);
            }
        }
    }
    status.modified.sort();
    status.modified.dedup();
    status.untracked.sort();
    status.untracked.dedup();
    Ok(status)
}

/// What `git status --porcelain=v2 --branch` says: the files, and where
/// HEAD is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BranchStatus {
    /// The HEAD commit (`# branch.oid`; `None` on an unborn branch).
    pub(crate) head: Option<String>,
    /// The branch HEAD is on (`# branch.head`; `None` when detached).
    pub(crate) branch: Option<String>,
    /// The same as [`porcelain_status`] gives for v1.
    pub(crate) status: Status,
}

/// Parses `git status --porcelain=v2 -z --branch` into a [`BranchStatus`]. Entries: `1 <XY> <sub>
/// <mH> <mI> <mW> <hH> <hI> <path>` (changed), `2 … <score> <path>\0<orig>`
/// (renamed or copied, naming both paths), `u <XY> <sub> <m1> <m2> <m3> <mW>
/// <h1> <h2> <h3> <path>` (unmerged), `? <path>` (untracked) and `! <path>`
/// (ignored, skipped); paths are the rest of the entry, never quoted.
pub(crate) fn porcelain_v2_status(bytes: &[u8]) -> Result<BranchStatus, VcsError> {
    let bad = |entry: &[u8]| {
        VcsError::Other(format!(
            "unexpected `git status --porcelain=v2` entry {:?}",
            String::from_utf8_lossy(entry)
        ))
    };
    // The path of an entry whose first `fields` space-separated fields come
    // before it.
    let path_after = |entry: &[u8], fields: usize| -> Result<String, VcsError> {
        let mut rest = entry;
        for _ in 0..fields {
            let space = rest
                .iter()
                .position(|&b| b == b' ')
                .ok_or_else(|| bad(entry))?;
            rest = &rest[space + 1..];
        }
        if rest.is_empty() {
            return Err(bad(entry));
        }
        utf8_path(rest)
    };
    let mut head = None;
    let mut branch = None;
    let mut status = Status::default();
    let mut entries = bytes.split(|&b| b == 0).filter(|e| !e.is_empty());
    while let Some(entry) = entries.next() {
        match entry.first() {
            Some(b'#') => {
                if let Some(oid) = entry.strip_prefix(b"# branch.oid ") {
                    let oid = String::from_utf8_lossy(oid).into_owned();
                    head = (oid != "(initial)").then_some(oid);
                } else if let Some(name) = entry.strip_prefix(b"# branch.head ") {
                    let name = utf8_path(name)?;
                    branch = (name != "(detached)").then_some(name);
                }
            }
            Some(b'1') => status.modified.push(path_after(entry, 8)?),
            Some(b'2') => {
                status.modified.push(path_after(entry, 9)?);
                let orig = entries.next().ok_or_else(|| bad(entry))?;
                status.modified.push(utf8_path(orig)?);
            }
            Some(b'u') => status.modified.push(path_after(entry, 10)?),
            Some(b'?') => status.untracked.push(path_after(entry, 1)?),
            Some(b'!') => {}
            _ => return Err(bad(entry)),
        }
    }
    status.modified.sort();
    status.modified.dedup();
    status.untracked.sort();
    status.untracked.dedup();
    Ok(BranchStatus {
        head,
        branch,
        status,
    })
}

/// The commit `git commit` made, from its summary line `[<branch> <id>]
/// <subject>` (`[detached HEAD <id>]`, `[<branch> (root-commit) <id>]`)
/// with ids printed in full (`core.abbrev=40`): the first word of the
/// first line that is a full hex id followed by `]`. `None` when there is
/// none (a SHA-256 repository's ids are longer than 40); the caller then
/// reads HEAD.
pub(crate) fn committed_id(stdout: &[u8]) -> Option<String> {
    let first = stdout.split(|&b| b == b'\n').next()?;
    let first = std::str::from_utf8(first).ok()?;
    first.split(' ').find_map(|word| {
        let id = word.strip_suffix(']')?;
        (id.len() == 40 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| id.to_owned())
    })
}

/// The refs git refused in `git push --porcelain` output, as the remote's
/// summary text (`[rejected] (fetch first)`, `[remote rejected] (hook
/// declined)`). Lines are `<flag>\t<from>:<to>\t<summary>`; flag `!` means
/// rejected.
pub(crate) fn push_rejections(stdout: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("!\t")?;
            let (refs, summary) = rest.split_once('\t').unwrap_or((rest, ""));
            Some(if summary.is_empty() {
                refs.to_owned()
            } else {
                format!("{refs}: {summary}")
            })
        })
        .collect()
}

/// One object from `git cat-file --batch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchObject {
    /// The object id.
    pub id: String,
    /// The object type (`commit`, `blob`, …).
    pub kind: String,
    /// The raw content.
    pub content: Vec<u8>,
}

/// Parses `git cat-file --batch` output: for each object a header line
/// `<id> <type> <size>`, the content, and a newline.
pub(crate) fn cat_file_batch(bytes: &[u8]) -> Result<Vec<BatchObject>, VcsError> {
    cat_file_batch_found(bytes)?
        .into_iter()
        .map(|found| {
            found.map_err(|name| {
                VcsError::Other(format!(
                    "unexpected `git cat-file --batch` output: {name} is missing"
                ))
            })
        })
        .collect()
}

/// [`cat_file_batch`] where an object may be missing (`<name> missing`):
/// each object, or the name asked for.
pub(crate) fn cat_file_batch_found(
    mut bytes: &[u8],
) -> Result<Vec<Result<BatchObject, String>>, VcsError> {
    let bad =
        |what: &str| VcsError::Other(format!("unexpected `git cat-file --batch` output: {what}"));
    let mut objects = Vec::new();
    while !bytes.is_empty() {
        let eol = bytes
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad("a header without a newline"))?;
        let header = String::from_utf8_lossy(&bytes[..eol]).into_owned();
        if let Some(name) = header.strip_suffix(" missing") {
            objects.push(Err(name.to_owned()));
            bytes = &bytes[eol + 1..];
            continue;
        }
        let mut parts = header.split(' ');
        let (Some(id), Some(kind), Some(size), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad(&format!("header {header:?}")));
        };
        let size: usize = size
            .parse()
            .map_err(|_| bad(&format!("size in {header:?}")))?;
        let start = eol + 1;
        let end = start + size;
        if bytes.len() < end + 1 || bytes[end] != b'\n' {
            return Err(bad(&format!("object {id} is truncated")));
        }
        objects.push(Ok(BatchObject {
            id: id.to_owned(),
            kind: kind.to_owned(),
            content: bytes[start..end].to_vec(),
        }));
        bytes = &bytes[end + 1..];
    }
    Ok(objects)
}

/// Splits a raw commit object into its tree id and its message (the bytes
/// after the first empty line, exactly as stored).
pub(crate) fn commit_object(content: &[u8]) -> Result<(String, String), VcsError> {
    let (headers, message) = match content.windows(2).position(|w| w == b"\n\n") {
        Some(i) => (&content[..i], &content[i + 2..]),
        None => (content, &[][..]),
    };
    let tree = String::from_utf8_lossy(headers)
        .lines()
        .find_map(|l| l.strip_prefix("tree ").map(str::to_owned))
        .ok_or_else(|| VcsError::Other("commit object without a tree header".into()))?;
    Ok((tree, String::from_utf8_lossy(message).into_owned()))
}

/// Whether `text` is a full object id (40 or 64 lowercase hex digits), which
/// git reads as that object and never as an option or a ref.
pub(super) fn full_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn name_status_pairs_each_path_with_its_letter() {
        let parsed = super::name_status(b"M\0src/a b.rs\0A\0new\nline\0D\0gone\0").unwrap();
        assert_eq!(
            parsed,
            vec![
                (b'M', "src/a b.rs".to_owned()),
                (b'A', "new\nline".to_owned()),
                (b'D', "gone".to_owned()),
            ]
        );
        assert!(super::name_status(b"").unwrap().is_empty());
        assert!(
            super::name_status(b"M\0").is_err(),
            "a letter without a path"
        );
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn status_splits_modified_and_untracked() {
        let out = b" M src/a b.rs\0M  staged.rs\0 D gone.rs\0?? new\nline.txt\0UU both.rs\0?? d\xC3\xA9j\xC3\xA0.txt\0";
        let status = porcelain_status(out).unwrap();
        assert_eq!(
            status,
            Status {
                modified: vec![
                    "both.rs".into(),
                    "gone.rs".into(),
                    "src/a b.rs".into(),
                    "staged.rs".into()
                ],
                untracked: vec!["déjà.txt".into(), "new\nline.txt".into()],
            }
        );
    }

    #[test]
    fn status_rename_entries_name_both_paths() {
        let status = porcelain_status(b"R  new.rs\0old.rs\0").unwrap();
        assert_eq!(
            status.modified,
            vec!["new.rs".to_owned(), "old.rs".to_owned()]
        );
    }

    #[test]
    fn status_rejects_garbage_and_non_utf8() {
        assert!(porcelain_status(b"xx\0").is_err());
        assert!(matches!(
            porcelain_status(b"?? \xff\xfe\0"),
            Err(VcsError::BadPath { .. })
        ));
    }

    #[test]
    fn v2_status_reads_head_and_every_kind_of_entry() {
        let out = b"# branch.oid 0123abcd\0# branch.head main\0\
1 .M N... 100644 100644 100644 aaa aaa src/a b.rs\0\
1 M. N... 100644 100644 100644 aaa bbb staged.rs\0\
1 .D N... 100644 100644 000000 aaa aaa gone.rs\0\
2 R. N... 100644 100644 100644 aaa aaa R100 new.rs\0old.rs\0\
u UU N... 100644 100644 100644 100644 aaa bbb ccc both.rs\0\
? new\nline.txt\0? d\xC3\xA9j\xC3\xA0.txt\0! ignored.o\0";
        let parsed = porcelain_v2_status(out).unwrap();
        assert_eq!(parsed.head.as_deref(), Some("0123abcd"));
        assert_eq!(parsed.branch.as_deref(), Some("main"));
        assert_eq!(
            parsed.status,
            Status {
                modified: vec![
                    "both.rs".into(),
                    "gone.rs".into(),
                    "new.rs".into(),
                    "old.rs".into(),
                    "src/a b.rs".into(),
                    "staged.rs".into()
                ],
                untracked: vec!["déjà.txt".into(), "new\nline.txt".into()],
            }
        );
        let unborn =
            porcelain_v2_status(b"# branch.oid (initial)\0# branch.head (detached)\0").unwrap();
        assert_eq!((unborn.head, unborn.branch), (None, None));
        assert!(unborn.status.is_clean());
    }

    #[test]
    fn v2_status_rejects_garbage_and_short_entries() {
        assert!(porcelain_v2_status(b"xx\0").is_err());
        assert!(porcelain_v2_status(b"1 .M N... 100644\0").is_err());
        assert!(porcelain_v2_status(b"2 R. N... 100644 100644 100644 a a R100 new.rs\0").is_err());
        assert!(matches!(
            porcelain_v2_status(b"? \xff\xfe\0"),
            Err(VcsError::BadPath { .. })
        ));
    }

    #[test]
    fn committed_id_reads_the_summary_line() {
        let id = "ca487f52220d3d89aa7e6c743c5abf311d9c1665";
        for line in [
            format!("[main {id}] fix [x] ok\n 1 file changed\n"),
            format!("[detached HEAD {id}] y\n"),
            format!("[review-fix/slot-0 (root-commit) {id}] y\n"),
        ] {
            assert_eq!(committed_id(line.as_bytes()).as_deref(), Some(id), "{line}");
        }
        // Short ids, a subject that looks like one on a later line, no
        // summary: not read.
        assert_eq!(committed_id(b"[main ca487f5] y\n"), None);
        assert_eq!(
            committed_id(format!("[main ca487f5] y\n{id}]\n").as_bytes()),
            None
        );
        assert_eq!(committed_id(b""), None);
    }

    #[test]
    fn push_rejections_read_the_flag_column() {
        let out = b"To /tmp/remote.git\n!\trefs/heads/main:refs/heads/main\t[rejected] (fetch first)\n \trefs/heads/x:refs/heads/x\tabc..def\nDone\n";
        assert_eq!(
            push_rejections(out),
            vec!["refs/heads/main:refs/heads/main: [rejected] (fetch first)".to_owned()]
        );
        assert!(
            push_rejections(b"To r\n*\trefs/heads/a:refs/heads/a\t[new branch]\nDone\n").is_empty()
        );
    }

    #[test]
    fn cat_file_batch_reads_sizes_not_lines() {
        let out = b"aaa commit 5\nx\n\ny\n\nbbb blob 0\n\n";
        let objects = cat_file_batch(out).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0].content, b"x\n\ny\n");
        assert_eq!(objects[1].kind, "blob");
        assert!(cat_file_batch(b"aaa commit 50\nshort\n").is_err());
        assert!(cat_file_batch(b"HEAD missing\n").is_err());
    }

    #[test]
    fn cat_file_batch_found_names_a_missing_object_and_goes_on() {
        let found = cat_file_batch_found(b"deadbeef missing\naaa commit 2\nx\n\n").unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].as_ref().unwrap_err(), "deadbeef");
        assert_eq!(found[1].as_ref().unwrap().content, b"x\n");
    }

    #[test]
    fn commit_object_keeps_the_message_verbatim() {
        let raw = b"tree 1234\nparent 99\nauthor a <a> 1 +0000\n\n  subject \n\nbody\n\n";
        let (tree, message) = commit_object(raw).unwrap();
        assert_eq!(tree, "1234");
        assert_eq!(message, "  subject \n\nbody\n\n");
    }

    fn path_strategy() -> impl Strategy<Value = String> {
        proptest::string::string_regex(
            "[a-zA-Z0-9 ._\\-\n\"'$`()éü漢]{1,12}(/[a-zA-Z0-9 ._\n漢]{1,8})?",
        )
        .expect("valid regex")
    }

    proptest! {
        /// Whatever the paths, encoding them as porcelain -z entries and
        /// parsing gives the same sets back.
        #[test]
        fn status_round_trips_any_paths(
            modified in proptest::collection::btree_set(path_strategy(), 0..6),
            untracked in proptest::collection::btree_set(path_strategy(), 0..6),
        ) {
            let mut out = Vec::new();
            for p in &modified {
                out.extend_from_slice(b" M ");
                out.extend_from_slice(p.as_bytes());
                out.push(0);
            }
            for p in &untracked {
                out.extend_from_slice(b"?? ");
                out.extend_from_slice(p.as_bytes());
                out.push(0);
            }
            let status = porcelain_status(&out).unwrap();
            prop_assert_eq!(status.modified, modified.into_iter().collect::<Vec<_>>());
            prop_assert_eq!(status.untracked, untracked.into_iter().collect::<Vec<_>>());
        }

        /// The v2 parser gives the same sets as the v1 parser for the same
        /// entries, whatever the paths (spaces and newlines included).
        #[test]
        fn v2_status_agrees_with_v1(
            modified in proptest::collection::btree_set(path_strategy(), 0..6),
            untracked in proptest::collection::btree_set(path_strategy(), 0..6),
        ) {
            let (mut v1, mut v2) = (Vec::new(), b"# branch.oid abc\0".to_vec());
            for p in &modified {
                v1.extend_from_slice(format!(" M {p}\0").as_bytes());
                v2.extend_from_slice(format!("1 .M N... 100644 100644 100644 a a {p}\0").as_bytes());
            }
            for p in &untracked {
                v1.extend_from_slice(format!("?? {p}\0").as_bytes());
                v2.extend_from_slice(format!("? {p}\0").as_bytes());
            }
            let parsed = porcelain_v2_status(&v2).unwrap();
            prop_assert_eq!(parsed.head.as_deref(), Some("abc"));
            prop_assert_eq!(parsed.status, porcelain_status(&v1).unwrap());
        }

        /// Batch output of any contents parses back to the same contents.
        #[test]
        fn cat_file_batch_round_trips(contents in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..5)) {
            let mut out = Vec::new();
            for (i, c) in contents.iter().enumerate() {
                out.extend_from_slice(format!("id{i} blob {}\n", c.len()).as_bytes());
                out.extend_from_slice(c);
                out.push(b'\n');
            }
            let objects = cat_file_batch(&out).unwrap();
            let back: Vec<Vec<u8>> = objects.into_iter().map(|o| o.content).collect();
            prop_assert_eq!(back, contents);
        }
    }
}
