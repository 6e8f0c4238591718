//! A small JSON Schema validator for agent answers.
//!
//! Agents are asked for answers that satisfy a schema (planex's row reports,
//! review-fix's partial plans). We validate the subset of JSON Schema those
//! schemas use — `type` (a name or a list), `properties`, `required`,
//! `additionalProperties: false`, `items`, `enum`, `const`, `minItems`,
//! `maxItems`, `minLength`, `maxLength`, `minimum`, `maximum` — and report
//! every violation with its JSON path, so that the error can be fed back to
//! the agent verbatim. Unknown keywords are ignored, as JSON Schema requires.

use std::fmt;

use serde_json::Value;

/// One way in which a value fails a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON path of the offending value, `$` for the root (`$.tasks[2].id`).
    pub path: String,
    /// What was expected.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Validates `value` against `schema`; returns every violation found.
pub fn validate(schema: &Value, value: &Value) -> Result<(), Vec<Violation>> {
    let mut out = Vec::new();
    check(schema, value, "$", &mut out);
    if out.is_empty() { Ok(()) } else { Err(out) }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    let actual = type_name(v);
    expected == actual
        || (expected == "number" && actual == "integer")
        || (expected == "integer"
            && v.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && actual == "number"))
}

fn check(schema: &Value, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let Some(schema) = schema.as_object() else {
        // `true` accepts everything; `false` nothing.
        if schema == &Value::Bool(false) {
            out.push(Violation {
                path: path.to_owned(),
                message: "no value is allowed here".into(),
            });
        }
        return;
    };
    let mut push = |message: String| {
        out.push(Violation {
            path: path.to_owned(),
            message,
        })
    };

    if let Some(t) = schema.get("type") {
        let allowed: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !allowed.is_empty() && !allowed.iter().any(|t| type_matches(t, value)) {
            push(format!(
                "expected {}, found {}",
                allowed.join(" or "),
                type_name(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        let names: Vec<String> = options.iter().map(Value::to_string).collect();
        push(format!(
            "expected one of {}, found {}",
            names.join(", "),
            value
        ));
    }
    if let Some(c) = schema.get("const")
        && c != value
    {
        push(format!("expected {c}, found {value}"));
    }
    match value {
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                push(format!("expected at least {min} characters, found {len}"));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                push(format!("expected at most {max} characters, found {len}"));
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && x < min
            {
                push(format!("expected a number >= {min}, found {x}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && x > max
            {
                push(format!("expected a number <= {max}, found {x}"));
            }
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && len < min
            {
                push(format!("expected at least {min} items, found {len}"));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && len > max
            {
                push(format!("expected at most {max} items, found {len}"));
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        Value::Object(map) => {
            if let Some(Value::Array(required)) = schema.get("required") {
                for key in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(key) {
                        push(format!("missing required field `{key}`"));
                    }
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
            for (key, v) in map {
                let child = format!("{path}.{key}");
                match props.and_then(|p| p.get(key)) {
                    Some(s) => check(s, v, &child, out),
                    None if closed => out.push(Violation {
                        path: child,
                        message: "unexpected field".into(),
                    }),
                    None => {
                        if let Some(extra) = schema.get("additionalProperties")
                            && extra.is_object()
                        {
                            check(extra, v, &child, out);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check_msgs(schema: Value, value: Value) -> Vec<String> {
        match validate(&schema, &value) {
            Ok(()) => Vec::new(),
            Err(v) => v.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn reports_every_violation_with_its_path() {
        let schema = json!({
            "type": "object",
            "required": ["id", "status", "findings"],
            "properties": {
                "id": {"type": "string"},
                "status": {"type": "string", "enum": ["completed", "failed"]},
                "key_files": {"type": "array", "items": {"type": "string"}},
            }
        });
        let msgs = check_msgs(
            schema,
            json!({"id": 3, "status": "done", "key_files": ["a", 1]}),
        );
        assert_eq!(
            msgs,
            [
                "$: missing required field `findings`",
                "$.id: expected string, found integer",
                "$.key_files[1]: expected string, found integer",
                "$.status: expected one of \"completed\", \"failed\", found \"done\"",
            ]
        );
    }

    #[test]
    fn accepts_valid_values_and_numeric_widening() {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "number", "minimum": 0}}});
        assert!(validate(&schema, &json!({"n": 3})).is_ok());
        assert!(validate(&json!({"type": ["string", "null"]}), &Value::Null).is_ok());
        assert_eq!(
            check_msgs(json!({"type": "array", "maxItems": 1}), json!([1, 2])),
            ["$: expected at most 1 items, found 2"]
        );
    }

    #[test]
    fn closed_objects_reject_unknown_fields() {
        let schema =
            json!({"type": "object", "additionalProperties": false, "properties": {"a": {}}});
        assert_eq!(
            check_msgs(schema, json!({"a": 1, "b": 2})),
            ["$.b: unexpected field"]
        );
    }
}
