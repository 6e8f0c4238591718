//! Helpers shared by the `reliability_*` integration tests of every crate
//! (the other crates include this file with `#[path]`): the bad-input
//! corpus and its README table, and a temporary git repository with a
//! snapshot that proves a reader wrote nothing.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bad-input")
}

/// `(file, test)` pairs of the README table.
pub fn readme_cases() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(corpus_dir().join("README.md")).unwrap();
    readme
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // | `file` | what it is | test | outcome |
            let file = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((file.to_owned(), (*cells.get(3)?).to_owned()))
        })
        .collect()
}

/// Files of the corpus whose README row names `test`.
pub fn files_for(test: &str) -> Vec<String> {
    readme_cases()
        .into_iter()
        .filter(|(_, t)| t.split(',').map(str::trim).any(|t| t == test))
        .map(|(f, _)| f)
        .collect()
}

/// Asserts that the corpus files a test covers are exactly those the
/// corpus README assigns to it (by name in its last column).
pub fn assert_covers_readme_rows(test: &str, covered: impl IntoIterator<Item = impl AsRef<str>>) {
    let mut covered: Vec<String> = covered.into_iter().map(|f| f.as_ref().to_owned()).collect();
    covered.sort_unstable();
    let mut assigned = files_for(test);
    assigned.sort();
    assert_eq!(
        covered, assigned,
        "cases here vs. README rows naming `{test}`"
    );
}

/// A temporary git repository with one committed file, and a snapshot of
/// everything in it, to prove a reader wrote nothing.
pub struct Repo {
    /// The repository.
    pub dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(
            dir.path().join("src/lib.rs"),
            "fn a() {}\nfn b() {}\nfn c() {}\n",
        )
        .unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-qm", "init"]);
        Repo { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Copies a corpus file into the repository (as an untracked input).
    pub fn input(&self, file: &str) -> PathBuf {
        let dest = self.path().join("input").join(file);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(corpus_dir().join(file), &dest).unwrap();
        dest
    }

    /// `git status` (ignored and untracked files included) and every file
    /// outside `.git` with its size and modification time.
    pub fn snapshot(&self) -> (String, BTreeMap<PathBuf, (u64, SystemTime)>) {
        let out = Command::new("git")
            .args([
                "--no-optional-locks",
                "status",
                "--porcelain=v1",
                "--ignored",
                "--untracked-files=all",
            ])
            .current_dir(self.path())
            .output()
            .unwrap();
        let mut files = BTreeMap::new();
        let mut stack = vec![self.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                let meta = entry.metadata().unwrap();
                if entry.file_name() == ".git" {
                    continue;
                }
                if meta.is_dir() {
                    stack.push(entry.path());
                    files.insert(entry.path(), (0, meta.modified().unwrap()));
                } else {
                    files.insert(entry.path(), (meta.len(), meta.modified().unwrap()));
                }
            }
        }
        (String::from_utf8_lossy(&out.stdout).into_owned(), files)
    }
}

/// Runs `git` in `dir` and returns its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a reader made of a corpus file.
#[derive(Debug)]
pub enum Outcome {
    /// The whole file was refused with this message.
    Error(String),
    /// The file was read: entries kept, and one message per rejected entry
    /// or skipped line.
    Read { kept: usize, rejected: Vec<String> },
}

/// Runs `read` on a copy of `file` inside a fresh repository, with the
/// budget, no-panic and nothing-written checks.
pub fn run_case(file: &str, read: impl FnOnce(&Path) -> Outcome) -> Outcome {
    let repo = Repo::new();
    let input = repo.input(file);
    let before = repo.snapshot();
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&input)))
        .unwrap_or_else(|_| panic!("{file}: the reader panicked"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{file}: took {:?}",
        started.elapsed()
    );
    assert_eq!(
        repo.snapshot(),
        before,
        "{file}: the reader wrote something"
    );
    outcome
}

/// The expected outcome of each case: an error with these fragments, or a
/// read keeping `kept` entries and rejecting one entry per fragment list.
pub enum Expect {
    Error(&'static [&'static str]),
    Read {
        kept: usize,
        rejected: &'static [&'static [&'static str]],
    },
}

pub type Reader = fn(&Path) -> Outcome;

pub fn check(file: &str, outcome: &Outcome, expect: &Expect) {
    match (outcome, expect) {
        (Outcome::Error(msg), Expect::Error(fragments)) => {
            assert!(
                msg.contains(file),
                "{file}: the message does not name the file: {msg}"
            );
            for f in *fragments {
                assert!(msg.contains(f), "{file}: {f:?} missing from: {msg}");
            }
        }
        (
            Outcome::Read { kept, rejected },
            Expect::Read {
                kept: want,
                rejected: want_rejected,
            },
        ) => {
            assert_eq!(kept, want, "{file}: entries kept ({rejected:?})");
            assert_eq!(rejected.len(), want_rejected.len(), "{file}: {rejected:?}");
            for (msg, fragments) in rejected.iter().zip(want_rejected.iter()) {
                assert!(
                    msg.contains(file),
                    "{file}: the rejection does not name the file: {msg}"
                );
                for f in *fragments {
                    assert!(msg.contains(f), "{file}: {f:?} missing from: {msg}");
                }
            }
        }
        (other, _) => panic!("{file}: unexpected outcome {other:?}"),
    }
}

/// Runs every case (a corpus file, its reader, what to expect) after
/// checking that they are exactly the files the README assigns to `test`.
pub fn check_corpus(test: &str, cases: &[(&str, Reader, Expect)]) {
    assert_covers_readme_rows(test, cases.iter().map(|(f, _, _)| *f));
    for (file, reader, expect) in cases {
        let outcome = run_case(file, reader);
        check(file, &outcome, expect);
    }
}
