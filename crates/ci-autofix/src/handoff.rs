//! The CI watcher's handoff (its exit-2 JSON): which required checks failed.
//!
//! ```json
//! {"prNumber": 785, "branch": "feat/x",
//!  "failedChecks": [{"name": "Lint", "runId": "12345678",
//!                    "logUrl": "https://github.com/o/r/actions/runs/12345678/job/9", "conclusionDetail": ""}],
//!  "auxiliaryFailCount": 1, "totalRequired": 6}
//! ```
//!
//! The watcher often omits `runId`; it is then taken from `/actions/runs/<id>/`
//! in `logUrl`. `runId` may be a string or a number. Errors name the field.
//!
//! String fields have size limits ([`orchestrator_core::limits`]): `branch`,
//! and each check's `name`, `runId` and `logUrl` at most
//! [`MAX_NAME_BYTES`] (4 KiB), `conclusionDetail` at most [`MAX_TEXT_BYTES`]
//! (64 KiB). A check name is repeated in every later message, commit and
//! prompt of the run; a field over its limit is an error naming it.
//!
//! [`Handoff::read`] reads a file and names it in its errors
//! ([`HandoffFileError`]); [`Handoff::parse`] takes text and names the line,
//! column or field.

use std::path::Path;
use std::sync::LazyLock;

use orchestrator_core::limits::{MAX_NAME_BYTES, MAX_TEXT_BYTES, check_size};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a handoff could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandoffError {
    /// The text is not JSON.
    #[error("handoff is not valid JSON at line {line} column {column}: {message}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser said.
        message: String,
    },
    /// A field is missing or has the wrong type or value.
    #[error("handoff field `{field}` {problem}")]
    Field {
        /// The field path (`failedChecks[1].name`).
        field: String,
        /// What is wrong (`is missing`, `must be a positive integer, got "x"`).
        problem: String,
    },
}

/// Why a handoff file could not be read: its error names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandoffFileError {
    /// The file could not be read.
    #[error("failed to read {file}: {message}")]
    Io {
        /// The file, as given.
        file: String,
        /// The OS error.
        message: String,
    },
    /// The file is not UTF-8 text.
    #[error("{file} is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 {
        /// The file, as given.
        file: String,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// The text is not a valid handoff.
    #[error("{file}: {error}")]
    Invalid {
        /// The file, as given.
        file: String,
        /// What is wrong, with its line and column or field.
        #[source]
        error: HandoffError,
    },
}

/// One failed required check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedCheck {
    /// The check's name (`Lint`, `build / test`).
    pub name: String,
    /// The Actions run id, from `runId` or else from `logUrl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Link to the run or job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_url: Option<String>,
    /// Extra detail from the check's conclusion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion_detail: Option<String>,
}

/// The watcher's handoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handoff {
    /// The pull request.
    pub pr_number: u64,
    /// Its head branch.
    pub branch: String,
    /// Required checks that failed.
    pub failed_checks: Vec<FailedCheck>,
    /// Non-required checks that failed (counted only).
    #[serde(default)]
    pub auxiliary_fail_count: u64,
    /// How many checks are required.
    #[serde(default)]
    pub total_required: u64,
}

static RUN_IN_URL: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"/actions/runs/(\d+)(?:[/?#]|$)").ok());

/// The run id in a GitHub Actions URL (`…/actions/runs/<id>/…`).
pub fn run_id_from_url(url: &str) -> Option<String> {
    RUN_IN_URL
        .as_ref()?
        .captures(url)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_owned())
}

/// The Actions job id in a check's link
/// (`…/actions/runs/<run>/job/<job>`), if it names one.
pub fn job_id_from_url(url: &str) -> Option<String> {
    let rest = &url[url.find("/actions/runs/")? + "/actions/runs/".len()..];
    let job = rest
        .split('/')
        .nth(2)
        .filter(|_| rest.split('/').nth(1) == Some("job"))?;
    let job: String = job.chars().take_while(char::is_ascii_digit).collect();
    (!job.is_empty()).then_some(job)
}

