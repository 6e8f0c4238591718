//! Tests of the format readers, on real clippy output and hand-written SARIF
//! and rdjson samples (`tests/data/formats/`).

use std::collections::HashMap;
use std::fmt::Write as _;

use proptest::prelude::*;

use super::*;
use orchestrator_core::edit::{apply_edits, is_unanchored};
use orchestrator_core::finding::Severity;

const CLIPPY: &str = include_str!("../../tests/data/formats/clippy.json");
const SARIF: &str = include_str!("../../tests/data/formats/sample.sarif");
const RDJSON: &str = include_str!("../../tests/data/formats/sample.rdjson");
const RDJSONL: &str = include_str!("../../tests/data/formats/sample.rdjsonl");
const LIB_RS: &str = include_str!("../../tests/data/formats/clippy-crate-lib.rs");

/// A compact, reviewable rendering of an outcome.
fn render(outcome: &ParseOutcome) -> String {
    let mut s = format!("format: {}\n", outcome.format);
    for f in &outcome.findings {
        let _ = writeln!(
            s,
            "- {} [{} {} {}] {:?} @ {}:{}",
            f.id,
            f.severity,
            f.dimension_or_general(),
            f.category.as_deref().unwrap_or("-"),
            f.title,
            f.file_or_unknown(),
            f.line.map_or_else(|| "-".to_owned(), |l| l.to_string()),
        );
        for sug in &f.suggestions {
            let _ = writeln!(s, "    fix: {}", sug.message.as_deref().unwrap_or("-"));
            for e in &sug.edits {
                let _ = writeln!(
                    s,
                    "      {}:{}:{}-{}:{} {:?} -> {:?}{}",
                    e.file,
                    e.start_line,
                    e.start_column,
                    e.end_line,
                    e.end_column,
                    e.original,
                    e.replacement,
                    if is_unanchored(e) {
                        " (unanchored)"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    for r in &outcome.rejected {
        let _ = writeln!(s, "rejected: {r}");
    }
    for (dropped, kept) in &outcome.duplicates {
        let _ = writeln!(s, "duplicate: {dropped} of {kept}");
    }
    for n in &outcome.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

fn lib_reader(path: &str) -> Option<String> {
    (path == "src/lib.rs").then(|| LIB_RS.to_owned())
}

#[test]
fn clippy_stream_is_read_and_deduplicated_across_targets() {
    let out = cargo::parse(CLIPPY, "clippy.json");
    assert!(out.rejected.is_empty(), "{:?}", out.rejected);
    // The stream reports every diagnostic twice (lib and lib test).
    assert_eq!(out.duplicates.len(), out.findings.len());
    insta::assert_snapshot!("clippy_findings", render(&out));
}

#[test]
fn clippy_suggestions_rebuild_the_replaced_text_exactly() {
    let out = cargo::parse(CLIPPY, "clippy.json");
    let mut checked = 0;
    for f in &out.findings {
        for s in &f.suggestions {
            for e in &s.edits {
                let (start, end) = e.byte_range.unwrap();
                assert_eq!(&LIB_RS[start..end], e.original, "{}", f.id);
                checked += 1;
            }
        }
    }
    assert!(checked >= 15, "only {checked} edits");
    let two_fields = out
        .findings
        .iter()
        .filter(|f| f.category.as_deref() == Some("clippy::redundant_field_names"))
        .count();
    assert_eq!(two_fields, 2, "x: x and y: y on one line are two findings");
}

#[test]
fn clippy_multi_line_original_that_does_not_add_up_is_left_out_with_a_note() {
    let line = CLIPPY
        .lines()
        .find(|l| l.contains("unused_imports"))
        .unwrap();
    // Corrupt the byte length of the multi-line span so the rebuilt text no
    // longer matches: the suggestion must be dropped, not guessed.
    let broken = line.replacen("\"byte_end\":242", "\"byte_end\":250", 1);
    assert_ne!(broken, line);
    let out = cargo::parse(&broken, "one.json");
    assert_eq!(out.findings.len(), 1);
    assert!(out.findings[0].suggestions.is_empty());
    assert!(
        out.notes[0].contains("one.json:1: unused_imports@src/lib.rs:7:5")
            && out.notes[0].contains("cannot be rebuilt"),
        "{:?}",
        out.notes
    );
}

#[test]
fn malformed_cargo_lines_are_rejected_by_line_and_the_rest_parse() {
    let first = CLIPPY.lines().next().unwrap();
    let text = format!("{first}\n{{\"reason\": \"compiler-message\"\nnot json\n[1,2]\n");
    let out = cargo::parse(&text, "mixed.json");
    assert_eq!(out.findings.len(), 1);
    let locations: Vec<&str> = out.rejected.iter().map(|r| r.location.as_str()).collect();
    assert_eq!(locations, ["mixed.json:2", "mixed.json:3", "mixed.json:4"]);
    assert!(out.rejected[0].message.contains("not a JSON object"));
}

#[test]
fn cargo_levels_codes_and_dimensions() {
    let err = r#"{"$message_type":"diagnostic","message":"mismatched types","code":{"code":"E0308"},"level":"error","spans":[{"file_name":"src/main.rs","byte_start":10,"byte_end":12,"line_start":2,"line_end":2,"column_start":5,"column_end":7,"is_primary":true,"text":[]}],"children":[],"rendered":"error[E0308]: mismatched types"}
{"$message_type":"diagnostic","message":"aborting due to 1 previous error","code":null,"level":"error","spans":[],"children":[],"rendered":"error: aborting"}
{"reason":"compiler-message","message":{"message":"vec init then push","code":{"code":"clippy::vec_init_then_push"},"level":"warning","spans":[{"file_name":"src/a.rs","line_start":1,"line_end":1,"column_start":1,"column_end":2,"is_primary":true}],"children":[]}}
{"reason":"compiler-message","message":{"message":"note only","code":null,"level":"note","spans":[],"children":[]}}
{"reason":"build-finished","success":false}"#;
    let out = cargo::parse(err, "rustc.json");
    assert!(out.rejected.is_empty(), "{:?}", out.rejected);
    let summary: Vec<(String, Severity, &str)> = out
        .findings
        .iter()
        .map(|f| (f.id.to_string(), f.severity, f.dimension_or_general()))
        .collect();
    assert_eq!(
        summary,
        [
            (
                "E0308@src/main.rs:2:5".to_owned(),
                Severity::High,
                "correctness"
            ),
            (
                "clippy::vec_init_then_push@src/a.rs:1:1".to_owned(),
                Severity::Medium,
                "performance"
            ),
        ]
    );
}

#[test]
fn sarif_sample_is_read() {
    let out = sarif::parse(SARIF, "sample.sarif").unwrap();
    insta::assert_snapshot!("sarif_findings", render(&out));
}

#[test]
fn sarif_with_sources_fills_originals() {
    let reader = lib_reader;
    let options = ParseOptions {
        sources: Some(&reader),
    };
    let out = sarif::parse_with(SARIF, "sample.sarif", &options).unwrap();
    let f = out
        .findings
        .iter()
        .find(|f| f.category.as_deref() == Some("example/single-char-pattern"))
        .unwrap();
    let e = &f.suggestions[0].edits[0];
    assert_eq!(e.original, "\",\"");
    assert!(!is_unanchored(e));
    assert!(
        !out.notes.iter().any(|n| n.contains("unanchored")),
        "{:?}",
        out.notes
    );
    let patched = apply_edits(LIB_RS, &[e]).unwrap();
    assert!(patched.contains("line.split(',')"));
}

#[test]
fn sarif_partial_fingerprints_are_kept_as_given() {
    let out = sarif::parse(SARIF, "sample.sarif").unwrap();
    let kept: Vec<_> = out
        .findings
        .iter()
        .filter(|f| !f.partial_fingerprints.is_empty())
        .map(|f| f.partial_fingerprints.clone())
        .collect();
    let expected = std::collections::BTreeMap::from([(
        "primaryLocationLineHash".to_owned(),
        "9c1f0b6a2d3e4f50:1".to_owned(),
    )]);
    // The two results carrying them are one finding reported twice
    // (merged).
    assert_eq!(kept, [expected]);
}

#[test]
fn sarif_errors_name_the_source_and_line() {
    let err = sarif::parse("{\n  \"runs\": [\n    {,\n", "broken.sarif").unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to read sarif findings from broken.sarif: invalid JSON at line 3, column 6: key must be a string"
    );
    let err = sarif::parse(r#"{"version":"2.1.0","runs":{}}"#, "x.sarif").unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to read sarif findings from x.sarif: `runs` is a object, expected an array"
    );
}

#[test]
fn rdjson_sample_is_read() {
    let out = rdjson::parse(RDJSON, "sample.rdjson").unwrap();
    insta::assert_snapshot!("rdjson_findings", render(&out));
}

#[test]
fn rdjson_with_sources_resolves_byte_columns_and_line_ranges() {
    let reader = lib_reader;
    let options = ParseOptions {
        sources: Some(&reader),
    };
    let out = rdjson::parse_with(RDJSON, "sample.rdjson", &options).unwrap();
    let originals: Vec<Vec<&str>> = out
        .findings
        .iter()
        .map(|f| {
            f.suggestions
                .iter()
                .flat_map(|s| s.edits.iter().map(|e| e.original.as_str()))
                .collect()
        })
        .collect();
    assert_eq!(
        originals,
        vec![
            vec!["words.len() == 0"],
            vec!["push_str", "\"!\""],
            vec![
                "/// Sums a slice with an index loop (needless_range_loop: not machine-applicable).\n"
            ],
            vec![],
        ]
    );
}

#[test]
fn rdjsonl_rejects_the_bad_line_and_reads_the_rest() {
    let out = rdjson::parse_lines(RDJSONL, "sample.rdjsonl");
    assert_eq!(out.findings.len(), 4);
    assert_eq!(out.rejected.len(), 1);
    assert_eq!(out.rejected[0].location, "sample.rdjsonl:3");
    assert_eq!(out.findings[0].category.as_deref(), Some("len-zero"));
}

#[test]
fn detection_uses_content_not_names() {
    let check = |text: &str, expected: InputFormat| {
        assert_eq!(detect_format(text, "findings.txt").unwrap(), expected);
    };
    check(CLIPPY, InputFormat::CargoJson);
    check(SARIF, InputFormat::Sarif);
    check(RDJSON, InputFormat::Rdjson);
    check(RDJSONL, InputFormat::Rdjsonl);
    check(r#"[{"id": "F1"}]"#, InputFormat::ReviewCycle);
    check(
        r#"{"session_id": "s", "findings": []}"#,
        InputFormat::ReviewCycle,
    );
    check(CLIPPY.lines().next().unwrap(), InputFormat::CargoJson);
    check(
        r#"{"message":"m","spans":[],"level":"warning"}"#,
        InputFormat::CargoJson,
    );
    // A stream whose first line is damaged is still recognised.
    check(&format!("garbage\n{CLIPPY}"), InputFormat::CargoJson);
}

#[test]
fn detection_errors_are_specific() {
    let msg = |text: &str| detect_format(text, "in.json").unwrap_err().to_string();
    assert_eq!(
        msg("  \n"),
        "failed to read findings from in.json: the input is empty"
    );
    assert!(msg("hello world").contains("the text is not JSON; it begins \"hello world\""));
    assert!(msg(r#"{"a": 1, "b": 2}"#).contains("a JSON object with keys a, b"));
    assert!(msg("42").contains("unrecognised format (a JSON number)"));
    assert!(
        msg("{\"runs\": [\n  {\n  oops")
            .starts_with("failed to read sarif findings from in.json: invalid JSON at line 3")
    );
}

#[test]
fn detect_and_parse_reads_each_format() {
    let count = |text: &str| detect_and_parse(text, "in").unwrap().findings.len();
    assert_eq!(count(CLIPPY), cargo::parse(CLIPPY, "x").findings.len());
    assert_eq!(count(SARIF), 4);
    assert_eq!(count(RDJSON), 4);
    assert_eq!(count(RDJSONL), 4);
}

#[test]
fn review_cycle_exports_are_read_through_their_reader() {
    let export = r#"{"session_id": "s1", "findings": [
        {"id": "F1", "title": "SQL built by concatenation", "severity": "high", "dimension": "security", "file": "src/db.rs", "line": "12"},
        {"id": "F2", "title": "SQL built by concatenation", "severity": "high", "dimension": "security", "file": "src/db.rs", "line": 12}
    ]}"#;
    let out = detect_and_parse(export, "export.json").unwrap();
    assert_eq!(out.format, InputFormat::ReviewCycle);
    let ids: Vec<&str> = out.findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["F1"]);
    assert_eq!(
        out.duplicates,
        [(FindingId::from("F2"), FindingId::from("F1"))]
    );
    // A bad finding is rejected on its own; the rest goes on.
    let out = detect_and_parse(
        r#"[{"title": "no id", "severity": "low"},
            {"id": "F1", "title": "ok", "severity": "low"},
            {"id": "F1", "title": "again", "severity": "low"}]"#,
        "bad.json",
    )
    .unwrap();
    let ids: Vec<&str> = out.findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["F1"]);
    let rejected: Vec<String> = out.rejected.iter().map(ToString::to_string).collect();
    assert_eq!(
        rejected,
        [
            "bad.json: findings[0]: has no `id`",
            "bad.json: findings[2]: reuses id `F1` of findings[1]",
        ]
    );
    // An unreadable export still fails as a whole.
    let err = detect_and_parse(r#"{"findings": 3}"#, "bad.json").unwrap_err();
    assert!(matches!(err, FormatError::ReviewCycle(_)), "{err}");
    assert!(err.to_string().contains("bad.json"), "{err}");
}

#[test]
fn uris_become_paths() {
    assert_eq!(sarif::uri_to_path("src/lib.rs"), "src/lib.rs");
    assert_eq!(
        sarif::uri_to_path("file:///home/a%20b/x.rs"),
        "/home/a b/x.rs"
    );
    assert_eq!(sarif::uri_to_path("file://host/share/x.rs"), "/share/x.rs");
    assert_eq!(sarif::uri_to_path("bad%zzescape"), "bad%zzescape");
}

/// A SARIF log of one result with one fix, at `uri` (and `base`), whose
/// deleted region may carry a snippet.
fn one_fix_sarif(uri: &str, base: Option<&str>, snippet: Option<&str>, bases: &str) -> String {
    let mut location = serde_json::json!({"uri": uri});
    if let Some(b) = base {
        location["uriBaseId"] = b.into();
    }
    let mut region =
        serde_json::json!({"startLine": 2, "startColumn": 5, "endLine": 2, "endColumn": 8});
    if let Some(text) = snippet {
        region["snippet"] = serde_json::json!({"text": text});
    }
    let bases: serde_json::Value = serde_json::from_str(bases).unwrap();
    serde_json::json!({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "lint"}},
        "originalUriBaseIds": bases,
        "results": [{
            "ruleId": "R1",
            "message": {"text": "m"},
            "locations": [{"physicalLocation": {"artifactLocation": location, "region": region}}],
            "fixes": [{"artifactChanges": [{"artifactLocation": location,
                "replacements": [{"deletedRegion": region, "insertedContent": {"text": "new"}}]}]}]
        }]
    }]})
    .to_string()
}

