//! Applying [`TextEdit`]s to text: re-anchoring by the replaced text,
//! overlap checks, and reverse-order application.
//!
//! Fixes are applied and committed one finding at a time, so by the time a
//! finding's edits are applied the file may already carry earlier fixes and
//! the recorded offsets may point at the wrong place. [`locate`] therefore
//! never trusts a position alone:
//!
//! 1. when `original` is found exactly at the recorded `byte_range` start and
//!    that offset is also where the recorded line and column point, nothing
//!    before the edit moved, and that is the place;
//! 2. otherwise every occurrence of `original` that starts within
//!    [`ANCHOR_WINDOW_LINES`] lines of `start_line` is a candidate, and the
//!    nearest one wins (fewest lines away, then fewest bytes away from the
//!    recorded line and column, then the earlier one); a byte offset alone is
//!    never trusted, because after a shift it may land on an unrelated copy
//!    of short text such as `;`;
//! 3. no candidate means the suggestion is stale: [`EditError::Stale`], and
//!    nothing is applied.
//!
//! The edits of one fix move together: [`apply_edits`] locates the edit with
//! the longest replaced text first and expects the others at the same shift.
//!
//! A pure insertion (`original` empty and an empty region) has no text to
//! anchor by: here it is placed at its recorded line and column, which is
//! right only while nothing before it moved. Callers that apply several
//! fixes to one file keep an [`EditHistory`] and use [`apply_mapped`]
//! instead, which places every edit exactly through the earlier ones;
//! [`apply_edits`] is the fallback for files whose changes nobody recorded. An edit whose
//! `original` is empty but whose region is not ([`is_unanchored`]) is refused
//! with [`EditError::Unanchored`]: the producer did not say what text it
//! replaces (SARIF and rdjson often do not), so it cannot be re-anchored;
//! the findings readers (`orchestrator-findings`) fill `original` from the
//! files when given a source reader at parse time. The region helpers at the
//! end ([`RawRegion`], [`ColumnUnit`], [`line_column`]) are what those readers
//! resolve a producer's positions with.

pub mod history;
mod locate;

use std::ops::Range;

pub use history::{AppliedEdit, EditHistory, MappedOutcome, apply_mapped};
pub use locate::locate;
use locate::*;

use crate::finding::TextEdit;
use crate::limits::excerpt;

/// How many lines above and below an edit's recorded `start_line` the
/// re-anchoring search looks for the replaced text.
pub const ANCHOR_WINDOW_LINES: u32 = 60;

