//! Reader for ruff's JSON output (`ruff check --output-format json`).
//!
//! The document is an array with one object per diagnostic. Per diagnostic:
//! - `category` is `code` (`F401`; `name`, then `ruff`, when a syntax error
//!   has no code), `title` the `message`, `recommendations` the fix's
//!   `message` and `see <url>`;
//! - `file` and `line` from `filename` (ruff writes absolute paths; the
//!   caller makes them repository-relative) and `location.row`;
//! - `severity`: ruff marks every diagnostic `"error"`; a rule violation is
//!   read as medium, a syntax error (no `code`) as high, with dimension
//!   `correctness` (else `quality`);
//! - `id` is `<code>@<filename>:<row>:<column>`; the fingerprint covers code,
//!   file, row, column and message.
//!
//! Fixes carry an `applicability`: `safe`, `unsafe` or `displayonly`.
//! `ruff check --fix` applies only the safe ones (unsafe ones need
//! `--unsafe-fixes`, display-only ones are never applied), so only a safe fix
//! becomes a [`Suggestion`]; the others are named in the recommendations and
//! counted in a note. Each of the fix's `edits` (`content` replacing
//! `location`..`end_location`, end exclusive) becomes an edit of the
//! suggestion.
//!
//! Positions are 1-based rows and **Unicode code point** columns, with lines
//! broken at `\n`, `\r\n` and a lone `\r`, and a leading byte order mark not
//! counted (ruff strips it before indexing and writes it back). With the
//! file at hand (the output does not carry it: [`ParseOptions::sources`]),
//! each edit is resolved to its byte range and replaced text with exactly
//! those rules; without it, the edit keeps ruff's columns and an empty
//! `original`, a note is recorded, and the applier refuses it as unanchored.

use serde_json::Value;

use super::order::FixKey;
use super::{
    FormatError, InputFormat, ParseOptions, ParseOutcome, SourceCache, json_type, position_field,
    str_field, unanchored_note,
};
use orchestrator_core::edit::{ColumnUnit, RawRegion, RegionEnd, is_unanchored, line_column};
use orchestrator_core::finding::{Finding, Fingerprint, Severity, Suggestion, TextEdit};
use orchestrator_core::limits::excerpt;

/// Reads ruff's JSON output without access to the sources.
pub fn parse(text: &str, source_name: &str) -> Result<ParseOutcome, FormatError> {
    parse_with(text, source_name, &ParseOptions::default())
}

/// Reads ruff's JSON output, resolving fix edits against the files when a
/// source reader is given.
pub fn parse_with(
    text: &str,
    source_name: &str,
    options: &ParseOptions<'_>,
) -> Result<ParseOutcome, FormatError> {
    let items = super::document_list(text, source_name, InputFormat::RuffJson)?;
    let mut out = ParseOutcome::new(InputFormat::RuffJson);
    let mut sources = SourceCache::new(options);
    let mut not_safe = 0usize;
    for (i, item) in items.iter().enumerate() {
        let location = format!("{source_name}: [{i}]");
        match diagnostic_to_finding(item, &location, &mut sources) {
            Ok(read) => {
                not_safe += usize::from(read.not_safe);
                let key = FixKey::ruff(&read.finding, &read.code, read.fix_start, i);
                out.accept_keyed(&location, read.finding, read.notes, key);
            }
            Err(message) => out.reject(location, message),
        }
    }
    if not_safe > 0 {
        out.notes.push(format!(
            "{source_name}: {not_safe} unsafe or display-only {} left out (`ruff check --fix` applies only safe fixes)",
            if not_safe == 1 { "fix" } else { "fixes" }
        ));
    }
    Ok(out.finish())
}

/// One diagnostic, read.
struct Read {
    finding: Finding,
    code: String,
    /// The fix's first edit start (row, column), for the fix order.
    fix_start: Option<(u32, u32)>,
    /// The diagnostic has a fix that `ruff check --fix` does not apply.
    not_safe: bool,
    notes: Vec<String>,
}

