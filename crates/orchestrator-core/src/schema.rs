//! A small JSON Schema validator for agent answers.
//!
//! Agents are asked for answers that satisfy a schema (planex's row reports,
//! review-fix's partial plans, and whatever an embedder passes to
//! [`AgentRequest::with_schema`](crate::agent::AgentRequest::with_schema)).
//! Every violation is reported with its JSON path, so that the error can be
//! fed back to the agent verbatim.
//!
//! # What is implemented
//!
//! The assertions and applicators of JSON Schema 2020-12 that answers need
//! (the full list is [`KEYWORDS`]):
//!
//! - any value: `type` (a name or a list), `enum`, `const`, `allOf`, `anyOf`,
//!   `oneOf`, `not`, `$ref`;
//! - strings: `minLength`, `maxLength` (in characters), `pattern`;
//! - numbers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`
//!   (numbers, as in 2020-12, not draft-4 booleans), `multipleOf`;
//! - arrays: `items`, `prefixItems`, `contains`, `minItems`, `maxItems`,
//!   `uniqueItems`;
//! - objects: `properties`, `patternProperties`, `additionalProperties`
//!   (`false` or a schema, applied to the fields neither `properties` nor
//!   `patternProperties` name), `required`, `propertyNames`,
//!   `minProperties`, `maxProperties`;
//! - keywords that assert nothing: `$schema`, `$id` (at the root only),
//!   `$comment`, `title`, `description`, `default`, `examples`, `deprecated`,
//!   `readOnly`, `writeOnly`, `$defs`, `definitions`, and `format`, which is
//!   an annotation only, as 2020-12 specifies by default: `"format": "email"`
//!   checks nothing, so a schema that needs the check says it with `pattern`.
//!
//! Numbers compare by value (`1` equals `1.0` in `enum`, `const` and
//! `uniqueItems`, and `1.0` is an `integer`). `$ref` siblings apply too, as in
//! 2020-12.
//!
//! # What is refused
//!
//! JSON Schema asks validators to ignore keywords they do not know, but a
//! validator that ignores `if` or `dependentRequired` passes answers the
//! schema's author meant to reject. So [`Validator::new`] (and
//! [`check_schema`]) refuse, with the keyword and its JSON path in the schema,
//! every schema that uses a keyword outside [`KEYWORDS`], a keyword with a
//! value of the wrong shape (`"minLength": "3"`, `"type": "strnig"`), a
//! `pattern` the regex engine cannot compile, a `$ref` that is not local (only
//! `#` and JSON-pointer fragments such as `#/$defs/name` into the same schema
//! are resolved), or a `$ref` cycle that never descends into the value (which
//! would recurse forever).
//!
//! # Regular expressions
//!
//! `pattern` and the keys of `patternProperties` are searched (not anchored:
//! write `^…$` to match the whole string) with the `regex` crate, after
//! `\d`, `\D`, `\w` and `\W` are rewritten to their ASCII meaning as in
//! ECMA-262. The `regex` crate has no look-around and no back-references; a
//! pattern using them is refused rather than half-checked. Inside a character
//! class, `[` opens a nested class (`[[a-z]_]`), unlike ECMA-262.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt;

use regex::Regex;
use serde_json::{Map, Number, Value};

mod applicators;
mod compile;
use compile::*;

/// Every keyword the validator understands; a schema using any other keyword
/// is refused (see the [module docs](self)).
pub const KEYWORDS: &[&str] = &[
    "$comment",
    "$defs",
    "$id",
    "$ref",
    "$schema",
    "additionalProperties",
    "allOf",
    "anyOf",
    "const",
    "contains",
    "default",
    "definitions",
    "deprecated",
    "description",
    "enum",
    "examples",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "format",
    "items",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "not",
    "oneOf",
    "pattern",
    "patternProperties",
    "prefixItems",
    "properties",
    "propertyNames",
    "readOnly",
    "required",
    "title",
    "type",
    "uniqueItems",
    "writeOnly",
];