/// Why edits could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// The text the edit replaces is no longer near its recorded place.
    #[error(
        "stale suggestion for {file}:{line}: the text it replaces ({original:?}) is not within {window} lines of line {line}"
    )]
    Stale {
        /// File of the edit.
        file: String,
        /// Recorded start line.
        line: u32,
        /// The text that was searched for.
        original: String,
        /// The search window, in lines either side.
        window: u32,
    },
    /// The edit's region is not empty but it does not carry the text it
    /// replaces, so it cannot be re-anchored safely.
    #[error(
        "edit for {file}:{line} does not carry the text it replaces and cannot be re-anchored; read the findings with a source reader before any fix is applied"
    )]
    Unanchored {
        /// File of the edit.
        file: String,
        /// Recorded start line.
        line: u32,
    },
    /// A pure insertion points past the end of the file.
    #[error("insertion for {file}:{line}:{column} points past the end of the file")]
    OutOfRange {
        /// File of the edit.
        file: String,
        /// Recorded line.
        line: u32,
        /// Recorded column.
        column: u32,
    },
    /// An edit lacks the baseline byte range (or its `original` does not
    /// span it), which exact placement through an [`EditHistory`] needs.
    #[error(
        "edit for {file}:{line} carries no byte range matching its replaced text, so it cannot be placed through the file's edit history"
    )]
    NoByteRange {
        /// File of the edit.
        file: String,
        /// Recorded start line.
        line: u32,
    },
    /// An edit touches text that an earlier fix of the session changed.
    #[error(
        "the edit for {file}:{line} conflicts with an earlier fix to the same file (baseline bytes {start}..{end}); a fresh lint run will report it against the fixed text"
    )]
    Conflict {
        /// File of the edit.
        file: String,
        /// Recorded start line.
        line: u32,
        /// Baseline start of the earlier fix's edit.
        start: usize,
        /// Baseline end of the earlier fix's edit.
        end: usize,
    },
    /// The text at the place the history maps an edit to is not the text it
    /// replaces.
    #[error(
        "the text at {file}:{line}, mapped through the earlier fixes, is not what the suggestion replaces ({original:?}); the file changed in a way the session did not record"
    )]
    Moved {
        /// File of the edit.
        file: String,
        /// Recorded start line.
        line: u32,
        /// The text that was expected.
        original: String,
    },
    /// The file does not hold what its edit history says was applied.
    #[error(
        "{file} does not match its edit history (the edit at baseline byte {offset} is not where the history puts it): it changed outside this session's fixes"
    )]
    HistoryMismatch {
        /// The file.
        file: String,
        /// Baseline offset of the first applied edit that is not found.
        offset: usize,
    },
    /// A pure insertion cannot be placed: the file changed since the
    /// findings were produced in ways nobody recorded.
    #[error(
        "the insertion for {file}:{line} cannot be placed exactly: the file changed since the findings were produced in a way this session did not record; a fresh lint run will report it again"
    )]
    Unplaceable {
        /// File of the edit.
        file: String,
        /// Recorded start line.
        line: u32,
    },
    /// Two edits of one fix touch the same text.
    #[error(
        "overlapping edits in {file}: the edit for line {first_line} and the edit for line {second_line} touch the same text"
    )]
    Overlap {
        /// File of the edits.
        file: String,
        /// Recorded start line of the first edit.
        first_line: u32,
        /// Recorded start line of the second edit.
        second_line: u32,
    },
}

/// Whether an edit replaces a non-empty region without saying what text it
/// replaces (and so cannot be re-anchored).
pub fn is_unanchored(edit: &TextEdit) -> bool {
    if !edit.original.is_empty() {
        return false;
    }
    match edit.byte_range {
        Some((s, e)) if e > s => true,
        _ => (edit.start_line, edit.start_column) != (edit.end_line, edit.end_column),
    }
}

/// Applies a set of edits to one file's `text` as one fix: every edit is
/// located first (the longest one by its text, the others relative to it,
/// see [`locate`]), overlapping edits are refused, identical duplicates are
/// applied once, and the edits are applied from the end of the text
/// backwards so that earlier offsets stay valid.
pub fn apply_edits(text: &str, edits: &[&TextEdit]) -> Result<String, EditError> {
    let ranges = locate_all(text, edits)?;
    let mut located: Vec<(Range<usize>, &TextEdit)> =
        ranges.into_iter().zip(edits.iter().copied()).collect();
    located.sort_by_key(|(r, _)| (r.start, r.end));
    located.dedup_by(|b, a| a.0 == b.0 && a.1.replacement == b.1.replacement);
    for pair in located.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let same_point = a.0.start == b.0.start && (a.0.is_empty() || b.0.is_empty());
        if a.0.end > b.0.start || same_point {
            return Err(EditError::Overlap {
                file: b.1.file.clone(),
                first_line: a.1.start_line,
                second_line: b.1.start_line,
            });
        }
    }
    let mut out = text.to_owned();
    for (range, edit) in located.iter().rev() {
        out.replace_range(range.clone(), &edit.replacement);
    }
    Ok(out)
}

