//! Readers that turn findings files into [`Finding`]s.
//!
//! Seven input formats are understood, and [`detect_and_parse`] tells them
//! apart by their content, never by the file name:
//!
//! | format | shape | reader |
//! |---|---|---|
//! | review-cycle export | a JSON array of findings, or `{session_id, findings}` | [`crate::review_cycle`] |
//! | SARIF 2.1.0 | `{"version": "2.1.0", "runs": [...]}` | [`sarif`] |
//! | reviewdog rdjson | `{"source", "diagnostics": [...]}` | [`rdjson`] |
//! | reviewdog rdjsonl | one `Diagnostic` object per line | [`rdjson`] |
//! | cargo / rustc JSON | `cargo check/clippy --message-format=json`, one object per line | [`cargo`] |
//! | ruff JSON | `ruff check --output-format json`: an array of objects with `filename` and `location` | [`ruff`] |
//! | ESLint JSON | `eslint -f json`: an array of objects with `filePath` and `messages` | [`eslint`] |
//!
//! The readers are pure: text in, [`ParseOutcome`] out. A file that cannot be
//! read as its format at all is a [`FormatError`] naming the source and the
//! line; a bad entry inside a readable file is recorded in
//! [`ParseOutcome::rejected`] (with its location) and the other entries still
//! parse. Findings are de-duplicated by fingerprint, keeping the first.
//!
//! Every finding a reader keeps is within the field-size limits of
//! [`orchestrator_core::limits`] ([`Finding::check_field_sizes`]): a finding with, say, a
//! 10 MB description is rejected on its own, with its place, its id, the
//! field, the size and the limit, and the other entries still parse. The
//! check is constant-time per field, so a 10 MB field costs no more than the
//! JSON parse that read it.
//!
//! Machine-applicable fixes become [`orchestrator_core::finding::Suggestion`]s whose
//! edits carry the text they replace (`original`), so that [`orchestrator_core::edit::locate`]
//! can re-anchor them after earlier fixes moved the text. rustc reports that
//! text; SARIF and rdjson usually do not. Pass a [`SourceReader`] in
//! [`ParseOptions`] (reading the repository's files as they are before any
//! fix) and the SARIF and rdjson readers fill `original` from the files;
//! without one, their edits keep an empty `original` and are refused by the
//! applier as unanchored ([`orchestrator_core::edit::EditError::Unanchored`]) rather than
//! applied blindly at a possibly stale position.

pub mod cargo;
pub mod eslint;
mod fields;
mod order;
pub mod rdjson;
pub mod ruff;
pub mod sarif;

use std::fmt;

use serde_json::Value;

use crate::review_cycle::{ReviewCycleError, read_review_cycle_entries};
pub(crate) use fields::{
    document_array, document_list, json_type, position_field, str_field, u32_field,
};
use orchestrator_core::finding::{Finding, FindingId};
use order::FixKey;

/// The formats [`detect_and_parse`] recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputFormat {
    /// The review-cycle findings export.
    ReviewCycle,
    /// SARIF 2.1.0.
    Sarif,
    /// reviewdog Diagnostic Format, one `DiagnosticResult` object.
    Rdjson,
    /// reviewdog Diagnostic Format, one `Diagnostic` per line.
    Rdjsonl,
    /// `cargo … --message-format=json` (or `rustc --error-format=json`).
    CargoJson,
    /// `ruff check --output-format json`.
    RuffJson,
    /// ESLint's `json` formatter (`eslint -f json`).
    EslintJson,
}

impl InputFormat {
    /// A short name for messages (`sarif`, `rdjson`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            InputFormat::ReviewCycle => "review-cycle export",
            InputFormat::Sarif => "sarif",
            InputFormat::Rdjson => "rdjson",
            InputFormat::Rdjsonl => "rdjsonl",
            InputFormat::CargoJson => "cargo json",
            InputFormat::RuffJson => "ruff json",
            InputFormat::EslintJson => "eslint json",
        }
    }
}

impl fmt::Display for InputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An entry of a readable file that was left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// Where: `source:line` for line formats, `source: runs[0].results[3]`
    /// for JSON documents.
    pub location: String,
    /// What is wrong with the entry.
    pub message: String,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// What a reader produced from one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseOutcome {
    /// The format that was read.
    pub format: InputFormat,
    /// The findings, in input order, de-duplicated by fingerprint.
    pub findings: Vec<Finding>,
    /// Entries that could not be read; the rest were.
    pub rejected: Vec<Rejected>,
    /// Findings dropped as duplicates: (dropped id, id of the kept finding).
    pub duplicates: Vec<(FindingId, FindingId)>,
    /// Things worth telling the user that are not errors (a suggestion left
    /// out because its replaced text could not be reconstructed, an edit
    /// left unanchored, a SARIF version other than 2.1.0, …).
    pub notes: Vec<String>,
    /// Where each of `findings` goes in the order its tool applies fixes
    /// (see [`ParseOutcome::fix_order`]).
    keys: Vec<FixKey>,
}