/// Results of `Validator::check` by (schema address, value address).
type Memo = HashMap<(usize, usize), Vec<Violation>>;

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

/// Why a schema is refused: it says something the validator would not check.
///
/// Every variant carries `path`, the JSON path of the offending keyword in
/// the schema (`$.properties.id.pattern`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A keyword outside [`KEYWORDS`].
    #[error(
        "schema keyword `{keyword}` at {path} is not supported by the validator, which would ignore it; the schema is refused"
    )]
    UnknownKeyword {
        /// Where the keyword is.
        path: String,
        /// The keyword.
        keyword: String,
    },
    /// A known keyword whose value has the wrong shape.
    #[error("schema keyword `{keyword}` at {path} must be {expected}")]
    InvalidKeyword {
        /// Where the keyword is.
        path: String,
        /// The keyword.
        keyword: String,
        /// What its value must be.
        expected: String,
    },
    /// A position that must hold a schema holds something else.
    #[error("expected a schema (an object or a boolean) at {path}, found {found}")]
    NotASchema {
        /// Where the non-schema is.
        path: String,
        /// The JSON type found there.
        found: String,
    },
    /// A `pattern` (or `patternProperties` key) that does not compile.
    #[error("regular expression {pattern:?} at {path} is not supported: {message}")]
    InvalidPattern {
        /// Where the pattern is.
        path: String,
        /// The pattern.
        pattern: String,
        /// What the regex engine said.
        message: String,
    },
    /// A `$ref` that is not `#` or a JSON-pointer fragment of this schema.
    #[error(
        "`$ref` {reference:?} at {path} is not supported: only `#` and JSON-pointer fragments into the same schema (`#/$defs/name`) are resolved"
    )]
    UnsupportedRef {
        /// Where the `$ref` is.
        path: String,
        /// The reference.
        reference: String,
    },
    /// A local `$ref` that names no schema in the document.
    #[error("`$ref` {reference:?} at {path} points at no schema in this document")]
    UnresolvedRef {
        /// Where the `$ref` is.
        path: String,
        /// The reference.
        reference: String,
    },
    /// A `$ref` that leads back to itself without descending into the value,
    /// so validation would never end.
    #[error(
        "`$ref` {reference:?} at {path} leads back to itself without descending into the value, so validation would never end"
    )]
    RefCycle {
        /// Where the `$ref` is.
        path: String,
        /// The reference.
        reference: String,
    },
}

impl SchemaError {
    /// The JSON path, in the schema, of what is wrong.
    pub fn path(&self) -> &str {
        match self {
            SchemaError::UnknownKeyword { path, .. }
            | SchemaError::InvalidKeyword { path, .. }
            | SchemaError::NotASchema { path, .. }
            | SchemaError::InvalidPattern { path, .. }
            | SchemaError::UnsupportedRef { path, .. }
            | SchemaError::UnresolvedRef { path, .. }
            | SchemaError::RefCycle { path, .. } => path,
        }
    }
}

/// Checks that the validator implements everything `schema` says; see the
/// [module docs](self) for what is refused.
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    Validator::new(schema).map(drop)
}

/// Validates `value` against `schema`; returns every violation found.
///
/// A schema that [`check_schema`] refuses fails every value, with one
/// violation at `$` that names the schema error. Use [`Validator::new`] to
/// tell a wrong schema from a wrong value.
pub fn validate(schema: &Value, value: &Value) -> Result<(), Vec<Violation>> {
    match Validator::new(schema) {
        Ok(validator) => validator.validate(value),
        Err(e) => Err(vec![Violation {
            path: "$".to_owned(),
            message: format!("the schema is refused: {e}"),
        }]),
    }
}

/// A schema checked once (keywords, regular expressions, references) and
/// ready to validate any number of values.
#[derive(Debug, Clone)]
pub struct Validator {
    root: Value,
    /// Compiled `pattern`s and `patternProperties` keys, by source.
    regexes: HashMap<String, Regex>,
    /// Each `$ref` string, with the JSON pointer it resolves to.
    refs: HashMap<String, String>,
}

