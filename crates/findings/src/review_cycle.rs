//! Reader for the review-cycle findings export.
//!
//! The review-cycle workflow hands its findings to the fix flow in one of two
//! layouts, and both are accepted:
//!
//! - the dashboard export, an object
//!   `{"session_id": "...", "findings": [{id, title, description, severity, dimension, file, line, recommendations}, ...]}`;
//! - the bare array of findings that phase 6 of the fix flow reads.
//!
//! Per finding the reader takes `id`, `title`, `severity`, `category`,
//! `description`, `dimension`, `file`, `line`, `snippet`, and the
//! recommendation under either name: `recommendation` (a string) or
//! `recommendations` (a string or an array of strings); when both are present
//! their texts are kept in that order, `recommendations` first. Every other
//! field (`references`, `impact`, `metadata`, `iteration`, `status`,
//! `cross_references`, …) is ignored.
//!
//! Leniency, and where it stops:
//! - `line` may be a number or a string: `42` and `"42"` give line 42; `""`,
//!   `null`, `0` and `"0"` give no line. Anything else is an error.
//! - `id` may be a string or an integer; a missing, null or blank id is an
//!   error naming the finding's index, and so is an id used twice.
//! - `severity` is parsed with [`Severity::parse_lenient`]; a missing or
//!   unknown severity is an error naming the finding's index and the field.
//! - Optional text fields may be missing or `null`; blank strings are treated
//!   as missing. A field of the wrong JSON type is an error.
//! - Every text field has a size limit ([`orchestrator_core::limits`]): `id`, `title`,
//!   `dimension`, `category` and `file` at most [`MAX_NAME_BYTES`] (4 KiB),
//!   `description`, `snippet` and each recommendation at most
//!   [`MAX_TEXT_BYTES`] (64 KiB). A field over its limit is an error naming
//!   the finding's index, id, the field, its size and the limit; the field is
//!   never copied, nor quoted whole in a message.
//!
//! [`read_review_cycle_export`] fails on the first bad finding;
//! [`read_review_cycle_entries`] (what [`crate::formats::detect_and_parse`]
//! uses) reports each bad finding on its own so the rest can go on.
//!
//! The reader neither merges nor drops findings: de-duplication by
//! fingerprint is a separate, explicit step ([`orchestrator_core::finding::dedup_by_fingerprint`]).

use std::collections::HashMap;

use serde_json::{Map, Value};

use orchestrator_core::finding::{Finding, FindingId, Fingerprint, Severity};
use orchestrator_core::limits::{MAX_NAME_BYTES, MAX_TEXT_BYTES, check_size, excerpt};

/// A parsed review-cycle export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewCycleExport {
    /// The review session id, when the export carried one (object layout).
    pub session_id: Option<String>,
    /// The findings, in file order.
    pub findings: Vec<Finding>,
}