/// Whether every edit of a fix is already in `text` although nobody recorded
/// it: the text it replaces is gone from near its place ([`locate`] finds
/// it nowhere) and exactly its replacement stands at its recorded line and
/// column. That is what a file shows when an earlier fix made the same edit
/// (several findings often carry one edit) and the file's history is not
/// known; anything else (the text changed otherwise, or moved) is not.
pub fn already_present(text: &str, edits: &[&TextEdit]) -> bool {
    !edits.is_empty()
        && edits.iter().all(|e| {
            !e.original.is_empty()
                && e.original != e.replacement
                && matches!(locate(text, e), Err(EditError::Stale { .. }))
                && char_position(text, e.start_line, e.start_column)
                    .is_some_and(|at| text[at..].starts_with(e.replacement.as_str()))
        })
}

/// Byte offsets at which each line starts (line 1 at index 0). A text ending
/// in a newline has a last, empty line.
pub fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The 1-based line holding byte `offset`.
fn line_of(starts: &[usize], offset: usize) -> u32 {
    let idx = starts.partition_point(|&s| s <= offset);
    u32::try_from(idx.max(1)).unwrap_or(u32::MAX)
}

/// The content of 1-based `line` without its line terminator (`\n` or
/// `\r\n`), with the byte offset where it starts.
pub fn line_text(text: &str, line: u32) -> Option<(usize, &str)> {
    let starts = line_starts(text);
    let idx = (line as usize).checked_sub(1)?;
    let start = *starts.get(idx)?;
    let end = starts.get(idx + 1).map_or(text.len(), |&next| next - 1);
    let content = &text[start..end];
    Some((start, content.strip_suffix('\r').unwrap_or(content)))
}

/// How a producer counts columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnUnit {
    /// Unicode scalar values (rustc, [`TextEdit`]).
    Chars,
    /// UTF-8 bytes (reviewdog).
    Utf8Bytes,
    /// UTF-16 code units (the SARIF default).
    Utf16,
}

/// The length of the byte order mark `text` starts with (0 or 3). No
/// producer counts it as a column (rustc, ruff and ESLint strip it before
/// indexing), so columns on line 1 start after it.
fn bom_len(text: &str) -> usize {
    if text.starts_with('\u{feff}') { 3 } else { 0 }
}

/// Byte offset of 1-based `column` (in `unit`) on 1-based `line`. A column
/// one past the end of the line is the line end; further out is `None`. A
/// byte order mark at the start of the text is not counted: column 1 of
/// line 1 is the first character after it.
pub fn column_offset(text: &str, line: u32, column: u32, unit: ColumnUnit) -> Option<usize> {
    let (mut start, mut content) = line_text(text, line)?;
    if line == 1 {
        let bom = bom_len(content);
        start += bom;
        content = &content[bom..];
    }
    let wanted = (column as usize).checked_sub(1)?;
    let mut count = 0usize;
    for (i, c) in content.char_indices() {
        if count == wanted {
            return Some(start + i);
        }
        if count > wanted {
            return None;
        }
        count += match unit {
            ColumnUnit::Chars => 1,
            ColumnUnit::Utf8Bytes => c.len_utf8(),
            ColumnUnit::Utf16 => c.len_utf16(),
        };
    }
    (count == wanted).then_some(start + content.len())
}

/// Byte offset of a 1-based line and character column.
fn char_position(text: &str, line: u32, column: u32) -> Option<usize> {
    column_offset(text, line, column, ColumnUnit::Chars)
}

/// The 1-based line and character column of byte `offset` (a byte order
/// mark at the start of the text not counted, as in [`column_offset`]).
pub fn line_column(text: &str, offset: usize) -> (u32, u32) {
    let starts = line_starts(text);
    let line = line_of(&starts, offset);
    let mut start = starts[line as usize - 1];
    if line == 1 {
        start = bom_len(text).min(offset);
    }
    let col = text.get(start..offset).map_or(0, |s| s.chars().count());
    (line, u32::try_from(col + 1).unwrap_or(u32::MAX))
}

