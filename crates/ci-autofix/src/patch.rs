//! Unified diffs from an agent's answer: found ([`extract_diff`]), parsed
//! strictly ([`parse`]) and applied all-or-nothing ([`apply`]).
//!
//! An agent that cannot edit the working tree itself answers with a unified
//! diff — in a ` ```diff ` (or ` ```patch `) fenced block, or as the whole
//! answer. The rules are those of `patch` with fuzz 0:
//!
//! - every context and removed line must match the file exactly (line
//!   endings included); a hunk whose position shifted is looked for up to
//!   [`MAX_OFFSET`] lines before or after where its header (corrected by the
//!   offset of the previous hunk) puts it, nearest first;
//! - hunk bodies must have exactly the line counts of their `@@` headers (an
//!   empty line inside a hunk counts as an empty context line, since editors
//!   and chat front-ends strip the trailing blank of `" "`);
//! - `--- /dev/null` creates a file (which must not exist), `+++ /dev/null`
//!   deletes one (whose whole content the hunks must remove); renames, copies,
//!   mode-only changes, binary patches and quoted paths are refused;
//! - paths are repository-relative (`a/` and `b/` prefixes stripped); absolute
//!   paths, `..`, anything under `.git/`, symlinked files and symlinked
//!   folders that lead out of the repository are refused, and so are
//!   protected paths (the caller's predicate).
//!
//! Every file is planned in memory first; only when every hunk of every file
//! applies is anything written (each file replaced atomically, keeping its
//! permissions). A parse, path, protection or mismatch error leaves the tree
//! untouched; only an I/O error during the final writes can leave earlier
//! files written (the fix loop then restores its checkpoint).

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

mod apply;
mod hunk;
pub use apply::*;
use hunk::{parse_hunk, truncate};

/// How far (in lines, either way) a hunk is looked for around its expected
/// position.
pub const MAX_OFFSET: usize = 50;

/// A parsed unified diff: one entry per file section, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Patch {
    /// The file sections.
    pub files: Vec<FilePatch>,
}

/// What a file section does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileChange {
    /// `--- /dev/null`: the file is created.
    Add,
    /// Both sides name the file: it is changed.
    Modify,
    /// `+++ /dev/null`: the file is deleted.
    Delete,
}

/// The changes to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// The repository-relative path (`a/`/`b/` stripped, normalised).
    pub path: String,
    /// Creation, change or deletion.
    pub change: FileChange,
    /// The hunks, in file order.
    pub hunks: Vec<Hunk>,
    /// 1-based line of the `---` header in the diff text.
    pub line: usize,
}

/// One `@@ -a,b +c,d @@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// First old line (1-based; for an empty old side, the line after which
    /// the new lines go).
    pub old_start: usize,
    /// Number of old lines (context and removed).
    pub old_len: usize,
    /// First new line.
    pub new_start: usize,
    /// Number of new lines (context and added).
    pub new_len: usize,
    /// The body. Each line keeps its `\n`, except one followed by
    /// `\ No newline at end of file`.
    pub lines: Vec<HunkLine>,
    /// 1-based line of the `@@` header in the diff text.
    pub line: usize,
}

impl Hunk {
    /// The header as written in diffs (`@@ -3,7 +3,8 @@`).
    pub fn header(&self) -> String {
        format!(
            "@@ -{},{} +{},{} @@",
            self.old_start, self.old_len, self.new_start, self.new_len
        )
    }

    /// Context and removed lines: what the file must contain.
    pub fn old_side(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(t) | HunkLine::Remove(t) => Some(t.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }

    /// Context and added lines: what replaces the old side.
    pub fn new_side(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(t) | HunkLine::Add(t) => Some(t.as_str()),
                HunkLine::Remove(_) => None,
            })
            .collect()
    }
}

/// One line of a hunk body, with its line ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` text`: in both versions.
    Context(String),
    /// `-text`: only in the old version.
    Remove(String),
    /// `+text`: only in the new version.
    Add(String),
}

