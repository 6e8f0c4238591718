//! Reader for `cargo check/clippy --message-format=json` (and bare
//! `rustc --error-format=json` diagnostics).
//!
//! The stream has one JSON object per line. Lines with
//! `reason == "compiler-message"` whose diagnostic level is `warning` or
//! `error` become findings; other reasons (`compiler-artifact`,
//! `build-finished`, …) are skipped, and so are diagnostics without a span
//! (`aborting due to …`). A line that is not JSON is rejected with its line
//! number and the rest still parse.
//!
//! Per diagnostic:
//! - `id` is `<code>@<file>:<line>:<column>` from the primary span
//!   (`rustc-warning@…` when the diagnostic has no code);
//! - `title` is the message, `description` the rendered diagnostic,
//!   `recommendations` the `help` children's messages, `category` the lint
//!   code (`clippy::needless_return`), `snippet` the primary span's lines;
//! - `severity`: `error` is high, `warning` medium;
//! - `dimension`: `performance` for the clippy `perf` group, `correctness`
//!   for errors and the `correctness`/`suspicious` groups, else `quality`
//!   (the group is read from "implied by" notes, else from a list of the
//!   default `perf` lints);
//! - the fingerprint covers code, file, line, column and message, so the same
//!   diagnostic reported for several targets (lib and lib test) is counted
//!   once, while two identical lints at two columns of one line are not.
//!
//! Every child span with `suggestion_applicability == "MachineApplicable"`
//! and a `suggested_replacement` becomes an edit of one [`Suggestion`] (like
//! `cargo fix`, all machine-applicable parts of a diagnostic are applied
//! together). The edit's `original` is rebuilt from the span's `text` lines
//! and `highlight_start`/`highlight_end` and checked against
//! `byte_end - byte_start`; when that does not add up, nothing is read from
//! disk: the suggestion is left out and a note says so.
//!
//! The fix order ([`ParseOutcome::fix_order`]) is rustfix's: within a file,
//! fixes that overlap in reverse emitted order, as `cargo fix` applies them
//! (so the same one wins), the others by position.

use serde_json::Value;

use super::order::FixKey;
use super::{InputFormat, ParseOutcome, json_type, str_field, u32_field};
use orchestrator_core::finding::{Finding, Fingerprint, Severity, Suggestion, TextEdit};
use orchestrator_core::limits::{MAX_TEXT_BYTES, excerpt};

/// Clippy lints of the default `perf` group (a finding's dimension is
/// `performance` for these when no note names the group).
const PERF_LINTS: &[&str] = &[
    "box_collection",
    "boxed_local",
    "cmp_owned",
    "collapsible_str_replace",
    "drain_collect",
    "expect_fun_call",
    "extend_with_drain",
    "format_collect",
    "format_in_format_args",
    "iter_nth",
    "iter_overeager_cloned",
    "large_const_arrays",
    "large_enum_variant",
    "manual_memcpy",
    "manual_retain",
    "manual_str_repeat",
    "map_entry",
    "missing_spin_loop",
    "redundant_allocation",
    "result_large_err",
    "single_char_pattern",
    "slow_vector_initialization",
    "to_string_in_format_args",
    "unnecessary_to_owned",
    "useless_vec",
    "vec_init_then_push",
];

/// Reads a cargo/rustc JSON stream. Never fails: unreadable lines are
/// rejected one by one.
pub fn parse(text: &str, source_name: &str) -> ParseOutcome {
    let mut out = ParseOutcome::new(InputFormat::CargoJson);
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = line.trim().trim_start_matches('\u{feff}');
        if line.is_empty() {
            continue;
        }
        let location = format!("{source_name}:{line_no}");
        let value: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                out.reject(location, format!("not a JSON object: {e}"));
                continue;
            }
        };
        let diagnostic = match value.get("reason") {
            Some(Value::String(reason)) if reason == "compiler-message" => {
                match value.get("message") {
                    Some(m) if m.is_object() => m,
                    _ => {
                        out.reject(location, "compiler-message without a `message` object");
                        continue;
                    }
                }
            }
            Some(_) => continue,
            None if value.get("spans").is_some() => &value,
            None => {
                out.reject(
                    location,
                    format!(
                        "a JSON {} that is neither a cargo message nor a rustc diagnostic",
                        json_type(&value)
                    ),
                );
                continue;
            }
        };
        match diagnostic_to_finding(diagnostic, &location) {
            Ok(Some((finding, notes))) => {
                let key = FixKey::rustfix(&finding, index);
                out.accept_keyed(&location, finding, notes, key);
            }
            Ok(None) => {}
            Err(message) => out.reject(location, message),
        }
    }
    out.cluster_overlaps();
    out.finish()
}