impl Validator {
    /// Checks `schema` and prepares it; refuses a schema that says something
    /// the validator would not check.
    pub fn new(schema: &Value) -> Result<Self, SchemaError> {
        let mut compiler = Compiler::default();
        compiler.walk(schema, "", "$")?;
        let refs = compiler.resolve_refs()?;
        Ok(Validator {
            root: schema.clone(),
            regexes: compiler.regexes,
            refs,
        })
    }

    /// The schema.
    pub fn schema(&self) -> &Value {
        &self.root
    }

    /// Validates `value`; returns every violation found.
    pub fn validate(&self, value: &Value) -> Result<(), Vec<Violation>> {
        let mut out = Vec::new();
        self.check(&self.root, value, "$", &mut out, &mut Memo::new());
        if out.is_empty() { Ok(()) } else { Err(out) }
    }

    fn regex(&self, source: &str) -> Result<Regex, String> {
        match self.regexes.get(source) {
            Some(re) => Ok(re.clone()),
            None => compile_pattern(source),
        }
    }

    /// Checks `value` (at `path`) against `schema`, once per pair: the
    /// result is kept in `memo` by the addresses of both, so that recursive
    /// schemas whose branches revisit the same value (`anyOf: [{items: {$ref:
    /// "#"}}, …]`) take polynomial time, not exponential. `value` must live in
    /// the validated value (not a temporary) for the addresses to mean the
    /// same value at the same path.
    fn check(
        &self,
        schema: &Value,
        value: &Value,
        path: &str,
        out: &mut Vec<Violation>,
        memo: &mut Memo,
    ) {
        let key = (
            std::ptr::from_ref(schema).addr(),
            std::ptr::from_ref(value).addr(),
        );
        if let Some(found) = memo.get(&key) {
            out.extend(found.iter().cloned());
            return;
        }
        let start = out.len();
        self.check_uncached(schema, value, path, out, memo);
        memo.insert(key, out[start..].to_vec());
    }

