//! The applicators that apply subschemas to the same value: `$ref`,
//! `allOf`, `anyOf`, `oneOf`, `not`.

use serde_json::{Map, Value};

use super::{Memo, Validator, Violation, join, violation};

impl Validator {
    /// The applicators that apply subschemas to the same value: `$ref`,
    /// `allOf`, `anyOf`, `oneOf`, `not`.
    pub(super) fn check_in_place(
        &self,
        schema: &Map<String, Value>,
        value: &Value,
        path: &str,
        out: &mut Vec<Violation>,
        memo: &mut Memo,
    ) {
        if let Some(Value::String(reference)) = schema.get("$ref") {
            match self.refs.get(reference).and_then(|p| self.root.pointer(p)) {
                Some(target) => self.check(target, value, path, out, memo),
                None => out.push(violation(
                    path,
                    format!("`$ref` {reference:?} does not resolve"),
                )),
            }
        }
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for s in all {
                self.check(s, value, path, out, memo);
            }
        }
        if let Some(Value::Array(any)) = schema.get("anyOf") {
            self.any_of(any, value, path, out, memo);
        }
        if let Some(Value::Array(one)) = schema.get("oneOf") {
            self.one_of(one, value, path, out, memo);
        }
        if let Some(not) = schema.get("not") {
            let mut sub = Vec::new();
            self.check(not, value, path, &mut sub, memo);
            if sub.is_empty() {
                out.push(violation(
                    path,
                    "expected a value not matching the `not` schema".into(),
                ));
            }
        }
    }

    /// `anyOf`: the value matches at least one of `any`; when none matches,
    /// one violation names each schema's failures.
    fn any_of(
        &self,
        any: &[Value],
        value: &Value,
        path: &str,
        out: &mut Vec<Violation>,
        memo: &mut Memo,
    ) {
        let mut failures = Vec::new();
        for (i, s) in any.iter().enumerate() {
            let mut sub = Vec::new();
            self.check(s, value, path, &mut sub, memo);
            if sub.is_empty() {
                failures.clear();
                break;
            }
            failures.push(format!("anyOf[{i}]: {}", join(&sub)));
        }
        if !failures.is_empty() {
            out.push(violation(
                path,
                format!(
                    "expected a value matching at least one `anyOf` schema, none matched ({})",
                    failures.join("; ")
                ),
            ));
        }
    }

    /// `oneOf`: the value matches exactly one of `one`; otherwise one
    /// violation names the schemas' failures (none matched) or the schemas
    /// that matched (more than one).
    fn one_of(
        &self,
        one: &[Value],
        value: &Value,
        path: &str,
        out: &mut Vec<Violation>,
        memo: &mut Memo,
    ) {
        let mut matched = Vec::new();
        let mut failures = Vec::new();
        for (i, s) in one.iter().enumerate() {
            let mut sub = Vec::new();
            self.check(s, value, path, &mut sub, memo);
            if sub.is_empty() {
                matched.push(format!("oneOf[{i}]"));
            } else {
                failures.push(format!("oneOf[{i}]: {}", join(&sub)));
            }
        }
        match matched.len() {
            1 => {}
            0 => out.push(violation(
                path,
                format!(
                    "expected a value matching exactly one `oneOf` schema, none matched ({})",
                    failures.join("; ")
                ),
            )),
            _ => out.push(violation(
                path,
                format!(
                    "expected a value matching exactly one `oneOf` schema, it matched {}",
                    matched.join(" and ")
                ),
            )),
        }
    }
}
