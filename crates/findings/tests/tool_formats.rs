//! The readers of ruff's and ESLint's own output, on what the real tools
//! wrote (`tests/data/tools/`: ruff 0.17.6 `--output-format json` and
//! `sarif`, ESLint 9.39.5 `-f json`, over the sources in `py/` and `js/`,
//! which hold a byte order mark, CRLF line ends and an astral character
//! before a fixed range; `py-fixed/` and `js-fixed/` are what `ruff check
//! --fix` and `eslint --fix` made of them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;

use orchestrator_core::edit::{EditHistory, apply_mapped};
use orchestrator_core::finding::Finding;
use orchestrator_findings::formats::{
    InputFormat, ParseOptions, ParseOutcome, detect_and_parse_with,
};

const RUFF_JSON: &str = include_str!("data/tools/ruff.json");
const RUFF_SARIF: &str = include_str!("data/tools/ruff.sarif");
const ESLINT_JSON: &str = include_str!("data/tools/eslint.json");

/// The sources the tools read, by the absolute path they reported.
fn source(path: &str) -> Option<String> {
    let name = path.strip_prefix("/tmp/fixture/")?;
    let text = match name {
        "py/app.py" => include_str!("data/tools/py/app.py"),
        "py/bom_crlf.py" => include_str!("data/tools/py/bom_crlf.py"),
        "js/lib.js" => include_str!("data/tools/js/lib.js"),
        "js/bom.js" => include_str!("data/tools/js/bom.js"),
        "js/parts.js" => include_str!("data/tools/js/parts.js"),
        _ => return None,
    };
    Some(text.to_owned())
}

fn read(text: &str, name: &str) -> ParseOutcome {
    let reader = source;
    detect_and_parse_with(
        text,
        name,
        &ParseOptions {
            sources: Some(&reader),
        },
    )
    .unwrap()
}

/// One line per finding in fix order: id, and its edits.
fn render(out: &ParseOutcome) -> String {
    let mut s = format!("format: {}\n", out.format);
    for f in out.findings_in_fix_order() {
        let _ = writeln!(s, "- {} [{}] {:?}", f.id, f.severity, f.title);
        for sug in &f.suggestions {
            for e in &sug.edits {
                let _ = writeln!(
                    s,
                    "    {}:{}:{}-{}:{} {:?} -> {:?}",
                    e.file.trim_start_matches("/tmp/fixture/"),
                    e.start_line,
                    e.start_column,
                    e.end_line,
                    e.end_column,
                    e.original,
                    e.replacement
                );
            }
        }
    }
    for n in &out.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

fn edit_of<'f>(findings: &'f [Finding], id: &str) -> &'f orchestrator_core::finding::TextEdit {
    let f = findings.iter().find(|f| f.id.as_str() == id).unwrap();
    &f.suggestions[0].edits[0]
}

#[test]
fn ruff_json_keeps_only_the_fixes_ruff_check_fix_applies() {
    let out = read(RUFF_JSON, "ruff.json");
    assert_eq!(out.format, InputFormat::RuffJson);
    assert_eq!(out.findings.len(), 16);
    assert!(out.rejected.is_empty(), "{:?}", out.rejected);
    // E711, SIM108 and C408 carry unsafe fixes, E702 none.
    let fixable: Vec<&str> = out
        .findings
        .iter()
        .filter(|f| !f.suggestions.is_empty())
        .filter_map(|f| f.category.as_deref())
        .collect();
    assert_eq!(
        fixable,
        [
            "I001", "F401", "F401", "RET505", "UP032", "E401", "I001", "F401", "F401"
        ]
    );
    let e711 = out
        .findings
        .iter()
        .find(|f| f.category.as_deref() == Some("E711"))
        .unwrap();
    assert!(
        e711.recommendations
            .iter()
            .any(|r| r.contains("unsafe fix, which `ruff check --fix` does not apply")),
        "{:?}",
        e711.recommendations
    );
    insta::assert_snapshot!("ruff_json", render(&out));
}

#[test]
fn ruff_columns_count_code_points_after_the_bom_in_json_and_sarif() {
    // `x = "é😀" ; y = dict()`: ruff reports `dict()` at column 16 (code
    // points); UTF-16 would be 17 and UTF-8 bytes 20.
    let json = read(RUFF_JSON, "ruff.json");
    let sarif = read(RUFF_SARIF, "ruff.sarif");
    assert_eq!(sarif.format, InputFormat::Sarif);
    let c408 = |out: &ParseOutcome| -> Finding {
        out.findings
            .iter()
            .find(|f| f.category.as_deref() == Some("C408") && f.line == Some(2))
            .cloned()
            .unwrap()
    };
    // The JSON carries no safe fix for C408; SARIF carries every fix.
    assert!(c408(&json).suggestions.is_empty());
    let edits = &c408(&sarif).suggestions[0].edits;
    let parts: Vec<(&str, u32, u32)> = edits
        .iter()
        .map(|e| (e.original.as_str(), e.start_line, e.start_column))
        .collect();
    assert_eq!(parts, [("dict(", 2, 16), (")", 2, 21)]);
    // The F401 fixes on line 1 (after the BOM) delete `import os, sys\r\n`.
    let f401 = edit_of(&json.findings, "F401@/tmp/fixture/py/bom_crlf.py:1:8");
    assert_eq!(f401.original, "import os, sys\r\n");
    assert_eq!(f401.byte_range, Some((3, 19)));
}