#[test]
fn a_snippet_does_not_cost_the_edit_its_byte_range() {
    let reader = |path: &str| (path == "src/a.py").then(|| "x = 1\ny = old\n".to_owned());
    let options = ParseOptions {
        sources: Some(&reader),
    };
    let log = one_fix_sarif("src/a.py", None, Some("old"), "{}");
    let out = sarif::parse_with(&log, "s.sarif", &options).unwrap();
    let e = &out.findings[0].suggestions[0].edits[0];
    assert_eq!((e.original.as_str(), e.byte_range), ("old", Some((10, 13))));
    // A snippet that is not what the file holds is not trusted.
    let log = one_fix_sarif("src/a.py", None, Some("odd"), "{}");
    let out = sarif::parse_with(&log, "s.sarif", &options).unwrap();
    assert!(out.findings[0].suggestions.is_empty());
    assert!(
        out.notes
            .iter()
            .any(|n| n.contains("differs from the file")),
        "{:?}",
        out.notes
    );
}

#[test]
fn uri_base_ids_resolve_to_repository_paths() {
    let file = |uri: &str, base: Option<&str>, bases: &str| {
        let out = sarif::parse(&one_fix_sarif(uri, base, None, bases), "s.sarif").unwrap();
        (
            out.findings[0].file.clone().unwrap(),
            out.findings[0].suggestions[0].edits[0].file.clone(),
        )
    };
    let both = |s: &str| (s.to_owned(), s.to_owned());
    // The producer's own checkout (a CI machine's) stands for the root.
    let ci = r#"{"%SRCROOT%": {"uri": "file:///home/runner/work/app/"}}"#;
    assert_eq!(file("src/a.py", Some("%SRCROOT%"), ci), both("src/a.py"));
    assert_eq!(file("src/a.py", Some("%SRCROOT%"), "{}"), both("src/a.py"));
    assert_eq!(file("%SRCROOT%/src/a.py", None, "{}"), both("src/a.py"));
    // A relative base is a folder of the repository, nested bases too.
    let nested = r#"{"%SRCROOT%": {"uri": "file:///w/"}, "PKG": {"uri": "pkg/", "uriBaseId": "SUB"},
                     "SUB": {"uri": "libs/", "uriBaseId": "%SRCROOT%"}}"#;
    assert_eq!(file("a.py", Some("PKG"), nested), both("libs/pkg/a.py"));
    // An absolute URI stays absolute: the caller makes it relative.
    assert_eq!(file("file:///w/src/a.py", None, ci), both("/w/src/a.py"));
}

