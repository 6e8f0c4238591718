//! Value checks (numbers, counts, equality) and the schema compiler: a
//! schema turned into the nodes the validator walks, with patterns compiled
//! and local `$ref`s resolved.

use super::*;

/// The names `type` accepts.
pub(super) const TYPE_NAMES: &[&str] = &[
    "array", "boolean", "integer", "null", "number", "object", "string",
];

pub(super) fn check_number(
    schema: &Map<String, Value>,
    n: &Number,
    path: &str,
    out: &mut Vec<Violation>,
) {
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

pub(super) fn violation(path: &str, message: String) -> Violation {
    Violation {
        path: path.to_owned(),
        message,
    }
}

/// The violations of one `anyOf`/`oneOf` branch, for the message of the
/// branch's parent, cut to a bounded length: a branch's own message quotes
/// its branches, and uncut quotes would grow exponentially with the depth of
/// a recursive schema.
pub(super) fn join(violations: &[Violation]) -> String {
    const MAX_CHARS: usize = 240;
    let parts: Vec<String> = violations.iter().map(ToString::to_string).collect();
    let text = parts.join(", ");
    match text.char_indices().nth(MAX_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

pub(super) fn type_name(v: &Value) -> &'static str {
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

pub(super) fn type_matches(expected: &str, v: &Value) -> bool {
    let actual = type_name(v);
    expected == actual
        || (expected == "number" && actual == "integer")
        || (expected == "integer"
            && v.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && actual == "number"))
}

/// A count keyword's value: a non-negative integer (`3` or `3.0`).
pub(super) fn as_count(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    })
}

pub(super) fn as_int(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

pub(super) fn compare(a: &Number, b: &Number) -> Option<Ordering> {
    match (as_int(a), as_int(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// Whether `n` is a multiple of `m`: exact for integers, within a few ulps
/// for other numbers (so that `0.3` is a multiple of `0.1`).
pub(super) fn is_multiple(n: &Number, m: &Number) -> bool {
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
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
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
pub(super) fn compile_pattern(pattern: &str) -> Result<Regex, String> {
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
pub(super) struct Node {
    pub(super) in_place: Vec<String>,
    /// `(reference, JSON path of the $ref keyword)`.
    pub(super) reference: Option<(String, String)>,
}

/// Walks a schema once: checks every keyword, compiles patterns, and
/// records every subschema by JSON pointer for `$ref` resolution.
#[derive(Debug, Default)]
pub(super) struct Compiler {
    pub(super) regexes: HashMap<String, Regex>,
    pub(super) nodes: HashMap<String, Node>,
}

impl Compiler {
    pub(super) fn walk(
        &mut self,
        schema: &Value,
        pointer: &str,
        path: &str,
    ) -> Result<(), SchemaError> {
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
            self.keyword(&mut node, pointer, path, keyword, v)?;
        }
        self.nodes.insert(pointer.to_owned(), node);
        Ok(())
    }

    /// Checks one keyword of the schema object at `pointer` (`path`) and
    /// walks the subschemas it holds, recording in `node` those checked in
    /// place and its `$ref`.
    fn keyword(
        &mut self,
        node: &mut Node,
        pointer: &str,
        path: &str,
        keyword: &str,
        v: &Value,
    ) -> Result<(), SchemaError> {
        let kpath = format!("{path}.{keyword}");
        let kpointer = format!("{pointer}/{}", escape_pointer(keyword));
        let invalid = |expected: &str| SchemaError::InvalidKeyword {
            path: kpath.clone(),
            keyword: keyword.to_owned(),
            expected: expected.to_owned(),
        };
        match keyword {
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
                let in_place = keyword != "prefixItems";
                self.schema_list(node, list, in_place, &kpointer, &kpath)?;
            }
            "pattern" => match v {
                Value::String(p) => self.pattern(p, &kpath)?,
                _ => return Err(invalid("a string (a regular expression)")),
            },
            "$id" if !pointer.is_empty() => {
                return Err(invalid(
                    "at the root only (embedded schema resources are not supported)",
                ));
            }
            "$ref" => {
                let Some(reference) = v.as_str() else {
                    return Err(invalid("a string"));
                };
                node.reference = Some((reference.to_owned(), kpath.clone()));
            }
            _ => match value_keyword(keyword, v) {
                Some(Ok(())) => {}
                Some(Err(expected)) => return Err(invalid(expected)),
                None => {
                    return Err(SchemaError::UnknownKeyword {
                        path: kpath,
                        keyword: keyword.to_owned(),
                    });
                }
            },
        }
        Ok(())
    }

    /// Walks each schema of a keyword's `list` (at `kpointer`, `kpath`),
    /// recording in `node` those checked in place (`in_place`: all
    /// but `prefixItems`'s, which apply to items).
    fn schema_list(
        &mut self,
        node: &mut Node,
        list: &[Value],
        in_place: bool,
        kpointer: &str,
        kpath: &str,
    ) -> Result<(), SchemaError> {
        for (i, child) in list.iter().enumerate() {
            let cpointer = format!("{kpointer}/{i}");
            if in_place {
                node.in_place.push(cpointer.clone());
            }
            self.walk(child, &cpointer, &format!("{kpath}[{i}]"))?;
        }
        Ok(())
    }

    pub(super) fn pattern(&mut self, pattern: &str, path: &str) -> Result<(), SchemaError> {
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
    pub(super) fn resolve_refs(&self) -> Result<HashMap<String, String>, SchemaError> {
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
pub(super) fn ref_pointer(reference: &str) -> Option<String> {
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

pub(super) fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// `min<key>` / `max<key>` (`minLength`, `maxItems`, …) against `len`.
pub(super) fn check_count(
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

/// A keyword whose value holds no subschema: `None` when the keyword is not
/// one, else whether its value is what it takes (`Err` with what is
/// expected).
fn value_keyword(keyword: &str, v: &Value) -> Option<Result<(), &'static str>> {
    let takes = |good: bool, expected: &'static str| if good { Ok(()) } else { Err(expected) };
    Some(match keyword {
        "type" => {
            let names: Vec<&Value> = match v {
                Value::Array(list) => list.iter().collect(),
                single => vec![single],
            };
            let known = |n: &&Value| n.as_str().is_some_and(|n| TYPE_NAMES.contains(&n));
            takes(
                !names.is_empty() && names.iter().all(known),
                "a type name (array, boolean, integer, null, number, object, string) or a non-empty list of them",
            )
        }
        "enum" | "examples" => takes(v.is_array(), "an array"),
        "const" | "default" => Ok(()),
        "required" => takes(
            v.as_array().is_some_and(|l| l.iter().all(Value::is_string)),
            "an array of field names",
        ),
        "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties" | "maxProperties" => {
            takes(as_count(v).is_some(), "a non-negative integer")
        }
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
            takes(v.is_number(), "a number")
        }
        "multipleOf" => takes(
            v.as_f64().is_some_and(|m| m > 0.0),
            "a number greater than 0",
        ),
        "uniqueItems" | "deprecated" | "readOnly" | "writeOnly" => {
            takes(v.is_boolean(), "a boolean")
        }
        "format" | "title" | "description" | "$comment" | "$schema" | "$id" => {
            takes(v.is_string(), "a string")
        }
        _ => return None,
    })
}