    fn check_uncached(
        &self,
        schema: &Value,
        value: &Value,
        path: &str,
        out: &mut Vec<Violation>,
        memo: &mut Memo,
    ) {
        let Some(schema) = schema.as_object() else {
            // `true` accepts everything; `false` nothing.
            if schema == &Value::Bool(false) {
                out.push(violation(path, "no value is allowed here".into()));
            }
            return;
        };
        if let Some(t) = schema.get("type") {
            let allowed: Vec<&str> = match t {
                Value::String(s) => vec![s.as_str()],
                Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !allowed.iter().any(|t| type_matches(t, value)) {
                out.push(violation(
                    path,
                    format!(
                        "expected {}, found {}",
                        allowed.join(" or "),
                        type_name(value)
                    ),
                ));
                return;
            }
        }
        if let Some(Value::Array(options)) = schema.get("enum")
            && !options.iter().any(|o| json_eq(o, value))
        {
            let names: Vec<String> = options.iter().map(Value::to_string).collect();
            out.push(violation(
                path,
                format!("expected one of {}, found {}", names.join(", "), value),
            ));
        }
        if let Some(c) = schema.get("const")
            && !json_eq(c, value)
        {
            out.push(violation(path, format!("expected {c}, found {value}")));
        }
        self.check_in_place(schema, value, path, out, memo);
        match value {
            Value::String(s) => self.check_string(schema, s, path, out),
            Value::Number(n) => check_number(schema, n, path, out),
            Value::Array(items) => self.check_array(schema, items, path, out, memo),
            Value::Object(map) => self.check_object(schema, map, path, out, memo),
            Value::Null | Value::Bool(_) => {}
        }
    }

    fn check_string(
        &self,
        schema: &Map<String, Value>,
        s: &str,
        path: &str,
        out: &mut Vec<Violation>,
    ) {
        let len = s.chars().count() as u64;
        check_count(schema, "Length", "characters", len, path, out);
        if let Some(Value::String(pattern)) = schema.get("pattern") {
            match self.regex(pattern) {
                Ok(re) if re.is_match(s) => {}
                Ok(_) => out.push(violation(
                    path,
                    format!(
                        "expected a string matching the pattern {pattern:?}, found {}",
                        Value::String(s.to_owned())
                    ),
                )),
                Err(e) => out.push(violation(
                    path,
                    format!("the pattern {pattern:?} does not compile: {e}"),
                )),
            }
        }
    }

    fn check_array(
        &self,
        schema: &Map<String, Value>,
        items: &[Value],
        path: &str,
        out: &mut Vec<Violation>,
        memo: &mut Memo,
    ) {
        let len = items.len() as u64;
        check_count(schema, "Items", "items", len, path, out);
        if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
            'outer: for (j, b) in items.iter().enumerate() {
                for (i, a) in items[..j].iter().enumerate() {
                    if json_eq(a, b) {
                        out.push(violation(
                            &format!("{path}[{j}]"),
                            format!("expected unique items, found a duplicate of item {i}"),
                        ));
                        continue 'outer;
                    }
                }
            }
        }
        let prefix = match schema.get("prefixItems") {
            Some(Value::Array(prefix)) => prefix.as_slice(),
            _ => &[],
        };
        for (i, (item, s)) in items.iter().zip(prefix).enumerate() {
            self.check(s, item, &format!("{path}[{i}]"), out, memo);
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate().skip(prefix.len()) {
                self.check(item_schema, item, &format!("{path}[{i}]"), out, memo);
            }
        }
        if let Some(contains) = schema.get("contains") {
            let found = items.iter().enumerate().any(|(i, item)| {
                let mut sub = Vec::new();
                self.check(contains, item, &format!("{path}[{i}]"), &mut sub, memo);
                sub.is_empty()
            });
            if !found {
                out.push(violation(
                    path,
                    "expected at least one item matching the `contains` schema, none did".into(),
                ));
            }
        }
    }

    fn check_object(
        &self,
        schema: &Map<String, Value>,
        map: &Map<String, Value>,
        path: &str,
        out: &mut Vec<Violation>,
        memo: &mut Memo,
    ) {
        let len = map.len() as u64;
        check_count(schema, "Properties", "properties", len, path, out);
        if let Some(Value::Array(required)) = schema.get("required") {
            for key in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(key) {
                    out.push(violation(path, format!("missing required field `{key}`")));
                }
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        let patterns: Vec<(Result<Regex, String>, &Value)> = schema
            .get("patternProperties")
            .and_then(Value::as_object)
            .map(|p| p.iter().map(|(k, s)| (self.regex(k), s)).collect())
            .unwrap_or_default();
        let additional = schema.get("additionalProperties");
        let names = schema.get("propertyNames");
        for (key, v) in map {
            let child = format!("{path}.{key}");
            if let Some(names) = names {
                let mut sub = Vec::new();
                // The name is a temporary: it gets a memo of its own.
                let name = Value::String(key.clone());
                self.check(names, &name, &child, &mut sub, &mut Memo::new());
                out.extend(sub.into_iter().map(|s| Violation {
                    message: format!("invalid field name: {}", s.message),
                    ..s
                }));
            }
            let mut named = false;
            if let Some(s) = props.and_then(|p| p.get(key)) {
                named = true;
                self.check(s, v, &child, out, memo);
            }
            for (re, s) in &patterns {
                match re {
                    Ok(re) if re.is_match(key) => {
                        named = true;
                        self.check(s, v, &child, out, memo);
                    }
                    Ok(_) => {}
                    Err(e) => out.push(violation(
                        &child,
                        format!("a `patternProperties` pattern does not compile: {e}"),
                    )),
                }
            }
            match additional {
                Some(Value::Bool(false)) if !named => {
                    out.push(violation(&child, "unexpected field".into()));
                }
                Some(extra) if !named => self.check(extra, v, &child, out, memo),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