/// One rejection's text, for the size tests.
fn rejections(out: &ParseOutcome) -> Vec<String> {
    out.rejected.iter().map(ToString::to_string).collect()
}

/// In every format, a finding with a field over its limit is rejected on its
/// own, naming its place, id, field, size and limit; the same field at
/// exactly its limit is kept.
#[test]
fn every_format_rejects_an_oversized_field_on_its_own() {
    use orchestrator_core::limits::{MAX_NAME_BYTES, MAX_TEXT_BYTES};
    let x = |n: usize| "x".repeat(n);
    let review_cycle = |n: usize| {
        serde_json::json!([
            {"id": "BIG", "title": "t", "severity": "low", "description": x(n)},
            {"id": "OK", "title": "u", "severity": "low"}
        ])
        .to_string()
    };
    let sarif = |n: usize| {
        serde_json::json!({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "t"}},
            "results": [
                {"ruleId": "R1", "message": {"text": x(n)},
                 "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a.rs"}, "region": {"startLine": 1}}}]},
                {"ruleId": "R2", "message": {"text": "ok"},
                 "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a.rs"}, "region": {"startLine": 2}}}]}
            ]}]})
        .to_string()
    };
    let diagnostic = |snippet: &str, line: u32| {
        serde_json::json!({"message": "m", "original_output": snippet,
            "location": {"path": "a.rs", "range": {"start": {"line": line}}}})
    };
    let rdjson = |n: usize| {
        serde_json::json!({"source": {"name": "lint"},
            "diagnostics": [diagnostic(&x(n), 1), diagnostic("ok", 2)]})
        .to_string()
    };
    let rdjsonl = |n: usize| format!("{}\n{}\n", diagnostic(&x(n), 1), diagnostic("ok", 2));
    let cargo = |n: usize| {
        let line = |message: &str, l: u32| {
            serde_json::json!({"reason": "compiler-message", "message": {
                "message": message, "level": "warning", "code": {"code": "clippy::x"},
                "spans": [{"file_name": "a.rs", "line_start": l, "column_start": 1,
                           "is_primary": true, "text": []}], "children": []}})
        };
        format!("{}\n{}\n", line(&x(n), 1), line("ok", 2))
    };
    type Make<'a> = &'a dyn Fn(usize) -> String;
    let cases: [(&str, Make<'_>, usize, &str, &str); 5] = [
        (
            "review-cycle",
            &review_cycle,
            MAX_TEXT_BYTES,
            "in: findings[0]",
            "finding `BIG`: field `description`",
        ),
        (
            "sarif",
            &sarif,
            MAX_NAME_BYTES,
            "in: runs[0].results[0]",
            "finding `R1@a.rs:1:1`: field `title`",
        ),
        (
            "rdjson",
            &rdjson,
            MAX_TEXT_BYTES,
            "in: diagnostics[0]",
            "finding `lint@a.rs:1:1`: field `description`",
        ),
        (
            "rdjsonl",
            &rdjsonl,
            MAX_TEXT_BYTES,
            "in:1",
            "finding `rdjson@a.rs:1:1`: field `description`",
        ),
        (
            "cargo",
            &cargo,
            MAX_NAME_BYTES,
            "in:1",
            "finding `clippy::x@a.rs:1:1`: field `title`",
        ),
    ];
    for (format, make, limit, location, what) in cases {
        let at = detect_and_parse(&make(limit), "in").unwrap();
        assert_eq!(
            (at.findings.len(), at.rejected.len()),
            (2, 0),
            "{format} at the limit"
        );
        let over = detect_and_parse(&make(limit + 1), "in").unwrap();
        assert_eq!(
            over.findings.len(),
            1,
            "{format}: the other finding is kept"
        );
        assert_eq!(
            rejections(&over),
            [format!(
                "{location}: {what}: is {} bytes, over the limit of {limit} bytes ({} KiB)",
                limit + 1,
                limit / 1024
            )],
            "{format}"
        );
    }
}