/// One rustc diagnostic → a finding, `None` when it is not one we keep, or a
/// message saying what is wrong with it.
fn diagnostic_to_finding(
    d: &Value,
    location: &str,
) -> Result<Option<(Finding, Vec<String>)>, String> {
    let level = d
        .get("level")
        .and_then(Value::as_str)
        .ok_or("diagnostic has no `level`")?;
    let severity = match level {
        "error" => Severity::High,
        "warning" => Severity::Medium,
        _ => return Ok(None),
    };
    let message = str_field(d, "message").ok_or("diagnostic has no `message` text")?;
    let Some(primary) = primary_span(d)? else {
        // "aborting due to …" and similar summaries point nowhere.
        return Ok(None);
    };
    let file = str_field(primary, "file_name").ok_or("primary span has no `file_name`")?;
    let line = u32_field(primary, "line_start").ok_or("primary span has no `line_start`")?;
    let column = u32_field(primary, "column_start").unwrap_or(1);
    let code = d
        .get("code")
        .and_then(|c| str_field(c, "code"))
        .map_or_else(|| format!("rustc-{level}"), str::to_owned);

    let children: Vec<&Value> = d
        .get("children")
        .and_then(Value::as_array)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let recommendations: Vec<String> = children
        .iter()
        .filter(|c| c.get("level").and_then(Value::as_str) == Some("help"))
        .filter_map(|c| str_field(c, "message").map(str::to_owned))
        .collect();

    let id = format!("{code}@{file}:{line}:{column}");
    let mut finding = Finding::new(id.as_str(), message, severity)
        .with_category(code.as_str())
        .with_dimension(dimension(&code, level, &children))
        .with_description(
            str_field(d, "rendered").map_or_else(|| message.to_owned(), str::to_owned),
        )
        .at(file, Some(line));
    finding.recommendations = recommendations;
    finding.snippet = span_lines(primary);
    finding.fingerprint = Fingerprint::from_parts(&[
        "cargo",
        &code,
        file,
        &line.to_string(),
        &column.to_string(),
        message,
    ]);

    let (suggestion, notes) = machine_applicable(&children, location, &id);
    finding.suggestions.extend(suggestion);
    Ok(Some((finding, notes)))
}

/// The diagnostic's primary span (else its first); `None` for a summary
/// that points nowhere.
fn primary_span(d: &Value) -> Result<Option<&Value>, String> {
    let spans = match d.get("spans") {
        Some(Value::Array(spans)) => spans,
        Some(other) => {
            return Err(format!(
                "`spans` is a {}, expected an array",
                json_type(other)
            ));
        }
        None => return Err("diagnostic has no `spans`".to_owned()),
    };
    Ok(spans
        .iter()
        .find(|s| s.get("is_primary").and_then(Value::as_bool) == Some(true))
        .or_else(|| spans.first()))
}

/// The machine-applicable suggestions of a diagnostic's children as one
/// suggestion (every edit once, their messages joined) — none when any of
/// them cannot be read, since a partial fix is not the tool's fix — and a
/// note for each left out.
fn machine_applicable(
    children: &[&Value],
    location: &str,
    id: &str,
) -> (Option<Suggestion>, Vec<String>) {
    let mut notes = Vec::new();
    let mut edits: Vec<TextEdit> = Vec::new();
    let mut messages: Vec<String> = Vec::new();
    let mut complete = true;
    for child in children {
        let Some(child_spans) = child.get("spans").and_then(Value::as_array) else {
            continue;
        };
        for span in child_spans {
            if span.get("suggestion_applicability").and_then(Value::as_str)
                != Some("MachineApplicable")
            {
                continue;
            }
            let Some(replacement) = span.get("suggested_replacement").and_then(Value::as_str)
            else {
                continue;
            };
            match span_edit(span, replacement) {
                Ok(edit) => {
                    if !edits.contains(&edit) {
                        edits.push(edit);
                    }
                    if let Some(m) = str_field(child, "message")
                        && !messages.iter().any(|x| x == m)
                    {
                        messages.push(m.to_owned());
                    }
                }
                Err(why) => {
                    complete = false;
                    notes.push(format!(
                        "{location}: {id}: machine-applicable suggestion left out: {why}"
                    ));
                }
            }
        }
    }
    let suggestion = (complete && !edits.is_empty()).then(|| Suggestion {
        message: (!messages.is_empty()).then(|| messages.join("; ")),
        edits,
    });
    (suggestion, notes)
}