impl ParseOutcome {
    fn new(format: InputFormat) -> Self {
        Self {
            format,
            findings: Vec::new(),
            rejected: Vec::new(),
            duplicates: Vec::new(),
            notes: Vec::new(),
            keys: Vec::new(),
        }
    }

    /// Indices into [`ParseOutcome::findings`] in the order the tool that
    /// produced them applies their fixes within a file (by file, then the
    /// tool's rule: rustfix takes the diagnostics in reverse, ruff and
    /// ESLint by the fix's position with their own tie-breaks, anything
    /// else in emitted order; the table is in the `order` module). Every
    /// tool skips, within one pass, a fix that overlaps one it already
    /// applied, so an applier that takes the findings one at a time in this
    /// order keeps the same fix of an overlapping pair as the tool does.
    pub fn fix_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.findings.len()).collect();
        order.sort_by(|&a, &b| self.keys.get(a).cmp(&self.keys.get(b)).then(a.cmp(&b)));
        order
    }

    /// The findings in [`ParseOutcome::fix_order`].
    pub fn findings_in_fix_order(&self) -> Vec<Finding> {
        self.fix_order()
            .into_iter()
            .map(|i| self.findings[i].clone())
            .collect()
    }

    fn reject(&mut self, location: impl Into<String>, message: impl Into<String>) {
        self.rejected.push(Rejected {
            location: location.into(),
            message: message.into(),
        });
    }

    /// Keeps a finding read at `location`, with the reader's notes about it,
    /// when its fields are within their size limits; otherwise rejects it
    /// (naming its id, shortened, and the field) and drops the notes, which
    /// may quote the oversized field.
    fn accept(&mut self, location: &str, finding: Finding, notes: Vec<String>) {
        let key = FixKey::emitted(&finding, self.findings.len());
        self.accept_keyed(location, finding, notes, key);
    }

    /// Ranks the findings by their clusters of overlapping fixes (rustfix's
    /// order, see `order::cluster_overlaps`).
    fn cluster_overlaps(&mut self) {
        order::cluster_overlaps(&self.findings, &mut self.keys);
    }

    /// [`ParseOutcome::accept`] with the finding's place in its tool's fix
    /// order.
    fn accept_keyed(&mut self, location: &str, finding: Finding, notes: Vec<String>, key: FixKey) {
        match finding.check_field_sizes() {
            Ok(()) => {
                self.findings.push(finding);
                self.keys.push(key);
                self.notes.extend(notes);
            }
            Err(e) => self.reject(
                location,
                format!(
                    "finding `{}`: field `{}`: {}",
                    orchestrator_core::limits::excerpt(finding.id.as_str()),
                    e.field,
                    e.problem()
                ),
            ),
        }
    }

    /// De-duplicates by fingerprint and makes ids unique (a second finding
    /// with the same id but a different fingerprint gets `#2`, `#3`, …).
    /// The first finding of each fingerprint is kept (with its place in
    /// the fix order), as `orchestrator_core::finding::dedup_by_fingerprint`
    /// does.
    fn finish(mut self) -> Self {
        let findings = std::mem::take(&mut self.findings);
        let keys = std::mem::take(&mut self.keys);
        let mut first = std::collections::HashMap::new();
        let mut seen = std::collections::HashMap::<FindingId, u32>::new();
        for (mut f, key) in findings.into_iter().zip(keys) {
            if let Some(kept) = first.get(&f.fingerprint) {
                self.duplicates.push((f.id.clone(), FindingId::clone(kept)));
                continue;
            }
            first.insert(f.fingerprint.clone(), f.id.clone());
            let n = seen.entry(f.id.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                f.id = FindingId(format!("{}#{}", f.id, n));
            }
            self.findings.push(f);
            self.keys.push(key);
        }
        self
    }
}

/// Why an input could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The input is empty or only whitespace.
    #[error("failed to read findings from {source_name}: the input is empty")]
    Empty {
        /// Name of the input.
        source_name: String,
    },
    /// The input is not valid JSON (or JSON lines).
    #[error(
        "failed to read {format} findings from {source_name}: invalid JSON at line {line}, column {column}: {message}"
    )]
    Json {
        /// Name of the input.
        source_name: String,
        /// The format being read.
        format: &'static str,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the JSON parser said.
        message: String,
    },
    /// The JSON is valid but not shaped like the format.
    #[error("failed to read {format} findings from {source_name}: {problem}")]
    Shape {
        /// Name of the input.
        source_name: String,
        /// The format being read.
        format: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The content matches no known format.
    #[error(
        "failed to read findings from {source_name}: unrecognised format ({hint}); expected a review-cycle export, SARIF 2.1.0, reviewdog rdjson or rdjsonl, cargo --message-format=json, ruff --output-format json or eslint -f json output"
    )]
    Unrecognized {
        /// Name of the input.
        source_name: String,
        /// What was seen instead.
        hint: String,
    },
    /// The review-cycle export reader failed.
    #[error(transparent)]
    ReviewCycle(#[from] ReviewCycleError),
}

