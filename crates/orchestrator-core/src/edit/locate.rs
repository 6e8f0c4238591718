//! Finding where an edit applies in the current text: by its `original`
//! text near where it was recorded (see the module docs of [`super`]), and
//! all edits of one fix together, relative to the most distinctive one.

use std::ops::Range;

use super::*;

/// Finds where `edit` applies in `text` (the current content of its file),
/// re-anchoring by `edit.original` as described in the module docs.
pub fn locate(text: &str, edit: &TextEdit) -> Result<Range<usize>, EditError> {
    locate_near(text, edit, None)
}

/// [`locate`], with an expected byte offset derived from a sibling edit of
/// the same fix that was already located (`shifted`): the edit is first
/// looked for exactly there, and candidates are ranked by their distance
/// to it.
fn locate_near(
    text: &str,
    edit: &TextEdit,
    shifted: Option<usize>,
) -> Result<Range<usize>, EditError> {
    if edit.original.is_empty() {
        return insertion_point(text, edit, shifted).map(|at| at..at);
    }
    let original = edit.original.as_str();
    let len = original.len();
    let found_at = |start: usize| text.get(start..start + len) == Some(original);
    if let Some(p) = shifted
        && found_at(p)
    {
        return Ok(p..p + len);
    }
    let by_bytes = edit.byte_range.map(|(s, _)| s).filter(|&s| found_at(s));
    let by_position = char_position(text, edit.start_line, edit.start_column);
    // The recorded byte offset and line/column agree and the text is there:
    // nothing before the edit has moved.
    if shifted.is_none()
        && let Some(b) = by_bytes
        && by_position == Some(b)
    {
        return Ok(b..b + len);
    }
    nearest(text, edit, shifted, by_position)
        .map(|start| start..start + len)
        .ok_or_else(|| EditError::Stale {
            file: edit.file.clone(),
            line: edit.start_line,
            original: edit.original.clone(),
            window: ANCHOR_WINDOW_LINES,
        })
}

/// Where an insertion (`edit` with an empty original) goes: at the
/// sibling's `shifted` offset, else at its line and column. An insertion
/// with no anchor to find it by again is refused.
fn insertion_point(
    text: &str,
    edit: &TextEdit,
    shifted: Option<usize>,
) -> Result<usize, EditError> {
    if is_unanchored(edit) {
        return Err(EditError::Unanchored {
            file: edit.file.clone(),
            line: edit.start_line,
        });
    }
    if let Some(at) = shifted.filter(|&p| text.is_char_boundary(p)) {
        return Ok(at);
    }
    char_position(text, edit.start_line, edit.start_column).ok_or_else(|| EditError::OutOfRange {
        file: edit.file.clone(),
        line: edit.start_line,
        column: edit.start_column,
    })
}

/// The start of the occurrence of `edit.original` nearest where the edit
/// is expected — at `shifted`, else at its line and column
/// (`by_position`), else at its recorded byte offset — within
/// [`ANCHOR_WINDOW_LINES`] lines of its line: the closest line first, then
/// the closest offset, then the first.
fn nearest(
    text: &str,
    edit: &TextEdit,
    shifted: Option<usize>,
    by_position: Option<usize>,
) -> Option<usize> {
    let original = edit.original.as_str();
    let starts = line_starts(text);
    let wanted_line = shifted.map_or(edit.start_line.max(1), |p| line_of(&starts, p));
    let expected = shifted
        .or(by_position)
        .or(edit.byte_range.map(|(s, _)| s))
        .unwrap_or(starts[line_index(&starts, wanted_line)])
        .min(text.len());
    let window_start = starts[line_index(&starts, wanted_line.saturating_sub(ANCHOR_WINDOW_LINES))];
    let window_end_line = wanted_line.saturating_add(ANCHOR_WINDOW_LINES);
    let window_end = if (window_end_line as usize) < starts.len() {
        starts[window_end_line as usize]
    } else {
        text.len()
    };
    let mut best: Option<((u32, usize, usize), usize)> = None;
    let mut from = window_start;
    while from < window_end {
        let Some(found) = text[from..].find(original) else {
            break;
        };
        let start = from + found;
        if start >= window_end {
            break;
        }
        let line = line_of(&starts, start);
        let score = (line.abs_diff(wanted_line), start.abs_diff(expected), start);
        if best.is_none_or(|(b, _)| score < b) {
            best = Some((score, start));
        }
        // Step one character on, so that overlapping occurrences are seen.
        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    best.map(|(_, start)| start)
}

/// Index into `starts` of 1-based `line`, clamped to the text.
fn line_index(starts: &[usize], line: u32) -> usize {
    (line.max(1) as usize - 1).min(starts.len() - 1)
}

/// Locates all edits of one fix in one file. The edit with the longest
/// `original` (the most distinctive text) is located first; the others are
/// expected at the same shift from their recorded positions (in bytes when
/// both carry byte ranges, else in lines), so that a short edit such as a
/// lone `;` cannot be anchored to an unrelated copy nearby.
pub(super) fn locate_all(text: &str, edits: &[&TextEdit]) -> Result<Vec<Range<usize>>, EditError> {
    let Some(anchor_index) = edits
        .iter()
        .enumerate()
        .max_by_key(|(i, e)| (e.original.len(), std::cmp::Reverse(*i)))
        .map(|(i, _)| i)
    else {
        return Ok(Vec::new());
    };
    let anchor = edits[anchor_index];
    let anchor_range = locate(text, anchor)?;
    let starts = line_starts(text);
    let line_shift = i64::from(line_of(&starts, anchor_range.start)) - i64::from(anchor.start_line);
    let mut ranges = Vec::with_capacity(edits.len());
    for (i, edit) in edits.iter().enumerate() {
        if i == anchor_index {
            ranges.push(anchor_range.clone());
            continue;
        }
        let shifted = match (anchor.byte_range, edit.byte_range) {
            (Some((a, _)), Some((e, _))) => {
                usize::try_from(e as i64 + anchor_range.start as i64 - a as i64).ok()
            }
            _ => u32::try_from(i64::from(edit.start_line) + line_shift)
                .ok()
                .and_then(|line| char_position(text, line, edit.start_column)),
        }
        .filter(|&p| p <= text.len());
        ranges.push(locate_near(text, edit, shifted)?);
    }
    Ok(ranges)
}
