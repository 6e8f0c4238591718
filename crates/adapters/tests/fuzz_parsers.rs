//! Fuzzing of every parser in `orchestrator-adapters`: the agent CLIs'
//! output (`agents::claude`, `codex`, `gemini`, and `ProcessAgent`'s text and
//! JSON dialects), the test-summary readers (`test_runner::summary`,
//! `test_runner::junit`), `config::Config::parse_str`, `AgentSpec::parse`
//! and `split_command`. Arbitrary text and mutations of the real fixtures
//! never panic, end within a time budget, and give a typed error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fuzz_support;

use std::path::Path;
use std::time::Duration;

use fuzz_support::{PARSE_BUDGET, bounded, cases, hostile_text, mutated_text};
use orchestrator_adapters::agents::{Dialect, ProcessAgent, RawOutput, claude, codex, gemini};
use orchestrator_adapters::config::{AgentSpec, Config, join_command, split_command};
use orchestrator_adapters::test_runner::{junit, summary};
use orchestrator_core::agent::{AgentError, AgentRequest, Role};
use proptest::prelude::*;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/procs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn example_config() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("orchestrator.example.toml"))
        .unwrap()
}

fn config(default_cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default_cases),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A CLI's output: a mutated fixture or arbitrary text, with an exit code.
fn raw_output(fixtures: &'static [&'static str]) -> impl Strategy<Value = RawOutput> {
    let stdout = prop_oneof![
        3 => proptest::sample::select(fixtures)
            .prop_flat_map(|name| mutated_text(&fixture(name), 6)),
        1 => hostile_text(48),
    ];
    let code = prop_oneof![
        Just(Some(0)),
        Just(Some(1)),
        Just(None),
        any::<i32>().prop_map(Some)
    ];
    (stdout, hostile_text(8), code).prop_map(|(stdout, stderr, code)| RawOutput {
        code,
        stdout,
        stderr,
    })
}

/// An error from an agent parser must say something (never an empty message).
fn check_agent_error(err: &AgentError) -> Result<(), TestCaseError> {
    prop_assert!(!err.to_string().trim().is_empty(), "empty error: {err:?}");
    Ok(())
}