impl FormatError {
    fn json(source_name: &str, format: InputFormat, e: &serde_json::Error) -> Self {
        FormatError::Json {
            source_name: source_name.to_owned(),
            format: format.as_str(),
            line: e.line(),
            column: e.column(),
            message: without_position(e),
        }
    }
}

/// serde_json's message without its " at line L column C" suffix (the
/// error reports the position in its own fields).
fn without_position(e: &serde_json::Error) -> String {
    let full = e.to_string();
    match full.rfind(" at line ") {
        Some(pos) => full[..pos].to_owned(),
        None => full,
    }
}

/// Reads repository files for the readers, so that SARIF and rdjson edits
/// get the text they replace. Paths are as the findings file spells them;
/// `None` means "not available" (the edit then stays unanchored).
pub trait SourceReader {
    /// The current content of `path`, if it can be read.
    fn read_source(&self, path: &str) -> Option<String>;
}

impl<F: Fn(&str) -> Option<String>> SourceReader for F {
    fn read_source(&self, path: &str) -> Option<String> {
        self(path)
    }
}

/// Options for the readers.
#[derive(Default, Clone, Copy)]
pub struct ParseOptions<'a> {
    /// Where to read the files findings point at, to fill the text that SARIF
    /// and rdjson edits replace. Must see the files as they were when the
    /// findings were produced (that is, before any fix is applied).
    pub sources: Option<&'a dyn SourceReader>,
}

impl fmt::Debug for ParseOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParseOptions")
            .field("sources", &self.sources.map(|_| "<reader>"))
            .finish()
    }
}

/// Reads each source file at most once per parse.
pub(crate) struct SourceCache<'o, 'a> {
    options: &'o ParseOptions<'a>,
    files: std::collections::HashMap<String, Option<String>>,
}

impl<'o, 'a> SourceCache<'o, 'a> {
    pub(crate) fn new(options: &'o ParseOptions<'a>) -> Self {
        Self {
            options,
            files: std::collections::HashMap::new(),
        }
    }

    /// The content of `path`, when a reader is configured and has it.
    pub(crate) fn get(&mut self, path: &str) -> Option<&str> {
        let reader = self.options.sources?;
        self.files
            .entry(path.to_owned())
            .or_insert_with(|| reader.read_source(path))
            .as_deref()
    }
}

/// The note for a finding whose edits lack the text they replace.
pub(crate) fn unanchored_note(location: &str, id: &str) -> String {
    format!(
        "{location}: {id}: the fix does not carry the text it replaces and no source reader was given; the suggestion agent will refuse it as unanchored"
    )
}

/// Detects the format of `text` from its content ([`detect_format`]) and
/// reads it. `source_name` names the input in messages.
pub fn detect_and_parse(text: &str, source_name: &str) -> Result<ParseOutcome, FormatError> {
    detect_and_parse_with(text, source_name, &ParseOptions::default())
}

/// [`detect_and_parse`] with options (a [`SourceReader`]).
pub fn detect_and_parse_with(
    text: &str,
    source_name: &str,
    options: &ParseOptions<'_>,
) -> Result<ParseOutcome, FormatError> {
    match detect_format(text, source_name)? {
        InputFormat::ReviewCycle => {
            // As in the other formats, a bad finding is rejected on its own
            // and the rest of a readable export goes on.
            let mut outcome = ParseOutcome::new(InputFormat::ReviewCycle);
            for (index, entry) in read_review_cycle_entries(text, source_name)?
                .into_iter()
                .enumerate()
            {
                let location = format!("{source_name}: findings[{index}]");
                match entry {
                    Ok(finding) => outcome.accept(&location, finding, Vec::new()),
                    // The location names the file and the index: the
                    // message says only what is wrong.
                    Err(e) => outcome.reject(location, e.entry_problem()),
                }
            }
            Ok(outcome.finish())
        }
        InputFormat::Sarif => sarif::parse_with(text, source_name, options),
        InputFormat::Rdjson => rdjson::parse_with(text, source_name, options),
        InputFormat::Rdjsonl => Ok(rdjson::parse_lines_with(text, source_name, options)),
        InputFormat::CargoJson => Ok(cargo::parse(text, source_name)),
        InputFormat::RuffJson => ruff::parse_with(text, source_name, options),
        InputFormat::EslintJson => eslint::parse_with(text, source_name, options),
    }
}

