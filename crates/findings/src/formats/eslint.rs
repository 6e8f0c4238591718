//! Reader for ESLint's JSON formatter (`eslint -f json`).
//!
//! The document is an array with one result per linted file: `filePath`
//! (absolute), `messages[]`, and `source` (the file's text, byte order mark
//! included) when the file has messages and no `output` was written. Every
//! message becomes a finding:
//! - `category` is `ruleId` (`eslint` for a parse error, whose `ruleId` is
//!   `null`), `title` the `message`;
//! - `file` and `line` from `filePath` (the caller makes it
//!   repository-relative) and `line`;
//! - `severity`: 2 (error) or a fatal parse error high, 1 (warn) medium; the
//!   dimension is `correctness` for a fatal message, else `quality`;
//! - `id` is `<ruleId>@<filePath>:<line>:<column>`; the fingerprint covers
//!   rule, file, line, column and message;
//! - `suggestions[]` (editor suggestions, which `eslint --fix` never
//!   applies) are listed in the recommendations, not applied.
//!
//! A message's `fix` (`{range: [start, end], text}`) becomes its
//! [`Suggestion`]: ESLint merges a rule's several fixes for one report into
//! one, so there is at most one. `range` counts **UTF-16 code units**,
//! 0-based and end-exclusive, into the text **without its byte order mark**
//! (ESLint's `SourceCode.text`); it is resolved against the result's
//! `source`, else the file through [`ParseOptions::sources`], into the edit's
//! byte range and replaced text. Without either text the range cannot be
//! placed at all, and the fix is left out with a note.

use serde_json::Value;

use super::order::FixKey;
use super::{
    FormatError, InputFormat, ParseOptions, ParseOutcome, SourceCache, json_type, position_field,
    str_field,
};
use orchestrator_core::edit::line_column;
use orchestrator_core::finding::{Finding, Fingerprint, Severity, Suggestion, TextEdit};

/// Reads ESLint's JSON output without access to the sources (the results'
/// own `source` still places their fixes).
pub fn parse(text: &str, source_name: &str) -> Result<ParseOutcome, FormatError> {
    parse_with(text, source_name, &ParseOptions::default())
}

/// Reads ESLint's JSON output; a result without `source` has its fixes
/// placed against the file read through the source reader.
pub fn parse_with(
    text: &str,
    source_name: &str,
    options: &ParseOptions<'_>,
) -> Result<ParseOutcome, FormatError> {
    let results = super::document_list(text, source_name, InputFormat::EslintJson)?;
    let mut out = ParseOutcome::new(InputFormat::EslintJson);
    let mut sources = SourceCache::new(options);
    let mut seq = 0usize;
    for (i, result) in results.iter().enumerate() {
        let at = format!("{source_name}: [{i}]");
        let Some(file) = str_field(result, "filePath") else {
            out.reject(at, "has no `filePath`");
            continue;
        };
        let messages = match result.get("messages") {
            Some(Value::Array(m)) => m,
            None | Some(Value::Null) => continue,
            Some(other) => {
                out.reject(
                    format!("{at}.messages"),
                    format!("is a {}, expected an array", json_type(other)),
                );
                continue;
            }
        };
        let text = match result.get("source").and_then(Value::as_str) {
            Some(s) => Some(s.to_owned()),
            None => sources.get(file).map(str::to_owned),
        };
        for (j, message) in messages.iter().enumerate() {
            let location = format!("{at}.messages[{j}]");
            match message_to_finding(message, file, text.as_deref(), &location) {
                Ok((finding, range, notes)) => {
                    let key = FixKey::eslint(&finding, range, seq);
                    out.accept_keyed(&location, finding, notes, key);
                }
                Err(why) => out.reject(location, why),
            }
            seq += 1;
        }
    }
    Ok(out.finish())
}

/// A finding with its fix's UTF-16 range (for the fix order) and notes.
type Read = (Finding, Option<(u64, u64)>, Vec<String>);

