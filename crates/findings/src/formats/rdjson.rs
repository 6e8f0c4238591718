//! Reader for the reviewdog Diagnostic Format: `rdjson` (one
//! `DiagnosticResult` object, `{"source", "severity", "diagnostics": [...]}`)
//! and `rdjsonl` (one `Diagnostic` object per line).
//!
//! Per diagnostic:
//! - `title` is `message` (required), `description` the `original_output`
//!   when present, else the message;
//! - `file` and `line` from `location.path` and `location.range.start.line`
//!   (a number; `0` or none means no line, any other type rejects the
//!   diagnostic, as a string `"three"` is not a line);
//! - `severity`: `ERROR` (or 1) high, `WARNING` (2) medium, `INFO` (3) low,
//!   else the result's overall severity, else medium;
//! - `category` is `code.value`, else the source name; `dimension` is
//!   `quality` (the format has no notion of one);
//! - `id` is `<category>@<path>:<line>:<column>`; the fingerprint covers
//!   source, code, path, line, column and message.
//!
//! `suggestions` are the parts of one fix (like an editor's text edits) and
//! become the edits of a single [`Suggestion`]. Ranges follow reviewdog's
//! rules: 1-based lines, 1-based columns counted in UTF-8 bytes (except for
//! the source named `ruff`, which writes code point columns), the end
//! exclusive; an omitted `end` is an insertion point at `start`; when both
//! start and end omit the column, the range is whole lines, from the start of
//! the start line through the end of the end line including its line break.
//! rdjson does not carry the replaced text, so `original` is filled from the
//! file through the [`ParseOptions::sources`] reader (which also turns byte
//! columns into character columns); without it, an edit that replaces text
//! keeps an empty `original`, raw byte columns, and a note, and the applier
//! refuses it as unanchored rather than trusting a position that earlier
//! fixes may have moved.

use serde_json::Value;

use super::{
    FormatError, InputFormat, ParseOptions, ParseOutcome, SourceCache, document_array, json_type,
    position_field, str_field, u32_field, unanchored_note,
};
use orchestrator_core::edit::{ColumnUnit, RawRegion, RegionEnd, is_unanchored};
use orchestrator_core::finding::{Finding, Fingerprint, Severity, Suggestion};

/// Reads an rdjson document without access to the sources.
pub fn parse(text: &str, source_name: &str) -> Result<ParseOutcome, FormatError> {
    parse_with(text, source_name, &ParseOptions::default())
}

/// Reads an rdjson document (`DiagnosticResult`).
pub fn parse_with(
    text: &str,
    source_name: &str,
    options: &ParseOptions<'_>,
) -> Result<ParseOutcome, FormatError> {
    let (doc, diagnostics) = document_array(
        text,
        source_name,
        InputFormat::Rdjson,
        "diagnostics",
        "document",
    )?;
    let defaults = Defaults {
        source: doc
            .get("source")
            .and_then(|s| str_field(s, "name"))
            .map(str::to_owned),
        severity: doc.get("severity").and_then(severity_of),
    };
    let mut out = ParseOutcome::new(InputFormat::Rdjson);
    let mut sources = SourceCache::new(options);
    for (i, d) in diagnostics.iter().enumerate() {
        let location = format!("{source_name}: diagnostics[{i}]");
        match diagnostic_to_finding(d, &defaults, &location, &mut sources) {
            Ok((finding, notes)) => {
                out.accept(&location, finding, notes);
            }
            Err(message) => out.reject(location, message),
        }
    }
    Ok(out.finish())
}

/// Reads rdjsonl without access to the sources.
pub fn parse_lines(text: &str, source_name: &str) -> ParseOutcome {
    parse_lines_with(text, source_name, &ParseOptions::default())
}

/// Reads rdjsonl: one `Diagnostic` per line; a bad line is rejected with its
/// line number and the others still parse.
pub fn parse_lines_with(text: &str, source_name: &str, options: &ParseOptions<'_>) -> ParseOutcome {
    let defaults = Defaults {
        source: None,
        severity: None,
    };
    let mut out = ParseOutcome::new(InputFormat::Rdjsonl);
    let mut sources = SourceCache::new(options);
    for (index, line) in text.lines().enumerate() {
        let line = line.trim().trim_start_matches('\u{feff}');
        if line.is_empty() {
            continue;
        }
        let location = format!("{source_name}:{}", index + 1);
        let d: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                out.reject(location, format!("not a JSON object: {e}"));
                continue;
            }
        };
        match diagnostic_to_finding(&d, &defaults, &location, &mut sources) {
            Ok((finding, notes)) => {
                out.accept(&location, finding, notes);
            }
            Err(message) => out.reject(location, message),
        }
    }
    out.finish()
}

struct Defaults {
    source: Option<String>,
    severity: Option<Severity>,
}

fn severity_of(v: &Value) -> Option<Severity> {
    match v {
        Value::String(s) => match s.as_str() {
            "ERROR" => Some(Severity::High),
            "WARNING" => Some(Severity::Medium),
            "INFO" => Some(Severity::Low),
            _ => None,
        },
        Value::Number(n) => match n.as_u64() {
            Some(1) => Some(Severity::High),
            Some(2) => Some(Severity::Medium),
            Some(3) => Some(Severity::Low),
            _ => None,
        },
        _ => None,
    }
}