/// How many leading lines of a JSON-lines input are looked at to decide its
/// format when the whole text is not one JSON document.
const DETECT_LINES: usize = 50;

/// Decides the format of `text` from its content.
///
/// A whole-document JSON value decides by shape: an array is ruff's JSON
/// output when its first element has `filename` and `location`, ESLint's
/// when it has `filePath` and `messages`, else a review-cycle export; an
/// object with `runs` is SARIF, with `diagnostics` rdjson, with
/// `findings` a review-cycle export. Otherwise the text is read as JSON
/// lines and the first line that parses decides: `reason` or a rustc
/// diagnostic (`$message_type`, or `message` + `spans`) means cargo JSON;
/// `message` + `location` means rdjsonl.
pub fn detect_format(text: &str, source_name: &str) -> Result<InputFormat, FormatError> {
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err(FormatError::Empty {
            source_name: source_name.to_owned(),
        });
    }
    let whole: Result<Value, _> = serde_json::from_str(trimmed);
    match &whole {
        Ok(Value::Array(items)) => return Ok(array_format(items)),
        Ok(Value::Object(map)) => {
            if map.contains_key("runs") {
                return Ok(InputFormat::Sarif);
            }
            if map.contains_key("diagnostics") {
                return Ok(InputFormat::Rdjson);
            }
            if map.contains_key("findings") {
                return Ok(InputFormat::ReviewCycle);
            }
            if let Some(format) = line_format(map) {
                return Ok(format);
            }
            let mut keys: Vec<&str> = map.keys().map(String::as_str).take(8).collect();
            keys.sort_unstable();
            return Err(FormatError::Unrecognized {
                source_name: source_name.to_owned(),
                hint: format!("a JSON object with keys {}", keys.join(", ")),
            });
        }
        Ok(other) => {
            return Err(FormatError::Unrecognized {
                source_name: source_name.to_owned(),
                hint: format!("a JSON {}", json_type(other)),
            });
        }
        Err(_) => {}
    }
    for line in trimmed.lines().take(DETECT_LINES) {
        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(line.trim())
            && let Some(format) = line_format(&map)
        {
            return Ok(format);
        }
    }
    // Not JSON lines of a known kind: report the document's own JSON error,
    // which names the line, against the format its first bytes suggest.
    let format = if trimmed.starts_with('[') {
        InputFormat::ReviewCycle
    } else if trimmed.contains("\"runs\"") {
        InputFormat::Sarif
    } else if trimmed.contains("\"diagnostics\"") {
        InputFormat::Rdjson
    } else if trimmed.starts_with('{') {
        match whole {
            Err(e) => {
                return Err(FormatError::Json {
                    source_name: source_name.to_owned(),
                    format: "json",
                    line: e.line(),
                    column: e.column(),
                    message: without_position(&e),
                });
            }
            Ok(_) => InputFormat::ReviewCycle,
        }
    } else {
        let first: String = trimmed.chars().take(40).collect();
        return Err(FormatError::Unrecognized {
            source_name: source_name.to_owned(),
            hint: format!("the text is not JSON; it begins {first:?}"),
        });
    };
    match whole {
        Err(e) => Err(FormatError::json(source_name, format, &e)),
        Ok(_) => Ok(format),
    }
}

/// The format of a JSON array by its first element: ruff's JSON output
/// (objects with `filename` and `location`), ESLint's JSON formatter
/// (`filePath` and `messages`), else a review-cycle export (an empty array
/// is an empty export).
fn array_format(items: &[Value]) -> InputFormat {
    match items.first() {
        Some(Value::Object(first))
            if first.contains_key("filename") && first.contains_key("location") =>
        {
            InputFormat::RuffJson
        }
        Some(Value::Object(first))
            if first.contains_key("filePath") && first.contains_key("messages") =>
        {
            InputFormat::EslintJson
        }
        _ => InputFormat::ReviewCycle,
    }
}

/// The line format an object belongs to, if it is recognisable.
fn line_format(map: &serde_json::Map<String, Value>) -> Option<InputFormat> {
    if map.get("reason").is_some_and(Value::is_string)
        || map.contains_key("$message_type")
        || (map.get("message").is_some_and(Value::is_string) && map.contains_key("spans"))
    {
        return Some(InputFormat::CargoJson);
    }
    if map.contains_key("message") && map.contains_key("location") {
        return Some(InputFormat::Rdjsonl);
    }
    None
}

#[cfg(test)]
mod tests;