/// The end of a region the producer described.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionEnd {
    /// A position (exclusive).
    At {
        /// 1-based line.
        line: u32,
        /// 1-based column, in the region's unit.
        column: u32,
    },
    /// The end of a line, before its terminator or (with `include_eol`)
    /// after it.
    EndOfLine {
        /// 1-based line.
        line: u32,
        /// Whether the line terminator is part of the region.
        include_eol: bool,
    },
}

/// A region as a producer (SARIF, rdjson) describes it, before it is
/// resolved against the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRegion {
    /// 1-based start line.
    pub start_line: u32,
    /// 1-based start column, in `unit`.
    pub start_column: u32,
    /// Where the region ends.
    pub end: RegionEnd,
    /// How the columns count.
    pub unit: ColumnUnit,
}

impl RawRegion {
    /// Whether the region is empty on its face (an insertion point).
    pub fn is_empty_on_its_face(&self) -> bool {
        matches!(self.end, RegionEnd::At { line, column } if line == self.start_line && column == self.start_column)
    }

    /// Byte range of the region in `text`, or `None` when it does not fit.
    pub fn resolve(&self, text: &str) -> Option<Range<usize>> {
        let start = column_offset(text, self.start_line, self.start_column, self.unit)?;
        let end = match self.end {
            RegionEnd::At { line, column } => column_offset(text, line, column, self.unit)?,
            RegionEnd::EndOfLine { line, include_eol } => {
                let (line_start, content) = line_text(text, line)?;
                let end = line_start + content.len();
                if include_eol {
                    let rest = &text[end..];
                    end + if rest.starts_with("\r\n") {
                        2
                    } else {
                        usize::from(rest.starts_with('\n'))
                    }
                } else {
                    end
                }
            }
        };
        (start <= end).then_some(start..end)
    }

