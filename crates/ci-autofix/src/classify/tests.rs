use super::*;
use proptest::prelude::*;

const TRIVIAL: Classification = Classification::Mechanical(SubClass::Trivial);
const NON_TRIVIAL: Classification = Classification::Mechanical(SubClass::NonTrivial);

/// Classifies `log` and checks the class and the rules of the evidence.
fn check(log: &str, class: Classification, rules: &[&str]) {
    let report = classify(log);
    let got: Vec<&str> = report.evidence.iter().map(|e| e.rule.as_str()).collect();
    assert_eq!(
        (report.classification, got.as_slice()),
        (class, rules),
        "log:\n{log}"
    );
}

#[test]
fn formatter_diff_lines_are_never_semantic_evidence() {
    check(
        "Diff in /w/src/lib.rs:6:\n-    if x==0 { panic!(\"expected 1, got 0\") }\n+    if x == 0 {\n+        panic!(\"expected 1, got 0\")\n+    }\n     assert_eq!(result, 4);\n",
        TRIVIAL,
        &["rustfmt"],
    );
    check(
        "--- a.py\n+++ a.py\n@@ -1,2 +1,2 @@\n-assert a==b, 'AssertionError: x'\n+assert a == b, \"AssertionError: x\"\nwould reformat a.py\n",
        TRIVIAL,
        &["black"],
    );
}

#[test]
fn gutter_snippets_are_never_semantic_evidence() {
    check(
        "error: length comparison to zero\n --> src/lib.rs:2:8\n  |\n2 |     assert!(v.len() == 0, \"expected empty, got {v:?}\");\n  |             ^^^^^^^^^^^^\n  = note: `-D clippy::len-zero` implied by `-D warnings`\n",
        NON_TRIVIAL,
        &["clippy"],
    );
}

#[test]
fn the_most_severe_class_anywhere_wins() {
    // Format first, lint after: the seed would have said trivial.
    check(
        "Diff in /w/src/lib.rs:1:\n-a\n+b\n\nerror: unused variable: `count`\n",
        NON_TRIVIAL,
        &["rustfmt", "rustc-lint"],
    );
    // A format diff in one job and a failing test in another.
    check(
        "lint\tfmt\t2026-05-07T10:00:00.0000000Z would reformat a.py\ntest\tpytest\t2026-05-07T10:01:00.0000000Z FAILED tests/test_a.py::test_x - assert 1 == 2\n",
        Classification::Semantic,
        &["black", "pytest"],
    );
    // Unknown beats mechanical, semantic beats unknown, infrastructure
    // beats all: a test that failed because the network did is not a bug
    // (re-run once, then escalated with the evidence).
    check(
        "src/a.js\n  1:1  error  Missing semicolon  semi\nnpm error code E404\n",
        Classification::Unknown,
        &["eslint:semi", "dependency-resolution"],
    );
    check(
        "curl: (6) Could not resolve host: example.invalid\n--- FAIL: TestFetch (0.01s)\n",
        Classification::Infrastructure,
        &["network-dns", "go-test"],
    );
}

#[test]
fn a_killed_or_lost_runner_is_infrastructure_with_its_evidence() {
    check(
        "running 2 tests\nerror: test failed, to rerun pass `--lib`\n  process didn't exit successfully: `target/debug/deps/t-1` (signal: 9, SIGKILL: kill)\n##[error]Process completed with exit code 137.\n",
        Classification::Infrastructure,
        &["cargo-test", "ci-infrastructure", "ci-infrastructure"],
    );
    check(
        "##[error]The runner has received a shutdown signal.\n",
        Classification::Infrastructure,
        &["ci-infrastructure"],
    );
    check(
        "##[error]No space left on device\n",
        Classification::Infrastructure,
        &["ci-infrastructure"],
    );
}