/// Why a diff was not applied. Nothing was written, except possibly for
/// [`PatchError::Io`] during the final writes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PatchError {
    /// The diff text is malformed.
    #[error("diff line {line}: {message}")]
    Parse {
        /// 1-based line in the diff text.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The diff does something this applier refuses to do.
    #[error("diff line {line}: {what} is not supported")]
    Unsupported {
        /// 1-based line in the diff text.
        line: usize,
        /// What.
        what: String,
    },
    /// The diff contains no file section.
    #[error("the diff contains no file to change")]
    Empty,
    /// A path is absolute, leaves the repository, or goes through a symlink.
    #[error("path `{path}` is not allowed: {reason}")]
    BadPath {
        /// The path as written in the diff.
        path: String,
        /// Why.
        reason: String,
    },
    /// A path is protected (credentials, CI workflows, …).
    #[error("`{path}` is a protected path; the patch was refused")]
    Protected {
        /// The path.
        path: String,
    },
    /// The file is not in the state the section expects.
    #[error("`{path}`: {reason}")]
    FileState {
        /// The path.
        path: String,
        /// What is wrong (exists, does not exist, not empty after deletion).
        reason: String,
    },
    /// A hunk does not match the file.
    #[error("`{path}`, hunk {hunk} ({header}): {reason}")]
    HunkMismatch {
        /// The path.
        path: String,
        /// 1-based hunk number within the file section.
        hunk: usize,
        /// The hunk's `@@` header.
        header: String,
        /// Where and how it differs.
        reason: String,
    },
    /// Reading or writing a file failed.
    #[error("could not {action} `{}`: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Finds the unified diff in an agent's answer: the concatenated contents of
/// its ` ```diff ` / ` ```patch ` / ` ```udiff ` fenced blocks when it has
/// any, else the whole answer when it contains a `--- ` line directly
/// followed by a `+++ ` line, else `None`.
pub fn extract_diff(answer: &str) -> Option<String> {
    let mut blocks = String::new();
    let mut found = false;
    let mut open: Option<(usize, usize)> = None; // (indent, backticks) of an open diff fence
    let mut other_fence: Option<usize> = None; // backticks of an open non-diff fence
    for line in answer.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        if let Some((fence_indent, fence_ticks)) = open {
            if ticks >= fence_ticks && trimmed[ticks..].trim().is_empty() {
                open = None;
                continue;
            }
            let strip = line
                .char_indices()
                .take_while(|&(i, c)| i < fence_indent && c == ' ')
                .count();
            blocks.push_str(&line[strip..]);
            blocks.push('\n');
            continue;
        }
        if let Some(fence_ticks) = other_fence {
            if ticks >= fence_ticks && trimmed[ticks..].trim().is_empty() {
                other_fence = None;
            }
            continue;
        }
        if ticks >= 3 {
            let info = trimmed[ticks..].trim().to_ascii_lowercase();
            let lang = info.split_whitespace().next().unwrap_or("");
            if matches!(lang, "diff" | "patch" | "udiff") {
                open = Some((indent, ticks));
                found = true;
            } else {
                other_fence = Some(ticks);
            }
        }
    }
    if found {
        return Some(blocks);
    }
    let lines: Vec<&str> = answer.lines().collect();
    lines
        .windows(2)
        .any(|w| w[0].starts_with("--- ") && w[1].starts_with("+++ "))
        .then(|| answer.to_owned())
}

/// Parses a unified diff (plain or git-style). Text before the first file
/// header and between file sections is skipped, as `patch` does; inside a
/// file section every line must be accounted for by the hunk headers.
pub fn parse(text: &str) -> Result<Patch, PatchError> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    if text.ends_with('\n') {
        lines.pop();
    }
    let mut files = Vec::new();
    // A `diff --git` line not yet followed by a `---` header.
    let mut git_section: Option<usize> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with("diff --git ") {
            if let Some(at) = git_section {
                return Err(git_without_hunks(at));
            }
            git_section = Some(i + 1);
            i += 1;
        } else if line == "-- " {
            // `git format-patch` signature: the diff ends here.
            break;
        } else if is_file_header(&lines, i) {
            git_section = None;
            let (file, next) = file_section(&lines, i)?;
            files.push(file);
            i = next;
        } else if line.starts_with("@@") {
            return Err(PatchError::Parse {
                line: i + 1,
                message: "hunk header without a `--- `/`+++ ` file header before it".into(),
            });
        } else {
            i += 1;
        }
    }
    if let Some(at) = git_section {
        return Err(git_without_hunks(at));
    }
    Ok(Patch { files })
}

/// Whether `lines[i]` starts a `--- `/`+++ ` file header pair.
fn is_file_header(lines: &[&str], i: usize) -> bool {
    lines[i].starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "))
}

