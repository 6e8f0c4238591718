//! Exact placement of a fix on a file that earlier fixes already changed.
//!
//! Findings are produced once, against the file as it was then (the
//! *baseline*), and fixed one at a time. [`EditHistory`] records, in
//! baseline coordinates, every edit applied to one file since then; a new
//! fix's edits (also in baseline coordinates, from their `byte_range`) are
//! mapped through it to the current text, the way `cargo fix` applies all
//! suggestions at once against the original:
//!
//! - an applied edit that ends at or before a new edit's start moves it by
//!   its length change; a pure insertion at the very point where a new
//!   replacement starts goes before it (and moves it), while a new pure
//!   insertion at the start of an applied replacement goes before that;
//! - a new edit identical to an applied one (same range, same replacement)
//!   is already applied and collapses, as rustfix tolerates identical
//!   replacements;
//! - a new edit that overlaps a different applied edit conflicts and the
//!   whole fix is refused ([`EditError::Conflict`]);
//! - a deletion or replacement must find exactly its `original` text at the
//!   mapped place, else [`EditError::Moved`]; a pure insertion has no text to
//!   check and relies on the map, which is why the map is checked against the
//!   file first: every applied edit's replacement must stand at its mapped
//!   place ([`EditError::HistoryMismatch`] otherwise).
//!
//! Within one fix the rules are those of [`super::apply_edits`]: all edits or
//! none, identical duplicates applied once, overlapping different edits
//! refused ([`EditError::Overlap`]).
//!
//! The property that makes this exact (tested by a property test): any
//! sequence of non-conflicting fixes applied one by one, in any order, each
//! recorded in the history, gives the same text as applying all their edits
//! at once to the baseline.

use serde::{Deserialize, Serialize};

use super::EditError;
use crate::finding::TextEdit;

/// One edit applied to a file, in the coordinates of its baseline text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedEdit {
    /// Byte offset in the baseline where the replaced text starts.
    pub start: usize,
    /// Byte offset in the baseline just past the replaced text.
    pub end: usize,
    /// The text that replaced it.
    pub replacement: String,
}

impl AppliedEdit {
    fn is_insertion(&self) -> bool {
        self.start == self.end
    }

    /// How much longer the text got.
    fn delta(&self) -> isize {
        self.replacement.len() as isize - (self.end - self.start) as isize
    }
}

/// The edits applied to one file since its findings were produced, in
/// baseline coordinates, sorted and pairwise non-overlapping. See the module
/// docs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EditHistory {
    edits: Vec<AppliedEdit>,
}

/// What [`apply_mapped`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedOutcome {
    /// The new text of the file.
    pub text: String,
    /// The edits newly applied, in baseline coordinates (identical
    /// duplicates of earlier fixes left out); record them with
    /// [`EditHistory::record`].
    pub applied: Vec<AppliedEdit>,
}

/// Where a baseline edit stands relative to an applied one.
enum Relation {
    /// The applied edit comes first: the new one moves by its delta.
    Before,
    /// The applied edit comes after: no effect.
    After,
    /// The same edit.
    Identical,
    /// They touch the same text differently.
    Conflict,
}

fn relation(applied: &AppliedEdit, start: usize, end: usize, replacement: &str) -> Relation {
    if applied.start == start && applied.end == end && applied.replacement == replacement {
        return Relation::Identical;
    }
    let new_is_insertion = start == end;
    match (applied.is_insertion(), new_is_insertion) {
        (true, true) => {
            if applied.start < start {
                Relation::Before
            } else if applied.start > start {
                Relation::After
            } else {
                Relation::Conflict
            }
        }
        // An applied insertion: before a new region that starts at or after
        // it, inside one that contains it strictly.
        (true, false) => {
            if applied.start <= start {
                Relation::Before
            } else if applied.start >= end {
                Relation::After
            } else {
                Relation::Conflict
            }
        }
        // A new insertion against an applied region.
        (false, true) => {
            if applied.end <= start {
                Relation::Before
            } else if applied.start >= start {
                Relation::After
            } else {
                Relation::Conflict
            }
        }
        (false, false) => {
            if applied.end <= start {
                Relation::Before
            } else if applied.start >= end {
                Relation::After
            } else {
                Relation::Conflict
            }
        }
    }
}

impl EditHistory {
    /// An empty history: the file is as its findings saw it.
    pub fn new() -> Self {
        Self::default()
    }

    /// The applied edits, sorted by baseline position.
    pub fn edits(&self) -> &[AppliedEdit] {
        &self.edits
    }

    /// Whether nothing was applied yet.
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// Records edits that were applied (as [`apply_mapped`] returns them).
    /// An edit identical to a recorded one is recorded once.
    pub fn record(&mut self, applied: &[AppliedEdit]) {
        for edit in applied {
            if self.edits.contains(edit) {
                continue;
            }
            let at = self
                .edits
                .partition_point(|e| (e.start, e.end) <= (edit.start, edit.end));
            self.edits.insert(at, edit.clone());
        }
    }