/// Why a review-cycle export could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewCycleError {
    /// The text is not valid JSON.
    #[error(
        "failed to parse review-cycle export {source_name}: invalid JSON at line {line}, column {column}: {message}"
    )]
    Syntax {
        /// Name of the input (usually its path).
        source_name: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the JSON parser reported.
        message: String,
    },
    /// The top-level value is neither an array nor an object with `findings`.
    #[error("failed to read review-cycle export {source_name}: {problem}")]
    Layout {
        /// Name of the input.
        source_name: String,
        /// What is wrong with the top-level value.
        problem: String,
    },
    /// A finding is not a JSON object.
    #[error(
        "failed to read review-cycle export {source_name}: findings[{index}] is {found}, expected an object"
    )]
    NotAnObject {
        /// Name of the input.
        source_name: String,
        /// 0-based index of the finding in the `findings` array.
        index: usize,
        /// The JSON type found instead.
        found: &'static str,
    },
    /// A finding has no usable `id`.
    #[error("failed to read review-cycle export {source_name}: findings[{index}] has no `id`")]
    MissingId {
        /// Name of the input.
        source_name: String,
        /// 0-based index of the finding.
        index: usize,
    },
    /// Two findings share an id.
    #[error(
        "failed to read review-cycle export {source_name}: findings[{index}] reuses id `{id}` of findings[{first_index}]"
    )]
    DuplicateId {
        /// Name of the input.
        source_name: String,
        /// 0-based index of the second finding with this id.
        index: usize,
        /// 0-based index of the first finding with this id.
        first_index: usize,
        /// The repeated id.
        id: String,
    },
    /// A field of a finding is missing, has an unusable value, or is over
    /// its size limit.
    #[error(
        "failed to read review-cycle export {source_name}: findings[{index}] (id `{id}`): field `{field}`: {problem}"
    )]
    Field {
        /// Name of the input.
        source_name: String,
        /// 0-based index of the finding.
        index: usize,
        /// The finding's id (shortened with [`orchestrator_core::limits::excerpt`] when
        /// the id itself is the field over its limit).
        id: String,
        /// The offending field.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

impl ReviewCycleError {
    /// What is wrong with one finding, without the export's name and the
    /// finding's index: for a caller that reports them itself as the
    /// entry's place (as [`crate::formats::detect_and_parse`] does with
    /// `<file>: findings[3]`). `finding `F1`: field `line`: is an object, …`,
    /// `has no `id``, `reuses id `F1` of findings[0]`. An error of the whole
    /// export (invalid JSON, wrong layout) is given whole.
    pub fn entry_problem(&self) -> String {
        match self {
            ReviewCycleError::NotAnObject { found, .. } => {
                format!("is {found}, expected an object")
            }
            ReviewCycleError::MissingId { .. } => "has no `id`".to_owned(),
            ReviewCycleError::DuplicateId {
                first_index, id, ..
            } => format!("reuses id `{id}` of findings[{first_index}]"),
            ReviewCycleError::Field {
                id, field, problem, ..
            } => format!("finding `{id}`: field `{field}`: {problem}"),
            ReviewCycleError::Syntax { .. } | ReviewCycleError::Layout { .. } => self.to_string(),
        }
    }
}

/// Parses a review-cycle export (either layout) into findings.
///
/// `source_name` names the input in error messages (a path, or `<stdin>`).
/// Each finding's fingerprint is computed from its fields
/// ([`Finding::refresh_fingerprint`]).
pub fn parse_review_cycle_export(
    text: &str,
    source_name: &str,
) -> Result<Vec<Finding>, ReviewCycleError> {
    read_review_cycle_export(text, source_name).map(|export| export.findings)
}

/// Like [`parse_review_cycle_export`], but also returns the export's
/// `session_id` when the object layout carried one.
pub fn read_review_cycle_export(
    text: &str,
    source_name: &str,
) -> Result<ReviewCycleExport, ReviewCycleError> {
    let (session_id, items) = read_layout(text, source_name)?;
    let entries = read_entries(items, source_name);
    let mut findings = Vec::with_capacity(entries.len());
    for entry in entries {
        findings.push(entry?);
    }
    Ok(ReviewCycleExport {
        session_id,
        findings,
    })
}

/// Like [`read_review_cycle_export`], but a bad finding (not an object, no
/// id, a field of the wrong type, an id used before) is reported on its own
/// instead of failing the whole export: the result holds one entry per
/// finding, in file order. Only an unreadable export (invalid JSON, wrong
/// top-level layout) is an error.
pub fn read_review_cycle_entries(
    text: &str,
    source_name: &str,
) -> Result<Vec<Result<Finding, ReviewCycleError>>, ReviewCycleError> {
    let (_, items) = read_layout(text, source_name)?;
    Ok(read_entries(items, source_name))
}

/// Reads every finding of the export; a repeated id is an error of the
/// later finding only.
fn read_entries(items: Vec<Value>, source_name: &str) -> Vec<Result<Finding, ReviewCycleError>> {
    let mut first_index_of: HashMap<String, usize> = HashMap::with_capacity(items.len());
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let Value::Object(map) = item else {
            out.push(Err(ReviewCycleError::NotAnObject {
                source_name: source_name.to_owned(),
                index,
                found: type_name(&item),
            }));
            continue;
        };
        let finding = FindingReader {
            source_name,
            index,
            map: &map,
        }
        .read();
        let entry = finding.and_then(|finding| {
            if let Some(&first_index) = first_index_of.get(finding.id.as_str()) {
                return Err(ReviewCycleError::DuplicateId {
                    source_name: source_name.to_owned(),
                    index,
                    first_index,
                    id: finding.id.0,
                });
            }
            first_index_of.insert(finding.id.0.clone(), index);
            Ok(finding)
        });
        out.push(entry);
    }
    out
}