#[test]
fn failing_tests_are_named_from_the_log() {
    let log = "test a::b ... FAILED\ntest a::c ... ok\nFAILED tests/t.py::test_x - assert 1\n--- FAIL: TestY (0.00s)\nnot ok 3 - adds\ntest a::b ... FAILED\n";
    assert_eq!(
        failing_tests(log),
        ["a::b", "tests/t.py::test_x", "TestY", "adds"]
    );
}

#[test]
fn nothing_recognised_is_unknown_without_evidence() {
    check(
        "Run ./build.sh\nsomething went wrong\n##[error]Process completed with exit code 1.\n",
        Classification::Unknown,
        &[],
    );
    check("", Classification::Unknown, &[]);
}

#[test]
fn seed_families() {
    let cases: &[(&str, Classification, &str)] = &[
        (
            "main.go:3:1: File is not `gofmt`-ed with `-s` (gofmt)",
            TRIVIAL,
            "gofmt",
        ),
        (
            "x.go:5: File is not `goimports`-ed (goimports)",
            TRIVIAL,
            "goimports",
        ),
        (
            "ws.py:2:13: W291 trailing whitespace",
            TRIVIAL,
            "flake8:W291",
        ),
        (
            "ERROR: /w/a.py Imports are incorrectly sorted and/or formatted.",
            TRIVIAL,
            "import-order",
        ),
        (
            "a.go:4:2: Error return value of `f.Close` is not checked (errcheck)",
            NON_TRIVIAL,
            "errcheck",
        ),
        (
            "a.go:9:2: x declared and not used",
            NON_TRIVIAL,
            "go-unused",
        ),
        (
            "a.go:88:2: this value of err is never used (SA4006)",
            NON_TRIVIAL,
            "staticcheck",
        ),
        ("a.go:10:18: undefined: offset", NON_TRIVIAL, "go-undefined"),
        (
            "a.go:3:8: no required module provides package example.com/x; to add it:",
            NON_TRIVIAL,
            "go-missing-package",
        ),
        ("WARNING: DATA RACE", Classification::Semantic, "data-race"),
        (
            "panic: runtime error: index out of range [0] with length 0",
            Classification::Semantic,
            "panic",
        ),
        (
            "--- FAIL: TestAdd (0.00s)",
            Classification::Semantic,
            "go-test",
        ),
        (
            "    calc_test.go:7: expected 4, got 0",
            Classification::Semantic,
            "assertion",
        ),
        (
            "fatal error: all goroutines are asleep - deadlock!",
            Classification::Semantic,
            "deadlock",
        ),
    ];
    for &(line, class, rule) in cases {
        check(line, class, &[rule]);
    }
}

#[test]
fn extended_tool_chains() {
    let cases: &[(&str, Classification, &str)] = &[
        (
            "error[E0308]: mismatched types",
            Classification::Semantic,
            "rustc:E0308",
        ),
        (
            "error[E0425]: cannot find value `offset` in this scope",
            NON_TRIVIAL,
            "rustc:E0425",
        ),
        (
            "thread 'tests::adds' (14657) panicked at src/lib.rs:15:9:",
            Classification::Semantic,
            "rust-panic",
        ),
        (
            "test tests::adds ... FAILED",
            Classification::Semantic,
            "cargo-test",
        ),
        (
            "a.py:6: error: Incompatible return value type (got \"str\", expected \"int\")  [return-value]",
            Classification::Semantic,
            "mypy:return-value",
        ),
        (
            "a.py:1: error: Name \"x\" is not defined  [name-defined]",
            NON_TRIVIAL,
            "mypy:name-defined",
        ),
        (
            "F401 [*] `os` imported but unused",
            NON_TRIVIAL,
            "ruff:F401",
        ),
        (
            "a.ts(4,9): error TS2322: Type 'string' is not assignable to type 'number'.",
            Classification::Semantic,
            "tsc:TS2322",
        ),
        (
            "[warn] Code style issues found in the above file. Run Prettier with --write to fix.",
            TRIVIAL,
            "prettier",
        ),
        (
            "  4:9  error  'unused' is assigned a value but never used  no-unused-vars",
            NON_TRIVIAL,
            "eslint:no-unused-vars",
        ),
        (
            "not ok 1 - adds numbers",
            Classification::Semantic,
            "node-test",
        ),
        (
            "ERROR: No matching distribution found for nonexistent-pkg-xyz",
            Classification::Unknown,
            "dependency-resolution",
        ),
        (
            "error: no matching package named `zz9` found",
            Classification::Unknown,
            "dependency-resolution",
        ),
        (
            "E   ModuleNotFoundError: No module named 'yaml'",
            NON_TRIVIAL,
            "missing-module",
        ),
    ];
    for &(line, class, rule) in cases {
        check(line, class, &[rule]);
    }
}