/// One entry of `failedChecks` (at `path`): its name, run id (or the one
/// in its log URL), log URL and conclusion detail.
fn failed_check(path: &str, c: &Value) -> Result<FailedCheck, HandoffError> {
    let c = c
        .as_object()
        .ok_or_else(|| field(path, format!("must be an object, got {}", describe(c))))?;
    let name = name_field(c.get("name"), format!("{path}.name"))?;
    if let Some(Value::String(s)) = c.get("runId") {
        sized(format!("{path}.runId"), s, MAX_NAME_BYTES)?;
    }
    let run_id = match c.get("runId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) if s.trim().chars().all(|ch| ch.is_ascii_digit()) => {
            Some(s.trim().to_owned())
        }
        Some(Value::Number(n)) if n.as_u64().is_some() => Some(n.to_string()),
        Some(v) => {
            return Err(field(
                format!("{path}.runId"),
                format!("must be a run number, got {}", describe(v)),
            ));
        }
    };
    let log_url = opt_string(c, "logUrl", path, MAX_NAME_BYTES)?;
    let conclusion_detail = opt_string(c, "conclusionDetail", path, MAX_TEXT_BYTES)?;
    let run_id = run_id.or_else(|| log_url.as_deref().and_then(run_id_from_url));
    Ok(FailedCheck {
        name,
        run_id,
        log_url,
        conclusion_detail,
    })
}

/// A required name (`value` of the field `name`): a non-empty string of at
/// most [`MAX_NAME_BYTES`], trimmed.
fn name_field(value: Option<&Value>, name: String) -> Result<String, HandoffError> {
    match value {
        None => Err(field(name, "is missing")),
        Some(Value::String(s)) if !s.trim().is_empty() => {
            sized(name, s, MAX_NAME_BYTES)?;
            Ok(s.trim().to_owned())
        }
        Some(v) => Err(field(
            name,
            format!("must be a non-empty string, got {}", describe(v)),
        )),
    }
}

fn field(field: impl Into<String>, problem: impl Into<String>) -> HandoffError {
    HandoffError::Field {
        field: field.into(),
        problem: problem.into(),
    }
}

fn describe(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 40 {
        format!("{}…", text.chars().take(40).collect::<String>())
    } else {
        text
    }
}

fn count(obj: &serde_json::Map<String, Value>, name: &str) -> Result<u64, HandoffError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v.as_u64().ok_or_else(|| {
            field(
                name,
                format!("must be a non-negative integer, got {}", describe(v)),
            )
        }),
    }
}

/// `s` within `limit` bytes, or an error naming `field`.
fn sized(field: impl Into<String>, s: &str, limit: usize) -> Result<(), HandoffError> {
    check_size(field, s, limit).map_err(|e| HandoffError::Field {
        problem: e.problem(),
        field: e.field,
    })
}

fn opt_string(
    obj: &serde_json::Map<String, Value>,
    name: &str,
    path: &str,
    limit: usize,
) -> Result<Option<String>, HandoffError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            sized(format!("{path}.{name}"), s, limit)?;
            Ok((!s.trim().is_empty()).then(|| s.trim().to_owned()))
        }
        Some(v) => Err(field(
            format!("{path}.{name}"),
            format!("must be a string, got {}", describe(v)),
        )),
    }
}