    /// A [`TextEdit`] for this region. With the file's text at hand the
    /// region is resolved: `original`, character columns and `byte_range` are
    /// filled from it. Without it, `original` is `given_original` (a snippet
    /// the producer carried) or empty, and the columns are the producer's
    /// (`u32::MAX` standing for "end of line").
    pub fn to_edit(
        self,
        file: &str,
        replacement: String,
        given_original: Option<String>,
        source: Option<&str>,
    ) -> Result<TextEdit, String> {
        if let Some(text) = source {
            let range = self.resolve(text).ok_or_else(|| {
                format!(
                    "region starting at {}:{}:{} does not fit the file",
                    excerpt(file),
                    self.start_line,
                    self.start_column
                )
            })?;
            let original = text[range.clone()].to_owned();
            if let Some(given) = &given_original
                && given != &original
                && !self.is_empty_on_its_face()
            {
                return Err(format!(
                    "the snippet of {}:{} ({:?}) differs from the file ({:?})",
                    excerpt(file),
                    self.start_line,
                    excerpt(given),
                    excerpt(&original)
                ));
            }
            let (start_line, start_column) = line_column(text, range.start);
            let (end_line, end_column) = line_column(text, range.end);
            return Ok(TextEdit {
                file: file.to_owned(),
                start_line,
                start_column,
                end_line,
                end_column,
                byte_range: Some((range.start, range.end)),
                original,
                replacement,
            });
        }
        let (end_line, end_column) = match self.end {
            RegionEnd::At { line, column } => (line, column),
            RegionEnd::EndOfLine { line, .. } => (line, u32::MAX),
        };
        let original = if self.is_empty_on_its_face() {
            String::new()
        } else {
            given_original.unwrap_or_default()
        };
        Ok(TextEdit {
            file: file.to_owned(),
            start_line: self.start_line,
            start_column: self.start_column,
            end_line,
            end_column,
            byte_range: None,
            original,
            replacement,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(line: u32, col: u32, original: &str, replacement: &str) -> TextEdit {
        let end_col = col + original.chars().count() as u32;
        TextEdit {
            file: "f.rs".into(),
            start_line: line,
            start_column: col,
            end_line: line,
            end_column: end_col,
            byte_range: None,
            original: original.into(),
            replacement: replacement.into(),
        }
    }

    #[test]
    fn exact_position_wins_over_nearer_copy() {
        let text = "a = x;\nb = x;\n";
        let e = edit(2, 5, "x", "y");
        assert_eq!(apply_edits(text, &[&e]).unwrap(), "a = x;\nb = y;\n");
    }

    #[test]
    fn shifted_text_is_reanchored_to_the_nearest_copy() {
        // Two lines were inserted above by an earlier fix.
        let text = "new1\nnew2\nfn f() {\n    return 1;\n}\n";
        let mut e = edit(2, 5, "return 1;", "1");
        e.byte_range = Some((20, 29));
        assert_eq!(
            apply_edits(text, &[&e]).unwrap(),
            "new1\nnew2\nfn f() {\n    1\n}\n"
        );
    }

    #[test]
    fn nearest_of_several_copies_is_chosen() {
        let text = "x\n\n\n\n\nx\nfill\nx\n";
        // Recorded on line 7 (now "fill"): line 6 and line 8 are both one
        // away; the tie goes to the one nearer in bytes, then the earlier.
        let e = edit(7, 1, "x", "y");
        assert_eq!(apply_edits(text, &[&e]).unwrap(), "x\n\n\n\n\ny\nfill\nx\n");
    }

    #[test]
    fn edits_of_one_fix_move_together() {
        // Recorded on "    return 1;" as line 2; a line was inserted above,
        // and the old line 2, column 13 now holds an unrelated `;`.
        let text = "fn a() {\n    let yyyy;\n    return 1;\n}\n";
        let mut body = edit(2, 5, "return 1", "1");
        body.byte_range = Some((13, 21));
        let mut semi = edit(2, 13, ";", "");
        semi.byte_range = Some((21, 22));
        assert_eq!(
            apply_edits(text, &[&body, &semi]).unwrap(),
            "fn a() {\n    let yyyy;\n    1\n}\n"
        );
        // Without byte ranges the shift is counted in lines.
        body.byte_range = None;
        semi.byte_range = None;
        assert_eq!(
            apply_edits(text, &[&semi, &body]).unwrap(),
            "fn a() {\n    let yyyy;\n    1\n}\n"
        );
    }

    #[test]
    fn a_lone_byte_offset_is_not_trusted() {
        // The recorded offset 3 holds `x` by coincidence, but the recorded
        // line (2) holds the real one.
        let text = "ab x\ncd x\n";
        let mut e = edit(2, 4, "x", "y");
        e.byte_range = Some((3, 4));
        assert_eq!(apply_edits(text, &[&e]).unwrap(), "ab x\ncd y\n");
    }

    #[test]
    fn missing_text_is_stale_and_nothing_changes() {
        let text = "fn f() {}\n";
        let e = edit(1, 1, "return 1;", "1");
        let err = apply_edits(text, &[&e]).unwrap_err();
        assert!(matches!(err, EditError::Stale { line: 1, .. }), "{err}");
        assert!(err.to_string().contains("stale suggestion for f.rs:1"));
    }

    #[test]
    fn text_outside_the_window_is_stale() {
        let text = format!("target\n{}", "\n".repeat(200));
        let e = edit(150, 1, "target", "x");
        assert!(matches!(
            apply_edits(&text, &[&e]),
            Err(EditError::Stale { .. })
        ));
    }

    #[test]
    fn overlapping_edits_are_refused() {
        let text = "let a = b == true;\n";
        let whole = edit(1, 9, "b == true", "b");
        let part = edit(1, 14, "true", "false");
        let err = apply_edits(text, &[&whole, &part]).unwrap_err();
        assert!(matches!(err, EditError::Overlap { .. }), "{err}");
    }

    #[test]
    fn identical_duplicates_apply_once_and_order_is_reversed() {
        let text = "aaa bbb ccc\n";
        let a = edit(1, 1, "aaa", "A");
        let c = edit(1, 9, "ccc", "CCCCC");
        assert_eq!(apply_edits(text, &[&a, &c, &a]).unwrap(), "A bbb CCCCC\n");
    }

    #[test]
    fn insertion_and_unanchored_edits() {
        let text = "ab\n";
        let ins = edit(1, 2, "", "X");
        assert_eq!(apply_edits(text, &[&ins]).unwrap(), "aXb\n");
        let mut blind = edit(1, 1, "", "X");
        blind.end_column = 3;
        assert!(is_unanchored(&blind));
        assert!(matches!(
            apply_edits(text, &[&blind]),
            Err(EditError::Unanchored { .. })
        ));
        let past = edit(5, 1, "", "X");
        assert!(matches!(
            apply_edits(text, &[&past]),
            Err(EditError::OutOfRange { .. })
        ));
    }

    #[test]
    fn columns_in_each_unit() {
        let text = "a𐐀b\n";
        assert_eq!(column_offset(text, 1, 3, ColumnUnit::Chars), Some(5));
        assert_eq!(column_offset(text, 1, 6, ColumnUnit::Utf8Bytes), Some(5));
        assert_eq!(column_offset(text, 1, 4, ColumnUnit::Utf16), Some(5));
        assert_eq!(column_offset(text, 1, 3, ColumnUnit::Utf8Bytes), None);
        assert_eq!(column_offset(text, 1, 4, ColumnUnit::Chars), Some(6));
        assert_eq!(column_offset(text, 1, 5, ColumnUnit::Chars), None);
    }

    #[test]
    fn an_edit_already_made_is_recognised_without_a_history() {
        let e = edit(2, 5, "teh", "the");
        assert!(already_present("a\nfix the b\n", &[&e]));
        // The old text is still there (nearby): not applied.
        assert!(!already_present("a\nfix teh the\n", &[&e]));
        // Gone, but something else stands there: not this fix.
        assert!(!already_present("a\nfix our b\n", &[&e]));
        assert!(!already_present("a\nfix the b\n", &[]));
    }

    #[test]
    fn a_byte_order_mark_is_not_a_column() {
        let text = "\u{feff}ab\ncd\n";
        for unit in [ColumnUnit::Chars, ColumnUnit::Utf8Bytes, ColumnUnit::Utf16] {
            assert_eq!(column_offset(text, 1, 1, unit), Some(3));
            assert_eq!(column_offset(text, 1, 2, unit), Some(4));
        }
        assert_eq!(column_offset(text, 2, 1, ColumnUnit::Chars), Some(6));
        assert_eq!(line_column(text, 4), (1, 2));
        assert_eq!(line_column(text, 0), (1, 1));
        let e = edit(1, 2, "b", "B");
        assert_eq!(apply_edits(text, &[&e]).unwrap(), "\u{feff}aB\ncd\n");
    }

    #[test]
    fn regions_resolve_with_line_ends() {
        let text = "abc\r\ndef\nghi";
        let r = RawRegion {
            start_line: 1,
            start_column: 2,
            end: RegionEnd::EndOfLine {
                line: 2,
                include_eol: true,
            },
            unit: ColumnUnit::Chars,
        };
        assert_eq!(&text[r.resolve(text).unwrap()], "bc\r\ndef\n");
        let e = r.to_edit("f", "Z".into(), None, Some(text)).unwrap();
        assert_eq!(e.original, "bc\r\ndef\n");
        assert_eq!((e.start_line, e.start_column), (1, 2));
        assert_eq!((e.end_line, e.end_column), (3, 1));
        let blind = r.to_edit("f", "Z".into(), None, None).unwrap();
        assert!(is_unanchored(&blind));
    }
}