/// A 10 MB field is rejected fast: the check adds nothing to the parse.
#[test]
fn a_ten_megabyte_field_is_rejected_in_linear_time() {
    let huge = "x".repeat(10 << 20);
    let export = serde_json::json!([
        {"id": "F1", "title": "t", "severity": "low", "description": huge},
        {"id": "F2", "title": huge, "severity": "low"},
        {"id": "F3", "title": "t", "severity": "low", "recommendations": ["ok", huge]},
        {"id": "F4", "title": "ok", "severity": "low"}
    ])
    .to_string();
    let started = std::time::Instant::now();
    let out = detect_and_parse(&export, "huge.json").unwrap();
    let took = started.elapsed();
    assert_eq!(out.findings.len(), 1);
    let rejected = rejections(&out);
    assert_eq!(rejected.len(), 3);
    assert!(
        rejected[0].contains("findings[0]: finding `F1`: field `description`: is 10485760 bytes"),
        "{}",
        rejected[0]
    );
    assert!(
        rejected[1].contains("findings[1]: finding `F2`: field `title`: is 10485760 bytes"),
        "{}",
        rejected[1]
    );
    assert!(
        rejected[2].contains("field `recommendations`: item 1 is 10485760 bytes"),
        "{}",
        rejected[2]
    );
    assert!(rejected.iter().all(|r| r.len() < 300), "{rejected:?}");
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
}

