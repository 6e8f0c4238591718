//! Input generators shared by the `fuzz_*` integration tests of every crate
//! (the other crates include this file with `#[path]`).
//!
//! Two kinds of hostile input:
//! - [`hostile_text`]: arbitrary Unicode mixed with the tokens parsers care
//!   about (quotes, braces, separators, NUL, CR, byte-order marks, huge
//!   numbers), so that random text reaches deep into a parser instead of
//!   failing on its first byte;
//! - [`mutated`]: a real fixture with a few byte-level mutations — truncated
//!   at a random point, a byte flipped, a line duplicated or dropped, a
//!   quote / newline / NUL / brace inserted — which keeps most of the
//!   structure valid so the parser's later stages are exercised.
//!
//! [`bounded`] runs a parser call and fails the case when it takes longer
//! than its budget: a parser must end in bounded time, not only not panic.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::Index;

/// Byte strings inserted by [`Mutation::Insert`]: the characters that change
/// how a JSON, CSV or line-based parser reads what follows.
pub const INSERTS: &[&[u8]] = &[
    b"\"",
    b"\n",
    b"\0",
    b"\r\n",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\\",
    b"\"\"",
    b"\xEF\xBB\xBF",
    b"\xFF\xFE",
    b"99999999999999999999999",
    b"-1",
    b"null",
    b"\x1b[31m",
    b"../../../etc/passwd",
    b"$(touch pwned)",
];

/// The entry of [`INSERTS`] an index picks.
pub fn insert_bytes(which: &Index) -> &'static [u8] {
    INSERTS[which.index(INSERTS.len())]
}

/// One byte-level change to an input.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Cut the input at a point (a write cut short by a crash).
    Truncate(Index),
    /// XOR one byte with a non-zero mask.
    Flip(Index, u8),
    /// Repeat the line that holds a position.
    DuplicateLine(Index),
    /// Remove the line that holds a position.
    DropLine(Index),
    /// Insert one of [`INSERTS`] at a position.
    Insert(Index, Index),
}

/// Any one [`Mutation`].
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), 1u8..=255).prop_map(|(i, m)| Mutation::Flip(i, m)),
        any::<Index>().prop_map(Mutation::DuplicateLine),
        any::<Index>().prop_map(Mutation::DropLine),
        (any::<Index>(), any::<Index>()).prop_map(|(i, w)| Mutation::Insert(i, w)),
    ]
}

/// The span `[start, end)` of the line (with its `\n`) that holds byte `at`.
fn line_span(bytes: &[u8], at: usize) -> (usize, usize) {
    let start = bytes[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let end = bytes[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| at + i + 1);
    (start, end)
}

/// Applies `mutations` to `bytes` in order.
pub fn apply(bytes: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for m in mutations {
        if out.is_empty() {
            if let Mutation::Insert(_, what) = m {
                out.extend_from_slice(insert_bytes(what));
            }
            continue;
        }
        match m {
            Mutation::Truncate(i) => out.truncate(i.index(out.len() + 1)),
            Mutation::Flip(i, mask) => {
                let at = i.index(out.len());
                out[at] ^= mask;
            }
            Mutation::DuplicateLine(i) => {
                let (s, e) = line_span(&out, i.index(out.len()));
                let line = out[s..e].to_vec();
                out.splice(e..e, line);
            }
            Mutation::DropLine(i) => {
                let (s, e) = line_span(&out, i.index(out.len()));
                out.drain(s..e);
            }
            Mutation::Insert(i, what) => {
                let at = i.index(out.len() + 1);
                out.splice(at..at, insert_bytes(what).iter().copied());
            }
        }
    }
    out
}

/// `fixture` with one to `max` mutations applied.
pub fn mutated(fixture: Vec<u8>, max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(mutation(), 1..=max).prop_map(move |ms| apply(&fixture, &ms))
}

/// Like [`mutated`], as text (invalid UTF-8 replaced, the way a reader that
/// got the bytes through `from_utf8_lossy` would see them).
pub fn mutated_text(fixture: &str, max: usize) -> impl Strategy<Value = String> + use<> {
    mutated(fixture.as_bytes().to_vec(), max).prop_map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Arbitrary text made of parser-significant tokens and arbitrary Unicode.
pub fn hostile_text(max_pieces: usize) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => any::<Index>().prop_map(|i| String::from_utf8_lossy(insert_bytes(&i)).into_owned()),
        2 => "[a-zA-Z0-9_ .:/#|;=-]{0,12}",
        1 => any::<String>().prop_map(|s| s.chars().take(16).collect::<String>()),
        1 => Just("```json\n".to_owned()),
        1 => Just("```".to_owned()),
        1 => Just("{\"a\":".to_owned()),
        1 => Just("PASS".to_owned()),
        1 => Just("FAIL".to_owned()),
    ];
    proptest::collection::vec(piece, 0..max_pieces).prop_map(|v| v.concat())
}

/// Arbitrary bytes, possibly invalid UTF-8.
pub fn hostile_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..max),
        hostile_text(max / 8).prop_map(String::into_bytes),
    ]
}

/// An arbitrary JSON value, at most `depth` levels deep.
pub fn json_value(depth: u32) -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z0-9 _./-]{0,10}".prop_map(Value::String),
        prop_oneof![
            Just("id"),
            Just("type"),
            Just("string"),
            Just("object"),
            Just("PASS"),
            Just("FAIL"),
            Just("criteria"),
            Just("high")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(depth, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// An object key: mostly the field names our readers look for.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(vec![
            "id", "title", "severity", "file", "line", "description", "dimension",
            "findings", "recommendation", "recommendations", "category", "snippet",
            "type", "properties", "required", "items", "enum", "const", "minimum",
            "maximum", "minLength", "maxLength", "minItems", "maxItems",
            "additionalProperties", "criteria", "criterion", "status", "evidence",
            "prNumber", "branch", "failedChecks", "name", "runId", "logUrl",
        ])
        .prop_map(str::to_owned),
        1 => "[a-z]{1,6}",
    ]
}

/// Runs `f` and fails (panics, inside a proptest: a failing case) when it
/// takes longer than `budget`.
pub fn bounded<T>(budget: Duration, what: &str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    let took = started.elapsed();
    assert!(
        took <= budget,
        "{what} took {took:?}, more than its budget of {budget:?}"
    );
    out
}

/// The per-call budget of a parser on inputs of a few kilobytes: far above
/// what a linear parser needs even in a debug build on a loaded machine, far
/// below what a quadratic blow-up on the same input takes.
pub const PARSE_BUDGET: Duration = Duration::from_secs(2);

/// Cases per proptest; the `FUZZ_CASES` variable raises it for a longer run.
pub fn cases(default: u32) -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A proptest configuration with [`cases`] cases and no failure files.
pub fn config(default_cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default_cases),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Inputs built to make a naive scanner quadratic or recursive, by name:
/// every parser must still answer them within its budget.
pub fn pathological_texts() -> Vec<(&'static str, String)> {
    let n = 50_000;
    vec![
        ("open braces", "{".repeat(n)),
        ("open brackets", "[".repeat(n)),
        (
            "braces in a string",
            format!("{{\"a\": \"{}", "{".repeat(n)),
        ),
        ("unclosed objects", "{\"a\":".repeat(n / 5)),
        ("fences", "```\n".repeat(n / 4)),
        ("quotes", "\"".repeat(n)),
        (
            "nested arrays",
            format!("{}{}", "[".repeat(n), "]".repeat(n)),
        ),
    ]
}