const CLAUDE: &[&str] = &[
    "claude_success.json",
    "claude_schema.json",
    "claude_api_error.json",
    "claude_error_max_turns.json",
];
const CODEX: &[&str] = &[
    "codex_success.jsonl",
    "codex_schema.jsonl",
    "codex_turn_failed.jsonl",
];
const GEMINI: &[&str] = &[
    "gemini_success.json",
    "gemini_schema.json",
    "gemini_auth_error.json",
    "gemini_turn_limit.json",
];
const TEST_LOGS: &[&str] = &[
    "cargo_test_failed.txt",
    "cargo_test_passed.txt",
    "cargo_test_quiet_failed.txt",
    "go_test_failed.txt",
    "nextest_failed.txt",
    "node_spec_failed.txt",
    "node_tap_failed.txt",
    "node_tap_passed.txt",
    "pytest_failed.txt",
    "pytest_passed.txt",
];

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn claude_output_never_panics(raw in raw_output(CLAUDE)) {
        if let Err(e) = bounded(PARSE_BUDGET, "claude::parse", || claude::parse(&raw)) {
            check_agent_error(&e)?;
        }
    }

    #[test]
    fn codex_output_never_panics(raw in raw_output(CODEX), structured in any::<bool>()) {
        let workdir = Path::new("/work/repo");
        if let Err(e) = bounded(PARSE_BUDGET, "codex::parse", || codex::parse(&raw, workdir, structured)) {
            check_agent_error(&e)?;
        }
    }

    #[test]
    fn gemini_output_never_panics(raw in raw_output(GEMINI), structured in any::<bool>()) {
        if let Err(e) = bounded(PARSE_BUDGET, "gemini::parse", || gemini::parse(&raw, structured)) {
            check_agent_error(&e)?;
        }
        let _ = gemini::exit_code_error(raw.code.unwrap_or(0), &raw.stderr);
    }

    #[test]
    fn text_and_json_dialects_never_panic(
        raw in raw_output(&["claude_success.json", "gemini_schema.json"]),
        with_schema in any::<bool>(),
    ) {
        let mut request = AgentRequest::new("fuzz", Role::Fix, "do it", "/work/repo");
        if with_schema {
            request.schema = Some(serde_json::json!({"type": "object"}));
        }
        for dialect in [Dialect::Text, Dialect::Json] {
            let agent = ProcessAgent::new("fuzz", "fake", Vec::<String>::new()).dialect(dialect);
            match bounded(PARSE_BUDGET, "parse_output", || agent.parse_output(&request, &raw)) {
                Ok(response) => prop_assert_eq!(raw.code, Some(0), "a failed run answered {:?}", response),
                Err(e) => check_agent_error(&e)?,
            }
        }
    }

    #[test]
    fn test_summaries_never_panic(
        log in prop_oneof![
            3 => proptest::sample::select(TEST_LOGS).prop_flat_map(|name| mutated_text(&fixture(name), 6)),
            1 => hostile_text(64),
        ]
    ) {
        let found = bounded(PARSE_BUDGET, "summary::parse", || summary::parse(&log));
        for reader in [summary::cargo_test, summary::nextest, summary::pytest, summary::go_test, summary::node_test, summary::plain] {
            let _ = bounded(PARSE_BUDGET, "summary reader", || reader(&log));
        }
        if let Some(s) = found {
            let mut names = std::collections::HashSet::new();
            for name in &s.failing_tests {
                prop_assert!(!name.trim().is_empty());
                prop_assert!(names.insert(name), "failing test {name:?} listed twice");
            }
        }
    }

    #[test]
    fn junit_reports_never_panic(
        xml in prop_oneof![
            3 => mutated_text(&fixture("pytest_junit.xml"), 6),
            1 => hostile_text(64),
        ]
    ) {
        if let Err(e) = bounded(PARSE_BUDGET, "junit::parse", || junit::parse(&xml)) {
            prop_assert!(!e.to_string().trim().is_empty());
        }
    }

    #[test]
    fn config_files_never_panic(
        text in prop_oneof![
            3 => mutated_text(&example_config(), 6),
            1 => hostile_text(64),
        ]
    ) {
        if let Err(e) = bounded(PARSE_BUDGET, "Config::parse_str", || Config::parse_str(&text)) {
            let msg = e.to_string();
            prop_assert!(msg.contains("config"), "error without `config`: {msg} ({e:?})");
        }
    }

    #[test]
    fn command_lines_never_panic(line in hostile_text(32)) {
        if let Ok(words) = bounded(PARSE_BUDGET, "split_command", || split_command(&line)) {
            prop_assert!(!words.is_empty());
            prop_assert_eq!(split_command(&join_command(&words)), Ok(words));
        }
        if let Err(e) = bounded(PARSE_BUDGET, "AgentSpec::parse", || AgentSpec::parse(&line)) {
            prop_assert!(!e.to_string().trim().is_empty());
        }
    }

    #[test]
    fn any_words_round_trip_through_a_command_line(
        words in proptest::collection::vec(hostile_text(6), 1..6)
    ) {
        prop_assert_eq!(split_command(&join_command(&words)), Ok(words));
    }
}

/// Logs built to make a reader quadratic: they must still be read within
/// the budget.
#[test]
fn huge_test_logs_are_read_in_bounded_time() {
    let n = 100_000;
    let mut cargo = String::from("running 100000 tests\n");
    let mut pytest = String::new();
    let mut go = String::new();
    for i in 0..n {
        cargo.push_str(&format!("test tests::case_{i} ... FAILED\n"));
        pytest.push_str(&format!("FAILED tests/test_x.py::test_{i} - assert 0\n"));
        go.push_str(&format!("--- FAIL: TestCase{i} (0.00s)\n"));
    }
    cargo.push_str(&format!(
        "\ntest result: FAILED. 0 passed; {n} failed; 0 ignored; 0 measured; 0 filtered out\n"
    ));
    pytest.push_str(&format!("==== {n} failed in 1.00s ====\n"));
    go.push_str("FAIL\tmod/pkg\t0.1s\n");
    let budget = Duration::from_secs(5);
    for (name, log) in [("cargo", &cargo), ("pytest", &pytest), ("go", &go)] {
        let s = bounded(budget, &format!("summary::parse on {name}"), || {
            summary::parse(log)
        })
        .unwrap_or_else(|| panic!("{name} log not recognised"));
        assert_eq!(s.failing_tests.len(), n, "{name}");
    }
    let long_line = "x".repeat(8 << 20);
    bounded(budget, "summary::parse on an 8 MiB line", || {
        summary::parse(&long_line)
    });
    bounded(budget, "split_command on an 8 MiB line", || {
        split_command(&long_line)
    })
    .expect("one word");
}