/// A line or column that is not a number rejects the entry instead of being
/// read as "no line" (`"three"` in the bad-input corpus).
#[test]
fn a_line_of_the_wrong_type_rejects_the_entry() {
    let out = rdjson::parse_lines(
        concat!(
            r#"{"message": "a", "location": {"path": "a.rs", "range": {"start": {"line": "three"}}}}"#,
            "\n",
            r#"{"message": "b", "location": {"path": "a.rs", "range": {"start": {"line": 2, "column": -1}}}}"#,
            "\n",
            r#"{"message": "c", "location": {"path": "a.rs", "range": {"start": {"line": 0}}}}"#,
            "\n",
            r#"{"message": "d", "location": {"path": "a.rs", "range": {"start": {"line": 4, "column": null}}}}"#,
            "\n",
        ),
        "x.jsonl",
    );
    assert_eq!(
        rejections(&out),
        [
            "x.jsonl:1: `location.range.start.line` is a string, expected a number",
            "x.jsonl:2: `location.range.start.column` is -1, expected a non-negative integer",
        ]
    );
    let lines: Vec<Option<u32>> = out.findings.iter().map(|f| f.line).collect();
    assert_eq!(lines, [None, Some(4)]);

    let sarif = serde_json::json!({"runs": [{"results": [
        {"ruleId": "R", "message": {"text": "m"},
         "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a.rs"}, "region": {"startLine": "3"}}}]}
    ]}]})
    .to_string();
    assert_eq!(
        rejections(&sarif::parse(&sarif, "x.sarif").unwrap()),
        ["x.sarif: runs[0].results[0]: `region.startLine` is a string, expected a number"]
    );
}