fn diagnostic_to_finding(
    d: &Value,
    location: &str,
    sources: &mut SourceCache<'_, '_>,
) -> Result<Read, String> {
    if !d.is_object() {
        return Err(format!("is a {}, expected an object", json_type(d)));
    }
    let message = str_field(d, "message").ok_or("has no `message`")?;
    let name = str_field(d, "name");
    let code = str_field(d, "code").or(name).unwrap_or("ruff").to_owned();
    let syntax_error = str_field(d, "code").is_none();
    let file = str_field(d, "filename");
    let row = position_field(d.get("location"), "row", "location.row")?.filter(|&r| r > 0);
    let column = position_field(d.get("location"), "column", "location.column")?.filter(|&c| c > 0);
    let id = match file {
        Some(f) => format!("{code}@{f}:{}:{}", row.unwrap_or(0), column.unwrap_or(1)),
        None => format!("{code}@{location}"),
    };
    let (severity, dimension) = if syntax_error {
        (Severity::High, "correctness")
    } else {
        (Severity::Medium, "quality")
    };
    let mut finding = Finding::new(id.as_str(), message, severity)
        .with_category(code.as_str())
        .with_dimension(dimension)
        .with_description(name.map_or_else(|| message.to_owned(), |n| format!("{n}: {message}")));
    if let Some(f) = file {
        finding = finding.at(f, row);
    }
    finding.fingerprint = Fingerprint::from_parts(&[
        "ruff",
        &code,
        file.unwrap_or(""),
        &row.map(|l| l.to_string()).unwrap_or_default(),
        &column.map(|c| c.to_string()).unwrap_or_default(),
        message,
    ]);
    let mut read = Read {
        finding,
        code,
        fix_start: None,
        not_safe: false,
        notes: Vec::new(),
    };
    match d.get("fix") {
        None | Some(Value::Null) => {}
        Some(fix) => read_fix(fix, file, location, &id, sources, &mut read)?,
    }
    if let Some(url) = str_field(d, "url") {
        read.finding = read
            .finding
            .clone()
            .with_recommendation(format!("see {url}"));
    }
    Ok(read)
}

/// Reads `fix`: a safe fix becomes the finding's suggestion; another is
/// named in its recommendations.
fn read_fix(
    fix: &Value,
    file: Option<&str>,
    location: &str,
    id: &str,
    sources: &mut SourceCache<'_, '_>,
    read: &mut Read,
) -> Result<(), String> {
    if !fix.is_object() {
        return Err(format!("`fix` is a {}, expected an object", json_type(fix)));
    }
    let applicability = str_field(fix, "applicability").unwrap_or("safe");
    let title = str_field(fix, "message").map(str::to_owned);
    if applicability != "safe" {
        read.not_safe = true;
        let what = title.as_deref().unwrap_or("a fix");
        read.finding = read.finding.clone().with_recommendation(format!(
            "ruff offers an {applicability} fix, which `ruff check --fix` does not apply: {what}"
        ));
        return Ok(());
    }
    if let Some(t) = &title {
        read.finding = read.finding.clone().with_recommendation(t.as_str());
    }
    let Some(file) = file else {
        read.notes.push(format!(
            "{location}: {id}: the fix is left out: the diagnostic has no `filename`"
        ));
        return Ok(());
    };
    let edits = fix
        .get("edits")
        .and_then(Value::as_array)
        .ok_or("`fix.edits` is missing or not an array")?;
    let text = sources.get(file);
    let mut out = Vec::with_capacity(edits.len());
    for (k, edit) in edits.iter().enumerate() {
        let ReadEdit { start, resolved } = read_edit(k, edit, file, text)?;
        read.fix_start = Some(read.fix_start.map_or(start, |s| s.min(start)));
        match resolved {
            Ok(e) => out.push(e),
            Err(why) => {
                read.notes.push(format!(
                    "{location}: {id}: the fix is left out: fix.edits[{k}]: {why}"
                ));
                return Ok(());
            }
        }
    }
    if out.is_empty() {
        return Ok(());
    }
    if out.iter().any(is_unanchored) {
        read.notes.push(unanchored_note(location, id));
    }
    read.finding.suggestions.push(Suggestion {
        message: title,
        edits: out,
    });
    Ok(())
}