/// Parses the JSON and finds the findings array (and the session id).
fn read_layout(
    text: &str,
    source_name: &str,
) -> Result<(Option<String>, Vec<Value>), ReviewCycleError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ReviewCycleError::Syntax {
        source_name: source_name.to_owned(),
        line: e.line(),
        column: e.column(),
        message: syntax_message(&e),
    })?;
    let layout_error = |problem: String| ReviewCycleError::Layout {
        source_name: source_name.to_owned(),
        problem,
    };
    let (session_id, items) = match value {
        Value::Array(items) => (None, items),
        Value::Object(mut map) => {
            let session_id = match map.remove("session_id") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s),
                Some(Value::Number(n)) => Some(n.to_string()),
                Some(other) => {
                    return Err(layout_error(format!(
                        "`session_id` is {}, expected a string",
                        type_name(&other)
                    )));
                }
            };
            match map.remove("findings") {
                Some(Value::Array(items)) => (session_id, items),
                Some(other) => {
                    return Err(layout_error(format!(
                        "`findings` is {}, expected an array",
                        type_name(&other)
                    )));
                }
                None => {
                    return Err(layout_error(
                        "the top-level object has no `findings` array".to_owned(),
                    ));
                }
            }
        }
        other => {
            return Err(layout_error(format!(
                "the top-level value is {}, expected an array of findings or an object with `findings`",
                type_name(&other)
            )));
        }
    };
    Ok((session_id, items))
}

/// serde_json appends " at line L column C" to its messages; we report the
/// position in our own fields, so strip it.
fn syntax_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    match full.rfind(" at line ") {
        Some(pos) => full[..pos].to_owned(),
        None => full,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads the fields of one finding, producing errors that name it.
struct FindingReader<'a> {
    source_name: &'a str,
    index: usize,
    map: &'a Map<String, Value>,
}