#[test]
fn ruff_fix_order_is_ruffs_not_the_emitted_one() {
    let out = read(RUFF_JSON, "ruff.json");
    let order: Vec<String> = out
        .findings_in_fix_order()
        .iter()
        .filter(|f| f.file.as_deref() == Some("/tmp/fixture/py/bom_crlf.py"))
        .filter(|f| !f.suggestions.is_empty())
        .map(|f| f.id.to_string())
        .collect();
    // All four fixes start at 1:1: AST rules (E401, then the two F401 in
    // emitted order) before the import sorter (I001), as ruff's
    // `check_path` collects them; the output lists E401, I001, F401, F401.
    assert_eq!(
        order,
        [
            "E401@/tmp/fixture/py/bom_crlf.py:1:1",
            "F401@/tmp/fixture/py/bom_crlf.py:1:8",
            "F401@/tmp/fixture/py/bom_crlf.py:1:12",
            "I001@/tmp/fixture/py/bom_crlf.py:1:1",
        ]
    );
}

#[test]
fn eslint_ranges_are_utf16_offsets_into_the_text_without_its_bom() {
    let out = read(ESLINT_JSON, "eslint.json");
    assert_eq!(out.format, InputFormat::EslintJson);
    assert_eq!(out.findings.len(), 11);
    let second_var = edit_of(&out.findings, "no-var@/tmp/fixture/js/bom.js:1:16");
    assert_eq!(second_var.original, "var");
    assert_eq!(second_var.byte_range, Some((21, 24)));
    let dot = edit_of(&out.findings, "dot-notation@/tmp/fixture/js/bom.js:1:30");
    assert_eq!(dot.original, "[\"k\"]");
    // Line 2 after a CRLF: [57, 60] in UTF-16 units of the BOM-less text.
    let third = edit_of(&out.findings, "no-var@/tmp/fixture/js/bom.js:2:18");
    assert_eq!((third.start_line, third.start_column), (2, 18));
    assert_eq!(third.original, "var");
    insta::assert_snapshot!("eslint_json", render(&out));
}

#[test]
fn eslint_json_places_fixes_from_its_own_source_without_a_reader() {
    let out = orchestrator_findings::formats::detect_and_parse(ESLINT_JSON, "eslint.json").unwrap();
    let with_fix = out
        .findings
        .iter()
        .filter(|f| !f.suggestions.is_empty())
        .count();
    assert_eq!(with_fix, 11, "every result carries `source`");
}

/// One pass of the tool, as review-fix's builtin agent makes it: each
/// finding's fix in fix order, placed through the file's edit history, a
/// fix that overlaps an applied one left for the next pass.
fn one_pass(out: &ParseOutcome, file: &str) -> (String, Vec<String>) {
    let mut text = source(file).unwrap();
    let mut history = EditHistory::new();
    let mut applied = Vec::new();
    for f in out.findings_in_fix_order() {
        let Some(s) = f.suggestions.first() else {
            continue;
        };
        if s.edits[0].file != file {
            continue;
        }
        let edits: Vec<_> = s.edits.iter().collect();
        if let Ok(done) = apply_mapped(&text, &history, &edits) {
            text = done.text;
            history.record(&done.applied);
            applied.push(f.category.clone().unwrap_or_default());
        }
    }
    (text, applied)
}

#[test]
fn eslint_order_lets_the_enclosing_fix_win_as_eslint_fix_does() {
    let out = read(ESLINT_JSON, "eslint.json");
    let (text, applied) = one_pass(&out, "/tmp/fixture/js/lib.js");
    // no-else-return's fix spans the whole function (from offset 48) and
    // starts before the `var out` and the concatenation inside it: in
    // ESLint's order it wins, and those two wait for the next pass.
    assert_eq!(
        applied,
        [
            "no-var",
            "no-else-return",
            "object-shorthand",
            "object-shorthand",
            "object-shorthand"
        ]
    );
    assert!(text.contains("    var out = a + '-' + b;"), "{text}");
    assert!(!text.contains("} else {"), "{text}");
}
