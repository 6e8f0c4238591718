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

/// The names `type` accepts.
const TYPE_NAMES: &[&str] = &[
    "array", "boolean", "integer", "null", "number", "object", "string",
];

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

    /// The applicators that apply subschemas to the same value: `$ref`,
    /// `allOf`, `anyOf`, `oneOf`, `not`.
    fn check_in_place(
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
        if let Some(Value::Array(one)) = schema.get("oneOf") {
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

fn check_number(schema: &Map<String, Value>, n: &Number, path: &str, out: &mut Vec<Violation>) {
    let bound = |key: &str| match schema.get(key) {
        Some(Value::Number(b)) => Some(b),
        _ => None,
    };
    type Accepts = fn(Ordering) -> bool;
    let checks: [(&str, &str, Accepts); 4] = [
        ("minimum", ">=", Ordering::is_ge),
        ("maximum", "<=", Ordering::is_le),
        ("exclusiveMinimum", ">", Ordering::is_gt),
        ("exclusiveMaximum", "<", Ordering::is_lt),
    ];
    for (key, op, ok) in checks {
        if let Some(b) = bound(key)
            && !compare(n, b).is_some_and(ok)
        {
            out.push(violation(
                path,
                format!("expected a number {op} {b}, found {n}"),
            ));
        }
    }
    if let Some(m) = bound("multipleOf")
        && !is_multiple(n, m)
    {
        out.push(violation(
            path,
            format!("expected a multiple of {m}, found {n}"),
        ));
    }
}

fn violation(path: &str, message: String) -> Violation {
    Violation {
        path: path.to_owned(),
        message,
    }
}

/// The violations of one `anyOf`/`oneOf` branch, for the message of the
/// branch's parent, cut to a bounded length: a branch's own message quotes
/// its branches, and uncut quotes would grow exponentially with the depth of
/// a recursive schema.
fn join(violations: &[Violation]) -> String {
    const MAX_CHARS: usize = 240;
    let parts: Vec<String> = violations.iter().map(ToString::to_string).collect();
    let text = parts.join(", ");
    match text.char_indices().nth(MAX_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
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

/// A count keyword's value: a non-negative integer (`3` or `3.0`).
fn as_count(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    })
}

fn as_int(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

fn compare(a: &Number, b: &Number) -> Option<Ordering> {
    match (as_int(a), as_int(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// Whether `n` is a multiple of `m`: exact for integers, within a few ulps
/// for other numbers (so that `0.3` is a multiple of `0.1`).
fn is_multiple(n: &Number, m: &Number) -> bool {
    if let (Some(x), Some(y)) = (as_int(n), as_int(m))
        && y != 0
    {
        return x % y == 0;
    }
    let (Some(x), Some(y)) = (n.as_f64(), m.as_f64()) else {
        return false;
    };
    let q = x / y;
    q.is_finite() && (q - q.round()).abs() <= q.abs().max(1.0) * f64::EPSILON * 4.0
}

/// JSON equality with numbers compared by value (`1 == 1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare(x, y) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, a)| y.get(k).is_some_and(|b| json_eq(a, b)))
        }
        _ => a == b,
    }
}

/// Compiles a JSON Schema pattern, with ECMA-262's ASCII `\d` and `\w`.
fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    let mut translated = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            translated.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => translated.push_str("[0-9]"),
            Some('D') => translated.push_str("[^0-9]"),
            Some('w') => translated.push_str("[0-9A-Za-z_]"),
            Some('W') => translated.push_str("[^0-9A-Za-z_]"),
            Some(other) => {
                translated.push('\\');
                translated.push(other);
            }
            None => translated.push('\\'),
        }
    }
    Regex::new(&translated).map_err(|e| match e {
        regex::Error::Syntax(text) => text
            .lines()
            .rfind(|l| l.starts_with("error:"))
            .unwrap_or(&text)
            .trim_start_matches("error: ")
            .to_owned(),
        other => other.to_string(),
    })
}

/// One subschema seen while checking: where it is, and the subschemas that
/// apply to the same value (in-place applicators), whose cycles never end.
#[derive(Debug, Default)]
struct Node {
    in_place: Vec<String>,
    /// `(reference, JSON path of the $ref keyword)`.
    reference: Option<(String, String)>,
}

/// Walks a schema once: checks every keyword, compiles patterns, and
/// records every subschema by JSON pointer for `$ref` resolution.
#[derive(Debug, Default)]
struct Compiler {
    regexes: HashMap<String, Regex>,
    nodes: HashMap<String, Node>,
}

