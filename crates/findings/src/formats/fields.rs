//! The JSON helpers the readers share: whole documents (an object holding
//! an array, or an array) and typed fields read with the problem named.

use serde_json::Value;

use super::{FormatError, InputFormat};

/// Parses a whole-document format (SARIF, rdjson): JSON (a leading BOM
/// ignored) whose top level must be an object, and the array at `key` in it.
/// `noun` names the document in messages ("the log has no `runs` array").
/// Returns the rest of the object (without `key`) and the array.
pub(crate) fn document_array(
    text: &str,
    source_name: &str,
    format: InputFormat,
    key: &str,
    noun: &str,
) -> Result<(serde_json::Map<String, Value>, Vec<Value>), FormatError> {
    let shape = |problem: String| FormatError::Shape {
        source_name: source_name.to_owned(),
        format: format.as_str(),
        problem,
    };
    let doc: Value = serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| FormatError::json(source_name, format, &e))?;
    let Value::Object(mut map) = doc else {
        return Err(shape(format!(
            "the top-level value is a {}, expected an object",
            json_type(&doc)
        )));
    };
    match map.remove(key) {
        Some(Value::Array(items)) => Ok((map, items)),
        Some(other) => Err(shape(format!(
            "`{key}` is a {}, expected an array",
            json_type(&other)
        ))),
        None => Err(shape(format!("the {noun} has no `{key}` array"))),
    }
}

/// Parses a document whose top level must be an array (ruff's and ESLint's
/// JSON output), a leading BOM ignored.
pub(crate) fn document_list(
    text: &str,
    source_name: &str,
    format: InputFormat,
) -> Result<Vec<Value>, FormatError> {
    match serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| FormatError::json(source_name, format, &e))?
    {
        Value::Array(items) => Ok(items),
        other => Err(FormatError::Shape {
            source_name: source_name.to_owned(),
            format: format.as_str(),
            problem: format!(
                "the top-level value is a {}, expected an array",
                json_type(&other)
            ),
        }),
    }
}

/// The JSON type of a value, for messages.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A string field, trimmed, non-empty.
pub(crate) fn str_field<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// A positive integer field that fits a `u32`.
pub(crate) fn u32_field(v: &Value, key: &str) -> Option<u32> {
    v.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
}

/// An optional line or column number at `key` of `v` (`path` names it in
/// the message): missing or `null` is `None`; a non-negative integer that
/// fits a `u32` is read; anything else (a string such as `"three"`, a
/// negative or fractional number, an object) is an error, so that the entry
/// is rejected rather than read as having no line.
pub(crate) fn position_field(
    v: Option<&Value>,
    key: &str,
    path: &str,
) -> Result<Option<u32>, String> {
    match v.and_then(|v| v.get(key)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| format!("`{path}` is {n}, expected a non-negative integer")),
        Some(other) => Err(format!(
            "`{path}` is a {}, expected a number",
            json_type(other)
        )),
    }
}