fn message_to_finding(
    m: &Value,
    file: &str,
    text: Option<&str>,
    location: &str,
) -> Result<Read, String> {
    if !m.is_object() {
        return Err(format!("is a {}, expected an object", json_type(m)));
    }
    let message = str_field(m, "message").ok_or("has no `message`")?;
    let fatal = m.get("fatal").and_then(Value::as_bool).unwrap_or(false);
    let rule = str_field(m, "ruleId").unwrap_or("eslint");
    let line = position_field(Some(m), "line", "line")?.filter(|&l| l > 0);
    let column = position_field(Some(m), "column", "column")?.filter(|&c| c > 0);
    let severity = match m.get("severity").and_then(Value::as_u64) {
        _ if fatal => Severity::High,
        Some(2) => Severity::High,
        Some(1) => Severity::Medium,
        other => {
            return Err(format!(
                "`severity` is {}, expected 1 (warn) or 2 (error)",
                other.map_or_else(|| "missing".to_owned(), |n| n.to_string())
            ));
        }
    };
    let id = format!(
        "{rule}@{file}:{}:{}",
        line.unwrap_or(0),
        column.unwrap_or(1)
    );
    let mut finding = Finding::new(id.as_str(), message, severity)
        .with_category(rule)
        .with_dimension(if fatal { "correctness" } else { "quality" })
        .with_description(message)
        .at(file, line);
    finding.fingerprint = Fingerprint::from_parts(&[
        "eslint",
        rule,
        file,
        &line.map(|l| l.to_string()).unwrap_or_default(),
        &column.map(|c| c.to_string()).unwrap_or_default(),
        message,
    ]);
    for s in m
        .get("suggestions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(desc) = str_field(s, "desc") {
            finding = finding.with_recommendation(format!(
                "ESLint suggests (not applied by `eslint --fix`): {desc}"
            ));
        }
    }
    let mut notes = Vec::new();
    let Some(fix) = m.get("fix").filter(|f| !f.is_null()) else {
        return Ok((finding, None, notes));
    };
    let (range, replacement) = fix_range(fix)?;
    match text {
        Some(text) => {
            let edit = resolve(text, file, range, replacement)?;
            finding.suggestions.push(Suggestion {
                message: None,
                edits: vec![edit],
            });
        }
        None => notes.push(format!(
            "{location}: {id}: the fix is left out: the result carries no `source` and {file} could not be read, so its UTF-16 range cannot be placed"
        )),
    }
    Ok((finding, Some(range), notes))
}

/// `fix.range` and `fix.text`.
fn fix_range(fix: &Value) -> Result<((u64, u64), String), String> {
    let range = fix
        .get("range")
        .and_then(Value::as_array)
        .filter(|r| r.len() == 2)
        .ok_or("`fix.range` is not a [start, end] array")?;
    let start = range[0]
        .as_u64()
        .ok_or("`fix.range[0]` is not a non-negative integer")?;
    let end = range[1]
        .as_u64()
        .ok_or("`fix.range[1]` is not a non-negative integer")?;
    if start > end {
        return Err(format!(
            "`fix.range` [{start}, {end}] ends before it starts"
        ));
    }
    let text = fix
        .get("text")
        .and_then(Value::as_str)
        .ok_or("`fix.text` is missing or not a string")?;
    Ok(((start, end), text.to_owned()))
}

/// The edit a UTF-16 range of the BOM-less text stands for in `text`.
fn resolve(
    text: &str,
    file: &str,
    (start, end): (u64, u64),
    replacement: String,
) -> Result<TextEdit, String> {
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let body = &text[bom..];
    let to_byte = |n: u64| utf16_offset(body, n).map(|b| b + bom);
    let (s, e) = to_byte(start).zip(to_byte(end)).ok_or_else(|| {
        format!("`fix.range` [{start}, {end}] lies outside {file} or splits a character")
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

/// The byte offset of UTF-16 unit `n` in `text` (`None` past the end or
/// inside a surrogate pair).
fn utf16_offset(text: &str, n: u64) -> Option<usize> {
    let mut units = 0u64;
    for (i, c) in text.char_indices() {
        if units == n {
            return Some(i);
        }
        if units > n {
            return None;
        }
        units += c.len_utf16() as u64;
    }
    (units == n).then_some(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_offsets_skip_the_bom_and_count_surrogate_pairs() {
        let text = "\u{feff}var s = \"é😀\"; var o;";
        // As ESLint reports the second `var`: [15, 18] in the BOM-less text.
        let edit = resolve(text, "t.js", (15, 18), "let".into()).unwrap();
        assert_eq!(edit.original, "var");
        assert_eq!(
            edit.start_column, 15,
            "a character column, the BOM not counted"
        );
        assert!(
            resolve(text, "t.js", (11, 12), String::new()).is_err(),
            "inside 😀"
        );
        assert!(resolve(text, "t.js", (0, 99), String::new()).is_err());
    }
}