/// A SARIF message string is filled in one pass and stops at the title's
/// limit: a template repeating `{0}` with a large argument stays cheap.
#[test]
fn sarif_message_arguments_are_filled_in_one_bounded_pass() {
    let log = |template: &str, args: Vec<String>| {
        serde_json::json!({"runs": [{"tool": {"driver": {"name": "t", "rules": [
            {"id": "R", "messageStrings": {"m": {"text": template}}}]}},
            "results": [{"ruleId": "R", "message": {"id": "m", "arguments": args}}]}]})
        .to_string()
    };
    let out = sarif::parse(
        &log(
            "{0} and {1}, {0}; {2} {x} {",
            vec!["a".into(), "{0}".into()],
        ),
        "s",
    )
    .unwrap();
    // Arguments are not filled again; a missing one stays as it is.
    assert_eq!(out.findings[0].title, "a and {0}, a; {2} {x} {");

    let template = "{0} ".repeat(20_000);
    let started = std::time::Instant::now();
    let out = sarif::parse(&log(&template, vec!["y".repeat(1 << 20)]), "s").unwrap();
    let took = started.elapsed();
    assert!(out.findings.is_empty());
    assert!(
        rejections(&out)[0].contains("field `title`: is 1048576 bytes"),
        "{:?}",
        out.rejected
    );
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
}