impl Compiler {
    fn walk(&mut self, schema: &Value, pointer: &str, path: &str) -> Result<(), SchemaError> {
        let map = match schema {
            Value::Bool(_) => {
                self.nodes.insert(pointer.to_owned(), Node::default());
                return Ok(());
            }
            Value::Object(map) => map,
            other => {
                return Err(SchemaError::NotASchema {
                    path: path.to_owned(),
                    found: type_name(other).to_owned(),
                });
            }
        };
        let mut node = Node::default();
        for (keyword, v) in map {
            let kpath = format!("{path}.{keyword}");
            let kpointer = format!("{pointer}/{}", escape_pointer(keyword));
            let invalid = |expected: &str| SchemaError::InvalidKeyword {
                path: kpath.clone(),
                keyword: keyword.clone(),
                expected: expected.to_owned(),
            };
            match keyword.as_str() {
                "type" => {
                    let names: Vec<&Value> = match v {
                        Value::Array(list) if !list.is_empty() => list.iter().collect(),
                        Value::Array(_) => Vec::new(),
                        single => vec![single],
                    };
                    let known = |n: &&Value| n.as_str().is_some_and(|n| TYPE_NAMES.contains(&n));
                    if names.is_empty() || !names.iter().all(known) {
                        return Err(invalid(
                            "a type name (array, boolean, integer, null, number, object, string) or a non-empty list of them",
                        ));
                    }
                }
                "enum" | "examples" if !v.is_array() => return Err(invalid("an array")),
                "enum" | "examples" | "const" | "default" => {}
                "required" => {
                    if !v.as_array().is_some_and(|l| l.iter().all(Value::is_string)) {
                        return Err(invalid("an array of field names"));
                    }
                }
                "properties" | "patternProperties" | "$defs" | "definitions" => {
                    let Some(children) = v.as_object() else {
                        return Err(invalid("an object whose values are schemas"));
                    };
                    for (name, child) in children {
                        if keyword == "patternProperties" {
                            self.pattern(name, &kpath)?;
                        }
                        self.walk(
                            child,
                            &format!("{kpointer}/{}", escape_pointer(name)),
                            &format!("{kpath}.{name}"),
                        )?;
                    }
                }
                "items" if v.is_array() => {
                    return Err(invalid(
                        "a schema (tuples are written with `prefixItems`, as in JSON Schema 2020-12)",
                    ));
                }
                "additionalProperties" | "propertyNames" | "contains" | "items" | "not" => {
                    if keyword == "not" {
                        node.in_place.push(kpointer.clone());
                    }
                    self.walk(v, &kpointer, &kpath)?;
                }
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                    let Some(list) = v.as_array().filter(|l| !l.is_empty()) else {
                        return Err(invalid("a non-empty array of schemas"));
                    };
                    for (i, child) in list.iter().enumerate() {
                        let cpointer = format!("{kpointer}/{i}");
                        if keyword != "prefixItems" {
                            node.in_place.push(cpointer.clone());
                        }
                        self.walk(child, &cpointer, &format!("{kpath}[{i}]"))?;
                    }
                }
                "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
                | "maxProperties" => {
                    if as_count(v).is_none() {
                        return Err(invalid("a non-negative integer"));
                    }
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                    if !v.is_number() {
                        return Err(invalid("a number"));
                    }
                }
                "multipleOf" => {
                    if !v.as_f64().is_some_and(|m| m > 0.0) {
                        return Err(invalid("a number greater than 0"));
                    }
                }
                "pattern" => match v {
                    Value::String(p) => self.pattern(p, &kpath)?,
                    _ => return Err(invalid("a string (a regular expression)")),
                },
                "uniqueItems" | "deprecated" | "readOnly" | "writeOnly" => {
                    if !v.is_boolean() {
                        return Err(invalid("a boolean"));
                    }
                }
                "format" | "title" | "description" | "$comment" | "$schema" => {
                    if !v.is_string() {
                        return Err(invalid("a string"));
                    }
                }
                "$id" => {
                    if !pointer.is_empty() {
                        return Err(invalid(
                            "at the root only (embedded schema resources are not supported)",
                        ));
                    }
                    if !v.is_string() {
                        return Err(invalid("a string"));
                    }
                }
                "$ref" => {
                    let Some(reference) = v.as_str() else {
                        return Err(invalid("a string"));
                    };
                    node.reference = Some((reference.to_owned(), kpath.clone()));
                }
                _ => {
                    return Err(SchemaError::UnknownKeyword {
                        path: kpath,
                        keyword: keyword.clone(),
                    });
                }
            }
        }
        self.nodes.insert(pointer.to_owned(), node);
        Ok(())
    }

    fn pattern(&mut self, pattern: &str, path: &str) -> Result<(), SchemaError> {
        if self.regexes.contains_key(pattern) {
            return Ok(());
        }
        let re = compile_pattern(pattern).map_err(|message| SchemaError::InvalidPattern {
            path: path.to_owned(),
            pattern: pattern.to_owned(),
            message,
        })?;
        self.regexes.insert(pattern.to_owned(), re);
        Ok(())
    }

    /// Resolves every `$ref` to the pointer of a subschema seen by `walk`,
    /// and refuses reference cycles that never descend into the value.
    fn resolve_refs(&self) -> Result<HashMap<String, String>, SchemaError> {
        let mut refs = HashMap::new();
        let mut with_refs: Vec<&String> = Vec::new();
        let mut edges: HashMap<&str, Vec<String>> = HashMap::new();
        for (pointer, node) in &self.nodes {
            let mut out = node.in_place.clone();
            if let Some((reference, path)) = &node.reference {
                let target = ref_pointer(reference).ok_or_else(|| SchemaError::UnsupportedRef {
                    path: path.clone(),
                    reference: reference.clone(),
                })?;
                if !self.nodes.contains_key(&target) {
                    return Err(SchemaError::UnresolvedRef {
                        path: path.clone(),
                        reference: reference.clone(),
                    });
                }
                refs.insert(reference.clone(), target.clone());
                out.push(target);
                with_refs.push(pointer);
            }
            edges.insert(pointer, out);
        }
        // A cycle of in-place edges must contain a `$ref` (the others follow
        // the tree), so searching from every `$ref` finds them all.
        with_refs.sort();
        let mut done: HashSet<&str> = HashSet::new();
        for start in with_refs {
            if done.contains(start.as_str()) {
                continue;
            }
            // Iterative depth-first search; `stack` holds the current path.
            let mut on_path: HashSet<&str> = HashSet::from([start.as_str()]);
            let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
            while let Some((at, next)) = stack.last_mut() {
                let at: &str = at;
                let out = edges.get(at).map(Vec::as_slice).unwrap_or_default();
                let Some(to) = out.get(*next) else {
                    on_path.remove(at);
                    done.insert(at);
                    stack.pop();
                    continue;
                };
                *next += 1;
                if on_path.contains(to.as_str()) {
                    // The cycle is the stack from `to` up; name its first `$ref`.
                    let cycle = stack.iter().skip_while(|(p, _)| *p != to.as_str());
                    let (reference, path) = cycle
                        .filter_map(|(p, _)| self.nodes.get(*p)?.reference.clone())
                        .next()
                        .unwrap_or_default();
                    return Err(SchemaError::RefCycle { path, reference });
                }
                if let Some((key, _)) = edges.get_key_value(to.as_str())
                    && !done.contains(key)
                {
                    on_path.insert(key);
                    stack.push((key, 0));
                }
            }
        }
        Ok(refs)
    }
}

/// The JSON pointer of a local reference (`#`, `#/$defs/a%20b`), or `None`.
fn ref_pointer(reference: &str) -> Option<String> {
    let fragment = reference.strip_prefix('#')?;
    if !(fragment.is_empty() || fragment.starts_with('/')) {
        return None;
    }
    let bytes = fragment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = fragment.get(i + 1..i + 3)?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// `min<key>` / `max<key>` (`minLength`, `maxItems`, …) against `len`.
fn check_count(
    schema: &serde_json::Map<String, Value>,
    key: &str,
    noun: &str,
    len: u64,
    path: &str,
    out: &mut Vec<Violation>,
) {
    if let Some(min) = schema.get(&format!("min{key}")).and_then(as_count)
        && len < min
    {
        out.push(violation(
            path,
            format!("expected at least {min} {noun}, found {len}"),
        ));
    }
    if let Some(max) = schema.get(&format!("max{key}")).and_then(as_count)
        && len > max
    {
        out.push(violation(
            path,
            format!("expected at most {max} {noun}, found {len}"),
        ));
    }
}

#[cfg(test)]
mod tests;