#[test]
fn escapes_and_gh_prefixes_do_not_hide_matches() {
    let log = "build\tRun tests\t2026-05-07T10:11:12.1234567Z \u{feff}\u{1b}[1m\u{1b}[91merror[E0308]\u{1b}[0m\u{1b}(B\u{1b}[m: mismatched types\n";
    let report = classify(log);
    assert_eq!(report.classification, Classification::Semantic);
    assert_eq!(report.evidence[0].text, "error[E0308]: mismatched types");
    assert_eq!(report.evidence[0].job.as_deref(), Some("build"));
    assert_eq!(report.evidence[0].line, 1);
}

#[test]
fn text_and_json_outputs() {
    let report =
        classify("ws.py:2:13: W291 trailing whitespace\nerror: unused import: `std::fmt`\n");
    assert_eq!(
        report.to_text(),
        "classification=mechanical\nsub_class=non-trivial\n"
    );
    insta::assert_json_snapshot!(report.to_json(), @r#"
    {
      "classification": "mechanical",
      "evidence": [
        {
          "line": 1,
          "rule": "flake8:W291",
          "text": "ws.py:2:13: W291 trailing whitespace"
        },
        {
          "line": 2,
          "rule": "rustc-lint",
          "text": "error: unused import: `std::fmt`"
        }
      ],
      "sub_class": "non-trivial"
    }
    "#);
    // The serde form is the same object.
    assert_eq!(serde_json::to_value(&report).unwrap(), report.to_json());
    assert_eq!(report.deciding_evidence().len(), 1);
}

#[test]
fn evidence_is_capped_but_every_line_counts() {
    let mut log = "ws.py:2:13: W291 trailing whitespace\n".repeat(MAX_EVIDENCE + 10);
    log.push_str("--- FAIL: TestLast (0.00s)\n");
    let report = classify(&log);
    assert_eq!(report.evidence.len(), MAX_EVIDENCE);
    assert_eq!(report.classification, Classification::Semantic);
    let long = format!("error[E0308]: {}", "é".repeat(400));
    assert!(classify(&long).evidence[0].text.chars().count() <= MAX_EVIDENCE_TEXT + 1);
}

#[test]
fn several_logs_combine_and_an_unreadable_one_is_unknown() {
    let fmt = "would reformat a.py\n";
    let lint = "a.py:1:1: F401 'os' imported but unused\n";
    assert_eq!(classify_many([fmt, lint]).classification, NON_TRIVIAL);
    assert_eq!(classify_many([fmt]).classification, TRIVIAL);
    assert_eq!(
        classify_many([fmt, "segmentation fault\n"]).classification,
        Classification::Unknown
    );
    assert_eq!(classify_many([]).classification, Classification::Unknown);
}

/// Lines with a known level, none of which opens or continues a diff.
const POOL: &[(&str, Option<Level>)] = &[
    ("would reformat a.py", Some(Level::Trivial)),
    (
        "main.go:1: File is not `gofmt`-ed (gofmt)",
        Some(Level::Trivial),
    ),
    (
        "a.py:1:1: F401 'os' imported but unused",
        Some(Level::NonTrivial),
    ),
    ("a.go:2:2: undefined: x", Some(Level::NonTrivial)),
    ("npm error code E404", Some(Level::Unknown)),
    (
        "dial tcp: lookup proxy.golang.org: no such host",
        Some(Level::Infrastructure),
    ),
    ("--- FAIL: TestX (0.00s)", Some(Level::Semantic)),
    ("error[E0308]: mismatched types", Some(Level::Semantic)),
    ("Compiling foo v0.1.0", None),
    ("##[error]Process completed with exit code 1.", None),
    ("  |     panic!(\"expected 1, got 2\")", None),
];

proptest! {
    /// The class of a log is the most severe level of its lines, whatever
    /// their order, prefixes and colours; adding lines never lowers it.
    #[test]
    fn class_is_the_maximum_of_the_lines(
        picks in proptest::collection::vec((0..POOL.len(), any::<bool>(), any::<bool>()), 0..30)
    ) {
        let mut log = String::new();
        let mut top: Option<Level> = None;
        for &(i, gh, colour) in &picks {
            let (line, level) = POOL[i];
            if gh {
                log.push_str("job\tstep\t2026-05-07T10:11:12.1234567Z ");
            }
            if colour {
                log.push_str("\u{1b}[31m");
            }
            log.push_str(line);
            if colour {
                log.push_str("\u{1b}[0m\u{1b}(B");
            }
            log.push('\n');
            top = top.max(level);
        }
        let report = classify(&log);
        prop_assert_eq!(report.classification, top.map_or(Classification::Unknown, Level::classification));
        prop_assert_eq!(report.evidence.len(), picks.iter().filter(|p| POOL[p.0].1.is_some()).count());
    }

    /// Stripping never panics and leaves no escape character behind.
    #[test]
    fn stripping_removes_every_escape(s in "(\\PC|\u{1b}|\u{9b}|\u{7}|\r|\n|\\[|\\]|;|[0-9]){0,80}") {
        let out = clean::strip_escapes(&s);
        let bad = ['\u{1b}', '\u{9b}', '\r'];
        prop_assert!(!out.contains(bad), "escape left in {:?}", out);
    }
}

/// The first matching rule, each rule tried on its own (what [`match_line`]
/// did before its one-pass prefilter).
fn match_line_rule_by_rule(text: &str, quoted: bool) -> Option<String> {
    rules::RULES
        .iter()
        .filter(|r| !quoted || r.on_quoted)
        .find(|r| r.pattern.is_match(text))
        .map(|r| r.name.to_owned())
}

/// The rule-set prefilter picks the same rule as trying the rules one by
/// one, on every line of the real corpus, quoted or not.
#[test]
fn the_rule_set_prefilter_agrees_with_rule_by_rule_matching() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let mut lines = 0;
    let mut matched = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for line in text.lines() {
            for quoted in [false, true] {
                let got = match_line(line, quoted).map(|(name, _)| name);
                let want = match_line_rule_by_rule(line, quoted);
                let got_rule = got.as_deref().map(|n| n.split(':').next().unwrap_or(n));
                assert_eq!(got_rule, want.as_deref(), "{}: {line:?}", path.display());
                lines += 1;
                matched += usize::from(want.is_some());
            }
        }
    }
    assert!(
        lines > 1000 && matched > 50,
        "{lines} lines, {matched} matched"
    );
}

proptest! {
    #[test]
    fn the_rule_set_prefilter_agrees_on_arbitrary_lines(
        line in "(error|warning|E[0-9]{3}|FAILED|not ok|panic|fmt|diff|[a-z ]{0,12}|[:./\\-]){0,12}",
        quoted in any::<bool>(),
    ) {
        let got = match_line(&line, quoted).map(|(name, _)| name);
        let got_rule = got.as_deref().map(|n| n.split(':').next().unwrap_or(n).to_owned());
        prop_assert_eq!(got_rule, match_line_rule_by_rule(&line, quoted));
    }
}
