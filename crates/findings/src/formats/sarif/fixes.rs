//! A result's `fixes[]`: each one a [`Suggestion`] whose edits are its
//! replacements, placed against the file when a source reader has it.

use super::*;

/// One fix (an alternative) as a suggestion: every replacement of every
/// artifact change, or why it cannot be read.
pub(super) fn fix_to_suggestion(
    fix: &Value,
    run: &RunContext<'_>,
    sources: &mut SourceCache<'_, '_>,
) -> Result<Suggestion, String> {
    let changes = fix
        .get("artifactChanges")
        .and_then(Value::as_array)
        .ok_or("no `artifactChanges` array")?;
    let mut edits = Vec::new();
    for (a, change) in changes.iter().enumerate() {
        let file = change
            .get("artifactLocation")
            .and_then(|l| run.artifact_path(l))
            .ok_or_else(|| format!("artifactChanges[{a}] has no artifact uri"))?;
        let replacements = change
            .get("replacements")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("artifactChanges[{a}] has no `replacements` array"))?;
        for (k, replacement) in replacements.iter().enumerate() {
            let edit = replacement_to_edit(replacement, &file, run.unit, sources)
                .map_err(|why| format!("artifactChanges[{a}].replacements[{k}]: {why}"))?;
            edits.push(edit);
        }
    }
    Ok(Suggestion {
        message: fix
            .get("description")
            .and_then(|d| str_field(d, "text"))
            .map(str::to_owned),
        edits,
    })
}

fn replacement_to_edit(
    replacement: &Value,
    file: &str,
    unit: ColumnUnit,
    sources: &mut SourceCache<'_, '_>,
) -> Result<TextEdit, String> {
    let region = replacement
        .get("deletedRegion")
        .ok_or("no `deletedRegion`")?;
    let inserted = replacement
        .get("insertedContent")
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let snippet = region
        .get("snippet")
        .and_then(|s| s.get("text"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let char_range = match (
        region.get("charOffset").and_then(Value::as_u64),
        region.get("charLength").and_then(Value::as_u64),
    ) {
        (Some(o), len) => Some((o as usize, (o + len.unwrap_or(0)) as usize)),
        _ => None,
    };
    let Some(start_line) = u32_field(region, "startLine").filter(|&l| l > 0) else {
        // A character-offset region: placeable only with the file at hand.
        let (start, end) =
            char_range.ok_or("`deletedRegion` has neither startLine nor charOffset")?;
        let text = sources
            .get(file)
            .ok_or("`deletedRegion` has only character offsets and the file cannot be read")?;
        let to_byte = |n: usize| offset_in_units(text, n, unit);
        let (s, e) = to_byte(start)
            .zip(to_byte(end))
            .filter(|(s, e)| s <= e)
            .ok_or("`deletedRegion` offsets lie outside the file")?;
        let (start_line, start_column) = orchestrator_core::edit::line_column(text, s);
        let (end_line, end_column) = orchestrator_core::edit::line_column(text, e);
        return Ok(TextEdit {
            file: file.to_owned(),
            start_line,
            start_column,
            end_line,
            end_column,
            byte_range: Some((s, e)),
            original: text[s..e].to_owned(),
            replacement: inserted,
        });
    };
    let start_column = u32_field(region, "startColumn").unwrap_or(1);
    let end_line = u32_field(region, "endLine").unwrap_or(start_line);
    let end = match u32_field(region, "endColumn") {
        Some(column) => RegionEnd::At {
            line: end_line,
            column,
        },
        None => RegionEnd::EndOfLine {
            line: end_line,
            include_eol: false,
        },
    };
    let raw = RawRegion {
        start_line,
        start_column,
        end,
        unit,
    };
    // With the file at hand the region is resolved against it (a snippet is
    // checked against the file); only without it does a snippet stand in
    // for the replaced text.
    let mut edit = raw.to_edit(file, inserted, snippet, sources.get(file))?;
    if edit.byte_range.is_none() {
        edit.byte_range = char_range;
    }
    Ok(edit)
}

/// Byte offset of the `n`th unit of `text`.
fn offset_in_units(text: &str, n: usize, unit: ColumnUnit) -> Option<usize> {
    let mut count = 0usize;
    for (i, c) in text.char_indices() {
        if count == n {
            return Some(i);
        }
        if count > n {
            return None;
        }
        count += match unit {
            ColumnUnit::Chars => 1,
            ColumnUnit::Utf8Bytes => c.len_utf8(),
            ColumnUnit::Utf16 => c.len_utf16(),
        };
    }
    (count == n).then_some(text.len())
}