impl FindingReader<'_> {
    fn read(&self) -> Result<Finding, ReviewCycleError> {
        let id = self.id()?;
        let severity = match self.map.get("severity") {
            None | Some(Value::Null) => {
                return Err(self.field_error(&id, "severity", "missing".to_owned()));
            }
            Some(Value::String(s)) => Severity::parse_lenient(s).ok_or_else(|| {
                self.field_error(
                    &id,
                    "severity",
                    format!(
                        "unknown severity `{}` (expected critical, high, medium or low)",
                        excerpt(s)
                    ),
                )
            })?,
            Some(other) => {
                return Err(self.field_error(
                    &id,
                    "severity",
                    format!("is {}, expected a string", type_name(other)),
                ));
            }
        };
        let mut finding = Finding {
            title: self.text(&id, "title")?.unwrap_or_default(),
            description: self.text(&id, "description")?.unwrap_or_default(),
            severity,
            dimension: self.text(&id, "dimension")?,
            category: self.text(&id, "category")?,
            file: self.text(&id, "file")?,
            line: self.line(&id)?,
            recommendations: self.recommendations(&id)?,
            snippet: self.raw_text(&id, "snippet")?,
            fingerprint: Fingerprint(String::new()),
            suggestions: Vec::new(),
            partial_fingerprints: Default::default(),
            id: FindingId(id),
        };
        finding.refresh_fingerprint();
        Ok(finding)
    }

    fn id(&self) -> Result<String, ReviewCycleError> {
        let id = match self.map.get("id") {
            Some(Value::String(s)) => s.trim().to_owned(),
            Some(Value::Number(n)) if n.is_u64() || n.is_i64() => n.to_string(),
            _ => String::new(),
        };
        if id.is_empty() {
            return Err(ReviewCycleError::MissingId {
                source_name: self.source_name.to_owned(),
                index: self.index,
            });
        }
        if let Err(e) = check_size("id", &id, MAX_NAME_BYTES) {
            return Err(self.field_error(&excerpt(&id), "id", e.problem()));
        }
        Ok(id)
    }

    fn field_error(&self, id: &str, field: &'static str, problem: String) -> ReviewCycleError {
        ReviewCycleError::Field {
            source_name: self.source_name.to_owned(),
            index: self.index,
            id: id.to_owned(),
            field,
            problem,
        }
    }

    /// An optional string field, verbatim (only a blank string counts as
    /// missing), within its size limit ([`size_limit`]).
    fn raw_text(&self, id: &str, field: &'static str) -> Result<Option<String>, ReviewCycleError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => {
                check_size(field, s, size_limit(field))
                    .map_err(|e| self.field_error(id, field, e.problem()))?;
                Ok((!s.trim().is_empty()).then(|| s.clone()))
            }
            Some(other) => Err(self.field_error(
                id,
                field,
                format!("is {}, expected a string", type_name(other)),
            )),
        }
    }

    /// An optional string field, trimmed.
    fn text(&self, id: &str, field: &'static str) -> Result<Option<String>, ReviewCycleError> {
        Ok(self.raw_text(id, field)?.map(|s| s.trim().to_owned()))
    }

    fn line(&self, id: &str) -> Result<Option<u32>, ReviewCycleError> {
        let bad = |shown: String| {
            self.field_error(
                id,
                "line",
                format!("{shown} is not a line number (expected a positive integer, a numeric string or \"\")"),
            )
        };
        let line = match self.map.get("line") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(l) => u32::try_from(l).map_err(|_| bad(n.to_string()))?,
                None => return Err(bad(n.to_string())),
            },
            Some(Value::String(s)) => {
                let t = s.trim();
                if t.is_empty() {
                    return Ok(None);
                }
                t.parse::<u32>()
                    .map_err(|_| bad(format!("{:?}", excerpt(s))))?
            }
            Some(other) => {
                return Err(self.field_error(
                    id,
                    "line",
                    format!("is {}, expected a number or a string", type_name(other)),
                ));
            }
        };
        Ok((line != 0).then_some(line))
    }

    fn recommendations(&self, id: &str) -> Result<Vec<String>, ReviewCycleError> {
        let mut out = Vec::new();
        for field in ["recommendations", "recommendation"] {
            match self.map.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => {
                    self.check_text(id, field, None, s)?;
                    push_text(&mut out, s);
                }
                Some(Value::Array(items)) if field == "recommendations" => {
                    for (i, item) in items.iter().enumerate() {
                        match item {
                            Value::String(s) => {
                                self.check_text(id, field, Some(i), s)?;
                                push_text(&mut out, s);
                            }
                            Value::Null => {}
                            other => {
                                return Err(self.field_error(
                                    id,
                                    "recommendations",
                                    format!("item {i} is {}, expected a string", type_name(other)),
                                ));
                            }
                        }
                    }
                }
                Some(other) => {
                    let expected = if field == "recommendations" {
                        "a string or an array of strings"
                    } else {
                        "a string"
                    };
                    return Err(self.field_error(
                        id,
                        field,
                        format!("is {}, expected {expected}", type_name(other)),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// A recommendation (item `item` of an array, or the whole field)
    /// within [`MAX_TEXT_BYTES`].
    fn check_text(
        &self,
        id: &str,
        field: &'static str,
        item: Option<usize>,
        s: &str,
    ) -> Result<(), ReviewCycleError> {
        check_size(field, s, MAX_TEXT_BYTES).map_err(|e| {
            let problem = match item {
                Some(i) => format!("item {i} {}", e.problem()),
                None => e.problem(),
            };
            self.field_error(id, field, problem)
        })
    }
}

/// The size limit of a string field: free text ([`MAX_TEXT_BYTES`]) for
/// `description` and `snippet`, a one-line name ([`MAX_NAME_BYTES`]) for
/// the others.
fn size_limit(field: &str) -> usize {
    match field {
        "description" | "snippet" => MAX_TEXT_BYTES,
        _ => MAX_NAME_BYTES,
    }
}

fn push_text(out: &mut Vec<String>, s: &str) {
    let t = s.trim();
    if !t.is_empty() {
        out.push(t.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Finding>, ReviewCycleError> {
        parse_review_cycle_export(text, "export.json")
    }

    /// Parses `text`, expecting an error, and compares its message.
    fn check_err(text: &str, expected: &str) {
        match parse(text) {
            Ok(findings) => panic!("expected an error, got {findings:?}"),
            Err(e) => assert_eq!(e.to_string(), expected),
        }
    }

    #[test]
    fn reads_both_layouts_identically() {
        let item = r#"{"id":"SEC-1","title":"SQL injection","severity":"critical",
            "dimension":"security","file":"src/db.ts","line":42,
            "description":"query built by concatenation","recommendations":["use parameters"]}"#;
        let bare = parse(&format!("[{item}]")).unwrap();
        let export = read_review_cycle_export(
            &format!(r#"{{"session_id":"WFS-123","findings":[{item}]}}"#),
            "export.json",
        )
        .unwrap();
        assert_eq!(export.session_id.as_deref(), Some("WFS-123"));
        assert_eq!(export.findings, bare);

        let mut expected = Finding::new("SEC-1", "SQL injection", Severity::Critical)
            .with_description("query built by concatenation")
            .with_dimension("security")
            .at("src/db.ts", Some(42))
            .with_recommendation("use parameters");
        expected.refresh_fingerprint();
        assert_eq!(bare, vec![expected]);
    }

    #[test]
    fn line_as_number_or_string() {
        let text = r#"[
            {"id":"a","severity":"low","line":7},
            {"id":"b","severity":"low","line":"42"},
            {"id":"c","severity":"low","line":" 9 "},
            {"id":"d","severity":"low","line":""},
            {"id":"e","severity":"low","line":null},
            {"id":"f","severity":"low","line":0},
            {"id":"g","severity":"low"}
        ]"#;
        let lines: Vec<_> = parse(text).unwrap().iter().map(|f| f.line).collect();
        assert_eq!(lines, [Some(7), Some(42), Some(9), None, None, None, None]);
    }

    #[test]
    fn recommendation_in_every_shape() {
        let text = r#"[
            {"id":"a","severity":"low","recommendation":"one"},
            {"id":"b","severity":"low","recommendations":"two"},
            {"id":"c","severity":"low","recommendations":["three"," ",null,"four"]},
            {"id":"d","severity":"low","recommendations":["five"],"recommendation":"six"},
            {"id":"e","severity":"low","recommendations":[]}
        ]"#;
        let recs: Vec<_> = parse(text)
            .unwrap()
            .into_iter()
            .map(|f| f.recommendations)
            .collect();
        assert_eq!(
            recs,
            vec![
                vec!["one".to_owned()],
                vec!["two".to_owned()],
                vec!["three".to_owned(), "four".to_owned()],
                vec!["five".to_owned(), "six".to_owned()],
                vec![],
            ]
        );
    }

    #[test]
    fn severity_is_lenient_and_unknown_fields_are_ignored() {
        let text = r#"[{"id":7,"severity":" Warning ","category":"perf",
            "references":["x"],"impact":"big","metadata":{"k":1},"iteration":2,
            "status":"open","cross_references":[],"snippet":"  let x = 1;"}]"#;
        let f = &parse(text).unwrap()[0];
        assert_eq!(f.id.as_str(), "7");
        assert_eq!(f.severity, Severity::Medium);
        assert_eq!(f.category.as_deref(), Some("perf"));
        // Snippets keep their indentation.
        assert_eq!(f.snippet.as_deref(), Some("  let x = 1;"));
        assert_eq!(f.title, "");
        assert_eq!(f.fingerprint, f.computed_fingerprint());
    }

    #[test]
    fn empty_inputs() {
        assert_eq!(parse("[]").unwrap(), vec![]);
        assert_eq!(parse(r#"{"findings":[]}"#).unwrap(), vec![]);
    }

    #[test]
    fn syntax_error_names_source_line_and_column() {
        check_err(
            "[\n  {\"id\": \"a\",}\n]",
            "failed to parse review-cycle export export.json: invalid JSON at line 2, column 14: trailing comma",
        );
    }

    #[test]
    fn layout_errors() {
        check_err(
            r#"{"session_id":"x"}"#,
            "failed to read review-cycle export export.json: the top-level object has no `findings` array",
        );
        check_err(
            r#"{"findings":{}}"#,
            "failed to read review-cycle export export.json: `findings` is an object, expected an array",
        );
        check_err(
            "42",
            "failed to read review-cycle export export.json: the top-level value is a number, expected an array of findings or an object with `findings`",
        );
        check_err(
            r#"[{"id":"a","severity":"low"}, "b"]"#,
            "failed to read review-cycle export export.json: findings[1] is a string, expected an object",
        );
    }

    #[test]
    fn finding_errors_name_index_and_field() {
        check_err(
            r#"[{"id":"a","severity":"low"},{"title":"no id","severity":"low"}]"#,
            "failed to read review-cycle export export.json: findings[1] has no `id`",
        );
        check_err(
            r#"[{"id":"  ","severity":"low"}]"#,
            "failed to read review-cycle export export.json: findings[0] has no `id`",
        );
        check_err(
            r#"[{"id":"a","severity":"low"},{"id":"b","severity":"urgent"}]"#,
            "failed to read review-cycle export export.json: findings[1] (id `b`): field `severity`: unknown severity `urgent` (expected critical, high, medium or low)",
        );
        check_err(
            r#"[{"id":"a"}]"#,
            "failed to read review-cycle export export.json: findings[0] (id `a`): field `severity`: missing",
        );
        check_err(
            r#"[{"id":"a","severity":"low","line":"forty"}]"#,
            "failed to read review-cycle export export.json: findings[0] (id `a`): field `line`: \"forty\" is not a line number (expected a positive integer, a numeric string or \"\")",
        );
        check_err(
            r#"[{"id":"a","severity":"low","line":-3}]"#,
            "failed to read review-cycle export export.json: findings[0] (id `a`): field `line`: -3 is not a line number (expected a positive integer, a numeric string or \"\")",
        );
        check_err(
            r#"[{"id":"a","severity":"low","file":["x"]}]"#,
            "failed to read review-cycle export export.json: findings[0] (id `a`): field `file`: is an array, expected a string",
        );
        check_err(
            r#"[{"id":"a","severity":"low","recommendations":[1]}]"#,
            "failed to read review-cycle export export.json: findings[0] (id `a`): field `recommendations`: item 0 is a number, expected a string",
        );
        check_err(
            r#"[{"id":"a","severity":"low"},{"id":"a","severity":"high"}]"#,
            "failed to read review-cycle export export.json: findings[1] reuses id `a` of findings[0]",
        );
    }

    /// Each text field at exactly its limit is read; one byte more is an
    /// error naming the index, id, field, size and limit, and the message
    /// stays short.
    #[test]
    fn every_text_field_is_checked_at_its_limit() {
        let cases = [
            ("title", MAX_NAME_BYTES),
            ("dimension", MAX_NAME_BYTES),
            ("category", MAX_NAME_BYTES),
            ("file", MAX_NAME_BYTES),
            ("description", MAX_TEXT_BYTES),
            ("snippet", MAX_TEXT_BYTES),
            ("recommendation", MAX_TEXT_BYTES),
            ("recommendations", MAX_TEXT_BYTES),
        ];
        for (field, limit) in cases {
            let with = |n: usize| {
                let mut item = serde_json::json!({"id": "a", "severity": "low"});
                item[field] = Value::String("x".repeat(n));
                format!("[{item}]")
            };
            let read = parse(&with(limit)).unwrap();
            assert_eq!(read.len(), 1, "{field}");
            let err = parse(&with(limit + 1)).unwrap_err().to_string();
            assert_eq!(
                err,
                format!(
                    "failed to read review-cycle export export.json: findings[0] (id `a`): field `{field}`: is {} bytes, over the limit of {limit} bytes ({} KiB)",
                    limit + 1,
                    limit / 1024
                )
            );
        }
        // An array item names its index.
        let item = serde_json::json!({"id": "a", "severity": "low",
            "recommendations": ["ok", "x".repeat(MAX_TEXT_BYTES + 1)]});
        let err = parse(&format!("[{item}]")).unwrap_err().to_string();
        assert!(
            err.ends_with("field `recommendations`: item 1 is 65537 bytes, over the limit of 65536 bytes (64 KiB)"),
            "{err}"
        );
        // The id: at its limit it is read; over it, it is shown shortened.
        let id = |n: usize| format!(r#"[{{"id":"{}","severity":"low"}}]"#, "i".repeat(n));
        assert_eq!(
            parse(&id(MAX_NAME_BYTES)).unwrap()[0].id.as_str().len(),
            MAX_NAME_BYTES
        );
        let err = parse(&id(MAX_NAME_BYTES + 1)).unwrap_err().to_string();
        assert!(
            err.contains("field `id`: is 4097 bytes, over the limit of 4096 bytes"),
            "{err}"
        );
        assert!(err.contains("…(4097 bytes)"), "{err}");
        assert!(err.len() < 400, "{err}");
        // Values quoted in messages are shortened too.
        let item = serde_json::json!({"id": "a", "severity": "s".repeat(10_000)});
        let err = parse(&format!("[{item}]")).unwrap_err().to_string();
        assert!(err.contains("…(10000 bytes)"), "{err}");
        assert!(err.len() < 400, "{err}");
        let item = serde_json::json!({"id": "a", "severity": "low", "line": "9".repeat(10_000)});
        let err = parse(&format!("[{item}]")).unwrap_err().to_string();
        assert!(err.len() < 400, "{err}");
    }

    #[test]
    fn entry_problems_leave_out_the_export_and_the_index() {
        let entries = read_review_cycle_entries(
            r#"[{"id":"a","severity":"low","line":{}}, 3, {"severity":"low"},
                {"id":"b","severity":"low"}, {"id":"b","severity":"low"}]"#,
            "export.json",
        )
        .unwrap();
        let problems: Vec<String> = entries
            .iter()
            .filter_map(|e| e.as_ref().err())
            .map(ReviewCycleError::entry_problem)
            .collect();
        assert_eq!(
            problems,
            [
                "finding `a`: field `line`: is an object, expected a number or a string",
                "is a number, expected an object",
                "has no `id`",
                "reuses id `b` of findings[3]",
            ]
        );
    }
}