impl Handoff {
    /// Reads and validates the handoff in the file at `path`; every error
    /// names the file (as `path.display()` shows it).
    pub fn read(path: impl AsRef<Path>) -> Result<Handoff, HandoffFileError> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let bytes = orchestrator_core::limits::read_input_file(
            path,
            orchestrator_core::limits::MAX_INPUT_FILE_BYTES,
        )
        .map_err(|e| HandoffFileError::Io {
            file: file.clone(),
            message: e.to_string(),
        })?;
        match String::from_utf8(bytes) {
            Ok(text) => Self::parse_named(&text, &file),
            Err(e) => Err(HandoffFileError::NotUtf8 {
                file,
                offset: e.utf8_error().valid_up_to(),
            }),
        }
    }

    /// [`Handoff::parse`], with errors naming `file` (a path, or `<stdin>`).
    pub fn parse_named(text: &str, file: &str) -> Result<Handoff, HandoffFileError> {
        Self::parse(text).map_err(|error| HandoffFileError::Invalid {
            file: file.to_owned(),
            error,
        })
    }

    /// Parses and validates the watcher's JSON.
    pub fn parse(text: &str) -> Result<Handoff, HandoffError> {
        let value: Value = serde_json::from_str(text).map_err(|e| HandoffError::Json {
            line: e.line(),
            column: e.column(),
            message: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or("")
                .to_owned(),
        })?;
        Self::from_value(&value)
    }

    /// Validates an already parsed JSON value.
    pub fn from_value(value: &Value) -> Result<Handoff, HandoffError> {
        let obj = value.as_object().ok_or_else(|| {
            field(
                "(root)",
                format!("must be a JSON object, got {}", describe(value)),
            )
        })?;
        let pr_number = match obj.get("prNumber") {
            None => return Err(field("prNumber", "is missing")),
            Some(v) => v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    field(
                        "prNumber",
                        format!("must be a positive integer, got {}", describe(v)),
                    )
                })?,
        };
        let branch = name_field(obj.get("branch"), "branch".into())?;
        let checks = match obj.get("failedChecks") {
            None => return Err(field("failedChecks", "is missing")),
            Some(Value::Array(a)) if a.is_empty() => {
                return Err(field(
                    "failedChecks",
                    "is empty (the watcher reports a failure only with failed checks)",
                ));
            }
            Some(Value::Array(a)) => a,
            Some(v) => {
                return Err(field(
                    "failedChecks",
                    format!("must be an array, got {}", describe(v)),
                ));
            }
        };
        let failed_checks = checks
            .iter()
            .enumerate()
            .map(|(i, c)| failed_check(&format!("failedChecks[{i}]"), c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Handoff {
            pr_number,
            branch,
            failed_checks,
            auxiliary_fail_count: count(obj, "auxiliaryFailCount")?,
            total_required: count(obj, "totalRequired")?,
        })
    }

    /// The handoff as the watcher prints it (camelCase JSON).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_seed_example_and_fills_run_ids_from_urls() {
        let h = Handoff::parse(
            r#"{"prNumber": 785, "branch": "feat/my-feature",
                "failedChecks": [
                  {"name": "Lint", "runId": "12345678", "logUrl": "https://github.com/o/r/actions/runs/12345678", "conclusionDetail": ""},
                  {"name": "Test", "logUrl": "https://github.com/o/r/actions/runs/987/job/55"},
                  {"name": "Build", "runId": 42},
                  {"name": "Docs"}
                ],
                "auxiliaryFailCount": 1, "totalRequired": 6}"#,
        )
        .unwrap();
        assert_eq!(h.pr_number, 785);
        let ids: Vec<Option<&str>> = h
            .failed_checks
            .iter()
            .map(|c| c.run_id.as_deref())
            .collect();
        assert_eq!(ids, [Some("12345678"), Some("987"), Some("42"), None]);
        assert_eq!(h.failed_checks[0].conclusion_detail, None);
        assert_eq!((h.auxiliary_fail_count, h.total_required), (1, 6));
        assert_eq!(Handoff::parse(&h.to_json()).unwrap(), h);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                "[1]",
                "handoff field `(root)` must be a JSON object, got [1]",
            ),
            (
                r#"{"branch": "b", "failedChecks": []}"#,
                "handoff field `prNumber` is missing",
            ),
            (
                r#"{"prNumber": -3, "branch": "b", "failedChecks": []}"#,
                "handoff field `prNumber` must be a positive integer, got -3",
            ),
            (
                r#"{"prNumber": 1, "failedChecks": []}"#,
                "handoff field `branch` is missing",
            ),
            (
                r#"{"prNumber": 1, "branch": "b", "failedChecks": {}}"#,
                "handoff field `failedChecks` must be an array, got {}",
            ),
            (
                r#"{"prNumber": 1, "branch": "b", "failedChecks": [{"name": "x"}, {"runId": "1"}]}"#,
                "handoff field `failedChecks[1].name` is missing",
            ),
            (
                r#"{"prNumber": 1, "branch": "b", "failedChecks": [{"name": "x", "runId": "abc"}]}"#,
                "handoff field `failedChecks[0].runId` must be a run number, got \"abc\"",
            ),
            (
                r#"{"prNumber": 1, "branch": "b", "failedChecks": [{"name": "x", "logUrl": 5}]}"#,
                "handoff field `failedChecks[0].logUrl` must be a string, got 5",
            ),
            (
                r#"{"prNumber": 1, "branch": "b", "failedChecks": [{"name": "x"}], "totalRequired": "six"}"#,
                "handoff field `totalRequired` must be a non-negative integer, got \"six\"",
            ),
        ];
        for (text, msg) in cases {
            assert_eq!(Handoff::parse(text).unwrap_err().to_string(), msg, "{text}");
        }
        let e = Handoff::parse("{\n  \"prNumber\": ,\n}").unwrap_err();
        assert!(matches!(e, HandoffError::Json { line: 2, .. }), "{e}");
    }

    /// Each string field at exactly its limit is read; one byte more is an
    /// error naming the field, its size and the limit.
    #[test]
    fn string_fields_are_checked_at_their_limits() {
        let handoff = |field: &str, value: String| {
            let mut check = serde_json::json!({"name": "Lint"});
            let mut root = serde_json::json!({"prNumber": 1, "branch": "b"});
            if field == "branch" {
                root["branch"] = Value::String(value);
            } else {
                check[field] = Value::String(value);
            }
            root["failedChecks"] = serde_json::json!([{"name": "ok"}, check]);
            root.to_string()
        };
        for (field, path, limit, fill) in [
            ("branch", "branch", MAX_NAME_BYTES, 'b'),
            ("name", "failedChecks[1].name", MAX_NAME_BYTES, 'n'),
            ("runId", "failedChecks[1].runId", MAX_NAME_BYTES, '7'),
            ("logUrl", "failedChecks[1].logUrl", MAX_NAME_BYTES, 'u'),
            (
                "conclusionDetail",
                "failedChecks[1].conclusionDetail",
                MAX_TEXT_BYTES,
                'd',
            ),
        ] {
            let at = fill.to_string().repeat(limit);
            assert!(
                Handoff::parse(&handoff(field, at)).is_ok(),
                "{field} at its limit"
            );
            let over = fill.to_string().repeat(limit + 1);
            let err = Handoff::parse(&handoff(field, over)).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "handoff field `{path}` is {} bytes, over the limit of {limit} bytes ({} KiB)",
                    limit + 1,
                    limit / 1024
                )
            );
        }
    }

    #[test]
    fn read_names_the_file_in_every_error() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("handoff.json");
        std::fs::write(
            &good,
            r#"{"prNumber": 3, "branch": "b", "failedChecks": [{"name": "x"}]}"#,
        )
        .unwrap();
        assert_eq!(Handoff::read(&good).unwrap().pr_number, 3);

        let shown = |p: &std::path::Path| p.display().to_string();
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"prNumber": 3, "branch": "b"}"#).unwrap();
        let err = Handoff::read(&bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: handoff field `failedChecks` is missing", shown(&bad))
        );
        assert!(matches!(
            err,
            HandoffFileError::Invalid {
                error: HandoffError::Field { .. },
                ..
            }
        ));

        let binary = dir.path().join("binary.json");
        std::fs::write(&binary, b"{\"a\xff").unwrap();
        assert_eq!(
            Handoff::read(&binary).unwrap_err().to_string(),
            format!(
                "{} is not UTF-8 text (invalid byte at offset 3)",
                shown(&binary)
            )
        );

        let missing = dir.path().join("missing.json");
        let err = Handoff::read(&missing).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("failed to read {}: ", shown(&missing))),
            "{err}"
        );
    }

    #[test]
    fn run_ids_in_urls() {
        assert_eq!(
            run_id_from_url("https://github.com/o/r/actions/runs/123/job/4").as_deref(),
            Some("123")
        );
        assert_eq!(
            run_id_from_url("https://github.com/o/r/actions/runs/77").as_deref(),
            Some("77")
        );
        assert_eq!(
            run_id_from_url("https://github.com/o/r/pull/5/checks"),
            None
        );
        assert_eq!(run_id_from_url("https://x/actions/runs/12abc"), None);
    }
}