/// rustc's snippet of a long span is cut to the free-text limit rather than
/// getting the finding rejected: it is a quote of the file, not input text.
#[test]
fn a_long_cargo_snippet_is_cut_not_rejected() {
    let text: Vec<serde_json::Value> = (0..3000)
        .map(|i| serde_json::json!({"text": format!("    let v{i} = {i}; // {}", "é".repeat(20)), "highlight_start": 1, "highlight_end": 2}))
        .collect();
    let line = serde_json::json!({"reason": "compiler-message", "message": {
        "message": "this function has too many lines (3000/100)", "level": "warning",
        "code": {"code": "clippy::too_many_lines"},
        "spans": [{"file_name": "src/lib.rs", "line_start": 1, "line_end": 3000, "column_start": 1,
                   "is_primary": true, "text": text}], "children": []}});
    let out = cargo::parse(&line.to_string(), "clippy.json");
    assert!(out.rejected.is_empty(), "{:?}", out.rejected);
    let snippet = out.findings[0].snippet.as_deref().unwrap();
    assert!(
        snippet.len() <= orchestrator_core::limits::MAX_TEXT_BYTES,
        "{}",
        snippet.len()
    );
    assert!(snippet.starts_with("    let v0 = 0;"));
    assert!(
        snippet.ends_with("more bytes)"),
        "{}",
        &snippet[snippet.len() - 60..]
    );
}

/// Every reader, on any text.
fn all_readers(text: &str) {
    let reader = |_: &str| Some("fn main() {}\nlet x = 1;\n".to_owned());
    let options = ParseOptions {
        sources: Some(&reader),
    };
    let _ = cargo::parse(text, "p");
    let _ = sarif::parse_with(text, "p", &options);
    let _ = sarif::parse(text, "p");
    let _ = rdjson::parse_with(text, "p", &options);
    let _ = rdjson::parse_lines_with(text, "p", &options);
    let _ = detect_and_parse_with(text, "p", &options);
}

/// Replaces the byte range `at..at+len` of `base` (snapped to char
/// boundaries) with `insert`.
fn mutate(base: &str, at: usize, len: usize, insert: &str) -> String {
    let mut start = at % (base.len() + 1);
    while !base.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + len).min(base.len());
    while !base.is_char_boundary(end) {
        end += 1;
    }
    format!("{}{}{}", &base[..start], insert, &base[end..])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn readers_never_panic_on_arbitrary_text(text in "\\PC{0,300}") {
        all_readers(&text);
    }

    #[test]
    fn readers_never_panic_on_mutated_fixtures(
        which in 0usize..4,
        at in 0usize..100_000,
        len in 0usize..40,
        insert in prop::sample::select(vec![
            "", "0", "-1", "null", "\"\"", "{}", "[]", "99999999999", "\u{e9}", "\n", ",", "\"x\":",
        ]),
    ) {
        let base = [CLIPPY, SARIF, RDJSON, RDJSONL][which];
        all_readers(&mutate(base, at, len, insert));
    }

    #[test]
    fn numeric_fields_at_extremes_never_panic(
        line in prop::sample::select(vec![0u64, 1, 46, 77, 4_294_967_295, 4_294_967_296]),
        column in prop::sample::select(vec![0u64, 1, 8, 24, 4_294_967_295, 18_446_744_073_709_551_615]),
    ) {
        let d = format!(
            r#"{{"message":"m","location":{{"path":"src/lib.rs","range":{{"start":{{"line":{line},"column":{column}}}}}}},"suggestions":[{{"range":{{"start":{{"line":{line},"column":{column}}},"end":{{"line":{line},"column":{column}}}}},"text":"x"}}]}}"#
        );
        all_readers(&d);
        let reader = lib_reader;
        let options = ParseOptions { sources: Some(&reader) };
        let _ = rdjson::parse_lines_with(&d, "p", &options);
    }
}

#[test]
fn source_cache_reads_each_file_once() {
    let calls = std::cell::RefCell::new(HashMap::<String, u32>::new());
    let reader = |p: &str| {
        *calls.borrow_mut().entry(p.to_owned()).or_default() += 1;
        lib_reader(p)
    };
    let options = ParseOptions {
        sources: Some(&reader),
    };
    let _ = rdjson::parse_with(RDJSON, "sample.rdjson", &options).unwrap();
    assert_eq!(calls.borrow().get("src/lib.rs"), Some(&1));
}