/// Edit `k` of a fix (`edit`) in `file`: where it starts (row, column),
/// and the edit — resolved against the file's `text`, or without it taken
/// at ruff's positions — or why it cannot be placed. A position that is
/// missing or not positive is an error.
fn read_edit(k: usize, edit: &Value, file: &str, text: Option<&str>) -> Result<ReadEdit, String> {
    let at = |key: &str| -> Result<(u32, u32), String> {
        let path = format!("fix.edits[{k}].{key}");
        let row = position_field(edit.get(key), "row", &format!("{path}.row"))?;
        let column = position_field(edit.get(key), "column", &format!("{path}.column"))?;
        row.zip(column)
            .filter(|&(r, c)| r > 0 && c > 0)
            .ok_or_else(|| format!("`{path}` needs a positive row and column"))
    };
    let start = at("location")?;
    let end = at("end_location")?;
    let content = edit
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let resolved = match text {
        Some(text) => resolve(text, file, start, end, content),
        None => RawRegion {
            start_line: start.0,
            start_column: start.1,
            end: RegionEnd::At {
                line: end.0,
                column: end.1,
            },
            unit: ColumnUnit::Chars,
        }
        .to_edit(file, content, None, None),
    };
    Ok(ReadEdit { start, resolved })
}

/// One edit of a fix as read.
struct ReadEdit {
    /// Where it starts: row and column.
    start: (u32, u32),
    /// The edit, or why it cannot be placed.
    resolved: Result<TextEdit, String>,
}

/// An edit from ruff's positions, resolved against the file's text.
fn resolve(
    text: &str,
    file: &str,
    start: (u32, u32),
    end: (u32, u32),
    replacement: String,
) -> Result<TextEdit, String> {
    let index = LineIndex::new(text);
    let s = index.offset(start).ok_or_else(|| {
        format!(
            "{}:{}:{} lies outside the file",
            excerpt(file),
            start.0,
            start.1
        )
    })?;
    let e = index.offset(end).filter(|&e| e >= s).ok_or_else(|| {
        format!(
            "{}:{}:{} lies outside the file",
            excerpt(file),
            end.0,
            end.1
        )
    })?;
    let (start_line, start_column) = line_column(text, s);
    let (end_line, end_column) = line_column(text, e);
    Ok(TextEdit {
        file: file.to_owned(),
        start_line,
        start_column,
        end_line,
        end_column,
        byte_range: Some((s, e)),
        original: text[s..e].to_owned(),
        replacement,
    })
}

/// ruff's line index over a file: a leading BOM skipped, lines broken at
/// `\n`, `\r\n` and a lone `\r`, columns in code points.
struct LineIndex<'t> {
    text: &'t str,
    /// Byte offsets (in `text`) where each line starts.
    starts: Vec<usize>,
}

impl<'t> LineIndex<'t> {
    fn new(text: &'t str) -> Self {
        let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
        let mut starts = vec![bom];
        let bytes = text.as_bytes();
        let mut i = bom;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => starts.push(i + 1),
                b'\r' if bytes.get(i + 1) == Some(&b'\n') => {
                    starts.push(i + 2);
                    i += 1;
                }
                b'\r' => starts.push(i + 1),
                _ => {}
            }
            i += 1;
        }
        Self { text, starts }
    }

    /// The byte offset of 1-based (row, code point column); a column one
    /// past the line's content is its end.
    fn offset(&self, (row, column): (u32, u32)) -> Option<usize> {
        let start = *self
            .starts
            .get(usize::try_from(row).ok()?.checked_sub(1)?)?;
        let wanted = usize::try_from(column).ok()?.checked_sub(1)?;
        let rest = &self.text[start..];
        if wanted == 0 {
            return Some(start);
        }
        let mut seen = 0usize;
        for (i, c) in rest.char_indices() {
            if c == '\n' || c == '\r' {
                return (seen == wanted).then_some(start + i);
            }
            if seen == wanted {
                return Some(start + i);
            }
            seen += 1;
        }
        (seen == wanted).then_some(self.text.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_index_follows_ruff() {
        let text = "\u{feff}a\rbé😀c\r\nd\n";
        let index = LineIndex::new(text);
        assert_eq!(index.offset((1, 1)), Some(3), "the BOM is not counted");
        assert_eq!(&text[index.offset((2, 4)).unwrap()..], "c\r\nd\n");
        assert_eq!(&text[index.offset((2, 5)).unwrap()..], "\r\nd\n");
        assert_eq!(index.offset((2, 6)), None);
        assert_eq!(&text[index.offset((3, 1)).unwrap()..], "d\n");
        assert_eq!(index.offset((4, 1)), Some(text.len()));
        assert_eq!(index.offset((5, 1)), None);
    }
}