/// The file section whose header pair starts at `lines[i]`: what it does to
/// which path, its hunks, and the check that no uncounted body line follows
/// them. Returns it and the index of the line after it.
fn file_section(lines: &[&str], i: usize) -> Result<(FilePatch, usize), PatchError> {
    let header_line = i + 1;
    let old = header_path(&lines[i][4..], "a/", header_line)?;
    let new = header_path(&lines[i + 1][4..], "b/", header_line + 1)?;
    let (path, change) = file_change(old, new, header_line)?;
    let mut i = i + 2;
    let mut hunks = Vec::new();
    while i < lines.len() && lines[i].starts_with("@@") {
        let (hunk, next) = parse_hunk(lines, i)?;
        hunks.push(hunk);
        i = next;
    }
    let Some(last) = hunks.last() else {
        return Err(PatchError::Parse {
            line: i + 1,
            message: format!("file header for `{path}` is not followed by a hunk"),
        });
    };
    if let Some(next) = lines.get(i)
        && is_body_line(next)
        && !is_file_header(lines, i)
        && *next != "-- "
    {
        return Err(PatchError::Parse {
            line: i + 1,
            message: format!(
                "line after the hunk at line {} that its header does not count ({})",
                last.line,
                last.header()
            ),
        });
    }
    check_sides(&path, change, &hunks)?;
    let file = FilePatch {
        path,
        change,
        hunks,
        line: header_line,
    };
    Ok((file, i))
}

/// What a header pair's two paths say: a creation, a deletion or a change;
/// a rename and `/dev/null` on both sides are refused.
fn file_change(
    old: Option<String>,
    new: Option<String>,
    line: usize,
) -> Result<(String, FileChange), PatchError> {
    match (old, new) {
        (None, None) => Err(PatchError::Parse {
            line,
            message: "both sides of the file header are /dev/null".into(),
        }),
        (None, Some(p)) => Ok((p, FileChange::Add)),
        (Some(p), None) => Ok((p, FileChange::Delete)),
        (Some(o), Some(n)) if o != n => Err(PatchError::Unsupported {
            line,
            what: format!("renaming `{o}` to `{n}`"),
        }),
        (Some(_), Some(n)) => Ok((n, FileChange::Modify)),
    }
}

fn git_without_hunks(line: usize) -> PatchError {
    PatchError::Unsupported {
        line,
        what: "a git diff section without `---`/`+++` hunks (rename, copy, mode change, binary or empty file)"
            .into(),
    }
}

fn is_body_line(line: &str) -> bool {
    line.starts_with(' ')
        || line.starts_with('+')
        || line.starts_with('-')
        || line.starts_with('\\')
}

/// A new file's hunks must start from nothing; a deleted file's must end in nothing.
fn check_sides(path: &str, change: FileChange, hunks: &[Hunk]) -> Result<(), PatchError> {
    let bad = match change {
        FileChange::Add => hunks.iter().find(|h| h.old_len != 0),
        FileChange::Delete => hunks.iter().find(|h| h.new_len != 0),
        FileChange::Modify => None,
    };
    match bad {
        Some(h) => Err(PatchError::Parse {
            line: h.line,
            message: format!(
                "hunk {} of {} `{path}` has {}",
                h.header(),
                if change == FileChange::Add {
                    "new file"
                } else {
                    "deleted file"
                },
                if change == FileChange::Add {
                    "old lines"
                } else {
                    "new lines"
                }
            ),
        }),
        None => Ok(()),
    }
}

/// The path of a `---`/`+++` header: `None` for `/dev/null`.
fn header_path(raw: &str, prefix: &str, line: usize) -> Result<Option<String>, PatchError> {
    let raw = raw.split('\t').next().unwrap_or("").trim_end();
    if raw.starts_with('"') {
        return Err(PatchError::Unsupported {
            line,
            what: format!("the quoted path {raw}"),
        });
    }
    if raw == "/dev/null" {
        return Ok(None);
    }
    let stripped = raw.strip_prefix(prefix).unwrap_or(raw);
    normalize_path(stripped).map(Some)
}

/// A repository-relative path with `/` separators, `.` and empty components
/// removed; absolute paths, `..`, `.git` and NUL are refused.
pub fn normalize_path(path: &str) -> Result<String, PatchError> {
    let bad = |reason: &str| PatchError::BadPath {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    if path.is_empty() {
        return Err(bad("it is empty"));
    }
    if path.starts_with('/') || path.starts_with('\\') {
        return Err(bad("it is absolute"));
    }
    let bytes = path.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(bad("it is absolute"));
    }
    if path.contains('\0') {
        return Err(bad("it contains a NUL byte"));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(bad("it leaves the repository (`..`)")),
            p if p.eq_ignore_ascii_case(".git") => {
                return Err(bad("it is inside the .git directory"));
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(bad("it names no file"));
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests;