/// The review dimension of a diagnostic (see the module docs).
fn dimension(code: &str, level: &str, children: &[&Value]) -> &'static str {
    for child in children {
        if let Some(m) = child.get("message").and_then(Value::as_str) {
            for (group, dim) in [
                ("clippy::perf", "performance"),
                ("clippy::correctness", "correctness"),
                ("clippy::suspicious", "correctness"),
            ] {
                if m.contains(&format!("`{group}`"))
                    || m.contains(&format!("{group})]`"))
                    || m.contains(&format!("-W {group}`"))
                    || m.contains(&format!("-D {group}`"))
                {
                    return dim;
                }
            }
        }
    }
    if let Some(lint) = code.strip_prefix("clippy::")
        && PERF_LINTS.contains(&lint)
    {
        return "performance";
    }
    if level == "error" {
        return "correctness";
    }
    "quality"
}

/// The full lines a span covers, joined with newlines.
///
/// The snippet is a quote of the source that rustc copied from the file, not
/// text anyone wrote into the findings: a span over a long item (a whole
/// function, for `clippy::too_many_lines`) would otherwise exceed
/// [`MAX_TEXT_BYTES`] and get a good finding rejected. So a long snippet is
/// cut, on a character boundary, to fit that limit, and ends with a line
/// saying how many bytes were left out.
fn span_lines(span: &Value) -> Option<String> {
    let lines = span.get("text")?.as_array()?;
    let texts: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        return None;
    }
    let mut joined = texts.join("\n");
    if joined.len() > MAX_TEXT_BYTES {
        // Room for the last line, whose number has at most 20 digits.
        let mut cut = MAX_TEXT_BYTES - 64;
        while !joined.is_char_boundary(cut) {
            cut -= 1;
        }
        let left_out = joined.len() - cut;
        joined.truncate(cut);
        joined.push_str(&format!("\n… (snippet cut: {left_out} more bytes)"));
    }
    Some(joined)
}

/// A suggestion span → an edit, rebuilding the replaced text.
fn span_edit(span: &Value, replacement: &str) -> Result<TextEdit, String> {
    let file = str_field(span, "file_name").ok_or("span has no `file_name`")?;
    let field = |k: &str| u32_field(span, k).ok_or_else(|| format!("span has no `{k}`"));
    let start_line = field("line_start")?;
    let end_line = field("line_end")?;
    let start_column = field("column_start")?;
    let end_column = field("column_end")?;
    let byte_start = span
        .get("byte_start")
        .and_then(Value::as_u64)
        .ok_or("span has no `byte_start`")? as usize;
    let byte_end = span
        .get("byte_end")
        .and_then(Value::as_u64)
        .ok_or("span has no `byte_end`")? as usize;
    if byte_end < byte_start {
        return Err(format!("span bytes {byte_start}..{byte_end} are reversed"));
    }
    let original = span_original(span, start_line, end_line, byte_end - byte_start)
        .ok_or_else(|| {
            format!(
                "the replaced text of {}:{start_line}:{start_column} cannot be rebuilt from the span's lines",
                excerpt(file)
            )
        })?;
    Ok(TextEdit {
        file: file.to_owned(),
        start_line,
        start_column,
        end_line,
        end_column,
        byte_range: Some((byte_start, byte_end)),
        original,
        replacement: replacement.to_owned(),
    })
}

/// The text a span covers, from its `text` lines (first line from
/// `highlight_start`, last line up to `highlight_end`, 1-based character
/// columns), checked against the span's byte length. Lines are joined with
/// `\n`, or `\r\n` when that is what makes the length add up.
fn span_original(span: &Value, start_line: u32, end_line: u32, byte_len: usize) -> Option<String> {
    let lines = span.get("text")?.as_array()?;
    let expected = end_line.checked_sub(start_line)? as usize + 1;
    if lines.len() != expected {
        return None;
    }
    let mut pieces = Vec::with_capacity(lines.len());
    for line in lines {
        let text = line.get("text")?.as_str()?;
        let from = line.get("highlight_start")?.as_u64()?.checked_sub(1)? as usize;
        let to = line.get("highlight_end")?.as_u64()?.checked_sub(1)? as usize;
        if to < from {
            return None;
        }
        let start = char_to_byte(text, from)?;
        let end = char_to_byte(text, to)?;
        pieces.push(&text[start..end]);
    }
    ["\n", "\r\n"]
        .into_iter()
        .map(|sep| pieces.join(sep))
        .find(|joined| joined.len() == byte_len)
}

/// Byte offset of the `n`th character of `text` (`text.len()` for one past
/// the end).
fn char_to_byte(text: &str, n: usize) -> Option<usize> {
    text.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .nth(n)
}