    /// Maps a baseline region to the current text: `Ok(Some(range))`, or
    /// `Ok(None)` when an identical edit was already applied, or the index of
    /// the applied edit it conflicts with.
    fn map(
        &self,
        start: usize,
        end: usize,
        replacement: &str,
    ) -> Result<Option<std::ops::Range<usize>>, usize> {
        let mut shift: isize = 0;
        for (i, applied) in self.edits.iter().enumerate() {
            match relation(applied, start, end, replacement) {
                Relation::Before => shift += applied.delta(),
                Relation::After => {}
                Relation::Identical => return Ok(None),
                Relation::Conflict => return Err(i),
            }
        }
        let at = |p: usize| p.checked_add_signed(shift).unwrap_or(0);
        Ok(Some(at(start)..at(end)))
    }

    /// Checks that this history describes `text`: every applied edit's
    /// replacement stands at its mapped place. `file` names the file in the
    /// error.
    pub fn check(&self, file: &str, text: &str) -> Result<(), EditError> {
        let mut shift: isize = 0;
        for applied in &self.edits {
            let at = applied.start.checked_add_signed(shift);
            let found = at.and_then(|s| text.get(s..s + applied.replacement.len()));
            if found != Some(applied.replacement.as_str()) {
                return Err(EditError::HistoryMismatch {
                    file: file.to_owned(),
                    offset: applied.start,
                });
            }
            shift += applied.delta();
        }
        Ok(())
    }
}

/// Applies one fix's `edits` (baseline coordinates: every edit needs a
/// `byte_range`) to `text`, the file's current content, which `history`
/// must describe. See the module docs for the rules; on any error nothing is
/// applied.
pub fn apply_mapped(
    text: &str,
    history: &EditHistory,
    edits: &[&TextEdit],
) -> Result<MappedOutcome, EditError> {
    let Some(first) = edits.first() else {
        return Ok(MappedOutcome {
            text: text.to_owned(),
            applied: Vec::new(),
        });
    };
    history.check(&first.file, text)?;
    let regions = baseline_regions(edits)?;
    let mut placed = Vec::with_capacity(regions.len());
    let mut applied = Vec::with_capacity(regions.len());
    for (start, end, edit) in regions {
        let range = match history.map(start, end, &edit.replacement) {
            Ok(Some(range)) => range,
            Ok(None) => continue,
            Err(i) => {
                let other = &history.edits[i];
                return Err(EditError::Conflict {
                    file: edit.file.clone(),
                    line: edit.start_line,
                    start: other.start,
                    end: other.end,
                });
            }
        };
        if text.get(range.clone()) != Some(edit.original.as_str()) {
            return Err(EditError::Moved {
                file: edit.file.clone(),
                line: edit.start_line,
                original: edit.original.clone(),
            });
        }
        applied.push(AppliedEdit {
            start,
            end,
            replacement: edit.replacement.clone(),
        });
        placed.push((range, edit.replacement.as_str()));
    }
    let mut out = text.to_owned();
    // Back to front; at one point a pure insertion sorts before the
    // replacement that starts there, so applying the replacement first keeps
    // the insertion in front of it.
    for (range, replacement) in placed.iter().rev() {
        out.replace_range(range.clone(), replacement);
    }
    Ok(MappedOutcome { text: out, applied })
}

/// The fix's baseline regions `(start, end, edit)`, sorted, with identical
/// duplicates dropped. An edit without a byte range that matches its
/// original, or two regions that overlap (or two insertions at one point,
/// whose order nobody gave), is an error.
fn baseline_regions<'e>(
    edits: &[&'e TextEdit],
) -> Result<Vec<(usize, usize, &'e TextEdit)>, EditError> {
    let mut regions: Vec<(usize, usize, &TextEdit)> = Vec::with_capacity(edits.len());
    for edit in edits {
        let (start, end) = edit.byte_range.ok_or_else(|| EditError::NoByteRange {
            file: edit.file.clone(),
            line: edit.start_line,
        })?;
        if end < start || edit.original.len() != end - start {
            return Err(EditError::NoByteRange {
                file: edit.file.clone(),
                line: edit.start_line,
            });
        }
        if !regions
            .iter()
            .any(|(s, e, o)| (*s, *e) == (start, end) && o.replacement == edit.replacement)
        {
            regions.push((start, end, edit));
        }
    }
    regions.sort_by_key(|(s, e, _)| (*s, *e));
    for pair in regions.windows(2) {
        let ((s1, e1, a), (s2, e2, b)) = (pair[0], pair[1]);
        // Sorted by (start, end): the second being an insertion at the first's
        // start means two insertions at one point, whose order nobody gave.
        // (An insertion followed by a replacement at its point is fine.)
        let same_point = s1 == s2 && s2 == e2;
        if e1 > s2 || same_point {
            return Err(EditError::Overlap {
                file: b.file.clone(),
                first_line: a.start_line,
                second_line: b.start_line,
            });
        }
    }
    Ok(regions)
}

#[cfg(test)]
mod tests;