fn diagnostic_to_finding(
    d: &Value,
    defaults: &Defaults,
    location: &str,
    sources: &mut SourceCache<'_, '_>,
) -> Result<(Finding, Vec<String>), String> {
    if !d.is_object() {
        return Err(format!("is a {}, expected an object", json_type(d)));
    }
    let message = str_field(d, "message").ok_or("has no `message`")?;
    let loc = d.get("location");
    let path = loc.and_then(|l| str_field(l, "path"));
    let start = loc
        .and_then(|l| l.get("range"))
        .and_then(|r| r.get("start"));
    // A line or column of the wrong type rejects the entry (like any other
    // wrong type); 0 means "none".
    let line = position_field(start, "line", "location.range.start.line")?.filter(|&l| l > 0);
    let column = position_field(start, "column", "location.range.start.column")?.filter(|&c| c > 0);
    let source = d
        .get("source")
        .and_then(|s| str_field(s, "name"))
        .map(str::to_owned)
        .or_else(|| defaults.source.clone());
    let code = d.get("code").and_then(|c| str_field(c, "value"));
    let category = code
        .map(str::to_owned)
        .or_else(|| source.clone())
        .unwrap_or_else(|| "rdjson".to_owned());
    let severity = d
        .get("severity")
        .and_then(severity_of)
        .or(defaults.severity)
        .unwrap_or(Severity::Medium);

    let id = match path {
        Some(p) => format!(
            "{category}@{p}:{}:{}",
            line.unwrap_or(0),
            column.unwrap_or(1)
        ),
        None => format!("{category}@{location}"),
    };
    let mut finding = Finding::new(id.as_str(), message, severity)
        .with_category(category.as_str())
        .with_dimension("quality")
        .with_description(str_field(d, "original_output").unwrap_or(message));
    if let Some(p) = path {
        finding = finding.at(p, line);
    }
    if let Some(url) = d.get("code").and_then(|c| str_field(c, "url")) {
        finding = finding.with_recommendation(format!("see {url}"));
    }
    finding.fingerprint = Fingerprint::from_parts(&[
        "rdjson",
        source.as_deref().unwrap_or(""),
        code.unwrap_or(""),
        path.unwrap_or(""),
        &line.map(|l| l.to_string()).unwrap_or_default(),
        &column.map(|c| c.to_string()).unwrap_or_default(),
        message,
    ]);

    let notes = attach_suggestions(&mut finding, d, path, source.as_deref(), location, sources)?;
    Ok((finding, notes))
}

/// Adds the diagnostic's `suggestions` to `finding` as one suggestion (ruff's
/// read as ruff writes them); returns the notes on what was left out. A
/// `suggestions` that is not an array rejects the entry.
fn attach_suggestions(
    finding: &mut Finding,
    d: &Value,
    path: Option<&str>,
    source: Option<&str>,
    location: &str,
    sources: &mut SourceCache<'_, '_>,
) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    let suggestions = match d.get("suggestions") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(s)) => s.as_slice(),
        Some(other) => {
            return Err(format!(
                "`suggestions` is a {}, expected an array",
                json_type(other)
            ));
        }
    };
    if !suggestions.is_empty() {
        let ruff = source.is_some_and(|s| s.eq_ignore_ascii_case("ruff"));
        match suggestions_to_edits(suggestions, path, ruff, sources) {
            Ok(edits) => {
                if edits.iter().any(is_unanchored) {
                    notes.push(unanchored_note(location, finding.id.as_str()));
                }
                finding.suggestions.push(Suggestion {
                    message: None,
                    edits,
                });
            }
            Err(why) => notes.push(format!(
                "{location}: {}: suggestions left out: {why}",
                finding.id
            )),
        }
    }
    Ok(notes)
}

fn suggestions_to_edits(
    suggestions: &[Value],
    path: Option<&str>,
    ruff: bool,
    sources: &mut SourceCache<'_, '_>,
) -> Result<Vec<orchestrator_core::finding::TextEdit>, String> {
    let path = path.ok_or("the diagnostic has no `location.path`")?;
    let mut edits = Vec::with_capacity(suggestions.len());
    for (k, s) in suggestions.iter().enumerate() {
        let region = suggestion_region(s).map_err(|why| format!("suggestions[{k}]: {why}"))?;
        let text = s
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let source = sources.get(path);
        let mut region = region;
        if ruff {
            region.unit = ColumnUnit::Chars;
        }
        let edit = region
            .to_edit(path, text, None, source)
            .map_err(|why| format!("suggestions[{k}]: {why}"))?;
        edits.push(edit);
    }
    Ok(edits)
}

fn suggestion_region(s: &Value) -> Result<RawRegion, String> {
    let range = s.get("range").ok_or("has no `range`")?;
    let start = range.get("start").ok_or("has no `range.start`")?;
    let start_line = u32_field(start, "line")
        .filter(|&l| l > 0)
        .ok_or("`range.start.line` is missing or not a positive integer")?;
    let start_column = u32_field(start, "column").filter(|&c| c > 0);
    let end = range.get("end").filter(|e| !e.is_null());
    let end = match end {
        None => RegionEnd::At {
            line: start_line,
            column: start_column.unwrap_or(1),
        },
        Some(e) => {
            let line = u32_field(e, "line")
                .filter(|&l| l > 0)
                .unwrap_or(start_line);
            match (start_column, u32_field(e, "column").filter(|&c| c > 0)) {
                (None, None) => RegionEnd::EndOfLine {
                    line,
                    include_eol: true,
                },
                (_, Some(column)) => RegionEnd::At { line, column },
                (Some(_), None) => RegionEnd::EndOfLine {
                    line,
                    include_eol: false,
                },
            }
        }
    };
    Ok(RawRegion {
        start_line,
        start_column: start_column.unwrap_or(1),
        end,
        unit: ColumnUnit::Utf8Bytes,
    })
}
